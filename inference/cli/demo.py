"""``evidential-rag demo``: the main job on real RAMDocs questions (or label-derived evidence with --oracle)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from evidential import ROUTES
from evidential.errors import EvidentialError
from inference.cli.options import ConfigOpt, SetOpt, console, fail, load
from inference.config import RunConfig


def demo_cmd(
    data: Annotated[
        Path | None,
        typer.Option(help="RAMDocs JSONL file (default: the 36-record sample shipped in the package)."),
    ] = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Output folder for records.jsonl, summary.json, run.json.")
    ] = Path("outputs/demo"),
    limit: Annotated[int | None, typer.Option(help="Use only the first N records.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    oracle: Annotated[
        bool,
        typer.Option(
            "--oracle", help="Fuse label-derived evidence instead of running the pipeline (no models)."
        ),
    ] = False,
    batch_size: Annotated[int, typer.Option(help="Questions per batched pipeline call.", min=1)] = 12,
    generator: Annotated[
        str,
        typer.Option(
            help="Who writes the answers: template (deterministic, from the fused evidence; the demo's "
            "default on CPU) or llm (the config's instruction LLM, template fallback).",
        ),
    ] = "template",
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Main job: the full pipeline on real RAMDocs questions with their documents indexed as the corpus.

    Prints, per question, the route, the answer, U_global, the sources and which generator wrote the
    response, then a summary by record kind (routes, accuracy of the selected claim against the gold
    answers, strict exact match). --generator llm lets the config's LLM write the answers. --oracle fuses
    label-derived evidence instead (what fusion does with a perfect stance evaluator).
    """
    from inference.generation import GENERATORS
    from inference.workflows.demo import run_demo, run_pipeline_demo

    if generator not in GENERATORS:
        fail(f"--generator must be one of {', '.join(GENERATORS.names())}; got {generator!r}")
    # --generator is applied first, so that --set generator.name=... still has the last word
    cfg = load(config, [f"generator.name={generator}", *(overrides or [])], [])
    if limit is not None and limit < 1:
        fail(f"--limit must be >= 1; got {limit}")
    if not oracle:
        try:
            summary = run_pipeline_demo(cfg, data, output, limit, batch_size, progress=not as_json)
        except EvidentialError as exc:
            fail(str(exc))
        except RuntimeError as exc:
            fail(f"{type(exc).__name__}: {exc}")
        records = summary.pop("records")
        if as_json:
            console.print_json(json.dumps(summary))
            return
        _print_pipeline_demo(cfg, records, summary, output)
        return
    try:
        summary = run_demo(cfg, data, output, limit)
    except EvidentialError as exc:
        fail(str(exc))
    records = summary.pop("records")
    if as_json:
        console.print_json(json.dumps(summary))
        return
    fc = cfg.fusion
    _print_kind_table(
        f"RAMDocs, label-derived evidence ({len(records)} records; {fc.rule} λ={fc.lam}, "
        f"{fc.policy} τ1={fc.tau1} τ2={fc.tau2})",
        summary,
        [
            ("U", "mean_U", ".3f"),
            ("ign.", "mean_ignorance", ".3f"),
            ("confl.", "mean_conflict", ".3f"),
            ("K̄", "mean_pairwise_conflict", ".3f"),
            ("top=gold", "top_claim_is_gold", ".2f"),
        ],
    )
    console.print(f"data: {summary['data']}")
    console.print(f"wrote {output}/records.jsonl, summary.json, run.json")


def _print_kind_table(title: str, summary: dict, columns: list[tuple[str, str, str]]) -> None:
    """One row per record kind: n, route counts, then ``columns`` (header, summary key, format)."""
    t = Table(title=title)
    t.add_column("kind", no_wrap=True)
    for col in ("n", *ROUTES, *(c[0] for c in columns)):
        t.add_column(col, justify="right", no_wrap=True)
    for kind, s in summary["by_kind"].items():
        t.add_row(
            kind,
            str(s["n"]),
            *(str(s["routes"][r]) for r in ROUTES),
            *(format(s[key], fmt) for _, key, fmt in columns),
        )
    console.print(t)


def _print_pipeline_demo(cfg: RunConfig, records: list[dict], summary: dict, output: Path) -> None:
    from inference.workflows.demo import response_writer

    for n, r in enumerate(records, 1):
        writer = response_writer(r)
        if (r.get("generation") or {}).get("fallback"):
            writer += f": {r['generation']['fallback_reason']}"
        mark = "✓" if r["selected_is_gold"] else "✗"
        sources = ", ".join(r["cited_chunk_ids"]) or "-"
        console.print(
            f"[bold]{n:>2}. {escape(r['question'])}[/]\n    route {r['route']:<8} U {r['uncertainty']:.3f}  "
            f"answer: {escape(str(r['answer']))} {mark} (gold: {escape('; '.join(r['gold_answers']))})\n"
            f"    sources: {escape(sources)}\n"
            f"    response ({escape(writer)}): {escape(r['response'][:240])}",
            highlight=False,
        )
    # the fusion the records ran with: the calibration's λ/τ/ρ when one applied (calibration: auto)
    fc = records[0]["fusion"] if records else vars(cfg.fusion)
    how = "calibrated" if records and records[0].get("calibration") else "uncalibrated"
    _print_kind_table(
        f"EvidentialRAG on {len(records)} RAMDocs questions ({cfg.evaluator.name} evaluator, "
        f"{cfg.generator.name} generator, k={cfg.k}; {fc['rule']} λ={fc['lam']:g}, "
        f"τ1={fc['tau1']:.3g} τ2={fc['tau2']:.3g}, ρ={fc.get('state_ratio', cfg.fusion.state_ratio):g}, {how})",
        summary,
        [
            ("U", "mean_U", ".3f"),
            ("selected=gold", "selected_is_gold", ".2f"),
            ("strict EM", "strict_em", ".2f"),
            ("own docs@k", "own_documents_at_k", ".2f"),
        ],
    )
    tm = summary["timings_s"]
    wrote = ", ".join(f"{name} {n}" for name, n in summary["written_by"].items())
    console.print(
        f"responses written by: {wrote}\n"
        f"index {tm['index']:.1f}s, models {tm['load_models']:.1f}s, answering {tm['answer']:.1f}s "
        f"({tm['per_question']:.2f}s per question); wrote {output}/records.jsonl, summary.json, run.json",
        highlight=False,
    )
