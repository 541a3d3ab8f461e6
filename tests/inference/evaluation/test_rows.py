"""Reading an evaluation folder's rows and scoring one answer (real RAMDocs instances)."""

from __future__ import annotations

import json

import pytest

from inference.evaluation.datasets import load_eval_dataset
from inference.evaluation.rows import instance_scores, load_instances, load_rows
from inference.types import DataError


@pytest.fixture(scope="module")
def ramdocs_path(shared_data):
    return shared_data / "ramdocs" / "RAMDocs_test.jsonl"


def test_instance_scores_hand_checked(ramdocs_path):
    inst = next(i for i in load_eval_dataset("ramdocs", ramdocs_path) if i.wrong_answers)
    gold, wrong = inst.gold_answers[0], inst.wrong_answers[0]
    s = instance_scores(inst, {"response": gold}, 0.9)
    assert s["em"] == 1.0 and s["f1"] == 1.0 and s["accuracy"] == 1.0 and s["rouge_l"] == 1.0
    assert s["refused"] is False and s["confidence"] == 0.9
    assert s["strict_em"] == float(len(set(inst.gold_answers)) == 1)
    # a response without stated_claims commits to its extracted short answer (the gold here)
    assert s["committed_answers"] == [gold] and s["short_em"] == 1.0 and s["short_f1"] == 1.0
    bad = instance_scores(inst, {"response": f"{gold} or {wrong}"}, None)
    assert bad["strict_em"] == 0.0 and wrong in bad["stated_answers"]
    refusal = instance_scores(inst, {"response": "I don't know."}, None)
    assert refusal["refused"] is True and refusal["accuracy"] == 0.0
    assert refusal["committed_answers"] == [] and refusal["short_em"] == 0.0


def test_short_answer_scores_use_the_stated_set_on_real_ramdocs_records(ramdocs_path):
    inst = next(
        i for i in load_eval_dataset("ramdocs", ramdocs_path) if len(i.gold_answers) >= 2 and i.wrong_answers
    )
    golds, wrong = list(inst.gold_answers), inst.wrong_answers[0]
    sentence = "The sources support several answers: " + "; ".join(golds) + "."
    every = instance_scores(inst, {"response": sentence, "stated_claims": golds}, None)
    assert every["committed_answers"] == golds
    assert every["short_em"] == 1.0 and every["short_strict_em"] == 1.0
    one = instance_scores(inst, {"response": golds[0], "stated_claims": golds[:1]}, None)
    assert one["short_em"] == 1.0 and one["short_strict_em"] == 0.0  # a valid answer is missing
    planted = instance_scores(inst, {"response": "x", "stated_claims": [*golds, wrong]}, None)
    assert planted["short_em"] == 1.0 and planted["short_strict_em"] == 0.0  # a planted answer is stated
    nothing = instance_scores(inst, {"response": "I cannot answer.", "stated_claims": []}, None)
    assert nothing["short_em"] == 0.0 and nothing["short_f1"] == 0.0 and nothing["short_strict_em"] == 0.0


def test_load_rows_drops_a_torn_last_line_and_rewrites_the_file(tmp_path):
    path = tmp_path / "naive.jsonl"
    assert load_rows(path) == []  # no file yet: nothing done
    rows = [{"seed": 42, "id": "a"}, {"seed": 42, "id": "b"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"seed": 42, "id"')
    assert load_rows(path) == rows
    assert path.read_text().splitlines() == [json.dumps(r, ensure_ascii=False) for r in rows]
    assert load_rows(path) == rows


def test_load_rows_names_a_malformed_inner_line(tmp_path):
    path = tmp_path / "naive.jsonl"
    path.write_text('{"seed": 1}\nnot json\n{"seed": 2}\n')
    with pytest.raises(DataError, match=r"naive\.jsonl:2: not a JSON row"):
        load_rows(path)


def test_load_instances_keys_the_rows_by_instance_id(tmp_path):
    rows = [
        {"instance": {"id": "ramdocs:1"}, "chunks": [{"id": "d0"}], "labels": [{}]},
        {"instance": {"id": "ramdocs:2"}, "chunks": [], "labels": []},
    ]
    path = tmp_path / "instances.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    got = load_instances(path)
    assert list(got) == ["ramdocs:1", "ramdocs:2"]
    assert got["ramdocs:1"] == rows[0]
