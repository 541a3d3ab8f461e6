"""Sweeps and ablations over the cached evaluator outputs of an evaluation run — no model is called.

Every EvidentialRAG answer record of an ``evidential-rag evaluate`` run keeps the evaluator's per-chunk
evidence for every claim of the aligned frame (``record.chunks[i].evidence``, keyed by claim id) and the
claims with their supporting chunk ids. This module rebuilds the ``[N, k, M]`` evidence tensor of a
system's rows (padded, with chunk and claim masks), and for each setting of the grid re-runs opinions →
fusion → routing in ONE batched call (:func:`evidential.fuse`, :func:`evidential.route`), renders the
route's deterministic template answer (:func:`inference.generation.template_response`) and scores it with
the run's own metrics (:func:`inference.evaluation.rows.instance_scores`, the ``label/1.3`` judge, the
report's per-seed metrics). So sweeping λ, the rule, τ1/τ2 or the policy costs milliseconds per setting,
and the generator is never asked again: the swept rows are *templated* answers, stated in every table.

Tables (the paper's numbering):

* **Table 9** — λ sweep of the λ-transfer rule, with Yager (λ = 1 by construction) and classic normalized
  Dempster, at the run's thresholds and policy.
* **Table 10** — the (τ1, τ2) grid at the run's rule and λ.
* **Table 12** — ablations: the full system, without conflict-preserving fusion (evidence averaging,
  ``rule="average"``), without routing (``policy="direct"``: always the direct answer), and without the
  evaluator (= Naive RAG's generated rows of the same run, when it ran; its answers are generated, not
  templated, which the table says).
* **Routing policy** — the paper's Eq 15 against the decomposed policy at the run's λ/τ.
* **Prompt vs learned evaluator** — every evidential system of the run side by side: generated and
  templated accuracy, route accuracy, ECE, hallucination, JSON validity and evaluator latency.

Every number is mean ± std over the run's seeds (with greedy decoding the seeds share one answer, so
std = 0), with paired bootstrap p-values of accuracy (and strict EM on RAMDocs) against the reference
system's *generated* rows — Corrective RAG when the run has it, else Naive RAG — over the (seed, instance)
pairs both answered, reused seeds counted once.

Route accuracy compares the route with the one the instance's expected behaviour calls for
(:data:`BEHAVIOUR_ROUTE`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from evidential import (
    ROUTES,
    FusionConfig,
    copy_contested,
    copy_pairs,
    fuse,
    merge_copies,
    opinions_from_evidence,
    route,
    select_uncontested,
    witnessed_claims,
)
from evidential.errors import ConfigError
from evidential.fusion import fusion_rule_names
from inference.answer import record_copies, record_evidence
from inference.evaluation.datasets import EvalInstance
from inference.evaluation.judges import JudgeInput, build_judge
from inference.evaluation.report.stats import (
    evaluator_validity,
    mean_std_cell,
    paired_pvalues,
    rows_by_seed,
    seed_metrics,
)
from inference.evaluation.report.tables import format_cell, markdown_table
from inference.evaluation.rows import instance_scores, load_instances, load_rows
from inference.generation.template import template_response
from inference.io import atomic_write_text, rounded, write_json
from inference.types import Chunk, DataError
from training.calibration import (
    CalibrationError,
    answer_reader_score,
    apply_evidence_transform,
    calibrated_confidence,
    read_calibration,
)
from training.utils.metrics import stated_claims

__all__ = [
    "BEHAVIOUR_ROUTE",
    "DEFAULT_LAMS",
    "DEFAULT_STATE_RATIOS",
    "DEFAULT_TAUS",
    "EvidenceBatch",
    "SweepGrid",
    "SweepSetting",
    "evidence_batch",
    "has_cached_evidence",
    "parse_lams",
    "parse_taus",
    "refuse_rows",
    "render_sweep_markdown",
    "run_sweep",
]

SWEEP_VERSION = "sweep/1.0"
DEFAULT_LAMS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
DEFAULT_STATE_RATIOS: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
DEFAULT_TAUS: tuple[tuple[float, float], ...] = tuple(
    (t1, t2) for t1 in (0.2, 0.3, 0.35, 0.4, 0.5) for t2 in (0.5, 0.6, 0.65, 0.7, 0.8) if t1 < t2
)
#: The route an expected behaviour calls for: one supported answer → direct (misinformation: the planted
#: wrong value should be discounted, as in the learned evaluator's training targets), several valid
#: answers or disagreeing sources → conflict, nothing to answer from → abstain.
BEHAVIOUR_ROUTE = {
    "answerable": "direct",
    "misinformation": "direct",
    "ambiguous": "conflict",
    "conflict": "conflict",
    "unanswerable": "abstain",
}
TABLE_METRICS = (
    "accuracy",
    "strict_em",
    "short_em",
    "short_strict_em",
    "route_accuracy",
    "hallucination_rate",
    "conflict_resolution_rate",
    "refusal_f1",
    "abstention_rate",
    "ece",
)


#: The fusion fields a setting varies and a record's ``fusion`` block holds (as :class:`inference.answer.FusionInfo`).
RECORD_FUSION_KEYS = (
    "rule",
    "lam",
    "tau1",
    "tau2",
    "policy",
    "state_ratio",
    "state_ratio_yes_no",
    "copy_overlap",
    "state_witness_ratio",
)


# ------------------------------------------------------------------------------------------------ grid
@dataclass(frozen=True)
class SweepSetting:
    """One fusion + routing setting to re-run (a row of Table 9, 10 or 12)."""

    name: str
    table: str
    rule: str
    lam: float
    tau1: float
    tau2: float
    policy: str
    state_ratio: float = 0.5
    state_ratio_yes_no: float | None = None
    copy_overlap: float | None = 0.8
    state_witness_ratio: float | None = None

    def fusion(self) -> FusionConfig:
        """The validated :class:`~evidential.FusionConfig` of this setting."""
        return FusionConfig(**{k: getattr(self, k) for k in RECORD_FUSION_KEYS})


@dataclass
class SweepGrid:
    """What ``evidential-rag sweep`` varies (the CLI flags); the base setting is the run's own fusion config."""

    lams: list[float] = field(
        default_factory=lambda: list(DEFAULT_LAMS),
        metadata={"help": "λ values of the λ-transfer rule for Table 9 (each in [0, 1])."},
    )
    taus: list[tuple[float, float]] = field(
        default_factory=lambda: list(DEFAULT_TAUS),
        metadata={"help": "(τ1, τ2) pairs for Table 10, each 0 <= τ1 < τ2 <= 1."},
    )
    rules: list[str] = field(
        default_factory=lambda: ["yager", "dempster"],
        metadata={"help": "Other combination rules compared in Table 9 (FUSION_RULES / AGGREGATION_RULES)."},
    )
    policies: list[str] = field(
        default_factory=lambda: ["paper", "decomposed"],
        metadata={"help": "Routing policies compared at the run's λ and τ."},
    )
    state_ratios: list[float] = field(
        default_factory=lambda: list(DEFAULT_STATE_RATIOS),
        metadata={
            "help": "Stated-set bars ρ compared at the run's λ and τ (each in [0, 1]), with and without the edited-copy rule."
        },
    )

    def __post_init__(self) -> None:
        for lam in self.lams:
            if not 0.0 <= float(lam) <= 1.0:
                raise ConfigError(f"--lam values must lie in [0, 1]; got {lam}")
        for pair in self.taus:
            if len(pair) != 2 or not 0.0 <= pair[0] < pair[1] <= 1.0:
                raise ConfigError(f"--tau pairs must satisfy 0 <= tau1 < tau2 <= 1; got {pair}")
        known = fusion_rule_names()
        for rule in self.rules:
            if rule not in known:
                raise ConfigError(
                    f"unknown fusion rule {rule!r} in the sweep; choose from {', '.join(known)}"
                )
        for policy in self.policies:
            FusionConfig(policy=policy)  # validates the name with the config's message
        for r in self.state_ratios:
            if not 0.0 <= float(r) <= 1.0:
                raise ConfigError(f"--state-ratio values must lie in [0, 1]; got {r}")

    def settings(self, base: FusionConfig) -> list[SweepSetting]:
        """Every setting of Tables 9, 10, 12 and the policy comparison around ``base`` (the run's config)."""
        b = base
        out = [SweepSetting("run setting", "base", b.rule, b.lam, b.tau1, b.tau2, b.policy)]
        out += [
            SweepSetting(f"lambda λ={lam:g}", "9", "lambda", float(lam), b.tau1, b.tau2, b.policy)
            for lam in self.lams
        ]
        out += [SweepSetting(rule, "9", rule, b.lam, b.tau1, b.tau2, b.policy) for rule in self.rules]
        out += [
            SweepSetting(f"τ1={t1:g} τ2={t2:g}", "10", b.rule, b.lam, t1, t2, b.policy)
            for t1, t2 in self.taus
        ]
        out += [
            SweepSetting(
                "w/o conflict-preserving fusion (evidence averaging)",
                "12",
                "average",
                b.lam,
                b.tau1,
                b.tau2,
                b.policy,
            ),
            SweepSetting("w/o routing (always direct)", "12", b.rule, b.lam, b.tau1, b.tau2, "direct"),
        ]
        out += [
            SweepSetting(f"policy {p}", "policy", b.rule, b.lam, b.tau1, b.tau2, p) for p in self.policies
        ]
        out = [
            replace(
                s,
                state_ratio=b.state_ratio,
                state_ratio_yes_no=b.state_ratio_yes_no,
                copy_overlap=b.copy_overlap,
                state_witness_ratio=b.state_witness_ratio,
            )
            for s in out
        ]
        # the stated-set bar (open frames; yes/no frames keep the run's bar), with and without the copy rule
        stated = SweepSetting(
            "",
            "stated",
            b.rule,
            b.lam,
            b.tau1,
            b.tau2,
            b.policy,
            b.state_ratio,
            b.state_ratio_yes_no,
            b.copy_overlap,
            b.state_witness_ratio,
        )
        for r in self.state_ratios:
            for overlap in (b.copy_overlap, None) if b.copy_overlap is not None else (None,):
                name = f"ρ={float(r):g}" + ("" if overlap is not None else ", w/o the edited-copy rule")
                out.append(replace(stated, name=name, state_ratio=float(r), copy_overlap=overlap))
        if b.state_witness_ratio is not None:  # the witness bar's ablation at the run's own bar
            out.append(replace(stated, name=f"ρ={b.state_ratio:g}, w/o witnesses", state_witness_ratio=None))
        return out


