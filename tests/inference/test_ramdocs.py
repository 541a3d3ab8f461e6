"""Real structure: evidence built from RAMDocs per-document labels gives the routes one expects."""

from statistics import mean

import pytest
import torch

from evidential import fuse, opinions_from_evidence, route
from inference.ramdocs import (
    SAMPLE_PATH,
    DataError,
    label_evidence,
    load_ramdocs,
    normalize_answer,
    record_kind,
)


@pytest.fixture(scope="module")
def records(shared_data):
    return load_ramdocs(shared_data / "ramdocs" / "RAMDocs_test.jsonl")


def _fused(le):
    return fuse(opinions_from_evidence(le.evidence))


def test_shared_file_loads_all_records(records):
    assert len(records) == 347
    assert {record_kind(r) for r in records} == {"answerable", "ambiguous", "misinformation", "unanswerable"}


def test_label_evidence_of_a_real_record(records):
    rec = next(r for r in records if r["question"] == "What sport is Bobby Carpenter associated with?")
    le = label_evidence(rec, strength=5.0)
    assert le.claims == ["American football"]
    assert le.doc_types == [d["type"] for d in rec["documents"]]
    assert le.evidence[:, 0].tolist() == [5.0 if t != "noise" else 0.0 for t in le.doc_types]


def test_all_documents_agree_routes_direct(records):
    agree = [
        r
        for r in records
        if record_kind(r) == "answerable" and any(d["type"] == "correct" for d in r["documents"])
    ]
    assert len(agree) >= 20
    for rec in agree:
        le = label_evidence(rec)
        res = _fused(le)
        assert route(res).names == "direct", rec["question"]
        assert float(res.conflict) == pytest.approx(0.0, abs=1e-12)
        assert normalize_answer(le.claims[int(res.selected)]) in {
            normalize_answer(g) for g in rec["gold_answers"]
        }


def test_misinformation_raises_uncertainty_and_conflict(records):
    mis = [
        r
        for r in records
        if record_kind(r) == "misinformation"
        and len(r["gold_answers"]) == 1
        and any(d["type"] == "correct" for d in r["documents"])
    ]
    assert len(mis) >= 20
    agree_u = []
    for rec in mis:
        with_mis = _fused(label_evidence(rec))
        clean = _fused(label_evidence(rec, types=("correct", "noise")))
        agree_u.append(float(clean.uncertainty))
        assert float(with_mis.uncertainty) > float(clean.uncertainty), rec["question"]
        assert float(with_mis.conflict) > float(clean.conflict) + 0.01, rec["question"]
        assert float(with_mis.mean_pairwise_conflict) > 0.0
    # and on average, clearly: misinformation costs certainty
    mis_u = [float(_fused(label_evidence(r)).uncertainty) for r in mis]
    assert mean(mis_u) > mean(agree_u) + 0.1


def test_one_correct_vs_one_misinformation_routes_conflict(records):
    picked = 0
    for rec in records:
        types = [d["type"] for d in rec["documents"]]
        if types.count("correct") == 1 and types.count("misinfo") == 1 and len(rec["gold_answers"]) == 1:
            res = _fused(label_evidence(rec))
            assert route(res).names == "conflict", rec["question"]
            picked += 1
    assert picked >= 1


def test_only_noise_abstains(records):
    noisy = [r for r in records if any(d["type"] == "noise" for d in r["documents"])]
    assert len(noisy) >= 100
    for rec in noisy:
        le = label_evidence(rec, types=("noise",), candidates=rec["gold_answers"] + rec["wrong_answers"])
        assert le.evidence.shape[1] >= 1 and float(le.evidence.abs().sum()) == 0.0
        res = _fused(le)
        assert float(res.uncertainty) == 1.0 and float(res.ignorance) == 1.0
        assert route(res).names == "abstain"
        assert route(res, policy="decomposed").names == "abstain"


def test_batched_over_the_whole_file_matches_per_record(records):
    from evidential import pad_evidence

    built = [label_evidence(r) for r in records]
    ev, cm, km = pad_evidence([b.evidence for b in built], num_claims=[len(b.claims) for b in built])
    batched = fuse(opinions_from_evidence(ev, cm, km))
    for i in range(0, len(built), 17):
        one = _fused(built[i])
        assert torch.allclose(batched.uncertainty[i], one.uncertainty, atol=1e-12)


def test_shipped_sample_is_a_subset_of_the_shared_file(records):
    sample = load_ramdocs(SAMPLE_PATH)
    assert len(sample) == 36
    by_q = {r["question"]: r for r in records}
    assert all(by_q[r["question"]] == r for r in sample)
    assert (SAMPLE_PATH.parent / "LICENSE.RAMDocs").is_file()


def test_bad_files_name_file_line_and_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(
        '{"question": "q", "documents": [], "gold_answers": [], "wrong_answers": []}\n{"question": 3}\n'
    )
    with pytest.raises(DataError, match=r"bad.jsonl:2: .*'documents'|bad.jsonl:2: field 'question'"):
        load_ramdocs(p)
    p.write_text(
        '{"question": "q", "documents": [{"text": "t", "type": "fake", "answer": "a"}], "gold_answers": [], "wrong_answers": []}\n'
    )
    with pytest.raises(DataError, match=r"bad.jsonl:1: documents\[0\].type"):
        load_ramdocs(p)
    p.write_text("{not json\n")
    with pytest.raises(DataError, match="bad.jsonl:1: not valid JSON"):
        load_ramdocs(p)
    with pytest.raises(DataError, match="no such RAMDocs file"):
        load_ramdocs(tmp_path / "missing.jsonl")
