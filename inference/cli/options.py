"""What the ``evidential-rag`` commands share: option types, the consoles, :func:`fail`, config loading,
``--calibration``, claim-name parsing, building the pipeline and printing an answer record.

Command modules import this module and library code only, never the package ``inference.cli``.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from evidential.errors import EvidentialError
from inference.config import RunConfig, load_config

__all__ = [
    "CalibrationOpt",
    "ConfigOpt",
    "EvaluatorOpt",
    "IndexOpt",
    "SetOpt",
    "build_pipeline",
    "command_line",
    "console",
    "err",
    "fail",
    "load",
    "parse_claims",
    "print_record",
    "with_calibration",
    "NoCalibrationOpt",
]

console = Console(width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[
    str | None, typer.Option("--config", "-c", help="YAML config path or a named config (cpu, paper).")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="KEY=VALUE", help="Override a config field, e.g. --set fusion.lam=0.5 (repeatable)."
    ),
]
IndexOpt = Annotated[
    Path | None,
    typer.Option("--index", help="Index folder built by `evidential-rag index` (retrieve the chunks)."),
]
EvaluatorOpt = Annotated[
    str | None, typer.Option("--evaluator", help="Evaluator: learned (default on CPU) or prompt.")
]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="Calibration file from `evidential-rag calibrate` (evidence scale, λ, τ1/τ2, isotonic confidence); "
        "refused when fitted for another evaluator or checkpoint.",
    ),
]


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``error: msg`` on stderr and exit with ``code`` (2: a user error)."""
    err.print(f"[bold red]error:[/] {msg}", highlight=False)
    raise typer.Exit(code)


def load(config: str | None, overrides: list[str] | None, extra: list[str]) -> RunConfig:
    """The run config of ``--config`` with the ``--set`` overrides, then ``extra`` (explicit flags) applied."""
    try:
        return load_config(config, [*(overrides or []), *extra])
    except EvidentialError as exc:
        fail(str(exc))


NoCalibrationOpt = Annotated[
    bool,
    typer.Option(
        "--no-calibration",
        help="Run on raw evidence with the config's fusion values (no calibration file, not even the "
        "checkpoint's own: `calibration: auto`).",
    ),
]


def with_calibration(cfg: RunConfig, calibration: Path | None, no_calibration: bool = False) -> RunConfig:
    """``--calibration FILE`` sets the run config's ``calibration`` field (the pipeline loads and checks it);
    ``--no-calibration`` sets it to null."""
    if calibration is not None and no_calibration:
        fail("--calibration and --no-calibration exclude each other")
    if no_calibration:
        return replace(cfg, calibration=None)
    if calibration is None:
        return cfg
    return replace(cfg, calibration=str(calibration))


def command_line() -> str:
    """The command being run, as ``evidential-rag ARGS`` (recorded in the files a command writes)."""
    return "evidential-rag " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def parse_claims(claims: str | None, m: int | None) -> list[str]:
    """Claim names from a JSON list or comma-separated names; ``a1, a2, ...`` for ``m`` claims if None."""
    if claims is None:
        return [f"a{j + 1}" for j in range(m or 0)]
    text = claims.strip()
    names = json.loads(text) if text.startswith("[") else [c.strip() for c in text.split(",")] if text else []
    if not isinstance(names, list) or not all(isinstance(c, str) for c in names):
        fail("--claims must be a JSON list of strings or comma-separated names")
    if m is not None and len(names) != m:
        fail(f"--claims names {len(names)} claim(s) but the evidence rows have {m} value(s)")
    return names


def build_pipeline(cfg: RunConfig, index: Path | None):
    """The :class:`inference.rag.evidential.EvidentialRAG` of ``cfg``; a load error exits with code 2."""
    from inference.rag.evidential import EvidentialRAG

    try:
        return EvidentialRAG(cfg, index)
    except EvidentialError as exc:
        fail(str(exc))
    except RuntimeError as exc:  # backend errors carry what to fix
        fail(f"{type(exc).__name__}: {exc}")


def print_record(record: dict, question: str) -> None:
    """An answer record as a table of chunks, the fused claim masses, U_global, the route and the answer."""
    t = Table(title=f"Q: {question}")
    t.add_column("chunk")
    t.add_column("stance")
    t.add_column("claim")
    t.add_column("evidence", justify="right")
    t.add_column("output")
    for c in record["chunks"]:
        status = "valid" if c["valid"] else "repaired" if c["repaired"] else "failed"
        t.add_row(
            c["chunk_id"],
            c["stance"],
            escape(str(c["claim"])),
            ", ".join(f"{v:g}" for v in c["evidence"].values()) or "0",
            status,
        )
    console.print(t)
    for c in record["claims"]:
        console.print(
            f"  m({escape(c['text'])}) = {c['mass']:.3f}  {escape('[' + ', '.join(c['chunk_ids']) + ']')}",
            highlight=False,
        )
    console.print(
        f"U_global = {record['uncertainty']:.3f} (ignorance {record['ignorance']:.3f} + conflict {record['conflict']:.3f}); "
        f"K̄ = {record['mean_pairwise_conflict']:.3f}; route: [bold]{record['route']}[/]",
        highlight=False,
    )
    console.print(f"[bold]answer:[/] {escape(record['response'])}", highlight=False)
    reranker = (record.get("retrieval") or {}).get("reranker")
    console.print(
        f"{record['logical_decisions']} logical decisions, {record['batched_passes']} batched pass(es); "
        f"reranker: {reranker or 'none (reranking off)'}; "
        + ", ".join(f"{k} {v:.2f}s" for k, v in record["timings"].items()),
        highlight=False,
    )
