"""Markdown cells and tables shared by the report and the sweep."""

from __future__ import annotations

from inference.evaluation.report.tables import format_cell, format_number, format_pvalue, markdown_table


def test_format_cell_and_number():
    assert format_cell({"mean": 0.51234, "std": 0.0129}) == "0.512 ± 0.013"
    assert format_cell({"mean": 2.0, "std": None}, 1) == "2.0 ± 0.0"
    assert format_cell({"mean": None, "std": None}) == "–" and format_cell(None) == "–"
    assert format_number(0.12345) == "0.123" and format_number(34.0, 0) == "34"
    assert format_number(None) == "–" and format_number(float("nan")) == "–"


def test_format_pvalue():
    pv = {"a": {"f1": 0.04567, "accuracy": 0.0002, "strict_em": None}}
    assert format_pvalue(pv, "a", "f1") == "0.046"
    assert format_pvalue(pv, "a", "accuracy") == "<0.001"
    assert format_pvalue(pv, "a", "strict_em") == "–" and format_pvalue(pv, "b", "f1") == "–"


def test_markdown_table():
    assert markdown_table(["system", "F1"], [["naive", "0.5"], ["rag", "–"]]) == (
        "| system | F1 |\n|---|---|\n| naive | 0.5 |\n| rag | – |"
    )
    assert markdown_table(["a"], []) == "| a |\n|---|"


def test_format_number_signed_and_missing():
    assert format_number(0.51234) == "0.512"
    assert format_number(0.5, 1) == "0.5"
    assert format_number(0.25, 2, signed=True) == "+0.25" and format_number(-0.25, 2, signed=True) == "-0.25"
    assert format_number(None) == "–" and format_number(float("nan")) == "–"
