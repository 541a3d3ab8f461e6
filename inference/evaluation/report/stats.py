"""The numbers of a report: per-seed metrics of a system's rows, mean ± std over seeds, evaluator validity
and paired bootstrap p-values; :func:`aggregate` assembles them into ``metrics.json``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from inference.evaluation import metrics as M
from inference.io import rounded
from training.utils.metrics import span_matches

__all__ = [
    "BEHAVIOURS",
    "P_VALUE_METRICS",
    "ROUTES",
    "aggregate",
    "evaluator_validity",
    "mean_or_none",
    "mean_std_cell",
    "paired_pvalues",
    "rows_by_seed",
    "seed_metrics",
]

ROUTES = ("direct", "conflict", "abstain")
BEHAVIOURS = ("answerable", "ambiguous", "misinformation", "conflict", "unanswerable")
P_VALUE_METRICS = ("f1", "accuracy", "strict_em", "short_f1")


def mean_or_none(xs: Sequence[float | None]) -> float | None:
    """The mean of the values that are not ``None``; ``None`` when there are none."""
    vals = [float(x) for x in xs if x is not None]
    return float(np.mean(vals)) if vals else None


def mean_std_cell(values: Sequence[float | None]) -> dict[str, float | None]:
    """``{"mean", "std"}`` (sample std, rounded) of the values that are not ``None``; both ``None`` when
    there are none."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None}
    m, s = M.mean_std(vals)
    return {"mean": rounded(m), "std": rounded(s)}


def rows_by_seed(rows: list[dict]) -> dict[int, list[dict]]:
    """The rows grouped by their ``seed``, in increasing seed order."""
    out: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        out[r["seed"]].append(r)
    return dict(sorted(out.items()))


def _judge_labels(r: dict) -> dict:
    return (r.get("judge") or {}).get("labels") or {}


def seed_metrics(rows: list[dict]) -> dict[str, float | None]:
    """Every scalar metric of one system on one seed."""
    sc = [r["scores"] for r in rows]
    refused = [bool(s["refused"]) for s in sc]
    should = [bool(s["should_refuse"]) for s in sc]
    ref = M.refusal_scores(refused, should)
    conf = [(s["confidence"], (s["accuracy"] or 0.0) >= 1.0) for s in sc if s.get("confidence") is not None]
    labels = [_judge_labels(r) for r in rows]
    out: dict[str, float | None] = {
        "n": float(len(rows)),
        "em": mean_or_none([s["em"] for s in sc]),
        "f1": mean_or_none([s["f1"] for s in sc]),
        "accuracy": mean_or_none([s["accuracy"] for s in sc]),
        "rouge_l": mean_or_none([s["rouge_l"] for s in sc]),
        "bertscore": mean_or_none([s.get("bertscore") for s in sc]),
        "strict_em": mean_or_none([s.get("strict_em") for s in sc]),
        "short_em": mean_or_none([s.get("short_em") for s in sc]),
        "short_f1": mean_or_none([s.get("short_f1") for s in sc]),
        "short_strict_em": mean_or_none([s.get("short_strict_em") for s in sc]),
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
        "latency_s": mean_or_none([r["latency_s"] for r in rows if not r.get("reused_from_seed")]),
        "peak_rss_mib": max(
            (r["peak_rss_mib"] for r in rows if r.get("peak_rss_mib") is not None), default=None
        ),
        "logical_decisions": mean_or_none([r["record"].get("logical_decisions") for r in rows]),
        "batched_passes": mean_or_none(
            [
                r["record"]["batched_passes"] / r.get("batch_size", 1)
                for r in rows
                if r["record"].get("batched_passes") is not None
            ]
        ),
    }
    for route in ROUTES:
        out[f"route_{route}"] = mean_or_none([float(r["record"].get("route") == route) for r in rows])
    return out


