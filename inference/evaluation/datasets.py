"""Evaluation dataset loaders: benchmark records → :class:`EvalInstance` (question, passages, labels, gold).

Every loader is registered by name in :data:`EVAL_DATASETS` and has the signature
``loader(path, *, limit=None, **options) -> list[EvalInstance]``; :func:`load_eval_dataset` is the entry
point of the benchmark runner. ``path`` is a JSONL file, a folder (the dataset's default file inside, see
:data:`DEFAULT_FILES`), ``None`` (the shared data folder, :func:`default_data_path`) or ``hf:NAME[:SPLIT]``
(a Hugging Face dataset with the same field names, read through ``datasets.load_dataset``; offline it must
already be in the local cache). A bad record raises :class:`~inference.types.DataError` naming the file, the
line and the field. ``limit`` keeps the first ``limit`` instances.

Passages keep the dataset's order as :class:`~inference.types.Chunk` s with ranks ``1..n`` and no score
(``score=None``: the dataset, not a retriever, chose them); chunk ids are ``<instance id>/<j>`` (``j`` from 0).
``passage_labels[j]`` is ``{"type": ..., "answer": ...}`` for passage ``j``.

Expected behaviour per dataset (:data:`BEHAVIOUR_RULES`; the first matching rule wins):

* ``ramdocs`` (``RAMDocs_test.jsonl``): no ``correct`` document → ``unanswerable``; two or more distinct gold
  answers → ``ambiguous``; a ``misinfo`` document → ``misinformation``; else ``answerable``. On the shared
  347 records: 2 unanswerable (one has only noise, one only noise + misinformation: the retrieved documents
  never state a gold answer, so no answer is grounded), 275 ambiguous (128 of them also hold misinformation:
  naming every gold answer is the harder requirement and the planted answers stay in ``wrong_answers`` for
  the strict exact match; ``meta["n_misinfo"]`` tells them apart), 41 misinformation, 29 answerable (9 of
  them list a ``wrong_answers`` value whose misinformation document is not among the passages). Labels:
  the document type and the answer it states (``None`` for noise, whose answer is ``"unknown"``); gold =
  every gold answer, wrong = the planted answers (both deduplicated after SQuAD normalization);
  ``conflict_sides`` for ambiguous records = one group per gold answer.
* ``wikicontradict`` (``wikicontradict_qa_refined.jsonl``): ``conflict`` (two real Wikipedia passages give
  different answers). Passages ``context1``/``context2`` (option ``context``: ``minimal`` (default, as
  training uses), ``info`` (``context{1,2}_info``) or ``self_contained``); labels ``passage1``/``passage2``
  with ``answer1``/``answer2``; gold = ``[answer1, answer2]``; sides ``[[answer1], [answer2]]``.
* ``wikicontradict-instances`` (``wikicontradict_instances.jsonl``, the raw annotation file): one instance per
  annotated question ``questionN`` of a row (placeholder answers such as "add the answer based on Passage 1"
  are skipped); passages ``annotationResult.paragraph{A,B}_information``; otherwise as ``wikicontradict``.
* ``conflictqa`` (the ConflictQA-StrategyQA folder): ``conflict`` by construction (the parametric-memory
  passage and the counter-memory passage argue for opposite yes/no answers). Passages: ``parametric_memory``,
  ``counter_memory`` and, with ``aligned_evidence=True`` (default), the two ``*_aligned_evidence`` passages
  (same order as the training builder); labels ``memory``/``counter_memory`` with the yes/no side read as in
  the training builder (the negated answer sentence is "no"; ``None`` where both or neither is negated).
  Gold = ``ground_truth`` True/False → ``yes``/``no``; wrong = the opposite; sides ``[["yes"], ["no"]]``.
  Default input: all 8 files of the folder (sorted by name) deduplicated by normalized question, first
  occurrence wins — the same question appears in several model files with different generated passages,
  so the whole folder gives the most distinct questions (1351 on the shared data) with each counted once;
  option ``files`` (names inside the folder or glob patterns) restricts it, a file path reads one file.
* ``musique`` (``musique_ans_v1.0_dev_subset.jsonl``): ``answerable`` (``unanswerable`` where the record's
  ``answerable`` is false, as in MuSiQue-Full); the 20 paragraphs as passages (``title: text``, as the training
  builder formats them; option ``with_title``), labels ``supporting`` (answer = the answer of the hop of
  ``question_decomposition`` the paragraph supports, e.g. the bridge entity; the final answer when there is no
  decomposition) / ``distractor``; gold = ``answer`` + ``answer_aliases``.
* ``crag`` (``crag_dev_example.jsonl``): ``false_premise`` questions → ``unanswerable`` with gold
  ``"invalid question"`` (followed by the record's own answer text when it differs: the shared sample stores an
  explanation of the false premise there), every other question → ``answerable`` with gold ``answer`` +
  ``alternative_answers`` (a list, or a list written as a string, as in the sample). Passages: the 5 search
  results' HTML as text (:func:`inference.retrieval.text.html_to_text`; an empty page falls back to its
  snippet, recorded in ``meta["snippet_fallback"]``; option ``use_snippets`` uses the snippets only), source =
  the page URL (page names in ``meta["page_names"]``), labels ``web`` with no answer. Pages stay whole:
  :func:`chunk_passages` (or the runner) splits them by tokens.

Split: ``split`` is the learned evaluator's own train/validation split (:func:`training.data.annotated._bucket` on the
training query key, ``validation_fraction`` and ``split_seed`` of :class:`training.trainer.config.TrainConfig`, 0.2 and
0), computed on the key the training builders of :mod:`training.data.benchmarks` give the same question
(``meta["split_key"]``), so ``validation`` questions were never trained on by a checkpoint trained with those
defaults. Datasets without a training builder (``crag``) use the same hash on their own key;
``wikicontradict-instances`` takes the key of the same question in the sibling QA file when there is one.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from evidential.registry import Registry
from inference.retrieval.text import chunk_text, html_to_text
from inference.types import Chunk, DataError
from training.data.annotated import SPLITS, TrainingDataError, _bucket
from training.data.benchmarks import _NEGATION, _TRUTH, CONFLICTQA_REQUIRED, _qid, _records, read_ramdocs
from training.trainer.config import TrainConfig
from training.utils.io import iter_jsonl, write_jsonl
from training.utils.text import normalize_text

__all__ = [
    "BEHAVIOUR_RULES",
    "DATA_FOLDERS",
    "DEFAULT_DATA_DIR",
    "DEFAULT_FILES",
    "EVAL_DATASETS",
    "EXPECTED_BEHAVIOURS",
    "EvalInstance",
    "chunk_passages",
    "default_data_path",
    "load_eval_dataset",
    "ramdocs_behaviour",
    "read_instances",
    "split_of",
    "write_instances",
]

EXPECTED_BEHAVIOURS = ("answerable", "ambiguous", "misinformation", "conflict", "unanswerable")

# dataset -> its expected-behaviour rules, in the order they are applied (first match wins)
BEHAVIOUR_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "ramdocs": (
        ("no document of type 'correct'", "unanswerable"),
        ("two or more distinct gold answers", "ambiguous"),
        ("a document of type 'misinfo'", "misinformation"),
        ("otherwise", "answerable"),
    ),
    "wikicontradict": (("every QA row (two passages, two answers)", "conflict"),),
    "wikicontradict-instances": (("every annotated question (two passages, two answers)", "conflict"),),
    "conflictqa": (("every question (memory vs counter-memory passages)", "conflict"),),
    "musique": (("field 'answerable' is false", "unanswerable"), ("otherwise", "answerable")),
    "crag": (("question_type 'false_premise'", "unanswerable"), ("otherwise", "answerable")),
}

REPO_ROOT = Path(__file__).resolve().parents[2]  # the parent of the ``inference`` package
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
DATA_ENV = "EVIDENTIAL_RAG_DATA"  # overrides DEFAULT_DATA_DIR (as the tests do)

# dataset -> folder under the data dir, and the file a folder path resolves to (None: the folder itself)
DATA_FOLDERS = {
    "ramdocs": "ramdocs",
    "wikicontradict": "wikicontradict",
    "wikicontradict-instances": "wikicontradict",
    "conflictqa": "conflictqa",
    "musique": "musique",
    "crag": "crag",
}
DEFAULT_FILES: dict[str, str | None] = {
    "ramdocs": "RAMDocs_test.jsonl",
    "wikicontradict": "wikicontradict_qa_refined.jsonl",
    "wikicontradict-instances": "wikicontradict_instances.jsonl",
    "conflictqa": None,
    "musique": "musique_ans_v1.0_dev_subset.jsonl",
    "crag": "crag_dev_example.jsonl",
}

_TRAIN_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}
VALIDATION_FRACTION: float = _TRAIN_DEFAULTS["validation_fraction"]
SPLIT_SEED: int = _TRAIN_DEFAULTS["split_seed"]

_YES_NO = ("yes", "no")
_PLACEHOLDER = "add the answer"  # unfilled answer template of the WikiContradict annotation file
_FALSE_PREMISE_GOLD = "invalid question"


# name -> loader(path, *, limit=None, **options) -> list[EvalInstance]
EVAL_DATASETS: Registry[Callable[..., list[EvalInstance]]] = Registry("evaluation dataset")


@dataclass
class EvalInstance:
    """One evaluation question with its passages, their labels and what a good answer does.

    Attributes:
        id: Stable unique id within the dataset (from the record's key).
        dataset: The registry name of the dataset.
        question: The question.
        passages: The dataset's passages as chunks in its order (ranks 1..n, no score).
        passage_labels: Parallel to ``passages``: ``{"type": str | None, "answer": str | None}``.
        gold_answers: Every valid answer (and alias).
        wrong_answers: Planted or contradicted answers where known, else empty.
        expected_behaviour: One of :data:`EXPECTED_BEHAVIOURS` (see :data:`BEHAVIOUR_RULES`).
        conflict_sides: For conflict / ambiguous instances, the answer groups a conflict-aware answer names.
        split: ``train`` or ``validation`` of the learned evaluator's split (see :func:`split_of`).
        meta: Dataset-specific extras (always ``line`` / ``source`` and ``split_key``).
    """

    id: str
    dataset: str
    question: str
    passages: list[Chunk]
    passage_labels: list[dict]
    gold_answers: list[str]
    wrong_answers: list[str]
    expected_behaviour: str
    conflict_sides: list[list[str]]
    split: str
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.expected_behaviour not in EXPECTED_BEHAVIOURS:
            raise DataError(
                f"instance {self.id!r}: expected_behaviour must be one of {', '.join(EXPECTED_BEHAVIOURS)}; "
                f"got {self.expected_behaviour!r}"
            )
        if self.split not in SPLITS:
            raise DataError(
                f"instance {self.id!r}: split must be one of {', '.join(SPLITS)}; got {self.split!r}"
            )
        if len(self.passage_labels) != len(self.passages):
            raise DataError(
                f"instance {self.id!r}: {len(self.passage_labels)} passage labels for {len(self.passages)} passages"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "id": self.id,
            "dataset": self.dataset,
            "question": self.question,
            "passages": [p.to_dict() for p in self.passages],
            "passage_labels": [dict(x) for x in self.passage_labels],
            "gold_answers": list(self.gold_answers),
            "wrong_answers": list(self.wrong_answers),
            "expected_behaviour": self.expected_behaviour,
            "conflict_sides": [list(s) for s in self.conflict_sides],
            "split": self.split,
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "instance") -> EvalInstance:
        """The instance written by :meth:`to_dict`; a missing or malformed field raises :class:`DataError`."""
        if not isinstance(d, dict):
            raise DataError(
                f"{where}: expected a JSON object (an evaluation instance), got {type(d).__name__}"
            )
        names = [f.name for f in fields(cls)]
        for name in names:
            if name not in d and name != "meta":
                raise DataError(
                    f"{where}: missing field {name!r} (evaluation instances have {', '.join(names)})"
                )
        unknown = sorted(set(d) - set(names))
        if unknown:
            raise DataError(
                f"{where}: unknown field {unknown[0]!r}; evaluation instances have {', '.join(names)}"
            )
        passages = d["passages"]
        if not isinstance(passages, list) or not all(isinstance(p, dict) for p in passages):
            raise DataError(f"{where}: field 'passages' must be a list of chunk objects")
        try:
            chunks = [Chunk(**p) for p in passages]
        except TypeError as exc:
            raise DataError(f"{where}: field 'passages' holds a bad chunk ({exc})") from None
        return cls(
            id=d["id"],
            dataset=d["dataset"],
            question=d["question"],
            passages=chunks,
            passage_labels=[dict(x) for x in d["passage_labels"]],
            gold_answers=list(d["gold_answers"]),
            wrong_answers=list(d["wrong_answers"]),
            expected_behaviour=d["expected_behaviour"],
            conflict_sides=[list(s) for s in d["conflict_sides"]],
            split=d["split"],
            meta=dict(d.get("meta") or {}),
        )


def write_instances(path: str | Path, instances: list[EvalInstance]) -> Path:
    """Write instances as JSONL (atomically), one :meth:`EvalInstance.to_dict` per line."""
    return write_jsonl(path, (inst.to_dict() for inst in instances))


def read_instances(path: str | Path) -> list[EvalInstance]:
    """Read instances written by :func:`write_instances`; errors name the file and line."""
    p = Path(path)
    return [EvalInstance.from_dict(d, f"{p}:{n}") for n, d in iter_jsonl(p, "evaluation-instance", DataError)]


def split_of(key: str, validation_fraction: float = VALIDATION_FRACTION, seed: int = SPLIT_SEED) -> str:
    """``train`` or ``validation`` of the training split by question (:func:`training.data.annotated.split_by_question`)
    for the query key ``key``: validation when the hash of ``(seed, key)`` falls below ``validation_fraction``."""
    return "validation" if _bucket(key, seed) < validation_fraction else "train"


def default_data_path(name: str) -> Path | None:
    """The shared data folder of dataset ``name`` (``$EVIDENTIAL_RAG_DATA/<folder>``, else
    ``../shared/data/<folder>`` next to the repository root), or ``None`` when it is not there."""
    folder = DATA_FOLDERS.get(name)
    if folder is None:
        EVAL_DATASETS.get(name)  # an unknown name lists the known ones
        return None
    base = Path(os.environ[DATA_ENV]) if os.environ.get(DATA_ENV) else DEFAULT_DATA_DIR
    path = base / folder
    return path if path.is_dir() else None


def load_eval_dataset(
    name: str, path: str | Path | None = None, limit: int | None = None, **options: Any
) -> list[EvalInstance]:
    """Load dataset ``name`` (a key of :data:`EVAL_DATASETS`) from ``path`` with the loader's ``options``.

    Args:
        name: ``ramdocs``, ``wikicontradict``, ``wikicontradict-instances``, ``conflictqa``, ``musique``, ``crag``.
        path: A JSONL file, a folder (its default file), ``hf:NAME[:SPLIT]`` or ``None`` (the shared data).
        limit: Keep the first ``limit`` instances.
        options: Dataset options (see the module docstring).

    Raises:
        UnknownNameError: An unknown dataset name (the message lists the known ones).
        DataError: A missing file, an unknown option, an unloadable Hugging Face id or a bad record (file,
            line and field).
    """
    loader = EVAL_DATASETS.get(name)
    params = inspect.signature(loader).parameters
    allowed = [p for p, v in params.items() if p not in ("path", "limit") and v.kind is v.KEYWORD_ONLY]
    open_ended = any(v.kind is v.VAR_KEYWORD for v in params.values())
    for key in options:
        if key not in allowed and not open_ended:
            raise DataError(
                f"unknown option {key!r} for dataset {name!r}; its options are: {', '.join(allowed) or 'none'}"
            )
    return loader(path, limit=limit, **options)


# ------------------------------------------------------------------------------------------------ helpers
@contextlib.contextmanager
def _data_errors() -> Iterator[None]:
    """Training readers raise :class:`TrainingDataError`; callers of these loaders expect :class:`DataError`."""
    try:
        yield
    except TrainingDataError as exc:
        raise DataError(str(exc)) from None


def _check_limit(limit: Any) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DataError(f"limit must be a positive integer or None; got {limit!r}")


def _resolve(name: str, path: str | Path | None) -> Path:
    """A file path for ``name`` (a folder → its default file; ``None`` → the shared data folder)."""
    if path is None:
        path = default_data_path(name)
        if path is None:
            base = os.environ.get(DATA_ENV) or DEFAULT_DATA_DIR
            raise DataError(
                f"dataset {name!r}: no data path given and {Path(base) / DATA_FOLDERS.get(name, name)} does not exist; "
                "give the path of its file or folder"
            )
    p = Path(path)
    if p.is_dir():
        default = DEFAULT_FILES.get(name)
        if default is None:
            return p
        if (p / default).is_file():
            return p / default
        found = sorted(p.glob("*.jsonl"))
        if len(found) == 1:
            return found[0]
        raise DataError(
            f"dataset {name!r}: folder {p} has no {default}"
            + (f" and several JSONL files ({', '.join(f.name for f in found)})" if found else "")
            + "; give the file's path"
        )
    if not p.is_file():
        raise DataError(
            f"dataset {name!r}: no such file or folder {p}; give a JSONL file, its folder or hf:NAME[:SPLIT]"
        )
    return p


_LIST_FIELDS = ("documents", "search_results", "paragraphs", "question_decomposition")


def _plain(row: dict) -> dict:
    """A Hugging Face row with ``Sequence``-of-struct columns (dict of lists) turned back into lists of dicts."""
    out = dict(row)
    for key in _LIST_FIELDS:
        value = out.get(key)
        if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
            n = len(next(iter(value.values())))
            if all(len(v) == n for v in value.values()):
                out[key] = [{k: v[i] for k, v in value.items()} for i in range(n)]
    return out


def _hf_to_jsonl(spec: str, dest: Path, limit: int | None) -> None:
    """Write the rows of ``hf:NAME[:SPLIT]`` to ``dest`` (JSONL), wrapping every loading error in DataError."""
    parts = spec[3:].split(":")
    if not parts[0] or len(parts) > 2 or (len(parts) == 2 and not parts[1]):
        raise DataError(f"{spec!r}: write a Hugging Face dataset as hf:NAME or hf:NAME:SPLIT")
    hf_name, split = parts[0], (parts[1] if len(parts) == 2 else None)
    try:
        import datasets

        ds = datasets.load_dataset(hf_name, split=split)
    except (
        Exception
    ) as exc:  # datasets raises many types (FileNotFoundError, ConnectionError, ValueError, ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        hint = (
            "offline (HF_HUB_OFFLINE is set) the dataset must already be in the local Hugging Face cache; "
            "download it once online"
            if offline
            else "check the id and split, and that it is reachable or in the local Hugging Face cache"
        )
        raise DataError(
            f"{spec}: cannot load the Hugging Face dataset {hf_name!r}"
            f"{f' (split {split!r})' if split else ''} ({type(exc).__name__}: {first}); {hint}, "
            "or give the path of a JSONL file"
        ) from None
    if isinstance(ds, datasets.DatasetDict):
        if len(ds) != 1:
            raise DataError(
                f"{spec}: the dataset has the splits {', '.join(ds)}; name one as hf:{hf_name}:SPLIT"
            )
        ds = ds[next(iter(ds))]
    n = len(ds) if limit is None else min(limit, len(ds))
    with dest.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps(_plain(ds[i]), ensure_ascii=False, default=str) + "\n")


def _run(
    name: str,
    path: str | Path | None,
    limit: int | None,
    build: Callable[..., list[EvalInstance]],
    rows_per_instance_one: bool = True,
    **options: Any,
) -> list[EvalInstance]:
    """Resolve ``path`` (file, folder, None or ``hf:``) and run ``build(file, limit, label, **options)``.

    ``label`` names the source in ``meta["source"]``; ``hf:`` rows are written to a temporary JSONL file first
    (the same field mapping), and error messages name ``hf:...`` row numbers instead of that file.
    """
    _check_limit(limit)
    if isinstance(path, str) and path.startswith("hf:"):
        with tempfile.TemporaryDirectory(prefix="evidential-eval-") as tmp:
            file = Path(tmp) / "rows.jsonl"
            _hf_to_jsonl(path, file, limit if rows_per_instance_one else None)
            try:
                with _data_errors():
                    return build(file, limit, path, **options)
            except DataError as exc:
                raise DataError(
                    str(exc).replace(f"{file}:", f"{path} row ").replace(str(file), path)
                ) from None
    file = _resolve(name, path)
    with _data_errors():
        return build(file, limit, str(file), **options)


def _fail(where: str, msg: str):
    raise DataError(f"{where}: {msg}")


def _strings(value: Any, where: str, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        _fail(where, f"field {name!r} must be a list of strings")
    return value


def _dedup(answers: list[str]) -> list[str]:
    """Distinct answers after SQuAD normalization, first surface form kept (stripped); empty ones dropped."""
    out: list[str] = []
    seen: set[str] = set()
    for a in answers:
        key = normalize_text(a)
        if key and key not in seen:
            seen.add(key)
            out.append(a.strip())
    return out


def _chunks(instance_id: str, items: list[tuple[str, str | None]]) -> list[Chunk]:
    return [Chunk(f"{instance_id}/{j}", text, source, j + 1, None) for j, (text, source) in enumerate(items)]


def _label(kind: str | None, answer: str | None) -> dict[str, str | None]:
    return {"type": kind, "answer": answer}


# ------------------------------------------------------------------------------------------------ RAMDocs
def ramdocs_behaviour(doc_types: list[str], gold: list[str]) -> str:
    """:data:`BEHAVIOUR_RULES` ``["ramdocs"]``: unanswerable > ambiguous > misinformation > answerable."""
    if "correct" not in doc_types:
        return "unanswerable"
    if len(gold) >= 2:
        return "ambiguous"
    if "misinfo" in doc_types:
        return "misinformation"
    return "answerable"


def _build_ramdocs(path: Path, limit: int | None, label: str) -> list[EvalInstance]:
    out = []
    for rec in read_ramdocs(path, limit):
        line = rec["_line"]
        where = f"{path}:{line}"
        key = _qid("ramdocs", f"{line}\x00{rec['question']}")  # the training builder's query key
        docs = rec["documents"]
        gold = _dedup(_strings(rec["gold_answers"], where, "gold_answers"))
        wrong = _dedup(_strings(rec["wrong_answers"], where, "wrong_answers"))
        types = [d["type"] for d in docs]
        behaviour = ramdocs_behaviour(types, gold)
        out.append(
            EvalInstance(
                id=key,
                dataset="ramdocs",
                question=rec["question"],
                passages=_chunks(key, [(d["text"], None) for d in docs]),
                passage_labels=[
                    _label(d["type"], None if d["type"] == "noise" else d["answer"]) for d in docs
                ],
                gold_answers=gold,
                wrong_answers=wrong,
                expected_behaviour=behaviour,
                conflict_sides=[[g] for g in gold] if behaviour == "ambiguous" else [],
                split=split_of(key),
                meta={
                    "source": label,
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


@EVAL_DATASETS.register("ramdocs")
def load_ramdocs_eval(path: str | Path | None = None, *, limit: int | None = None) -> list[EvalInstance]:
    """RAMDocs records → instances (rules in :data:`BEHAVIOUR_RULES`; validated by ``read_ramdocs``)."""
    return _run("ramdocs", path, limit, _build_ramdocs)


# ------------------------------------------------------------------------------------------------ WikiContradict
_CONTEXTS = {
    "minimal": ("context1", "context2"),
    "info": ("context1_info", "context2_info"),
    "self_contained": ("context1_self_contained", "context2_self_contained"),
}


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
        passages=_chunks(iid, passages),
        passage_labels=[_label("passage1", a1), _label("passage2", a2)],
        gold_answers=_dedup([a1, a2]),
        wrong_answers=[],
        expected_behaviour="conflict",
        conflict_sides=[[a] for a in _dedup([a1, a2])],
        split=split_of(key),
        meta={**meta, "split_key": key},
    )


def _build_wikicontradict(path: Path, limit: int | None, label: str, context: str) -> list[EvalInstance]:
    if context not in _CONTEXTS:
        raise DataError(f"option context must be one of {', '.join(_CONTEXTS)}; got {context!r}")
    c1, c2 = _CONTEXTS[context]
    required = {"question": str, c1: str, c2: str, "answer1": str, "answer2": str}
    out = []
    for _p, line, rec in _records(path, "WikiContradict QA", required, limit):
        key = _qid("wikicontradict", f"{line}\x00{rec['question']}")  # the training builder's query key
        meta = {
            "source": label,
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


@EVAL_DATASETS.register("wikicontradict")
def load_wikicontradict_eval(
    path: str | Path | None = None, *, limit: int | None = None, context: str = "minimal"
) -> list[EvalInstance]:
    """WikiContradict QA rows → ``conflict`` instances with two passages (``context``: minimal / info /
    self_contained)."""
    return _run("wikicontradict", path, limit, _build_wikicontradict, context=context)


def _qa_keys(qa_path: Path) -> dict[str, str]:
    """Normalized question → the training query key of its row in a WikiContradict QA file."""
    keys: dict[str, str] = {}
    for _p, line, rec in _records(qa_path, "WikiContradict QA", {"question": str}, None):
        keys.setdefault(
            normalize_text(rec["question"]), _qid("wikicontradict", f"{line}\x00{rec['question']}")
        )
    return keys


def _answer(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or value.strip().lower().startswith(_PLACEHOLDER):
        return None
    return value


def _build_wikicontradict_instances(
    path: Path, limit: int | None, label: str, qa_path: str | Path | None
) -> list[EvalInstance]:
    if qa_path == "auto":
        sibling = path.parent / DEFAULT_FILES["wikicontradict"]
        qa_keys = _qa_keys(sibling) if not label.startswith("hf:") and sibling.is_file() else {}
    else:
        qa_keys = _qa_keys(Path(qa_path)) if qa_path is not None else {}
    required = {"title": str, "paragraph_A_clean": str, "annotationResult": dict}
    out: list[EvalInstance] = []
    for _p, line, rec in _records(path, "WikiContradict instances", required, None):
        ann = rec["annotationResult"]
        group = f"{rec['title']}\n{rec['paragraph_A_clean']}"
        row_id = _qid("wikicontradict-instances", f"{line}\x00{group}")
        taxonomy = {k: ann.get(k) for k in sorted(ann) if k.startswith("Contradict type")}
        for n in range(1, 11):
            question = ann.get(f"question{n}")
            a1, a2 = _answer(ann.get(f"question{n}_answer1")), _answer(ann.get(f"question{n}_answer2"))
            if not isinstance(question, str) or not question.strip() or a1 is None or a2 is None:
                continue
            for side in ("A", "B"):
                if not isinstance(ann.get(f"paragraph{side}_information"), str):
                    _fail(
                        f"{path}:{line}",
                        f"field 'annotationResult.paragraph{side}_information' must be a string",
                    )
            key = qa_keys.get(normalize_text(question), group)
            meta = {
                "source": label,
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


@EVAL_DATASETS.register("wikicontradict-instances")
def load_wikicontradict_instances_eval(
    path: str | Path | None = None, *, limit: int | None = None, qa_path: str | Path | None = "auto"
) -> list[EvalInstance]:
    """The raw WikiContradict annotation file → one ``conflict`` instance per annotated question.

    ``split`` uses the training key of the same question in the QA file ``qa_path`` (``auto``: the sibling
    ``wikicontradict_qa_refined.jsonl``; ``None``: none), else the instance's group key (title + paragraph).
    """
    return _run(
        "wikicontradict-instances",
        path,
        limit,
        _build_wikicontradict_instances,
        rows_per_instance_one=False,
        qa_path=qa_path,
    )


# ------------------------------------------------------------------------------------------------ ConflictQA


def _conflictqa_files(path: Path, files: str | list[str] | None) -> list[Path]:
    if path.is_file():
        if files is not None:
            raise DataError("option files needs a ConflictQA folder as path; a file path reads that file")
        return [path]
    patterns = [files] if isinstance(files, str) else (files or ["*.jsonl"])
    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(p for p in path.glob(pattern) if p.is_file())
        if not matches:
            raise DataError(f"ConflictQA folder {path}: no file matches {pattern!r}")
        found += [m for m in matches if m not in found]
    return found


def _build_conflictqa(
    path: Path, limit: int | None, label: str, files: str | list[str] | None, aligned_evidence: bool
) -> list[EvalInstance]:
    passages = [("parametric_memory", "memory"), ("counter_memory", "counter_memory")]
    if aligned_evidence:
        passages += [
            ("parametric_memory_aligned_evidence", "memory"),
            ("counter_memory_aligned_evidence", "counter_memory"),
        ]
    out: list[EvalInstance] = []
    seen: set[str] = set()
    for file in _conflictqa_files(path, files):
        source = label if label.startswith("hf:") else str(file)
        for _p, line, rec in _records(file, "ConflictQA", CONFLICTQA_REQUIRED, None):
            norm = normalize_text(rec["question"])
            if norm in seen:
                continue
            truth = {_TRUTH.get(str(t).strip().lower()) for t in rec["ground_truth"]} - {None}
            if len(truth) != 1:
                _fail(
                    f"{file}:{line}",
                    f"field 'ground_truth' must hold one of True/False; got {rec['ground_truth']!r}",
                )
            seen.add(norm)
            gold = next(iter(truth))
            mem_neg = bool(_NEGATION.search(rec["memory_answer"]))
            readable = mem_neg != bool(_NEGATION.search(rec["counter_answer"]))
            side = {"memory": ("no" if mem_neg else "yes") if readable else None}
            side["counter_memory"] = ("yes" if mem_neg else "no") if readable else None
            key = _qid("conflictqa", rec["question"])  # the training builder's query key
            items = [
                (name, kind)
                for name, kind in passages
                if isinstance(rec.get(name), str) and rec[name].strip()
            ]
            out.append(
                EvalInstance(
                    id=key,
                    dataset="conflictqa",
                    question=rec["question"],
                    passages=_chunks(key, [(rec[name], name) for name, _ in items]),
                    passage_labels=[_label(kind, side[kind]) for _, kind in items],
                    gold_answers=[gold],
                    wrong_answers=[_YES_NO[1 - _YES_NO.index(gold)]],
                    expected_behaviour="conflict",
                    conflict_sides=[[a] for a in _YES_NO],
                    split=split_of(key),
                    meta={
                        "source": source,
                        "line": line,
                        "split_key": key,
                        "memory_answer": rec["memory_answer"],
                        "counter_answer": rec["counter_answer"],
                        "sides_read": readable,
                        "popularity": rec.get("popularity"),
                    },
                )
            )
            if limit is not None and len(out) >= limit:
                return out
    return out


@EVAL_DATASETS.register("conflictqa")
def load_conflictqa_eval(
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    files: str | list[str] | None = None,
    aligned_evidence: bool = True,
) -> list[EvalInstance]:
    """ConflictQA-StrategyQA → yes/no ``conflict`` instances, deduplicated by question (first file wins).

    ``path`` is the folder (all ``*.jsonl`` sorted, or those matching ``files``) or one file.
    """
    return _run(
        "conflictqa",
        path,
        limit,
        _build_conflictqa,
        rows_per_instance_one=False,
        files=files,
        aligned_evidence=aligned_evidence,
    )


# ------------------------------------------------------------------------------------------------ MuSiQue
def _build_musique(path: Path, limit: int | None, label: str, with_title: bool) -> list[EvalInstance]:
    required = {"question": str, "paragraphs": list, "answer": str}
    out = []
    for _p, line, rec in _records(path, "MuSiQue", required, limit):
        where = f"{path}:{line}"
        key = _qid("musique", str(rec.get("id") or f"{line}\x00{rec['question']}"))  # training's query key
        iid = str(rec.get("id") or key)
        steps = rec.get("question_decomposition")
        step_answer = {  # paragraph idx -> the answer of the hop it supports
            s["paragraph_support_idx"]: s["answer"]
            for s in (steps if isinstance(steps, list) else [])
            if isinstance(s, dict)
            and isinstance(s.get("answer"), str)
            and s.get("paragraph_support_idx") is not None
        }
        items: list[tuple[str, str | None]] = []
        labels = []
        for i, para in enumerate(rec["paragraphs"]):
            if not isinstance(para, dict) or not isinstance(para.get("paragraph_text"), str):
                _fail(
                    where,
                    f"paragraphs[{i}].paragraph_text must be a string (paragraphs hold title, paragraph_text, is_supporting)",
                )
            title = para.get("title") if isinstance(para.get("title"), str) else None
            text = f"{title}: {para['paragraph_text']}" if with_title and title else para["paragraph_text"]
            items.append((text, title))
            supporting = bool(para.get("is_supporting"))
            answer = step_answer.get(para.get("idx", i), rec["answer"]) if supporting else None
            labels.append(_label("supporting" if supporting else "distractor", answer))
        aliases = _strings(rec.get("answer_aliases") or [], where, "answer_aliases")
        answerable = rec.get("answerable", True) is not False
        out.append(
            EvalInstance(
                id=iid,
                dataset="musique",
                question=rec["question"],
                passages=_chunks(iid, items),
                passage_labels=labels,
                gold_answers=_dedup([rec["answer"], *aliases]),
                wrong_answers=[],
                expected_behaviour="answerable" if answerable else "unanswerable",
                conflict_sides=[],
                split=split_of(key),
                meta={
                    "source": label,
                    "line": line,
                    "split_key": key,
                    "hops": int(iid.split("hop", 1)[0]) if iid.split("hop", 1)[0].isdigit() else None,
                    "n_supporting": sum(1 for x in labels if x["type"] == "supporting"),
                    "decomposition": rec.get("question_decomposition"),
                },
            )
        )
    return out


@EVAL_DATASETS.register("musique")
def load_musique_eval(
    path: str | Path | None = None, *, limit: int | None = None, with_title: bool = True
) -> list[EvalInstance]:
    """MuSiQue-Ans records → ``answerable`` instances over their 20 paragraphs (``title: text``)."""
    return _run("musique", path, limit, _build_musique, with_title=with_title)


# ------------------------------------------------------------------------------------------------ CRAG
def _alternatives(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # the sample writes the list as a string, e.g. "[]"
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
        _fail(where, f"field 'alternative_answers' must be a list of strings; got {type(value).__name__}")
    return _strings(
        [str(v) if isinstance(v, (int, float)) else v for v in value], where, "alternative_answers"
    )


def _page_text(html: Any, where: str, name: str) -> str:
    if html is None:
        return ""
    if not isinstance(html, str):
        _fail(where, f"field {name!r} must be a string")
    return html_to_text(html) if html.strip() else ""


def _build_crag(path: Path, limit: int | None, label: str, use_snippets: bool) -> list[EvalInstance]:
    required = {"interaction_id": str, "query": str, "answer": str, "search_results": list}
    out = []
    for _p, line, rec in _records(path, "CRAG", required, limit):
        where = f"{path}:{line}"
        iid = rec["interaction_id"]
        key = _qid("crag", iid)
        items: list[tuple[str, str | None]] = []
        names, fallback = [], []
        for j, page in enumerate(rec["search_results"]):
            if not isinstance(page, dict):
                _fail(
                    where, f"search_results[{j}] must be an object with page_result, page_snippet, page_url"
                )
            text = (
                ""
                if use_snippets
                else _page_text(page.get("page_result"), where, f"search_results[{j}].page_result")
            )
            if not text:
                text = _page_text(page.get("page_snippet"), where, f"search_results[{j}].page_snippet")
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
                passages=_chunks(iid, items),
                passage_labels=[_label("web", None) for _ in items],
                gold_answers=_dedup([_FALSE_PREMISE_GOLD, *answers] if false_premise else answers),
                wrong_answers=[],
                expected_behaviour="unanswerable" if false_premise else "answerable",
                conflict_sides=[],
                split=split_of(key),
                meta={
                    "source": label,
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


@EVAL_DATASETS.register("crag")
def load_crag_eval(
    path: str | Path | None = None, *, limit: int | None = None, use_snippets: bool = False
) -> list[EvalInstance]:
    """CRAG Task 1&2 records → instances over their 5 search results as text (``false_premise`` →
    ``unanswerable``)."""
    return _run("crag", path, limit, _build_crag, use_snippets=use_snippets)


# ------------------------------------------------------------------------------------------------ chunking
@lru_cache(maxsize=1)
def _default_tokenizer():
    """The packaged all-MiniLM-L6-v2 fast tokenizer (the CPU default embedder's), loaded offline."""
    from transformers import AutoTokenizer

    from training.learned.model import packaged_minilm_path

    return AutoTokenizer.from_pretrained(str(packaged_minilm_path()))


def chunk_passages(instance: EvalInstance, tokens: int, overlap: int, tokenizer=None) -> EvalInstance:
    """A copy of ``instance`` whose passages longer than ``tokens`` tokens are split by
    :func:`inference.retrieval.text.chunk_text` (consecutive pieces share ``overlap`` tokens).

    A split passage ``p`` becomes ``p#0, p#1, ...`` (the runner's id scheme) with its source and a copy of its
    label; other passages stay as they are. Ranks are renumbered 1..n. ``tokenizer`` is a Hugging Face fast
    tokenizer (default: the packaged all-MiniLM-L6-v2 one, the CPU default embedder's).
    """
    tok = tokenizer if tokenizer is not None else _default_tokenizer()
    passages: list[Chunk] = []
    labels: list[dict] = []
    for p, label in zip(instance.passages, instance.passage_labels):
        spans = chunk_text(p.text, tok, tokens, overlap)
        if len(spans) > 1:
            for n, span in enumerate(spans):
                passages.append(Chunk(f"{p.id}#{n}", span.text, p.source, None, p.score))
                labels.append(dict(label))
        else:
            passages.append(Chunk(p.id, p.text, p.source, None, p.score))
            labels.append(dict(label))
    for rank, c in enumerate(passages, 1):
        c.rank = rank
    meta = {**instance.meta, "chunked": {"tokens": tokens, "overlap": overlap}}
    return replace(instance, passages=passages, passage_labels=labels, meta=meta)
