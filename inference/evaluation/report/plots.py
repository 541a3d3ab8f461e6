"""The report's PNG plots (matplotlib, Agg backend), each written atomically: ``reliability.png``
(reliability diagram), ``hallucination_crr.png`` (bars with the std over seeds) and ``routes_over_u.png``
(routes stacked over the fused uncertainty U)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from inference.evaluation.report.stats import ROUTES
from training.calibration.reliability import plot_reliability, pyplot, save_png

__all__ = ["RELIABILITY_BINS", "write_plots"]

#: Equal-width confidence bins of the reliability diagram (the ECE's bins).
RELIABILITY_BINS = 15


def _reliability(plt, out_dir: Path, per_system: dict[str, list[dict]]) -> str:
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
        plot_reliability(ax, name, conf, corr, n_bins=RELIABILITY_BINS, style="line")
    ax.set(xlabel="confidence", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1), title="Reliability diagram")
    ax.legend(fontsize=8)
    save_png(fig, out_dir / "reliability.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return "reliability.png"


def _hallucination_crr(plt, out_dir: Path, metrics: dict[str, Any]) -> str:
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
    save_png(fig, out_dir / "hallucination_crr.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return "hallucination_crr.png"


def _routes_over_u(plt, out_dir: Path, per_system: dict[str, list[dict]]) -> str:
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
    save_png(fig, out_dir / "routes_over_u.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    return "routes_over_u.png"


def write_plots(out_dir: Path, per_system: dict[str, list[dict]], metrics: dict[str, Any]) -> list[str]:
    """Write the three plots into ``out_dir``; returns their file names."""
    plt = pyplot()
    return [
        _reliability(plt, out_dir, per_system),
        _hallucination_crr(plt, out_dir, metrics),
        _routes_over_u(plt, out_dir, per_system),
    ]
