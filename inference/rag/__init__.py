"""The RAG systems, all subclasses of :class:`~inference.rag.base.RAGSystem`, chosen by name through the one
registry :data:`SYSTEMS`: EvidentialRAG (``evidential``), its forced-evaluator variants and ablations
(``evidential-learned``, ``evidential-prompt``, ``evidential-no-fusion``, ``evidential-no-routing``,
``evidential-decomposed``) and the baselines on the same retriever, generator, context budget and
generation length (``naive``, ``corrective``, ``selfrag``; the paper's matched comparison, §4.2) and the
rule-only ``majority`` vote over the same evaluator's claims.
:data:`BASELINES` is the view of :data:`SYSTEMS` holding the baselines."""

from __future__ import annotations

from inference.rag.base import (
    SYSTEMS,
    RAGSystem,
    SharedModels,
    SystemView,
    build_systems,
    config_with_seed,
    seed_everything,
)
from inference.rag.corrective import (
    CORRECTIVE_PROMPT_VERSION,
    RETRIEVAL_EVALUATORS,
    CorrectiveConfig,
    CorrectiveRAG,
)
from inference.rag.evidential import (
    EvidentialDecomposed,
    EvidentialLearned,
    EvidentialNoFusion,
    EvidentialNoRouting,
    EvidentialPrompt,
    EvidentialRAG,
)
from inference.rag.majority import MajorityVoteRAG, majority_vote
from inference.rag.naive import NAIVE_PROMPT_VERSION, NaiveRAG, naive_prompt
from inference.rag.selfrag import SelfRAG, SelfRAGConfig

__all__ = [
    "BASELINES",
    "CORRECTIVE_PROMPT_VERSION",
    "CorrectiveConfig",
    "CorrectiveRAG",
    "EvidentialDecomposed",
    "EvidentialLearned",
    "EvidentialNoFusion",
    "EvidentialNoRouting",
    "EvidentialPrompt",
    "EvidentialRAG",
    "MajorityVoteRAG",
    "NAIVE_PROMPT_VERSION",
    "NaiveRAG",
    "RAGSystem",
    "RETRIEVAL_EVALUATORS",
    "SYSTEMS",
    "SelfRAG",
    "SelfRAGConfig",
    "SharedModels",
    "SystemView",
    "build_systems",
    "config_with_seed",
    "majority_vote",
    "naive_prompt",
    "seed_everything",
]

# the baselines EvidentialRAG is compared with: a view of the one registry
BASELINES = SystemView("baseline", ("naive", "selfrag", "corrective", "majority"))

for _system in (
    EvidentialRAG,
    EvidentialLearned,
    EvidentialPrompt,
    EvidentialNoFusion,
    EvidentialNoRouting,
    EvidentialDecomposed,
    NaiveRAG,
    CorrectiveRAG,
    SelfRAG,
    MajorityVoteRAG,
):
    SYSTEMS.register(_system.name)(_system)
del _system
