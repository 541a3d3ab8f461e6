"""Readers of the real benchmark records (by default in ``../shared/data``): one module per dataset.

Each reader validates a record once and turns it into both outputs: annotated-chunk training rows
(:class:`~training.data.annotated.AnnotatedChunk`, builders chosen by name through :data:`BUILDERS`) and
evaluation instances (:class:`EvalInstance`). Each dataset has one behaviour rule — what kind of question a
record is — documented in its module and collected in :data:`BEHAVIOUR_RULES` (the first matching rule
wins):

* :mod:`~training.data.benchmarks.ramdocs` — RAMDocs (``unanswerable`` / ``ambiguous`` /
  ``misinformation`` / ``answerable``, :func:`record_kind`);
* :mod:`~training.data.benchmarks.wikicontradict` — WikiContradict QA rows and raw annotations
  (``conflict``);
* :mod:`~training.data.benchmarks.conflictqa` — ConflictQA-StrategyQA (``conflict``);
* :mod:`~training.data.benchmarks.musique` — MuSiQue-Ans (``answerable`` / ``unanswerable``);
* :mod:`~training.data.benchmarks.crag` — CRAG (``answerable`` / ``unanswerable``; evaluation only);
* :mod:`~training.data.benchmarks.chunks` — unannotated chunks, the input of distillation (``chunks``).

Query keys (:func:`question_id`) are shared by the training rows and the instances of the same question, so
an instance's ``split`` (:func:`split_of`) is the side of the learned evaluator's split its question is on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evidential.registry import Registry
from training.data.annotated import AnnotatedChunk
from training.data.benchmarks import conflictqa, crag, musique, ramdocs, wikicontradict
from training.data.benchmarks.chunks import build_chunks
from training.data.benchmarks.common import (
    EXPECTED_BEHAVIOURS,
    Chunk,
    EvalInstance,
    question_id,
    read_records,
    split_of,
)
from training.data.benchmarks.conflictqa import build_conflictqa, conflictqa_files, conflictqa_instances
from training.data.benchmarks.crag import crag_instances
from training.data.benchmarks.musique import build_musique, musique_instances
from training.data.benchmarks.ramdocs import (
    DOC_TYPES,
    LABELINGS,
    build_ramdocs,
    ramdocs_instances,
    read_ramdocs,
    record_kind,
)
from training.data.benchmarks.wikicontradict import (
    annotation_instances,
    build_wikicontradict,
    wikicontradict_instances,
)

__all__ = [
    "BEHAVIOUR_RULES",
    "BUILDERS",
    "DOC_TYPES",
    "EXPECTED_BEHAVIOURS",
    "LABELINGS",
    "EvalInstance",
    "Chunk",
    "annotation_instances",
    "build_chunks",
    "build_conflictqa",
    "build_dataset",
    "build_musique",
    "build_ramdocs",
    "build_wikicontradict",
    "conflictqa_files",
    "conflictqa_instances",
    "crag_instances",
    "musique_instances",
    "question_id",
    "ramdocs_instances",
    "read_ramdocs",
    "read_records",
    "record_kind",
    "split_of",
    "wikicontradict_instances",
]

# evaluation dataset name -> its behaviour rule, in the order it is applied (first match wins)
BEHAVIOUR_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "ramdocs": ramdocs.RULES,
    "wikicontradict": wikicontradict.RULES,
    "wikicontradict-instances": wikicontradict.ANNOTATION_RULES,
    "conflictqa": conflictqa.RULES,
    "musique": musique.RULES,
    "crag": crag.RULES,
}

# name -> builder(path, *, limit, **options) -> list[AnnotatedChunk]: the ``data: [{name: ...}]`` of training
BUILDERS: Registry[Callable[..., list[AnnotatedChunk]]] = Registry("dataset builder")
for _name, _builder in (
    ("ramdocs", build_ramdocs),
    ("wikicontradict", build_wikicontradict),
    ("conflictqa", build_conflictqa),
    ("musique", build_musique),
    ("chunks", build_chunks),
):
    BUILDERS.register(_name)(_builder)


def build_dataset(name: str, path: str | Path, **options: Any) -> list[AnnotatedChunk]:
    """Run the builder registered as ``name`` on ``path``."""
    return BUILDERS.get(name)(path, **options)
