"""Paper-layout reports of an evaluation folder: ``metrics.json``, ``report.md`` and PNG plots.

Tables (mean ± sample std over seeds; paired bootstrap p-values against the reference system, pooled over
the (seed, instance) pairs both systems answered — answers reused from another seed count once):

* **Table 3 — answer quality**: EM, token F1, answer accuracy (a gold answer contained), ROUGE-L (F1),
  BERTScore F1 (model named), and RAMDocs strict EM on RAMDocs.
* **Table 4 — hallucination and conflict resolution** (the judge is named).
* **Table 5 — refusal**: precision, recall, F1 (Eqs 23–25) and abstention rate; abstention is detected
  in the response text for every system alike.
* **Table 7 — calibration**: ECE (15 equal-width bins, Eqs 26–27) and AURC of the confidence the system
  reports (systems without a confidence show "–").
* **Table 8 — behaviour breakdown**: per expected behaviour (answerable / ambiguous / misinformation /
  conflict / unanswerable): accuracy, abstention, routes, strict EM.
* **Table 11 — efficiency**: latency per query, peak resident memory, logical LLM decisions and batched
  passes per query, relative cost vs Naive RAG.
* **Table 13 — evaluator validity** (systems with an evaluator): JSON validity, repair and failure rates,
  claim-extraction fidelity against the passage labels, Spearman correlation of a chunk's largest
  evidence with "the passage states an answer", evaluator latency.

Then, when the run has EvidentialRAG rows with cached evaluator evidence, the sweep section
(:mod:`inference.evaluation.sweep`, default grid, no model call; also written to ``OUT/sweep/``):
**Table 9** (λ sweep, Yager, normalized Dempster), **Table 10** (τ1/τ2 grid), **Table 12** (ablations:
evidence averaging, no routing, no evaluator = Naive RAG), the routing-policy comparison and prompt vs
learned evaluator.

Plots: ``reliability.png`` (reliability diagram), ``hallucination_crr.png`` (bars), ``routes_over_u.png``
(routes over the fused uncertainty U).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inference.evaluation import metrics as M
from inference.io import rounded, write_json

__all__ = ["aggregate", "render_markdown", "write_report"]

ROUTES = ("direct", "conflict", "abstain")
BEHAVIOURS = ("answerable", "ambiguous", "misinformation", "conflict", "unanswerable")
P_VALUE_METRICS = ("f1", "accuracy", "strict_em")


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


def _ms(values: Sequence[float | None]) -> dict[str, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None}
    m, s = M.mean_std(vals)
    return {"mean": rounded(m), "std": rounded(s)}


def _by_seed(rows: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        out[r["seed"]].append(r)
    return dict(sorted(out.items()))


def _judge_labels(r: dict) -> dict:
    return (r.get("judge") or {}).get("labels") or {}


def _seed_metrics(rows: list[dict]) -> dict[str, float | None]:
    """Every scalar metric of one system on one seed."""
    sc = [r["scores"] for r in rows]
    refused = [bool(s["refused"]) for s in sc]
    should = [bool(s["should_refuse"]) for s in sc]
    ref = M.refusal_scores(refused, should)
    conf = [(s["confidence"], (s["accuracy"] or 0.0) >= 1.0) for s in sc if s.get("confidence") is not None]
    labels = [_judge_labels(r) for r in rows]
    out: dict[str, float | None] = {
        "n": float(len(rows)),
        "em": _mean([s["em"] for s in sc]),
        "f1": _mean([s["f1"] for s in sc]),
        "accuracy": _mean([s["accuracy"] for s in sc]),
        "rouge_l": _mean([s["rouge_l"] for s in sc]),
        "bertscore": _mean([s.get("bertscore") for s in sc]),
        "strict_em": _mean([s.get("strict_em") for s in sc]),
        "hallucination_rate": M.hallucination_rate(labels, refused),
        "conflict_resolution_rate": M.conflict_resolution_rate(
            labels, [r["expected_behaviour"] for r in rows]
        ),
        "refusal_precision": ref["precision"],
        "refusal_recall": ref["recall"],
        "refusal_f1": ref["f1"],
        "abstention_rate": M.abstention_rate(refused),
        "ece": M.expected_calibration_error([c for c, _ in conf], [k for _, k in conf]) if conf else None,
        "aurc": M.aurc([c for c, _ in conf], [k for _, k in conf]) if conf else None,
        "latency_s": _mean([r["latency_s"] for r in rows if not r.get("reused_from_seed")]),
        "peak_rss_mib": max(
            (r["peak_rss_mib"] for r in rows if r.get("peak_rss_mib") is not None), default=None
        ),
        "logical_decisions": _mean([r["record"].get("logical_decisions") for r in rows]),
        "batched_passes": _mean(
            [
                r["record"]["batched_passes"] / r.get("batch_size", 1)
                for r in rows
                if r["record"].get("batched_passes") is not None
            ]
        ),
    }
    for route in ROUTES:
        out[f"route_{route}"] = _mean([float(r["record"].get("route") == route) for r in rows])
    return out


def _validity(rows: list[dict], instances: dict[str, dict]) -> dict[str, float | None] | None:
    """Table 13 for one system's rows (None when its records carry no per-chunk evidence)."""
    chunks = []
    eval_lat = []
    for r in rows:
        if r.get("reused_from_seed"):
            continue
        rec = r["record"]
        if not rec.get("chunks") or "evidence" not in rec["chunks"][0]:
            return None
        labels = {c["id"]: lab for c, lab in zip(instances[r["id"]]["chunks"], instances[r["id"]]["labels"])}
        for ch in rec["chunks"]:
            chunks.append((ch, labels.get(ch["chunk_id"], {})))
        t = rec.get("timings", {})  # the evaluator's timings are per batched call
        eval_lat.append(sum(float(t.get(k, 0.0)) for k in ("extract", "evaluate")) / r.get("batch_size", 1))
    if not chunks:
        return None
    with_answer = [(ch, lab) for ch, lab in chunks if lab.get("answer")]
    fidelity = [
        float(
            any(
                M.answer_contained(ch.get(key) or "", [lab["answer"]])
                or (ch.get(key) and M.answer_contained(lab["answer"], [ch.get(key)]))
                for key in ("answer", "claim")
            )
        )
        for ch, lab in with_answer
    ]
    labelled = [(ch, lab) for ch, lab in chunks if lab.get("type") is not None]
    best = [max(ch["evidence"].values(), default=0.0) for ch, _ in labelled]
    states = [float(bool(lab.get("answer"))) for _, lab in labelled]
    return {
        "chunks": float(len(chunks)),
        "json_validity": _mean([float(bool(ch.get("valid"))) for ch, _ in chunks]),
        "repair_rate": _mean([float(bool(ch.get("repaired"))) for ch, _ in chunks]),
        "failure_rate": _mean([float(bool(ch.get("errors")) and not ch.get("valid")) for ch, _ in chunks]),
        "extraction_fidelity": _mean(fidelity),
        "evidence_label_spearman": M.spearman(best, states) if len(set(states)) > 1 else None,
        "evaluator_latency_s": _mean(eval_lat),
    }


