"""`evidential-rag calibrate` end to end on real RAMDocs records with the shipped learned checkpoint, the
calibration file at inference (`ask` / `batch --calibration`) and its refusal when it belongs to another
evaluator, checkpoint or fusion setting."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from evidential import fuse, opinions_from_evidence
from inference.calibration import evaluator_identity, load_calibration
from inference.cli import app
from inference.config import load_config
from inference.evaluators.base import EvaluationResult, FrameClaim
from inference.types import ChunkEvidence
from inference.workflows.calibrate import calibrate, parse_data_spec
from training.calibration import Calibration, CalibrationError, checkpoint_fingerprint
from training.learned.checkpoint import resolve_checkpoint

runner = CliRunner()
REPO = Path(__file__).resolve().parents[3]
CHECKPOINT = REPO / "checkpoints" / "learned-minilm"
CHUNKS = REPO / "inference" / "data" / "example_chunks.jsonl"
QUESTION = 'Who is the artist of the album "Crazy World"?'


def _ramdocs(shared_data: Path, limit: int = 100) -> str:
    return f"{{name: ramdocs, path: {shared_data / 'ramdocs' / 'RAMDocs_test.jsonl'}, limit: {limit}}}"


def _calibrate_args(shared_data: Path, out: Path) -> list[str]:
    return [
        "calibrate",
        "--evaluator",
        "learned",
        "--set",
        f"evaluator.checkpoint={CHECKPOINT}",
        "--data",
        _ramdocs(shared_data),
        "--output",
        str(out),
        "--no-progress",
    ]


@pytest.fixture(scope="module")
def fitted(shared_data, tmp_path_factory):
    """One calibration of the shipped checkpoint on the validation side of 100 RAMDocs records."""
    out = tmp_path_factory.mktemp("calibration") / "learned.json"
    r = runner.invoke(app, _calibrate_args(shared_data, out))
    assert r.exit_code == 0, r.output
    return out, json.loads(out.read_text()), r.stdout


def test_calibrate_writes_the_calibration_file(fitted):
    out, d, stdout = fitted
    assert d["format"] == "evidential-rag-calibration" and d["version"] == 1
    ev = d["evaluator"]
    ckpt = resolve_checkpoint(CHECKPOINT)
    assert ev["name"] == "learned" and ev["checkpoint"] == str(ckpt)
    assert ev["fingerprint"] == checkpoint_fingerprint(ckpt)
    data = d["data"]
    assert data["split"] == "validation" and data["builders"] == ["ramdocs"]
    # the split of the checkpoint's training (its model card): 0.2 / seed 0; its training questions excluded
    assert (data["validation_fraction"], data["split_seed"]) == (0.2, 0)
    assert "model card" in data["split_settings_from"]
    assert 10 <= data["queries"] <= 30 and data["queries"] + data["train_queries_excluded"] == 100
    assert data["sources"][0]["limit"] == 100 and data["max_chunks"] == load_config(None).k
    p = d["parameters"]
    assert p["scale"] > 0 and p["power"] > 0 and 0 <= p["lam"] <= 1 and 0 <= p["tau1"] < p["tau2"] <= 1
    assert (p["rule"], p["policy"]) == ("lambda", "paper") and p["isotonic"]["x"]
    m = d["metrics"]
    for part in ("before", "after", "after_cv"):
        assert 0 <= m[part]["route_accuracy"] <= 1 and 0 <= m[part]["ece"] <= 1, part
    assert m["before"]["parameters"] == {
        "scale": 1.0,
        "power": 1.0,
        "lam": 0.6,
        "tau1": 0.35,
        "tau2": 0.65,
        "state_ratio": 0.5,
        "state_ratio_yes_no": None,
        "state_witness_ratio": None,
    }
    assert 0 <= p["state_ratio"] <= 1 and 0 <= m["after"]["set_accuracy"] <= 1
    assert m["before"]["queries"] == data["queries"] and m["after_cv"]["folds"] == 5
    assert m["after"]["ece"] <= m["before"]["ece"]  # in-sample isotonic cannot be worse calibrated
    assert "strict_em_ramdocs" in m["before"] and "claim_accuracy" in m["before"]
    assert d["run"]["evaluated_queries"] == data["queries"] and d["run"]["batched_passes"] >= 1
    png = out.with_name("learned.reliability.png")
    assert d["reliability_diagram"] == png.name and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "route accuracy" in stdout and "ECE" in stdout


def test_rerun_reads_the_evidence_cache_and_refits_identically(fitted, shared_data):
    out, d, _ = fitted
    again = out.with_name("again.json")
    args = _calibrate_args(shared_data, again) + ["--cache", d["evidence_cache"]]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    d2 = json.loads(again.read_text())
    assert d2["run"]["evaluated_queries"] == 0 and d2["run"]["cached_queries"] == d["data"]["queries"]
    assert d2["run"]["load_evaluator_seconds"] == 0.0  # no model was loaded
    assert d2["parameters"] == d["parameters"] and d2["metrics"] == d["metrics"]


def test_the_route_maps_and_conflict_gold_switches_are_recorded(fitted, shared_data):
    """RAMDocs has a gold reference everywhere (no conflict is given one) and its 20 validation questions are
    too few for a route map of their own; the switches are recorded, and turning them off changes nothing
    else here."""
    out, d, stdout = fitted
    assert d["data"]["conflict_gold"] is True and d["data"]["conflict_queries_given_gold"] == 0
    # the command prints the cross-fitted ECE per source
    cv_ramdocs = d["metrics"]["after_cv"]["ece_by_source"]["ramdocs"]
    (line,) = [ln.split() for ln in stdout.splitlines() if ln.strip().startswith("ramdocs ")]
    assert line[:2] == ["ramdocs", str(cv_ramdocs["queries"])] and line[-1] == f"{cv_ramdocs['ece']:.3f}"
    assert d["search"]["route_maps"] == {"on": True, "min_queries": 30}
    assert "isotonic_routes" not in d["parameters"]  # no route had 30 gold answers
    assert set(d["metrics"]["after_cv"]["ece_by_source"]) == {"ramdocs"}
    plain = out.with_name("plain.json")
    args = _calibrate_args(shared_data, plain) + ["--cache", d["evidence_cache"]]
    r = runner.invoke(app, args + ["--no-route-maps", "--no-conflict-gold"])
    assert r.exit_code == 0, r.output
    d2 = json.loads(plain.read_text())
    assert d2["data"]["conflict_gold"] is False and d2["search"]["route_maps"]["on"] is False
    assert d2["parameters"] == d["parameters"]
    # RAMDocs' only non-gold claims are planted: side conflicts (on by default) are recorded and none is found
    assert d["data"]["side_conflicts"] is True and d["data"]["conflict_queries_given_gold"] == 0
    sides = out.with_name("sides.json")
    args = _calibrate_args(shared_data, sides) + ["--cache", d["evidence_cache"], "--no-side-conflicts"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    d3 = json.loads(sides.read_text())
    assert d3["data"]["side_conflicts"] is False
    assert d3["parameters"] == d["parameters"]


def test_state_ratio_keeps_the_open_bar_and_fits_the_rest(fitted, shared_data):
    """`--state-ratio R` keeps the open frames' bar at R (recorded as fixed) and fits everything else as
    without it, the yes/no bar included; a value outside [0, 1] is refused."""
    out, d, _ = fitted
    kept = 0.25 if d["parameters"]["state_ratio"] != 0.25 else 0.75
    fixed = out.with_name("fixed.json")
    args = _calibrate_args(shared_data, fixed) + ["--cache", d["evidence_cache"], "--state-ratio", str(kept)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    d2 = json.loads(fixed.read_text())
    p, p0 = d2["parameters"], d["parameters"]
    assert p["state_ratio"] == kept and d2["search"]["state_ratio_fixed"] == kept
    assert "state_ratio_fixed" not in d["search"]
    same = ("scale", "power", "lam", "tau1", "tau2", "state_ratio_yes_no")
    assert {k: p.get(k) for k in same} == {k: p0.get(k) for k in same}
    assert all(f["state_ratio"] == kept for f in d2["metrics"]["after_cv"]["per_fold"])
    bad = runner.invoke(
        app, _calibrate_args(shared_data, out.with_name("bad.json")) + ["--state-ratio", "1.5"]
    )
    assert bad.exit_code == 2 and "--state-ratio must be a number in [0, 1]; got 1.5" in bad.output


def test_ask_applies_the_calibration(fitted):
    out, d, _ = fitted
    p = d["parameters"]
    r = runner.invoke(
        app,
        [
            "ask",
            QUESTION,
            "--chunks",
            str(CHUNKS),
            "--candidates",
            "Boys Like Girls,Martin Johnson",
            "--set",
            f"evaluator.checkpoint={CHECKPOINT}",
            "--set",
            "generator.name=template",
            "--calibration",
            str(out),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert rec["calibration"]["file"] == str(out)
    assert rec["calibration"]["fingerprint"] == d["evaluator"]["fingerprint"]
    assert rec["fusion"]["lam"] == p["lam"] and (rec["fusion"]["tau1"], rec["fusion"]["tau2"]) == (
        p["tau1"],
        p["tau2"],
    )
    cal = Calibration.from_dict(d)
    assert rec["calibrated_confidence"] == pytest.approx(
        cal.calibrated_confidence(rec["confidence"], rec["stated_mass"]), abs=1e-6
    )
    # a fresh fit maps the stated set's fused mass: the belief that the answer as stated is right
    assert p["confidence_input"] == "stated" and cal.confidence_input == "stated"
    assert rec["stated_mass"] == pytest.approx(
        sum(c["mass"] for c in rec["claims"] if c["text"] in rec["stated_claims"]), abs=1e-5
    )
    assert 0 <= rec["calibrated_confidence"] <= 1 and "confidence" in rec
    # the evidence was scaled before fusion: recompute from the raw per-chunk evidence by hand and compare
    ids = [c["id"] for c in rec["claims"]]
    raw = torch.tensor(
        [[ch["evidence"].get(i, 0.0) for i in ids] for ch in rec["chunks"]], dtype=torch.float64
    )
    res = fuse(opinions_from_evidence(cal.apply_to_evidence(raw)), lam=p["lam"])
    assert rec["uncertainty"] == pytest.approx(res.uncertainty.item(), abs=1e-4)


def test_batch_applies_the_calibration(fitted, tmp_path):
    out, _, _ = fitted
    answers = tmp_path / "answers.jsonl"
    r = runner.invoke(
        app,
        [
            "batch",
            "--questions",
            str(REPO / "inference" / "data" / "ramdocs_sample.jsonl"),
            "--chunks-field",
            "documents",
            "--limit",
            "2",
            "--out",
            str(answers),
            "--set",
            f"evaluator.checkpoint={CHECKPOINT}",
            "--set",
            "generator.name=template",
            "--calibration",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in answers.read_text().splitlines()]
    assert len(recs) == 2 and all(
        "calibrated_confidence" in x and x["calibration"]["file"] == str(out) for x in recs
    )


def test_inference_refuses_a_calibration_of_another_evaluator_or_checkpoint(fitted, tmp_path):
    out, d, _ = fitted
    ask = ["ask", QUESTION, "--chunks", str(CHUNKS), "--set", "generator.name=template", "--calibration"]

    def refused(path, *extra):
        r = runner.invoke(app, [*ask, str(path), *extra])
        assert r.exit_code == 2, r.output
        return r.stderr.replace("\n", "")

    # another evaluator: refused before any model loads
    msg = refused(out, "--evaluator", "prompt")
    assert f"was fitted for the learned evaluator with checkpoint {d['evaluator']['checkpoint']}" in msg
    assert (
        "this run uses the prompt evaluator" in msg and "evidential-rag calibrate --evaluator prompt" in msg
    )
    # another checkpoint: same files but a changed config → another fingerprint
    other = tmp_path / "other-ckpt"
    shutil.copytree(resolve_checkpoint(CHECKPOINT), other)
    cfg = json.loads((other / "learned_config.json").read_text())
    (other / "learned_config.json").write_text(json.dumps({**cfg, "head_dropout": 0.2}))
    msg = refused(out, "--set", f"evaluator.checkpoint={other}")
    assert "was fitted for the learned evaluator with checkpoint" in msg
    assert f"this run uses the learned evaluator with checkpoint {other}" in msg
    assert f"--set evaluator.checkpoint={other}" in msg  # how to refit
    # another fusion rule
    msg = refused(out, "--set", f"evaluator.checkpoint={CHECKPOINT}", "--set", "fusion.rule=yager")
    assert "fitted for fusion.rule=lambda" in msg
    # corrupted, unknown version, missing
    bad = tmp_path / "bad.json"
    bad.write_text(out.read_text()[:200])
    assert "corrupted calibration file" in refused(bad)
    bad.write_text(json.dumps({**d, "version": 99}))
    assert "version 99 is not supported" in refused(bad)
    assert "not found" in refused(tmp_path / "missing.json")


def test_a_copied_checkpoint_keeps_its_calibration(fitted, tmp_path):
    out, d, _ = fitted
    copy = tmp_path / "copy"
    shutil.copytree(resolve_checkpoint(CHECKPOINT), copy)
    cfg = load_config(None, [f"evaluator.checkpoint={copy}"])
    cal = load_calibration(out, cfg)
    assert cal.fingerprint == evaluator_identity(cfg)["fingerprint"] == d["evaluator"]["fingerprint"]


def test_calibrate_refuses_another_split_than_the_checkpoints(shared_data, tmp_path):
    r = runner.invoke(
        app, _calibrate_args(shared_data, tmp_path / "x.json") + ["--validation-fraction", "0.3"]
    )
    assert r.exit_code == 2 and "trained with validation_fraction=0.2" in r.stderr.replace("\n", "")
    r = runner.invoke(app, _calibrate_args(shared_data, tmp_path / "x.txt"))
    assert r.exit_code == 2 and "must end in .json" in r.stderr


def test_data_specs(shared_data):
    path = shared_data / "ramdocs" / "RAMDocs_test.jsonl"
    (src,), split = parse_data_spec(f"ramdocs:{path}")
    assert (src.name, src.path, split) == ("ramdocs", str(path), {})
    (src,), _ = parse_data_spec("{name: musique, path: m.jsonl, limit: 3, options: {max_negatives: 1}}")
    assert (src.name, src.limit, src.options) == ("musique", 3, {"max_negatives": 1})
    (src,), _ = parse_data_spec("rows.jsonl")
    assert src.name == "annotated"
    srcs, split = parse_data_spec("learned-minilm")
    assert [s.name for s in srcs] == ["ramdocs", "wikicontradict", "conflictqa", "musique"]
    assert split["validation_fraction"] == 0.2 and split["max_claims_per_query"] == 5


class _StubPrompt:
    """A prompt-evaluator stand-in (no LLM): supports the first candidate with evidence 3 in even chunks and
    adds an unaligned claim of its own, as a prompt evaluator's free answers do."""

    name = "prompt"

    def __init__(self):
        self.passes = 0

    def evaluate_batch(self, queries, chunks, candidates):
        self.passes += 1
        out = []
        for q, cs, cand in zip(queries, chunks, candidates):
            frame = [FrameClaim(f"a{j + 1}", t) for j, t in enumerate([*cand, "something else"])]
            ev = torch.zeros(len(cs), len(frame), dtype=torch.float64)
            for i in range(len(cs)):
                ev[i, 0 if i % 2 == 0 else -1] = 3.0
            out.append(
                EvaluationResult(
                    q, list(cs), [ChunkEvidence(c.id) for c in cs], frame, ev, len(cs), 1, {}, {}, "prompt"
                )
            )
        return out


