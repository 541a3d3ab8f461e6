"""Evaluation datasets by name: where the benchmark files are and how an input path is read.

The readers themselves — records → :class:`~training.data.benchmarks.EvalInstance` with each dataset's
behaviour rule (:data:`BEHAVIOUR_RULES`) — live in :mod:`training.data.benchmarks`, one module per dataset,
next to the training-row builders of the same records. This module registers them by name in
:data:`EVAL_DATASETS` with the signature ``loader(path, *, limit=None, **options) -> list[EvalInstance]``;
:func:`load_eval_dataset` is the entry point of the benchmark runner. ``path`` is a JSONL file, a folder (the
dataset's default file inside, see :data:`DEFAULT_FILES`), ``None`` (the shared data folder,
:func:`default_data_path`) or ``hf:NAME[:SPLIT]`` (a Hugging Face dataset with the same field names, read
through ``datasets.load_dataset``; offline it must already be in the local cache). A bad record raises
:class:`~inference.types.DataError` naming the file, the line and the field. ``limit`` keeps the first
``limit`` instances.

Passages keep the dataset's order with ranks ``1..n`` and no score (``score=None``: the dataset, not a
retriever, chose them); passage ids are ``<instance id>/<j>`` (``j`` from 0). ``passage_labels[j]`` is
``{"type": ..., "answer": ...}`` for passage ``j``.

Options per dataset:

* ``ramdocs`` (``RAMDocs_test.jsonl``): none.
* ``wikicontradict`` (``wikicontradict_qa_refined.jsonl``): ``context`` — ``minimal`` (default, as training
  uses), ``info`` (``context{1,2}_info``) or ``self_contained``.
* ``wikicontradict-instances`` (``wikicontradict_instances.jsonl``, the raw annotation file): ``qa_path``,
  the QA file whose training keys decide the split (``auto``: the sibling QA file; ``None``: none).
* ``conflictqa`` (the ConflictQA-StrategyQA folder): by default all files of the folder (sorted by name),
  deduplicated by normalized question, first occurrence wins — the same question appears in several model
  files with different generated passages; ``files`` (names inside the folder or glob patterns) restricts
  it, a file path reads one file; ``aligned_evidence`` (default true) adds the two aligned passages.
* ``musique`` (``musique_ans_v1.0_dev_subset.jsonl``): ``with_title`` (passages read ``title: text``).
* ``crag`` (``crag_dev_example.jsonl``): pages become text with
  :func:`inference.retrieval.text.html_to_text`; ``use_snippets`` uses the snippets only. Pages stay whole:
  :func:`chunk_passages` (or the runner) splits them by tokens.

Split: ``split`` is the learned evaluator's own train/validation split, computed on the key the training
builders give the same question (``meta["split_key"]``) with the defaults of
:class:`training.trainer.config.TrainConfig`, so ``validation`` questions were never trained on by a
checkpoint trained with those defaults. Datasets without a training builder (``crag``) use the same hash on
their own key; ``wikicontradict-instances`` takes the key of the same question in the sibling QA file when
there is one.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from evidential.registry import Registry
from inference.retrieval.text import chunk_text, html_to_text
from inference.types import DataError
from training.data.annotated import TrainingDataError
from training.data.benchmarks import (
    BEHAVIOUR_RULES,
    EXPECTED_BEHAVIOURS,
    Chunk,
    EvalInstance,
    annotation_instances,
    conflictqa_files,
    conflictqa_instances,
    crag_instances,
    musique_instances,
    ramdocs_instances,
    split_of,
    wikicontradict_instances,
)
from training.utils.io import iter_jsonl, write_jsonl

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
    "read_instances",
    "split_of",
    "write_instances",
]

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

# name -> loader(path, *, limit=None, **options) -> list[EvalInstance]
EVAL_DATASETS: Registry[Callable[..., list[EvalInstance]]] = Registry("evaluation dataset")


def write_instances(path: str | Path, instances: list[EvalInstance]) -> Path:
    """Write instances as JSONL (atomically), one :meth:`EvalInstance.to_dict` per line."""
    return write_jsonl(path, (inst.to_dict() for inst in instances))


def read_instances(path: str | Path) -> list[EvalInstance]:
    """Read instances written by :func:`write_instances`; errors name the file and line."""
    p = Path(path)
    with _data_errors():
        return [
            EvalInstance.from_dict(d, f"{p}:{n}") for n, d in iter_jsonl(p, "evaluation-instance", DataError)
        ]


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


# ------------------------------------------------------------------------------------------------ loaders
@EVAL_DATASETS.register("ramdocs")
def load_ramdocs_eval(path: str | Path | None = None, *, limit: int | None = None) -> list[EvalInstance]:
    """RAMDocs records → instances (:func:`training.data.benchmarks.ramdocs_instances`)."""
    return _run("ramdocs", path, limit, ramdocs_instances)


@EVAL_DATASETS.register("wikicontradict")
def load_wikicontradict_eval(
    path: str | Path | None = None, *, limit: int | None = None, context: str = "minimal"
) -> list[EvalInstance]:
    """WikiContradict QA rows → ``conflict`` instances with two passages (``context``: minimal / info /
    self_contained)."""
    return _run("wikicontradict", path, limit, wikicontradict_instances, context=context)


def _annotation_instances(
    path: Path, limit: int | None, label: str, qa_path: str | Path | None
) -> list[EvalInstance]:
    if qa_path == "auto":
        sibling = path.parent / DEFAULT_FILES["wikicontradict"]
        qa_path = sibling if not label.startswith("hf:") and sibling.is_file() else None
    return annotation_instances(path, limit, label, qa_path)


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
        _annotation_instances,
        rows_per_instance_one=False,
        qa_path=qa_path,
    )


def _conflictqa(
    path: Path, limit: int | None, label: str, files: str | list[str] | None, aligned_evidence: bool
) -> list[EvalInstance]:
    source = label if label.startswith("hf:") else None
    return conflictqa_instances(conflictqa_files(path, files), limit, source, aligned_evidence)


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
        _conflictqa,
        rows_per_instance_one=False,
        files=files,
        aligned_evidence=aligned_evidence,
    )


@EVAL_DATASETS.register("musique")
def load_musique_eval(
    path: str | Path | None = None, *, limit: int | None = None, with_title: bool = True
) -> list[EvalInstance]:
    """MuSiQue-Ans records → ``answerable`` instances over their 20 paragraphs (``title: text``)."""
    return _run("musique", path, limit, musique_instances, with_title=with_title)


@EVAL_DATASETS.register("crag")
def load_crag_eval(
    path: str | Path | None = None, *, limit: int | None = None, use_snippets: bool = False
) -> list[EvalInstance]:
    """CRAG Task 1&2 records → instances over their 5 search results as text (``false_premise`` →
    ``unanswerable``)."""
    return _run(
        "crag", path, limit, partial(crag_instances, page_text=html_to_text), use_snippets=use_snippets
    )


# ------------------------------------------------------------------------------------------------ chunking
@lru_cache(maxsize=1)
def _default_tokenizer():
    """The packaged all-MiniLM-L6-v2 fast tokenizer (the CPU default embedder's), loaded offline."""
    from transformers import AutoTokenizer

    from training.learned.model import packaged_minilm_path  # loads torch and transformers

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