def _pvalues(per_system: dict[str, list[dict]], reference: str | None) -> dict[str, dict[str, float | None]]:
    """Paired bootstrap p-values against ``reference`` over the (seed, instance) pairs both answered; rows
    that reuse another seed's answers (greedy decoding) are left out, so repeated answers never count as
    independent evidence."""
    if reference is None or reference not in per_system:
        return {}
    ref = {(r["seed"], r["id"]): r["scores"] for r in per_system[reference]}
    out: dict[str, dict[str, float | None]] = {}
    for name, rows in per_system.items():
        if name == reference:
            continue
        out[name] = {}
        for metric in P_VALUE_METRICS:
            pairs = [
                (r["scores"].get(metric), ref[(r["seed"], r["id"])].get(metric))
                for r in rows
                if (r["seed"], r["id"]) in ref and r.get("reused_from_seed") is None
            ]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
            out[name][metric] = (
                rounded(M.paired_bootstrap_pvalue([a for a, _ in pairs], [b for _, b in pairs]))
                if pairs
                else None
            )
    return out


def _bertscores(out_dir: Path, per_system: dict[str, list[dict]], model: str) -> dict[str, Any]:
    """BERTScore F1 of every row's response (cached in ``bertscore.json`` by response + gold hash)."""
    cache_path = out_dir / "bertscore.json"
    cache = json.loads(cache_path.read_text(encoding="utf-8")) if cache_path.is_file() else {}
    cache.setdefault("scores", {})
    todo: dict[str, tuple[str, list[str]]] = {}
    keys: dict[int, str] = {}
    for rows in per_system.values():
        for r in rows:
            golds = r["gold_answers"]
            if not golds:
                continue
            resp = r["record"].get("response") or ""
            key = hashlib.sha256(json.dumps([model, resp, golds]).encode()).hexdigest()[:24]
            keys[id(r)] = key
            if key not in cache["scores"]:
                todo[key] = (resp, golds)
    info = cache.get("model_info")
    if todo:
        scorer = M.BERTScorer(model)
        info = scorer.describe()
        items = list(todo.items())
        scores = scorer.score([p for _, (p, _) in items], [g for _, (_, g) in items])
        cache["scores"].update({k: rounded(s) for (k, _), s in zip(items, scores)})
        cache["model_info"] = info
        write_json(cache_path, cache)
    for rows in per_system.values():
        for r in rows:
            if id(r) in keys:
                r["scores"]["bertscore"] = cache["scores"][keys[id(r)]]
    return info or {"model": model}