def parse_lams(text: str, flag: str = "--lam") -> list[float]:
    """``"0,0.2,0.6"`` → ``[0.0, 0.2, 0.6]`` with a clear error naming ``flag``."""
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} must be comma-separated numbers in [0, 1]; got {text!r}") from None


def parse_taus(text: str) -> list[tuple[float, float]]:
    """``"0.35:0.65,0.3:0.7"`` → ``[(0.35, 0.65), (0.3, 0.7)]`` with a clear error."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            t1, t2 = (float(x) for x in part.split(":"))
        except ValueError:
            raise ConfigError(
                f"--tau takes comma-separated TAU1:TAU2 pairs such as 0.35:0.65; got {part!r}"
            ) from None
        out.append((t1, t2))
    return out


# ------------------------------------------------------------------------------------------------ evidence
@dataclass
class EvidenceBatch:
    """The cached evaluator outputs of N answer records as padded tensors.

    Attributes:
        evidence: ``[N, k, M]`` non-negative evidence (zero where padded).
        chunk_mask: ``[N, k]`` real chunks; ``claim_mask``: ``[N, M]`` real claims.
        claims: Per row, the record's claims (``id``, ``text``, ``chunk_ids``, ``forms``) in frame order.
        copies: ``[N, k, k]`` bool: chunks the records list as near-copies of each other (``chunks[i].copies``;
            all False for records that predate the field).
        reader: ``[N, k]`` the chunks' reader scores (``chunks[i].reader_score``), NaN where none.
    """

    evidence: torch.Tensor
    chunk_mask: torch.Tensor
    claim_mask: torch.Tensor
    claims: list[list[dict]]
    copies: torch.Tensor | None = None
    reader: torch.Tensor | None = None


def has_cached_evidence(record: dict) -> bool:
    """Whether an answer record carries per-chunk evidence (an EvidentialRAG record, not a baseline's)."""
    chunks = record.get("chunks")
    return (
        isinstance(record.get("claims"), list)
        and isinstance(chunks, list)
        and all(isinstance(c.get("evidence"), dict) for c in chunks)
    )


def evidence_batch(records: Sequence[dict]) -> EvidenceBatch:
    """Rebuild the evidence tensor of answer records (``record.chunks[i].evidence[claim id]``).

    Raises:
        DataError: A record without cached evidence, or evidence for a claim id the record does not list.
    """
    n = len(records)
    k = max((len(r["chunks"]) for r in records), default=0)
    m = max((len(r["claims"]) for r in records), default=0)
    ev = torch.zeros(n, k, m, dtype=torch.float64)
    chunk_mask = torch.zeros(n, k, dtype=torch.bool)
    claim_mask = torch.zeros(n, m, dtype=torch.bool)
    copies = torch.zeros(n, k, k, dtype=torch.bool)
    reader = torch.full((n, k), math.nan, dtype=torch.float64)
    for i, rec in enumerate(records):
        if not has_cached_evidence(rec):
            raise DataError(
                f"answer record {i} ({rec.get('question', '?')!r}) has no per-chunk evidence to re-fuse"
            )
        one = record_evidence(rec, f"answer record {i}")
        ev[i, : one.shape[0], : one.shape[1]] = one
        chunk_mask[i, : one.shape[0]] = True
        claim_mask[i, : one.shape[1]] = True
        pairs = copy_pairs(record_copies(rec))
        copies[i, : pairs.shape[0], : pairs.shape[1]] = pairs
        for t, ch in enumerate(rec["chunks"]):
            r = ch.get("reader_score")
            if isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r):
                reader[i, t] = float(r)
    claims = [
        [{k2: c.get(k2) for k2 in ("id", "text", "chunk_ids", "forms")} for c in rec["claims"]]
        for rec in records
    ]
    return EvidenceBatch(ev, chunk_mask, claim_mask, claims, copies, reader)


