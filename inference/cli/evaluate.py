"""``evidential-rag evaluate``: the experiment runner on a benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli.options import (
    CalibrationOpt,
    ConfigOpt,
    EvaluatorOpt,
    NoCalibrationOpt,
    SetOpt,
    console,
    fail,
    load,
    with_calibration,
)


def evaluate_cmd(
    dataset: Annotated[
        str,
        typer.Option(
            "--dataset",
            help="ramdocs, wikicontradict, wikicontradict-instances, conflictqa, musique or crag.",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Output folder: <system>.jsonl, metrics.json, report.md, plots.")
    ],
    data: Annotated[
        str | None,
        typer.Option("--data", help="File, folder or hf:NAME[:SPLIT]; default ../shared/data/<dataset>."),
    ] = None,
    index: Annotated[
        Path | None,
        typer.Option(
            "--index",
            help="Retrieve each question's k chunks from this index (built by `evidential-rag index`) once, "
            "for every system, instead of using the instance's own passages.",
        ),
    ] = None,
    systems: Annotated[
        str,
        typer.Option(
            "--systems",
            help="Comma-separated systems: evidential, evidential-learned, evidential-prompt, naive, corrective, "
            "selfrag, majority (rule-only vote over the evaluator's claims); ablations evidential-no-fusion, "
            "evidential-no-routing, evidential-decomposed.",
        ),
    ] = "evidential,naive",
    evaluator: EvaluatorOpt = None,
    seeds: Annotated[str, typer.Option("--seeds", help="Comma-separated seeds.")] = "42,123,999",
    limit: Annotated[
        int | None, typer.Option("--limit", help="Evaluate the first N instances.", min=1)
    ] = None,
    split: Annotated[
        str,
        typer.Option(
            "--split",
            help="all, validation or train: the learned evaluator's training split of each question "
            "(validation = never seen by the shipped checkpoint).",
        ),
    ] = "all",
    judge: Annotated[str, typer.Option("--judge", help="label (dataset annotations) or llm.")] = "label",
    reference: Annotated[
        str | None,
        typer.Option("--reference", help="System for the p-values (default corrective if run, else naive)."),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Questions per batched call.", min=1)] = 8,
    bertscore_model: Annotated[
        str, typer.Option("--bertscore-model", help="BERTScore model (default: the packaged MiniLM).")
    ] = "sentence-transformers/all-MiniLM-L6-v2",
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bars.")] = True,
    calibration: CalibrationOpt = None,
    no_calibration: NoCalibrationOpt = False,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Run systems on a benchmark with every seed, judge the answers and write the paper-layout report.

    All systems answer the same instances from the same chunks with the same generator, k and generation
    length. The run resumes where it stopped when re-run with the same flags. Exit codes: 0 done, 2 a user
    error (unknown dataset/system, missing data, settings that differ from the folder's run, a calibration
    file fitted for another evaluator or checkpoint).
    """
    from inference.evaluation.runner import EvaluateOptions, parse_seeds, parse_systems, run_evaluation

    extra = [f"evaluator.name={evaluator}"] if evaluator else []
    cfg = with_calibration(load(config, overrides, extra), calibration, no_calibration)
    try:
        opts = EvaluateOptions(
            dataset=dataset,
            out=out,
            data=data,
            index=index,
            systems=parse_systems(systems),
            seeds=parse_seeds(seeds),
            limit=limit,
            split=split,
            judge=judge,
            reference=reference,
            batch_size=batch_size,
            bertscore_model=bertscore_model,
        )
        metrics = run_evaluation(opts, cfg, progress=progress)
    except EvidentialError as exc:
        fail(str(exc))
    except RuntimeError as exc:  # backend errors carry what to fix
        fail(f"{type(exc).__name__}: {exc}")
    S = metrics["systems"]
    for name, s in S.items():
        m = s["mean_std"]

        def g(k: str, m=m) -> str:
            v = m.get(k, {}).get("mean")
            return "–" if v is None else f"{v:.3f}"

        console.print(
            f"{name}: F1 {g('f1')}  acc {g('accuracy')}  halluc {g('hallucination_rate')}  "
            f"CRR {g('conflict_resolution_rate')}  refusal F1 {g('refusal_f1')}  ECE {g('ece')}  "
            f"latency {g('latency_s')} s/q"
        )
    console.print(f"report: {out / 'report.md'}")
