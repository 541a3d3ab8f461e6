"""Distillation on the training side: ``teacher_evidence`` in the annotated-chunk format, unannotated
chunks, the ``distill_*`` loss config, and the trainer's handling of rows without a human label."""

from __future__ import annotations

import json

import pytest
import torch

from evidential.errors import ConfigError
from training.data.annotated import (
    AnnotatedChunk,
    TrainingDataError,
    group_by_query,
    load_annotated,
    write_annotated,
)
from training.data.benchmarks import build_chunks
from training.trainer.config import LossConfig
from training.trainer.trainer import QueryExample, prepare_examples, score_outcomes


def _write(tmp_path, rows, name="a.jsonl"):
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return p


BASE = {"query": "q1", "chunk": "Paris is big.", "candidates": ["Paris", "Lyon"]}


def test_teacher_evidence_loads_with_and_without_a_label(tmp_path):
    rows = [
        {**BASE, "label": 0, "teacher_evidence": [7, 0.5]},  # a human label and a teacher target
        {**BASE, "chunk": "Lyon.", "teacher_evidence": [0, 3.0]},  # teacher only: no human label
        {**BASE, "chunk": "Noise.", "label": None, "teacher_evidence": [0, 0]},  # human: supports nothing
    ]
    got = load_annotated(_write(tmp_path, rows))
    assert [r.teacher_evidence for r in got] == [[7.0, 0.5], [0.0, 3.0], [0.0, 0.0]]
    assert [r.labelled for r in got] == [True, False, True]
    assert [r.label for r in got] == [0, None, None]
    # round trip: an unlabelled row is written without 'label', a labelled null keeps it
    back = write_annotated(tmp_path / "b.jsonl", got).read_text().splitlines()
    assert "label" not in json.loads(back[1]) and json.loads(back[2])["label"] is None
    assert [(r.labelled, r.teacher_evidence) for r in load_annotated(tmp_path / "b.jsonl")] == [
        (r.labelled, r.teacher_evidence) for r in got
    ]
    # rows without teacher_evidence are unchanged by the new field
    assert "teacher_evidence" not in AnnotatedChunk(**BASE, label=0).to_dict()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"teacher_evidence": [1.0]},
            "field 'teacher_evidence' must be a list of 2 numbers, one per candidate",
        ),
        ({"teacher_evidence": "1,2"}, "field 'teacher_evidence' must be a list of 2 numbers"),
        (
            {"teacher_evidence": [1.0, -0.5]},
            "field 'teacher_evidence'[1] must be a finite number >= 0; got -0.5",
        ),
        (
            {"teacher_evidence": [True, 0]},
            "field 'teacher_evidence'[0] must be a finite number >= 0; got True",
        ),
        ({"teacher_evidence": ["3", 0]}, "field 'teacher_evidence'[0] must be a finite number >= 0"),
        (
            {},
            "missing field 'label' (candidate index, or null for no support; only rows with 'teacher_evidence'",
        ),
        ({"labelled": False, "teacher_evidence": [0, 0]}, "unknown field 'labelled'"),
    ],
)
def test_teacher_evidence_errors_name_file_line_field(tmp_path, extra, message):
    path = _write(tmp_path, [{**BASE, "label": 0}, {**BASE, **extra}])
    with pytest.raises(TrainingDataError) as exc:
        load_annotated(path)
    assert f"{path}:2: " in str(exc.value) and message in str(exc.value)


def test_nan_teacher_evidence_is_refused(tmp_path):
    # NaN is not JSON: the reader refuses the line itself
    path = _write(tmp_path, ['{"query": "q", "chunk": "c", "candidates": ["a"], "teacher_evidence": [NaN]}'])
    with pytest.raises(TrainingDataError, match=r":1: not valid JSON \(NaN is not a JSON number\)"):
        load_annotated(path)
    # so is a number too large for a float
    path = _write(
        tmp_path, ['{"query": "q", "chunk": "c", "candidates": ["a"], "teacher_evidence": [1e999]}']
    )
    with pytest.raises(TrainingDataError, match=r":1: not valid JSON \(1e999 is too large for a number\)"):
        load_annotated(path)