def test_prompt_calibration_with_extra_claims(shared_data, tmp_path):
    cfg = load_config(None, ["evaluator.name=prompt", "generator.name=template"])
    run = calibrate(
        cfg, [_ramdocs(shared_data, 60)], tmp_path / "p.json", evaluator=_StubPrompt(), cv_folds=0
    )
    d = json.loads(run.output.read_text())
    assert d["evaluator"]["name"] == "prompt" and d["evaluator"]["model"] == cfg.evaluator.backend.model
    assert "checkpoint" not in d["evaluator"] and d["evaluator"]["contract"].startswith("evidence-json/")
    assert d["run"]["extra_claims"] == d["data"]["queries"] and "after_cv" not in d["metrics"]
    assert (d["data"]["validation_fraction"], d["data"]["split_settings_from"]) == (0.2, "training defaults")
    assert load_calibration(run.output, cfg).evaluator == "prompt"
    other = load_config(None, ["evaluator.name=prompt", "evaluator.backend.model=HuggingFaceTB/other"])
    with pytest.raises(CalibrationError, match="was fitted for the prompt evaluator with model"):
        load_calibration(run.output, other)


def test_serve_takes_a_calibration():
    r = runner.invoke(app, ["serve", "--help"])
    assert r.exit_code == 0 and "--calibration" in r.stdout


