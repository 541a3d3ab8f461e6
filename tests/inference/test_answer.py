"""The stated set of the answer record (``stated_claims``) on hand-built and real RAMDocs evidence."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from evidential import FusionConfig
from inference.answer import AnswerRecord, answer_record, build_answer_record, record_evidence, refuse_record
from inference.evaluators.base import EvaluationResult, FrameClaim
from inference.generation import generation_input_from_record, presented_claims
from inference.ramdocs import label_evidence, load_ramdocs
from inference.types import Chunk, ChunkEvidence, DataError
from training.utils.metrics import stated_claims


def _result(question, evidence, claims, chunk_ids):
    ev = torch.tensor(evidence, dtype=torch.float64)
    chunks = [Chunk(cid, f"text {cid}", rank=i + 1) for i, cid in enumerate(chunk_ids)]
    frame = [FrameClaim(f"a{j + 1}", c, [], [c]) for j, c in enumerate(claims)]
    for i, row in enumerate(ev.tolist()):
        if max(row, default=0.0) > 0:
            frame[max(range(len(row)), key=row.__getitem__)].chunk_ids.append(chunk_ids[i])
    decisions = [ChunkEvidence(c.id, None, None, "supports") for c in chunks]
    counts = {"valid": len(chunks), "repaired": 0, "failed": 0}
    return EvaluationResult(question, chunks, decisions, frame, ev, len(chunks), 1, counts, {}, "test")


def test_stated_claims_by_route():
    b = [0.2, 0.5, 0.3, 0.05]
    texts = ["A", "B", "C", "D"]
    assert stated_claims(texts, b, "direct", 1, 0.5) == ["B", "C"]
    assert stated_claims(texts, b, "direct", 1, 1.0) == ["B"]
    assert stated_claims(texts, b, "conflict", 1, 0.3) == ["B", "C", "A"]
    assert stated_claims(texts, b, "abstain", 1, 0.0) == []
    assert stated_claims([], [], "direct", -1, 0.5) == []


def test_direct_route_states_a_second_well_supported_answer():
    # two entities share the name: one chunk each for Elia Kazan and Franco Giraldi, one noise chunk
    res = _result(
        "Who directed Baby Doll?",
        [[6.0, 0.0], [0.0, 6.0], [0.0, 0.0]],
        ["Elia Kazan", "Franco Giraldi"],
        ["c1", "c2", "c3"],
    )
    wide = FusionConfig(tau1=0.95, tau2=0.99)  # whatever U is, the direct route
    rec = answer_record(res, wide)
    assert rec["route"] == "direct" and rec["answer"] == "Elia Kazan"
    assert rec["stated_claims"] == ["Elia Kazan", "Franco Giraldi"]
    assert "Elia Kazan" in rec["response"] and "Franco Giraldi" in rec["response"]
    assert rec["cited_chunk_ids"] == ["c1", "c2"]
    # the JSON keeps stated_claims right after answer, and the typed record round-trips
    keys = list(rec)
    assert keys[keys.index("answer") + 1] == "stated_claims"
    assert AnswerRecord.from_dict(rec).to_dict() == rec


def test_the_bar_drops_a_minority_claim_relative_to_the_top_mass():
    # 2 chunks for A, 1 for B: the λ-rule leaves B with 0.09375 against A's 0.46875 (ratio 0.2)
    res = _result("Q?", [[6.0, 0.0], [6.0, 0.0], [0.0, 6.0]], ["A", "B"], ["c1", "c2", "c3"])
    masses = [c["mass"] for c in answer_record(res, FusionConfig())["claims"]]
    assert masses == [0.46875, 0.09375]
    for ratio, stated in ((0.5, ["A"]), (0.2, ["A", "B"]), (0.21, ["A"]), (0.0, ["A", "B"])):
        rec = answer_record(res, FusionConfig(tau1=0.95, tau2=0.99, state_ratio=ratio))
        assert rec["stated_claims"] == stated and rec["fusion"]["state_ratio"] == ratio
        assert ("B" in rec["response"].replace("[sources", "")) == ("B" in stated)


def test_a_witness_states_a_valid_answer_its_own_chunk_states_clearly():
    # two documents for A, one for B (another entity of the same name): fusion leaves B far below A's mass
    res = _result("Q?", [[6.0, 0.0], [6.0, 0.0], [0.0, 5.0]], ["A", "B"], ["c1", "c2", "c3"])
    res.decisions = [  # the record keeps each chunk's evidence, so that it can be re-fused
        ChunkEvidence(c.id, None, None, "supports", evidence={f"a{j + 1}": v for j, v in enumerate(row) if v})
        for c, row in zip(res.chunks, res.evidence.tolist())
    ]
    wide = dict(tau1=0.95, tau2=0.99, state_ratio=0.5)
    base = answer_record(res, FusionConfig(**wide))
    assert base["stated_claims"] == ["A"] and base["fusion"]["state_witness_ratio"] is None
    # B's chunk backs it with 5 >= 0.8 x 6, the strongest chunk evidence: stated; at 0.9 (5 < 5.4) it is not
    rec = answer_record(res, FusionConfig(**wide, state_witness_ratio=0.8))
    assert rec["stated_claims"] == ["A", "B"] and rec["answer"] == "A"
    assert rec["fusion"]["state_witness_ratio"] == 0.8 and "B" in rec["response"].replace("[sources", "")
    assert answer_record(res, FusionConfig(**wide, state_witness_ratio=0.9))["stated_claims"] == ["A"]
    # the masses do not change, and re-fusing the record honours the setting either way
    assert [c["mass"] for c in rec["claims"]] == [c["mass"] for c in base["claims"]]
    assert refuse_record(base, FusionConfig(**wide, state_witness_ratio=0.8)).stated_claims == ["A", "B"]
    assert refuse_record(rec, FusionConfig(**wide)).stated_claims == ["A"]


def test_a_witnessed_edited_copy_is_still_not_stated():
    rec = answer_record(
        _bryan_result(), FusionConfig(tau1=0.95, tau2=0.99, state_ratio=1.0, state_witness_ratio=0.0)
    )
    assert rec["stated_claims"] == ["February 8, 1900"] and rec["copy_contested"] == ["July 15, 1905"]


def test_real_records_state_every_valid_answer_and_drop_a_minority_planted_one():
    recs = {r["question"]: r for r in load_ramdocs()}  # the packaged RAMDocs sample (MIT)
    crazy = recs['Who is the artist of the album "Crazy World"?']  # 2 documents vs 1 planted
    le = label_evidence(crazy, 5.0)
    res = _result(
        crazy["question"], le.evidence.tolist(), le.claims, [f"d{i}" for i in range(len(le.supports))]
    )
    rec = answer_record(res, FusionConfig())
    gold = set(crazy["gold_answers"])
    assert set(rec["stated_claims"]) <= gold and rec["stated_claims"]
    assert not set(rec["stated_claims"]) & set(crazy["wrong_answers"])
    inp = generation_input_from_record(rec)
    assert [c["text"] for c in presented_claims(inp)] == rec["stated_claims"]


# ---------------------------------------------------------------------------------------------- refuse
def _result_with_decisions(evidence):
    """An evaluation whose chunk decisions carry the evidence (as evaluators record it)."""
    k, m = len(evidence), len(evidence[0])
    res = _result("q?", evidence, [f"claim {j}" for j in range(m)], [f"d{i}" for i in range(k)])
    res.decisions = [
        ChunkEvidence(
            f"d{i}", None, None, "supports", evidence={f"a{j + 1}": float(v) for j, v in enumerate(row) if v}
        )
        for i, row in enumerate(evidence)
    ]
    return res


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda m: st.lists(
            st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]), min_size=m, max_size=m),
            min_size=1,
            max_size=4,
        )
    ),
    st.floats(0, 1),
    st.floats(0, 1),
    st.sampled_from(["lambda", "yager", "dempster", "average"]),
    st.floats(0, 1),
)
def test_refusing_a_record_equals_answering_with_the_other_settings(evidence, lam0, lam1, rule, tau1):
    """refuse_record(record(res, f0), f1) == record(res, f1) for the fused and routed parts."""
    res = _result_with_decisions(evidence)
    f0 = FusionConfig(lam=lam0)
    f1 = FusionConfig(lam=lam1, rule=rule, tau1=tau1 * 0.99, tau2=max(tau1, 0.995))
    rec = build_answer_record(res, f0)
    out = refuse_record(rec.to_dict(), f1)
    want = build_answer_record(res, f1)
    for key in ("route", "answer", "stated_claims", "cited_chunk_ids", "fusion", "response"):
        assert getattr(out, key) == getattr(want, key), key
    for key in ("uncertainty", "ignorance", "conflict", "confidence"):
        assert getattr(out, key) == pytest.approx(getattr(want, key), abs=1e-6), key
    assert [c.mass for c in out.claims] == pytest.approx([c.mass for c in want.claims], abs=1e-6)
    assert out.step_conflict == pytest.approx(want.step_conflict, abs=1e-6)
    assert [c.to_dict() for c in out.chunks] == [c.to_dict() for c in rec.chunks]


def test_refuse_applies_the_calibration_transform_and_refreshes_its_confidence():
    from training.calibration.format import Calibration

    evidence = [[3.0, 0.0], [0.0, 1.0], [2.0, 0.5]]
    res = _result_with_decisions(evidence)
    cal = Calibration("learned", scale=0.5, power=2.0, isotonic={"x": [0.0, 1.0], "y": [0.0, 0.5]})
    calibrated = EvaluationResult(**{**res.__dict__, "evidence": cal.apply_to_evidence(res.evidence)})
    want = build_answer_record(calibrated, FusionConfig())
    out = refuse_record(build_answer_record(res, FusionConfig()), FusionConfig(), cal)
    assert out.uncertainty == pytest.approx(want.uncertainty, abs=1e-6) and out.route == want.route
    assert out.calibrated_confidence == pytest.approx(0.5 * want.confidence, abs=1e-6)


def test_record_evidence_names_what_is_wrong():
    rec = build_answer_record(_result_with_decisions([[1.0, 0.0]]), FusionConfig()).to_dict()
    assert record_evidence(rec).tolist() == [[1.0, 0.0]]
    cases = [
        ([], "must be a JSON object"),
        ({"question": "q"}, "'claims' and 'chunks' lists"),
        ({**rec, "claims": [{"text": "x"}]}, "claims[0] must be an object with a string 'id'"),
        ({**rec, "chunks": [{"chunk_id": "d0"}]}, "chunks[0] has no 'evidence'"),
        ({**rec, "chunks": [{"chunk_id": "d0", "evidence": {"a9": 1}}]}, "claim 'a9'"),
        ({**rec, "chunks": [{"chunk_id": "d0", "evidence": {"a1": float("nan")}}]}, "finite number >= 0"),
        ({**rec, "chunks": [{"chunk_id": "d0", "evidence": {"a1": True}}]}, "finite number >= 0"),
    ]
    for bad, needle in cases:
        with pytest.raises(DataError, match=re.escape(needle)):
            record_evidence(bad)
    with pytest.raises(DataError, match="incomplete or malformed"):
        refuse_record({"claims": [], "chunks": []}, FusionConfig())
    # found by the server fuzzer: a string where the evaluator's metadata object belongs
    with pytest.raises(DataError, match="incomplete or malformed"):
        refuse_record({**rec, "evaluator_meta": "x" * 50}, FusionConfig())
    with pytest.raises(DataError, match="incomplete or malformed"):
        refuse_record({**rec, "timings": {**rec["timings"], "align": None}}, FusionConfig())


# ------------------------------------------------------------------------------------------ edited copies
_BRYAN = (
    "Lieutenant General Blackshear Morrison Bryan ({}) was a United States Army general who served during the "
    "Second World War and Korean War. Bryan was born in Alexandria, Louisiana on {}."
)


def _bryan_result():
    """Two independent-looking documents for the real birth date, one edited copy with a planted date."""
    res = _result(
        "When was General Bryan born?",
        [[6.0, 0.0], [0.0, 5.0], [4.0, 0.0]],
        ["February 8, 1900", "July 15, 1905"],
        ["c1", "c2", "c3"],
    )
    res.chunks[0].text = _BRYAN.format("February 8, 1900 – March 2, 1977", "February 8, 1900")
    res.chunks[1].text = _BRYAN.format("July 15, 1905 – March 2, 1977", "July 15, 1905")
    res.chunks[
        2
    ].text = "Bryan graduated from West Point in 1922; he was born on February 8, 1900 in Louisiana."
    return res


def test_a_claim_only_an_edited_copy_backs_is_not_stated():
    wide = dict(tau1=0.95, tau2=0.99, state_ratio=0.0)
    rec = answer_record(_bryan_result(), FusionConfig(**wide))
    assert rec["stated_claims"] == ["February 8, 1900"] and rec["copy_contested"] == ["July 15, 1905"]
    assert [c["copies"] for c in rec["chunks"]] == [["c2"], ["c1"], []]
    assert "1905" not in rec["response"] and rec["fusion"]["copy_overlap"] == 0.8
    # off: the planted date clears the bar of 0 and is stated
    off = answer_record(_bryan_result(), FusionConfig(**wide, copy_overlap=None))
    assert off["stated_claims"] == ["February 8, 1900", "July 15, 1905"] and off["copy_contested"] == []
    assert all(c["copies"] == [] for c in off["chunks"])
    # the fused masses do not change: the rule only decides what is stated
    assert [c["mass"] for c in rec["claims"]] == [c["mass"] for c in off["claims"]]


def test_refusing_keeps_the_recorded_copies():
    res = _bryan_result()
    res.decisions = [
        ChunkEvidence(
            c.id, None, None, "supports", evidence={f"a{j + 1}": float(v) for j, v in enumerate(row) if v}
        )
        for c, row in zip(res.chunks, res.evidence.tolist())
    ]
    rec = answer_record(res, FusionConfig(tau1=0.95, tau2=0.99, state_ratio=0.0))
    again = refuse_record(rec, FusionConfig(tau1=0.95, tau2=0.99, state_ratio=0.0)).to_dict()
    assert again["stated_claims"] == rec["stated_claims"] and again["copy_contested"] == ["July 15, 1905"]
    off = refuse_record(rec, FusionConfig(tau1=0.95, tau2=0.99, state_ratio=0.0, copy_overlap=None)).to_dict()
    assert off["stated_claims"] == ["February 8, 1900", "July 15, 1905"]
    # a record from before the field (no copies) re-fuses as it was answered
    old = {**rec, "chunks": [{k: v for k, v in c.items() if k != "copies"} for c in rec["chunks"]]}
    assert (
        refuse_record(old, FusionConfig(tau1=0.95, tau2=0.99, state_ratio=0.0)).to_dict()["copy_contested"]
        == []
    )


def test_the_shipped_default_drops_a_real_planted_copy_and_keeps_both_valid_answers():
    """The packaged RAMDocs sample's Larkin Covered Bridge: two bridges of that name (Pennsylvania and
    Vermont) and a planted document that copies the Pennsylvania one with "Springfield, Massachusetts". The
    shipped learned checkpoint and calibration, end to end up to the answer record."""
    from dataclasses import replace
    from pathlib import Path

    from inference.evaluators import build_evaluator
    from inference.evaluators.config import EvaluatorConfig
    from training.calibration import read_calibration

    root = Path(__file__).resolve().parents[2]
    record = next(r for r in load_ramdocs() if r["question"].startswith("Where is the Larkin Covered Bridge"))
    chunks = [Chunk(f"d{i}", d["text"], rank=i + 1) for i, d in enumerate(record["documents"])]
    cal = read_calibration(root / "checkpoints" / "learned-minilm" / "calibration.json")
    res = build_evaluator(EvaluatorConfig(name="learned")).evaluate_batch([record["question"]], [chunks])[0]
    res = replace(res, evidence=cal.apply_to_evidence(res.evidence))
    rec = answer_record(res, FusionConfig(**cal.fusion_overrides()))
    assert rec["copy_contested"] == ["Springfield, Massachusetts"]
    assert [c["copies"] for c in rec["chunks"]][:2] == [["d1"], ["d0"]]
    said = " ".join(rec["stated_claims"])
    assert "Pennsylvania" in said and "Vermont" in said and "Springfield" not in said
    # the planted copy holds mass of its own (it clears the stated-set bar), but only an edited copy backs
    # it: it is neither stated nor the committed answer, which is a valid one
    masses = {c["text"]: c["mass"] for c in rec["claims"]}
    assert masses["Springfield, Massachusetts"] >= cal.state_ratio * max(masses.values())
    assert rec["answer"] in ("Pennsylvania", "Vermont") and rec["stated_claims"][0] == rec["answer"]
    # without the rule the planted copy is stated beside the two valid answers
    off = answer_record(res, FusionConfig(**{**cal.fusion_overrides(), "copy_overlap": None}))
    assert set(off["stated_claims"]) == {"Pennsylvania", "Vermont", "Springfield, Massachusetts"}
