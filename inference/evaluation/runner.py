"""The experiment runner behind ``evidential-rag evaluate``: every system on one harness, resumable.

One run = one dataset × the listed systems × the listed seeds, written to an output folder:

* ``run.json`` — the settings (dataset, data path, systems, evaluator, seeds, limit, split, judge, the full
  run config) and versions. Resuming into a folder whose settings differ is refused.
* ``instances.jsonl`` — the evaluated instances with the chunks every system sees: retrieved once from
  ``--index`` when given (the next k retrieved are kept as ``extra_chunks``, Corrective RAG's expansion
  pool), else the instance's passages (``extra_chunks``: the next k pieces by similarity),
  split into ``retrieval.chunk_tokens`` pieces when longer (CRAG web pages) and, when there are more than
  ``k``, the ``k`` most similar to the question under the configured embedder (same chunks, same order, for
  every system: the matched comparison of §4.2).
* ``<system>.jsonl`` — one row per (seed, instance): the answer record, the gold, the judge's labels and the
  per-instance scores. Rows are appended and flushed per batch, so a crashed run continues where it
  stopped; a torn last line is dropped on resume.
* ``metrics.json``, ``report.md`` and PNG plots — written by :mod:`inference.evaluation.report`.

With greedy decoding (``generator.generation.temperature == 0``) every system is deterministic, so the
first seed is computed and the other seeds reuse its rows (``reused_from_seed``): their std is 0 by
construction, and the report says so.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evidential.errors import ConfigError
from inference.config import RunConfig
from inference.evaluation.datasets import EvalInstance, chunk_passages, default_data_path, load_eval_dataset
from inference.evaluation.judges import JudgeInput, build_judge
from inference.evaluation.report import write_report
from inference.evaluation.rows import instance_scores, load_rows
from inference.io import rounded, write_json, write_jsonl
from inference.rag import build_systems, seed_everything
from inference.retrieval import Embedder, build_retriever
from inference.types import Chunk, DataError
from training.utils.run_metadata import package_versions

__all__ = [
    "EvaluateOptions",
    "PeakMemory",
    "prepare_instances",
    "run_evaluation",
    "select_chunks",
    "select_extra_chunks",
]

RUN_VERSION = "evaluate/1.0"
SPLITS = ("all", "validation", "train")


@dataclass
class EvaluateOptions:
    """What ``evidential-rag evaluate`` runs (the CLI flags)."""

    dataset: str = field(
        metadata={"help": "Dataset name (ramdocs, wikicontradict, conflictqa, musique, crag)."}
    )
    out: Path = field(metadata={"help": "Output folder (created; an existing run there is resumed)."})
    data: str | None = field(
        default=None, metadata={"help": "File, folder or hf:NAME[:SPLIT]; None = ../shared/data/<dataset>."}
    )
    systems: list[str] = field(
        default_factory=lambda: ["evidential", "naive"], metadata={"help": "Systems (SYSTEMS registry)."}
    )
    seeds: list[int] = field(default_factory=lambda: [42, 123, 999], metadata={"help": "Seeds."})
    limit: int | None = field(default=None, metadata={"help": "First N instances (after the split filter)."})
    split: str = field(
        default="all",
        metadata={
            "help": "all, or validation/train: the learned evaluator's training split of the question "
            "(validation = questions the shipped checkpoint never trained on)."
        },
    )
    judge: str = field(default="label", metadata={"help": "Judge (JUDGES registry): label or llm."})
    reference: str | None = field(
        default=None,
        metadata={"help": "System the p-values compare against; None = corrective if run, else naive."},
    )
    batch_size: int = field(default=8, metadata={"help": "Questions per batched system call."})
    bertscore_model: str = field(
        default="sentence-transformers/all-MiniLM-L6-v2",
        metadata={"help": "BERTScore model (the packaged MiniLM offline; a hub id or path on a server)."},
    )
    options: dict[str, Any] = field(default_factory=dict, metadata={"help": "Dataset loader options."})
    index: Path | None = field(
        default=None,
        metadata={
            "help": "Index folder (`evidential-rag index`): retrieve each question's k chunks from it once "
            "(shared by every system) instead of using the instance's own passages."
        },
    )

    def __post_init__(self) -> None:
        if not self.systems:
            raise ConfigError("--systems must name at least one system")
        if len(set(self.systems)) != len(self.systems):
            raise ConfigError(f"--systems lists a system twice: {self.systems}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"--seeds must be distinct integers; got {self.seeds}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1; got {self.limit}")
        if self.split not in SPLITS:
            raise ConfigError(f"--split must be one of {', '.join(SPLITS)}; got {self.split!r}")
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1; got {self.batch_size}")
        self.out = Path(self.out)


# ------------------------------------------------------------------------------------------------ chunks
def select_chunks(
    instance: EvalInstance, k: int, embedder=None, chunk_tokens: int = 256, chunk_overlap: int = 40
) -> tuple[list[Chunk], list[dict]]:
    """The chunks every system sees for ``instance`` and each chunk's passage label.

    Passages longer than ``chunk_tokens`` tokens of the embedder's tokenizer are split (overlap
    ``chunk_overlap``; ids ``<passage id>#<n>``); with more than ``k`` pieces, the ``k`` most similar to the
    question (cosine of the embedder's unit vectors) are kept in similarity order, otherwise the dataset's
    order. Ranks are 1..n.
    """
    if embedder is not None:
        instance = chunk_passages(instance, chunk_tokens, chunk_overlap, embedder.tokenizer)
    pieces = list(zip(instance.passages, instance.passage_labels))
    scores = [None] * len(pieces)
    if len(pieces) > k:
        if embedder is None:
            pieces = pieces[:k]
        else:
            q = embedder.encode_queries([instance.question])[0]
            d = embedder.encode_documents([c.text for c, _ in pieces])
            sims = d @ q
            order = np.argsort(-sims, kind="stable")[:k]
            pieces = [pieces[i] for i in order]
            scores = [float(sims[i]) for i in order]
    chunks = [
        Chunk(id=c.id, text=c.text, source=c.source, rank=r, score=None if s is None else rounded(s))
        for r, ((c, _), s) in enumerate(zip(pieces, scores), start=1)
    ]
    return chunks, [lab for _, lab in pieces]


class _OnceEmbedder:
    """An embedder that encodes each distinct document text once and reuses the vector afterwards."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.tokenizer = embedder.tokenizer
        self._documents: dict[str, np.ndarray] = {}

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.encode_queries(texts)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._documents]
        if missing:
            self._documents.update(zip(missing, self.embedder.encode_documents(missing)))
        if not texts:
            return self.embedder.encode_documents([])
        return np.stack([self._documents[t] for t in texts])


