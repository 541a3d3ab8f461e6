"""The calibration run behind ``evidential-rag calibrate``: fit an evaluator's evidence scale/power, λ,
(τ1, τ2) and an isotonic confidence map on validation data.

Steps (:func:`calibrate`): read the data (annotated-chunk JSONL or builder specs, :func:`parse_data_spec`),
keep only the **validation** side of the split by question (:func:`resolve_split`: the same fraction and
seed as the learned checkpoint's training, read from its model card, so its training questions are never
used; :func:`load_validation_examples`), run the evaluator ONCE over those queries in batches with the
rows' candidate frame as candidates, so frame claim ``j`` is candidate ``j`` and the labels line up — or,
with ``frames="extracted"``, without candidates, so the evaluator extracts and aligns the frame exactly as
the pipeline does and the labels are carried over to the claims that state them (:func:`relabel_to_frame`)
(:func:`collect_evidence`), cache the evidence (``<output>.evidence.jsonl``, reused on a rerun: an
interrupted run resumes), fit on the cached tensors (:mod:`training.calibration.fit`; no model calls during
the search) and write the calibration JSON (atomically) and a reliability diagram PNG next to it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import yaml

from evidential.errors import ConfigError, EvidentialError
from inference.alignment import ClaimAligner
from inference.calibration import AUTO, evaluator_identity
from inference.config import RunConfig
from inference.evaluators import build_evaluator
from inference.evaluators.config import PromptEvaluatorFields
from inference.types import Chunk
from training.calibration import (
    LAM_GRID,
    POWER_GRID,
    READER_MAP_MIN_QUERIES,
    ROUTE_MAP_MIN_QUERIES,
    SCALE_GRID,
    TAU_GRID,
    Calibration,
    CalibrationData,
    CalibrationError,
    EvidenceCalibrator,
    apply_evidence_transform,
    evaluate_parameters,
)
from training.calibration.reliability import save_reliability_diagram
from training.data.annotated import group_by_query, split_by_question
from training.data.benchmarks import BUILDERS
from training.learned.checkpoint import resolve_checkpoint
from training.trainer.config import DataSourceConfig, TrainConfig, load_train_config
from training.trainer.trainer import load_training_rows, prepare_examples, score_outcomes
from training.utils.configio import build_dataclass
from training.utils.io import write_json
from training.utils.run_metadata import package_versions

__all__ = [
    "DEFAULT_FOLDS",
    "FRAMES",
    "CalibrationRun",
    "calibrate",
    "collect_evidence",
    "conflict_reference",
    "side_conflict_reference",
    "PLANTED_DOC_TYPES",
    "load_validation_examples",
    "parse_data_spec",
    "relabel_to_frame",
    "resolve_split",
]

DEFAULT_FOLDS = 5
#: Which claim frame the evaluator scores during calibration: the rows' labelled candidates, or the frame it
#: extracts itself (what the pipeline fuses when no candidates are passed in).
FRAMES = ("labelled", "extracted")


# ---- data ----------------------------------------------------------------------------------------------
def parse_data_spec(spec: str) -> tuple[list[Any], dict[str, Any]]:
    """One ``--data`` value → data sources (:class:`training.trainer.config.DataSourceConfig`) and split settings.

    Accepted forms:

    * ``FILE.jsonl`` — an annotated-chunk file (docs/data.md);
    * ``NAME:PATH`` — a registered builder over a benchmark file (``ramdocs:../shared/data/ramdocs/RAMDocs_test.jsonl``)
      or ``annotated:PATH``;
    * ``{name: ramdocs, path: ..., limit: 100, options: {labeling: stance}}`` — a YAML/JSON mapping with the
      fields of a training config's ``data[]`` entry;
    * ``FILE.yaml`` or a named training config (``learned-minilm``) — its ``data`` list; its
      ``validation_fraction``, ``split_seed`` and ``max_claims_per_query`` become the split settings.
    """
    text = spec.strip()
    if not text:
        raise ConfigError(
            "--data is empty; give an annotated JSONL, NAME:PATH, a mapping or a training config"
        )
    if text.startswith("{"):
        try:
            mapping = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"--data {spec!r}: not a valid YAML mapping ({exc.__class__.__name__})"
            ) from None
        return [build_dataclass(DataSourceConfig, mapping, "data.")], {}
    p = Path(text)
    if p.suffix in (".yaml", ".yml") or (p.suffix == "" and ":" not in text and not p.exists()):
        cfg = load_train_config(text)
        return list(cfg.data), {
            "validation_fraction": cfg.validation_fraction,
            "split_seed": cfg.split_seed,
            "max_claims_per_query": cfg.max_claims_per_query,
            "from": f"training config {text}",
        }
    name, sep, rest = text.partition(":")
    if sep and (name == "annotated" or name in BUILDERS):
        return [DataSourceConfig(name=name, path=rest)], {}
    return [DataSourceConfig(name="annotated", path=text)], {}


def _card_split(checkpoint: Path) -> dict[str, Any]:
    card = checkpoint / "model_card.json"
    try:
        cfg = json.loads(card.read_text(encoding="utf-8")).get("config") or {}
    except (OSError, json.JSONDecodeError, AttributeError):
        return {}
    out = {k: cfg[k] for k in ("validation_fraction", "split_seed", "max_claims_per_query") if k in cfg}
    if out:
        out["from"] = f"model card of {checkpoint}"
    return out


def _train_defaults() -> dict[str, Any]:
    f = {x.name: x.default for x in dataclasses.fields(TrainConfig)}
    return {
        "validation_fraction": f["validation_fraction"],
        "split_seed": f["split_seed"],
        "max_claims_per_query": f["max_claims_per_query"],
        "from": "training defaults",
    }


def resolve_split(
    run_config: RunConfig,
    from_data: dict[str, Any],
    validation_fraction: float | None,
    split_seed: int | None,
) -> dict[str, Any]:
    """The split settings: the learned checkpoint's (model card) — an explicit value that differs is an
    error, since it could put the checkpoint's training questions into the calibration data — else the
    flags, a training config given as ``--data``, then the training defaults."""
    explicit = {
        k: v
        for k, v in (("validation_fraction", validation_fraction), ("split_seed", split_seed))
        if v is not None
    }
    base = _train_defaults()
    if run_config.evaluator.name == "learned":
        card = _card_split(resolve_checkpoint(run_config.evaluator.resolved_checkpoint()))
        if card:
            given = [(f"--{k.replace('_', '-')}", k, v) for k, v in explicit.items()]
            given += [
                (from_data["from"], k, from_data[k])
                for k in ("validation_fraction", "split_seed")
                if k in from_data and k in card
            ]
            for origin, key, value in given:
                if key in card and value != card[key]:
                    raise CalibrationError(
                        f"{origin} gives {key}={value!r} but the checkpoint was trained with "
                        f"{key}={card[key]!r} ({card['from']}); calibrating on another split could use its "
                        "training questions. Drop it: the checkpoint's split is used."
                    )
            return {**base, **from_data, **explicit, **card}
    return {
        **base,
        **from_data,
        **explicit,
        "from": "options" if explicit else from_data.get("from", base["from"]),
    }


def conflict_reference(ex: Any) -> Any:
    """``ex`` (a :class:`training.trainer.trainer.QueryExample`) with a gold reference for calibration when it
    has none and its labelled chunks support two or more claims — a real conflict, whose expected route is
    ``conflict`` (:func:`training.trainer.trainer.expected_route`; the trainer's target is Θ): every supported
    claim becomes gold, so the answer that states them is right, as a benchmark judges a conflict instance
    (WikiContradict's gold answers are both passages' answers). The expected route stays ``conflict``, and
    ``conflict_gold`` marks the reference: it serves the fits of the answer as stated (stated-set bars,
    confidence maps), not those of the single selected claim (evidence scale, the thresholds' ECE
    tie-break), where "the selected claim is gold" would hold whatever the evidence says and would reward
    confidence on a conflict. Any other query is returned as it is. (A yes/no frame whose gold holds both
    answers does not enter the fit of the yes/no stated-set bar: :func:`training.calibration.fit_calibration`.)

    >>> from training.trainer.trainer import QueryExample
    >>> ex = QueryExample("k", "q?", ["c1", "c2"], ["1990", "1991"], [1, 0], None, ["conflict"] * 2, None)
    >>> r = conflict_reference(ex)
    >>> r.gold, r.conflict_gold
    ([0, 1], True)
    """
    supported = sorted({lab for lab in ex.labels if lab is not None})
    if ex.gold is not None or len(supported) < 2:
        return ex
    return dataclasses.replace(ex, gold=supported, conflict_gold=True)


#: Chunk types whose answer is planted misinformation: a claim only they support is not a side of a conflict.
PLANTED_DOC_TYPES = ("misinfo",)


def side_conflict_reference(ex: Any) -> Any:
    """``ex`` with its supported claims as the gold reference when a chunk that is not labelled as planted
    (:data:`PLANTED_DOC_TYPES`) supports a claim outside its gold reference: the sources are two sides of a
    conflict, not a true answer and a planted one. ConflictQA is the case: two passages argue for the
    parametric-memory answer and two for the counter-memory answer, and the benchmark judges such a
    question as a conflict (both sides stated), while its gold holds the one side StrategyQA calls true,
    which no reading of the passages can find. With the reference the expected route is ``conflict``
    (:func:`training.trainer.trainer.expected_route`: several supported gold claims) and
    ``conflict_gold`` is set, so, as for :func:`conflict_reference`, the reference serves the answer-level
    fits and not the selected-claim ones. The dataset's gold stays as ``truth``: a response is still judged
    right when it states that answer, so the confidence map is fitted to it (stating only the other side is
    a routed conflict answer, not a right one). Any other query (misinformation next to a gold answer, several
    gold answers, a query with no gold reference) is returned as it is.

    >>> from training.trainer.trainer import QueryExample
    >>> ex = QueryExample("k", "q?", ["c1", "c2"], ["yes", "no"], [0, 1], [0], ["memory", "counter"], None)
    >>> r = side_conflict_reference(ex)
    >>> r.gold, r.conflict_gold, r.truth
    ([0, 1], True, [0])
    >>> planted = QueryExample("k", "q?", ["c1", "c2"], ["A", "B"], [0, 1], [0], ["correct", "misinfo"], None)
    >>> side_conflict_reference(planted).gold
    [0]
    """
    if ex.gold is None:
        return ex
    side = any(
        lab is not None and lab not in ex.gold and ex.doc_types[i] not in PLANTED_DOC_TYPES
        for i, lab in enumerate(ex.labels)
    )
    if not side:
        return ex
    return dataclasses.replace(
        ex,
        gold=sorted({lab for lab in ex.labels if lab is not None}),
        conflict_gold=True,
        truth=list(ex.gold),
    )


def load_validation_examples(
    sources: list[Any],
    split: dict[str, Any],
    max_chunks: int,
    max_claims: int,
    limit: int | None = None,
    conflict_gold: bool = True,
    side_conflicts: bool = False,
) -> tuple[list[Any], dict[str, Any]]:
    """The validation queries of ``sources`` as :class:`training.trainer.trainer.QueryExample` (chunks capped at
    ``max_chunks`` in file order, claims at ``max_claims`` — gold and labelled first — as the trainer does),
    keeping only fully labelled queries; and a description of the data for the calibration file. With
    ``conflict_gold`` a query without a gold reference whose chunks support several claims is given them as
    its gold reference (:func:`conflict_reference`); without it such a query enters no fit that needs gold
    (the evidence scale, the stated-set bars, the confidence map). With ``side_conflicts`` a query whose
    unplanted chunks support a claim outside its gold is given all its supported claims as its reference
    (:func:`side_conflict_reference`)."""
    rows = load_training_rows(SimpleNamespace(data=sources))
    train_rows, val_rows = split_by_question(rows, split["validation_fraction"], split["split_seed"])
    exs = prepare_examples(group_by_query(val_rows), max_chunks, max_claims)
    unlabelled = [e for e in exs if not getattr(e, "fully_labelled", True)]
    exs = [e for e in exs if getattr(e, "fully_labelled", True)]
    if limit is not None:
        exs = exs[:limit]
    if conflict_gold:
        exs = [conflict_reference(e) for e in exs]
    if side_conflicts:
        exs = [side_conflict_reference(e) for e in exs]
    if not exs:
        raise CalibrationError(
            f"the validation split of the data holds no labelled query ({len(rows)} rows, "
            f"validation_fraction {split['validation_fraction']}); give more data"
        )
    info = {
        "sources": [{**dataclasses.asdict(s), "resolved_path": str(s.resolved_path())} for s in sources],
        "builders": sorted({s.name for s in sources}),
        "split": "validation",
        "validation_fraction": split["validation_fraction"],
        "split_seed": split["split_seed"],
        "split_settings_from": split["from"],
        "train_queries_excluded": len({r.key for r in train_rows}),
        "unlabelled_queries_skipped": len(unlabelled),
        "limit": limit,
        "queries": len(exs),
        "queries_with_gold": sum(1 for e in exs if e.gold),
        "conflict_gold": conflict_gold,
        "conflict_queries_given_gold": sum(1 for e in exs if e.conflict_gold),
        "side_conflicts": side_conflicts,
        "chunks": sum(len(e.chunks) for e in exs),
        "max_chunks": max_chunks,
        "max_claims": max_claims,
        "by_source": dict(Counter(e.source or "unknown" for e in exs)),
    }
    return exs, info


# ---- the evaluator pass (cached) -----------------------------------------------------------------------
def _cache_tag(run_config: RunConfig, identity: dict[str, Any], frames: str = "labelled") -> str:
    ev = dataclasses.asdict(run_config.evaluator)
    for key in ("device", "checkpoint", "support_threshold"):
        ev.pop(key, None)
    # the logprob scoring fields enter the tag only when set, so caches written before they existed stay valid
    defaults = dataclasses.asdict(type(run_config.evaluator)())
    for key in PromptEvaluatorFields.LOGPROB_FIELDS:
        if ev.get(key) == defaults.get(key):
            ev.pop(key, None)
    ident = {k: v for k, v in identity.items() if k != "checkpoint"}  # content, not location
    blob = {"identity": ident, "evaluator": ev}
    if frames != "labelled":  # the labelled tag is unchanged, so existing caches stay valid
        blob["frames"] = frames
    if run_config.evaluator.name == "learned" and frames != "labelled":
        # its entries carry the chunks' reader scores since cache format 2 (older entries have none)
        blob["cache_format"] = 2
    blob = json.dumps(blob, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _entry_id(tag: str, ex: Any) -> str:
    blob = json.dumps([tag, ex.query, ex.chunks, ex.claims], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _read_cache(path: Path | None) -> tuple[dict[str, dict], int]:
    got: dict[str, dict] = {}
    bad = 0
    if path is None or not path.is_file():
        return got, bad
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                got[e["id"]] = {"claims": list(e["claims"]), "evidence": e["evidence"]}
                if e.get("reader") is not None:
                    got[e["id"]]["reader"] = list(e["reader"])
            except (json.JSONDecodeError, KeyError, TypeError):
                bad += 1  # a line cut by an interruption: that query is evaluated again
    return got, bad


def _evaluate_batch(evaluator: Any, part: list[Any], frames: str = "labelled") -> list[dict[str, Any]]:
    """One batched evaluator call over ``part``: a cache entry ``{claims, evidence}`` per query, plus
    ``reader`` (each chunk's reader score, null where it has none) when the evaluator read any (with
    ``frames="extracted"`` no candidates are passed, so ``claims`` is the evaluator's own frame)."""
    chunks = [[Chunk(f"c{i + 1}", text, None, rank=i + 1) for i, text in enumerate(ex.chunks)] for ex in part]
    candidates = [list(ex.claims) for ex in part] if frames == "labelled" else None
    results = evaluator.evaluate_batch([ex.query for ex in part], chunks, candidates)
    entries = []
    for ex, res in zip(part, results):
        frame = [c.text for c in res.claims]
        if frames == "labelled" and frame[: len(ex.claims)] != list(ex.claims):
            raise CalibrationError(
                f"the {evaluator.name} evaluator changed the candidate frame of query "
                f"{ex.query[:60]!r}; calibration needs frame claim j = candidate j"
            )
        entry = {"claims": frame, "evidence": res.evidence.to(torch.float64).tolist()}
        reader = [d.reader_score for d in res.decisions]
        if any(x is not None for x in reader):
            entry["reader"] = reader
        entries.append(entry)
    return entries


def _evaluate_missing(
    evaluator: Any,
    examples: list[Any],
    todo: list[int],
    ids: list[str],
    cached: dict[str, dict],
    *,
    batch_size: int,
    cache: Path | None,
    progress: bool,
    frames: str = "labelled",
) -> None:
    """Evaluate ``examples[i]`` for ``i`` in ``todo`` in batches into ``cached``, appending each batch to
    ``cache`` (flushed and fsynced, so an interruption loses at most the batch in flight)."""
    from tqdm.auto import tqdm

    fh = None
    if cache is not None and todo:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fh = cache.open("a", encoding="utf-8")
    try:
        with tqdm(total=len(todo), desc="evaluate", unit="q", disable=not progress) as bar:
            for s in range(0, len(todo), batch_size):
                index = todo[s : s + batch_size]
                part = [examples[i] for i in index]
                lines = []
                for i, ex, entry in zip(index, part, _evaluate_batch(evaluator, part, frames)):
                    cached[ids[i]] = entry
                    lines.append(json.dumps({"id": ids[i], "key": ex.key, **entry}, ensure_ascii=False))
                if fh is not None:
                    fh.write("".join(x + "\n" for x in lines))
                    fh.flush()
                    os.fsync(fh.fileno())
                bar.update(len(part))
    finally:
        if fh is not None:
            fh.close()


def relabel_to_frame(ex: Any, frame: list[str], aligner: ClaimAligner | None = None) -> Any:
    """``ex`` (a :class:`training.trainer.trainer.QueryExample`) with its labels carried over to ``frame``,
    the claims an evaluator extracted: a frame claim *states* a labelled claim when the claim aligner gives
    both one canonical form or the frame claim contains it on word boundaries (the judge's containment rule,
    :func:`inference.evaluation.metrics.answer_contained`). Chunk ``i``'s label becomes the first frame
    claim that states its labelled claim (``None`` when none does); the gold claims are every frame claim
    that states a gold answer (``[]`` when the frame states none: nothing the frame offers is right; ``None``
    stays ``None``: no gold reference), and so for ``truth``; ``frame_complete`` says whether every gold
    answer is stated by some frame claim (else no stated set can be the right one).

    >>> from training.trainer.trainer import QueryExample
    >>> ex = QueryExample("k", "q?", ["c1", "c2"], ["Paris", "Lyon"], [0, 1], [0], ["correct", "misinfo"], None)
    >>> r = relabel_to_frame(ex, ["Lyon", "Paris, France"])
    >>> r.claims, r.labels, r.gold
    (['Lyon', 'Paris, France'], [1, 0], [1])
    """
    # imported here: the metrics module pulls in scipy and scikit-learn, which every CLI start would pay for
    from inference.evaluation.metrics import answer_contained

    aligner = aligner or ClaimAligner()
    keys = [aligner.canonical(c) for c in frame]

    def stating(text: str) -> list[int]:
        key = aligner.canonical(text)
        return [j for j, c in enumerate(frame) if keys[j] == key or answer_contained(c, [text])]

    states = [stating(c) for c in ex.claims]
    labels = [states[lab][0] if lab is not None and states[lab] else None for lab in ex.labels]

    def in_frame(claims: list[int] | None) -> list[int] | None:
        return None if claims is None else sorted({j for c in claims for j in states[c]})

    gold, truth = in_frame(ex.gold), in_frame(ex.truth)
    complete = ex.gold is None or all(states[g] for g in ex.gold)
    return dataclasses.replace(
        ex, claims=list(frame), labels=labels, gold=gold, truth=truth, teacher=None, frame_complete=complete
    )


def _outcomes(
    examples: list[Any],
    ids: list[str],
    cached: dict[str, dict],
    frames: str = "labelled",
    aligner: ClaimAligner | None = None,
) -> tuple[list[tuple[Any, Any]], int]:
    """``(QueryExample, evidence [k, M])`` pairs from the cache, and the number of claims evaluators added
    (with ``frames="extracted"``: the examples relabelled to the extracted frames, nothing added)."""
    outcomes = []
    extra_claims = 0
    aligner = aligner or ClaimAligner()
    for ex, eid in zip(examples, ids):
        e = cached[eid]
        ev = torch.tensor(e["evidence"], dtype=torch.float64).reshape(len(ex.chunks), len(e["claims"]))
        if frames == "extracted":
            ex = relabel_to_frame(ex, list(e["claims"]), aligner)
        elif len(e["claims"]) > len(ex.claims):
            extra_claims += len(e["claims"]) - len(ex.claims)
            ex = dataclasses.replace(ex, claims=list(e["claims"]))
        if e.get("reader") is not None:
            ex = dataclasses.replace(ex, reader=list(e["reader"]))
        outcomes.append((ex, ev))
    return outcomes, extra_claims


def collect_evidence(
    evaluator: Any,
    examples: list[Any],
    *,
    tag: str,
    batch_size: int = 8,
    cache: Path | None = None,
    progress: bool = False,
    frames: str = "labelled",
    aligner: ClaimAligner | None = None,
) -> tuple[list[tuple[Any, Any]], dict[str, Any]]:
    """Run ``evaluator`` once over ``examples`` (batched, candidates = each query's frame) and return
    ``(QueryExample, evidence [k, M])`` pairs; extra claims an evaluator adds to the frame (the prompt
    evaluator's unaligned answers) are appended to the example's claims (wrong claims). Entries already in
    ``cache`` (same evaluator tag and inputs) are reused; new ones are appended batch by batch.
    ``evaluator`` may be a zero-argument factory (called only when some query is not cached).
    ``frames="extracted"``: the evaluator gets no candidates and the labels follow its own frames
    (:func:`relabel_to_frame`, with ``aligner``: the run's alias table)."""
    if frames not in FRAMES:
        raise ConfigError(f"--frames must be one of {', '.join(FRAMES)}; got {frames!r}")
    cached, bad = _read_cache(cache)
    ids = [_entry_id(tag, ex) for ex in examples]
    todo = [i for i, eid in enumerate(ids) if eid not in cached]
    t_load = time.perf_counter()
    if callable(evaluator) and not hasattr(evaluator, "evaluate_batch"):
        evaluator = evaluator() if todo else None
    load_s = time.perf_counter() - t_load
    passes_before = getattr(evaluator, "passes", 0)
    t0 = time.perf_counter()
    _evaluate_missing(
        evaluator,
        examples,
        todo,
        ids,
        cached,
        batch_size=batch_size,
        cache=cache,
        progress=progress,
        frames=frames,
    )
    outcomes, extra_claims = _outcomes(examples, ids, cached, frames, aligner)
    info = {
        "evaluated_queries": len(todo),
        "cached_queries": len(examples) - len(todo),
        "unreadable_cache_lines": bad,
        "batched_passes": getattr(evaluator, "passes", 0) - passes_before,
        "load_evaluator_seconds": round(load_s, 3),
        "evaluate_seconds": round(time.perf_counter() - t0, 3),
        "extra_claims": extra_claims,
        "frames": frames,
    }
    return outcomes, info


# ---- the whole run -------------------------------------------------------------------------------------
@dataclasses.dataclass
class CalibrationRun:
    """What :func:`calibrate` produced: the calibration, its file and the plot."""

    calibration: Any
    output: Path
    plot: Path
    cache: Path | None


@dataclasses.dataclass
class _Fitted:
    """What the fitting step produced on the cached outcomes."""

    params: dict[str, Any]
    fit: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]
    cv: dict[str, Any] | None
    metrics: dict[str, Any]
    notes: list[str]
    seconds: float


def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if not k.startswith("_")}