def refuse_rows(
    rows: Sequence[dict],
    batch: EvidenceBatch,
    setting: SweepSetting,
    instances: dict[str, tuple[EvalInstance, list[Chunk]]],
    judge,
    judge_cache: dict[tuple[str, str], dict] | None = None,
    isotonic: dict[str, list[float]] | None = None,
    confidence_input: str = "top",
    isotonic_routes: dict[str, dict[str, list[float]]] | None = None,
    reader_params: dict[str, Any] | None = None,
) -> list[dict]:
    """Re-fuse and re-route ``rows`` under ``setting`` (one batched fusion call) and score the templated
    answers like the runner scores generated ones (with ``isotonic``, the calibration's confidence map — and
    ``isotonic_routes``, its maps per route, picked by each re-routed answer's route, and ``reader_params``,
    its reader map of the re-selected answer's reader score — the scored confidence is
    ``calibrated_confidence`` as in the run). Returns new rows (the originals are not modified)."""
    fc = setting.fusion()
    merged = fc.copy_overlap is not None and batch.copies is not None
    evidence = merge_copies(batch.evidence, batch.copies, batch.chunk_mask) if merged else batch.evidence
    ops = opinions_from_evidence(evidence, batch.claim_mask, batch.chunk_mask)
    res = fuse(ops, lam=fc.lam, rule=fc.rule)
    ids = route(res, fc.tau1, fc.tau2, fc.policy).ids.tolist()
    belief, sel = res.belief.tolist(), res.selected.tolist()
    contested = [None] * len(rows)
    if merged:
        contested_t = copy_contested(res.belief, ops.evidence, batch.copies, batch.chunk_mask)
        contested, sel = contested_t.tolist(), select_uncontested(res.belief, contested_t).tolist()
    witnessed = [None] * len(rows)
    if fc.state_witness_ratio is not None:
        witnessed = witnessed_claims(
            ops.evidence, fc.state_witness_ratio, batch.chunk_mask, batch.claim_mask
        ).tolist()
    readers = [None] * len(rows)
    if reader_params is not None and batch.reader is not None:
        readers = answer_reader_score(batch.evidence, batch.reader, torch.tensor(sel)).tolist()
    u, conf = res.uncertainty.tolist(), res.confidence.tolist()
    ign, con = res.ignorance.tolist(), res.conflict.tolist()
    out, todo = [], []
    cache = judge_cache if judge_cache is not None else {}
    for i, row in enumerate(rows):
        claims = [{**c, "mass": rounded(belief[i][j])} for j, c in enumerate(batch.claims[i])]
        answer = claims[sel[i]]["text"] if sel[i] >= 0 else None
        name = ROUTES[ids[i]]
        stated = stated_claims(
            [c["text"] for c in claims],
            belief[i],
            name,
            sel[i],
            fc.state_ratio,
            fc.state_ratio_yes_no,
            contested[i],
            witnessed[i],
        )
        mass = rounded(sum(belief[i][j] for j, c in enumerate(claims) if c["text"] in stated))
        # as the pipeline does: the isotonic map of the record's (rounded) confidence or stated mass, then the
        # reader map of its (rounded) reader score, rounded
        reader = None if readers[i] is None else rounded(readers[i])  # a non-finite score: none (reader_map)
        cal_conf = rounded(
            float(
                calibrated_confidence(
                    mass if confidence_input == "stated" else rounded(conf[i]),
                    name,
                    isotonic,
                    isotonic_routes,
                    reader_params,
                    reader,
                )
            )
            if isotonic is not None
            else conf[i]
        )
        response = template_response(name, claims, answer, stated)
        inst, chunks = instances[row["id"]]
        record = {
            "route": name,
            "response": response,
            "answer": answer,
            "stated_claims": stated,
            "claims": claims,
            "uncertainty": rounded(u[i]),
            "ignorance": rounded(ign[i]),
            "conflict": rounded(con[i]),
            "confidence": rounded(conf[i]),
            "stated_mass": mass,
            **({"calibrated_confidence": cal_conf} if isotonic is not None else {}),
            "fusion": {k: getattr(fc, k) for k in RECORD_FUSION_KEYS},
            "generator": "template",
            "logical_decisions": row["record"].get("logical_decisions"),
            "batched_passes": row["record"].get("batched_passes"),
        }
        new = {
            **row,
            "record": record,
            "scores": instance_scores(inst, record, min(max(cal_conf, 0.0), 1.0)),
        }
        key = (row["id"], response)
        if key in cache:
            new["judge"] = cache[key]
        else:
            todo.append((len(out), key, JudgeInput(inst, response, chunks)))
        out.append(new)
    if todo:
        for (pos, key, _), jd in zip(todo, judge.judge_batch([t[2] for t in todo])):
            cache[key] = jd.to_dict()
            out[pos]["judge"] = cache[key]
    return out