def aggregate(
    per_system: dict[str, list[dict]], instances: dict[str, dict], reference: str | None
) -> dict[str, Any]:
    """``metrics.json``: per system, every metric per seed and as mean ± std; breakdowns; p-values."""
    systems: dict[str, Any] = {}
    for name, rows in per_system.items():
        seeds = _by_seed(rows)
        per_seed = {s: _seed_metrics(rs) for s, rs in seeds.items()}
        keys = list(next(iter(per_seed.values())).keys()) if per_seed else []
        summary = {k: _ms([per_seed[s][k] for s in per_seed]) for k in keys}
        behaviours: dict[str, Any] = {}
        for b in BEHAVIOURS:
            sub = {s: [r for r in rs if r["expected_behaviour"] == b] for s, rs in seeds.items()}
            if any(sub.values()):
                bm = {s: _seed_metrics(rs) for s, rs in sub.items() if rs}
                behaviours[b] = {
                    k: _ms([bm[s][k] for s in bm])
                    for k in (
                        "n",
                        "accuracy",
                        "abstention_rate",
                        "strict_em",
                        *(f"route_{x}" for x in ROUTES),
                    )
                }
        first = next(iter(seeds.values()), [])
        systems[name] = {
            "seeds": {
                str(s): {k: (rounded(v) if v is not None else None) for k, v in m.items()}
                for s, m in per_seed.items()
            },
            "mean_std": summary,
            "behaviours": behaviours,
            "validity": _validity(first, instances),
            "reused_seeds": sorted({r["seed"] for r in rows if r.get("reused_from_seed") is not None}),
        }
    naive = systems.get("naive", {}).get("mean_std", {}).get("latency_s", {}).get("mean")
    for s in systems.values():
        lat = s["mean_std"].get("latency_s", {}).get("mean")
        s["relative_cost_vs_naive"] = rounded(lat / naive) if lat is not None and naive else None
    return {"systems": systems, "p_values": _pvalues(per_system, reference), "reference": reference}


