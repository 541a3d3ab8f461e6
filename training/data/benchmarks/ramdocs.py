"""RAMDocs (MADAM-RAG, MIT license): questions with typed retrieved documents.

A record holds ``question``, ``documents`` (each with ``text``, ``type`` — ``correct`` / ``misinfo`` /
``noise`` — and the ``answer`` it states; ``unknown`` for noise), ``disambig_entity``, ``gold_answers`` (one
per entity sharing the ambiguous name: a good answer gives all of them) and ``wrong_answers`` (the answers
planted by misinformation documents). :func:`read_ramdocs` validates it once; both outputs come from it:

* training rows (:func:`build_ramdocs`): correct documents support their labelled answer; noise supports
  nothing; misinformation documents state a planted wrong answer. Two labelings: ``stance``
  (misinformation supports the answer it states, so fusion sees the conflict) and ``credibility``
  (misinformation gets no credible support, so the head must learn to discount it from cues in the text).
  The frame is the gold + wrong answers + the documents' answers; ``gold`` marks the gold answers.
* evaluation instances (:func:`ramdocs_instances`): the documents as passages labelled with their type and
  answer (``None`` for noise); gold = every gold answer, wrong = the planted answers (both deduplicated
  after SQuAD normalization); ``conflict_sides`` for ambiguous records = one group per gold answer.

Behaviour rule (:func:`record_kind`, :data:`RULES`; the first matching rule wins):

1. no ``correct`` document → ``unanswerable``: no retrieved document states a gold answer, so none is
   grounded;
2. two or more distinct gold answers → ``ambiguous``;
3. a ``misinfo`` document → ``misinformation``;
4. otherwise → ``answerable`` (the documents that state an answer agree on the gold one).

Ambiguity is checked before misinformation because it is what the dataset defines the question by: the
gold answers are one per disambiguated entity and all of them must be given (MADAM-RAG's strict exact
match), whatever else the documents hold. Misinformation is a property of the retrieved documents; a good
answer rejects ``wrong_answers`` in every record, so it decides the kind only of a single-answer question.
An ambiguous record that also holds misinformation keeps that in ``meta["n_misinfo"]``.
"""

from __future__ import annotations

from pathlib import Path

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
    string_list,
)
from training.utils.text import normalize_text

__all__ = [
    "DOC_TYPES",
    "KINDS",
    "LABELINGS",
    "RULES",
    "build_ramdocs",
    "ramdocs_instances",
    "read_ramdocs",
    "record_kind",
]

DOC_TYPES = ("correct", "misinfo", "noise")
LABELINGS = ("stance", "credibility")
REQUIRED = {"question": str, "documents": list, "gold_answers": list, "wrong_answers": list}

# the behaviour rule, in the order it is applied (first match wins)
RULES: tuple[tuple[str, str], ...] = (
    ("no document of type 'correct'", "unanswerable"),
    ("two or more distinct gold answers", "ambiguous"),
    ("a document of type 'misinfo'", "misinformation"),
    ("otherwise", "answerable"),
)
KINDS = ("answerable", "ambiguous", "misinformation", "unanswerable")


def _check_documents(rec: dict, where: str) -> dict:
    for name in ("gold_answers", "wrong_answers"):
        string_list(rec[name], where, name)
    if not rec["question"].strip():
        fail(where, "field 'question' is empty")
    for i, doc in enumerate(rec["documents"]):
        if not isinstance(doc, dict):
            fail(where, f"documents[{i}] must be an object with text, type and answer")
        for key in ("text", "type", "answer"):
            if not isinstance(doc.get(key), str):
                fail(where, f"documents[{i}].{key} must be a string")
        if doc["type"] not in DOC_TYPES:
            fail(where, f"documents[{i}].type is {doc['type']!r}; expected one of {', '.join(DOC_TYPES)}")
    return rec