def test_the_shipped_default_is_calibrated_and_no_calibration_turns_it_off():
    shipped = CHECKPOINT / "calibration.json"
    cal = Calibration.from_dict(json.loads(shipped.read_text()))
    base = ["ask", QUESTION, "--chunks", str(CHUNKS), "--set", "generator.name=template", "--json"]
    r = runner.invoke(app, base)
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert Path(rec["calibration"]["file"]).resolve() == shipped.resolve()
    f = rec["fusion"]
    assert (f["lam"], f["tau1"], f["tau2"]) == (cal.lam, cal.tau1, cal.tau2)
    if cal.state_ratio is not None:
        assert f["state_ratio"] == cal.state_ratio
    off = runner.invoke(app, [*base, "--no-calibration"])
    assert off.exit_code == 0, off.output
    raw = json.loads(off.stdout)
    default = load_config("cpu").fusion
    assert "calibration" not in raw and "calibrated_confidence" not in raw
    assert (raw["fusion"]["lam"], raw["fusion"]["state_ratio"]) == (default.lam, default.state_ratio)
    both = runner.invoke(app, [*base, "--no-calibration", "--calibration", str(shipped)])
    assert both.exit_code == 2 and "exclude each other" in both.output


def test_auto_calibration_applies_only_where_it_fits():
    from inference.calibration import resolve_calibration

    cal, path, note = resolve_calibration(load_config("cpu"))
    assert cal is not None and path.name == "calibration.json" and note is None
    cal, path, note = resolve_calibration(load_config("cpu", ["evaluator.name=prompt"]))
    assert (cal, path) == (None, None) and "prompt evaluator" in note
    cal, path, note = resolve_calibration(load_config("cpu", ["fusion.rule=average"]))
    assert (cal, path) == (None, None) and "does not apply" in note and "fusion.rule" in note
    cal, path, note = resolve_calibration(load_config("cpu", ["calibration=null"]))
    assert (cal, path, note) == (None, None, None)


