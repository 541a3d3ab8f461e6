"""The ``evidential-rag`` command line (typer).

This package builds the typer ``app`` (the root callback: ``--version`` and quieting third-party libraries)
and registers each command from its own module: ``fuse``, ``demo``, ``ask``, ``batch``, ``index``, ``audit``
(export/import), ``calibrate``, ``distill``, ``evaluate``, ``serve``, ``train-prompt-evaluator``, ``sweep``,
``train``. Shared options live in :mod:`inference.cli.options`. Every command takes ``--config`` (a YAML path
or a named config: ``cpu``, ``paper``) and repeatable ``--set key=value`` overrides; explicit flags override
both.
"""

from __future__ import annotations

import os
import warnings
from typing import Annotated

import typer

import evidential
from inference.cli import (
    ask,
    audit,
    batch,
    calibrate,
    demo,
    distill,
    evaluate,
    fuse,
    index,
    serve,
    sweep,
    train,
    train_prompt_evaluator,
)
from inference.cli.options import console

__all__ = ["app"]

app = typer.Typer(
    name="evidential-rag",
    help="EvidentialRAG: conflict-aware RAG with evidential opinions and conflict-preserving fusion.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        console.print(f"evidential-rag {evidential.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """EvidentialRAG command line."""
    _quiet_libraries()


# third-party packages whose deprecation notices and weight-loading bars say nothing to a user of the CLI
_QUIET_MODULES = (
    r"(transformers|peft|trl|accelerate|torch|sentence_transformers|datasets|huggingface_hub)(\.|$)"
)


def _quiet_libraries() -> None:
    """Silence what libraries print that a CLI user cannot act on: their Future/DeprecationWarnings and
    Hugging Face's "Loading weights" bars (``HF_HUB_DISABLE_PROGRESS_BARS=0`` brings the bars back).
    Warnings raised by this project's own code still show."""
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=_QUIET_MODULES)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


app.command("fuse")(fuse.fuse_cmd)
app.command("demo")(demo.demo_cmd)
app.command("ask")(ask.ask_cmd)
app.command("batch")(batch.batch_cmd)
app.command("index")(index.index_cmd)
app.add_typer(audit.audit_app, name="audit")
app.command("calibrate")(calibrate.calibrate_cmd)
app.command("distill")(distill.distill_cmd)
app.command("evaluate")(evaluate.evaluate_cmd)
app.command("serve")(serve.serve_cmd)
app.command("train-prompt-evaluator")(train_prompt_evaluator.train_prompt_evaluator_cmd)
app.command("sweep")(sweep.sweep_cmd)
app.command("train")(train.train_cmd)