def select_extra_chunks(
    instance: EvalInstance,
    taken: Sequence[str],
    n: int,
    embedder=None,
    chunk_tokens: int = 256,
    chunk_overlap: int = 40,
) -> list[Chunk]:
    """Up to ``n`` further pieces of ``instance`` beyond the ids in ``taken``, most similar first (dataset
    order without an embedder), ranked after them: the "expanded retrieval" pool of Corrective RAG's
    incorrect/ambiguous branches (offline stand-in for its web search)."""
    if embedder is not None:
        instance = chunk_passages(instance, chunk_tokens, chunk_overlap, embedder.tokenizer)
    rest = [c for c in instance.passages if c.id not in set(taken)]
    if not rest or n < 1:
        return []
    if embedder is not None and len(rest) > 1:
        q = embedder.encode_queries([instance.question])[0]
        sims = embedder.encode_documents([c.text for c in rest]) @ q
        order = np.argsort(-sims, kind="stable")[:n]
        picked = [(rest[i], rounded(float(sims[i]))) for i in order]
    else:
        picked = [(c, None) for c in rest[:n]]
    return [
        Chunk(id=c.id, text=c.text, source=c.source, rank=len(taken) + r, score=s)
        for r, (c, s) in enumerate(picked, start=1)
    ]


def prepare_instances(
    opts: EvaluateOptions, cfg: RunConfig, embedder_factory: Callable[[], Any] | None = None
) -> list[dict]:
    """Load the dataset, filter the split, take ``limit`` and select each instance's chunks; cached in
    ``OUT/instances.jsonl`` so that a resumed run (and every system) sees exactly the same chunks."""
    path = opts.out / "instances.jsonl"
    if path.is_file():
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    data = opts.data if opts.data is not None else default_data_path(opts.dataset)
    if data is None:
        raise DataError(
            f"no data path for dataset {opts.dataset!r}: pass --data FILE|FOLDER|hf:NAME "
            "(../shared/data is not present here)"
        )
    # without a split filter the loader stops after `limit` records (CRAG's pages are parsed only for those)
    early = opts.limit if opts.split == "all" else None
    instances = load_eval_dataset(opts.dataset, data, limit=early, **opts.options)
    if opts.split != "all":
        instances = [i for i in instances if i.split == opts.split]
    if opts.limit is not None:
        instances = instances[: opts.limit]
    if not instances:
        raise DataError(f"no {opts.dataset} instances left (split={opts.split}, limit={opts.limit})")
    selected: list[tuple[EvalInstance, list[Chunk], list[dict], list[Chunk]]] = []
    if opts.index is not None:  # one shared retrieval over the index, done once for every system
        retriever = build_retriever(opts.index, cfg)
        found = retriever.search_batch([i.question for i in instances], 2 * cfg.k)
        for inst, got in zip(instances, found):
            chunks = list(got[: cfg.k])
            selected.append(
                (inst, chunks, [{"type": None, "answer": None} for _ in chunks], list(got[cfg.k :]))
            )
    else:
        embedder = embedder_factory() if embedder_factory is not None else None
        pieces = (cfg.retrieval.chunk_tokens, cfg.retrieval.chunk_overlap)
        for inst in instances:
            # both selections rank the same pieces: embed each piece once per instance
            memo = _OnceEmbedder(embedder) if embedder is not None else None
            chunks, labels = select_chunks(inst, cfg.k, memo, *pieces)
            extra = select_extra_chunks(inst, [c.id for c in chunks], cfg.k, memo, *pieces)
            selected.append((inst, chunks, labels, extra))
    rows = [
        {
            "instance": inst.to_dict(),
            "chunks": [c.to_dict() for c in chunks],
            "labels": labels,
            "extra_chunks": [c.to_dict() for c in extra],
        }
        for inst, chunks, labels, extra in selected
    ]
    write_jsonl(path, rows)
    return rows