def test_unannotated_chunks_builder(tmp_path):
    path = _write(
        tmp_path,
        [
            {"query": "Who?", "chunks": ["A wrote it.", {"text": "B wrote it.", "id": "x"}]},
            {"query": "When?", "chunk": "In 1990."},
            {"query": "When?", "chunk": "In 1991."},
            {"query": "Where?", "chunk": "Here.", "candidates": ["here", "there"]},
        ],
    )
    rows = build_chunks(path)
    assert [(r.query, r.chunk) for r in rows][:3] == [
        ("Who?", "A wrote it."),
        ("Who?", "B wrote it."),
        ("When?", "In 1990."),
    ]
    assert not any(r.labelled for r in rows) and rows[-1].candidates == ["here", "there"]
    assert [g.query for g in group_by_query(rows)] == ["Who?", "When?", "Where?"]
    assert len(build_chunks(path, limit=2)) == 4  # limit counts queries
    for bad, message in [
        ({"query": "q"}, "give exactly one of 'chunk' (a string) and 'chunks' (a list)"),
        ({"query": "q", "chunks": ["a", 3]}, "field 'chunks[1]' must be a non-empty string"),
        ({"query": "", "chunk": "a"}, "field 'query' must be a non-empty string"),
        ({"query": "q", "chunk": "a", "candidates": ["x", "x"]}, "field 'candidates' has a repeated claim"),
    ]:
        p = _write(tmp_path, [{"query": "ok", "chunk": "fine"}, bad], "bad.jsonl")
        with pytest.raises(TrainingDataError) as exc:
            build_chunks(p)
        assert f"{p}:2: {message}" in str(exc.value)


def test_loss_config_distillation_fields():
    cfg = LossConfig(edl_weight=0, query_weight=0, distill_weight=1.0, distill_kind="kl")
    assert cfg.distill_weight == 1.0
    assert LossConfig().distill_weight == 0  # existing training is unchanged
    with pytest.raises(ConfigError, match="loss.distill_kind must be log_mse or kl"):
        LossConfig(distill_kind="huber")
    with pytest.raises(ConfigError, match="loss.distill_weight must be a number >= 0"):
        LossConfig(distill_weight=-1)
    with pytest.raises(ConfigError, match="are all 0: nothing would train"):
        LossConfig(edl_weight=0, query_weight=0)


def test_prepare_examples_keeps_teacher_supported_claims_and_remaps_targets():
    cands = ["a", "b", "c", "d"]
    rows = [
        AnnotatedChunk("q", "c1", cands, None, teacher_evidence=[0, 0, 0, 9.0], labelled=False),
        AnnotatedChunk("q", "c2", cands, None, teacher_evidence=[0, 2.0, 0, 0], labelled=False),
    ]
    (ex,) = prepare_examples(group_by_query(rows), max_chunks=4, max_claims=2)
    assert ex.claims == ["b", "d"] and ex.teacher == [[0, 9.0], [2.0, 0]]
    assert ex.labelled == [False, False] and not ex.is_labelled(0)
    assert ex.span_claim(0) == ("d", True) and ex.span_claim(1) == ("b", True)
    # labelled rows: no teacher / labelled fields, as before
    (plain,) = prepare_examples(group_by_query([AnnotatedChunk("q", "c", ["a"], 0)]), 4, 4)
    assert plain.teacher is None and plain.labelled is None and plain.fully_labelled


def test_trainer_losses_skip_label_terms_for_unlabelled_rows(tiny_encoder):
    from training.learned.model import EvidentialEvaluatorModel
    from training.trainer.config import TrainConfig
    from training.trainer.trainer import EvidentialTrainer
    from training.utils.configio import build_dataclass

    cfg = build_dataclass(
        TrainConfig,
        {
            "model": {"encoder": str(tiny_encoder), "max_length": 48, "head_hidden": 8, "lora_r": 2},
            "data": [{"name": "annotated", "path": "unused.jsonl"}],
            "loss": {"distill_weight": 1.0},
            "device": "cpu",
        },
    )
    torch.manual_seed(0)
    model = EvidentialEvaluatorModel(cfg.model)
    trainer = EvidentialTrainer(cfg, "unused", progress=False)
    teacher_only = QueryExample(
        "t", "Who?", ["A did it.", "Noise."], ["A", "B"], [None, None], None, [None, None], None,
        teacher=[[5.0, 0.0], [0.0, 0.0]], labelled=[False, False],
    )  # fmt: skip
    terms = trainer.losses(model, [teacher_only], epoch_progress=0.0)
    assert set(terms) == {"distill", "span", "total", "_evidence"}  # no EDL, no query loss
    terms["total"].backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    labelled = QueryExample("l", "Who?", ["A did it."], ["A", "B"], [0], [0], [None], None)
    both = trainer.losses(model, [teacher_only, labelled], epoch_progress=0.0)
    assert {"edl", "query", "distill"} <= set(both)
    # metrics: claim and route accuracy only over labelled chunks / queries
    ev = torch.tensor([[4.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    m = score_outcomes([(teacher_only, ev)])
    assert "claim_accuracy" not in m and "route_accuracy" not in m and m["queries"] == 1
    m2 = score_outcomes([(teacher_only, ev), (labelled, ev[:1])])
    assert m2["claim_accuracy"] == 1.0 and m2["route_accuracy"] in (0.0, 1.0)