def test_a_calibration_applies_only_to_the_frames_it_was_fitted_on(tmp_path):
    """The learned evaluator's span settings decide its frames: a calibration fitted under other values is
    refused with the value to pass (auto: not applied, with a note); a file recording no value is not
    checked for it; the prompt evaluator is not checked for span settings."""
    from inference.calibration import FRAME_SETTINGS, resolve_calibration

    shipped = json.loads((CHECKPOINT / "calibration.json").read_text())
    cfg = load_config("cpu")
    assert shipped["config"]["evaluator"]["span_null_margin"] == cfg.evaluator.span_null_margin
    for key, other, shown in [
        ("span_null_margin", cfg.evaluator.span_null_margin + 1.5, None),
        ("span_candidates", 3, "3"),
        ("span_repair", False, "false"),
    ]:
        assert key in FRAME_SETTINGS
        d = json.loads(json.dumps(shipped))
        d["config"]["evaluator"][key] = other
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(d))
        shown = shown or str(other)
        with pytest.raises(CalibrationError, match=f"fitted with evaluator.{key}={shown},") as exc:
            load_calibration(path, cfg)
        assert f"--set evaluator.{key}={shown}" in str(exc.value)
        assert load_calibration(path, load_config("cpu", [f"evaluator.{key}={shown}"])).evaluator == "learned"
        d["config"]["evaluator"].pop(key)
        path.write_text(json.dumps(d))
        assert load_calibration(path, cfg).evaluator == "learned"
    cal, path, note = resolve_calibration(load_config("cpu", ["evaluator.span_candidates=2"]))
    assert (cal, path) == (None, None) and "evaluator.span_candidates=1" in note