def _check_arguments(run_config: RunConfig, output: Path, batch_size: int) -> None:
    if output.suffix != ".json":
        raise ConfigError(f"--output {output}: the calibration file must end in .json")
    if batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1; got {batch_size}")
    if run_config.calibration not in (None, AUTO):
        raise ConfigError(
            "the run config already names a calibration file (calibration=...); calibrate the raw evaluator: "
            "remove it (calibration: auto is fine: calibrate always fits the raw evidence)"
        )


def _read_sources(data_specs: list[str]) -> tuple[list[Any], dict[str, Any]]:
    """The data sources of every ``--data`` value and the split settings they carry (later ones win)."""
    sources: list[Any] = []
    from_data: dict[str, Any] = {}
    for spec in data_specs:
        got, split_info = parse_data_spec(spec)
        sources += got
        from_data = {**from_data, **split_info}
    if not sources:
        raise ConfigError("give at least one --data source")
    return sources, from_data


def _cache_path(output: Path, cache: str | Path | None) -> Path | None:
    if cache == "auto":
        return output.with_name(output.stem + ".evidence.jsonl")
    return Path(cache) if cache else None


def _scored_metrics(
    run_config: RunConfig,
    outcomes: list[tuple[Any, Any]],
    params: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
) -> dict[str, Any]:
    """``before`` / ``after`` metrics, with the trainer's own scorer on the same outcomes (claim accuracy,
    evidence by document type, strict EM), which must agree with the batched route accuracy and ECE."""
    fusion = run_config.fusion
    thr = run_config.evaluator.support_threshold
    scored_before = score_outcomes(
        outcomes,
        thr,
        fusion.lam,
        fusion.rule,
        (fusion.tau1, fusion.tau2),
        fusion.policy,
        fusion.state_ratio,
        fusion.copy_overlap,
        fusion.state_witness_ratio,
    )
    scaled = [(ex, apply_evidence_transform(ev, params["scale"], params["power"])) for ex, ev in outcomes]
    scored_after = score_outcomes(
        scaled,
        thr,
        params["lam"],
        fusion.rule,
        (params["tau1"], params["tau2"]),
        fusion.policy,
        params["state_ratio"],
        fusion.copy_overlap,
        params.get("state_witness_ratio"),
    )
    for key in ("route_accuracy", "ece"):
        ref = scored_before[key]
        if abs(ref - before["route_accuracy" if key == "route_accuracy" else "ece_fused"]) > 1e-9:
            raise EvidentialError(
                f"internal check failed: batched {key} differs from training.trainer.trainer.score_outcomes ({ref})"
            )
    extras_before = {
        k: v
        for k, v in scored_before.items()
        if k.startswith(("claim_accuracy", "mean_evidence_", "strict_em", "ramdocs"))
    }
    extras_after = {k: v for k, v in scored_after.items() if k.startswith(("strict_em", "ramdocs"))}
    return {
        "before": {
            **_strip(before),
            **extras_before,
            "parameters": {
                "scale": 1.0,
                "power": 1.0,
                "lam": fusion.lam,
                "tau1": fusion.tau1,
                "tau2": fusion.tau2,
                "state_ratio": fusion.state_ratio,
                "state_ratio_yes_no": fusion.state_ratio_yes_no,
                "state_witness_ratio": fusion.state_witness_ratio,
            },
        },
        "after": {**_strip(after), **extras_after, "in_sample": True},
    }


