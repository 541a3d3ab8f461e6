"""``evidential-rag sweep``: re-fuse the cached evaluator outputs of an evaluation run (no model call)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli.options import console, fail


def sweep_cmd(
    source: Annotated[
        Path, typer.Option("--from", help="The --out folder of an `evidential-rag evaluate` run.")
    ],
    lam: Annotated[
        str | None,
        typer.Option("--lam", help="λ values for Table 9, comma-separated (default 0,0.2,0.4,0.6,0.8,1)."),
    ] = None,
    tau: Annotated[
        str | None,
        typer.Option(
            "--tau",
            help="TAU1:TAU2 pairs for Table 10, comma-separated, e.g. 0.3:0.6,0.35:0.65 (default: τ1 in 0.2,0.3,0.35,0.4,0.5 × τ2 in 0.5,0.6,0.65,0.7,0.8 with τ1 < τ2).",
        ),
    ] = None,
    rules: Annotated[
        str, typer.Option("--rules", help="Other combination rules compared in Table 9.")
    ] = "yager,dempster",
    policies: Annotated[
        str, typer.Option("--policies", help="Routing policies compared at the run's λ and τ.")
    ] = "paper,decomposed",
    state_ratio: Annotated[
        str | None,
        typer.Option(
            "--state-ratio",
            help="Stated-set bars ρ compared at the run's λ and τ, with and without the edited-copy rule, comma-separated (default 0,0.2,0.4,0.6,0.8,1).",
        ),
    ] = None,
    systems: Annotated[
        str | None,
        typer.Option(
            "--systems", help="Evidential systems of the run to sweep (default: all with evidence)."
        ),
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option("--reference", help="System for the p-values (default corrective if run, else naive)."),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: <run>/sweep).")] = None,
) -> None:
    """Tables 9 (λ, rules), 10 (τ1/τ2), 12 (ablations), the routing-policy and prompt-vs-learned comparisons
    from an earlier evaluation's cached per-chunk evidence: fusion and routing re-run in batch, answers are
    the routes' templates, and no evaluator or generator is loaded or called. Writes sweep.json and
    sweep.md. Exit codes: 0 done, 2 a user error (not a run folder, no cached evidence, a bad grid)."""
    from inference.evaluation.runner import parse_systems
    from inference.evaluation.sweep import (
        DEFAULT_LAMS,
        DEFAULT_STATE_RATIOS,
        DEFAULT_TAUS,
        SweepGrid,
        parse_lams,
        parse_taus,
        run_sweep,
    )

    try:
        grid = SweepGrid(
            lams=parse_lams(lam) if lam else list(DEFAULT_LAMS),
            taus=parse_taus(tau) if tau else list(DEFAULT_TAUS),
            rules=parse_systems(rules),
            policies=parse_systems(policies),
            state_ratios=parse_lams(state_ratio, "--state-ratio")
            if state_ratio
            else list(DEFAULT_STATE_RATIOS),
        )
        result = run_sweep(
            source,
            grid,
            systems=parse_systems(systems) if systems else None,
            reference=reference,
            out_dir=out,
        )
    except EvidentialError as exc:
        fail(str(exc))
    for name, res in result["systems"].items():
        base = next(e for e in res["settings"] if e["setting"]["table"] == "base")
        best = max(
            (e for e in res["settings"] if e["mean_std"]["accuracy"]["mean"] is not None),
            key=lambda e: e["mean_std"]["accuracy"]["mean"],
        )
        rep = base["reproduced_routes"]
        console.print(
            f"{name}: {len(res['settings'])} settings; run setting reproduces {rep['same']}/{rep['n']} routes; "
            f"templated accuracy {base['mean_std']['accuracy']['mean']:.3f} at the run setting, best "
            f"{best['mean_std']['accuracy']['mean']:.3f} ({best['setting']['name']})"
        )
    console.print(f"model calls: {result['model_calls']}; wrote {', '.join(result['written'])}")
