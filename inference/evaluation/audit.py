"""Human audit of the judge (paper §4.5, Table 6): blind annotation sheets out, agreement and calibration in.

Export (:func:`export_audit`) reads an ``evidential-rag evaluate`` output folder, takes every system's rows of
the **first seed** (rows copied from another seed, ``reused_from_seed``, are skipped), and stratifies them by
``(system, dataset, route, correctness)`` — correctness is ``scores.accuracy >= 1`` (``"correct"`` /
``"incorrect"``; no gold answer → ``"n/a"``). A seeded stratified sample of ``n`` items is drawn with the
allocation rule of :func:`allocate`, shuffled (so that a sheet shows no system grouping) and written as

* ``audit_items.jsonl`` — per item: ``item_id``, ``system``, ``dataset``, ``id``, ``question``, ``passages``
  (the chunk texts of ``instances.jsonl``: what every system saw), ``response``, ``gold_answers``,
  ``wrong_answers``, ``expected_behaviour``, ``route``, ``refused``, ``stratum`` and the judge's ``judge_labels``;
* ``annotator_1.csv`` … ``annotator_K.csv`` — blank sheets: ``item_id``, ``question``, ``passages``,
  ``response``, ``gold_answers``, ``wrong_answers``, ``expected_behaviour`` and one empty column per
  dimension (the judge's :data:`~inference.evaluation.judges.JUDGE_LABELS`, so that judge–human agreement is
  direct). The sheets never show the system, the route or the judge's labels: annotation is blind;
* ``GUIDELINES.md`` — one instruction per dimension (:data:`GUIDELINES`) and the accepted values;
* ``audit_manifest.json`` — version ``audit/1.0``, the source folder, the sha256 of its ``run.json`` (and
  ``metrics.json``), ``n``, ``seed``, the strata with population and sample counts (the weights), the
  dimensions, the item ids and a snapshot of the judge-only headline metrics of ``metrics.json``.

Import (:func:`import_audit`) reads the filled sheets (yes/no/y/n/true/false/1/0; blank, ``na`` or ``n/a`` =
not applicable) and writes ``audit_report.json`` and ``audit.md``:

* inter-annotator Cohen's κ per dimension (:func:`inference.evaluation.metrics.cohens_kappa`) over all
  items with the three categories yes / no / not applicable, with the raw agreement and ``n`` (more than two
  annotators: the mean pairwise κ, Light's κ, and every pair);
* the human consensus per item and dimension: the value every annotator gave. Disagreements are counted
  and left out, unless ``adjudicated.csv`` (same layout; only ``item_id`` and the dimension columns are
  read) settles them: a non-blank cell there (``na`` = not applicable) is the consensus of a disagreement;
  a blank cell leaves it unresolved. Adjudication never overrides an agreement;
* judge–human agreement per dimension: accuracy and κ of the judge's label against the consensus over the
  items with a consensus (three categories again);
* calibration offsets per system and dimension: the stratum-weighted rate of ``True`` under the human
  consensus minus the same rate under the judge, over the system's items with a consensus (``None`` counts
  as not ``True``, as the judge-based rates count it). An item of stratum ``h`` weighs ``N_h / n_h``
  (population over sample count), so the rates estimate the system's population rates. The same is done
  for the two headline metrics that derive from judge labels, with their own item sets and flags (as in
  :mod:`inference.evaluation.report`): ``hallucination_rate`` (non-refused answers flagged with
  ``unsupported_assertion`` **or** ``contradicted_assertion``; items with a consensus on both) and
  ``conflict_resolution_rate`` (``conflict_recognition`` on ``conflict`` / ``ambiguous`` /
  ``misinformation`` instances; items with a consensus on it). The human-calibrated headline value is the
  judge-only mean over seeds of ``metrics.json`` plus that offset, clipped to [0, 1].
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evidential.errors import EvidentialError
from inference.evaluation.judges import JUDGE_LABELS
from inference.evaluation.metrics import CONFLICT_BEHAVIOURS, cohens_kappa
from inference.evaluation.report.tables import format_number
from inference.io import atomic_write_text, rounded, write_json, write_jsonl

__all__ = [
    "ADJUDICATION_SHEET",
    "AUDIT_VERSION",
    "DIMENSIONS",
    "GUIDELINES",
    "HEADLINE_METRICS",
    "SHEET_COLUMNS",
    "AuditError",
    "allocate",
    "export_audit",
    "import_audit",
    "parse_label",
    "read_sheet",
    "render_audit_markdown",
    "stratum_of",
    "weighted_rate",
]

AUDIT_VERSION = "audit/1.0"
DIMENSIONS = tuple(JUDGE_LABELS)
HEADLINE_METRICS = ("hallucination_rate", "conflict_resolution_rate")
SHEET_COLUMNS = (
    "item_id",
    "question",
    "passages",
    "response",
    "gold_answers",
    "wrong_answers",
    "expected_behaviour",
)
ADJUDICATION_SHEET = "adjudicated.csv"
GUIDELINES = {
    "unsupported_assertion": "yes if the response asserts something that neither a gold / known answer nor "
    "the passages shown support; no if every assertion is supported; blank if it asserts nothing (a refusal).",
    "contradicted_assertion": "yes if the response asserts a known wrong answer (a listed wrong answer, "
    "planted misinformation, or the opposite of a yes/no gold); no otherwise.",
    "conflict_recognition": "only when the expected behaviour is conflict, ambiguous or misinformation: yes "
    "if the response handles it (states the competing sides, every valid answer, or the gold without the "
    "planted one); no otherwise. Blank for the other behaviours.",
    "appropriate_refusal": "yes if the response refuses exactly when the question is unanswerable from the "
    "passages (expected behaviour unanswerable) and answers otherwise; no if it refuses an answerable "
    "question or answers an unanswerable one.",
    "answer_support": "yes if the response's answer is a gold answer or is grounded in the passages shown; "
    "no if it is neither; blank if the response gives no answer.",
}
_TRUE = frozenset({"yes", "y", "true", "1"})
_FALSE = frozenset({"no", "n", "false", "0"})
_NA = frozenset({"", "na", "n/a"})


class AuditError(EvidentialError):
    """An audit folder, sheet or run folder that does not follow the documented layout (the message says
    what to fix)."""


# ------------------------------------------------------------------------------------------------ sampling
def stratum_of(row: Mapping[str, Any]) -> str:
    """The stratum key ``system|dataset|route|correctness`` of an evaluate row (correctness: ``correct`` when
    ``scores.accuracy >= 1``, ``incorrect`` below, ``n/a`` when it is ``None``; a missing route is ``n/a``).

    >>> stratum_of({"system": "naive", "dataset": "ramdocs", "record": {"route": "direct"},
    ...             "scores": {"accuracy": 1.0}})
    'naive|ramdocs|direct|correct'
    """
    acc = (row.get("scores") or {}).get("accuracy")
    correct = "n/a" if acc is None else ("correct" if float(acc) >= 1.0 else "incorrect")
    route = (row.get("record") or {}).get("route") or "n/a"
    return f"{row['system']}|{row['dataset']}|{route}|{correct}"


def allocate(populations: Mapping[str, int], n: int) -> dict[str, int]:
    """Sample counts per stratum for a stratified sample of ``n`` items (proportional, at least one each).

    Rule: with ``n >= Σ N_h`` every item is taken. Otherwise, when ``n`` is at least the number of non-empty
    strata, each gets one item and the remaining ``n − H`` items go one at a time to the stratum furthest
    below its proportional share ``n · N_h / N`` (largest ``n · N_h / N − n_h``; ties to the larger
    population, then the smaller key), never beyond ``N_h``. When ``n`` is smaller than the number of
    strata, the ``n`` most populous strata (ties: smaller key) get one item each and the rest none.

    >>> allocate({"a": 80, "b": 15, "c": 5}, 10)
    {'a': 8, 'b': 1, 'c': 1}
    >>> allocate({"a": 2, "b": 1}, 5)
    {'a': 2, 'b': 1}
    """
    if n < 1:
        raise AuditError(f"the sample size n must be >= 1; got {n}")
    pops = {k: int(v) for k, v in sorted(populations.items()) if int(v) > 0}
    total = sum(pops.values())
    out = {k: 0 for k in sorted(populations)}
    if total <= n:
        return {k: int(populations[k]) for k in out}
    if n < len(pops):
        for k in sorted(pops, key=lambda k: (-pops[k], k))[:n]:
            out[k] = 1
        return out
    for k in pops:
        out[k] = 1
    for _ in range(n - len(pops)):
        open_ = [k for k in pops if out[k] < pops[k]]  # sorted keys: max() keeps the first of equals
        best = max(open_, key=lambda k: (n * pops[k] / total - out[k], pops[k]))
        out[best] += 1
    return out


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise AuditError(f"{path}:{n}: not a JSON row") from None
    return rows


def _sheet_has_values(path: Path) -> bool:
    """Whether a sheet already holds any annotation (a non-blank dimension cell); unreadable = assume so."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            for row in csv.DictReader(fh):
                if any((row.get(d) or "").strip() for d in DIMENSIONS):
                    return True
    except (OSError, UnicodeDecodeError, csv.Error):
        return True
    return False