def _fit(
    run_config: RunConfig,
    outcomes: list[tuple[Any, Any]],
    *,
    isotonic: bool,
    fit_power: bool,
    cv_folds: int,
    state_ratio: float | None = None,
    route_maps: bool = True,
    reader_maps: bool = True,
) -> _Fitted:
    """Fit on the cached outcomes, score the configured and the fitted setting, cross-fit when there are
    enough queries (``state_ratio``: the open frames' stated-set bar, fixed instead of fitted)."""
    t1 = time.perf_counter()
    fusion = run_config.fusion
    data = CalibrationData.from_examples(outcomes, fusion.copy_overlap)
    prior = (fusion.lam, fusion.tau1, fusion.tau2)
    calibrator = EvidenceCalibrator(
        rule=fusion.rule,
        policy=fusion.policy,
        prior=prior,
        fit_power=fit_power,
        isotonic=isotonic,
        state_prior=fusion.state_ratio,
        fixed_state_ratio=state_ratio,
        route_maps=route_maps,
        reader_maps=reader_maps,
    ).fit(data)
    params = calibrator.params
    before = evaluate_parameters(
        data,
        lam=fusion.lam,
        tau1=fusion.tau1,
        tau2=fusion.tau2,
        rule=fusion.rule,
        policy=fusion.policy,
        state_ratio=fusion.state_ratio,
        state_ratio_yes_no=fusion.state_ratio_yes_no,
        state_witness_ratio=fusion.state_witness_ratio,
        details=True,
    )
    after = calibrator.evaluate(data, details=True)
    metrics = _scored_metrics(run_config, outcomes, params, before, after)
    notes = list(calibrator.report["notes"])
    cv = None
    if cv_folds:
        if len(data) >= 2 * cv_folds:
            cv = calibrator.cross_validate(data, cv_folds)
            metrics["after_cv"] = _strip(cv)
        else:
            notes.append(f"cross-validation skipped: {len(data)} queries < 2 × {cv_folds} folds")
    return _Fitted(params, calibrator.report, before, after, cv, metrics, notes, time.perf_counter() - t1)