def read_ramdocs(path: str | Path, limit: int | None = None) -> list[dict]:
    """Read and validate RAMDocs JSONL; errors name the file, line and field. Each record gets ``_line``."""
    out = []
    for p, line, rec in read_records(path, "RAMDocs", REQUIRED, limit):
        out.append({**_check_documents(rec, f"{p}:{line}"), "_line": line})
    if not out:
        raise TrainingDataError(f"{path}: the file holds no records")
    return out


def record_kind(record: dict) -> str:
    """The kind of a RAMDocs record under the behaviour rule (module doc): ``unanswerable``,
    ``ambiguous``, ``misinformation`` or ``answerable``."""
    types = [d["type"] for d in record["documents"]]
    if "correct" not in types:
        return "unanswerable"
    gold = [a for a in record["gold_answers"] if isinstance(a, str)]
    if len(dedup_answers(gold)) >= 2:
        return "ambiguous"
    if "misinfo" in types:
        return "misinformation"
    return "answerable"


def _key(rec: dict) -> str:
    return question_id("ramdocs", f"{rec['_line']}\x00{rec['question']}")


def build_ramdocs(
    path: str | Path, *, limit: int | None = None, labeling: str = "stance"
) -> list[AnnotatedChunk]:
    """RAMDocs records → annotated chunks under the ``stance`` or ``credibility`` labeling (see module doc)."""
    if labeling not in LABELINGS:
        raise TrainingDataError(f"labeling must be one of {', '.join(LABELINGS)}; got {labeling!r}")
    rows: list[AnnotatedChunk] = []
    for rec in read_ramdocs(path, limit):
        docs = rec["documents"]
        answers = [*rec["gold_answers"], *rec["wrong_answers"]]
        answers += [d["answer"] for d in docs if d["type"] != "noise"]
        claims, index = answer_frame([a for a in answers if isinstance(a, str)])
        gold = sorted({index[k] for a in rec["gold_answers"] if (k := normalize_text(a)) in index})
        qid = _key(rec)
        for d in docs:
            label = None
            if d["type"] == "correct" or (d["type"] == "misinfo" and labeling == "stance"):
                label = index.get(normalize_text(d["answer"]))
            rows.append(
                AnnotatedChunk(
                    query=rec["question"],
                    chunk=d["text"],
                    candidates=claims,
                    label=label,
                    gold=gold or None,
                    source_dataset="ramdocs",
                    doc_type=d["type"],
                    query_id=qid,
                )
            )
    return rows


def ramdocs_instances(
    path: str | Path, limit: int | None = None, source: str | None = None
) -> list[EvalInstance]:
    """RAMDocs records → evaluation instances (kinds by :func:`record_kind`); ``source`` names the input in
    ``meta["source"]`` (default: ``path``)."""
    out = []
    for rec in read_ramdocs(path, limit):
        line = rec["_line"]
        where = f"{path}:{line}"
        key = _key(rec)
        docs = rec["documents"]
        gold = dedup_answers(string_list(rec["gold_answers"], where, "gold_answers"))
        wrong = dedup_answers(string_list(rec["wrong_answers"], where, "wrong_answers"))
        types = [d["type"] for d in docs]
        kind = record_kind(rec)
        out.append(
            EvalInstance(
                id=key,
                dataset="ramdocs",
                question=rec["question"],
                passages=make_passages(key, [(d["text"], None) for d in docs]),
                passage_labels=[
                    passage_label(d["type"], None if d["type"] == "noise" else d["answer"]) for d in docs
                ],
                gold_answers=gold,
                wrong_answers=wrong,
                expected_behaviour=kind,
                conflict_sides=[[g] for g in gold] if kind == "ambiguous" else [],
                split=split_of(key),
                meta={
                    "source": str(path) if source is None else source,
                    "line": line,
                    "split_key": key,
                    "n_documents": len(docs),
                    "n_correct": types.count("correct"),
                    "n_misinfo": types.count("misinfo"),
                    "n_noise": types.count("noise"),
                    "disambig_entity": rec.get("disambig_entity"),
                },
            )
        )
    return out
