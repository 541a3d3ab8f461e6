"""``evidential-rag distill``: the resumable teacher cache, soft targets, agreement and the CLI end to end
on real RAMDocs records (real packaged SmolLM2 teacher on llama.cpp; tiny student)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evidential.errors import ConfigError
from inference.alignment import ClaimAligner
from inference.cli import app
from inference.evaluators import build_evaluator
from inference.evaluators.config import EvaluatorConfig
from inference.workflows.distill import (
    DistillConfig,
    DistillError,
    TeacherCache,
    TeacherConfig,
    agreement,
    load_distill_config,
    map_to_candidates,
    run_teacher,
    spearman,
    teacher_queries,
)
from inference.workflows.sources import data_source
from training.data.annotated import load_annotated
from training.data.benchmarks import build_ramdocs
from training.trainer.config import TrainConfig
from training.utils.configio import build_dataclass

runner = CliRunner()


@pytest.fixture(scope="module")
def ramdocs(shared_data) -> Path:
    return shared_data / "ramdocs" / "RAMDocs_test.jsonl"


@pytest.fixture(scope="module")
def learned_teacher():
    """A real evaluator: the shipped learned checkpoint (fast on CPU)."""
    return build_evaluator(EvaluatorConfig(name="learned"))


class Counting:
    """Wraps an evaluator and records every call and every query it is asked about."""

    name = "counting"

    def __init__(self, inner):
        self.inner, self.calls, self.queries = inner, 0, []

    def evaluate_batch(self, queries, chunks, candidates=None):
        self.calls += 1
        self.queries.extend(queries)
        return self.inner.evaluate_batch(queries, chunks, candidates)


def _queries(ramdocs: Path, n: int, max_chunks: int = 3):
    cfg = build_dataclass(
        TrainConfig, {"data": [{"name": "ramdocs", "path": str(ramdocs)}], "max_chunks_per_query": max_chunks}
    )
    return teacher_queries(build_ramdocs(ramdocs, limit=n), cfg)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_teacher_cache_resumes_after_a_torn_write(ramdocs, learned_teacher, tmp_path):
    queries = _queries(ramdocs, 5)
    assert len(queries) == 5 and all(len(q.chunks) == 3 for q in queries)
    meta = {"teacher": {"name": "learned"}}
    # the uninterrupted run, 2 queries per teacher call
    full = Counting(learned_teacher)
    ref, stats = run_teacher(full, queries, TeacherCache(tmp_path / "full" / "teacher.jsonl", meta), 2, False)
    assert full.calls == 3 and stats["computed_queries"] == 5 and stats["cached_queries"] == 0
    lines = (tmp_path / "full" / "teacher.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 15
    # a run killed while writing query 3: queries 1-2 complete, query 3 has one whole row and a torn one
    part = tmp_path / "part"
    part.mkdir()
    (part / "teacher_meta.json").write_text((tmp_path / "full" / "teacher_meta.json").read_text())
    torn = lines[7][: len(lines[7]) // 2]
    (part / "teacher.jsonl").write_text("".join(lines[:7]) + torn, encoding="utf-8")
    again = Counting(learned_teacher)
    cache = TeacherCache(part / "teacher.jsonl", meta)
    got, stats = run_teacher(again, queries, cache, 2, False)
    # the teacher is asked only for the missing queries (3 incomplete, 4, 5), in batches of 2
    assert again.queries == [q.query for q in queries[2:]] and again.calls == 2
    assert stats["cached_queries"] == 2 and stats["computed_queries"] == 3
    assert stats["dropped_rows"] == 1 and stats["torn_bytes"] == len(torn.encode())
    rows = _rows(part / "teacher.jsonl")
    keys = Counter((r["key"], r["chunk_index"]) for r in rows)
    assert len(rows) == 15 and max(keys.values()) == 1  # no duplicate, nothing missing
    for q in queries:
        a, b = got[q.cache_key], ref[q.cache_key]
        assert [r["chunk_index"] for r in a] == [0, 1, 2] and [r["frame"] for r in a] == [
            r["frame"] for r in b
        ]
        for x, y in zip(a, b):
            assert x["evidence"] == pytest.approx(y["evidence"], abs=1e-4)
            assert {"query", "chunk", "claim", "answer", "stance", "valid", "repaired"} <= set(x)
    # a third run computes nothing
    third = Counting(learned_teacher)
    _, stats = run_teacher(third, queries, TeacherCache(part / "teacher.jsonl", meta), 2, False)
    assert third.calls == 0 and stats["cached_queries"] == 5 and len(_rows(part / "teacher.jsonl")) == 15


def test_teacher_cache_refuses_another_teacher_and_damage(tmp_path):
    path = tmp_path / "teacher.jsonl"
    cache = TeacherCache(path, {"teacher": {"name": "prompt", "backend": {"name": "llamacpp"}}})
    assert cache.load() == {}
    row = {"key": "k", "chunk_index": 0, "n_chunks": 1, "frame": [], "evidence": []}
    cache.append([row])
    with pytest.raises(DistillError, match="holds the outputs of another teacher .*teacher differ"):
        TeacherCache(path, {"teacher": {"name": "prompt", "backend": {"name": "transformers"}}}).load()
    path.write_text("{broken\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DistillError, match=r"teacher.jsonl:1: not a teacher-cache row"):
        cache.load()
    orphan = tmp_path / "o" / "teacher.jsonl"
    orphan.parent.mkdir()
    orphan.write_text(json.dumps(row) + "\n")
    with pytest.raises(DistillError, match="without teacher_meta.json"):
        TeacherCache(orphan, {}).load()


def test_map_teacher_frame_onto_candidates():
    al = ClaimAligner()
    ev, off = map_to_candidates(
        ["United States", "August 1, 1983", "Lyon"], [3.0, 0.0, 2.0], ["USA", "1 Aug 1983", "Paris"], al
    )
    assert ev == [3.0, 0.0, 0.0] and off  # alias merged; Lyon is outside the candidates
    ev, off = map_to_candidates(["1 Aug 1983"], [5.0], ["USA", "August 1, 1983"], al)
    assert ev == [0.0, 5.0] and not off
    assert map_to_candidates(["x"], [0.0], ["y"], al) == ([0.0], False)


def test_spearman_and_agreement_hand_computed():
    from scipy.stats import spearmanr

    x, y = [0, 0, 3, 1, 5, 2], [0.1, 0.0, 2.0, 2.0, 4.0, 0.3]
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
    assert spearman([1, 1], [0, 2]) is None
    teacher = [[[5.0, 0.0], [0.0, 0.0], [0.0, 3.0]]]
    student = [[[2.0, 0.5], [0.2, 0.1], [1.5, 1.2]]]
    a = agreement(teacher, student, threshold=1.0, labels=[[0, None, 1]], labelled=[[True, True, False]])
    # decisions: teacher (0, none, 1), student (0, none, 0)
    assert a["decision_agreement"] == pytest.approx(2 / 3) and a["support_agreement"] == 1.0
    assert a["top_claim_agreement"] == 0.5 and a["both_support_chunks"] == 2
    assert a["argmax_agreement"] == 0.5 and a["argmax_chunks"] == 2  # claim 0 ✓, claim 1 ✗ (1.5 > 1.2)
    assert a["teacher_claim_accuracy"] == 1.0 and a["student_claim_accuracy"] == 1.0
    assert a["labelled_chunks"] == 2 and a["evidence_pairs"] == 6
    flat_t = [5.0, 0.0, 0.0, 0.0, 0.0, 3.0]
    flat_s = [2.0, 0.5, 0.2, 0.1, 1.5, 1.2]
    assert a["spearman"] == pytest.approx(spearmanr(flat_t, flat_s).statistic)


def test_data_flag_recognises_formats(ramdocs, tmp_path):
    ann = tmp_path / "a.jsonl"
    ann.write_text(json.dumps({"query": "q", "chunk": "c", "candidates": ["a"], "label": 0}) + "\n")
    chunks = tmp_path / "c.jsonl"
    chunks.write_text(json.dumps({"query": "q", "chunks": ["c"]}) + "\n")
    assert data_source(str(ann))["name"] == "annotated"
    assert data_source(str(chunks), 3) == {"name": "chunks", "path": str(chunks), "limit": 3}
    assert data_source(str(ramdocs))["name"] == "ramdocs"
    assert data_source(f"musique:{ramdocs}")["name"] == "musique"
    other = tmp_path / "x.jsonl"
    other.write_text('{"foo": 1}\n')
    with pytest.raises(ValueError, match="unrecognised records"):
        data_source(str(other))
    with pytest.raises(ValueError, match="no such file"):
        data_source(str(tmp_path / "missing.jsonl"))


def test_distill_config_loads_named_with_overrides():
    cfg = load_distill_config("distill-minilm", ["teacher.batch_queries=2", "epochs=1"])
    assert cfg.teacher.evaluator.name == "prompt" and cfg.teacher.batch_queries == 2
    assert cfg.train.epochs == 1 and cfg.train.loss.distill_weight > 0 and cfg.train.loss.edl_weight == 0
    with pytest.raises(ValueError, match="teacher.batch_queries must be an integer >= 1"):
        load_distill_config("distill-minilm", ["teacher.batch_queries=0"])
    with pytest.raises(ValueError, match="unknown config field 'teacher.nope'"):
        load_distill_config("distill-minilm", ["teacher.nope=1"])


def test_distill_config_bad_fields_name_them():
    cfg = load_distill_config("distill-minilm")
    for kwargs, message in [
        ({"timing_queries": -1}, "teacher.timing_queries must be an integer >= 0; got -1"),
        ({"batch_queries": 2.0}, "teacher.batch_queries must be an integer >= 1; got 2.0"),
        ({"use_labels": 1}, "teacher.use_labels must be true or false; got 1"),
    ]:
        with pytest.raises(ConfigError) as info:
            TeacherConfig(**kwargs)
        assert str(info.value) == message
    with pytest.raises(ConfigError) as info:
        DistillConfig(train={})
    assert str(info.value) == "train must be a training config (the fields model, data, loss, ...); got {}"
    with pytest.raises(ConfigError) as info:
        DistillConfig(train=cfg.train, teacher={})
    assert str(info.value) == "teacher must be a teacher section; got {}"
    assert DistillConfig(train=cfg.train).teacher == TeacherConfig()


def _student(tiny_encoder) -> list[str]:
    return [
        f"--set=model.encoder={tiny_encoder}",
        "--set=model.max_length=64",
        "--set=model.head_hidden=16",
        "--set=model.lora_r=4",
        "--set=model.lora_layers=null",
        "--set=epochs=1",
        "--set=max_chunks_per_query=2",
        "--set=validation_fraction=0.5",
        "--set=device=cpu",
        "--no-progress",
    ]


def test_cli_distills_the_real_smollm2_teacher(ramdocs, tiny_encoder, tmp_path):
    """The prompt evaluator (packaged SmolLM2-135M on llama.cpp, JSON grammar) teaches a tiny student on 2
    real RAMDocs questions (one per split); a rerun with --resume asks the teacher nothing."""
    pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    out = tmp_path / "run"
    args = [
        "distill", "--teacher", "prompt", "--data", str(ramdocs), "--limit", "2", "--output", str(out),
        "--set=teacher.evaluator.backend.n_threads=1", "--set=teacher.evaluator.generation.max_tokens=64",
        "--set=teacher.batch_queries=2", "--set=teacher.timing_queries=1", *_student(tiny_encoder),
    ]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "agreement on" in res.output and "speed-up" in res.output
    teacher_rows = _rows(out / "teacher.jsonl")
    assert len(teacher_rows) == 4 and {r["n_chunks"] for r in teacher_rows} == {2}
    assert all(r["stance"] in ("supports", "refutes", "irrelevant") for r in teacher_rows)
    assert json.loads((out / "teacher_meta.json").read_text())["teacher"]["backend"]["name"] == "llamacpp"
    rows = load_annotated(out / "distill_rows.jsonl")
    assert len(rows) == 4 and not any(r.labelled for r in rows)  # human labels are not trained on
    assert all(len(r.teacher_evidence) == len(r.candidates) for r in rows)
    assert {r.split for r in rows} == {"train", "validation"}
    report = json.loads((out / "distill_report.json").read_text())
    t, a, s = report["teacher"], report["agreement"], report["speed"]
    assert t["evaluator"] == "prompt" and t["computed_queries"] == 2 and t["teacher_calls"] == 1
    assert sum(t["outputs"].values()) == 4
    assert a["chunks"] == 2 * report["data"]["validation_queries"] and a["labelled_chunks"] == a["chunks"]
    for key in ("decision_agreement", "support_agreement"):
        assert 0 <= a[key] <= 1
    assert s["queries"] == 1 and s["chunks"] == 2
    assert s["teacher_seconds_per_chunk"] > 0 and s["student_seconds_per_chunk"] > 0
    assert s["speedup"] == pytest.approx(s["teacher_seconds_per_chunk"] / s["student_seconds_per_chunk"])
    assert report["training"]["epochs_run"] == 1 and "loss_distill" in report["training"]
    assert (out / "best" / "model_card.json").is_file() and not (out / "last").exists()
    # the rerun reuses every teacher output and the finished student
    before = (out / "teacher.jsonl").read_bytes()
    res = runner.invoke(app, [*args, "--resume", "--set=teacher.timing_queries=0"])
    assert res.exit_code == 0, res.output
    again = json.loads((out / "distill_report.json").read_text())
    assert again["teacher"]["computed_queries"] == 0 and again["teacher"]["cached_queries"] == 2
    assert (out / "teacher.jsonl").read_bytes() == before
    # the distilled student loads as the learned evaluator at inference
    student = build_evaluator(EvaluatorConfig(name="learned", checkpoint=str(out / "best")))
    from inference.types import Chunk

    result = student.evaluate("Who wrote it?", [Chunk("c1", "Ann wrote it.")], ["Ann", "Bob"])
    assert result.evidence.shape == (1, 2)


def test_cli_distills_unannotated_chunks_with_the_learned_teacher(ramdocs, tiny_encoder, tmp_path):
    """Unannotated {query, chunks} input: the teacher's own aligned claims are the frame; no labels."""
    recs = [json.loads(line) for line in ramdocs.read_text(encoding="utf-8").splitlines()[:4]]
    data = tmp_path / "chunks.jsonl"
    data.write_text(
        "".join(
            json.dumps({"query": r["question"], "chunks": [d["text"] for d in r["documents"]]}) + "\n"
            for r in recs
        ),
        encoding="utf-8",
    )
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        ["distill", "--teacher", "learned", "--data", str(data), "--output", str(out),
         "--set=teacher.timing_queries=2", *_student(tiny_encoder)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads((out / "distill_report.json").read_text())
    assert report["teacher"]["evaluator"] == "learned"
    rows = load_annotated(out / "distill_rows.jsonl")
    assert rows and not any(r.labelled for r in rows)
    by_query = {}
    for r in _rows(out / "teacher.jsonl"):
        by_query.setdefault(r["query"], r["frame"])
        assert r["candidates"] == []
    assert all(r.candidates == by_query[r.query] for r in rows)  # the teacher's frame
    assert "labelled_chunks" not in report["agreement"] and report["speed"]["queries"] == 2
    assert math.isfinite(report["speed"]["speedup"])
    # a bad flag is one line, exit 2
    bad = runner.invoke(app, ["distill", "--data", str(tmp_path / "none.jsonl"), "--output", str(out)])
    assert bad.exit_code == 2 and "no such file" in bad.output


def test_distill_under_accelerate_launch_asks_the_teacher_once(ramdocs, tiny_encoder, tmp_path):
    """Two gloo processes: the main one asks the teacher and writes the rows and the report, both train
    the student data-parallel (each teacher output is in the cache once, the student card says 2)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", "inference.cli", "distill", "--teacher", "learned", "--data", str(ramdocs), "--limit", "4",
        "--output", str(out), "--set=teacher.timing_queries=0", *_student(tiny_encoder),
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        cmd, env=env, cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("agreement on") == 1  # one report, from the main process
    teacher_rows = _rows(out / "teacher.jsonl")
    assert len(teacher_rows) == 8 and len({(r["query"], r["chunk_index"]) for r in teacher_rows}) == 8
    report = json.loads((out / "distill_report.json").read_text())
    assert report["teacher"]["computed_queries"] == 4
    assert json.loads((out / "best" / "model_card.json").read_text())["processes"] == 2