def _csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _guidelines_md(annotators: int) -> str:
    lines = [
        "# Human audit of the judge — annotation guidelines",
        "",
        f"Fill one sheet per annotator (`annotator_1.csv` … `annotator_{annotators}.csv`), independently and "
        "without looking at the other sheets. Each row is one system response to a question, shown with the "
        "passages the system saw, the gold answers and the known wrong answers. Write one value per "
        "dimension column:",
        "",
        "- `yes` (also `y`, `true`, `1`) or `no` (also `n`, `false`, `0`);",
        "- blank, `na` or `n/a` when the dimension does not apply.",
        "",
        "Anything else is rejected on import with the file, row and column named. Do not add, remove or "
        "reorder items; keep the `item_id` column as it is.",
        "",
        "| dimension | instruction |",
        "| --- | --- |",
        *(f"| `{d}` | {GUIDELINES[d]} |" for d in DIMENSIONS),
        "",
        f"Disagreements between annotators can be settled in an optional `{ADJUDICATION_SHEET}` (same "
        "columns; only `item_id` and the dimension columns are read): a filled cell settles that item's "
        "disagreement on that dimension (`na` = not applicable), a blank cell leaves it unresolved "
        "(excluded).",
        "",
    ]
    return "\n".join(lines)


def _headline_snapshot(metrics_path: Path, systems: Sequence[str]) -> dict[str, dict[str, float | None]]:
    if not metrics_path.is_file():
        return {}
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    out: dict[str, dict[str, float | None]] = {}
    for s in systems:
        ms = ((metrics.get("systems") or {}).get(s) or {}).get("mean_std") or {}
        out[s] = {m: (ms.get(m) or {}).get("mean") for m in HEADLINE_METRICS}
    return out


