"""``evidential-rag distill``: distil a teacher evaluator into the learned head."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evidential.errors import EvidentialError
from inference.cli.options import SetOpt, command_line, console, fail
from inference.workflows.sources import data_source


def distill_cmd(
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Output folder: teacher.jsonl (cache), distill_rows.jsonl, best/, distill_report.json.",
        ),
    ],
    teacher: Annotated[
        str | None,
        typer.Option(
            "--teacher", help="Teacher evaluator: prompt (default of the config) or learned (a checkpoint)."
        ),
    ] = None,
    data: Annotated[
        list[str] | None,
        typer.Option(
            "--data",
            "-d",
            help="Chunks for the teacher (repeatable; replaces the config's data): an annotated-chunk JSONL, "
            "RAMDocs JSONL, unannotated {query, chunk}/{query, chunks} JSONL, or NAME:PATH for a builder "
            "(ramdocs, wikicontradict, conflictqa, musique, chunks, annotated).",
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Read at most this many queries per --data source.")
    ] = None,
    config: Annotated[
        str,
        typer.Option(
            "--config",
            "-c",
            help="Distillation config: a YAML path or a name in configs/ (a training config + teacher:).",
        ),
    ] = "distill-minilm",
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue an interrupted student training from OUTPUT/last (the teacher cache is always reused).",
        ),
    ] = False,
    overrides: SetOpt = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
) -> None:
    """Train the learned evaluator on a teacher evaluator's outputs (soft evidence targets).

    The teacher scores every chunk (batched, cached in OUTPUT/teacher.jsonl, resumable: a rerun asks it only
    for the queries not yet done), its evidence becomes the target of the student, which trains like
    `evidential-rag train` (OUTPUT/best). OUTPUT/distill_report.json gives teacher–student agreement on the
    validation split and both models' seconds per chunk measured side by side. Exit codes: 0 done, 2 bad
    config/data/output.
    """
    from inference.backends.base import BackendError
    from inference.workflows.distill import load_distill_config, run_distillation
    from training.data.annotated import TrainingDataError

    try:
        extra = [f"teacher.evaluator.name={teacher}"] if teacher else []
        cfg = load_distill_config(config, [*(overrides or []), *extra])
        if data:
            from training.trainer.config import DataSourceConfig

            cfg.train.data = [DataSourceConfig(**data_source(d, limit)) for d in data]
        elif limit is not None:
            for src in cfg.train.data:
                src.limit = limit
        report = run_distillation(cfg, output, resume=resume, command=command_line(), progress=progress)
    except (EvidentialError, TrainingDataError, BackendError) as exc:
        fail(str(exc))
        return
    except KeyboardInterrupt:
        fail(
            f"interrupted; the teacher outputs so far are kept in {output / 'teacher.jsonl'}: run the same "
            "command with --resume to continue",
            code=130,
        )
        return
    if not report:  # another process of a data-parallel run: the main process reports
        return
    a, s, t = report["agreement"], report["speed"], report["teacher"]

    def f(x, spec=".3f"):
        return "–" if x is None else format(x, spec)

    console.print(
        f"teacher {t['evaluator']}: {t['chunks']} chunks of {t['queries']} queries "
        f"({t['computed_queries']} computed, {t['cached_queries']} cached); outputs {t['outputs']}",
        highlight=False,
    )
    console.print(
        f"agreement on {a['chunks']} validation chunks: decision {f(a['decision_agreement'])}, "
        f"supports-nothing {f(a['support_agreement'])}, Spearman {f(a['spearman'])}",
        highlight=False,
    )
    if s.get("chunks"):
        console.print(
            f"seconds per chunk: teacher {s['teacher_seconds_per_chunk']:.4f}, student "
            f"{s['student_seconds_per_chunk']:.4f} → speed-up {f(s['speedup'], '.1f')}×",
            highlight=False,
        )
    console.print(f"student → {output / 'best'}; report → {output / 'distill_report.json'}", highlight=False)