# ------------------------------------------------------------------------------------------------ metrics
def _setting_metrics(
    rows: list[dict], reference_rows: list[dict] | None, reference: str | None
) -> dict[str, Any]:
    per_seed = {}
    for seed, rs in rows_by_seed(rows).items():
        m = seed_metrics(rs)
        m["route_accuracy"] = sum(
            float(r["record"].get("route") == BEHAVIOUR_ROUTE.get(r["expected_behaviour"])) for r in rs
        ) / len(rs)
        per_seed[seed] = m
    keys = [*TABLE_METRICS, *(f"route_{x}" for x in ROUTES), "n"]
    out: dict[str, Any] = {
        "mean_std": {k: mean_std_cell([per_seed[s].get(k) for s in per_seed]) for k in keys}
    }
    out["seeds"] = {str(s): {k: per_seed[s].get(k) for k in keys} for s in per_seed}
    if reference_rows is not None and reference is not None:
        out["p_values"] = paired_pvalues({"_": rows, reference: reference_rows}, reference).get("_", {})
    return out


def _load_run(run_dir: Path) -> tuple[dict, dict[str, dict], dict[str, list[dict]]]:
    """``run.json``, the ``instances.jsonl`` rows by id and each system's rows (the run's seeds)."""
    run_path = run_dir / "run.json"
    if not run_path.is_file():
        raise DataError(
            f"{run_dir} is not an evaluation run (no run.json): pass the --out folder of `evidential-rag evaluate`"
        )
    run = json.loads(run_path.read_text(encoding="utf-8"))
    instances = load_instances(run_dir / "instances.jsonl")
    seeds = set(run.get("seeds", []))
    per_system = {
        n: [r for r in load_rows(run_dir / f"{n}.jsonl") if r["seed"] in seeds and r["id"] in instances]
        for n in run.get("systems", [])
        if (run_dir / f"{n}.jsonl").is_file()
    }
    return run, instances, per_system


