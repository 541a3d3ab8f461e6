"""``evidential-rag train``: train the learned evaluator."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli.options import SetOpt, command_line, console, fail


def train_cmd(
    config: Annotated[
        str,
        typer.Option(
            "--config", "-c", help="Training config: a YAML path or a name in configs/ (learned-minilm)."
        ),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Output folder: best/ (the model), last/ (resumable).")
    ],
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted run from OUTPUT/last.")
    ] = False,
    overrides: SetOpt = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
) -> None:
    """Train the learned evaluator (encoder + LoRA + evidential head) on annotated chunks.

    Each epoch ends with validation (loss, claim accuracy, ECE, route accuracy, RAMDocs strict EM,
    claim-extraction fidelity); the best model goes to OUTPUT/best with its model card. Exit codes: 0 done,
    2 bad config/data/output.
    """
    from training.data.annotated import TrainingDataError
    from training.trainer.config import load_train_config
    from training.trainer.trainer import EvidentialTrainer

    try:
        cfg = load_train_config(config, overrides or [])
        result = EvidentialTrainer(cfg, output, command=command_line(), progress=progress).train(
            resume=resume
        )
    except (EvidentialError, TrainingDataError) as exc:
        fail(str(exc))
        return
    keys = (
        "loss",
        "claim_accuracy",
        "ece",
        "route_accuracy",
        "strict_em_ramdocs",
        "span_fidelity",
        "train_seconds",
        "epochs_run",
    )
    console.print(
        "trained: "
        + ", ".join(f"{k} {result[k]:.4g}" for k in keys if k in result)
        + f" → {output / 'best'}",
        highlight=False,
    )
