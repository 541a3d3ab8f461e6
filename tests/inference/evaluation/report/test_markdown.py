"""``report.md`` from the aggregated metrics of hand-made rows: sections in order, cells with their values."""

from __future__ import annotations

import pytest

from inference.evaluation.report import aggregate, render_markdown
from inference.evaluation.report.markdown import (
    answer_quality_section,
    behaviour_section,
    settings_section,
    validity_section,
)

META = {
    "dataset": "ramdocs",
    "data": "data/ramdocs.jsonl",
    "instances": 2,
    "split": "all",
    "limit": 2,
    "seeds": [1, 2],
    "evaluator": "evidential = learned",
    "generator": "template",
    "k": 5,
    "judge": "label/1.3",
    "bertscore": {"model": "mini", "layer": 6},
}


@pytest.fixture
def metrics(rows_factory):
    ev = [rows_factory(s, "a", accuracy=acc, route="direct") for s, acc in ((1, 1.0), (2, 0.0))]
    ev += [
        rows_factory(
            s,
            "b",
            behaviour="unanswerable",
            accuracy=None,
            refused=True,
            route="abstain",
            reused=1 if s == 2 else None,
        )
        for s in (1, 2)
    ]
    naive = [rows_factory(s, i, accuracy=0.0) for s in (1, 2) for i in "ab"]
    return aggregate({"evidential": ev, "naive": naive}, {}, "naive")


def test_sections_come_in_table_order(metrics):
    md = render_markdown(metrics, META)
    titles = [line for line in md.splitlines() if line.startswith("#")]
    assert titles == [
        "# Evaluation report — ramdocs",
        "## Table 3 — answer quality",
        "## Table 4 — hallucination and conflict resolution (judge: label/1.3)",
        "## Table 5 — refusal (Eqs 23–25)",
        "## Table 7 — calibration (ECE with 15 equal-width bins, Eqs 26–27; AURC)",
        "## Table 8 — behaviour breakdown",
        "## Table 11 — efficiency",
        "## Table 13 — evaluator validity",
        "## Plots",
    ]
    assert md.endswith("![routes over U](routes_over_u.png)\n")


def test_settings_section(metrics):
    lines = settings_section(metrics, META)
    assert lines[2] == "- Data: `data/ramdocs.jsonl` — 2 instances (split: all, limit 2)"
    assert lines[3] == (
        "- Systems: evidential, naive; seeds: 1, 2; reference for p-values: **naive** "
        "(paired bootstrap, 10,000 resamples)"
    )
    assert "(layer 6, rescaled: False)" in lines[5]
    assert lines[-2].startswith("- Greedy decoding: every system is deterministic, so seeds 2 reuse")
    assert lines[-1] == ""


def test_answer_quality_section_cells(metrics):
    lines = answer_quality_section(metrics)
    assert lines[0] == "## Table 3 — answer quality" and lines[1] == lines[3] == ""
    table = lines[2].splitlines()
    assert (
        table[0]
        == "| system | EM | F1 | accuracy | ROUGE-L | BERTScore | short EM | short F1 | p(F1 vs naive) | p(acc vs naive) |"
    )
    # evidential: accuracy 1.0 on seed 1, 0.0 on seed 2 (the unanswerable row has no gold score)
    cells = table[2].strip("| ").split(" | ")
    assert cells[:6] == ["evidential", *["0.500 ± 0.707"] * 4, "–"]
    assert cells[8] == cells[9] and 0.0 < float(cells[8]) <= 1.0
    assert table[3].startswith(
        "| naive | 0.000 ± 0.000 | 0.000 ± 0.000 | 0.000 ± 0.000 | 0.000 ± 0.000 | – |"
    )


def test_behaviour_and_validity_sections(metrics):
    table = behaviour_section(metrics)[2].splitlines()
    assert (
        table[2] == "| evidential | answerable | 1 | 0.500 ± 0.707 | 0.000 ± 0.000 | 1.00 / 0.00 / 0.00 | – |"
    )
    assert table[3] == "| evidential | unanswerable | 1 | – | 1.000 ± 0.000 | 0.00 / 0.00 / 1.00 | – |"
    assert validity_section(metrics)[2] == "No system with an evaluator was run."
