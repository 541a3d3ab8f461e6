"""The ``evidential-rag`` command line (typer).

Commands: ``fuse`` (see what fusion does to given evidence), ``demo`` (the main job on the embedded
defaults). Every command takes ``--config`` (a YAML path or a named config: ``cpu``, ``paper``) and
repeatable ``--set key=value`` overrides; explicit flags override both.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import evidential
from evidential import ROUTES, fuse, opinions_from_evidence, route
from evidential.errors import EvidentialError
from inference.config import RunConfig, load_config, to_dict

app = typer.Typer(
    name="evidential-rag",
    help="EvidentialRAG: conflict-aware RAG with evidential opinions and conflict-preserving fusion.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
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


def _fail(msg: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False)
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        console.print(f"evidential-rag {evidential.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """EvidentialRAG command line."""
    _quiet_libraries()


# third-party packages whose deprecation notices and weight-loading bars say nothing to a user of the CLI
_QUIET_MODULES = (
    r"(transformers|peft|trl|accelerate|torch|sentence_transformers|datasets|huggingface_hub)(\.|$)"
)


def _quiet_libraries() -> None:
    """Silence what libraries print that a CLI user cannot act on: their Future/DeprecationWarnings and
    Hugging Face's "Loading weights" bars (``HF_HUB_DISABLE_PROGRESS_BARS=0`` brings the bars back).
    Warnings raised by this project's own code still show."""
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=_QUIET_MODULES)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _load(config: str | None, overrides: list[str] | None, extra: list[str]) -> RunConfig:
    try:
        return load_config(config, [*(overrides or []), *extra])
    except EvidentialError as exc:
        _fail(str(exc))
        raise AssertionError("unreachable") from exc


def _read_evidence(text: str) -> list:
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            _fail(f"--evidence {text}: file {path} not found")
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(
            f"--evidence is not valid JSON ({exc.msg} at column {exc.colno}); expected e.g. '[[3,0],[0,3]]'"
        )
    if not isinstance(data, list) or not all(isinstance(row, list) for row in data):
        _fail(
            "--evidence must be a JSON list of chunks, each a list of per-claim evidence, e.g. '[[3,0],[0,3]]'"
        )
    widths = {len(row) for row in data}
    if len(widths) > 1:
        _fail(
            f"--evidence rows have different lengths {sorted(widths)}; every chunk needs one value per claim"
        )
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                _fail(f"--evidence[{i}][{j}] = {v!r} is not a number")
    return data


def _parse_claims(claims: str | None, m: int | None) -> list[str]:
    if claims is None:
        return [f"a{j + 1}" for j in range(m or 0)]
    text = claims.strip()
    names = json.loads(text) if text.startswith("[") else [c.strip() for c in text.split(",")] if text else []
    if not isinstance(names, list) or not all(isinstance(c, str) for c in names):
        _fail("--claims must be a JSON list of strings or comma-separated names")
    if m is not None and len(names) != m:
        _fail(f"--claims names {len(names)} claim(s) but the evidence rows have {m} value(s)")
    return names


def _num(x) -> float:
    return round(float(x), 10)


@app.command("fuse")
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
    cfg = _load(config, overrides, extra)
    fc = cfg.fusion
    data = _read_evidence(evidence)
    m = len(data[0]) if data else None
    names = _parse_claims(claims, m)
    import torch

    ev = torch.tensor(data, dtype=torch.float64) if data else torch.zeros(0, len(names), dtype=torch.float64)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            ops = opinions_from_evidence(ev, sanitize=fc.sanitize)
        for w in caught:
            err.print(
                f"[yellow]warning:[/] {str(w.message).replace('evidence[', '--evidence[')}", highlight=False
            )
        res = fuse(ops, lam=fc.lam, rule=fc.rule)
        decision = route(res, fc.tau1, fc.tau2, fc.policy)
    except EvidentialError as exc:
        _fail(str(exc).replace("evidence[", "--evidence["))
    sel = int(res.selected)
    out = {
        "claims": names,
        "config": to_dict(fc),
        "opinions": [
            {
                "chunk": i,
                "belief": {c: _num(ops.belief[i, j]) for j, c in enumerate(names)},
                "vacuity": _num(ops.vacuity[i]),
            }
            for i in range(ev.shape[0])
        ],
        "fused": {
            "belief": {c: _num(res.belief[j]) for j, c in enumerate(names)},
            "theta": _num(res.uncertainty),
        },
        "U_global": _num(res.uncertainty),
        "ignorance": _num(res.ignorance),
        "conflict": _num(res.conflict),
        "step_conflict": [_num(x) for x in res.step_conflict],
        "mean_pairwise_conflict": _num(res.mean_pairwise_conflict),
        "confidence": _num(res.confidence),
        "selected_claim": names[sel] if sel >= 0 else None,
        "route": decision.names,
    }
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