def test_calibrate_on_extracted_frames(shared_data, tmp_path):
    """`--frames extracted`: the evaluator gets no candidates; the fitted data are its own frames with the
    labels carried over (gold = the frame claims that state a gold answer), recorded in the file; and a
    calibration fitted under one grounding mode is refused under another."""
    out = tmp_path / "ext.json"
    args = _calibrate_args(shared_data, out)
    args[args.index("--data") + 1] = _ramdocs(shared_data, limit=40)
    r = runner.invoke(app, [*args, "--frames", "extracted", "--cv-folds", "0"])
    assert r.exit_code == 0, r.output
    cal = json.loads(out.read_text())
    assert cal["data"]["frames"] == "extracted" and cal["run"]["frames"] == "extracted"
    assert cal["config"]["evaluator"]["grounding"] == "lenient"
    rows = [json.loads(x) for x in out.with_name("ext.evidence.jsonl").read_text().splitlines()]
    assert rows and all(len(e["evidence"]) <= load_config(None).k for e in rows)
    # the cached frames are extracted claims: not the labelled candidate lists
    from training.data.benchmarks import build_dataset

    labelled = {
        tuple(r.candidates)
        for r in build_dataset("ramdocs", shared_data / "ramdocs" / "RAMDocs_test.jsonl", limit=40)
    }
    assert any(tuple(e["claims"]) not in labelled for e in rows)
    cfg = load_config(None, [f"evaluator.checkpoint={CHECKPOINT}", "evaluator.grounding=off"])
    with pytest.raises(CalibrationError, match="fitted with evaluator.grounding=lenient"):
        load_calibration(out, cfg)
    assert (
        load_calibration(out, load_config(None, [f"evaluator.checkpoint={CHECKPOINT}"])).evaluator
        == "learned"
    )


