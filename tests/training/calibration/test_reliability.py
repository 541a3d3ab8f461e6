"""The reliability diagram and the atomic PNG writer."""

from __future__ import annotations

import os

import pytest

from training.calibration.reliability import plot_reliability, pyplot, save_png, save_reliability_diagram
from training.utils.metrics import expected_calibration_error

PNG = b"\x89PNG\r\n\x1a\n"


def test_plot_reliability_draws_the_ece_bins():
    plt = pyplot()
    fig, ax = plt.subplots()
    conf, ok = [0.1, 0.15, 0.9, 0.95, 0.6], [False, True, True, True, False]
    ece = plot_reliability(ax, "panel", conf, ok, n_bins=5)
    assert ece == expected_calibration_error(conf, ok, 5)
    bars = ax.patches
    # non-empty bins 0, 2, 4 -> three bars at their centres with the bins' accuracy as height
    assert [round(b.get_x() + b.get_width() / 2, 6) for b in bars] == [0.1, 0.5, 0.9]
    assert [b.get_height() for b in bars] == [0.5, 0.0, 1.0]
    assert [t.get_text() for t in ax.texts] == ["2", "1", "2"]
    assert ax.get_title() == f"panel\nECE {ece:.3f} (n = 5)"
    fig2, ax2 = plt.subplots()
    assert plot_reliability(ax2, "sys", conf, ok, n_bins=5, style="line") == ece
    (line,) = ax2.lines
    assert list(line.get_ydata()) == [0.5, 0.0, 1.0] and line.get_label() == f"sys (ECE {ece:.3f})"
    with pytest.raises(ValueError, match="style"):
        plot_reliability(ax2, "x", conf, ok, style="pie")
    plt.close(fig)
    plt.close(fig2)


def test_save_reliability_diagram_writes_a_png_atomically(tmp_path):
    out = tmp_path / "sub" / "r.png"
    got = save_reliability_diagram([("a", [0.2, 0.8], [False, True]), ("b", [], [])], out)
    assert got == out and out.read_bytes()[:8] == PNG
    assert os.listdir(out.parent) == ["r.png"]  # no temporary file left behind


def test_save_png_keeps_the_old_file_when_drawing_fails(tmp_path):
    out = tmp_path / "p.png"
    out.write_bytes(b"old")

    class Broken:
        def savefig(self, path, **kwargs):
            with open(path, "wb") as fh:
                fh.write(b"half")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        save_png(Broken(), out)
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["p.png"]
