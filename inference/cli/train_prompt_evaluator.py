"""``evidential-rag train-prompt-evaluator``: TRL SFT (LoRA) of the prompt evaluator's LLM on its own contract.

The training recipe is :mod:`training.sft.recipe`; what it may not import itself (the prompt contract and the
resolution of ``packaged:`` model names) comes from :mod:`inference.workflows.sft`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli.options import SetOpt, command_line, console, fail

__all__ = ["train_prompt_evaluator_cmd"]


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
    from inference.workflows.sft import resolve_sft_model, sft_contract
    from training.data.annotated import TrainingDataError
    from training.sft.recipe import load_sft_config, train_prompt_evaluator

    try:
        cfg = load_sft_config(config, overrides or [])
        source = resolve_sft_model(cfg.model, cfg.gguf_file)
        card = train_prompt_evaluator(
            cfg, output, sft_contract(), model_source=source, command=command_line(), progress=progress
        )
    except (EvidentialError, TrainingDataError, BackendError) as exc:
        fail(str(exc))
        return
    console.print(
        f"trained: {card['steps']} steps on {card['data']['examples']} examples, "
        f"loss {card['loss_curve'][0]['loss'] if card['loss_curve'] else float('nan'):.4g} → "
        f"{card['final_loss'] if card['final_loss'] is not None else float('nan'):.4g}, "
        f"{card['train_seconds']:.1f}s → {output / 'adapter'} "
        f"(contract {card['contract_version']})",
        highlight=False,
    )
