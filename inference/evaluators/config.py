"""Configuration of the evaluators (the ``evaluator`` section of a run config).

The section is flat (``--set evaluator.checkpoint=...``), but its fields come in groups that say which
evaluator reads them: :class:`PromptEvaluatorFields` (``name: prompt``), :class:`ClaimAlignmentFields` (both)
and :class:`LearnedEvaluatorFields` (``name: learned``). :class:`EvaluatorConfig` combines them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar

from inference.backends.base import BackendConfig, GenerationConfig
from inference.evaluators.base import EVALUATORS
from inference.evaluators.contract import SCORING_MODES
from inference.evaluators.grounding import GROUNDING_MODES
from training.utils.configio import check_fields, is_device_spec

__all__ = [
    "ClaimAlignmentFields",
    "EvaluatorConfig",
    "EvaluatorSelection",
    "LearnedEvaluatorFields",
    "PromptEvaluatorFields",
]


@dataclass
class EvaluatorSelection:
    """Which evaluator runs."""

    name: str = field(
        default="learned",
        metadata={
            "help": "Evaluator: 'prompt' (instruction LLM + JSON contract) or 'learned' (LoRA-tuned evidential head).",
            "choices": EVALUATORS,
        },
    )


@dataclass
class PromptEvaluatorFields:
    """Fields of the prompt evaluator (``evaluator.name: prompt``); the learned evaluator ignores them."""

    # the fields of the logprobs scoring mode (calibration cache tags leave them out at their defaults)
    LOGPROB_FIELDS: ClassVar[tuple[str, ...]] = (
        "scoring",
        "logprob_scale",
        "logprob_floor",
        "logprob_debias",
        "logprob_claims",
        "claims_max_tokens",
        "max_claims",
    )

    backend: BackendConfig = field(
        default_factory=BackendConfig, metadata={"help": "Model backend of the prompt evaluator."}
    )
    generation: GenerationConfig = field(
        default_factory=lambda: GenerationConfig(max_tokens=128),
        metadata={
            "help": "Decoding settings of the prompt evaluator (greedy; the JSON schema is added when constrained)."
        },
    )
    constrained: bool = field(
        default=True, metadata={"help": "Use JSON-schema-constrained decoding where the backend offers it."}
    )
    max_chunk_chars: int = field(
        default=4000,
        metadata={"help": "Chunks are cut to this many characters in the prompt.", "range": (100, None)},
    )
    scoring: str = field(
        default="json",
        metadata={
            "help": "Prompt evaluator scoring: 'json' (decode the contract's JSON object per chunk) or 'logprobs' (one prefill per chunk over lettered claim options; evidence from the letters' next-token probabilities, inference.evaluators.logprob). A server without log-probabilities falls back to json with a warning.",
            "choices": SCORING_MODES,
            "must": "be 'json' or 'logprobs'",
        },
    )
    logprob_scale: float = field(
        default=10.0,
        metadata={
            "help": "logprobs scoring: evidence of a claim option that gets all the probability (e = scale * p).",
            "range": (0.0, None),
            "ends": "(]",
        },
    )
    logprob_floor: float = field(
        default=0.1,
        metadata={
            "help": "logprobs scoring: option probabilities below this give no evidence.",
            "range": (0.0, 1.0),
            "ends": "[)",
        },
    )
    logprob_debias: bool = field(
        default=True,
        metadata={
            "help": "logprobs scoring: divide each query's option probabilities by those after a content-free chunk (one more prefill per query; contextual calibration, Zhao et al. 2021): a preference for a letter or position is no evidence."
        },
    )
    logprob_claims: str = field(
        default="generate",
        metadata={
            "help": "logprobs scoring: where the claims of a question without candidates come from: 'generate' (one short claim-listing generation per query by the same model) or 'spans' (the span head of the learned checkpoint in evaluator.checkpoint, one encoder pass).",
            "choices": ("generate", "spans"),
            "must": "be 'generate' or 'spans'",
        },
    )
    claims_max_tokens: int = field(
        default=48,
        metadata={
            "help": "logprobs scoring: new tokens of the one claim-listing generation per query without candidates.",
            "range": (1, None),
        },
    )
    max_claims: int = field(
        default=8,
        metadata={
            "help": "logprobs scoring: claims kept from that list (the options A.. of the scoring prompt).",
            "range": (1, 25),
        },
    )


@dataclass
class ClaimAlignmentFields:
    """Fields of the claim alignment that both evaluators use."""

    similarity: str = field(
        default="none",
        metadata={
            "help": "Paraphrase merging in claim alignment: 'none' (rules only) or 'minilm' (packaged all-MiniLM-L6-v2).",
            "choices": ("none", "minilm"),
            "must": "be 'none' or 'minilm'",
        },
    )
    similarity_threshold: float = field(
        default=0.92,
        metadata={
            "help": "Cosine similarity above which paraphrases merge (conservative).",
            "range": (0.0, 1.0),
            "ends": "(]",
        },
    )
    number_tolerance: float = field(
        default=0.0,
        metadata={
            "help": "Relative tolerance under which two numbers are the same claim.",
            "range": (0.0, 1.0),
            "ends": "[)",
        },
    )
    merge_subspans: bool = field(
        default=True,
        metadata={
            "help": "Merge a claim that is a contiguous part of exactly one longer claim into it ('Obama' into 'Barack Obama'); never across numbers, months, negation or qualifiers."
        },
    )
    merge_units: bool = field(
        default=True,
        metadata={
            "help": "Merge a number without a unit into the one claim with the same value and a unit ('11,012' into '11,012 people'); not when two units carry that value ('5 km', '5 miles')."
        },
    )
    grounding: str = field(
        default="lenient",
        metadata={
            "help": "Grounded evidence: a chunk's evidence for a claim it does not state is dropped and flagged (inference.evaluators.grounding). 'strict': a form of the claim occurs in the chunk (yes/no: the chunk names a content word of the question); 'lenient': also every word of a form, in any order (yes/no always kept); 'off'.",
            "choices": GROUNDING_MODES,
            "must": "be 'strict', 'lenient' or 'off'",
        },
    )
    aliases: dict[str, str] = field(
        default_factory=dict,
        metadata={
            "help": "User alias table for claim alignment: alias -> canonical answer (matched case- and punctuation-insensitively, before the built-in table), e.g. {NY: New York}.",
            "check": lambda x: (
                isinstance(x, dict)
                and all(
                    isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip()
                    for k, v in x.items()
                )
            ),
            "must": "be a mapping of non-empty alias strings to non-empty answer strings",
            "allow_empty": True,
        },
    )


@dataclass
class LearnedEvaluatorFields:
    """Fields of the learned evaluator (``evaluator.name: learned``); the prompt evaluator ignores them."""

    checkpoint: str = field(
        default="checkpoints/learned-minilm",
        metadata={
            "help": "Learned evaluator checkpoint folder (relative paths: from the working directory, then the repository). Default: the shipped CPU checkpoint.",
            "must": "be a folder path",
        },
    )
    support_threshold: float = field(
        default=1.0,
        metadata={
            "help": "Learned evaluator: evidence at which a chunk counts as supporting its top claim.",
            "range": (0.0, None),
        },
    )
    span_repair: bool = field(
        default=True,
        metadata={
            "help": "Learned evaluator: move extracted spans' edges to whole words, names and dates (training.utils.spans.repair_span)."
        },
    )
    span_null_margin: float = field(
        default=0.0,
        metadata={
            "help": "Learned evaluator: a chunk's best span is extracted when its score beats the span head's no-answer score by more than this (SQuAD 2's null threshold; lower extracts from more chunks, whose evidence the evidential head still decides). A calibration applies only to the value it was fitted with (docs/calibration.md).",
            "check": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x),
            "must": "be a finite number",
        },
    )
    span_fallback_margin: float | None = field(
        default=-3.0,
        metadata={
            "help": "Learned evaluator: when no chunk of a query beats span_null_margin (the frame would be empty and the answer an abstention whatever the chunks say), each chunk's best span is extracted again at this lower margin, in one more encoder pass over that query's chunks only; the evidential head, grounding and U then decide as for any frame. Used only when below span_null_margin; null: off (an empty frame abstains).",
            "check": lambda x: (
                x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x))
            ),
            "must": "be null or a finite number",
        },
    )
    span_candidates: int = field(
        default=1,
        metadata={
            "help": "Learned evaluator: spans per chunk proposed to the frame — the best one plus up to n-1 non-overlapping next-best spans within span_candidate_margin of it; the evidential head weighs them all (1: the best span only).",
            "range": (1, 5),
        },
    )
    span_candidate_margin: float = field(
        default=2.0,
        metadata={
            "help": "Learned evaluator: how far (start + end logits) below a chunk's best span an alternate span may score.",
            "range": (0.0, None),
        },
    )
    device: str = field(
        default="cpu",
        metadata={
            "help": "Learned evaluator device: 'cpu', 'cuda[:n]' or 'auto'.",
            "check": is_device_spec,
            "must": "be 'cpu', 'cuda[:n]' or 'auto'",
        },
    )

    def resolved_checkpoint(self) -> Path:
        """The checkpoint folder: as given, or relative to the repository when not found from here."""
        p = Path(self.checkpoint)
        if p.is_absolute() or p.exists():
            return p
        repo = Path(__file__).resolve().parents[2] / p
        return repo if repo.exists() else p


# Field order (name, prompt, alignment, learned) is the YAML / ``to_dict`` order: dataclasses collect the
# fields of the bases in reverse MRO order.
@dataclass
class EvaluatorConfig(
    LearnedEvaluatorFields, ClaimAlignmentFields, PromptEvaluatorFields, EvaluatorSelection
):
    """Which evaluator turns (query, chunk) pairs into evidence, and with which model."""

    # evaluator name -> the field group only that evaluator reads
    GROUPS: ClassVar[dict[str, type]] = {"prompt": PromptEvaluatorFields, "learned": LearnedEvaluatorFields}

    @classmethod
    def fields_for(cls, name: str) -> tuple[str, ...]:
        """The fields evaluator ``name`` reads: its own group plus the claim alignment (``name`` excluded)."""
        group = cls.GROUPS.get(name)
        own = tuple(f.name for f in fields(group)) if group is not None else ()
        return own + tuple(f.name for f in fields(ClaimAlignmentFields))

    def __post_init__(self) -> None:
        if isinstance(self.grounding, bool):  # YAML 1.1 reads a bare `off` as false (and `on` as true)
            self.grounding = "lenient" if self.grounding else "off"
        check_fields(self, "evaluator")
