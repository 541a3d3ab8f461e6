"""Reliability diagrams (accuracy per equal-width confidence bin against the diagonal) and the atomic PNG
writer behind every plot the project saves. matplotlib is imported when a plot is drawn (Agg backend)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from training.utils.metrics import expected_calibration_error, reliability_bins

__all__ = ["ReliabilityPanel", "plot_reliability", "pyplot", "save_png", "save_reliability_diagram"]

#: One panel of a reliability diagram: ``(title, confidence, correct)``.
ReliabilityPanel = tuple[str, Sequence[float], Sequence[bool]]


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: Path, dpi: int = 110, **savefig_kwargs: Any) -> Path:
    """Write ``fig`` to ``path`` as PNG atomically (a temporary file in the same folder, then
    ``os.replace``), creating the folder; a reader never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi, format="png", **savefig_kwargs)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def plot_reliability(
    ax: Any,
    title: str,
    confidence: Sequence[float],
    correct: Sequence[bool],
    n_bins: int = 15,
    style: str = "bars",
) -> float:
    """Draw the reliability of ``confidence`` against ``correct`` on ``ax`` over the ECE bins of
    :func:`training.utils.metrics.reliability_bins` and return the ECE.

    ``style="bars"`` draws one panel: accuracy bars per non-empty bin, each bin's mean confidence, bar labels =
    samples per bin, the diagonal, and the ECE and sample count in the title. ``style="line"`` adds one
    curve (mean confidence → accuracy per non-empty bin) labelled ``"{title} (ECE ...)"`` to a shared axis,
    for several systems on one plot.
    """
    if style not in ("bars", "line"):
        raise ValueError(f"style must be 'bars' or 'line'; got {style!r}")
    bins = reliability_bins(confidence, correct, n_bins)
    ece = expected_calibration_error(confidence, correct, n_bins)
    has = bins.count > 0
    if style == "line":
        ax.plot(bins.confidence[has], bins.accuracy[has], "o-", label=f"{title} (ECE {ece:.3f})")
        return ece
    width = 1.0 / n_bins
    centers = (np.arange(n_bins) + 0.5) * width
    ax.bar(
        centers[has],
        bins.accuracy[has],
        width=width * 0.9,
        color="#4C72B0",
        edgecolor="black",
        label="accuracy",
    )
    ax.scatter(
        bins.confidence[has], bins.accuracy[has], color="#DD8452", zorder=3, s=14, label="mean confidence"
    )
    for x, a, n in zip(centers[has], bins.accuracy[has], bins.count[has]):
        ax.text(x, a + 0.015, str(int(n)), ha="center", fontsize=7)
    ax.plot([0, 1], [0, 1], "--", color="gray", lw=1)
    ax.set_title(f"{title}\nECE {ece:.3f} (n = {int(bins.count.sum())})", fontsize=10)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.16)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel("confidence")
    ax.legend(loc="upper left", fontsize=7, ncol=2, frameon=False)
    return ece


def save_reliability_diagram(
    panels: Sequence[ReliabilityPanel],
    path: Path,
    n_bins: int = 15,
    ylabel: str = "fraction correct (selected claim is gold)",
) -> Path:
    """Reliability diagram PNG with one panel per ``(title, confidence, correct)`` (:func:`plot_reliability`),
    written atomically (:func:`save_png`)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
    try:
        for ax, (title, conf, ok) in zip(axes[0], panels):
            plot_reliability(ax, title, conf, ok, n_bins)
            ax.set_ylabel(ylabel)
        fig.tight_layout()
        return save_png(fig, path, dpi=110)
    finally:
        plt.close(fig)
