""":func:`write_report`: read an evaluation folder's rows and write ``metrics.json``, ``report.md`` (with the
sweep section when the run has cached evaluator evidence) and the plots."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from evidential.errors import ConfigError
from inference.evaluation import metrics as M
from inference.evaluation.report.markdown import render_markdown
from inference.evaluation.report.plots import write_plots
from inference.evaluation.report.stats import aggregate
from inference.evaluation.rows import load_instances, load_rows
from inference.io import atomic_write_text, rounded, write_json

__all__ = ["write_report"]


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


def _sweep(
    out_dir: Path,
    run: dict,
    instances: dict[str, dict],
    per_system: dict[str, list[dict]],
    reference: str | None,
) -> tuple[list[str], str] | None:
    """Tables 9, 10, 12, the policy and prompt-vs-learned comparisons from the run's cached evidence
    (:func:`inference.evaluation.sweep.run_sweep`, default grid, written to ``OUT/sweep/``; no model call).

    Returns:
        The sweep files written and the sweep's Markdown section; ``None`` when no system of the run has
        cached evaluator evidence (no EvidentialRAG system).
    """
    # imported here: the sweep module loads torch, and it builds on this package's stats and tables
    from inference.evaluation.sweep import has_cached_evidence, render_sweep_markdown, run_sweep

    if not any(rows and has_cached_evidence(rows[0]["record"]) for rows in per_system.values()):
        return None
    sweep = run_sweep(out_dir, reference=reference, loaded=(run, instances, per_system))
    return sweep["written"], render_sweep_markdown(sweep, heading="##")


def _meta(
    opts,
    run: dict[str, Any],
    instances: dict[str, dict],
    per_system: dict[str, list[dict]],
    bertscore: dict[str, Any],
    judge_info: dict | None,
) -> dict[str, Any]:
    """``metrics.json``'s ``meta``: what the report's settings section states."""
    judges = sorted({(r.get("judge") or {}).get("judge", "?") for rows in per_system.values() for r in rows})
    cfg = run["settings"]["config"]
    return {
        "dataset": opts.dataset,
        "data": run["settings"]["data"] or f"default ({opts.dataset})",
        "instances": len(instances),
        "split": opts.split,
        "limit": opts.limit,
        "seeds": sorted(set(opts.seeds)),
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
        "bertscore": bertscore,
        "behaviour_counts": dict(Counter(p["instance"]["expected_behaviour"] for p in instances.values())),
    }


def write_report(out_dir: Path, opts, run: dict[str, Any], judge_info: dict | None = None) -> dict[str, Any]:
    """Read the run folder's rows and write ``metrics.json``, ``report.md`` and the plots (atomically).

    Args:
        out_dir: The run folder (``run.json``, ``instances.jsonl``, ``<system>.jsonl``).
        opts: The run's :class:`~inference.evaluation.runner.EvaluateOptions` (systems, seeds, dataset, split,
            limit, reference, BERTScore model).
        run: ``run.json``'s content.
        judge_info: The judge's ``describe()``; named in the settings when it has a model.

    Returns:
        ``metrics.json``'s content, plus ``sweep`` (the sweep files written, when there is a sweep section)
        and ``plots`` (the PNG file names).

    Raises:
        ConfigError: ``opts.reference`` is not among the systems run.
    """
    out_dir = Path(out_dir)
    instances = load_instances(out_dir / "instances.jsonl")
    seeds = set(opts.seeds)
    per_system = {
        n: [r for r in load_rows(out_dir / f"{n}.jsonl") if r["seed"] in seeds and r["id"] in instances]
        for n in opts.systems
    }
    bert = _bertscores(out_dir, per_system, opts.bertscore_model)
    reference = opts.reference or next((n for n in ("corrective", "naive") if n in per_system), None)
    if reference is not None and reference not in per_system:
        raise ConfigError(f"--reference {reference!r} is not among the systems run ({', '.join(per_system)})")
    metrics = aggregate(per_system, instances, reference)
    meta = _meta(opts, run, instances, per_system, bert, judge_info)
    metrics["meta"] = meta
    write_json(out_dir / "metrics.json", metrics)
    markdown = render_markdown(metrics, meta)
    sweep = _sweep(out_dir, run, instances, per_system, reference)
    if sweep is not None:
        metrics["sweep"], sweep_markdown = sweep
        markdown += "\n" + sweep_markdown + "\n"
    atomic_write_text(out_dir / "report.md", markdown)
    metrics["plots"] = write_plots(out_dir, per_system, metrics)
    return metrics
