"""``evidential-rag calibrate``: fit an evaluator's evidence scale, λ, (τ1, τ2) and an isotonic confidence map
on validation data (registered on the main typer app).

Steps: read the data (annotated-chunk JSONL or builder specs), keep only the **validation** side of the
split by question (the same fraction and seed as the learned checkpoint's training, read from its model
card, so its training questions are never used), run the evaluator ONCE over those queries in batches with
the rows' candidate frame as candidates (so frame claim ``j`` is candidate ``j`` and the labels line up),
cache the evidence (``<output>.evidence.jsonl``, reused on a rerun: an interrupted run resumes), fit on the
cached tensors (:mod:`training.calibration.fit`; no model calls during the search) and write the calibration
JSON (atomically) and a reliability diagram PNG next to it.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from evidential.errors import ConfigError, EvidentialError
from inference.cli import ConfigOpt, SetOpt, _fail, _load, app, console, err
from inference.config import RunConfig

__all__ = [
    "CalibrationRun",
    "calibrate",
    "collect_evidence",
    "load_validation_examples",
    "parse_data_spec",
    "save_reliability_diagram",
]

DEFAULT_FOLDS = 5


# ---- data ----------------------------------------------------------------------------------------------
def parse_data_spec(spec: str) -> tuple[list[Any], dict[str, Any]]:
    """One ``--data`` value → data sources (:class:`training.trainer.config.DataSourceConfig`) and split settings.

    Accepted forms:

    * ``FILE.jsonl`` — an annotated-chunk file (DESIGN.md §3);
    * ``NAME:PATH`` — a registered builder over a benchmark file (``ramdocs:../shared/data/ramdocs/RAMDocs_test.jsonl``)
      or ``annotated:PATH``;
    * ``{name: ramdocs, path: ..., limit: 100, options: {labeling: stance}}`` — a YAML/JSON mapping with the
      fields of a training config's ``data[]`` entry;
    * ``FILE.yaml`` or a named training config (``learned-minilm``) — its ``data`` list; its
      ``validation_fraction``, ``split_seed`` and ``max_claims_per_query`` become the split settings.
    """
    import yaml

    from training.data.benchmarks import BUILDERS
    from training.trainer.config import DataSourceConfig, load_train_config
    from training.utils.configio import build_dataclass

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
    from training.trainer.config import TrainConfig

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
    from training.calibration.fit import CalibrationError

    explicit = {
        k: v
        for k, v in (("validation_fraction", validation_fraction), ("split_seed", split_seed))
        if v is not None
    }
    base = _train_defaults()
    if run_config.evaluator.name == "learned":
        from training.learned.checkpoint import resolve_checkpoint

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


def load_validation_examples(
    sources: list[Any],
    split: dict[str, Any],
    max_chunks: int,
    max_claims: int,
    limit: int | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """The validation queries of ``sources`` as :class:`training.trainer.trainer.QueryExample` (chunks capped at
    ``max_chunks`` in file order, claims at ``max_claims`` — gold and labelled first — as the trainer does),
    keeping only fully labelled queries; and a description of the data for the calibration file."""
    from training.calibration.fit import CalibrationError
    from training.data.annotated import group_by_query, split_by_question
    from training.trainer.trainer import load_training_rows, prepare_examples

    rows = load_training_rows(SimpleNamespace(data=sources))
    train_rows, val_rows = split_by_question(rows, split["validation_fraction"], split["split_seed"])
    exs = prepare_examples(group_by_query(val_rows), max_chunks, max_claims)
    unlabelled = [e for e in exs if not getattr(e, "fully_labelled", True)]
    exs = [e for e in exs if getattr(e, "fully_labelled", True)]
    if limit is not None:
        exs = exs[:limit]
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
        "chunks": sum(len(e.chunks) for e in exs),
        "max_chunks": max_chunks,
        "max_claims": max_claims,
        "by_source": dict(Counter(e.source or "unknown" for e in exs)),
    }
    return exs, info


# ---- the evaluator pass (cached) -----------------------------------------------------------------------
def _cache_tag(run_config: RunConfig, identity: dict[str, Any]) -> str:
    ev = dataclasses.asdict(run_config.evaluator)
    for key in ("device", "checkpoint", "support_threshold"):
        ev.pop(key, None)
    ident = {k: v for k, v in identity.items() if k != "checkpoint"}  # content, not location
    blob = json.dumps({"identity": ident, "evaluator": ev}, sort_keys=True, default=str)
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
            except (json.JSONDecodeError, KeyError, TypeError):
                bad += 1  # a line cut by an interruption: that query is evaluated again
    return got, bad


def collect_evidence(
    evaluator: Any,
    examples: list[Any],
    *,
    tag: str,
    batch_size: int = 8,
    cache: Path | None = None,
    progress: bool = False,
) -> tuple[list[tuple[Any, Any]], dict[str, Any]]:
    """Run ``evaluator`` once over ``examples`` (batched, candidates = each query's frame) and return
    ``(QueryExample, evidence [k, M])`` pairs; extra claims an evaluator adds to the frame (the prompt
    evaluator's unaligned answers) are appended to the example's claims (wrong claims). Entries already in
    ``cache`` (same evaluator tag and inputs) are reused; new ones are appended batch by batch.
    ``evaluator`` may be a zero-argument factory (called only when some query is not cached)."""
    import torch
    from tqdm.auto import tqdm

    from inference.types import Chunk
    from training.calibration.fit import CalibrationError

    cached, bad = _read_cache(cache)
    ids = [_entry_id(tag, ex) for ex in examples]
    todo = [i for i, eid in enumerate(ids) if eid not in cached]
    t_load = time.perf_counter()
    if callable(evaluator) and not hasattr(evaluator, "evaluate_batch"):
        evaluator = evaluator() if todo else None
    load_s = time.perf_counter() - t_load
    passes_before = getattr(evaluator, "passes", 0)
    t0 = time.perf_counter()
    fh = None
    if cache is not None and todo:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fh = cache.open("a", encoding="utf-8")
    try:
        with tqdm(total=len(todo), desc="evaluate", unit="q", disable=not progress) as bar:
            for s in range(0, len(todo), batch_size):
                part = [examples[i] for i in todo[s : s + batch_size]]
                chunks = [
                    [Chunk(f"c{i + 1}", text, None, rank=i + 1) for i, text in enumerate(ex.chunks)]
                    for ex in part
                ]
                results = evaluator.evaluate_batch(
                    [ex.query for ex in part], chunks, [list(ex.claims) for ex in part]
                )
                lines = []
                for i, ex, res in zip(todo[s : s + batch_size], part, results):
                    frame = [c.text for c in res.claims]
                    if frame[: len(ex.claims)] != list(ex.claims):
                        raise CalibrationError(
                            f"the {evaluator.name} evaluator changed the candidate frame of query "
                            f"{ex.query[:60]!r}; calibration needs frame claim j = candidate j"
                        )
                    entry = {
                        "claims": frame,
                        "evidence": res.evidence.to(torch.float64).tolist(),
                    }
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
    outcomes = []
    extra_claims = 0
    for ex, eid in zip(examples, ids):
        e = cached[eid]
        ev = torch.tensor(e["evidence"], dtype=torch.float64).reshape(len(ex.chunks), len(e["claims"]))
        if len(e["claims"]) > len(ex.claims):
            extra_claims += len(e["claims"]) - len(ex.claims)
            ex = dataclasses.replace(ex, claims=list(e["claims"]))
        outcomes.append((ex, ev))
    info = {
        "evaluated_queries": len(todo),
        "cached_queries": len(examples) - len(todo),
        "unreadable_cache_lines": bad,
        "batched_passes": getattr(evaluator, "passes", 0) - passes_before,
        "load_evaluator_seconds": round(load_s, 3),
        "evaluate_seconds": round(time.perf_counter() - t0, 3),
        "extra_claims": extra_claims,
    }
    return outcomes, info


# ---- plot ----------------------------------------------------------------------------------------------
def save_reliability_diagram(
    panels: list[tuple[str, list[float], list[bool]]], path: Path, n_bins: int = 15
) -> Path:
    """Reliability diagram PNG: one panel per ``(title, confidence, correct)`` — accuracy per equal-width bin
    (the ECE bins) against the diagonal, bar labels = queries per bin, ECE in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from training.utils.metrics import expected_calibration_error

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
    width = 1.0 / n_bins
    for ax, (title, conf, ok) in zip(axes[0], panels):
        c = np.asarray(conf, dtype=float)
        y = np.asarray(ok, dtype=float)
        bins = np.clip(np.ceil(c * n_bins).astype(int) - 1, 0, n_bins - 1) if c.size else np.array([], int)
        centers = (np.arange(n_bins) + 0.5) * width
        acc = np.array([y[bins == b].mean() if (bins == b).any() else np.nan for b in range(n_bins)])
        mean_c = np.array([c[bins == b].mean() if (bins == b).any() else np.nan for b in range(n_bins)])
        counts = np.array([(bins == b).sum() for b in range(n_bins)])
        has = counts > 0
        ax.bar(
            centers[has], acc[has], width=width * 0.9, color="#4C72B0", edgecolor="black", label="accuracy"
        )
        ax.scatter(mean_c[has], acc[has], color="#DD8452", zorder=3, s=14, label="mean confidence")
        for x, a, n in zip(centers[has], acc[has], counts[has]):
            ax.text(x, a + 0.015, str(int(n)), ha="center", fontsize=7)
        ax.plot([0, 1], [0, 1], "--", color="gray", lw=1)
        ece = expected_calibration_error(c.tolist(), [bool(v) for v in y], n_bins)
        ax.set_title(f"{title}\nECE {ece:.3f} (n = {c.size})", fontsize=10)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.16)
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_xlabel("confidence")
        ax.set_ylabel("fraction correct (selected claim is gold)")
        ax.legend(loc="upper left", fontsize=7, ncol=2, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path


# ---- the whole run -------------------------------------------------------------------------------------
@dataclasses.dataclass
class CalibrationRun:
    """What :func:`calibrate` produced: the calibration, its file and the plot."""

    calibration: Any
    output: Path
    plot: Path
    cache: Path | None


def _strip(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if not k.startswith("_")}


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
) -> CalibrationRun:
    """Fit and write a calibration for ``run_config``'s evaluator (see the module docstring).

    ``cache="auto"`` keeps the evidence cache next to the output (``<output>.evidence.jsonl``); ``None``
    keeps nothing. ``evaluator`` may be an already-built evaluator (tests); by default it is built from
    the config once the data is known to be usable, and only when some query is not in the cache.
    """
    import numpy as np
    import sklearn
    import torch

    import evidential
    from inference.calibration import evaluator_identity
    from inference.evaluators import build_evaluator
    from training.calibration.fit import (
        LAM_GRID,
        POWER_GRID,
        SCALE_GRID,
        TAU_GRID,
        Calibration,
        CalibrationData,
        apply_evidence_transform,
        cross_validate,
        evaluate_parameters,
        fit_calibration,
    )
    from training.trainer.trainer import score_outcomes
    from training.utils.io import write_json

    output = Path(output)
    if output.suffix != ".json":
        raise ConfigError(f"--output {output}: the calibration file must end in .json")
    if batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1; got {batch_size}")
    if run_config.calibration is not None:
        raise ConfigError(
            "the run config already names a calibration file (calibration=...); calibrate the raw evaluator: "
            "remove it"
        )
    sources: list[Any] = []
    from_data: dict[str, Any] = {}
    for spec in data_specs:
        got, split_info = parse_data_spec(spec)
        sources += got
        from_data = {**from_data, **split_info}
    if not sources:
        raise ConfigError("give at least one --data source")
    split = resolve_split(run_config, from_data, validation_fraction, split_seed)
    max_chunks = max_chunks if max_chunks is not None else run_config.k
    max_claims = max_claims if max_claims is not None else int(split["max_claims_per_query"])
    examples, data_info = load_validation_examples(sources, split, max_chunks, max_claims, limit)
    identity = evaluator_identity(run_config)
    cache_path = (
        output.with_name(output.stem + ".evidence.jsonl")
        if cache == "auto"
        else Path(cache)
        if cache
        else None
    )
    outcomes, run_info = collect_evidence(
        evaluator if evaluator is not None else (lambda: build_evaluator(run_config.evaluator)),
        examples,
        tag=_cache_tag(run_config, identity),
        batch_size=batch_size,
        cache=cache_path,
        progress=progress,
    )

    t1 = time.perf_counter()
    fusion = run_config.fusion
    data = CalibrationData.from_examples(outcomes)
    prior = (fusion.lam, fusion.tau1, fusion.tau2)
    fit_kwargs = dict(
        rule=fusion.rule, policy=fusion.policy, prior=prior, fit_power=fit_power, isotonic=isotonic
    )
    fitted = fit_calibration(data, **fit_kwargs)
    params = {k: fitted[k] for k in ("scale", "power", "lam", "tau1", "tau2", "rule", "policy", "isotonic")}
    before = evaluate_parameters(
        data,
        lam=fusion.lam,
        tau1=fusion.tau1,
        tau2=fusion.tau2,
        rule=fusion.rule,
        policy=fusion.policy,
        details=True,
    )
    after = evaluate_parameters(data, **params, details=True)
    # the trainer's own scorer on the same outcomes: claim accuracy, evidence by document type, strict EM
    thr = run_config.evaluator.support_threshold
    scored_before = score_outcomes(
        outcomes, thr, fusion.lam, fusion.rule, (fusion.tau1, fusion.tau2), fusion.policy
    )
    scaled = [(ex, apply_evidence_transform(ev, params["scale"], params["power"])) for ex, ev in outcomes]
    scored_after = score_outcomes(
        scaled, thr, params["lam"], fusion.rule, (params["tau1"], params["tau2"]), fusion.policy
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
    metrics: dict[str, Any] = {
        "before": {
            **_strip(before),
            **extras_before,
            "parameters": {
                "scale": 1.0,
                "power": 1.0,
                "lam": fusion.lam,
                "tau1": fusion.tau1,
                "tau2": fusion.tau2,
            },
        },
        "after": {**_strip(after), **extras_after, "in_sample": True},
    }
    notes = list(fitted["fit"]["notes"])
    cv = None
    if cv_folds:
        if len(data) >= 2 * cv_folds:
            cv = cross_validate(data, cv_folds, **fit_kwargs)
            metrics["after_cv"] = _strip(cv)
        else:
            notes.append(f"cross-validation skipped: {len(data)} queries < 2 × {cv_folds} folds")
    fit_s = time.perf_counter() - t1

    plot = output.with_name(output.stem + ".reliability.png")
    panels = [
        ("before (raw evidence, configured λ)", before["_confidence"], before["_correct"]),
        ("after (in-sample)", after["_confidence"], after["_correct"]),
    ]
    if cv is not None:
        panels.append((f"after ({cv_folds}-fold cross-fitted)", cv["_confidence"], cv["_correct"]))
    save_reliability_diagram(panels, plot)

    search = {
        "order": [
            "evidence scale/power (NLL at the configured λ)",
            "λ, τ1, τ2 (route accuracy, ECE tie-break)",
            "isotonic",
        ],
        "scale_objective": "mean log loss of the Eq 27 confidence vs 'selected claim is gold' (queries with gold); "
        "ties: closest to s = p = 1",
        "threshold_objective": "route accuracy vs training.trainer.trainer.expected_route; ties: ECE (15 bins) of the "
        "fused confidence, then L1 distance of (λ, τ1, τ2) to the configured values",
        "transform": "e' = scale * e ** power",
        "scale_grid": [min(SCALE_GRID), max(SCALE_GRID), len(SCALE_GRID)],
        "power_grid": list(POWER_GRID) if fit_power else [1.0],
        "lam_grid": list(LAM_GRID) if fusion.rule == "lambda" else [fusion.lam],
        "tau_grid_step": TAU_GRID[1] - TAU_GRID[0],
        "prior": {"lam": prior[0], "tau1": prior[1], "tau2": prior[2]},
        "fit": {k: v for k, v in fitted["fit"].items() if k != "notes"},
        "isotonic": isotonic,
        "cv_folds": cv_folds if cv is not None else 0,
        "notes": notes,
    }
    cal = Calibration(
        evaluator=identity["name"],
        **params,
        evaluator_info={k: v for k, v in identity.items() if k != "name"},
        data=data_info,
        metrics=metrics,
        search=search,
        extra={
            "reliability_diagram": plot.name,
            "evidence_cache": str(cache_path) if cache_path is not None else None,
            "run": {**run_info, "fit_seconds": round(fit_s, 3)},
            "config": {
                "k": run_config.k,
                "fusion": dataclasses.asdict(fusion),
                "evaluator": dataclasses.asdict(run_config.evaluator),
            },
            "command": command,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "versions": {
                "evidential_rag": evidential.__version__,
                "torch": torch.__version__,
                "numpy": np.__version__,
                "scikit_learn": sklearn.__version__,
            },
        },
    )
    write_json(output, cal.to_dict())
    return CalibrationRun(cal, output, plot, cache_path)


# ---- command -------------------------------------------------------------------------------------------
@app.command("calibrate")
def calibrate_cmd(
    data: Annotated[
        list[str],
        typer.Option(
            "--data",
            help="Calibration data (repeatable): an annotated-chunk JSONL, NAME:PATH for a builder (ramdocs, "
            "wikicontradict, conflictqa, musique), a mapping like '{name: ramdocs, path: P, limit: 100}', or a "
            "training config (its data sources and split). Only the validation split is used.",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Calibration JSON to write (the reliability PNG goes next to it)."
        ),
    ],
    evaluator: Annotated[
        str | None,
        typer.Option(
            "--evaluator", help="Evaluator to calibrate: learned or prompt (default: the config's)."
        ),
    ] = None,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    validation_fraction: Annotated[
        float | None,
        typer.Option(
            help="Validation share of the split by question (default: the learned checkpoint's, else 0.2)."
        ),
    ] = None,
    split_seed: Annotated[
        int | None, typer.Option(help="Seed of the split by question (default: the checkpoint's, else 0).")
    ] = None,
    max_chunks: Annotated[
        int | None, typer.Option(help="Chunks per query, in file order (default: the config's k).", min=1)
    ] = None,
    max_claims: Annotated[
        int | None,
        typer.Option(
            help="Candidate claims per query, gold and labelled first (default: as in training).", min=1
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Use at most N validation queries.", min=1)] = None,
    batch_size: Annotated[int, typer.Option(help="Queries per batched evaluator call.", min=1)] = 8,
    isotonic: Annotated[
        bool, typer.Option("--isotonic/--no-isotonic", help="Fit an isotonic map of the confidence.")
    ] = True,
    power: Annotated[
        bool,
        typer.Option("--power/--no-power", help="Fit an evidence power (temperature) besides the scale."),
    ] = True,
    cv_folds: Annotated[
        int, typer.Option(help="Folds of the cross-fitted 'after' estimate (0: off).", min=0)
    ] = DEFAULT_FOLDS,
    cache: Annotated[
        Path | None,
        typer.Option(help="Evidence cache JSONL (default: OUTPUT with .evidence.jsonl); reused and resumed."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Keep no evidence cache.")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the calibration file's content as JSON.")
    ] = False,
) -> None:
    """Calibrate an evaluator on validation data: evidence scale/power, λ, (τ1, τ2) and an isotonic map of the
    confidence; writes OUTPUT (JSON) and a reliability diagram PNG next to it.

    Use the file with `ask`/`batch`/`serve --calibration OUTPUT`. Exit codes: 0 done, 2 bad config or data.
    """
    from training.data.annotated import TrainingDataError

    extra = [f"evaluator.name={evaluator}"] if evaluator else []
    cfg = _load(config, overrides, extra)
    if cv_folds == 1:
        _fail("--cv-folds must be 0 (off) or >= 2")
    command = "evidential-rag " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        run = calibrate(
            cfg,
            data,
            output,
            validation_fraction=validation_fraction,
            split_seed=split_seed,
            max_chunks=max_chunks,
            max_claims=max_claims,
            limit=limit,
            batch_size=batch_size,
            isotonic=isotonic,
            fit_power=power,
            cv_folds=cv_folds,
            cache=None if no_cache else (cache if cache is not None else "auto"),
            progress=progress and sys.stderr.isatty(),
            command=command,
        )
    except (EvidentialError, TrainingDataError) as exc:
        _fail(str(exc))
        return
    except RuntimeError as exc:  # backend errors carry what to fix
        _fail(f"{type(exc).__name__}: {exc}")
        return
    cal = run.calibration
    if as_json:
        console.print_json(json.dumps(cal.to_dict(), ensure_ascii=False))
        return
    m = cal.metrics
    rows = [("before", m["before"]), ("after (in-sample)", m["after"])]
    if "after_cv" in m:
        rows.append((f"after ({m['after_cv']['folds']}-fold CV)", m["after_cv"]))
    d = cal.data
    console.print(
        f"calibrated the {cal.evaluator} evaluator on {d['queries']} validation queries "
        f"({d['queries_with_gold']} with gold): scale {cal.scale:.4g}, power {cal.power:g}, λ {cal.lam:g}, "
        f"τ1 {cal.tau1:g}, τ2 {cal.tau2:g}, isotonic {'on' if cal.isotonic else 'off'}",
        highlight=False,
    )
    for name, row in rows:
        console.print(
            f"  {name:<22} route accuracy {row['route_accuracy']:.3f}  ECE {row['ece']:.3f}", highlight=False
        )
    for note in cal.search.get("notes", []):
        err.print(f"note: {note}", highlight=False)
    console.print(f"→ {run.output} (reliability diagram {run.plot})", highlight=False)