@app.command("demo")
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
        _fail(f"--generator must be one of {', '.join(GENERATORS.names())}; got {generator!r}")
    # --generator is applied first, so that --set generator.name=... still has the last word
    cfg = _load(config, [f"generator.name={generator}", *(overrides or [])], [])
    if limit is not None and limit < 1:
        _fail(f"--limit must be >= 1; got {limit}")
    if not oracle:
        try:
            summary = run_pipeline_demo(cfg, data, output, limit, batch_size, progress=not as_json)
        except EvidentialError as exc:
            _fail(str(exc))
        except RuntimeError as exc:
            _fail(f"{type(exc).__name__}: {exc}")
        records = summary.pop("records")
        if as_json:
            console.print_json(json.dumps(summary))
            return
        _print_pipeline_demo(cfg, records, summary, output)
        return
    try:
        summary = run_demo(cfg, data, output, limit)
    except EvidentialError as exc:
        _fail(str(exc))
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
    fc = cfg.fusion
    _print_kind_table(
        f"EvidentialRAG on {len(records)} RAMDocs questions ({cfg.evaluator.name} evaluator, "
        f"{cfg.generator.name} generator, k={cfg.k}; {fc.rule} λ={fc.lam}, τ1={fc.tau1} τ2={fc.tau2})",
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


def _print_record(record: dict, question: str) -> None:
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


def _pipeline(cfg: RunConfig, index: Path | None):
    from inference.rag.evidential import EvidentialRAG

    try:
        return EvidentialRAG(cfg, index)
    except EvidentialError as exc:
        _fail(str(exc))
    except RuntimeError as exc:  # backend errors carry what to fix
        _fail(f"{type(exc).__name__}: {exc}")


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


def _with_calibration(cfg: RunConfig, calibration: Path | None) -> RunConfig:
    """``--calibration FILE`` sets the run config's ``calibration`` field (the pipeline loads and checks it)."""
    if calibration is None:
        return cfg
    from dataclasses import replace

    return replace(cfg, calibration=str(calibration))


@app.command("ask")
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
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Answer one question: retrieve (--index) or read (--chunks) the chunks, evaluate, fuse, route, generate.

    Exit codes: 0 answered; 2 a user error (missing index or chunks file, bad config field, model not found).
    """
    from inference.types import load_chunks

    if (chunks is None) == (index is None):
        _fail("give exactly one of --index DIR (retrieve) or --chunks FILE (chunks given)")
    extra = [f"evaluator.name={evaluator}"] if evaluator else []
    cfg = _with_calibration(_load(config, overrides, extra), calibration)
    if not question.strip():
        _fail("QUESTION is empty")
    cand = _parse_claims(candidates, None) if candidates is not None else []
    try:
        rows = load_chunks(chunks) if chunks is not None else None
    except EvidentialError as exc:
        _fail(str(exc))
    rag = _pipeline(cfg, index)
    try:
        record = rag.ask(question, rows, cand)
    except EvidentialError as exc:
        _fail(str(exc))
    except RuntimeError as exc:
        _fail(f"{type(exc).__name__}: {exc}")
    record["timings"] = {**{k: round(v, 6) for k, v in rag.timings.items()}, **record["timings"]}
    if as_json:
        console.print_json(json.dumps(record, ensure_ascii=False))
        return
    _print_record(record, question)


@app.command("batch")
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
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Answer many questions, batching evaluator and generator calls across questions.

    Exit codes: 0 done; 2 a user error (missing file or index, bad row, bad config field).
    """
    from tqdm.auto import tqdm

    from inference.io import iter_jsonl, write_jsonl
    from inference.types import Chunk, DataError

    if (chunks_field is None) == (index is None):
        _fail("give exactly one of --index DIR (retrieve) or --chunks-field NAME (chunks in each row)")
    extra = [f"evaluator.name={evaluator}"] if evaluator else []
    cfg = _with_calibration(_load(config, overrides, extra), calibration)
    rows: list[tuple[str, str, list | None, list]] = []
    try:
        for n, row in iter_jsonl(questions, "questions", DataError):
            where = f"{questions}:{n}"
            if not isinstance(row, dict):
                raise DataError(f"{where}: expected a JSON object with a 'question'")
            q = row.get("question", row.get("query"))
            if not isinstance(q, str) or not q.strip():
                raise DataError(f"{where}: field 'question' must be a non-empty string")
            rid = str(row.get("id", n))
            chunks = None
            if chunks_field is not None:
                raw = row.get(chunks_field)
                if not isinstance(raw, list):
                    raise DataError(f"{where}: field {chunks_field!r} must be a list of chunks")
                chunks = []
                for i, c in enumerate(raw, 1):
                    text = c if isinstance(c, str) else c.get("text") if isinstance(c, dict) else None
                    if not isinstance(text, str):
                        raise DataError(
                            f"{where}: {chunks_field}[{i - 1}] must be a string or an object with 'text'"
                        )
                    cid = str(c.get("id", f"d{i}")) if isinstance(c, dict) else f"d{i}"
                    src = (
                        c.get("source") if isinstance(c, dict) and isinstance(c.get("source"), str) else None
                    )
                    chunks.append(Chunk(cid, text, src, rank=i))
            cands = row.get(candidates_field, []) if candidates_field else []
            if not isinstance(cands, list) or not all(isinstance(x, str) for x in cands):
                raise DataError(f"{where}: field {candidates_field!r} must be a list of strings")
            rows.append((rid, q, chunks, cands))
            if limit is not None and len(rows) >= limit:
                break
    except EvidentialError as exc:
        _fail(str(exc))
    if not rows:
        _fail(f"{questions} holds no questions")
    rag = _pipeline(cfg, index)
    records = []
    try:
        with tqdm(total=len(rows), desc="batch", unit="q") as bar:
            for s in range(0, len(rows), batch_size):
                part = rows[s : s + batch_size]
                got = rag.ask_batch(
                    [q for _, q, _, _ in part], [c for _, _, c, _ in part], [c for *_, c in part]
                )
                for (rid, *_), rec in zip(part, got):
                    records.append({"id": rid, **rec})
                bar.update(len(part))
    except EvidentialError as exc:
        _fail(str(exc))
    except RuntimeError as exc:
        _fail(f"{type(exc).__name__}: {exc}")
    write_jsonl(out, records)
    routes = {r: sum(x["route"] == r for x in records) for r in ROUTES}
    console.print(
        f"{len(records)} answers → {out}; routes: " + ", ".join(f"{k} {v}" for k, v in routes.items()),
        highlight=False,
    )


@app.command("index")
def index_cmd(
    corpus: Annotated[
        str,
        typer.Option(
            "--corpus",
            help="Corpus: a .jsonl or .parquet file, a save_to_disk dataset folder or hf:NAME[:SPLIT]. Rows are "
            "documents (text/contents/page_result/html ...) or records with a 'documents' / 'search_results' list.",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Index folder to write; a previous index there is replaced only once the new one is complete.",
        ),
    ],
    resume: Annotated[
        bool,
        typer.Option(
            "--resume/--no-resume",
            help="Continue an unfinished build of the same corpus and settings from its last complete shard.",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the index metadata as JSON.")] = False,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Build a retrieval index: token chunks, FAISS embeddings (resumable shards), BM25 and metadata."""
    from inference.retrieval import build_index
    from inference.retrieval.index import work_dir

    cfg = _load(config, overrides, [])
    try:
        meta = build_index(corpus, output, cfg, resume=resume, show_progress=sys.stderr.isatty())
    except EvidentialError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail(
            f"interrupted; run the same command again to continue from the last complete shard in {work_dir(output)}",
            code=130,
        )
    if as_json:
        console.print_json(json.dumps(meta, ensure_ascii=False))
        return
    t = Table(title=f"Index {output}")
    t.add_column("field")
    t.add_column("value")
    t.add_row("corpus", str(meta["corpus"]))
    t.add_row("documents (empty)", f"{meta['n_documents']} ({meta['n_empty_documents']})")
    t.add_row("chunks / shards", f"{meta['n_chunks']} / {meta['n_shards']}")
    t.add_row("chunking", f"{cfg.retrieval.chunk_tokens} tokens, overlap {cfg.retrieval.chunk_overlap}")
    t.add_row("embedder", f"{meta['embedder']} ({meta['dim']}-d)")
    t.add_row("query instruction", repr(meta["query_instruction"]))
    if meta["resumed_from_shard"] is not None:
        t.add_row("resumed from shard", str(meta["resumed_from_shard"]))
    rate = f", {meta['chunks_per_s']} chunks/s" if meta["chunks_per_s"] else ""
    times = meta["timings_s"]
    t.add_row("time", f"{times['total']:.1f}s (embedding {times['embedding']:.1f}s{rate})")
    reranker = cfg.models.reranker or "none (reranking off)"
    t.add_row("retrieval", f"{cfg.retrieval.retriever}; reranker: {reranker}")
    console.print(t)


# commands defined in their own modules register themselves on `app`
from inference import (  # noqa: E402,F401
    cli_audit,
    cli_calibrate,
    cli_distill,
    cli_evaluate,
    cli_serve,
    cli_sft,
    cli_sweep,
    cli_train,
)

if __name__ == "__main__":  # pragma: no cover
    # `python -m inference.cli` (e.g. `accelerate launch -m inference.cli train-prompt-evaluator`) runs this
    # file as `__main__`; the command modules above registered themselves on `inference.cli.app`, not here
    from inference.cli import app as _registered_app

    _registered_app()