# ------------------------------------------------------------------------------------------------ rows
def _append_rows(path: Path, rows: Iterable[dict]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


class PeakMemory:
    """Peak resident memory (MiB) of this process while the ``with`` block runs, sampled every 20 ms (and
    CUDA's peak allocation when a GPU is in use)."""

    def __init__(self, interval: float = 0.02):
        import psutil

        self._proc = psutil.Process()
        self.interval = interval
        self.peak_rss_mib = 0.0
        self.peak_cuda_mib: float | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_rss_mib = max(self.peak_rss_mib, self._proc.memory_info().rss / 2**20)

    def __enter__(self) -> PeakMemory:
        import torch

        self.peak_rss_mib = self._proc.memory_info().rss / 2**20
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        import torch

        self._stop.set()
        self._thread.join()
        self.peak_rss_mib = max(self.peak_rss_mib, self._proc.memory_info().rss / 2**20)
        if torch.cuda.is_available():
            self.peak_cuda_mib = torch.cuda.max_memory_allocated() / 2**20


def _confidence(record: dict) -> float | None:
    for key in ("calibrated_confidence", "confidence"):
        v = record.get(key)
        if isinstance(v, (int, float)):
            return float(min(max(v, 0.0), 1.0))
    return None


def _fingerprint(opts: EvaluateOptions, cfg: RunConfig) -> dict[str, Any]:
    return {
        "version": RUN_VERSION,
        "dataset": opts.dataset,
        "data": str(opts.data) if opts.data is not None else None,
        "limit": opts.limit,
        "split": opts.split,
        "judge": opts.judge,
        "options": opts.options,
        "index": str(opts.index) if opts.index is not None else None,
        "config": asdict(cfg),
    }


def _judge_kwargs(opts: EvaluateOptions, cfg: RunConfig) -> dict[str, Any]:
    """The LLM judge runs on the generator's backend section, cached in ``OUT/judge_cache.jsonl``."""
    if opts.judge != "llm":
        return {}
    return {"backend": cfg.generator.backend, "cache_path": opts.out / "judge_cache.jsonl"}


def _fill_new_sections(old: dict | None, new: dict, defaults: dict | None = None) -> None:
    """A run recorded before a config field or section existed (e.g. ``baselines``,
    ``generator.backend.raw_prompts``) ran with its default: fill such keys in ``old`` (at any depth) when
    ``new`` holds the default, so that resuming is allowed exactly when nothing that run used has changed."""
    if not isinstance(old, dict):
        return
    if defaults is None:
        defaults = json.loads(json.dumps(asdict(RunConfig()), default=str))
    for key, value in new.items():
        default = defaults.get(key) if isinstance(defaults, dict) else None
        if key not in old:
            if value == default:
                old[key] = value
        elif isinstance(old[key], dict) and isinstance(value, dict):
            _fill_new_sections(old[key], value, default if isinstance(default, dict) else {})


def _check_run(opts: EvaluateOptions, cfg: RunConfig) -> dict:
    """Write ``run.json`` (new run) or check that the folder's run has the same settings (resume)."""

    path = opts.out / "run.json"
    fp = json.loads(json.dumps(_fingerprint(opts, cfg), default=str))
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        _fill_new_sections(old.get("settings", {}).get("config"), fp["config"])
        diff = sorted(k for k in fp if old.get("settings", {}).get(k) != fp[k])
        if diff:
            raise ConfigError(
                f"{opts.out} holds a run with other settings ({', '.join(diff)} differ); "
                "resume with the same flags or choose a new --out"
            )
        seeds = sorted(set(old.get("seeds", [])) | set(opts.seeds))
        systems = list(dict.fromkeys([*old.get("systems", []), *opts.systems]))
    else:
        seeds, systems = list(opts.seeds), list(opts.systems)
    run = {
        "settings": fp,
        "systems": systems,
        "seeds": seeds,
        "versions": package_versions("evidential-rag", "torch", "transformers"),
    }
    opts.out.mkdir(parents=True, exist_ok=True)
    write_json(path, run)
    return run


# ------------------------------------------------------------------------------------------------ run
def run_evaluation(
    opts: EvaluateOptions,
    cfg: RunConfig,
    *,
    systems: dict[str, Any] | None = None,
    judge=None,
    progress: bool = True,
    report: bool = True,
) -> dict[str, Any]:
    """Run every system over the dataset for every seed (resuming what is done) and write the report.

    Args:
        opts: The run (dataset, systems, seeds, output folder, ...).
        cfg: The run config every system shares (k, fusion, evaluator, generator, models).
        systems: Already-built :class:`~inference.rag.RAGSystem` s by name (tests); ``None`` builds
            ``opts.systems`` (:func:`inference.rag.build_systems`, models loaded once).
        judge: An already-built judge; ``None`` builds ``opts.judge``.
        progress: Show progress bars.
        report: Write ``metrics.json`` / ``report.md`` / plots at the end.

    Returns:
        The metrics (``metrics.json``'s content) when ``report``, else ``{"rows": n}``.
    """
    from tqdm.auto import tqdm

    run = _check_run(opts, cfg)

    def embedder_factory():

        return Embedder(cfg.models.embedder, device=cfg.retrieval.device)

    prepared = prepare_instances(opts, cfg, embedder_factory)
    instances = [(EvalInstance.from_dict(p["instance"]), [Chunk(**c) for c in p["chunks"]]) for p in prepared]
    extras = {p["instance"]["id"]: [Chunk(**c) for c in p.get("extra_chunks", [])] for p in prepared}
    todo_any = False
    done: dict[str, set[tuple[int, str]]] = {}
    for name in opts.systems:
        rows = load_rows(opts.out / f"{name}.jsonl")
        done[name] = {(r["seed"], r["id"]) for r in rows}
        todo_any |= any((s, i.id) not in done[name] for s in opts.seeds for i, _ in instances)
    if todo_any:
        if systems is None:
            systems = build_systems(opts.systems, cfg)
        if judge is None:
            judge = build_judge(opts.judge, **_judge_kwargs(opts, cfg))
    deterministic = cfg.generator.name != "llm" or cfg.generator.generation.temperature == 0
    first_seed = opts.seeds[0]
    for name in opts.systems:
        path = opts.out / f"{name}.jsonl"
        for seed in opts.seeds:
            todo = [(i, c) for i, c in instances if (seed, i.id) not in done[name]]
            if not todo:
                continue
            if deterministic and seed != first_seed:
                base = {r["id"]: r for r in load_rows(path) if r["seed"] == first_seed}
                copies = [
                    {**base[i.id], "seed": seed, "reused_from_seed": first_seed}
                    for i, _ in todo
                    if i.id in base
                ]
                _append_rows(path, copies)
                done[name] |= {(seed, r["id"]) for r in copies}
                continue
            system = systems[name]
            system.set_seed(seed)
            bar = tqdm(total=len(todo), desc=f"{name} seed {seed}", unit="q", disable=not progress)
            for s in range(0, len(todo), opts.batch_size):
                part = todo[s : s + opts.batch_size]
                seed_everything(seed)
                t0 = time.perf_counter()
                questions, chunk_lists = [i.question for i, _ in part], [c for _, c in part]
                with PeakMemory() as mem:
                    if system.uses_extra_chunks:  # Corrective RAG's expansion pool
                        records = system.ask_batch(
                            questions, chunk_lists, extra_chunks=[extras[i.id] for i, _ in part]
                        )
                    else:
                        records = system.ask_batch(questions, chunk_lists)
                wall = time.perf_counter() - t0
                judged = judge.judge_batch(
                    [JudgeInput(i, r.get("response") or "", c) for (i, c), r in zip(part, records)]
                )
                rows = []
                for (inst, _), rec, jd in zip(part, records, judged):
                    rows.append(
                        {
                            "id": inst.id,
                            "dataset": inst.dataset,
                            "system": name,
                            "seed": seed,
                            "split": inst.split,
                            "question": inst.question,
                            "expected_behaviour": inst.expected_behaviour,
                            "gold_answers": list(inst.gold_answers),
                            "wrong_answers": list(inst.wrong_answers),
                            "record": rec,
                            "judge": jd.to_dict(),
                            "scores": instance_scores(inst, rec, _confidence(rec)),
                            "latency_s": rounded(wall / len(part)),
                            "batch_size": len(part),
                            "peak_rss_mib": rounded(mem.peak_rss_mib, 1),
                            "peak_cuda_mib": None
                            if mem.peak_cuda_mib is None
                            else rounded(mem.peak_cuda_mib, 1),
                        }
                    )
                _append_rows(path, rows)
                done[name] |= {(seed, r["id"]) for r in rows}
                bar.update(len(part))
            bar.close()
    if not report:
        return {"rows": sum(len(v) for v in done.values())}
    return write_report(opts.out, opts, run, judge_info=judge.describe() if judge is not None else None)


def parse_seeds(text: str) -> list[int]:
    """``"42,123,999"`` → ``[42, 123, 999]`` with a clear error."""
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds must be comma-separated integers; got {text!r}") from None


def parse_systems(text: str | Sequence[str]) -> list[str]:
    parts = text.split(",") if isinstance(text, str) else list(text)
    return [p.strip() for p in parts if p.strip()]
