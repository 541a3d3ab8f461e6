"""Settings of the baselines (Corrective RAG, Self-RAG): the ``baselines`` section of the run config.

They live apart from the systems so that :class:`inference.config.RunConfig` can hold them
(``--set baselines.corrective.upper=0.5``, ``baselines: {selfrag: {w_use: 1.0}}`` in YAML) without importing
any model code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evidential.errors import ConfigError
from evidential.registry import Registry
from training.utils.configio import check_fields

__all__ = ["RETRIEVAL_EVALUATORS", "BaselinesConfig", "CorrectiveConfig", "SelfRAGConfig"]

# name -> factory(config, *, evaluator=None, retriever=None) -> scorer with score(questions, chunk_lists)
RETRIEVAL_EVALUATORS: Registry[Any] = Registry("retrieval evaluator")

_MODES = ("prompted", "checkpoint")
_UNIT = {"range": (0.0, 1.0), "must": "be a number in [0, 1]"}
_WEIGHT = {"range": (0.0, None), "must": "be a finite number >= 0"}


@dataclass
class CorrectiveConfig:
    """Settings of Corrective RAG (CRAG) beyond the run config (which gives ``k``, the generator, retrieval).

    Raises:
        ConfigError: A value outside its documented domain, naming the field (``corrective.<field>``).
    """

    retrieval_evaluator: str = field(
        default="learned",
        metadata={
            "help": "Scorer of (question, chunk) relevance in [0, 1] (RETRIEVAL_EVALUATORS): 'learned' (the "
            "learned evaluator's belief mass 1 - vacuity) or 'embedding' (cosine of the retrieval embedder, "
            "untrained).",
            "choices": RETRIEVAL_EVALUATORS,
        },
    )
    upper: float = field(
        default=0.6,
        metadata={
            "help": "A question is 'correct' when some chunk scores above this (CRAG's upper threshold; set "
            "on the shipped learned checkpoint's scale, not calibrated).",
            **_UNIT,
        },
    )
    lower: float = field(
        default=0.2,
        metadata={
            "help": "A question is 'incorrect' when every chunk scores below this; chunks above it are "
            "refined as internal knowledge (CRAG's lower threshold; < upper).",
            **_UNIT,
        },
    )
    strip_threshold: float = field(
        default=0.05,
        metadata={
            "help": "Knowledge refinement keeps strips scoring at least this (in [0, 1]; strips are short, so "
            "the learned evaluator's belief mass for them is small: irrelevant strips score about 0-0.02 "
            "with the shipped checkpoint).",
            **_UNIT,
        },
    )
    max_strips: int = field(
        default=6,
        metadata={
            "help": "Knowledge refinement keeps at most this many strips per question (>= 1).",
            "range": (1, None),
        },
    )
    strip_sentences: int = field(
        default=3,
        metadata={
            "help": "Most sentences per strip; a chunk's sentences are grouped evenly (3: strips of 2-3 "
            "sentences).",
            "range": (1, None),
        },
    )
    expand: int | None = field(
        default=None,
        metadata={
            "help": "Extra chunks fetched by the fallback of the incorrect/ambiguous actions (the index "
            "searches k + expand and keeps unseen chunks; at most this many of the caller's extra_chunks); "
            "null = k.",
            "range": (1, None),
            "null": "= k",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "baselines.corrective")
        if not self.lower < self.upper:
            raise ConfigError(
                f"baselines.corrective.lower must be below baselines.corrective.upper; got lower={self.lower!r}, "
                f"upper={self.upper!r}"
            )


@dataclass
class SelfRAGConfig:
    """Settings of the Self-RAG baseline (critique weights, retrieval decision, token budgets)."""

    mode: str = field(
        default="prompted",
        metadata={
            "help": "'prompted': prompted-reflection reimplementation on any instruction model (JSON "
            "critiques); 'checkpoint': the released selfrag_llama2 models, reflection tokens parsed from text.",
            "choices": _MODES,
        },
    )
    w_rel: float = field(
        default=1.0,
        metadata={"help": "Weight of ISREL (passage relevant: 1, else 0) in the segment score.", **_WEIGHT},
    )
    w_sup: float = field(
        default=1.0,
        metadata={
            "help": "Weight of ISSUP (fully 1, partially 0.5, no support 0) in the segment score.",
            **_WEIGHT,
        },
    )
    w_use: float = field(
        default=0.5,
        metadata={
            "help": "Weight of ISUSE (utility 1..5 mapped to (u-1)/4 in [0, 1]) in the segment score.",
            **_WEIGHT,
        },
    )
    segment_max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Token budget of each per-passage answer segment; null = generator.generation.max_tokens.",
            "range": (1, None),
            "null": "= the generator's max_tokens",
        },
    )
    retrieve_decision: bool = field(
        default=True,
        metadata={
            "help": "Ask first whether retrieval is needed (Self-RAG's [Retrieve] token); a question judged "
            "not to need it is answered without passages. false = always retrieve."
        },
    )
    critique_max_tokens: int = field(
        default=64,
        metadata={
            "help": "Token budget of each JSON reflection (retrieval decision and critique) in prompted mode.",
            "range": (8, None),
            "note": "a JSON critique needs about 20 tokens",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "baselines.selfrag")


@dataclass
class BaselinesConfig:
    """The baselines' own settings (Naive RAG has none beyond the run config's generator and ``k``)."""

    corrective: CorrectiveConfig = field(
        default_factory=CorrectiveConfig,
        metadata={
            "help": "Corrective RAG: retrieval evaluator, thresholds, knowledge refinement, expansion."
        },
    )
    selfrag: SelfRAGConfig = field(
        default_factory=SelfRAGConfig,
        metadata={"help": "Self-RAG: prompted or checkpoint mode, critique weights, token budgets."},
    )
