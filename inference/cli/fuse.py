"""``evidential-rag fuse``: fuse given per-chunk evidence and show what fusion and routing make of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

import evidential
from evidential.errors import EvidentialError
from inference.cli.options import ConfigOpt, SetOpt, console, err, fail, load, parse_claims
from inference.workflows.fuse import fuse_evidence
from training.utils.io import loads_strict


def _read_evidence(text: str) -> list:
    where = "--evidence"
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        path = Path(text[1:])
        where = f"--evidence {text}"
        if not path.is_file():
            fail(f"{where}: file {path} not found")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            fail(f"{where}: not UTF-8 text (byte {exc.start + 1})")
    try:
        data = loads_strict(text)
    except json.JSONDecodeError as exc:
        fail(f"{where} is not valid JSON ({exc.msg} at column {exc.colno}); expected e.g. '[[3,0],[0,3]]'")
    except ValueError as exc:
        fail(f"{where} is not valid JSON ({exc}); expected e.g. '[[3,0],[0,3]]'")
    except RecursionError:
        fail(f"{where} is not valid JSON (nested too deeply); expected e.g. '[[3,0],[0,3]]'")
    if not isinstance(data, list) or not all(isinstance(row, list) for row in data):
        fail(
            "--evidence must be a JSON list of chunks, each a list of per-claim evidence, e.g. '[[3,0],[0,3]]'"
        )
    widths = {len(row) for row in data}
    if len(widths) > 1:
        fail(
            f"--evidence rows have different lengths {sorted(widths)}; every chunk needs one value per claim"
        )
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                fail(f"--evidence[{i}][{j}] = {v!r} is not a number")
    return data


def fuse_cmd(
    evidence: Annotated[
        str,
        typer.Option(
            "--evidence",
            "-e",
            help="JSON list of chunks (rank order), each a list of per-claim evidence; '@file' or '-' reads a file or stdin.",
        ),
    ],
    claims: Annotated[
        str | None, typer.Option(help="Claim names: JSON list or comma-separated (default a1, a2, ...).")
    ] = None,
    lam: Annotated[float | None, typer.Option("--lam", help="Conflict-transfer weight λ ∈ [0, 1].")] = None,
    rule: Annotated[
        str | None,
        typer.Option(help=f"Combination rule: {', '.join(evidential.fusion.fusion_rule_names())}."),
    ] = None,
    tau1: Annotated[float | None, typer.Option(help="Routing threshold τ1 (U < τ1 → direct).")] = None,
    tau2: Annotated[float | None, typer.Option(help="Routing threshold τ2 (U ≥ τ2 → abstain).")] = None,
    policy: Annotated[
        str | None, typer.Option(help=f"Routing policy: {', '.join(evidential.ROUTING_POLICIES.names())}.")
    ] = None,
    sanitize: Annotated[
        bool,
        typer.Option(
            "--sanitize", help="Map NaN/negative evidence to ignorance (with a warning) instead of failing."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Fuse given per-chunk evidence and show opinions, fused masses, U_global (ignorance + conflict), K̄ and the route."""
    extra = [
        f"fusion.{k}={v}"
        for k, v in (("lam", lam), ("rule", rule), ("tau1", tau1), ("tau2", tau2), ("policy", policy))
        if v is not None
    ]
    if sanitize:
        extra.append("fusion.sanitize=true")
    cfg = load(config, overrides, extra)
    fc = cfg.fusion
    data = _read_evidence(evidence)
    m = len(data[0]) if data else None
    names = parse_claims(claims, m)
    try:
        out, caught = fuse_evidence(data, names, fc)
    except EvidentialError as exc:
        fail(str(exc).replace("evidence[", "--evidence["))
    for message in caught:
        err.print(f"[yellow]warning:[/] {message.replace('evidence[', '--evidence[')}", highlight=False)
    if as_json:
        console.print_json(json.dumps(out))
        return
    t = Table(title="Per-chunk opinions (Eqs 2-6)")
    t.add_column("chunk", justify="right")
    for c in names:
        t.add_column(f"b({c})", justify="right")
    t.add_column("u (vacuity)", justify="right")
    for o in out["opinions"]:
        t.add_row(str(o["chunk"] + 1), *(f"{o['belief'][c]:.4f}" for c in names), f"{o['vacuity']:.4f}")
    console.print(t)
    f = Table(
        title=f"Fused ({fc.rule}{', λ=' + str(fc.lam) if fc.rule == 'lambda' else ''}; rank-order fold, Eq 12)"
    )
    f.add_column("mass")
    f.add_column("value", justify="right")
    for c in names:
        f.add_row(f"m({c})", f"{out['fused']['belief'][c]:.4f}")
    f.add_row("U_global = m(Θ)", f"{out['U_global']:.4f}")
    f.add_row("  ignorance part", f"{out['ignorance']:.4f}")
    f.add_row("  conflict part", f"{out['conflict']:.4f}")
    f.add_row("step K", ", ".join(f"{x:.4f}" for x in out["step_conflict"]) or "-")
    f.add_row("mean pairwise K̄ (diagnostic)", f"{out['mean_pairwise_conflict']:.4f}")
    f.add_row("confidence (Eq 27)", f"{out['confidence']:.4f}")
    f.add_row("selected claim", str(out["selected_claim"]))
    f.add_row("route", f"[bold]{out['route']}[/] ({fc.policy}: τ1={fc.tau1}, τ2={fc.tau2})")
    console.print(f)
