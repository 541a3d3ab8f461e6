"""What the prompt evaluator's SFT recipe (:mod:`training.sft.recipe`) needs from inference and may not import
itself: the prompt contract (:func:`sft_contract`) and the resolution of ``packaged:`` model names
(:func:`resolve_sft_model`)."""

from __future__ import annotations

from inference.backends.models import resolve_model
from inference.evaluators.contract import CONTRACT_VERSION, build_prompt, gold_output
from training.sft.recipe import ModelSource, PromptContract

__all__ = ["resolve_sft_model", "sft_contract"]


def sft_contract() -> PromptContract:
    """The prompt evaluator's contract as :class:`training.sft.recipe.PromptContract` (prompt builder, gold reply)."""
    return PromptContract(CONTRACT_VERSION, build_prompt, gold_output)


def resolve_sft_model(model: str, gguf_file: str | None = None) -> ModelSource:
    """``model`` (hub id, folder, .gguf file, ``packaged:<name>``) as a :class:`training.sft.recipe.ModelSource`,
    resolved the way the transformers backend resolves it (so the adapter fits the model it serves)."""
    ref = resolve_model(model, gguf_file)
    return ModelSource(ref.path, ref.gguf_file)
