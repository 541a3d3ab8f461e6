"""``evidential-rag audit export|import``: the human audit of the judge (paper §4.5, Table 6).

A typer sub-app (``audit_app``, added to the main app by :mod:`inference.cli`); the logic is in
:mod:`inference.evaluation.audit`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from evidential.errors import EvidentialError
from inference.cli.options import console, fail

audit_app = typer.Typer(
    name="audit",
    help="Human audit of the judge: blind annotation sheets out (export), agreement and calibration in (import).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _f(x: float | None, signed: bool = False) -> str:
    return "–" if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")


@audit_app.command("export")
def audit_export_cmd(
    run_dir: Annotated[Path, typer.Option("--from", help="An `evidential-rag evaluate` output folder.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Audit folder: audit_items.jsonl, annotator_K.csv, GUIDELINES.md, manifest."
        ),
    ],
    n: Annotated[int, typer.Option("--n", help="Items to sample over all systems.", min=1)] = 60,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample and the item order.")] = 0,
    annotators: Annotated[int, typer.Option("--annotators", help="Blank sheets to write.", min=2)] = 2,
    systems: Annotated[
        str | None, typer.Option("--systems", help="Comma-separated systems (default: every system run).")
    ] = None,
) -> None:
    """Draw a seeded stratified sample (system × dataset × route × correctness) of the first seed's answers
    and write blind annotation sheets. Exit codes: 0 done, 2 a user error (not a run folder, unknown system,
    an audit folder whose sheets are already filled)."""
    from inference.evaluation.audit import export_audit
    from inference.evaluation.runner import parse_systems

    try:
        manifest = export_audit(
            run_dir,
            out,
            n=n,
            seed=seed,
            annotators=annotators,
            systems=parse_systems(systems) if systems else None,
        )
    except EvidentialError as exc:
        fail(str(exc))
    t = Table(title=f"audit sample: {manifest['n']} items, seed {seed}")
    for col in ("stratum", "population", "sample", "weight"):
        t.add_column(col, justify="left" if col == "stratum" else "right")
    for s in manifest["strata"]:
        t.add_row(s["key"], str(s["population"]), str(s["sample"]), _f(s["weight"]))
    console.print(t)
    console.print(
        f"sheets: {', '.join(str(out / s) for s in manifest['sheets'])}; guidelines: {out / 'GUIDELINES.md'}"
    )


@audit_app.command("import")
def audit_import_cmd(
    audit_dir: Annotated[Path, typer.Option("--from", help="The audit folder written by `audit export`.")],
    sheet: Annotated[
        list[Path] | None,
        typer.Option("--sheet", help="A filled annotator sheet (repeatable; default: the folder's sheets)."),
    ] = None,
) -> None:
    """Read the filled sheets and write audit_report.json and audit.md (Table 6): inter-annotator κ,
    judge–human agreement, calibration offsets and human-calibrated headline metrics. Exit codes: 0 done,
    2 a user error (a bad cell, unknown or missing item — the file, row and column are named)."""
    from inference.evaluation.audit import import_audit

    try:
        report = import_audit(audit_dir, sheets=sheet or None)
    except EvidentialError as exc:
        fail(str(exc))
    t = Table(title=f"human audit: {report['n']} items")
    for col in ("dimension", "κ (annotators)", "agreement", "judge–human acc", "judge–human κ"):
        t.add_column(col, justify="left" if col == "dimension" else "right")
    for d in report["dimensions"]:
        k, jh = report["kappa"][d], report["judge_human"][d]
        t.add_row(d, _f(k["kappa"]), _f(k["agreement"]), _f(jh["accuracy"]), _f(jh["kappa"]))
    console.print(t)
    h = Table(title="judge-only vs human-calibrated")
    for col in ("system", "metric", "judge-only", "offset", "calibrated"):
        h.add_column(col, justify="left" if col in ("system", "metric") else "right")
    for system, ms in report["headline"].items():
        for m, v in ms.items():
            h.add_row(system, m, _f(v["judge_only"]), _f(v["offset"], signed=True), _f(v["calibrated"]))
    console.print(h)
    for w in report["warnings"]:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    console.print(f"report: {audit_dir / 'audit.md'}")