# ------------------------------------------------------------------------------------------------ markdown
def _fmt(cell: dict[str, float | None] | None, digits: int = 3) -> str:
    if not cell or cell.get("mean") is None:
        return "–"
    return M.format_mean_std(cell["mean"], cell["std"] or 0.0, digits)


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _p(pv: dict, name: str, metric: str) -> str:
    v = pv.get(name, {}).get(metric)
    return "–" if v is None else (f"{v:.3f}" if v >= 0.001 else "<0.001")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(metrics: dict[str, Any], meta: dict[str, Any]) -> str:
    """``report.md``: the settings, then Tables 3, 4, 5, 7, 8, 11 and 13, then the plots."""
    S = metrics["systems"]
    pv = metrics["p_values"]
    ref = metrics["reference"]
    names = list(S)
    ds = meta["dataset"]
    out = [f"# Evaluation report — {ds}", ""]
    out += [
        f"- Data: `{meta['data']}` — {meta['instances']} instances (split: {meta['split']}"
        + (f", limit {meta['limit']}" if meta.get("limit") else "")
        + ")",
        f"- Systems: {', '.join(names)}; seeds: {', '.join(map(str, meta['seeds']))}"
        + (f"; reference for p-values: **{ref}** (paired bootstrap, 10,000 resamples)" if ref else ""),
        f"- Evaluators: {meta['evaluator']}; generator: {meta['generator']}; k = {meta['k']}; judge: **{meta['judge']}**",
        f"- BERTScore model: {meta['bertscore'].get('model')} (layer {meta['bertscore'].get('layer')}, "
        f"rescaled: {meta['bertscore'].get('rescaled', False)})",
        f"- Abstention detector: {M.REFUSAL_DETECTOR_VERSION} (on the response text, every system alike)",
    ]
    reused = {n: s["reused_seeds"] for n, s in S.items() if s["reused_seeds"]}
    if reused:
        out.append(
            "- Greedy decoding: every system is deterministic, so seeds "
            + ", ".join(sorted({str(x) for v in reused.values() for x in v}))
            + " reuse the first seed's answers; their std is 0 by construction."
        )
    out.append("")

    def ms(n: str, k: str, d: int = 3) -> str:
        return _fmt(S[n]["mean_std"].get(k), d)

    t3 = ["system", "EM", "F1", "accuracy", "ROUGE-L", "BERTScore"]
    has_strict = any(S[n]["mean_std"].get("strict_em", {}).get("mean") is not None for n in names)
    if has_strict:
        t3.append("strict EM (RAMDocs)")
    if pv:
        t3 += [f"p(F1 vs {ref})", f"p(acc vs {ref})"]
    rows = []
    for n in names:
        row = [n, ms(n, "em"), ms(n, "f1"), ms(n, "accuracy"), ms(n, "rouge_l"), ms(n, "bertscore")]
        if has_strict:
            row.append(ms(n, "strict_em"))
        if pv:
            row += [_p(pv, n, "f1"), _p(pv, n, "accuracy")]
        rows.append(row)
    out += ["## Table 3 — answer quality", "", _table(t3, rows), ""]

    out += [
        f"## Table 4 — hallucination and conflict resolution (judge: {meta['judge']})",
        "",
        _table(
            ["system", "hallucination rate ↓", "conflict-resolution rate ↑"],
            [[n, ms(n, "hallucination_rate"), ms(n, "conflict_resolution_rate")] for n in names],
        ),
        "",
        "## Table 5 — refusal (Eqs 23–25)",
        "",
        _table(
            ["system", "precision", "recall", "F1", "abstention rate"],
            [
                [
                    n,
                    ms(n, "refusal_precision"),
                    ms(n, "refusal_recall"),
                    ms(n, "refusal_f1"),
                    ms(n, "abstention_rate"),
                ]
                for n in names
            ],
        ),
        "",
        "## Table 7 — calibration (ECE with 15 equal-width bins, Eqs 26–27; AURC)",
        "",
        _table(["system", "ECE ↓", "AURC ↓"], [[n, ms(n, "ece"), ms(n, "aurc")] for n in names]),
        "",
        "Correct = a gold answer is contained in the response; confidence = the system's reported confidence "
        "(Eq 27: the largest fused singleton mass; `calibrated_confidence` when a calibration file is loaded).",
        "",
        "## Table 8 — behaviour breakdown",
        "",
    ]
    rows = []
    for n in names:
        for b, bm in S[n]["behaviours"].items():
            rows.append(
                [
                    n,
                    b,
                    _num(bm["n"]["mean"], 0),
                    _fmt(bm["accuracy"]),
                    _fmt(bm["abstention_rate"]),
                    " / ".join(_num(bm[f"route_{x}"]["mean"], 2) for x in ROUTES),
                    _fmt(bm["strict_em"]),
                ]
            )
    out += [
        _table(
            [
                "system",
                "expected behaviour",
                "n",
                "accuracy",
                "abstention",
                "direct / conflict / abstain",
                "strict EM",
            ],
            rows,
        ),
        "",
        "## Table 11 — efficiency",
        "",
    ]
    rows = [
        [
            n,
            ms(n, "latency_s", 2),
            ms(n, "peak_rss_mib", 0),
            ms(n, "logical_decisions", 1),
            ms(n, "batched_passes", 2),
            _num(S[n]["relative_cost_vs_naive"], 2),
        ]
        for n in names
    ]
    out += [
        _table(
            [
                "system",
                "latency s/query",
                "peak RSS MiB",
                "logical decisions/query (evaluator + generator)",
                "batched passes/query",
                "relative cost vs Naive RAG",
            ],
            rows,
        ),
        "",
        "Latency = wall time of the batched system call / questions in the batch (models already loaded). "
        "Peak RSS is the process's resident memory while the system answered (all systems share one process "
        "and one loaded generator, so it is an upper bound per system).",
        "",
        "## Table 13 — evaluator validity",
        "",
    ]
    rows = []
    for n in names:
        v = S[n]["validity"]
        if v is None:
            continue
        rows.append(
            [
                n,
                _num(v["chunks"], 0),
                _num(v["json_validity"]),
                _num(v["repair_rate"]),
                _num(v["failure_rate"]),
                _num(v["extraction_fidelity"]),
                _num(v["evidence_label_spearman"]),
                _num(v["evaluator_latency_s"], 3),
            ]
        )
    out += [
        _table(
            [
                "system",
                "chunks",
                "JSON validity",
                "repair rate",
                "failure rate",
                "claim-extraction fidelity",
                "evidence–label Spearman",
                "evaluator s/query",
            ],
            rows,
        )
        if rows
        else "No system with an evaluator was run.",
        "",
        "JSON validity: the evaluator's per-chunk output was schema-valid as produced (the learned evaluator "
        "emits tensors, always valid). Fidelity: among chunks whose passage is labelled with an answer, the "
        "extracted claim matches it. Spearman: a chunk's largest evidence vs whether its passage states an "
        "answer (first seed).",
        "",
        "## Plots",
        "",
        "![reliability](reliability.png) ![hallucination and CRR](hallucination_crr.png) ![routes over U](routes_over_u.png)",
        "",
    ]
    return "\n".join(out)