def test_relabel_to_frame_carries_labels_to_the_claims_that_state_them():
    from inference.workflows.calibrate import relabel_to_frame
    from training.trainer.trainer import QueryExample, expected_route

    ex = QueryExample(
        "ramdocs:x",
        "q?",
        ["c1", "c2", "c3"],
        ["AFL", "NBA", "Football"],
        [0, 1, None],
        [0, 2],
        ["correct", "misinfo", "noise"],
        "ramdocs",
    )
    r = relabel_to_frame(ex, ["NBA", "the AFL", "basketball"])
    assert (r.claims, r.labels, r.gold) == (["NBA", "the AFL", "basketball"], [1, 0, None], [1])
    assert expected_route(r) == "direct"  # one supported gold claim next to misinformation
    none = relabel_to_frame(ex, ["basketball"])
    assert (none.labels, none.gold) == (
        [None, None, None],
        [],
    )  # a gold reference, no gold claim in the frame
    assert relabel_to_frame(dataclasses.replace(ex, gold=None), ["NBA"]).gold is None
    # the truth of a side conflict follows the frame as the gold does
    sides = dataclasses.replace(ex, gold=[0, 1], truth=[0], conflict_gold=True)
    r = relabel_to_frame(sides, ["NBA", "the AFL", "basketball"])
    assert (r.gold, r.truth) == ([0, 1], [1]) and r.truth is not sides.truth
    assert relabel_to_frame(ex, ["NBA"]).truth is None