def run_sweep(
    run_dir: str | Path,
    grid: SweepGrid | None = None,
    *,
    systems: Sequence[str] | None = None,
    reference: str | None = None,
    out_dir: str | Path | None = None,
    write: bool = True,
    loaded: tuple[dict, dict[str, dict], dict[str, list[dict]]] | None = None,
) -> dict[str, Any]:
    """Re-fuse the cached evaluator outputs of an evaluation run over a grid (no model call) and write
    ``OUT/sweep.json`` and ``OUT/sweep.md`` (``OUT`` = ``out_dir`` or ``RUN/sweep``).

    Args:
        run_dir: The ``--out`` folder of ``evidential-rag evaluate``.
        grid: λ values, (τ1, τ2) pairs, other rules and policies; ``None`` = the defaults.
        systems: Evidential systems to sweep; ``None`` = every system of the run with cached evidence.
        reference: System whose generated rows the p-values compare with; ``None`` = corrective, else naive.
        out_dir: Output folder; ``None`` = ``run_dir/sweep``.
        write: Write ``sweep.json`` and ``sweep.md``.
        loaded: ``(run.json, instances.jsonl rows by id, rows by system)`` already in memory (the report's),
            instead of reading them again from ``run_dir``.
    """

    run_dir = Path(run_dir)
    grid = grid or SweepGrid()
    run, raw, per_system = loaded if loaded is not None else _load_run(run_dir)
    instances = {
        i: (EvalInstance.from_dict(p["instance"]), [Chunk(**c) for c in p["chunks"]]) for i, p in raw.items()
    }
    sweepable = [
        n for n, rows in per_system.items() if rows and all(has_cached_evidence(r["record"]) for r in rows)
    ]
    if systems is not None:
        missing = [s for s in systems if s not in sweepable]
        if missing:
            raise ConfigError(
                f"cannot sweep {', '.join(missing)}: the run at {run_dir} has cached evaluator evidence for "
                f"{', '.join(sweepable) or 'no system'} (EvidentialRAG systems only)"
            )
        sweepable = list(systems)
    if not sweepable:
        raise DataError(
            f"{run_dir} holds no EvidentialRAG rows with cached evidence; run evaluate with an evidential system first"
        )
    reference = reference or next((n for n in ("corrective", "naive") if n in per_system), None)
    if reference is not None and reference not in per_system:
        raise ConfigError(
            f"--reference {reference!r} is not among the systems of the run ({', '.join(per_system)})"
        )
    ref_rows = per_system.get(reference) if reference else None
    base = FusionConfig(**{k: v for k, v in run["settings"]["config"]["fusion"].items() if k != "sanitize"})
    settings = grid.settings(base)
    judge = build_judge("label")
    results: dict[str, Any] = {}
    for name in sweepable:
        rows = per_system[name]
        batch = evidence_batch([r["record"] for r in rows])
        sys_settings, applied, iso, iso_input, iso_routes = settings, None, None, "top", None
        reader_params = None
        cal = rows[0]["record"].get("calibration")
        if isinstance(cal, dict) and "scale" in cal:
            # the run applied a calibration (calibration: auto or a file): re-fuse what it fused — the scaled
            # evidence — around the fusion setting it ran with
            applied = {k: cal.get(k) for k in ("file", "scale", "power")}
            try:
                read = read_calibration(cal["file"])
                if cal.get("isotonic"):
                    iso, iso_input, iso_routes = read.isotonic, read.confidence_input, read.isotonic_routes
                    reader_params = read.reader_map
            except (CalibrationError, OSError, KeyError, TypeError):
                iso = None
                applied["isotonic"] = "calibration file not readable: confidence left unmapped"
            batch = replace(
                batch, evidence=apply_evidence_transform(batch.evidence, cal["scale"], cal.get("power", 1.0))
            )
            f = rows[0]["record"]["fusion"]
            sys_settings = grid.settings(replace(base, **{k: f[k] for k in f if hasattr(base, k)}))
        cache: dict = {}
        entries = []
        for s in sys_settings:
            new = refuse_rows(
                rows, batch, s, instances, judge, cache, iso, iso_input, iso_routes, reader_params
            )
            entry = {"setting": s.__dict__, **_setting_metrics(new, ref_rows, reference)}
            if s.table == "base":  # the re-fused run setting must reproduce the run's own routes
                same = sum(a["record"]["route"] == b["record"].get("route") for a, b in zip(new, rows))
                entry["reproduced_routes"] = {"same": same, "n": len(rows)}
            entries.append(entry)
        generated = _setting_metrics(rows, ref_rows, reference)
        first = [r for r in rows if r["seed"] == min(r2["seed"] for r2 in rows)]
        validity = evaluator_validity(first, raw) if first else None
        results[name] = {"settings": entries, "generated": generated, "validity": validity}
        if applied is not None:
            results[name]["calibration"] = applied
    naive = _setting_metrics(per_system["naive"], ref_rows, reference) if "naive" in per_system else None
    out = {
        "version": SWEEP_VERSION,
        "run": str(run_dir),
        "dataset": run["settings"]["dataset"],
        "base": base.__dict__,
        "grid": {
            "lams": grid.lams,
            "taus": [list(t) for t in grid.taus],
            "rules": grid.rules,
            "policies": grid.policies,
        },
        "reference": reference,
        "judge": judge.describe(),
        "seeds": run.get("seeds", []),
        "model_calls": 0,
        "systems": results,
        "naive": naive,
    }
    if write:
        target = Path(out_dir) if out_dir is not None else run_dir / "sweep"
        target.mkdir(parents=True, exist_ok=True)
        write_json(target / "sweep.json", out)
        atomic_write_text(target / "sweep.md", render_sweep_markdown(out))
        out["written"] = [str(target / "sweep.json"), str(target / "sweep.md")]
    return out