# ------------------------------------------------------------------------------------------------ plots
def _save_png(fig, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _plots(out_dir: Path, per_system: dict[str, list[dict]], metrics: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    n_bins = 15
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect")
    for name, rows in per_system.items():
        pts = [
            (r["scores"]["confidence"], (r["scores"]["accuracy"] or 0.0) >= 1.0)
            for r in rows
            if r["scores"].get("confidence") is not None
        ]
        if not pts:
            continue
        conf = np.array([c for c, _ in pts])
        corr = np.array([k for _, k in pts], dtype=float)
        bins = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
        xs, ys = [], []
        for b in range(n_bins):
            sel = bins == b
            if sel.any():
                xs.append(conf[sel].mean())
                ys.append(corr[sel].mean())
        ax.plot(xs, ys, "o-", label=f"{name} (ECE {M.expected_calibration_error(conf, corr):.3f})")
    ax.set(xlabel="confidence", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1), title="Reliability diagram")
    ax.legend(fontsize=8)
    _save_png(fig, out_dir / "reliability.png")
    plt.close(fig)
    written.append("reliability.png")

    S = metrics["systems"]
    names = list(S)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(names)), 3.5))
    width = 0.38
    for off, key, label in (
        (-width / 2, "hallucination_rate", "hallucination rate"),
        (width / 2, "conflict_resolution_rate", "conflict-resolution rate"),
    ):
        means = [S[n]["mean_std"][key]["mean"] or 0.0 for n in names]
        stds = [S[n]["mean_std"][key]["std"] or 0.0 for n in names]
        ax.bar(np.arange(len(names)) + off, means, width, yerr=stds, label=label, capsize=3)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set(ylim=(0, 1), ylabel="rate", title="Hallucination and conflict resolution")
    ax.legend(fontsize=8)
    _save_png(fig, out_dir / "hallucination_crr.png")
    plt.close(fig)
    written.append("hallucination_crr.png")

    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    plotted = False
    for name, rows in per_system.items():
        us = [
            (r["record"].get("uncertainty"), r["record"].get("route"))
            for r in rows
            if r["record"].get("uncertainty") is not None
        ]
        if not us:
            continue
        data = [[u for u, rt in us if rt == route] for route in ROUTES]
        ax.hist(data, bins=np.linspace(0, 1, 21), stacked=True, label=[f"{name}: {r}" for r in ROUTES])
        plotted = True
    ax.set(xlabel="fused uncertainty U", ylabel="questions", title="Routes over U")
    if plotted:
        ax.legend(fontsize=7)
    _save_png(fig, out_dir / "routes_over_u.png")
    plt.close(fig)
    written.append("routes_over_u.png")
    return written


