"""WikiContradict (IBM): questions answered differently by two real Wikipedia passages.

Two files of the same questions:

* the QA file (``wikicontradict_qa_refined.jsonl``): ``question``, ``context1`` / ``context2`` (also
  ``context{1,2}_info`` and ``context{1,2}_self_contained``) and ``answer1`` / ``answer2``;
* the raw annotation file (``wikicontradict_instances.jsonl``): one row per passage pair with up to ten
  annotated questions ``annotationResult.questionN`` and their two answers; placeholder answers such as
  "add the answer based on Passage 1" are skipped.

Training rows (:func:`build_wikicontradict`): the two passages support ``answer1`` / ``answer2``; no gold
(the right behaviour is to explain the conflict), so the query-level target is Θ; rows whose two answers
normalize to the same claim are skipped. Evaluation instances (:func:`wikicontradict_instances`,
:func:`annotation_instances`): labels ``passage1`` / ``passage2`` with the two answers; gold = both answers;
sides ``[[answer1], [answer2]]``.

Behaviour rule (:data:`RULES`): every question is a ``conflict`` (two passages, two answers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.data.annotated import AnnotatedChunk, TrainingDataError
from training.data.benchmarks.common import (
    EvalInstance,
    answer_frame,
    dedup_answers,
    fail,
    make_passages,
    passage_label,
    question_id,
    read_records,
    split_of,
)
from training.utils.text import normalize_text

__all__ = [
    "ANNOTATION_RULES",
    "CONTEXTS",
    "RULES",
    "annotation_instances",
    "build_wikicontradict",
    "qa_keys",
    "wikicontradict_instances",
]

RULES: tuple[tuple[str, str], ...] = (("every QA row (two passages, two answers)", "conflict"),)
ANNOTATION_RULES: tuple[tuple[str, str], ...] = (
    ("every annotated question (two passages, two answers)", "conflict"),
)
CONTEXTS = {
    "minimal": ("context1", "context2"),
    "info": ("context1_info", "context2_info"),
    "self_contained": ("context1_self_contained", "context2_self_contained"),
}
_PLACEHOLDER = "add the answer"  # unfilled answer template of the annotation file


def _key(line: int, question: str) -> str:
    return question_id("wikicontradict", f"{line}\x00{question}")


def _qa_records(path: str | Path, c1: str, c2: str, limit: int | None):
    required = {"question": str, c1: str, c2: str, "answer1": str, "answer2": str}
    return read_records(path, "WikiContradict QA", required, limit)


def build_wikicontradict(path: str | Path, *, limit: int | None = None) -> list[AnnotatedChunk]:
    """WikiContradict QA rows → two passages supporting two answers; no gold (target Θ: a real conflict)."""
    rows: list[AnnotatedChunk] = []
    for _p, line, rec in _qa_records(path, "context1", "context2", limit):
        claims, index = answer_frame([rec["answer1"], rec["answer2"]])
        if len(claims) < 2:
            continue  # the two answers normalize to the same claim: no conflict to learn from
        qid = _key(line, rec["question"])
        for ctx, ans in (("context1", "answer1"), ("context2", "answer2")):
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=rec[ctx],
                    candidates=claims,
                    label=index[normalize_text(rec[ans])],
                    gold=None,
                    source_dataset="wikicontradict",
                    doc_type="conflict",
                    query_id=qid,
                )
            )
    return rows


def _conflict_instance(
    dataset: str,
    iid: str,
    key: str,
    question: str,
    passages: list[tuple[str, str | None]],
    answers: tuple[str, str],
    meta: dict,
) -> EvalInstance:
    a1, a2 = answers[0].strip(), answers[1].strip()
    return EvalInstance(
        id=iid,
        dataset=dataset,
        question=question,
        passages=make_passages(iid, passages),
        passage_labels=[passage_label("passage1", a1), passage_label("passage2", a2)],
        gold_answers=dedup_answers([a1, a2]),
        wrong_answers=[],
        expected_behaviour="conflict",
        conflict_sides=[[a] for a in dedup_answers([a1, a2])],
        split=split_of(key),
        meta={**meta, "split_key": key},
    )


def wikicontradict_instances(
    path: str | Path, limit: int | None = None, source: str | None = None, context: str = "minimal"
) -> list[EvalInstance]:
    """WikiContradict QA rows → ``conflict`` instances whose passages are the ``context`` variant
    (``minimal``: ``context{1,2}``, as training uses; ``info``; ``self_contained``)."""
    if context not in CONTEXTS:
        raise TrainingDataError(f"option context must be one of {', '.join(CONTEXTS)}; got {context!r}")
    c1, c2 = CONTEXTS[context]
    out = []
    for _p, line, rec in _qa_records(path, c1, c2, limit):
        key = _key(line, rec["question"])  # the training builder's query key
        meta = {
            "source": str(path) if source is None else source,
            "line": line,
            "contradiction_type": rec.get("contradiction_type"),
            "split_group": rec.get("_split_group"),
            "answer1_self_contained": rec.get("answer1_self_contained"),
            "answer2_self_contained": rec.get("answer2_self_contained"),
        }
        out.append(
            _conflict_instance(
                "wikicontradict",
                key,
                key,
                rec["question"],
                [(rec[c1], c1), (rec[c2], c2)],
                (rec["answer1"], rec["answer2"]),
                meta,
            )
        )
    return out


def qa_keys(qa_path: str | Path) -> dict[str, str]:
    """Normalized question → the training query key of its row in a WikiContradict QA file."""
    keys: dict[str, str] = {}
    for _p, line, rec in read_records(qa_path, "WikiContradict QA", {"question": str}, None):
        keys.setdefault(normalize_text(rec["question"]), _key(line, rec["question"]))
    return keys


def _answer(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or value.strip().lower().startswith(_PLACEHOLDER):
        return None
    return value


def annotation_instances(
    path: str | Path, limit: int | None = None, source: str | None = None, qa_path: str | Path | None = None
) -> list[EvalInstance]:
    """The raw annotation file → one ``conflict`` instance per annotated question of a row.

    ``split`` uses the training key of the same question in the QA file ``qa_path`` when it has it, else the
    row's group key (title + paragraph).
    """
    keys = qa_keys(qa_path) if qa_path is not None else {}
    required = {"title": str, "paragraph_A_clean": str, "annotationResult": dict}
    out: list[EvalInstance] = []
    for _p, line, rec in read_records(path, "WikiContradict instances", required, None):
        ann = rec["annotationResult"]
        group = f"{rec['title']}\n{rec['paragraph_A_clean']}"
        row_id = question_id("wikicontradict-instances", f"{line}\x00{group}")
        taxonomy = {k: ann.get(k) for k in sorted(ann) if k.startswith("Contradict type")}
        for n in range(1, 11):
            question = ann.get(f"question{n}")
            a1, a2 = _answer(ann.get(f"question{n}_answer1")), _answer(ann.get(f"question{n}_answer2"))
            if not isinstance(question, str) or not question.strip() or a1 is None or a2 is None:
                continue
            for side in ("A", "B"):
                if not isinstance(ann.get(f"paragraph{side}_information"), str):
                    fail(
                        f"{path}:{line}",
                        f"field 'annotationResult.paragraph{side}_information' must be a string",
                    )
            key = keys.get(normalize_text(question), group)
            meta = {
                "source": str(path) if source is None else source,
                "line": line,
                "question_number": n,
                "title": rec["title"],
                "url": rec.get("url"),
                "contradiction_type": ann.get("Contradict type IV"),
                "taxonomy": taxonomy,
                "same_passage": ann.get("wikitag_label_samepassage"),
                "split_group": group,
            }
            articles = [
                ann.get("paragraphA_article") or rec["title"],
                ann.get("paragraphB_article") or rec["title"],
            ]
            out.append(
                _conflict_instance(
                    "wikicontradict-instances",
                    f"{row_id}/q{n}",
                    key,
                    question,
                    [
                        (ann["paragraphA_information"], articles[0]),
                        (ann["paragraphB_information"], articles[1]),
                    ],
                    (a1, a2),
                    meta,
                )
            )
            if limit is not None and len(out) >= limit:
                return out
    return out
