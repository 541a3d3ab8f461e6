"""``evidential-rag calibrate``: fit an evaluator's evidence scale, λ, (τ1, τ2) and an isotonic confidence map
on validation data (the run is :func:`inference.workflows.calibrate.calibrate`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli.options import ConfigOpt, SetOpt, command_line, console, err, fail, load
from inference.workflows.calibrate import DEFAULT_FOLDS, calibrate


def calibrate_cmd(
    data: Annotated[
        list[str],
        typer.Option(
            "--data",
            help="Calibration data (repeatable): an annotated-chunk JSONL, NAME:PATH for a builder (ramdocs, "
            "wikicontradict, conflictqa, musique), a mapping like '{name: ramdocs, path: P, limit: 100}', or a "
            "training config (its data sources and split). Only the validation split is used.",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Calibration JSON to write (the reliability PNG goes next to it)."
        ),
    ],
    evaluator: Annotated[
        str | None,
        typer.Option(
            "--evaluator", help="Evaluator to calibrate: learned or prompt (default: the config's)."
        ),
    ] = None,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    validation_fraction: Annotated[
        float | None,
        typer.Option(
            help="Validation share of the split by question (default: the learned checkpoint's, else 0.2)."
        ),
    ] = None,
    split_seed: Annotated[
        int | None, typer.Option(help="Seed of the split by question (default: the checkpoint's, else 0).")
    ] = None,
    max_chunks: Annotated[
        int | None, typer.Option(help="Chunks per query, in file order (default: the config's k).", min=1)
    ] = None,
    max_claims: Annotated[
        int | None,
        typer.Option(
            help="Candidate claims per query, gold and labelled first (default: as in training).", min=1
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Use at most N validation queries.", min=1)] = None,
    frames: Annotated[
        str,
        typer.Option(
            help="Claim frames the evaluator scores: 'labelled' (the rows' candidates) or 'extracted' (no "
            "candidates: the frames the pipeline itself extracts and fuses, labels carried to the claims "
            "that state them).",
        ),
    ] = "labelled",
    batch_size: Annotated[int, typer.Option(help="Queries per batched evaluator call.", min=1)] = 8,
    isotonic: Annotated[
        bool, typer.Option("--isotonic/--no-isotonic", help="Fit an isotonic map of the confidence.")
    ] = True,
    power: Annotated[
        bool,
        typer.Option("--power/--no-power", help="Fit an evidence power (temperature) besides the scale."),
    ] = True,
    state_ratio: Annotated[
        float | None,
        typer.Option(
            help="Keep the open frames' stated-set bar at this value (in [0, 1]) instead of fitting it; the "
            "yes/no bar, the evidence scale, λ, τ and the isotonic map are fitted as usual.",
        ),
    ] = None,
    conflict_gold: Annotated[
        bool,
        typer.Option(
            "--conflict-gold/--no-conflict-gold",
            help="A query with no gold reference whose chunks support several claims (a real conflict, e.g. "
            "WikiContradict) counts the answer stating them as right; off: such queries enter no fit that "
            "needs a gold reference.",
        ),
    ] = True,
    side_conflicts: Annotated[
        bool,
        typer.Option(
            "--side-conflicts/--no-side-conflicts",
            help="A query whose chunks not labelled as planted support a claim outside its gold reference "
            "(two sides of a conflict, e.g. ConflictQA's memory and counter-memory passages) is calibrated "
            "as a conflict: expected route conflict, every supported claim right. Off: its gold reference "
            "stands and the other side counts as misinformation to discount (the shipped calibration is "
            "fitted with it on).",
        ),
    ] = True,
    route_maps: Annotated[
        bool,
        typer.Option(
            "--route-maps/--no-route-maps",
            help="Fit one isotonic confidence map per route (direct, conflict) that has enough validation "
            "answers, besides the pooled map the other routes use.",
        ),
    ] = True,
    reader_map: Annotated[
        bool,
        typer.Option(
            "--reader-map/--no-reader-map",
            help="Correct the mapped confidence by the reader score of the answer's chunks (a logistic map; "
            "fitted only where the evaluator reads chunks with a span head and enough answers have a score).",
        ),
    ] = True,
    cv_folds: Annotated[
        int, typer.Option(help="Folds of the cross-fitted 'after' estimate (0: off).", min=0)
    ] = DEFAULT_FOLDS,
    cache: Annotated[
        Path | None,
        typer.Option(help="Evidence cache JSONL (default: OUTPUT with .evidence.jsonl); reused and resumed."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Keep no evidence cache.")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the calibration file's content as JSON.")
    ] = False,
) -> None:
    """Calibrate an evaluator on validation data: evidence scale/power, λ, (τ1, τ2) and an isotonic map of the
    confidence; writes OUTPUT (JSON) and a reliability diagram PNG next to it.

    Use the file with `ask`/`batch`/`serve --calibration OUTPUT`. Exit codes: 0 done, 2 bad config or data.
    """
    from training.data.annotated import TrainingDataError

    extra = [f"evaluator.name={evaluator}"] if evaluator else []
    cfg = load(config, overrides, extra)
    if cv_folds == 1:
        fail("--cv-folds must be 0 (off) or >= 2")
    try:
        run = calibrate(
            cfg,
            data,
            output,
            validation_fraction=validation_fraction,
            split_seed=split_seed,
            max_chunks=max_chunks,
            max_claims=max_claims,
            limit=limit,
            batch_size=batch_size,
            isotonic=isotonic,
            fit_power=power,
            cv_folds=cv_folds,
            cache=None if no_cache else (cache if cache is not None else "auto"),
            progress=progress and sys.stderr.isatty(),
            command=command_line(),
            frames=frames,
            state_ratio=state_ratio,
            conflict_gold=conflict_gold,
            route_maps=route_maps,
            reader_maps=reader_map,
            side_conflicts=side_conflicts,
        )
    except (EvidentialError, TrainingDataError) as exc:
        fail(str(exc))
        return
    except RuntimeError as exc:  # backend errors carry what to fix
        fail(f"{type(exc).__name__}: {exc}")
        return
    cal = run.calibration
    if as_json:
        console.print_json(json.dumps(cal.to_dict(), ensure_ascii=False))
        return
    m = cal.metrics
    rows = [("before", m["before"]), ("after (in-sample)", m["after"])]
    if "after_cv" in m:
        rows.append((f"after ({m['after_cv']['folds']}-fold CV)", m["after_cv"]))
    d = cal.data
    console.print(
        f"calibrated the {cal.evaluator} evaluator on {d['queries']} validation queries "
        f"({d['queries_with_gold']} with gold): scale {cal.scale:.4g}, power {cal.power:g}, λ {cal.lam:g}, "
        f"τ1 {cal.tau1:g}, τ2 {cal.tau2:g}, isotonic {'on' if cal.isotonic else 'off'}"
        + (f" (own maps: {', '.join(cal.isotonic_routes)})" if cal.isotonic_routes else "")
        + (
            f", reader map on {cal.reader_map.get('queries', '?')} answers"
            if cal.reader_map is not None
            else ""
        ),
        highlight=False,
    )
    for name, row in rows:
        console.print(
            f"  {name:<22} route accuracy {row['route_accuracy']:.3f}  ECE {row['ece']:.3f}", highlight=False
        )
    for src, row in (m.get("after_cv") or {}).get("ece_by_source", {}).items():
        console.print(
            f"    {src or '(no source)':<20} {row['queries']:>4} queries  answer accuracy "
            f"{row['answer_accuracy']:.3f}  mean confidence {row['mean_confidence']:.3f}  ECE {row['ece']:.3f}",
            highlight=False,
        )
    for note in cal.search.get("notes", []):
        err.print(f"note: {note}", highlight=False)
    console.print(f"→ {run.output} (reliability diagram {run.plot})", highlight=False)