def _plot(output: Path, fitted: _Fitted, cv_folds: int) -> Path:
    plot = output.with_name(output.stem + ".reliability.png")
    panels = [
        ("before (raw evidence, configured λ)", fitted.before["_confidence"], fitted.before["_correct"]),
        ("after (in-sample)", fitted.after["_confidence"], fitted.after["_correct"]),
    ]
    if fitted.cv is not None:
        panels.append(
            (f"after ({cv_folds}-fold cross-fitted)", fitted.cv["_confidence"], fitted.cv["_correct"])
        )
    return save_reliability_diagram(panels, plot)


def _search_info(
    run_config: RunConfig,
    fitted: _Fitted,
    *,
    fit_power: bool,
    isotonic: bool,
    cv_folds: int,
    state_ratio: float | None = None,
    route_maps: bool = True,
    reader_maps: bool = True,
) -> dict[str, Any]:
    """The ``search`` block of the calibration file: objectives, grids, the prior and notes."""
    fusion = run_config.fusion
    return {
        "order": [
            "evidence scale at each power (NLL at the configured λ, each source weighted equally)",
            "λ, τ1, τ2 at each power (route accuracy, each source weighted equally; ECE tie-break)",
            "stated-set bar at each power (exact stated sets, each source weighted equally)",
            "witness bar at each power (the same objective at that bar; ties: off, then the higher bar)",
            "power (exact stated sets at its fitted setting, each source weighted equally; ties: NLL, then "
            "closest to 1)",
            "isotonic (pooled; per route with route maps)",
            "reader map (logistic: logit of the mapped confidence and the answer's reader score)",
        ],
        "scale_objective": "log loss of the Eq 27 confidence vs 'selected claim is gold' (queries with gold, "
        "but a conflict's sides given as gold), each source weighted equally; "
        "ties: closest to s = p = 1",
        "threshold_objective": "route accuracy vs training.trainer.trainer.expected_route, each source weighted "
        "equally; ties: ECE (15 bins) of the "
        "fused confidence (the scale's queries), then L1 distance of (λ, τ1, τ2) to the configured values",
        "transform": "e' = scale * e ** power",
        "scale_grid": [min(SCALE_GRID), max(SCALE_GRID), len(SCALE_GRID)],
        "power_grid": list(POWER_GRID) if fit_power else [1.0],
        "lam_grid": list(LAM_GRID) if fusion.rule == "lambda" else [fusion.lam],
        "tau_grid_step": TAU_GRID[1] - TAU_GRID[0],
        "prior": {"lam": fusion.lam, "tau1": fusion.tau1, "tau2": fusion.tau2},
        "fit": {k: v for k, v in fitted.fit.items() if k != "notes"},
        "isotonic": isotonic,
        "route_maps": {"on": route_maps, "min_queries": ROUTE_MAP_MIN_QUERIES} if isotonic else None,
        "reader_map": {"on": reader_maps, "min_queries": READER_MAP_MIN_QUERIES} if isotonic else None,
        "cv_folds": cv_folds if fitted.cv is not None else 0,
        # the open frames' bar when it was given (--state-ratio), not fitted; absent: fitted on the grid
        **({"state_ratio_fixed": state_ratio} if state_ratio is not None else {}),
        "notes": fitted.notes,
    }


