"""The main job on the embedded defaults.

* :func:`run_pipeline_demo` (the default): the full pipeline — index, retrieve, evaluate (the shipped learned
  evaluator), fuse, route, generate (SmolLM2) — over real RAMDocs questions with their documents as corpus.
* :func:`run_demo` (``--oracle``): label-derived evidence from the same records, fused in one batched call
  and routed: what the fusion does with a perfect stance evaluator.

Output folder (public contract): ``records.jsonl`` (one answer-style record per question),
``summary.json`` (per-kind route counts and means) and ``run.json`` (config, seed, versions, data).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from pathlib import Path

import torch

import evidential
from evidential import fuse, opinions_from_evidence, pad_evidence, route
from inference.config import RunConfig, to_dict
from inference.io import rounded, write_json, write_jsonl
from inference.rag.evidential import EvidentialRAG
from inference.ramdocs import KINDS, SAMPLE_PATH, label_evidence, load_ramdocs, normalize_answer, record_kind
from inference.retrieval import build_index
from training.utils.metrics import strict_exact_match
from training.utils.run_metadata import package_versions

__all__ = [
    "KINDS",
    "response_writer",
    "run_demo",
    "run_pipeline_demo",
    "summarize",
    "summarize_by_kind",
    "summarize_pipeline",
    "written_by",
]


def run_demo(
    cfg: RunConfig, data: str | Path | None = None, output: str | Path | None = None, limit: int | None = None
) -> dict:
    """Fuse and route every record of a RAMDocs file (default: the shipped sample); returns the summary."""
    t0 = time.perf_counter()
    records = load_ramdocs(data, limit=limit)
    built = [label_evidence(r, cfg.evidence.strength) for r in records]
    evidence, claim_mask, chunk_mask = pad_evidence(
        [b.evidence for b in built], num_claims=[len(b.claims) for b in built], dtype=torch.float64
    )
    t1 = time.perf_counter()
    fc = cfg.fusion
    ops = opinions_from_evidence(evidence, claim_mask, chunk_mask, sanitize=fc.sanitize)
    res = fuse(ops, lam=fc.lam, rule=fc.rule)
    routes = route(res, fc.tau1, fc.tau2, fc.policy).names
    t2 = time.perf_counter()

    rows = []
    for i, (rec, b) in enumerate(zip(records, built)):
        m = len(b.claims)
        sel = int(res.selected[i])
        selected = b.claims[sel] if sel >= 0 else None
        gold = {normalize_answer(a) for a in rec["gold_answers"]}
        rows.append(
            {
                "query": rec["question"],
                "kind": record_kind(rec),
                "route": routes[i],
                "selected_claim": selected,
                "selected_is_gold": selected is not None and normalize_answer(selected) in gold,
                "fused_masses": {c: rounded(res.belief[i, j]) for j, c in enumerate(b.claims)},
                "U_global": rounded(res.uncertainty[i]),
                "ignorance": rounded(res.ignorance[i]),
                "conflict": rounded(res.conflict[i]),
                "mean_pairwise_conflict": rounded(res.mean_pairwise_conflict[i]),
                "confidence": rounded(res.confidence[i]),
                "step_conflict": [rounded(x) for x in res.step_conflict[i, : max(len(b.doc_types) - 1, 0)]],
                "chunk_evidence": [
                    {
                        "chunk_id": f"doc{j}",
                        "type": t,
                        "claim": b.claims[s] if s is not None else None,
                        "evidence": {c: rounded(b.evidence[j, q]) for q, c in enumerate(b.claims)},
                    }
                    for j, (t, s) in enumerate(zip(b.doc_types, b.supports))
                ],
                "num_claims": m,
                "gold_answers": rec["gold_answers"],
                "wrong_answers": rec["wrong_answers"],
            }
        )
    summary = summarize(rows)
    summary["timings_s"] = {"load_and_build": rounded(t1 - t0), "opinions_fuse_route": rounded(t2 - t1)}
    summary["data"] = str(data if data is not None else SAMPLE_PATH)
    if output is not None:
        out = Path(output)
        write_jsonl(out / "records.jsonl", rows)
        write_json(out / "summary.json", summary)
        write_run(out, cfg, summary["data"], "oracle")
    summary["records"] = rows
    return summary


def write_run(out: Path, cfg: RunConfig, data: str, mode: str) -> None:
    """``run.json``: the command, mode, config, seed, data and versions of a demo run."""
    write_json(
        out / "run.json",
        {
            "command": "demo",
            "mode": mode,
            "config": to_dict(cfg),
            "seed": cfg.seed,
            "data": data,
            "versions": package_versions("evidential-rag", "torch", "python"),
        },
    )


def summarize_by_kind(rows: list[dict], means: dict[str, str]) -> dict:
    """Per record kind (:func:`inference.ramdocs.record_kind`, the rule the evaluation uses) and ``all``:
    ``n``, route counts and the mean of each ``means`` field (output name → record key)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r["kind"]].append(r)
        groups["all"].append(r)
    out = {}
    for kind in (*KINDS, "all"):
        g = groups.get(kind, [])
        if not g:
            continue
        routes = Counter(r["route"] for r in g)
        out[kind] = {
            "n": len(g),
            "routes": {name: routes.get(name, 0) for name in evidential.ROUTES},
            **{name: rounded(sum(r[key] for r in g) / len(g)) for name, key in means.items()},
        }
    return {"by_kind": out}


