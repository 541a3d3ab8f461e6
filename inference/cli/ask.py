"""``evidential-rag ask``: answer one question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

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
    parse_claims,
    print_record,
    with_calibration,
)


def ask_cmd(
    question: Annotated[str, typer.Argument(help="The question.")],
    chunks: Annotated[
        Path | None,
        typer.Option("--chunks", help="JSONL of retrieved chunks: id, text, optional source, rank, score."),
    ] = None,
    index: IndexOpt = None,
    evaluator: EvaluatorOpt = None,
    candidates: Annotated[
        str | None,
        typer.Option(
            help="Candidate claims that open the inventory: JSON list or comma-separated (e.g. yes,no)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the answer record as one JSON object.")
    ] = False,
    calibration: CalibrationOpt = None,
    no_calibration: NoCalibrationOpt = False,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Answer one question: retrieve (--index) or read (--chunks) the chunks, evaluate, fuse, route, generate.

    Exit codes: 0 answered; 2 a user error (missing index or chunks file, bad config field, model not found).
    """
    from inference.types import load_chunks

    if (chunks is None) == (index is None):
        fail("give exactly one of --index DIR (retrieve) or --chunks FILE (chunks given)")
    extra = [f"evaluator.name={evaluator}"] if evaluator else []
    cfg = with_calibration(load(config, overrides, extra), calibration, no_calibration)
    if not question.strip():
        fail("QUESTION is empty")
    cand = parse_claims(candidates, None) if candidates is not None else []
    try:
        rows = load_chunks(chunks) if chunks is not None else None
    except EvidentialError as exc:
        fail(str(exc))
    rag = build_pipeline(cfg, index)
    try:
        record = rag.ask(question, rows, cand)
    except EvidentialError as exc:
        fail(str(exc))
    except RuntimeError as exc:
        fail(f"{type(exc).__name__}: {exc}")
    record["timings"] = {**{k: round(v, 6) for k, v in rag.timings.items()}, **record["timings"]}
    if as_json:
        console.print_json(json.dumps(record, ensure_ascii=False))
        return
    print_record(record, question)