# ------------------------------------------------------------------------------------------------ entry
def _sweep(
    out_dir: Path,
    run: dict,
    instances: dict[str, dict],
    per_system: dict[str, list[dict]],
    reference: str | None,
) -> dict[str, Any] | None:
    """Tables 9, 10, 12, the policy and prompt-vs-learned comparisons from the run's cached evidence
    (:func:`inference.evaluation.sweep.run_sweep`, default grid, written to ``OUT/sweep/``; no model call);
    ``None`` when no system of the run has cached evaluator evidence (no EvidentialRAG system)."""
    from inference.evaluation.sweep import has_cached_evidence, run_sweep

    if not any(rows and has_cached_evidence(rows[0]["record"]) for rows in per_system.values()):
        return None
    return run_sweep(out_dir, reference=reference, loaded=(run, instances, per_system))


def write_report(out_dir: Path, opts, run: dict[str, Any], judge_info: dict | None = None) -> dict[str, Any]:
    """Read the run folder's rows and write ``metrics.json``, ``report.md`` and the plots (atomically)."""
    from inference.evaluation.runner import load_rows

    out_dir = Path(out_dir)
    instances = {}
    for line in (out_dir / "instances.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            p = json.loads(line)
            instances[p["instance"]["id"]] = p
    seeds = set(opts.seeds)
    per_system = {
        n: [r for r in load_rows(out_dir / f"{n}.jsonl") if r["seed"] in seeds and r["id"] in instances]
        for n in opts.systems
    }
    bert = _bertscores(out_dir, per_system, opts.bertscore_model)
    reference = opts.reference or next((n for n in ("corrective", "naive") if n in per_system), None)
    if reference is not None and reference not in per_system:
        from evidential.errors import ConfigError

        raise ConfigError(f"--reference {reference!r} is not among the systems run ({', '.join(per_system)})")
    metrics = aggregate(per_system, instances, reference)
    judges = sorted({(r.get("judge") or {}).get("judge", "?") for rows in per_system.values() for r in rows})
    cfg = run["settings"]["config"]
    meta = {
        "dataset": opts.dataset,
        "data": run["settings"]["data"] or f"default ({opts.dataset})",
        "instances": len(instances),
        "split": opts.split,
        "limit": opts.limit,
        "seeds": sorted(seeds),
        "evaluator": ", ".join(
            f"{n} = {n.rsplit('-', 1)[1] if n.startswith('evidential-') else cfg['evaluator']['name']}"
            for n in per_system
            if n.startswith("evidential")
        )
        or "none",
        "generator": cfg["generator"]["name"]
        + (f" ({cfg['generator']['backend']['model']})" if cfg["generator"]["name"] == "llm" else ""),
        "k": cfg["k"],
        "judge": ", ".join(judges) + (f" — {judge_info}" if judge_info and judge_info.get("model") else ""),
        "bertscore": bert,
        "behaviour_counts": dict(Counter(p["instance"]["expected_behaviour"] for p in instances.values())),
    }
    metrics["meta"] = meta
    write_json(out_dir / "metrics.json", metrics)
    from training.utils.io import atomic_write_text

    markdown = render_markdown(metrics, meta)
    sweep = _sweep(out_dir, run, instances, per_system, reference)
    if sweep is not None:
        from inference.evaluation.sweep import render_sweep_markdown

        metrics["sweep"] = sweep["written"]
        markdown += "\n" + render_sweep_markdown(sweep, heading="##") + "\n"
    atomic_write_text(out_dir / "report.md", markdown)
    metrics["plots"] = _plots(out_dir, per_system, metrics)
    return metrics
