"""CRAG (Meta, Task 1&2): web questions with five search results each (full HTML and a snippet).

A record holds ``interaction_id``, ``query``, ``answer``, ``alternative_answers`` (a list, or a list written
as a string), ``question_type``, ``domain``, ``static_or_dynamic``, ``query_time``, ``split`` and
``search_results`` (``page_name``, ``page_url``, ``page_snippet``, ``page_result``). There are no training
rows; evaluation instances (:func:`crag_instances`) have the five pages as passages (the page text, an empty
page falling back to its snippet, recorded in ``meta["snippet_fallback"]``; ``use_snippets`` uses the
snippets only), source = the page URL, labels ``web`` with no answer.

Behaviour rule (:data:`RULES`): a ``false_premise`` question → ``unanswerable`` with gold
``"invalid question"`` (followed by the record's own answer text when it differs), every other question →
``answerable`` with gold ``answer`` + ``alternative_answers``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from training.data.benchmarks.common import (
    EvalInstance,
    dedup_answers,
    fail,
    make_passages,
    passage_label,
    question_id,
    read_records,
    split_of,
    string_list,
)

__all__ = ["FALSE_PREMISE_GOLD", "RULES", "crag_instances"]

RULES: tuple[tuple[str, str], ...] = (
    ("question_type 'false_premise'", "unanswerable"),
    ("otherwise", "answerable"),
)
FALSE_PREMISE_GOLD = "invalid question"
REQUIRED = {"interaction_id": str, "query": str, "answer": str, "search_results": list}


def _alternatives(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # a list written as a string, e.g. "[]"
        text = value.strip()
        if not text:
            return []
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                value = [text]
    if not isinstance(value, list):
        fail(where, f"field 'alternative_answers' must be a list of strings; got {type(value).__name__}")
    return string_list(
        [str(v) if isinstance(v, (int, float)) else v for v in value], where, "alternative_answers"
    )


def crag_instances(
    path: str | Path,
    limit: int | None = None,
    source: str | None = None,
    use_snippets: bool = False,
    *,
    page_text: Callable[[str], str],
) -> list[EvalInstance]:
    """CRAG records → instances over their search results; ``page_text`` turns a page's HTML into text."""

    def text_of(value: Any, where: str, name: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            fail(where, f"field {name!r} must be a string")
        return page_text(value) if value.strip() else ""

    out = []
    for _p, line, rec in read_records(path, "CRAG", REQUIRED, limit):
        where = f"{path}:{line}"
        iid = rec["interaction_id"]
        key = question_id("crag", iid)
        items: list[tuple[str, str | None]] = []
        names, fallback = [], []
        for j, page in enumerate(rec["search_results"]):
            if not isinstance(page, dict):
                fail(where, f"search_results[{j}] must be an object with page_result, page_snippet, page_url")
            text = (
                ""
                if use_snippets
                else text_of(page.get("page_result"), where, f"search_results[{j}].page_result")
            )
            if not text:
                text = text_of(page.get("page_snippet"), where, f"search_results[{j}].page_snippet")
                if not use_snippets and text:
                    fallback.append(j)
            items.append((text, page.get("page_url") or page.get("page_name") or None))
            names.append(page.get("page_name"))
        qtype = rec.get("question_type")
        answers = [rec["answer"], *_alternatives(rec.get("alternative_answers"), where)]
        false_premise = qtype == "false_premise"
        out.append(
            EvalInstance(
                id=iid,
                dataset="crag",
                question=rec["query"],
                passages=make_passages(iid, items),
                passage_labels=[passage_label("web", None) for _ in items],
                gold_answers=dedup_answers([FALSE_PREMISE_GOLD, *answers] if false_premise else answers),
                wrong_answers=[],
                expected_behaviour="unanswerable" if false_premise else "answerable",
                conflict_sides=[],
                split=split_of(key),
                meta={
                    "source": str(path) if source is None else source,
                    "line": line,
                    "split_key": key,
                    "question_type": qtype,
                    "domain": rec.get("domain"),
                    "static_or_dynamic": rec.get("static_or_dynamic"),
                    "query_time": rec.get("query_time"),
                    "crag_split": rec.get("split"),
                    "page_names": names,
                    "snippet_fallback": fallback,
                },
            )
        )
    return out
