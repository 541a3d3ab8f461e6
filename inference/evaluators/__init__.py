"""Evaluators behind one interface (:mod:`.base`), chosen by name through :data:`EVALUATORS`."""

from __future__ import annotations

from inference.alignment import ClaimAligner, minilm_similarity
from inference.backends import load_backend
from inference.evaluators.base import EVALUATORS, EvaluationResult, Evaluator, FrameClaim, build_frame
from inference.evaluators.contract import (
    CONTRACT_VERSION,
    OUTPUT_SCHEMA,
    build_prompt,
    check_adapter_contract,
)
from inference.evaluators.learned import LearnedEvaluator
from inference.evaluators.parsing import ParsedDecision, parse_decision
from inference.evaluators.prompt import PromptEvaluator

__all__ = [
    "CONTRACT_VERSION",
    "EVALUATORS",
    "OUTPUT_SCHEMA",
    "EvaluationResult",
    "Evaluator",
    "FrameClaim",
    "LearnedEvaluator",
    "ParsedDecision",
    "PromptEvaluator",
    "build_evaluator",
    "build_frame",
    "build_prompt",
    "make_aligner",
    "parse_decision",
]


def make_aligner(cfg) -> ClaimAligner:
    """The claim aligner an :class:`~inference.evaluators.config.EvaluatorConfig` asks for."""
    similarity = minilm_similarity() if cfg.similarity == "minilm" else None
    return ClaimAligner(
        number_tolerance=cfg.number_tolerance,
        similarity=similarity,
        similarity_threshold=cfg.similarity_threshold,
        aliases=dict(cfg.aliases),
        merge_subspans=cfg.merge_subspans,
        merge_units=cfg.merge_units,
    )


@EVALUATORS.register("prompt")
def prompt_evaluator(cfg, backend=None) -> PromptEvaluator:
    """Build the prompt evaluator from an ``EvaluatorConfig`` (loads the backend's model unless an
    already-loaded ``backend`` of the same section is given; with ``scoring: logprobs`` and
    ``logprob_claims: spans`` also the learned checkpoint, whose span head gives the claims). A LoRA adapter
    fine-tuned on another contract version is refused."""
    check_adapter_contract(cfg.backend.lora_path)
    spans = None
    if cfg.scoring == "logprobs" and cfg.logprob_claims == "spans":
        spans = learned_evaluator(cfg).extract_claims
    return PromptEvaluator(
        backend if backend is not None else load_backend(cfg.backend),
        cfg.generation,
        constrained=cfg.constrained,
        aligner=make_aligner(cfg),
        max_chunk_chars=cfg.max_chunk_chars,
        grounding=cfg.grounding,
        scoring=cfg.scoring,
        logprob_scale=cfg.logprob_scale,
        logprob_floor=cfg.logprob_floor,
        claims_max_tokens=cfg.claims_max_tokens,
        max_claims=cfg.max_claims,
        logprob_debias=cfg.logprob_debias,
        claim_extractor=spans,
    )


@EVALUATORS.register("learned")
def learned_evaluator(cfg) -> LearnedEvaluator:
    """Build the learned evaluator from an ``EvaluatorConfig`` (loads the checkpoint, LoRA merged)."""
    import torch

    from training.learned.checkpoint import load_learned_model, resolve_checkpoint

    device = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    ckpt = resolve_checkpoint(cfg.resolved_checkpoint())
    return LearnedEvaluator(
        load_learned_model(ckpt, device=device, merge=True),
        aligner=make_aligner(cfg),
        support_threshold=cfg.support_threshold,
        max_chunk_chars=cfg.max_chunk_chars,
        checkpoint=ckpt,
        span_repair=cfg.span_repair,
        span_null_margin=cfg.span_null_margin,
        span_fallback_margin=cfg.span_fallback_margin,
        grounding=cfg.grounding,
        span_candidates=cfg.span_candidates,
        span_candidate_margin=cfg.span_candidate_margin,
    )


def build_evaluator(cfg, **components) -> Evaluator:
    """The evaluator named by ``cfg.name`` (``components``: already-loaded parts it accepts, e.g. the
    prompt evaluator's ``backend``)."""
    return EVALUATORS.get(cfg.name)(cfg, **components)
