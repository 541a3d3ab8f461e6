"""Human audit of the judge (paper §4.5, Table 6): Cohen's κ, the stratified export and the import round trip
on an evaluate-style run folder built from real RAMDocs instances judged by the real label judge."""

from __future__ import annotations

import csv
import doctest
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from inference.evaluation import audit as A  # noqa: E402
from inference.evaluation import metrics as M  # noqa: E402
from inference.evaluation.audit import (  # noqa: E402
    DIMENSIONS,
    SHEET_COLUMNS,
    AuditError,
    allocate,
    export_audit,
    import_audit,
    parse_label,
    stratum_of,
)
from inference.evaluation.datasets import load_eval_dataset  # noqa: E402
from inference.evaluation.judges import JUDGE_LABELS, JudgeInput, build_judge  # noqa: E402
from inference.evaluation.metrics import cohens_kappa  # noqa: E402
from inference.evaluation.report import aggregate  # noqa: E402
from inference.evaluation.rows import instance_scores  # noqa: E402
from inference.io import write_json, write_jsonl  # noqa: E402

SEEDS = [42, 123]
N_INSTANCES = 12
N_AUDIT = 12


# ------------------------------------------------------------------------------------------------ kappa
def test_cohens_kappa_classic_2x2():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> p_o = .7, p_e = .5*.6 + .5*.4 = .5, kappa = .4
    a = ["y"] * 20 + ["y"] * 5 + ["n"] * 10 + ["n"] * 15
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohens_kappa(a, b) == pytest.approx(0.4)
    # 100 items: 45 / 15 / 25 / 15 -> p_o = .6, p_e = .6*.7 + .4*.3 = .54, kappa = .06 / .46
    a = [1] * 60 + [0] * 40
    b = [1] * 45 + [0] * 15 + [1] * 25 + [0] * 15
    assert cohens_kappa(a, b) == pytest.approx(0.06 / 0.46)


