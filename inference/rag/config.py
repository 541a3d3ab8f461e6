"""Settings of the baselines (Corrective RAG, Self-RAG): the ``baselines`` section of the run config.

They live apart from the systems so that :class:`inference.config.RunConfig` can hold them
(``--set baselines.corrective.upper=0.5``, ``baselines: {selfrag: {w_use: 1.0}}`` in YAML) without importing
any model code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evidential.errors import ConfigError
from evidential.registry import Registry

__all__ = ["RETRIEVAL_EVALUATORS", "BaselinesConfig", "CorrectiveConfig", "SelfRAGConfig"]

# name -> factory(config, *, evaluator=None, retriever=None) -> scorer with score(questions, chunk_lists)
RETRIEVAL_EVALUATORS: Registry[Any] = Registry("retrieval evaluator")

_MODES = ("prompted", "checkpoint")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_unit(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0.0 <= x <= 1.0


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
            "untrained)."
        },
    )
    upper: float = field(
        default=0.6,
        metadata={
            "help": "A question is 'correct' when some chunk scores above this (CRAG's upper threshold; set "
            "on the shipped learned checkpoint's scale, not calibrated)."
        },
    )
    lower: float = field(
        default=0.2,
        metadata={
            "help": "A question is 'incorrect' when every chunk scores below this; chunks above it are "
            "refined as internal knowledge (CRAG's lower threshold; < upper)."
        },
    )
    strip_threshold: float = field(
        default=0.05,
        metadata={
            "help": "Knowledge refinement keeps strips scoring at least this (in [0, 1]; strips are short, so "
            "the learned evaluator's belief mass for them is small: irrelevant strips score about 0-0.02 "
            "with the shipped checkpoint)."
        },
    )
    max_strips: int = field(
        default=6,
        metadata={"help": "Knowledge refinement keeps at most this many strips per question (>= 1)."},
    )
    strip_sentences: int = field(
        default=3,
        metadata={
            "help": "Most sentences per strip; a chunk's sentences are grouped evenly (3: strips of 2-3 "
            "sentences)."
        },
    )
    expand: int | None = field(
        default=None,
        metadata={
            "help": "Extra chunks fetched by the fallback of the incorrect/ambiguous actions (the index "
            "searches k + expand and keeps unseen chunks; at most this many of the caller's extra_chunks); "
            "null = k."
        },
    )

    def __post_init__(self) -> None:
        if self.retrieval_evaluator not in RETRIEVAL_EVALUATORS:
            raise ConfigError(
                f"baselines.corrective.retrieval_evaluator must be one of {', '.join(RETRIEVAL_EVALUATORS.names())}; "
                f"got {self.retrieval_evaluator!r}"
            )
        for name in ("upper", "lower", "strip_threshold"):
            value = getattr(self, name)
            if not _is_unit(value):
                raise ConfigError(f"baselines.corrective.{name} must be a number in [0, 1]; got {value!r}")
        if not self.lower < self.upper:
            raise ConfigError(
                f"baselines.corrective.lower must be below baselines.corrective.upper; got lower={self.lower!r}, "
                f"upper={self.upper!r}"
            )
        for name in ("max_strips", "strip_sentences"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ConfigError(f"baselines.corrective.{name} must be an integer >= 1; got {value!r}")
        if self.expand is not None and (not _is_int(self.expand) or self.expand < 1):
            raise ConfigError(
                f"baselines.corrective.expand must be an integer >= 1 or null (= k); got {self.expand!r}"
            )


@dataclass
class SelfRAGConfig:
    """Settings of the Self-RAG baseline (critique weights, retrieval decision, token budgets)."""

    mode: str = field(
        default="prompted",
        metadata={
            "help": "'prompted': prompted-reflection reimplementation on any instruction model (JSON "
            "critiques); 'checkpoint': the released selfrag_llama2 models, reflection tokens parsed from text."
        },
    )
    w_rel: float = field(
        default=1.0, metadata={"help": "Weight of ISREL (passage relevant: 1, else 0) in the segment score."}
    )
    w_sup: float = field(
        default=1.0,
        metadata={"help": "Weight of ISSUP (fully 1, partially 0.5, no support 0) in the segment score."},
    )
    w_use: float = field(
        default=0.5,
        metadata={"help": "Weight of ISUSE (utility 1..5 mapped to (u-1)/4 in [0, 1]) in the segment score."},
    )
    segment_max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Token budget of each per-passage answer segment; null = generator.generation.max_tokens."
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
            "help": "Token budget of each JSON reflection (retrieval decision and critique) in prompted mode."
        },
    )

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ConfigError(f"baselines.selfrag.mode must be one of {', '.join(_MODES)}; got {self.mode!r}")
        for name in ("w_rel", "w_sup", "w_use"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigError(f"baselines.selfrag.{name} must be a finite number >= 0; got {value!r}")
            setattr(self, name, float(value))
        if self.segment_max_tokens is not None and (
            isinstance(self.segment_max_tokens, bool)
            or not isinstance(self.segment_max_tokens, int)
            or self.segment_max_tokens < 1
        ):
            raise ConfigError(
                "baselines.selfrag.segment_max_tokens must be an integer >= 1 or null (= the generator's max_tokens); "
                f"got {self.segment_max_tokens!r}"
            )
        if not isinstance(self.retrieve_decision, bool):
            raise ConfigError(
                f"baselines.selfrag.retrieve_decision must be true or false; got {self.retrieve_decision!r}"
            )
        if (
            isinstance(self.critique_max_tokens, bool)
            or not isinstance(self.critique_max_tokens, int)
            or self.critique_max_tokens < 8
        ):
            raise ConfigError(
                "baselines.selfrag.critique_max_tokens must be an integer >= 8 (a JSON critique needs about 20 tokens); "
                f"got {self.critique_max_tokens!r}"
            )


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