# ------------------------------------------------------------------------------------------------ markdown
def _cell(m: dict | None, key: str) -> str:
    return format_cell((m or {}).get("mean_std", {}).get(key))


def _pcell(m: dict | None, key: str = "accuracy") -> str:
    p = (m or {}).get("p_values", {}).get(key)
    return "–" if p is None else f"{p:.3f}"


def _rows_for(entries: Iterable[dict], table: str) -> list[dict]:
    return [e for e in entries if e["setting"]["table"] == table]


def render_sweep_markdown(sweep: dict[str, Any], heading: str = "#") -> str:
    """The sweep's Markdown: Tables 9, 10, 12, the routing-policy comparison and prompt vs learned."""
    ref = sweep.get("reference")
    has_strict = sweep.get("dataset") == "ramdocs"
    cols = [c for c in TABLE_METRICS if c not in ("strict_em", "short_strict_em") or has_strict]
    names = {
        "accuracy": "accuracy",
        "strict_em": "strict EM",
        "short_em": "short EM",
        "short_strict_em": "short strict EM",
        "route_accuracy": "route acc.",
        "hallucination_rate": "halluc. ↓",
        "conflict_resolution_rate": "CRR ↑",
        "refusal_f1": "refusal F1",
        "abstention_rate": "abstain",
        "ece": "ECE ↓",
    }
    header_tail = (
        [names[c] for c in cols] + ["direct / conflict / abstain"] + ([f"p(acc vs {ref})"] if ref else [])
    )

    def line(label: str, m: dict | None, kind: str) -> list[str]:
        routes = " / ".join(_cell(m, f"route_{r}").split(" ±")[0] for r in ROUTES)
        return [label, kind, *(_cell(m, c) for c in cols), routes, *([_pcell(m)] if ref else [])]

    b = sweep["base"]
    h2 = heading + "#"
    out = [
        f"{heading} Sweeps and ablations — {sweep['dataset']} (no model calls)",
        "",
        f"- Run: `{sweep['run']}`; seeds {', '.join(map(str, sweep['seeds']))}; judge {sweep['judge'].get('version', '?')} on the templated answers.",
        f"- Run setting: rule {b['rule']}, λ {b['lam']:g}, τ1 {b['tau1']:g}, τ2 {b['tau2']:g}, policy {b['policy']}.",
        "- Swept rows re-fuse the cached evaluator evidence and answer with the route's **template** (no "
        "generation); `generated` rows are the run's own LLM answers. Mean ± std over seeds"
        + (
            f"; p-values: paired bootstrap of accuracy against **{ref}**'s generated answers." if ref else "."
        ),
        "",
    ]
    for name, res in sweep["systems"].items():
        entries = res["settings"]
        base = next(e for e in entries if e["setting"]["table"] == "base")
        rep = base.get("reproduced_routes")
        out += [f"{h2} {name}", ""]
        if rep:
            out += [
                f"Re-fusing at the run setting reproduces {rep['same']} of {rep['n']} recorded routes.",
                "",
            ]
        head = ["setting", "answers", *header_tail]
        t9 = [line(e["setting"]["name"], e, "templated") for e in _rows_for(entries, "9")]
        out += [
            f"**Table 9 — λ sweep and combination rules** (τ1 {b['tau1']:g}, τ2 {b['tau2']:g})",
            "",
            markdown_table(head, t9),
            "",
        ]
        t10 = [line(e["setting"]["name"], e, "templated") for e in _rows_for(entries, "10")]
        out += [
            f"**Table 10 — threshold grid** ({b['rule']}, λ {b['lam']:g})",
            "",
            markdown_table(head, t10),
            "",
        ]
        t12 = [
            line("full (run setting)", res["generated"], "generated"),
            line("full (run setting)", base, "templated"),
        ]
        t12 += [line(e["setting"]["name"], e, "templated") for e in _rows_for(entries, "12")]
        if sweep.get("naive") is not None:
            t12.append(line("w/o evaluator (= Naive RAG)", sweep["naive"], "generated"))
        out += ["**Table 12 — ablations**", "", markdown_table(head, t12), ""]
        tp = [line(e["setting"]["name"], e, "templated") for e in _rows_for(entries, "policy")]
        out += ["**Routing policy — paper (Eq 15) vs decomposed**", "", markdown_table(head, tp), ""]
        ts = [line(e["setting"]["name"], e, "templated") for e in _rows_for(entries, "stated")]
        if ts:
            out += [
                "**Stated-set bar ρ and the edited-copy rule** (open frames; the run's λ, τ and yes/no bar)",
                "",
                markdown_table(head, ts),
                "",
            ]
    if sweep["systems"]:
        head = [
            "system",
            "accuracy (generated)",
            "accuracy (templated)",
            "route acc.",
            "ECE ↓",
            "halluc. ↓",
            "JSON validity",
            "evidence–label Spearman",
            "evaluator s/query",
        ]
        rows = []
        for name, res in sweep["systems"].items():
            base = next(e for e in res["settings"] if e["setting"]["table"] == "base")
            v = res.get("validity") or {}

            def num(x):
                return "–" if x is None else f"{x:.3f}"

            rows.append(
                [
                    name,
                    _cell(res["generated"], "accuracy"),
                    _cell(base, "accuracy"),
                    _cell(base, "route_accuracy"),
                    _cell(base, "ece"),
                    _cell(base, "hallucination_rate"),
                    num(v.get("json_validity")),
                    num(v.get("evidence_label_spearman")),
                    num(v.get("evaluator_latency_s")),
                ]
            )
        out += [f"{h2} Prompt vs learned evaluator", "", markdown_table(head, rows), ""]
    return "\n".join(out)