def _provenance(
    run_config: RunConfig,
    *,
    plot: Path,
    cache_path: Path | None,
    run_info: dict[str, Any],
    fit_seconds: float,
    command: str | None,
) -> dict[str, Any]:
    """The top-level extras of the calibration file: plot, cache, timings, config, command, versions."""

    return {
        "reliability_diagram": plot.name,
        "evidence_cache": str(cache_path) if cache_path is not None else None,
        "run": {**run_info, "fit_seconds": round(fit_seconds, 3)},
        "config": {
            "k": run_config.k,
            "fusion": dataclasses.asdict(run_config.fusion),
            "evaluator": dataclasses.asdict(run_config.evaluator),
        },
        "command": command,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        # the file format's keys: import-style names
        "versions": dict(
            zip(
                ("evidential_rag", "torch", "numpy", "scikit_learn"),
                package_versions("evidential-rag", "torch", "numpy", "scikit-learn").values(),
            )
        ),
    }


def calibrate(
    run_config: RunConfig,
    data_specs: list[str],
    output: str | Path,
    *,
    validation_fraction: float | None = None,
    split_seed: int | None = None,
    max_chunks: int | None = None,
    max_claims: int | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    isotonic: bool = True,
    fit_power: bool = True,
    cv_folds: int = DEFAULT_FOLDS,
    cache: str | Path | None = "auto",
    progress: bool = False,
    command: str | None = None,
    evaluator: Any = None,
    frames: str = "labelled",
    state_ratio: float | None = None,
    conflict_gold: bool = True,
    route_maps: bool = True,
    reader_maps: bool = True,
    side_conflicts: bool = True,
) -> CalibrationRun:
    """Fit and write a calibration for ``run_config``'s evaluator (see the module docstring).

    ``cache="auto"`` keeps the evidence cache next to the output (``<output>.evidence.jsonl``); ``None``
    keeps nothing. ``evaluator`` may be an already-built evaluator (tests); by default it is built from
    the config once the data is known to be usable, and only when some query is not in the cache.
    ``frames``: ``labelled`` (the rows' candidates are the frame) or ``extracted`` (the evaluator's own
    frames, as the pipeline fuses them; :func:`relabel_to_frame`). ``state_ratio``: the open frames'
    stated-set bar, kept at this value instead of fitted (the yes/no bar, λ, τ and the rest are fitted).
    ``conflict_gold``: a query without a gold reference whose chunks support several claims (a real conflict)
    is calibrated with them as its gold reference (:func:`conflict_reference`). ``route_maps``: the direct
    and the conflict route each get an isotonic map of their own when they have enough validation answers
    (:func:`training.calibration.fit_route_isotonic`). ``reader_maps``: the mapped confidence is corrected by
    the answer's reader score where the evaluator gives one (:func:`training.calibration.fit_reader_map`).
    ``side_conflicts``: a query whose unplanted chunks
    support a claim outside its gold reference (two sides of a conflict, ConflictQA's memory and counter
    memory) is calibrated as a conflict with every supported claim as its reference
    (:func:`side_conflict_reference`).
    """
    output = Path(output)
    if state_ratio is not None and not (
        isinstance(state_ratio, (int, float))
        and not isinstance(state_ratio, bool)
        and 0.0 <= state_ratio <= 1.0
    ):
        raise ConfigError(f"--state-ratio must be a number in [0, 1]; got {state_ratio!r}")
    _check_arguments(run_config, output, batch_size)
    sources, from_data = _read_sources(data_specs)
    split = resolve_split(run_config, from_data, validation_fraction, split_seed)
    max_chunks = max_chunks if max_chunks is not None else run_config.k
    max_claims = max_claims if max_claims is not None else int(split["max_claims_per_query"])
    examples, data_info = load_validation_examples(
        sources,
        split,
        max_chunks,
        max_claims,
        limit,
        conflict_gold=conflict_gold,
        side_conflicts=side_conflicts,
    )
    identity = evaluator_identity(run_config)
    cache_path = _cache_path(output, cache)

    def factory() -> Any:
        return build_evaluator(run_config.evaluator)

    outcomes, run_info = collect_evidence(
        evaluator if evaluator is not None else factory,
        examples,
        tag=_cache_tag(run_config, identity, frames),
        batch_size=batch_size,
        cache=cache_path,
        progress=progress,
        frames=frames,
        aligner=ClaimAligner(
            aliases=dict(run_config.evaluator.aliases),
            merge_subspans=run_config.evaluator.merge_subspans,
            merge_units=run_config.evaluator.merge_units,
        ),
    )
    data_info["frames"] = frames
    fitted = _fit(
        run_config,
        outcomes,
        isotonic=isotonic,
        fit_power=fit_power,
        cv_folds=cv_folds,
        state_ratio=state_ratio,
        route_maps=route_maps,
        reader_maps=reader_maps,
    )
    plot = _plot(output, fitted, cv_folds)
    cal = Calibration(
        evaluator=identity["name"],
        **fitted.params,
        evaluator_info={k: v for k, v in identity.items() if k != "name"},
        data=data_info,
        metrics=fitted.metrics,
        search=_search_info(
            run_config,
            fitted,
            fit_power=fit_power,
            isotonic=isotonic,
            cv_folds=cv_folds,
            state_ratio=state_ratio,
            route_maps=route_maps,
            reader_maps=reader_maps,
        ),
        extra=_provenance(
            run_config,
            plot=plot,
            cache_path=cache_path,
            run_info=run_info,
            fit_seconds=fitted.seconds,
            command=command,
        ),
    )
    write_json(output, cal.to_dict())
    return CalibrationRun(cal, output, plot, cache_path)
