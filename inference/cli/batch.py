"""``evidential-rag batch``: answer many questions, batching model calls across questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evidential import ROUTES
from evidential.errors import EvidentialError
from inference.cli.options import (
    CalibrationOpt,
    ConfigOpt,
    EvaluatorOpt,
    IndexOpt,
    NoCalibrationOpt,
    SetOpt,
    build_pipeline,
    console,
    fail,
    load,
    with_calibration,
)


def batch_cmd(
    questions: Annotated[
        Path, typer.Option("--questions", help="JSONL with a 'question' (or 'query') per row; 'id' kept.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Output JSONL of answer records (written atomically).")],
    index: IndexOpt = None,
    chunks_field: Annotated[
        str | None,
        typer.Option(
            "--chunks-field",
            help="Row field holding the chunks: a list of strings or of objects with 'text' (and optional id, "
            "source), e.g. 'documents' for RAMDocs.",
        ),
    ] = None,
    candidates_field: Annotated[
        str | None, typer.Option("--candidates-field", help="Row field holding candidate claims (optional).")
    ] = None,
    batch_size: Annotated[
        int, typer.Option(help="Questions per batched evaluator/generator call.", min=1)
    ] = 8,
    limit: Annotated[int | None, typer.Option(help="Answer only the first N questions.", min=1)] = None,
    evaluator: EvaluatorOpt = None,
    calibration: CalibrationOpt = None,
    no_calibration: NoCalibrationOpt = False,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Answer many questions, batching evaluator and generator calls across questions.

    Exit codes: 0 done; 2 a user error (missing file or index, bad row, bad config field).
    """
    from inference.io import write_jsonl
    from inference.workflows.batch import answer_questions, read_questions

    if (chunks_field is None) == (index is None):
        fail("give exactly one of --index DIR (retrieve) or --chunks-field NAME (chunks in each row)")
    extra = [f"evaluator.name={evaluator}"] if evaluator else []
    cfg = with_calibration(load(config, overrides, extra), calibration, no_calibration)
    try:
        rows = read_questions(questions, chunks_field, candidates_field, limit)
    except EvidentialError as exc:
        fail(str(exc))
    if not rows:
        fail(f"{questions} holds no questions")
    rag = build_pipeline(cfg, index)
    try:
        records = answer_questions(rag, rows, batch_size)
    except EvidentialError as exc:
        fail(str(exc))
    except RuntimeError as exc:
        fail(f"{type(exc).__name__}: {exc}")
    write_jsonl(out, records)
    routes = {r: sum(x["route"] == r for x in records) for r in ROUTES}
    console.print(
        f"{len(records)} answers → {out}; routes: " + ", ".join(f"{k} {v}" for k, v in routes.items()),
        highlight=False,
    )
