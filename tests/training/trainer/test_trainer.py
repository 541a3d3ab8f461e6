"""Training end to end on real RAMDocs records with a tiny encoder: metrics, checkpoints, crash + resume."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from evidential.errors import ConfigError
from training.learned.checkpoint import load_learned_model
from training.learned.model import is_yes_no_question
from training.trainer.config import load_train_config
from training.trainer.trainer import (
    EvidentialTrainer,
    QueryExample,
    expected_route,
    span_rows,
    span_stated,
    span_target_masks,
    span_targets,
)
from training.utils.metrics import span_matches
from training.utils.text import normalize_text

from .conftest import kill_mid_epoch, tiny_config


@pytest.fixture(scope="module")
def ramdocs(shared_data):
    return shared_data / "ramdocs" / "RAMDocs_test.jsonl"


@pytest.fixture(scope="module")
def trained(tiny_encoder, ramdocs, tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    cfg = load_train_config(tiny_config(tiny_encoder, ramdocs, out))
    result = EvidentialTrainer(cfg, out / "run", command="test", progress=False).train()
    return out, cfg, result


def test_training_writes_metrics_and_a_loadable_checkpoint(trained):
    out, cfg, result = trained
    run = out / "run"
    for key in (
        "loss",
        "claim_accuracy",
        "ece",
        "route_accuracy",
        "strict_em_ramdocs",
        "mean_evidence_correct",
    ):
        assert key in result
    assert 0 <= result["claim_accuracy"] <= 1 and 0 <= result["ece"] <= 1
    assert result["epochs_run"] == 2 and result["train_queries"] + result["validation_queries"] == 12
    assert not (run / "last").exists()  # removed when training finished
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2]
    card = json.loads((run / "best" / "model_card.json").read_text())
    assert card["command"] == "test" and card["validation_metrics"]["loss"] == min(r["loss"] for r in log)
    assert set(card["versions"]) == {"torch", "transformers", "peft"}
    model = load_learned_model(run)  # a training output folder resolves to best/
    assert not model.training
    ev = model.evidence_matrices(["Who?"], [["Some text."]], [["A", "B"]])[0]
    assert ev.shape == (1, 2) and bool((ev >= 0).all())
    # claim-extraction fidelity: the best model's repaired spans on every answer-labelled validation chunk
    _, val = EvidentialTrainer(cfg, out / "again", progress=False).prepare_data()
    rows = [
        (ex.query, ex.chunks[i], ex.claims[lab])
        for ex in val
        if not is_yes_no_question(ex.query)
        for i, lab in enumerate(ex.labels)
        if lab is not None
    ]
    got = model.extract_spans([q for q, _, _ in rows], [c for _, c, _ in rows])
    assert result["span_rows"] == len(rows) > 0
    hits = [span_matches(p.text, label) for p, (_, _, label) in zip(got, rows)]
    assert result["span_fidelity"] == pytest.approx(sum(hits) / len(rows))
    # the same over the chunks that state their label (RAMDocs documents almost always do)
    stated = [f" {normalize_text(label)} " in f" {normalize_text(chunk)} " for _, chunk, label in rows]
    assert span_stated(val) == stated and result["span_rows_stated"] == sum(stated) > 0
    on = [h for h, s in zip(hits, stated) if s]
    assert result["span_fidelity_stated"] == pytest.approx(sum(on) / len(on))


def test_span_stated_marks_the_chunks_that_name_their_label():
    """A MuSiQue-style first-hop paragraph is labelled with an answer it never names."""
    ex = QueryExample(
        key="musique:q1",
        query="Who founded the company that makes the Xbox?",
        chunks=[
            "The Xbox is a video game console made by Microsoft.",
            "Microsoft was founded by Bill Gates and Paul Allen in 1975.",
            "Gatesville is a city in Texas.",
        ],
        claims=["Bill Gates"],
        labels=[0, 0, None],
        gold=[0],
        doc_types=["supporting", "supporting", "distractor"],
        source="musique",
    )
    assert span_rows([ex]) == [(ex.query, ex.chunks[0], "Bill Gates"), (ex.query, ex.chunks[1], "Bill Gates")]
    assert span_stated([ex]) == [False, True]
    # the label must be in the chunk, not the other way round: a short cell inside a longer label is no statement
    cell = QueryExample(
        key="ramdocs:q2",
        query="Where is Mahkota located?",
        chunks=["Malaysia"],
        claims=["Kuantan, Pahang, Malaysia"],
        labels=[0],
        gold=[0],
        doc_types=["correct"],
        source="ramdocs",
    )
    assert span_stated([cell]) == [False]


def test_adapter_loads_with_peft(trained, tiny_encoder):
    from peft import PeftModel
    from transformers import AutoModel

    out, _, _ = trained
    base = AutoModel.from_pretrained(tiny_encoder)
    peft_model = PeftModel.from_pretrained(base, str(out / "run" / "best" / "adapter"))
    assert any("lora_A" in n for n, _ in peft_model.named_parameters())
    heads = load_file(str(out / "run" / "best" / "heads.safetensors"))
    assert {k.split(".")[0] for k in heads} == {"proj", "attn_query", "evidence_head", "span_head"}


def test_refuses_to_overwrite_or_resume_wrongly(trained):
    out, cfg, _ = trained
    with pytest.raises(ConfigError, match="training already finished"):
        EvidentialTrainer(cfg, out / "run", progress=False).train(resume=True)
    with pytest.raises(ConfigError, match="nothing to resume"):
        EvidentialTrainer(cfg, out / "empty", progress=False).train(resume=True)


def test_span_targets_mark_every_occurrence_of_the_answer(tiny_encoder):
    from training.learned.model import EvidentialEvaluatorModel, LearnedModelConfig

    model = EvidentialEvaluatorModel(LearnedModelConfig(encoder=str(tiny_encoder), max_length=64))
    chunks = [
        "The AFL club Carlton won in 1995. NAFLD is unrelated. Later the afl grew.",
        "Nothing to see here.",
        "Carlton won.",
    ]
    claims = ["AFL", None, "Essendon"]
    batch = model.tokenize(["Which league?"] * 3, chunks)
    chunk_tok = (batch["sequence"] == 1) & (batch["attention_mask"] == 1)
    offsets = batch["offset_mapping"]
    s1, e1, use1 = span_targets(chunks, claims, offsets, chunk_tok)
    sm, em, usem = span_target_masks(chunks, claims, offsets, chunk_tok)
    assert use1.tolist() == usem.tolist() == [True, True, False]  # "Essendon" is not in its chunk

    def text_at(r, tokens):
        return [chunks[r][int(offsets[r, t, 0]) : int(offsets[r, t, 1])].lower() for t in tokens]

    # "AFL" and "afl" stand alone; the "afl" inside "NAFLD" is not an occurrence
    starts, ends = sm[0].nonzero().flatten().tolist(), em[0].nonzero().flatten().tolist()
    assert len(starts) == len(ends) == 2 and text_at(0, starts) == text_at(0, ends) == ["afl", "afl"]
    assert starts[0] == int(s1[0]) and ends[0] == int(e1[0])  # the first occurrence is the one-index target
    assert sm[1].nonzero().flatten().tolist() == [0] == em[1].nonzero().flatten().tolist()  # no answer: [CLS]
    assert int(s1[1]) == int(e1[1]) == 0


def test_training_on_every_occurrence(tiny_encoder, ramdocs, tmp_path):
    cfg = load_train_config(
        tiny_config(tiny_encoder, ramdocs, tmp_path, limit=6, epochs=1), ["loss.span_occurrences=all"]
    )
    result = EvidentialTrainer(cfg, tmp_path / "run", progress=False).train()
    assert (
        cfg.loss.span_occurrences == "all" and math.isfinite(result["loss_span"]) and result["loss_span"] > 0
    )
    with pytest.raises(ConfigError, match="span_occurrences"):
        load_train_config(tiny_config(tiny_encoder, ramdocs, tmp_path), ["loss.span_occurrences=every"])


def test_query_targets_and_expected_routes():
    ex = QueryExample(
        "k", "q", ["a", "b", "c"], ["G1", "G2", "W"], [0, 2, None], [0, 1], [None] * 3, "ramdocs"
    )
    assert ex.query_target().tolist() == [1.0, 0.0, 0.0, 0.0]  # only the supported gold claim
    assert expected_route(ex) == "direct"  # misinformation next to one gold claim: discount it
    ex.labels = [0, 1, None]
    assert ex.query_target().tolist() == [0.5, 0.5, 0.0, 0.0] and expected_route(ex) == "conflict"
    ex.labels = [None, None, None]
    assert ex.query_target().tolist() == [0.0, 0.0, 0.0, 1.0] and expected_route(ex) == "abstain"
    ex.gold, ex.labels = None, [0, 1, None]  # a real conflict without a gold reference
    assert ex.query_target().tolist() == [0.0, 0.0, 0.0, 1.0] and expected_route(ex) == "conflict"


def _train_cmd(config, output, *extra):
    code = "from inference.cli import app; app()"
    return [
        sys.executable,
        "-c",
        code,
        "train",
        "--config",
        str(config),
        "--output",
        str(output),
        "--no-progress",
        *extra,
    ]


def test_kill_mid_epoch_and_resume(tiny_encoder, ramdocs, tmp_path):
    """SIGKILL a real training process mid-epoch, resume it, and get the uninterrupted run's weights."""
    cfg_path = tiny_config(
        tiny_encoder,
        ramdocs,
        tmp_path,
        epochs=3,
        limit=24,
    )
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen(
        _train_cmd(cfg_path, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    killed_at = kill_mid_epoch(proc, out)
    state_file = out / "last" / "trainer_state.json"
    # the last checkpoint is intact and loadable; no finished model claims to exist yet
    state = json.loads(state_file.read_text())
    assert state["global_step"] >= killed_at and not state["finished"]
    load_learned_model(out / "last", trainable=True)
    # without --resume training refuses to clobber the unfinished run (the CLI's exit code 2 for a
    # ConfigError is tested in test_bad_config_is_one_line)
    with pytest.raises(ConfigError, match="pass --resume"):
        EvidentialTrainer(load_train_config(cfg_path), out, progress=False).train()
    done = subprocess.run(_train_cmd(cfg_path, out, "--resume"), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = json.loads((out / "metrics.json").read_text())
    # the same run without interruption, in-process
    cfg = load_train_config(cfg_path)
    full = EvidentialTrainer(cfg, tmp_path / "full", progress=False).train()
    assert resumed["global_step"] == full["global_step"]
    assert resumed["loss"] == pytest.approx(full["loss"], rel=1e-4)
    a = load_file(str(out / "best" / "heads.safetensors"))
    b = load_file(str(tmp_path / "full" / "best" / "heads.safetensors"))
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert diff == 0.0, diff  # bit-exact: optimizer, scheduler and RNG states are restored


def test_bad_config_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: [{name: nope, path: x}]\n")
    res = subprocess.run(
        _train_cmd(bad, tmp_path / "o"),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert res.returncode == 2
    assert "data[].name must be 'annotated' or one of" in res.stderr


def test_trackers_bf16_and_precision_errors(tiny_encoder, ramdocs, tmp_path):
    """``trackers: [tensorboard]`` writes event files beside log.jsonl; ``mixed_precision: bf16`` trains on
    CPU (encoder passes in bfloat16, losses in float32); fp16 without CUDA and an unknown tracker fail at
    once with what to change."""
    from tensorboardX.proto import event_pb2

    cfg = load_train_config(
        tiny_config(tiny_encoder, ramdocs, tmp_path, epochs=1, device="cpu"),
        ["trackers=[tensorboard]", "mixed_precision=bf16"],
    )
    result = EvidentialTrainer(cfg, tmp_path / "run", progress=False).train()
    assert math.isfinite(result["loss"]) and (tmp_path / "run" / "best" / "heads.safetensors").is_file()
    events = list((tmp_path / "run" / "tracking").rglob("events.out.tfevents.*"))
    assert events, "tensorboard wrote no event file"
    tags = set()
    for path in events:
        data, pos = path.read_bytes(), 0
        while pos < len(data):  # TFRecord framing: length, crc, payload, crc
            n = int.from_bytes(data[pos : pos + 8], "little")
            ev = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + n])
            tags.update(v.tag for v in ev.summary.value)
            pos += 12 + n + 4
    assert {"train/total", "train/lr", "validation/loss", "validation/ece"} <= tags
    with pytest.raises(ConfigError, match="'fp16' needs a CUDA device"):
        EvidentialTrainer(
            load_train_config(
                tiny_config(tiny_encoder, ramdocs, tmp_path, device="cpu"), ["mixed_precision=fp16"]
            ),
            tmp_path / "x",
        )
    with pytest.raises(ConfigError, match="unknown tracker 'tensorbored'"):
        load_train_config(tiny_config(tiny_encoder, ramdocs, tmp_path), ["trackers=[tensorbored]"])


@pytest.mark.gpu
def test_cuda_bf16_training(tiny_encoder, ramdocs, tmp_path):
    cfg = load_train_config(
        tiny_config(tiny_encoder, ramdocs, tmp_path, epochs=1, device="cuda"), ["mixed_precision=bf16"]
    )
    trainer = EvidentialTrainer(cfg, tmp_path / "run", progress=False)
    result = trainer.train()
    assert trainer.device.type == "cuda" and math.isfinite(result["loss"])
    assert load_learned_model(tmp_path / "run", device="cpu").evidence_matrices(["Q?"], [["t"]], [["a"]])
