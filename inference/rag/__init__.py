"""Baseline RAG systems on the same retriever, generator, context budget and generation length as
EvidentialRAG (the paper's matched comparison, §4.2), chosen by name through :data:`BASELINES`."""

from __future__ import annotations

from evidential.registry import Registry
from inference.rag.corrective import (
    CORRECTIVE_PROMPT_VERSION,
    RETRIEVAL_EVALUATORS,
    CorrectiveConfig,
    CorrectiveRAG,
)
from inference.rag.naive import NAIVE_PROMPT_VERSION, NaiveRAG, naive_prompt
from inference.rag.selfrag import SelfRAG, SelfRAGConfig

__all__ = [
    "BASELINES",
    "CORRECTIVE_PROMPT_VERSION",
    "CorrectiveConfig",
    "CorrectiveRAG",
    "NAIVE_PROMPT_VERSION",
    "NaiveRAG",
    "RETRIEVAL_EVALUATORS",
    "SelfRAG",
    "SelfRAGConfig",
    "naive_prompt",
]

# name -> class with ask_batch(questions, chunks=None) -> records
BASELINES: Registry = Registry("baseline")
BASELINES.register("naive")(NaiveRAG)
BASELINES.register("selfrag")(SelfRAG)
BASELINES.register("corrective")(CorrectiveRAG)
