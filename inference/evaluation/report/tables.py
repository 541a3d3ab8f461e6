"""Markdown cells and tables of the reports (the evaluation report and the sweep): "–" for a missing value."""

from __future__ import annotations

import math
from collections.abc import Sequence

from inference.evaluation import metrics as M

__all__ = ["format_cell", "format_number", "format_pvalue", "markdown_table"]


def format_cell(cell: dict[str, float | None] | None, digits: int = 3) -> str:
    """A ``{"mean", "std"}`` cell as ``mean ± std`` (a missing std as 0); "–" when there is no mean."""
    if not cell or cell.get("mean") is None:
        return "–"
    return M.format_mean_std(cell["mean"], cell["std"] or 0.0, digits)


def format_number(x: float | None, digits: int = 3, signed: bool = False) -> str:
    """A table cell: ``x`` with ``digits`` decimals (with a sign when ``signed``); "–" for ``None`` or NaN.

    >>> format_number(0.51234), format_number(0.25, 2, signed=True), format_number(None)
    ('0.512', '+0.25', '–')
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def format_pvalue(p_values: dict, name: str, metric: str) -> str:
    """The p-value of ``name`` on ``metric`` with 3 decimals ("<0.001" below that); "–" when missing."""
    v = p_values.get(name, {}).get(metric)
    return "–" if v is None else (f"{v:.3f}" if v >= 0.001 else "<0.001")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (header, ``---`` separators, one line per row)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