def evaluator_validity(rows: list[dict], instances: dict[str, dict]) -> dict[str, float | None] | None:
    """Table 13 for one system's rows (None when its records carry no per-chunk evidence).

    Args:
        rows: One seed's rows of the system.
        instances: The ``instances.jsonl`` rows by instance id (their ``chunks`` and passage ``labels``).
    """
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
    # on the answer read from the chunk ("extracted"); records written before that field: on the answer
    # and the supported claim
    fidelity = [
        float(
            any(
                span_matches(ch.get(key), lab["answer"])
                for key in (("extracted",) if "extracted" in ch else ("answer", "claim"))
            )
        )
        for ch, lab in with_answer
    ]
    labelled = [(ch, lab) for ch, lab in chunks if lab.get("type") is not None]
    best = [max(ch["evidence"].values(), default=0.0) for ch, _ in labelled]
    states = [float(bool(lab.get("answer"))) for _, lab in labelled]
    return {
        "chunks": float(len(chunks)),
        "json_validity": mean_or_none([float(bool(ch.get("valid"))) for ch, _ in chunks]),
        "repair_rate": mean_or_none([float(bool(ch.get("repaired"))) for ch, _ in chunks]),
        "failure_rate": mean_or_none(
            [float(bool(ch.get("errors")) and not ch.get("valid")) for ch, _ in chunks]
        ),
        "extraction_fidelity": mean_or_none(fidelity),
        # grounding (inference.evaluators.grounding): chunks whose evidence for some claim they do not state
        # was dropped; None when the run's records predate the check or it was off
        "ungrounded_rate": mean_or_none(
            [float(ch["grounded"] is False) for ch, _ in chunks if ch.get("grounded") is not None]
        ),
        "evidence_label_spearman": M.spearman(best, states) if len(set(states)) > 1 else None,
        "evaluator_latency_s": mean_or_none(eval_lat),
    }


def paired_pvalues(
    per_system: dict[str, list[dict]], reference: str | None
) -> dict[str, dict[str, float | None]]:
    """Paired bootstrap p-values of :data:`P_VALUE_METRICS` against ``reference`` over the (seed, instance)
    pairs both answered; rows that reuse another seed's answers (greedy decoding) are left out, so repeated
    answers never count as independent evidence. ``{}`` when ``reference`` is not among the systems."""
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


def _behaviours(seeds: dict[int, list[dict]]) -> dict[str, Any]:
    """Table 8 of one system: per expected behaviour present, mean ± std of n, accuracy, abstention,
    strict EM and the route shares."""
    behaviours: dict[str, Any] = {}
    for b in BEHAVIOURS:
        sub = {s: [r for r in rs if r["expected_behaviour"] == b] for s, rs in seeds.items()}
        if any(sub.values()):
            bm = {s: seed_metrics(rs) for s, rs in sub.items() if rs}
            behaviours[b] = {
                k: mean_std_cell([bm[s][k] for s in bm])
                for k in ("n", "accuracy", "abstention_rate", "strict_em", *(f"route_{x}" for x in ROUTES))
            }
    return behaviours


def aggregate(
    per_system: dict[str, list[dict]], instances: dict[str, dict], reference: str | None
) -> dict[str, Any]:
    """``metrics.json``: per system, every metric per seed and as mean ± std; breakdowns; p-values."""
    systems: dict[str, Any] = {}
    for name, rows in per_system.items():
        seeds = rows_by_seed(rows)
        per_seed = {s: seed_metrics(rs) for s, rs in seeds.items()}
        keys = list(next(iter(per_seed.values())).keys()) if per_seed else []
        summary = {k: mean_std_cell([per_seed[s][k] for s in per_seed]) for k in keys}
        first = next(iter(seeds.values()), [])
        systems[name] = {
            "seeds": {
                str(s): {k: (rounded(v) if v is not None else None) for k, v in m.items()}
                for s, m in per_seed.items()
            },
            "mean_std": summary,
            "behaviours": _behaviours(seeds),
            "validity": evaluator_validity(first, instances),
            "reused_seeds": sorted({r["seed"] for r in rows if r.get("reused_from_seed") is not None}),
        }
    naive = systems.get("naive", {}).get("mean_std", {}).get("latency_s", {}).get("mean")
    for s in systems.values():
        lat = s["mean_std"].get("latency_s", {}).get("mean")
        s["relative_cost_vs_naive"] = rounded(lat / naive) if lat is not None and naive else None
    return {"systems": systems, "p_values": paired_pvalues(per_system, reference), "reference": reference}