def test_conflicts_without_gold_are_calibrated_with_their_sides_as_gold(shared_data):
    """Real WikiContradict questions: the training rows have no gold (target Θ); for calibration each one
    whose two passages support two claims gets both as gold, as the benchmark judges it, and keeps its
    expected route (conflict)."""
    from inference.workflows.calibrate import conflict_reference, load_validation_examples
    from training.trainer.trainer import expected_route

    path = shared_data / "wikicontradict" / "wikicontradict_qa_refined.jsonl"
    sources, _ = parse_data_spec(f"{{name: wikicontradict, path: {path}, limit: 60}}")
    split = {"validation_fraction": 0.2, "split_seed": 0, "from": "test"}
    on, info_on = load_validation_examples(sources, split, 10, 5)
    off, info_off = load_validation_examples(sources, split, 10, 5, conflict_gold=False)
    assert off and [e.key for e in on] == [e.key for e in off]
    assert all(e.gold is None for e in off) and info_off["queries_with_gold"] == 0
    for a, b in zip(off, on):
        supported = sorted({lab for lab in a.labels if lab is not None})
        assert b.gold == (supported if len(supported) >= 2 else None)
        assert b.conflict_gold == (b.gold is not None) and not a.conflict_gold
        assert expected_route(a) == expected_route(b) == "conflict"
    given = sum(e.gold is not None for e in on)
    assert info_on["conflict_queries_given_gold"] == info_on["queries_with_gold"] == given > 0
    assert info_on["conflict_gold"] is True and info_off["conflict_queries_given_gold"] == 0
    # a query with a gold reference, or with one supported claim, is returned as it is
    ramdocs_like = dataclasses.replace(off[0], gold=[0])
    assert conflict_reference(ramdocs_like) is ramdocs_like
    single = dataclasses.replace(off[0], labels=[0] * len(off[0].labels))
    assert conflict_reference(single) is single


def test_side_conflicts_are_calibrated_as_conflicts(shared_data):
    """Real ConflictQA questions: two passages argue for each answer and the gold is one of them; with
    ``side_conflicts`` both supported answers become the reference and the expected route turns from direct
    to conflict. RAMDocs questions, whose only non-gold claims are planted (``misinfo``) answers, stay as
    they are."""
    from inference.workflows.calibrate import load_validation_examples, side_conflict_reference
    from training.trainer.trainer import expected_route

    cqa = shared_data / "conflictqa" / "conflictQA-strategyQA-gpt4.jsonl"
    ram = shared_data / "ramdocs" / "RAMDocs_test.jsonl"
    sources = [
        *parse_data_spec(f"{{name: conflictqa, path: {cqa}, limit: 60}}")[0],
        *parse_data_spec(f"{{name: ramdocs, path: {ram}, limit: 80}}")[0],
    ]
    split = {"validation_fraction": 0.3, "split_seed": 0, "from": "test"}
    off, info_off = load_validation_examples(sources, split, 10, 5)
    on, info_on = load_validation_examples(sources, split, 10, 5, side_conflicts=True)
    assert [e.key for e in on] == [e.key for e in off]
    assert info_on["side_conflicts"] is True and info_off["side_conflicts"] is False
    sides = 0
    for a, b in zip(off, on):
        supported = sorted({lab for lab in a.labels if lab is not None})
        if a.source == "conflictqa":
            assert len(supported) == 2 and len(a.gold) == 1 and expected_route(a) == "direct"
            assert b.gold == supported and b.conflict_gold and expected_route(b) == "conflict"
            assert b.truth == a.gold and a.truth is None  # the dataset's answer still judges the response
            sides += 1
        else:
            assert b is a or (b.gold, b.conflict_gold) == (a.gold, a.conflict_gold)
            assert set(
                a.doc_types[i] for i, lab in enumerate(a.labels) if lab is not None and lab not in a.gold
            ) <= {"misinfo"}
    assert sides > 0 and any(e.source == "ramdocs" and expected_route(e) == "direct" for e in on)
    assert info_on["conflict_queries_given_gold"] == info_off["conflict_queries_given_gold"] + sides
    # a query without a gold reference is left to conflict_reference
    no_gold = dataclasses.replace(off[0], gold=None)
    assert side_conflict_reference(no_gold) is no_gold
