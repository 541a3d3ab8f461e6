"""The report's plots: reliability bins by hand, and every PNG written atomically."""

from __future__ import annotations

import numpy as np
import pytest

from inference.evaluation.report import aggregate
from inference.evaluation.report.plots import RELIABILITY_BINS, write_plots
from training.utils.metrics import reliability_bins


def test_reliability_bins_of_the_plot_hand_checked():
    """The report's reliability curve is drawn from the shared ECE bins."""
    assert RELIABILITY_BINS == 15
    conf = np.array([0.0, 0.05, 0.5, 0.52, 1.0])
    corr = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    bins = reliability_bins(conf, corr, n_bins=10)
    has = bins.count > 0
    xs, ys = list(bins.confidence[has]), list(bins.accuracy[has])
    # bins (0, 0.1] (0 joins the first), (0.4, 0.5], (0.5, 0.6], (0.9, 1.0]
    assert xs == pytest.approx([0.025, 0.5, 0.52, 1.0])
    assert ys == pytest.approx([0.5, 1.0, 0.0, 1.0])


def test_write_plots_writes_three_pngs_and_no_temporary_file(tmp_path, rows_factory):
    pytest.importorskip("matplotlib")
    rows = [
        rows_factory(1, "a", confidence=0.9, route="direct", record={"uncertainty": 0.1}),
        rows_factory(1, "b", accuracy=0.0, confidence=0.2, route="abstain", record={"uncertainty": 0.8}),
    ]
    per_system = {"evidential": rows}
    names = write_plots(tmp_path, per_system, aggregate(per_system, {}, None))
    assert names == ["reliability.png", "hallucination_crr.png", "routes_over_u.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    for n in names:
        assert (tmp_path / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
