"""``evidential-rag train-prompt-evaluator``: TRL SFT (LoRA) of the prompt evaluator's LLM on its own contract.

The training recipe is :mod:`training.sft.recipe`; this command supplies what training may not import: the prompt
contract (:func:`sft_contract`) and the resolution of ``packaged:`` model names (:func:`resolve_sft_model`).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli import SetOpt, _fail, app, console

__all__ = ["resolve_sft_model", "sft_contract", "train_prompt_evaluator_cmd"]


def sft_contract():
    """The prompt evaluator's contract as :class:`training.sft.recipe.PromptContract` (prompt builder, gold reply)."""
    from inference.evaluators.contract import CONTRACT_VERSION, build_prompt, gold_output
    from training.sft.recipe import PromptContract

    return PromptContract(CONTRACT_VERSION, build_prompt, gold_output)


def resolve_sft_model(model: str, gguf_file: str | None = None):
    """``model`` (hub id, folder, .gguf file, ``packaged:<name>``) as a :class:`training.sft.recipe.ModelSource`,
    resolved the way the transformers backend resolves it (so the adapter fits the model it serves)."""
    from inference.backends.models import resolve_model
    from training.sft.recipe import ModelSource

    ref = resolve_model(model, gguf_file)
    return ModelSource(ref.path, ref.gguf_file)


@app.command("train-prompt-evaluator")
def train_prompt_evaluator_cmd(
    config: Annotated[
        str,
        typer.Option(
            "--config",
            "-c",
            help="SFT recipe: a YAML path or a name in configs/ (sft-smollm2, sft-llama3-8b).",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Output folder: adapter/ (peft LoRA adapter) and sft_card.json."),
    ],
    overrides: SetOpt = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
) -> None:
    """Fine-tune the prompt evaluator's LLM (TRL SFT + LoRA) on (contract prompt → gold JSON) pairs.

    Pairs come from annotated chunks (train split only), with the exact prompt the prompt evaluator sends;
    the loss is on the JSON reply only. Use the adapter with
    `--set evaluator.backend.lora_path=OUTPUT/adapter` (same base model). Exit codes: 0 done, 2 bad
    config/data/model/output.
    """
    from inference.backends.base import BackendError
    from training.data.annotated import TrainingDataError
    from training.sft.recipe import load_sft_config, train_prompt_evaluator

    try:
        cfg = load_sft_config(config, overrides or [])
        source = resolve_sft_model(cfg.model, cfg.gguf_file)
        command = "evidential-rag " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        card = train_prompt_evaluator(
            cfg, output, sft_contract(), model_source=source, command=command, progress=progress
        )
    except (EvidentialError, TrainingDataError, BackendError) as exc:
        _fail(str(exc))
        return
    console.print(
        f"trained: {card['steps']} steps on {card['data']['examples']} examples, "
        f"loss {card['loss_curve'][0]['loss'] if card['loss_curve'] else float('nan'):.4g} → "
        f"{card['final_loss'] if card['final_loss'] is not None else float('nan'):.4g}, "
        f"{card['train_seconds']:.1f}s → {output / 'adapter'} "
        f"(contract {card['contract_version']})",
        highlight=False,
    )