def summarize(rows: list[dict]) -> dict:
    """Label-evidence demo: mean U / ignorance / conflict / K̄ and the top-claim-is-gold rate per kind."""
    return summarize_by_kind(
        rows,
        {
            "mean_U": "U_global",
            "mean_ignorance": "ignorance",
            "mean_conflict": "conflict",
            "mean_pairwise_conflict": "mean_pairwise_conflict",
            "top_claim_is_gold": "selected_is_gold",
        },
    )


def run_pipeline_demo(
    cfg: RunConfig,
    data: str | Path | None = None,
    output: str | Path = "outputs/demo",
    limit: int | None = None,
    batch_size: int = 12,
    progress: bool = True,
) -> dict:
    """The full pipeline on real RAMDocs questions, with the questions' documents indexed as the corpus.

    Every document of the selected records becomes a corpus row ``q<n>-d<j>`` (source: record, document and
    its label); the index is built under ``output/index`` (reused when it is complete), then every question
    is retrieved, evaluated, fused, routed and answered in batches. Each record is the pipeline's answer
    record plus ``kind``, ``gold_answers``, ``wrong_answers``, ``selected_is_gold`` (the selected claim is a
    gold answer), ``strict_em`` (MADAM-RAG's strict exact match of the claims the answer states) and
    ``own_documents`` (retrieved chunks that come from the question's own record).
    """
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    records = load_ramdocs(data, limit=limit)
    out = Path(output)
    corpus = [
        {"id": f"q{n}-d{j}", "text": d["text"], "source": f"record {n}, document {j} ({d['type']})"}
        for n, r in enumerate(records)
        for j, d in enumerate(r["documents"])
    ]
    write_jsonl(out / "corpus.jsonl", corpus)
    meta = build_index(out / "corpus.jsonl", out / "index", cfg, show_progress=progress)
    t_index = time.perf_counter() - t0
    rag = EvidentialRAG(cfg, out / "index")
    rows = []
    t1 = time.perf_counter()
    with tqdm(total=len(records), desc="questions", unit="q", disable=not progress) as bar:
        for s in range(0, len(records), batch_size):
            part = records[s : s + batch_size]
            for n, (rec, ans) in enumerate(zip(part, rag.ask_batch([r["question"] for r in part])), start=s):
                gold = {normalize_answer(a) for a in rec["gold_answers"]}
                said = ans["stated_claims"]
                own = sum(c["id"].startswith(f"q{n}-") for c in ans["retrieval"]["chunks"])
                rows.append(
                    {
                        **ans,
                        "kind": record_kind(rec),
                        "gold_answers": rec["gold_answers"],
                        "wrong_answers": rec["wrong_answers"],
                        "selected_is_gold": ans["answer"] is not None
                        and normalize_answer(ans["answer"]) in gold,
                        "strict_em": strict_exact_match(said, rec["gold_answers"], rec["wrong_answers"]),
                        "own_documents": own,
                    }
                )
            bar.update(len(part))
    t_answer = time.perf_counter() - t1
    summary = summarize_pipeline(rows)
    summary["timings_s"] = {
        "index": rounded(t_index),
        "load_models": rounded(sum(rag.timings.values())),
        "answer": rounded(t_answer),
        "per_question": rounded(t_answer / max(len(rows), 1)),
    }
    summary["data"] = str(data if data is not None else SAMPLE_PATH)
    summary["index"] = {"chunks": meta.get("chunks"), "embedder": meta.get("embedder")}
    summary["evaluator"] = cfg.evaluator.name
    summary["generator"] = cfg.generator.name
    summary["written_by"] = written_by(rows)
    write_jsonl(out / "records.jsonl", rows)
    write_json(out / "summary.json", summary)
    write_run(out, cfg, summary["data"], "pipeline")
    summary["records"] = rows
    return summary


def response_writer(record: dict) -> str:
    """Who wrote a record's response: ``llm``, ``template``, or ``template (LLM fallback)`` for an LLM text
    that failed its check and was replaced by the template."""
    gen = record.get("generation") or {}
    return "template (LLM fallback)" if gen.get("fallback") else str(gen.get("generator"))


def written_by(rows: list[dict]) -> dict[str, int]:
    """How many responses each writer (:func:`response_writer`) wrote."""
    return dict(Counter(response_writer(r) for r in rows))


def summarize_pipeline(rows: list[dict]) -> dict:
    """Pipeline demo: mean U, selected-claim accuracy, strict EM and own documents retrieved, per kind."""
    return summarize_by_kind(
        rows,
        {
            "mean_U": "uncertainty",
            "selected_is_gold": "selected_is_gold",
            "strict_em": "strict_em",
            "own_documents_at_k": "own_documents",
        },
    )