def export_audit(
    run_dir: str | Path,
    out_dir: str | Path,
    n: int = 60,
    seed: int = 0,
    annotators: int = 2,
    systems: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Draw a seeded stratified sample of an evaluate folder's answers and write blind annotation sheets.

    Args:
        run_dir: An ``evidential-rag evaluate`` output folder (``run.json``, ``instances.jsonl``,
            ``<system>.jsonl``, optionally ``metrics.json``).
        out_dir: The audit folder to write (created). A folder whose sheets already hold annotations is
            refused, so that filled work is never overwritten.
        n: Items to sample over all the systems (allocation: :func:`allocate`).
        seed: Seed of the sample and of the item order.
        annotators: Number of blank annotator sheets (at least 2, for the agreement).
        systems: Systems to audit; ``None`` = every system of ``run.json``.

    Returns:
        The manifest (``audit_manifest.json``'s content).

    Raises:
        AuditError: A missing run file or system, a bad ``n`` / ``annotators``, or filled sheets in
            ``out_dir``.
    """
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if annotators < 2:
        raise AuditError(f"annotators must be >= 2 (agreement needs two sheets); got {annotators}")
    if n < 1:
        raise AuditError(f"--n must be >= 1; got {n}")
    run_path, run, chosen, first_seed = _read_run(run_dir, systems)
    inst_path = run_dir / "instances.jsonl"
    if not inst_path.is_file():
        raise AuditError(f"{inst_path} not found: the run folder is incomplete")
    instances = {p["instance"]["id"]: p for p in _read_jsonl(inst_path)}
    _refuse_filled_sheets(out_dir)
    population = _population(run_dir, chosen, first_seed, instances)
    by_stratum: dict[str, list[dict]] = defaultdict(list)
    for r in population:
        by_stratum[stratum_of(r)].append(r)
    counts = allocate({k: len(v) for k, v in by_stratum.items()}, n)
    items = _draw_items(by_stratum, counts, instances, seed)
    manifest = {
        "version": AUDIT_VERSION,
        "source_run_dir": str(run_dir.resolve()),
        "run_json_sha256": _sha256(run_path),
        "metrics_json_sha256": _sha256(run_dir / "metrics.json"),
        "dataset": (run.get("settings") or {}).get("dataset"),
        "systems": chosen,
        "first_seed": first_seed,
        "n": len(items),
        "n_requested": n,
        "seed": seed,
        "allocation": "proportional with at least one per non-empty stratum (inference.evaluation.audit.allocate)",
        "annotators": annotators,
        "sheets": [f"annotator_{k}.csv" for k in range(1, annotators + 1)],
        "dimensions": list(DIMENSIONS),
        "strata": _strata_table(by_stratum, counts),
        "item_ids": [it["item_id"] for it in items],
        "headline_judge_only": _headline_snapshot(run_dir / "metrics.json", chosen),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(out_dir / "audit_items.jsonl", items)
    sheet = _csv_text([*SHEET_COLUMNS, *DIMENSIONS], [_sheet_row(it) for it in items])
    for name in manifest["sheets"]:
        atomic_write_text(out_dir / name, sheet)
    atomic_write_text(out_dir / "GUIDELINES.md", _guidelines_md(annotators))
    write_json(out_dir / "audit_manifest.json", manifest)  # last: its presence marks a complete export
    return manifest


def _read_run(run_dir: Path, systems: Sequence[str] | None) -> tuple[Path, dict, list[str], Any]:
    """``(run.json path, its content, the systems to audit, the first seed)``, checked."""
    run_path = run_dir / "run.json"
    if not run_path.is_file():
        raise AuditError(f"{run_dir} is not an evaluate output folder (no run.json); give --from RUN_DIR")
    run = json.loads(run_path.read_text(encoding="utf-8"))
    run_systems = list(run.get("systems") or [])
    seeds = list(run.get("seeds") or [])
    if not seeds:
        raise AuditError(f"{run_path} lists no seeds")
    chosen = list(systems) if systems else run_systems
    unknown = [s for s in chosen if s not in run_systems]
    if unknown:
        raise AuditError(
            f"system(s) {', '.join(unknown)} not in the run ({', '.join(run_systems)}); fix --systems"
        )
    if len(set(chosen)) != len(chosen):
        raise AuditError(f"--systems lists a system twice: {chosen}")
    return run_path, run, chosen, seeds[0]


def _refuse_filled_sheets(out_dir: Path) -> None:
    """Raise when ``out_dir`` already holds annotations (a filled sheet or an audit report)."""
    if not out_dir.exists():
        return
    filled = [
        p.name
        for p in sorted(out_dir.glob("*.csv"))
        if (p.name.startswith("annotator_") or p.name == ADJUDICATION_SHEET) and _sheet_has_values(p)
    ]
    if filled or (out_dir / "audit_report.json").is_file():
        what = ", ".join(filled) if filled else "audit_report.json"
        raise AuditError(
            f"{out_dir} already holds filled annotations ({what}); refusing to overwrite them — "
            "choose a new --out folder (or move the filled sheets away)"
        )


def _population(
    run_dir: Path, systems: Sequence[str], first_seed: Any, instances: Mapping[str, Any]
) -> list[dict]:
    """The answer rows to sample from: first seed only, not reused from another seed, with an instance."""
    population: list[dict] = []
    for name in systems:
        path = run_dir / f"{name}.jsonl"
        if not path.is_file():
            raise AuditError(f"{path} not found: system {name!r} has no rows in {run_dir}")
        for r in _read_jsonl(path):
            if r.get("seed") != first_seed or r.get("reused_from_seed") is not None:
                continue
            if r["id"] not in instances:
                continue
            population.append(r)
    if not population:
        raise AuditError(f"no rows of seed {first_seed} for {', '.join(systems)} in {run_dir}")
    return population


def _draw_items(
    by_stratum: Mapping[str, list[dict]], counts: Mapping[str, int], instances: Mapping[str, Any], seed: int
) -> list[dict]:
    """The seeded sample (``counts[key]`` rows of each stratum) in a seeded random order, as audit items."""
    rng = np.random.default_rng(seed)
    picked: list[tuple[str, dict]] = []
    for key in sorted(by_stratum):
        rows = by_stratum[key]
        idx = sorted(rng.choice(len(rows), size=counts[key], replace=False).tolist()) if counts[key] else []
        picked += [(key, rows[i]) for i in idx]
    order = rng.permutation(len(picked)).tolist()
    width = max(3, len(str(len(picked))))
    return [_audit_item(f"A{pos:0{width}d}", *picked[i], instances) for pos, i in enumerate(order, start=1)]


def _audit_item(item_id: str, key: str, r: Mapping[str, Any], instances: Mapping[str, Any]) -> dict:
    rec = r.get("record") or {}
    return {
        "item_id": item_id,
        "system": r["system"],
        "dataset": r["dataset"],
        "id": r["id"],
        "seed": r["seed"],
        "question": r["question"],
        "passages": [c.get("text", "") for c in instances[r["id"]]["chunks"]],
        "response": rec.get("response") or "",
        "gold_answers": list(r.get("gold_answers") or []),
        "wrong_answers": list(r.get("wrong_answers") or []),
        "expected_behaviour": r["expected_behaviour"],
        "route": rec.get("route"),
        "refused": bool((r.get("scores") or {}).get("refused")),
        "stratum": key,
        "judge": (r.get("judge") or {}).get("judge"),
        "judge_labels": {d: ((r.get("judge") or {}).get("labels") or {}).get(d) for d in DIMENSIONS},
    }


def _strata_table(by_stratum: Mapping[str, list[dict]], counts: Mapping[str, int]) -> list[dict]:
    strata = []
    for key in sorted(by_stratum):
        system, dataset, route, correctness = key.split("|")
        pop, smp = len(by_stratum[key]), counts[key]
        strata.append(
            {
                "key": key,
                "system": system,
                "dataset": dataset,
                "route": route,
                "correctness": correctness,
                "population": pop,
                "sample": smp,
                "weight": rounded(pop / smp) if smp else None,
            }
        )
    return strata


def _sheet_row(it: Mapping[str, Any]) -> list[Any]:
    """One blind annotation-sheet row: the item without system, route or judge labels, blank dimensions."""
    return [
        it["item_id"],
        it["question"],
        "\n\n".join(f"[{k}] {t}" for k, t in enumerate(it["passages"], start=1)),
        it["response"],
        " | ".join(it["gold_answers"]),
        " | ".join(it["wrong_answers"]),
        it["expected_behaviour"],
        *([""] * len(DIMENSIONS)),
    ]


# ------------------------------------------------------------------------------------------------ import
def parse_label(text: str | None, where: str = "cell") -> bool | None:
    """A sheet cell as a label: yes/y/true/1 → ``True``, no/n/false/0 → ``False``, blank/na/n/a → ``None``
    (case and surrounding spaces ignored).

    >>> parse_label(" Yes "), parse_label("0"), parse_label("N/A")
    (True, False, None)

    Raises:
        AuditError: Any other value (the message names ``where``).
    """
    v = (text or "").strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    if v in _NA:
        return None
    raise AuditError(
        f"{where}: {text!r} is not a label; write yes/no (or y/n, true/false, 1/0), "
        "or leave it blank / na for not applicable"
    )


def read_sheet(
    path: str | Path, item_ids: Sequence[str], require_all: bool = True, blank_is_na: bool = True
) -> dict[str, dict[str, bool | None | str]]:
    """The labels of one filled sheet: ``{item_id: {dimension: True / False / None}}``.

    Args:
        path: A CSV sheet written by :func:`export_audit` (a BOM, as spreadsheet programs write, is fine).
        item_ids: The manifest's item ids.
        require_all: Every item must have a row (annotator sheets); ``False`` for the adjudication sheet.
        blank_is_na: A blank cell is "not applicable"; ``False`` (adjudication sheet) keeps blank cells as
            the string ``"blank"`` (unresolved) and only ``na`` / ``n/a`` means not applicable.

    Raises:
        AuditError: A missing file or dimension column, an ``item_id`` not in the manifest or given twice, a
            missing item, or a cell that is not a label — naming the file, row and column.
    """
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"{path}: sheet not found")
    known = set(item_ids)
    out: dict[str, dict[str, bool | None | str]] = {}
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        fields = reader.fieldnames or []
        missing = [c for c in ("item_id", *DIMENSIONS) if c not in fields]
        if missing:
            raise AuditError(f"{path}: missing column(s) {', '.join(missing)}; keep the exported header")
        for n, row in enumerate(reader, start=1):
            item = (row.get("item_id") or "").strip()
            where = f"{path}: row {n}"
            if item not in known:
                raise AuditError(f"{where}, column 'item_id': {item!r} is not an item of this audit")
            if item in out:
                raise AuditError(f"{where}, column 'item_id': item {item} appears twice")
            labels: dict[str, bool | None | str] = {}
            for d in DIMENSIONS:
                cell = row.get(d)
                if not blank_is_na and not (cell or "").strip():
                    labels[d] = "blank"
                else:
                    labels[d] = parse_label(cell, f"{where} (item {item}), column {d!r}")
            out[item] = labels
    if require_all:
        absent = [i for i in item_ids if i not in out]
        if absent:
            more = f" (+{len(absent) - 5} more)" if len(absent) > 5 else ""
            raise AuditError(f"{path}: item(s) {', '.join(absent[:5])}{more} missing; every item needs a row")
    return out


def weighted_rate(flags: Sequence[bool], weights: Sequence[float]) -> float | None:
    """``Σ w_i · flag_i / Σ w_i`` (the stratum-weighted rate); ``None`` without items.

    >>> weighted_rate([True, False, True], [1.0, 2.0, 1.0])
    0.5
    """
    if not flags:
        return None
    total = float(sum(weights))
    return float(sum(w for f, w in zip(flags, weights) if f)) / total if total else None


def _r(x: float | None) -> float | None:
    return None if x is None else rounded(x)


def _offset_entry(items: list[dict], human: list[bool], judge: list[bool], weights: list[float]) -> dict:
    h, j = weighted_rate(human, weights), weighted_rate(judge, weights)
    return {
        "n": len(items),
        "human_rate": _r(h),
        "judge_rate": _r(j),
        "offset": _r(h - j) if h is not None and j is not None else None,
    }


def import_audit(audit_dir: str | Path, sheets: Sequence[str | Path] | None = None) -> dict[str, Any]:
    """Read the filled sheets of an audit folder and write ``audit_report.json`` and ``audit.md``.

    Args:
        audit_dir: A folder written by :func:`export_audit`.
        sheets: The filled annotator sheets (at least two); ``None`` = the manifest's ``annotator_*.csv`` in
            ``audit_dir``. ``audit_dir/adjudicated.csv``, when present, settles disagreements.

    Returns:
        The report (``audit_report.json``'s content): ``kappa`` (inter-annotator, per dimension),
        ``consensus`` (counts per dimension), ``judge_human`` (per dimension), ``offsets`` (per system and
        dimension / headline metric), ``headline`` (per system: judge-only, offset, human-calibrated) and
        ``items`` (per item: judge labels and human consensus).

    Raises:
        AuditError: A missing manifest or sheet, or a sheet that does not parse (see :func:`read_sheet`).
    """
    audit_dir = Path(audit_dir)
    manifest, items, ids = _read_manifest(audit_dir)
    dims = list(manifest.get("dimensions") or DIMENSIONS)
    paths = [Path(p) for p in sheets] if sheets else [audit_dir / s for s in manifest["sheets"]]
    if len(paths) < 2:
        raise AuditError(f"agreement needs at least two filled sheets; got {len(paths)}")
    filled = [read_sheet(p, ids) for p in paths]
    adj_path = audit_dir / ADJUDICATION_SHEET
    adjudicated = (
        read_sheet(adj_path, ids, require_all=False, blank_is_na=False) if adj_path.is_file() else {}
    )
    weight = {s["key"]: float(s["population"]) / s["sample"] for s in manifest["strata"] if s["sample"]}
    consensus, counts = _consensus(filled, adjudicated, ids, dims)
    snapshot = manifest.get("headline_judge_only") or {}
    offsets: dict[str, dict[str, Any]] = {}
    headline: dict[str, dict[str, Any]] = {}
    for system in manifest["systems"]:
        mine = [i for i in ids if items[i]["system"] == system]
        offsets[system] = _system_offsets(mine, items, consensus, dims, weight)
        headline[system] = _calibrated_headline(offsets[system], snapshot.get(system) or {})
    report = {
        "version": AUDIT_VERSION,
        "audit_dir": str(audit_dir.resolve()),
        "source_run_dir": manifest["source_run_dir"],
        "run_json_sha256": manifest["run_json_sha256"],
        "n": len(ids),
        "sheets": [str(p) for p in paths],
        "adjudicated": ADJUDICATION_SHEET if adjudicated else None,
        "dimensions": dims,
        "kappa": {d: _annotator_agreement(filled, paths, ids, d) for d in dims},
        "consensus": counts,
        "judge_human": {d: _judge_human(items, consensus, ids, d) for d in dims},
        "offsets": offsets,
        "headline": headline,
        "warnings": _import_warnings(manifest, snapshot),
        "items": [
            {
                "item_id": i,
                "system": items[i]["system"],
                "id": items[i]["id"],
                "stratum": items[i]["stratum"],
                "judge": items[i]["judge_labels"],
                "human": {d: consensus[i].get(d) for d in dims},
                "resolved": {d: d in consensus[i] for d in dims},
            }
            for i in ids
        ],
    }
    write_json(audit_dir / "audit_report.json", report)
    atomic_write_text(audit_dir / "audit.md", render_audit_markdown(report))
    return report


def _read_manifest(audit_dir: Path) -> tuple[dict, dict[str, dict], list[str]]:
    """``(manifest, items by id, item ids in sheet order)`` of an audit folder, checked."""
    man_path = audit_dir / "audit_manifest.json"
    if not man_path.is_file():
        raise AuditError(f"{audit_dir} is not an audit folder (no audit_manifest.json); run `audit export`")
    manifest = json.loads(man_path.read_text(encoding="utf-8"))
    if manifest.get("version") != AUDIT_VERSION:
        raise AuditError(f"{man_path}: version {manifest.get('version')!r}, expected {AUDIT_VERSION!r}")
    items = {it["item_id"]: it for it in _read_jsonl(audit_dir / "audit_items.jsonl")}
    ids = list(manifest["item_ids"])
    if set(ids) != set(items):
        raise AuditError(f"{audit_dir}: audit_items.jsonl and audit_manifest.json list different items")
    return manifest, items, ids


def _annotator_agreement(filled: list[dict], paths: list[Path], ids: list[str], d: str) -> dict[str, Any]:
    """Inter-annotator κ and raw agreement on dimension ``d``: per sheet pair and their mean."""
    pairs = []
    for a in range(len(filled)):
        for b in range(a + 1, len(filled)):
            xa, xb = [filled[a][i][d] for i in ids], [filled[b][i][d] for i in ids]
            pairs.append(
                {
                    "sheets": [paths[a].name, paths[b].name],
                    "kappa": _r(cohens_kappa(xa, xb)),
                    "agreement": _r(sum(x == y for x, y in zip(xa, xb)) / len(ids)),
                }
            )
    ks = [p["kappa"] for p in pairs if p["kappa"] is not None]
    return {
        "n": len(ids),
        "kappa": _r(float(np.mean(ks))) if ks else None,
        "agreement": _r(float(np.mean([p["agreement"] for p in pairs]))),
        "pairs": pairs,
    }


def _consensus(
    filled: list[dict], adjudicated: Mapping[str, Any], ids: list[str], dims: list[str]
) -> tuple[dict[str, dict[str, bool | None]], dict[str, dict[str, int]]]:
    """The human label of each item and dimension where the sheets agree or the adjudication settles it (an
    absent key = no consensus), and the counts per dimension."""
    consensus: dict[str, dict[str, bool | None]] = {i: {} for i in ids}
    counts: dict[str, dict[str, int]] = {}
    for d in dims:
        c = Counter()
        for i in ids:
            values = {filled[k][i][d] for k in range(len(filled))}
            if len(values) == 1:
                consensus[i][d] = values.pop()
                c["agreed"] += 1
                continue
            c["disagreements"] += 1
            adj = adjudicated.get(i, {}).get(d, "blank")
            if adj != "blank":
                consensus[i][d] = adj  # type: ignore[assignment]
                c["adjudicated"] += 1
            else:
                c["excluded"] += 1
        counts[d] = {k: c.get(k, 0) for k in ("agreed", "disagreements", "adjudicated", "excluded")}
    return consensus, counts


def _judge_human(items: Mapping[str, dict], consensus: Mapping[str, dict], ids: list[str], d: str) -> dict:
    """The judge's agreement with the human consensus on dimension ``d``."""
    have = [i for i in ids if d in consensus[i]]
    j = [items[i]["judge_labels"].get(d) for i in have]
    h = [consensus[i][d] for i in have]
    return {
        "n": len(have),
        "accuracy": _r(sum(x == y for x, y in zip(j, h)) / len(have)) if have else None,
        "kappa": _r(cohens_kappa(j, h)),
    }


def _hallucinated(labels: Mapping[str, Any]) -> bool:
    return bool(labels.get("unsupported_assertion")) or bool(labels.get("contradicted_assertion"))


def _system_offsets(
    mine: list[str],
    items: Mapping[str, dict],
    consensus: Mapping[str, dict],
    dims: list[str],
    weight: Mapping[str, float],
) -> dict[str, Any]:
    """One system's calibration offsets (human − judge, stratum-weighted) per dimension and headline metric."""

    def entry(have: list[str], human: Callable[[str], bool], judge: Callable[[str], bool]) -> dict:
        return _offset_entry(
            have,
            [human(i) for i in have],
            [judge(i) for i in have],
            [weight[items[i]["stratum"]] for i in have],
        )

    out: dict[str, Any] = {}
    for d in dims:
        out[d] = entry(
            [i for i in mine if d in consensus[i]],
            lambda i, d=d: consensus[i][d] is True,
            lambda i, d=d: items[i]["judge_labels"].get(d) is True,
        )
    hall = [
        i
        for i in mine
        if not items[i]["refused"]
        and "unsupported_assertion" in consensus[i]
        and "contradicted_assertion" in consensus[i]
    ]
    out["hallucination_rate"] = entry(
        hall, lambda i: _hallucinated(consensus[i]), lambda i: _hallucinated(items[i]["judge_labels"])
    )
    crr = [
        i
        for i in mine
        if items[i]["expected_behaviour"] in CONFLICT_BEHAVIOURS and "conflict_recognition" in consensus[i]
    ]
    out["conflict_resolution_rate"] = entry(
        crr,
        lambda i: consensus[i]["conflict_recognition"] is True,
        lambda i: items[i]["judge_labels"].get("conflict_recognition") is True,
    )
    return out


def _calibrated_headline(offsets: Mapping[str, Any], judge_only: Mapping[str, Any]) -> dict[str, Any]:
    """Per headline metric: the judge-only value, the offset and their sum clipped to [0, 1]."""
    out = {}
    for m in HEADLINE_METRICS:
        value, off = judge_only.get(m), offsets[m]["offset"]
        calibrated = _r(min(1.0, max(0.0, value + off))) if value is not None and off is not None else None
        out[m] = {"judge_only": value, "offset": off, "calibrated": calibrated}
    return out


def _import_warnings(manifest: Mapping[str, Any], snapshot: Mapping[str, Any]) -> list[str]:
    warnings = []
    src = Path(manifest["source_run_dir"]) / "run.json"
    if src.is_file() and _sha256(src) != manifest["run_json_sha256"]:
        warnings.append(f"{src} changed since the export (sha256 differs): the audit describes the old run")
    if not snapshot:
        warnings.append("the run had no metrics.json at export: no judge-only headline metrics to calibrate")
    return warnings


# ------------------------------------------------------------------------------------------------ markdown
def render_audit_markdown(report: Mapping[str, Any]) -> str:
    """``audit.md``: Table 6 — inter-annotator κ, judge–human agreement, calibration offsets and the
    judge-only vs human-calibrated headline metrics per system."""
    dims = report["dimensions"]
    lines = [
        "# Human audit of the judge (Table 6)",
        "",
        f"- Items: {report['n']}; sheets: {', '.join(Path(s).name for s in report['sheets'])}"
        + (f"; disagreements settled by `{report['adjudicated']}`" if report.get("adjudicated") else ""),
        f"- Source run: `{report['source_run_dir']}` (run.json sha256 {report['run_json_sha256'][:12]}…)",
        "- κ: Cohen's kappa over yes / no / not applicable (mean pairwise with more than two annotators). "
        "Offsets: stratum-weighted human rate − judge rate (weights = population / sample per stratum).",
        *(f"- Warning: {w}" for w in report.get("warnings", [])),
        "",
        "## Agreement per dimension",
        "",
        "| dimension | n | inter-annotator κ | raw agreement | disagreements (settled) | judge–human n "
        "| judge–human accuracy | judge–human κ |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for d in dims:
        k, c, jh = report["kappa"][d], report["consensus"][d], report["judge_human"][d]
        lines.append(
            f"| {d} | {k['n']} | {format_number(k['kappa'])} | {format_number(k['agreement'])} | "
            f"{c['disagreements']} ({c['adjudicated']}) | {jh['n']} | {format_number(jh['accuracy'])} | {format_number(jh['kappa'])} |"
        )
    lines += [
        "",
        "## Calibration offsets (human − judge, stratum-weighted)",
        "",
        "| system | " + " | ".join([*dims, *HEADLINE_METRICS]) + " |",
        "| --- | " + " | ".join(["---"] * (len(dims) + len(HEADLINE_METRICS))) + " |",
    ]
    for system, offs in report["offsets"].items():
        cells = [
            f"{format_number(offs[k]['offset'], signed=True)} (n={offs[k]['n']})"
            for k in [*dims, *HEADLINE_METRICS]
        ]
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Headline metrics: judge-only vs human-calibrated",
        "",
        "| system | metric | judge-only | offset | human-calibrated |",
        "| --- | --- | --- | --- | --- |",
    ]
    for system, hs in report["headline"].items():
        for m, v in hs.items():
            lines.append(
                f"| {system} | {m} | {format_number(v['judge_only'])} | {format_number(v['offset'], signed=True)} | "
                f"{format_number(v['calibrated'])} |"
            )
    lines.append("")
    return "\n".join(lines)