def test_cohens_kappa_defined_cases_and_three_categories():
    assert cohens_kappa([True, False, None], [True, False, None]) == 1.0
    assert cohens_kappa([True] * 4, [True] * 4) == 1.0  # p_e = 1: one category only, identical
    assert cohens_kappa([], []) is None
    # perfect disagreement on a balanced 2x2: p_o = 0, p_e = .5 -> -1
    assert cohens_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    # one rater constant, the other not: p_e = p_o -> 0
    assert cohens_kappa([1, 1, 1, 1], [1, 1, 0, 0]) == pytest.approx(0.0)
    a = [True, True, None, False, None, True, False, False]
    b = [True, None, None, False, True, True, True, False]
    # p_o = 5/8; marginals a: T3 F3 N2, b: T4 F2 N2 -> p_e = (12 + 6 + 4) / 64
    assert cohens_kappa(a, b) == pytest.approx((5 / 8 - 22 / 64) / (1 - 22 / 64))
    with pytest.raises(ValueError, match="differ in length"):
        cohens_kappa([1], [1, 0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_cohens_kappa_properties(pairs):
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    k = cohens_kappa(a, b)
    assert k == pytest.approx(cohens_kappa(b, a))
    assert -1.0 - 1e-12 <= k <= 1.0 + 1e-12
    assert (k == 1.0) == (a == b)
    if len(set(a)) == 2 and len(set(b)) == 2:
        assert k == pytest.approx(cohen_kappa_score(a, b))


def test_doctests_of_the_audit_module_and_kappa():
    assert doctest.testmod(A).failed == 0
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for t in finder.find(M.cohens_kappa, "cohens_kappa", globs={"cohens_kappa": cohens_kappa}):
        runner.run(t)
    assert runner.failures == 0 and runner.tries >= 2


# ------------------------------------------------------------------------------------------------ pieces
def test_allocate_is_proportional_with_one_per_stratum():
    assert allocate({"a": 80, "b": 15, "c": 5}, 10) == {"a": 8, "b": 1, "c": 1}
    assert allocate({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    assert allocate({"a": 3, "b": 1}, 10) == {"a": 3, "b": 1}  # n >= population: everything
    assert allocate({"a": 5, "b": 9, "c": 2}, 2) == {"a": 1, "b": 1, "c": 0}  # n < strata: most populous
    assert allocate({"a": 2, "b": 100}, 10) == {"a": 1, "b": 9}  # the minimum one, then proportional
    assert allocate({"a": 2, "b": 2, "c": 96}, 5) == {"a": 1, "b": 1, "c": 3}
    with pytest.raises(AuditError, match="n must be >= 1"):
        allocate({"a": 1}, 0)


def test_parse_label_values():
    for t in ("yes", "Y", " TRUE ", "1"):
        assert parse_label(t) is True
    for t in ("no", "n", "False", "0"):
        assert parse_label(t) is False
    for t in ("", "  ", "na", "N/A", None):
        assert parse_label(t) is None
    with pytest.raises(AuditError, match="'maybe' is not a label"):
        parse_label("maybe", "x.csv: row 1")


# ------------------------------------------------------------------------------------------------ run folder
def _responses(inst, k: int) -> dict[str, tuple[str, str]]:
    gold = inst.gold_answers[0]
    wrong = inst.wrong_answers[0] if inst.wrong_answers else "Zorblax United"
    ev = [
        (f"{gold}.", "direct"),
        (f"The sources conflict: some say {gold}, others say {wrong}.", "conflict"),
        ("I cannot answer this question from the given sources.", "abstain"),
        (f"It was {gold}, founded by Zorblax Quintavian in 1777.", "direct"),
    ][k % 4]
    naive = (wrong if k % 2 == 0 else f"The answer is {gold}.", "direct")
    return {"evidential": ev, "naive": naive}


@pytest.fixture(scope="module")
def run_dir(shared_data, tmp_path_factory) -> Path:
    """An evaluate output folder: 12 real RAMDocs instances × 2 systems × 2 seeds (the second reused), judged
    by the real label judge, with metrics.json from the real report aggregation."""
    out = tmp_path_factory.mktemp("run")
    instances = load_eval_dataset("ramdocs", shared_data / "ramdocs", limit=N_INSTANCES)
    judge = build_judge("label")
    prepared = [
        {"instance": i.to_dict(), "chunks": [c.to_dict() for c in i.passages], "labels": i.passage_labels}
        for i in instances
    ]
    write_jsonl(out / "instances.jsonl", prepared)
    per_system: dict[str, list[dict]] = {"evidential": [], "naive": []}
    for name in per_system:
        answers = [_responses(inst, k)[name] for k, inst in enumerate(instances)]
        judged = judge.judge_batch([JudgeInput(i, resp, None) for i, (resp, _) in zip(instances, answers)])
        rows = []
        for inst, (resp, route), jd in zip(instances, answers, judged):
            rows.append(
                {
                    "id": inst.id,
                    "dataset": inst.dataset,
                    "system": name,
                    "seed": SEEDS[0],
                    "split": inst.split,
                    "question": inst.question,
                    "expected_behaviour": inst.expected_behaviour,
                    "gold_answers": list(inst.gold_answers),
                    "wrong_answers": list(inst.wrong_answers),
                    "record": {"response": resp, "route": route, "chunks": []},
                    "judge": jd.to_dict(),
                    "scores": instance_scores(inst, {"response": resp}, None),
                    "latency_s": 0.01,
                    "batch_size": 1,
                    "peak_rss_mib": 100.0,
                    "peak_cuda_mib": None,
                }
            )
        rows += [{**r, "seed": SEEDS[1], "reused_from_seed": SEEDS[0]} for r in rows]
        write_jsonl(out / f"{name}.jsonl", rows)
        per_system[name] = rows
    run = {"settings": {"version": "evaluate/1.0", "dataset": "ramdocs"}, "systems": list(per_system)}
    write_json(out / "run.json", {**run, "seeds": SEEDS, "versions": {}})
    inst_map = {p["instance"]["id"]: p for p in prepared}
    write_json(out / "metrics.json", aggregate(per_system, inst_map, "naive"))
    return out


def _read_csv(path: Path) -> tuple[list[str], list[dict]]:
    with path.open(encoding="utf-8", newline="") as fh:
        r = csv.DictReader(fh)
        return list(r.fieldnames or []), list(r)


def _write_csv(path: Path, header: list[str], rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, header)
        w.writeheader()
        w.writerows(rows)


def _cell(v: bool | None) -> str:
    return "" if v is None else ("yes" if v else "no")


def _flip(v: bool | None) -> bool:
    return not v if v is not None else True


def _items(audit: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (audit / "audit_items.jsonl").read_text().splitlines() if x.strip()]
    return {r["item_id"]: r for r in rows}


def _fill(audit: Path, flips: set[tuple[str, str]]) -> dict[str, dict]:
    """Annotator 1 writes the judge's labels, annotator 2 the same with the cells in ``flips`` flipped."""
    items = _items(audit)
    for k, flipped in ((1, set()), (2, flips)):
        header, rows = _read_csv(audit / f"annotator_{k}.csv")
        for row in rows:
            lab = items[row["item_id"]]["judge_labels"]
            for d in DIMENSIONS:
                row[d] = _cell(_flip(lab[d]) if (row["item_id"], d) in flipped else lab[d])
        _write_csv(audit / f"annotator_{k}.csv", header, rows)
    return items


def _flips(ids: list[str]) -> set[tuple[str, str]]:
    return {(ids[k], DIMENSIONS[k % len(DIMENSIONS)]) for k in range(0, len(ids), 2)} | {
        (ids[1], "unsupported_assertion"),
        (ids[3], "unsupported_assertion"),
    }


# ------------------------------------------------------------------------------------------------ export
def test_export_draws_a_seeded_stratified_blind_sample(run_dir, tmp_path):
    man = export_audit(run_dir, tmp_path / "a", n=N_AUDIT, seed=0)
    assert man["version"] == "audit/1.0" and man["dimensions"] == list(JUDGE_LABELS)
    assert man["n"] == N_AUDIT and len(man["item_ids"]) == N_AUDIT
    assert len(man["run_json_sha256"]) == 64 and man["first_seed"] == SEEDS[0]
    strata = man["strata"]
    # the population is the first seed only: 12 rows per system (the reused copies are skipped)
    assert sum(s["population"] for s in strata) == 2 * N_INSTANCES
    assert sum(s["sample"] for s in strata) == N_AUDIT
    assert all(s["sample"] >= 1 for s in strata)  # n >= number of strata here
    pops = {s["key"]: s["population"] for s in strata}
    assert {s["key"]: s["sample"] for s in strata} == allocate(pops, N_AUDIT)
    for s in strata:
        assert s["weight"] == pytest.approx(s["population"] / s["sample"], abs=1e-6)
    # strata keys follow the rows: naive answers are all routed "direct"
    assert {s["route"] for s in strata if s["system"] == "naive"} == {"direct"}
    assert {s["correctness"] for s in strata} <= {"correct", "incorrect", "n/a"}

    items = _items(tmp_path / "a")
    assert list(items) == man["item_ids"]
    runs = {
        n: {r["id"]: r for r in map(json.loads, (run_dir / f"{n}.jsonl").read_text().splitlines())}
        for n in ("evidential", "naive")
    }
    inst = {
        json.loads(x)["instance"]["id"]: json.loads(x)
        for x in (run_dir / "instances.jsonl").read_text().splitlines()
    }
    for it in items.values():
        row = runs[it["system"]][it["id"]]
        assert it["stratum"] == stratum_of(row)
        assert it["response"] == row["record"]["response"]
        assert it["judge_labels"] == row["judge"]["labels"]
        assert it["passages"] == [c["text"] for c in inst[it["id"]]["chunks"]]
        assert it["refused"] == row["scores"]["refused"]
    # blind sheets: the exported columns and blank dimensions, no system / route / judge label
    for k in (1, 2):
        header, rows = _read_csv(tmp_path / "a" / f"annotator_{k}.csv")
        assert header == [*SHEET_COLUMNS, *DIMENSIONS]
        assert [r["item_id"] for r in rows] == man["item_ids"]
        assert all(r[d] == "" for r in rows for d in DIMENSIONS)
        first = items[rows[0]["item_id"]]
        assert rows[0]["response"] == first["response"] and rows[0]["question"] == first["question"]
        assert rows[0]["passages"].startswith("[1] ")
    guide = (tmp_path / "a" / "GUIDELINES.md").read_text()
    assert all(f"`{d}`" in guide for d in DIMENSIONS)
    # the same seed draws the same sample; another seed another order
    again = export_audit(run_dir, tmp_path / "b", n=N_AUDIT, seed=0)
    assert _items(tmp_path / "b") == items and again["strata"] == strata
    other = export_audit(run_dir, tmp_path / "c", n=N_AUDIT, seed=1)
    assert [(it["system"], it["id"]) for it in _items(tmp_path / "c").values()] != [
        (it["system"], it["id"]) for it in items.values()
    ]
    assert other["strata"] == strata or sum(s["sample"] for s in other["strata"]) == N_AUDIT
    # one system only
    solo = export_audit(run_dir, tmp_path / "d", n=5, seed=0, systems=["naive"])
    assert {s["system"] for s in solo["strata"]} == {"naive"} and solo["n"] == 5


def test_export_errors(run_dir, tmp_path):
    with pytest.raises(AuditError, match="no run.json"):
        export_audit(tmp_path, tmp_path / "x")
    with pytest.raises(AuditError, match="bogus"):
        export_audit(run_dir, tmp_path / "x", systems=["bogus"])
    with pytest.raises(AuditError, match="annotators must be >= 2"):
        export_audit(run_dir, tmp_path / "x", annotators=1)


def test_reexport_over_filled_sheets_is_refused(run_dir, tmp_path):
    audit = tmp_path / "a"
    export_audit(run_dir, audit, n=N_AUDIT, seed=0)
    export_audit(run_dir, audit, n=N_AUDIT, seed=3)  # blank sheets: overwriting is fine
    _fill(audit, set())
    before = (audit / "annotator_1.csv").read_text()
    with pytest.raises(
        AuditError, match=r"already holds filled annotations \(annotator_1.csv, annotator_2.csv\)"
    ):
        export_audit(run_dir, audit, n=N_AUDIT, seed=0)
    assert (audit / "annotator_1.csv").read_text() == before


# ------------------------------------------------------------------------------------------------ import
def _expected_rate(items, ids, flag, weights):
    num = sum(weights[items[i]["stratum"]] for i in ids if flag(i))
    den = sum(weights[items[i]["stratum"]] for i in ids)
    return num / den


def test_round_trip_without_adjudication(run_dir, tmp_path):
    audit = tmp_path / "a"
    man = export_audit(run_dir, audit, n=N_AUDIT, seed=0)
    ids = man["item_ids"]
    flips = _flips(ids)
    items = _fill(audit, flips)
    rep = import_audit(audit)
    n = len(ids)
    for d in DIMENSIONS:
        judge = [items[i]["judge_labels"][d] for i in ids]
        second = [
            _flip(items[i]["judge_labels"][d]) if (i, d) in flips else items[i]["judge_labels"][d]
            for i in ids
        ]
        nflip = sum(1 for i in ids if (i, d) in flips)
        ref = cohen_kappa_score([str(x) for x in judge], [str(x) for x in second])
        assert rep["kappa"][d]["kappa"] == pytest.approx(ref, abs=1e-6)
        assert rep["kappa"][d]["agreement"] == pytest.approx(1 - nflip / n, abs=1e-6)
        assert rep["kappa"][d]["n"] == n
        assert rep["consensus"][d] == {
            "agreed": n - nflip,
            "disagreements": nflip,
            "adjudicated": 0,
            "excluded": nflip,
        }
        # annotator 1 = the judge, disagreements excluded: the consensus is the judge on the rest
        assert rep["judge_human"][d] == {"n": n - nflip, "accuracy": 1.0, "kappa": 1.0}
        for s in ("evidential", "naive"):
            assert rep["offsets"][s][d]["offset"] == 0.0
    assert rep["kappa"]["unsupported_assertion"]["agreement"] == pytest.approx(
        1 - 4 / n, abs=1e-6
    )  # ids 0, 10 (k % 5 == 0), 1, 3
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for s in ("evidential", "naive"):
        for m in ("hallucination_rate", "conflict_resolution_rate"):
            h = rep["headline"][s][m]
            assert h["judge_only"] == metrics["systems"][s]["mean_std"][m]["mean"]
            assert h["offset"] in (0.0, None) and h["calibrated"] in (h["judge_only"], None)
    assert (audit / "audit_report.json").is_file()
    md = (audit / "audit.md").read_text()
    assert "Table 6" in md and "human-calibrated" in md and "unsupported_assertion" in md


def test_round_trip_with_adjudication_gives_hand_computed_offsets(run_dir, tmp_path):
    audit = tmp_path / "a"
    man = export_audit(run_dir, audit, n=N_AUDIT, seed=0)
    ids = man["item_ids"]
    flips = _flips(ids)
    items = _fill(audit, flips)
    # the adjudicator sides with annotator 2 on every disagreement but one, which stays unresolved
    unresolved = (ids[0], DIMENSIONS[0])
    header = ["item_id", *DIMENSIONS]
    adj_rows = []
    for i in ids:
        row = {"item_id": i, **{d: "" for d in DIMENSIONS}}
        for d in DIMENSIONS:
            if (i, d) in flips and (i, d) != unresolved:
                row[d] = _cell(_flip(items[i]["judge_labels"][d])) or "na"
        adj_rows.append(row)
    _write_csv(audit / "adjudicated.csv", header, adj_rows)
    rep = import_audit(audit)
    weights = {s["key"]: s["population"] / s["sample"] for s in man["strata"]}

    def human(i, d):
        return _flip(items[i]["judge_labels"][d]) if (i, d) in flips else items[i]["judge_labels"][d]

    assert rep["adjudicated"] == "adjudicated.csv"
    for d in DIMENSIONS:
        have = [i for i in ids if (i, d) != unresolved]
        nflip = sum(1 for i in have if (i, d) in flips)
        assert rep["consensus"][d]["adjudicated"] == nflip
        assert rep["consensus"][d]["excluded"] == int(d == unresolved[1])
        j = [items[i]["judge_labels"][d] for i in have]
        h = [human(i, d) for i in have]
        assert rep["judge_human"][d]["n"] == len(have)
        assert rep["judge_human"][d]["accuracy"] == pytest.approx(1 - nflip / len(have), abs=1e-6)
        assert rep["judge_human"][d]["kappa"] == pytest.approx(
            cohen_kappa_score([str(x) for x in j], [str(x) for x in h]), abs=1e-6
        )
        for s in ("evidential", "naive"):
            mine = [i for i in have if items[i]["system"] == s]
            want = _expected_rate(items, mine, lambda i, d=d: human(i, d) is True, weights) - _expected_rate(
                items, mine, lambda i, d=d: items[i]["judge_labels"][d] is True, weights
            )
            assert rep["offsets"][s][d]["offset"] == pytest.approx(want, abs=1e-6)
            assert rep["offsets"][s][d]["n"] == len(mine)
    assert any(rep["offsets"][s][d]["offset"] != 0 for s in rep["offsets"] for d in DIMENSIONS)

    metrics = json.loads((run_dir / "metrics.json").read_text())
    ua, ca = "unsupported_assertion", "contradicted_assertion"
    for s in ("evidential", "naive"):
        mine = [i for i in ids if items[i]["system"] == s]
        hall = [
            i for i in mine if not items[i]["refused"] and (i, ua) != unresolved and (i, ca) != unresolved
        ]
        want = _expected_rate(
            items, hall, lambda i: bool(human(i, ua)) or bool(human(i, ca)), weights
        ) - _expected_rate(
            items,
            hall,
            lambda i: bool(items[i]["judge_labels"][ua]) or bool(items[i]["judge_labels"][ca]),
            weights,
        )
        h = rep["headline"][s]["hallucination_rate"]
        assert h["offset"] == pytest.approx(want, abs=1e-6)
        base = metrics["systems"][s]["mean_std"]["hallucination_rate"]["mean"]
        assert h["judge_only"] == base
        assert h["calibrated"] == pytest.approx(min(1.0, max(0.0, base + want)), abs=1e-6)
        crr = [i for i in mine if items[i]["expected_behaviour"] in M.CONFLICT_BEHAVIOURS]
        cr = "conflict_recognition"
        want_c = _expected_rate(items, crr, lambda i, cr=cr: human(i, cr) is True, weights) - _expected_rate(
            items, crr, lambda i, cr=cr: items[i]["judge_labels"][cr] is True, weights
        )
        c = rep["headline"][s]["conflict_resolution_rate"]
        assert c["offset"] == pytest.approx(want_c, abs=1e-6)
        base_c = metrics["systems"][s]["mean_std"]["conflict_resolution_rate"]["mean"]
        assert c["calibrated"] == pytest.approx(min(1.0, max(0.0, base_c + want_c)), abs=1e-6)


def test_bad_sheets_name_file_row_and_column(run_dir, tmp_path):
    audit = tmp_path / "a"
    man = export_audit(run_dir, audit, n=N_AUDIT, seed=0)
    _fill(audit, set())
    path = audit / "annotator_2.csv"
    header, rows = _read_csv(path)
    good = [dict(r) for r in rows]

    rows[2]["conflict_recognition"] = "maybe"
    _write_csv(path, header, rows)
    with pytest.raises(
        AuditError, match=r"annotator_2\.csv: row 3 \(item A\d+\), column 'conflict_recognition'"
    ):
        import_audit(audit)

    rows = [dict(r) for r in good]
    rows[4]["item_id"] = "Z999"
    _write_csv(path, header, rows)
    with pytest.raises(AuditError, match=r"annotator_2\.csv: row 5, column 'item_id': 'Z999' is not an item"):
        import_audit(audit)

    _write_csv(path, header, good[:-1])
    with pytest.raises(AuditError, match=rf"annotator_2\.csv: item\(s\) {man['item_ids'][-1]} missing"):
        import_audit(audit)

    _write_csv(
        path,
        [h for h in header if h != "answer_support"],
        [{k: v for k, v in r.items() if k != "answer_support"} for r in good],
    )
    with pytest.raises(AuditError, match=r"annotator_2\.csv: missing column\(s\) answer_support"):
        import_audit(audit)

    with pytest.raises(AuditError, match="at least two filled sheets"):
        import_audit(audit, sheets=[audit / "annotator_1.csv"])
    with pytest.raises(AuditError, match="no audit_manifest.json"):
        import_audit(tmp_path)


def test_cli_round_trip(run_dir, tmp_path):
    from inference.cli import app

    runner = CliRunner()
    audit = tmp_path / "cli"
    res = runner.invoke(
        app, ["audit", "export", "--from", str(run_dir), "--out", str(audit), "--n", "8", "--seed", "5"]
    )
    assert res.exit_code == 0, res.output
    assert "audit sample: 8 items" in res.output
    man = json.loads((audit / "audit_manifest.json").read_text())
    assert man["n"] == 8 and man["seed"] == 5
    items = _fill(audit, {(man["item_ids"][0], "answer_support")})
    # sheets passed explicitly (copied elsewhere)
    other = tmp_path / "elsewhere.csv"
    other.write_text((audit / "annotator_2.csv").read_text())
    res = runner.invoke(
        app,
        [
            "audit",
            "import",
            "--from",
            str(audit),
            "--sheet",
            str(audit / "annotator_1.csv"),
            "--sheet",
            str(other),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "judge-only vs human-calibrated" in res.output and "answer_support" in res.output
    rep = json.loads((audit / "audit_report.json").read_text())
    assert rep["consensus"]["answer_support"]["disagreements"] == 1
    assert rep["sheets"][1] == str(other) and len(items) == 8
    # user errors exit 2 with the message
    res = runner.invoke(app, ["audit", "export", "--from", str(run_dir), "--out", str(audit)])
    assert res.exit_code == 2 and "already holds filled annotations" in res.output
    res = runner.invoke(
        app, ["audit", "export", "--from", str(run_dir), "--out", str(tmp_path / "z"), "--systems", "x"]
    )
    assert res.exit_code == 2 and "not in the run" in res.output
