"""MuSiQue-Ans: multi-hop questions over 20 paragraphs, some of them flagged ``is_supporting``.

A record holds ``id``, ``question``, ``paragraphs`` (``title``, ``paragraph_text``, ``is_supporting``,
``idx``), ``answer``, ``answer_aliases`` and ``question_decomposition`` (the hops, each with its
``answer`` and the ``paragraph_support_idx`` of the paragraph that supports it). A paragraph reads as
``title: text``.

* training rows (:func:`build_musique`): supporting paragraphs support the answer, the first
  ``max_negatives`` others support nothing;
* evaluation instances (:func:`musique_instances`): the 20 paragraphs as passages (source = the title),
  labels ``supporting`` (answer = the answer of the hop the paragraph supports, e.g. the bridge entity; the
  final answer when there is no decomposition) / ``distractor``; gold = ``answer`` + ``answer_aliases``.

Behaviour rule (:data:`RULES`): ``unanswerable`` where the record's ``answerable`` is false (as in
MuSiQue-Full), else ``answerable``.
"""

from __future__ import annotations

from pathlib import Path

from training.data.annotated import AnnotatedChunk
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

__all__ = ["RULES", "build_musique", "musique_instances"]

RULES: tuple[tuple[str, str], ...] = (
    ("field 'answerable' is false", "unanswerable"),
    ("otherwise", "answerable"),
)
REQUIRED = {"question": str, "paragraphs": list, "answer": str}


def _records(path: str | Path, limit: int | None):
    """``(line, record, key, [(title, text, supporting, idx)])`` of each validated record."""
    for p, line, rec in read_records(path, "MuSiQue", REQUIRED, limit):
        paras = []
        for i, para in enumerate(rec["paragraphs"]):
            if not isinstance(para, dict) or not isinstance(para.get("paragraph_text"), str):
                fail(
                    f"{p}:{line}",
                    f"paragraphs[{i}].paragraph_text must be a string (paragraphs hold title, paragraph_text, "
                    "is_supporting)",
                )
            title = para.get("title") if isinstance(para.get("title"), str) and para.get("title") else None
            idx = para.get("idx", i)
            if not isinstance(idx, int) or isinstance(idx, bool):
                fail(f"{p}:{line}", f"paragraphs[{i}].idx must be an integer; got {type(idx).__name__}")
            paras.append((title, para["paragraph_text"], bool(para.get("is_supporting")), idx))
        key = question_id("musique", str(rec.get("id") or f"{line}\x00{rec['question']}"))
        yield line, rec, key, paras


def _text(title: str | None, text: str, with_title: bool = True) -> str:
    return f"{title}: {text}" if with_title and title else text


def build_musique(
    path: str | Path, *, limit: int | None = None, max_negatives: int | None = 4
) -> list[AnnotatedChunk]:
    """MuSiQue-Ans records → supporting paragraphs support the answer, the first ``max_negatives`` others
    support nothing (``None`` keeps all 20 paragraphs)."""
    rows: list[AnnotatedChunk] = []
    for _line, rec, key, paras in _records(path, limit):
        negatives = 0
        for title, text, supporting, _idx in paras:
            if not supporting:
                if max_negatives is not None and negatives >= max_negatives:
                    continue
                negatives += 1
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=_text(title, text),
                    candidates=[rec["answer"]],
                    label=0 if supporting else None,
                    gold=[0],
                    source_dataset="musique",
                    doc_type="supporting" if supporting else "distractor",
                    query_id=key,
                )
            )
    return rows


def musique_instances(
    path: str | Path, limit: int | None = None, source: str | None = None, with_title: bool = True
) -> list[EvalInstance]:
    """MuSiQue-Ans records → instances over their 20 paragraphs (``title: text`` unless not ``with_title``)."""
    out = []
    for line, rec, key, paras in _records(path, limit):
        where = f"{path}:{line}"
        iid = str(rec.get("id") or key)
        steps = rec.get("question_decomposition")
        step_answer = {  # paragraph idx -> the answer of the hop it supports
            s["paragraph_support_idx"]: s["answer"]
            for s in (steps if isinstance(steps, list) else [])
            if isinstance(s, dict)
            and isinstance(s.get("answer"), str)
            and isinstance(s.get("paragraph_support_idx"), int)
            and not isinstance(s.get("paragraph_support_idx"), bool)
        }
        items = [(_text(title, text, with_title), title) for title, text, _s, _i in paras]
        labels = [
            passage_label("supporting", step_answer.get(idx, rec["answer"]))
            if supporting
            else passage_label("distractor", None)
            for _t, _x, supporting, idx in paras
        ]
        aliases = string_list(rec.get("answer_aliases") or [], where, "answer_aliases")
        answerable = rec.get("answerable", True) is not False
        hops = iid.split("hop", 1)[0]
        out.append(
            EvalInstance(
                id=iid,
                dataset="musique",
                question=rec["question"],
                passages=make_passages(iid, items),
                passage_labels=labels,
                gold_answers=dedup_answers([rec["answer"], *aliases]),
                wrong_answers=[],
                expected_behaviour="answerable" if answerable else "unanswerable",
                conflict_sides=[],
                split=split_of(key),
                meta={
                    "source": str(path) if source is None else source,
                    "line": line,
                    "split_key": key,
                    "hops": int(hops) if hops.isdigit() else None,
                    "n_supporting": sum(1 for x in labels if x["type"] == "supporting"),
                    "decomposition": rec.get("question_decomposition"),
                },
            )
        )
    return out
