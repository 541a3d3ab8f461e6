"""``report.md``: the run's settings, then one section per paper table (3, 4, 5, 7, 8, 11, 13), then the plots.

Each section is a function of ``metrics.json``'s content returning its Markdown lines (heading, blank line,
table, blank line, notes); :func:`render_markdown` joins them.
"""

from __future__ import annotations

from typing import Any

from inference.evaluation import metrics as M
from inference.evaluation.report.stats import ROUTES
from inference.evaluation.report.tables import format_cell, format_number, format_pvalue, markdown_table

__all__ = ["render_markdown"]


def _ms(systems: dict[str, Any], name: str, key: str, digits: int = 3) -> str:
    return format_cell(systems[name]["mean_std"].get(key), digits)


def settings_section(metrics: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The title and the run's settings: data, systems and seeds, models, judge, abstention detector, and
    the greedy-decoding note when seeds reuse the first seed's answers."""
    S = metrics["systems"]
    ref = metrics["reference"]
    out = [f"# Evaluation report — {meta['dataset']}", ""]
    out += [
        f"- Data: `{meta['data']}` — {meta['instances']} instances (split: {meta['split']}"
        + (f", limit {meta['limit']}" if meta.get("limit") else "")
        + ")",
        f"- Systems: {', '.join(S)}; seeds: {', '.join(map(str, meta['seeds']))}"
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
    return out


def answer_quality_section(metrics: dict[str, Any]) -> list[str]:
    """Table 3: EM, F1, accuracy, ROUGE-L, BERTScore of the whole response; EM and F1 of the committed short
    answer(s); strict EM of the response and of the committed set (when any system has it); the p-values
    of F1 and accuracy against the reference."""
    S, pv, ref = metrics["systems"], metrics["p_values"], metrics["reference"]
    header = ["system", "EM", "F1", "accuracy", "ROUGE-L", "BERTScore", "short EM", "short F1"]
    has_strict = any(S[n]["mean_std"].get("strict_em", {}).get("mean") is not None for n in S)
    if has_strict:
        header += ["strict EM (RAMDocs)", "short strict EM"]
    if pv:
        header += [f"p(F1 vs {ref})", f"p(acc vs {ref})"]
    rows = []
    for n in S:
        row = [
            n,
            *(_ms(S, n, k) for k in ("em", "f1", "accuracy", "rouge_l", "bertscore", "short_em", "short_f1")),
        ]
        if has_strict:
            row += [_ms(S, n, "strict_em"), _ms(S, n, "short_strict_em")]
        if pv:
            row += [format_pvalue(pv, n, "f1"), format_pvalue(pv, n, "accuracy")]
        rows.append(row)
    return ["## Table 3 — answer quality", "", markdown_table(header, rows), ""]


def hallucination_section(metrics: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Table 4: hallucination and conflict-resolution rates (the judge named)."""
    S = metrics["systems"]
    return [
        f"## Table 4 — hallucination and conflict resolution (judge: {meta['judge']})",
        "",
        markdown_table(
            ["system", "hallucination rate ↓", "conflict-resolution rate ↑"],
            [[n, _ms(S, n, "hallucination_rate"), _ms(S, n, "conflict_resolution_rate")] for n in S],
        ),
        "",
    ]


def refusal_section(metrics: dict[str, Any]) -> list[str]:
    """Table 5: refusal precision, recall, F1 and the abstention rate."""
    S = metrics["systems"]
    keys = ("refusal_precision", "refusal_recall", "refusal_f1", "abstention_rate")
    return [
        "## Table 5 — refusal (Eqs 23–25)",
        "",
        markdown_table(
            ["system", "precision", "recall", "F1", "abstention rate"],
            [[n, *(_ms(S, n, k) for k in keys)] for n in S],
        ),
        "",
    ]


def calibration_section(metrics: dict[str, Any]) -> list[str]:
    """Table 7: ECE and AURC of the reported confidence."""
    S = metrics["systems"]
    return [
        "## Table 7 — calibration (ECE with 15 equal-width bins, Eqs 26–27; AURC)",
        "",
        markdown_table(["system", "ECE ↓", "AURC ↓"], [[n, _ms(S, n, "ece"), _ms(S, n, "aurc")] for n in S]),
        "",
        "Correct = a gold answer is contained in the response; confidence = the system's reported confidence "
        "(Eq 27: the largest fused singleton mass; `calibrated_confidence` when a calibration file is loaded).",
        "",
    ]


def behaviour_section(metrics: dict[str, Any]) -> list[str]:
    """Table 8: per system and expected behaviour, n, accuracy, abstention, route shares and strict EM."""
    rows = []
    for n, s in metrics["systems"].items():
        for b, bm in s["behaviours"].items():
            rows.append(
                [
                    n,
                    b,
                    format_number(bm["n"]["mean"], 0),
                    format_cell(bm["accuracy"]),
                    format_cell(bm["abstention_rate"]),
                    " / ".join(format_number(bm[f"route_{x}"]["mean"], 2) for x in ROUTES),
                    format_cell(bm["strict_em"]),
                ]
            )
    header = [
        "system",
        "expected behaviour",
        "n",
        "accuracy",
        "abstention",
        "direct / conflict / abstain",
        "strict EM",
    ]
    return ["## Table 8 — behaviour breakdown", "", markdown_table(header, rows), ""]


def efficiency_section(metrics: dict[str, Any]) -> list[str]:
    """Table 11: latency, peak memory, logical decisions and batched passes per query, cost vs Naive RAG."""
    S = metrics["systems"]
    rows = [
        [
            n,
            _ms(S, n, "latency_s", 2),
            _ms(S, n, "peak_rss_mib", 0),
            _ms(S, n, "logical_decisions", 1),
            _ms(S, n, "batched_passes", 2),
            format_number(S[n]["relative_cost_vs_naive"], 2),
        ]
        for n in S
    ]
    header = [
        "system",
        "latency s/query",
        "peak RSS MiB",
        "logical decisions/query (evaluator + generator)",
        "batched passes/query",
        "relative cost vs Naive RAG",
    ]
    return [
        "## Table 11 — efficiency",
        "",
        markdown_table(header, rows),
        "",
        "Latency = wall time of the batched system call / questions in the batch (models already loaded). "
        "Peak RSS is the process's resident memory while the system answered (all systems share one process "
        "and one loaded generator, so it is an upper bound per system).",
        "",
    ]


def validity_section(metrics: dict[str, Any]) -> list[str]:
    """Table 13: evaluator validity of the systems with an evaluator (a sentence when there is none)."""
    rows = []
    for n, s in metrics["systems"].items():
        v = s["validity"]
        if v is None:
            continue
        rows.append(
            [
                n,
                format_number(v["chunks"], 0),
                *(
                    format_number(v[k])
                    for k in (
                        "json_validity",
                        "repair_rate",
                        "failure_rate",
                        "extraction_fidelity",
                        "ungrounded_rate",
                        "evidence_label_spearman",
                    )
                ),
                format_number(v["evaluator_latency_s"], 3),
            ]
        )
    header = [
        "system",
        "chunks",
        "JSON validity",
        "repair rate",
        "failure rate",
        "claim-extraction fidelity",
        "ungrounded chunks",
        "evidence–label Spearman",
        "evaluator s/query",
    ]
    return [
        "## Table 13 — evaluator validity",
        "",
        markdown_table(header, rows) if rows else "No system with an evaluator was run.",
        "",
        "JSON validity: the evaluator's per-chunk output was schema-valid as produced (the learned evaluator "
        "emits tensors, always valid). Fidelity: among chunks whose passage is labelled with an answer, the "
        "answer the evaluator read from the chunk (`extracted`, before its support decision) matches it. Ungrounded chunks: the share whose evidence for a claim they do not state "
        "was dropped by the grounding check (– when it was off). Spearman: a chunk's largest evidence vs whether its passage states an "
        "answer (first seed).",
        "",
    ]


def plots_section() -> list[str]:
    """The three plots, by file name."""
    return [
        "## Plots",
        "",
        "![reliability](reliability.png) ![hallucination and CRR](hallucination_crr.png) ![routes over U](routes_over_u.png)",
        "",
    ]


def render_markdown(metrics: dict[str, Any], meta: dict[str, Any]) -> str:
    """``report.md``: the settings, then Tables 3, 4, 5, 7, 8, 11 and 13, then the plots."""
    sections = [
        settings_section(metrics, meta),
        answer_quality_section(metrics),
        hallucination_section(metrics, meta),
        refusal_section(metrics),
        calibration_section(metrics),
        behaviour_section(metrics),
        efficiency_section(metrics),
        validity_section(metrics),
        plots_section(),
    ]
    return "\n".join(line for section in sections for line in section)
