"""The vLLM backend: CPU tests with fake ``vllm`` modules, and engine tests where vLLM and a GPU exist."""

from __future__ import annotations

import json
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

import inference.backends.vllm_backend as vllm_backend
from inference.backends.base import Backend, BackendConfig, BackendError, GenerationConfig, load_backend

SCHEMA = {
    "type": "object",
    "properties": {"relevant": {"type": "boolean"}},
    "required": ["relevant"],
    "additionalProperties": False,
}


# --------------------------------------------------------------------------- fakes of vLLM's API


class FakeStructuredOutputsParams:
    def __init__(self, json: Any = None) -> None:
        self.json = json


class FakeGuidedDecodingParams:
    def __init__(self, json: Any = None) -> None:
        self.json = json


class FakeSamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class FakeLoRARequest:
    def __init__(self, lora_name: str, lora_int_id: int, lora_path: str) -> None:
        self.args = (lora_name, lora_int_id, lora_path)


@dataclass
class FakeLogprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class FakeCompletion:
    text: str
    token_ids: list[int]
    finish_reason: str | None
    logprobs: list[dict[int, FakeLogprob]] | None = None


@dataclass
class FakeRequestOutput:
    outputs: list[FakeCompletion] = field(default_factory=list)


class FakeLLM:
    """Records its construction and ``chat`` calls; answers each conversation with its last message."""

    instances: list[FakeLLM] = []

    def __init__(self, **kwargs: Any) -> None:
        if kwargs["model"] == "explode":
            raise ValueError("CUDA out of memory")
        self.kwargs = kwargs
        self.chat_calls: list[dict[str, Any]] = []
        self.shutdowns = 0
        self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=self._shutdown))
        FakeLLM.instances.append(self)

    def _shutdown(self) -> None:
        self.shutdowns += 1

    def chat(self, messages, sampling_params=None, use_tqdm=True, lora_request=None):
        self.chat_calls.append(
            {"messages": messages, "sampling_params": sampling_params, "lora_request": lora_request}
        )
        outputs = []
        for conversation in messages:
            words = conversation[-1]["content"].split()
            ids = list(range(100, 100 + len(words)))
            logprobs = None
            if sampling_params.kwargs.get("logprobs"):
                # the sampled token plus one (different) top-1 candidate, like vLLM with logprobs=1
                logprobs = [
                    {t: FakeLogprob(-0.25 * (i + 1)), 7: FakeLogprob(-0.01)} for i, t in enumerate(ids)
                ]
            outputs.append(FakeRequestOutput([FakeCompletion(" ".join(words), ids, "stop", logprobs)]))
        return outputs


def module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


@pytest.fixture
def fake_vllm(monkeypatch):
    """Install fake ``vllm``, ``vllm.sampling_params`` and ``vllm.lora.request`` modules (new API)."""
    FakeLLM.instances = []
    sampling = module("vllm.sampling_params", StructuredOutputsParams=FakeStructuredOutputsParams)
    root = module("vllm", LLM=FakeLLM, SamplingParams=FakeSamplingParams, sampling_params=sampling)
    lora_request = module("vllm.lora.request", LoRARequest=FakeLoRARequest)
    monkeypatch.setitem(sys.modules, "vllm", root)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    monkeypatch.setitem(sys.modules, "vllm.lora", module("vllm.lora", request=lora_request))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora_request)
    return root


def conv(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


# --------------------------------------------------------------------------- CPU tests (no vLLM needed)


def test_factory_without_vllm_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail like a missing package
    with pytest.raises(BackendError) as info:
        load_backend(BackendConfig(name="vllm", model="HuggingFaceTB/SmolLM2-135M-Instruct"))
    assert str(info.value) == vllm_backend.VLLM_INSTALL_HINT
    assert "pip install 'evidential-rag[vllm]'" in str(info.value)


def test_structured_outputs_api_is_preferred():
    fake = module("fake.sampling_params", StructuredOutputsParams=FakeStructuredOutputsParams)
    kwargs = vllm_backend.structured_output_kwargs(SCHEMA, fake)
    assert list(kwargs) == ["structured_outputs"]
    assert isinstance(kwargs["structured_outputs"], FakeStructuredOutputsParams)
    assert kwargs["structured_outputs"].json == SCHEMA
    both = module(
        "fake.sampling_params",
        StructuredOutputsParams=FakeStructuredOutputsParams,
        GuidedDecodingParams=FakeGuidedDecodingParams,
    )
    assert list(vllm_backend.structured_output_kwargs(SCHEMA, both)) == ["structured_outputs"]


def test_guided_decoding_api_for_older_vllm(monkeypatch):
    old = module("vllm.sampling_params", GuidedDecodingParams=FakeGuidedDecodingParams)
    monkeypatch.setitem(sys.modules, "vllm", module("vllm", sampling_params=old))
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", old)
    kwargs = vllm_backend.structured_output_kwargs(SCHEMA)  # found through sys.modules
    assert list(kwargs) == ["guided_decoding"]
    assert isinstance(kwargs["guided_decoding"], FakeGuidedDecodingParams)
    assert kwargs["guided_decoding"].json == SCHEMA


def test_structured_output_without_either_api_is_an_error():
    with pytest.raises(BackendError, match="neither StructuredOutputsParams nor GuidedDecodingParams"):
        vllm_backend.structured_output_kwargs(SCHEMA, module("fake.sampling_params"))


def test_engine_arguments_from_config(fake_vllm):
    config = BackendConfig(
        name="vllm",
        model="org/model",
        n_ctx=2048,
        tensor_parallel_size=2,
        gpu_memory_utilization=0.5,
        dtype="bfloat16",
    )
    backend = load_backend(config)
    assert isinstance(backend, vllm_backend.VLLMBackend) and isinstance(backend, Backend)
    assert backend.name == "vllm" and backend.supports_json_schema
    (llm,) = FakeLLM.instances
    assert llm.kwargs == {
        "model": "org/model",
        "dtype": "bfloat16",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.5,
        "max_model_len": 2048,
        "seed": 0,
        "enable_lora": False,
    }


def test_generate_is_one_chat_call_in_order(fake_vllm):
    backend = load_backend(BackendConfig(name="vllm", model="org/model"))
    prompts = [conv(f"answer number {i}") for i in range(5)]
    out = backend.generate(prompts, GenerationConfig(max_tokens=32, temperature=0.3, seed=9))
    (llm,) = FakeLLM.instances
    assert len(llm.chat_calls) == 1 and backend.passes == 1
    call = llm.chat_calls[0]
    assert call["messages"] == prompts and call["lora_request"] is None
    assert call["sampling_params"].kwargs == {"max_tokens": 32, "temperature": 0.3, "seed": 9}
    assert [g.text for g in out] == [f"answer number {i}" for i in range(5)]
    assert all(g.num_tokens == 3 and g.finish_reason == "stop" and not g.constrained for g in out)
    assert all(g.token_logprobs is None for g in out)
    assert backend.generate([], GenerationConfig()) == [] and backend.passes == 1


def test_schema_and_logprobs_reach_sampling_params(fake_vllm):
    backend = load_backend(BackendConfig(name="vllm", model="org/model"))
    (gen,) = backend.generate([conv("a b")], GenerationConfig(json_schema=SCHEMA, logprobs=True))
    params = FakeLLM.instances[0].chat_calls[0]["sampling_params"].kwargs
    assert params["logprobs"] == 1
    assert isinstance(params["structured_outputs"], FakeStructuredOutputsParams)
    assert params["structured_outputs"].json == SCHEMA
    assert gen.constrained
    assert gen.token_logprobs == pytest.approx([-0.25, -0.5])  # the sampled tokens', not the top candidate's


@pytest.mark.parametrize(("rank", "expected"), [(8, None), (16, None), (24, 32), (64, 64)])
def test_lora_adapter_is_requested_with_a_large_enough_rank(fake_vllm, tmp_path, rank, expected):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": rank, "peft_type": "LORA"}))
    backend = load_backend(BackendConfig(name="vllm", model="org/model", lora_path=str(tmp_path)))
    backend.generate([conv("x")], GenerationConfig())
    llm = FakeLLM.instances[0]
    assert llm.kwargs["enable_lora"] is True
    assert llm.kwargs.get("max_lora_rank") == expected
    assert llm.chat_calls[0]["lora_request"].args == ("adapter", 1, str(tmp_path))


def test_missing_lora_path_is_an_error(fake_vllm, tmp_path):
    with pytest.raises(BackendError, match="lora_path"):
        load_backend(BackendConfig(name="vllm", model="org/model", lora_path=str(tmp_path / "nope")))


def test_packaged_model_is_rejected_with_advice(fake_vllm):
    with pytest.raises(BackendError, match="hub id or folder"):
        load_backend(BackendConfig(name="vllm"))


def test_engine_start_failure_is_a_backend_error(fake_vllm):
    with pytest.raises(BackendError, match=r"vLLM could not start 'explode'.*CUDA out of memory"):
        load_backend(BackendConfig(name="vllm", model="explode"))


def test_close_shuts_down_once_and_blocks_generate(fake_vllm):
    backend = load_backend(BackendConfig(name="vllm", model="org/model"))
    llm = FakeLLM.instances[0]
    backend.close()
    backend.close()
    assert llm.shutdowns == 1 and backend.llm is None
    with pytest.raises(BackendError, match="closed"):
        backend.generate([conv("x")], GenerationConfig())


# --------------------------------------------------------------------------- real engine (GPU + vllm extra)

VLLM_TEST_MODEL = os.environ.get("EVIDENTIAL_RAG_VLLM_MODEL", "HuggingFaceTB/SmolLM2-135M-Instruct")


@pytest.fixture(scope="module")
def engine():
    pytest.importorskip("vllm", reason="vLLM is an optional GPU extra; not installed on this machine")
    backend = load_backend(
        BackendConfig(name="vllm", model=VLLM_TEST_MODEL, n_ctx=2048, gpu_memory_utilization=0.3)
    )
    yield backend
    backend.close()


@pytest.mark.vllm
@pytest.mark.gpu
def test_engine_batch_is_one_pass(engine):
    before = engine.passes
    prompts = [conv(f"Say the number {i}.") for i in range(4)]
    out = engine.generate(prompts, GenerationConfig(max_tokens=16, logprobs=True))
    assert engine.passes == before + 1 and len(out) == 4
    for gen in out:
        assert isinstance(gen.text, str) and 1 <= gen.num_tokens <= 16
        assert gen.finish_reason in ("stop", "length")
        assert gen.token_logprobs is not None and len(gen.token_logprobs) == gen.num_tokens
        assert all(lp <= 0 for lp in gen.token_logprobs)


@pytest.mark.vllm
@pytest.mark.gpu
def test_engine_json_schema_is_enforced(engine):
    (gen,) = engine.generate(
        [conv("Is Paris in France? Answer in JSON.")], GenerationConfig(max_tokens=32, json_schema=SCHEMA)
    )
    assert gen.constrained
    assert isinstance(json.loads(gen.text)["relevant"], bool)


def test_score_labels_is_one_chat_call_restricted_to_the_labels(fake_vllm):
    """Label scoring: max_tokens 1, greedy, allowed_token_ids = the labels' first tokens, top logprobs read
    per label (a label vLLM did not list gets -inf)."""

    class Tokenizer:
        def encode(self, text, add_special_tokens=False):
            return [ord(ch) for ch in text]  # one id per character: "AB" is two tokens

    backend = load_backend(BackendConfig(name="vllm", model="org/model"))
    (llm,) = FakeLLM.instances
    llm.get_tokenizer = Tokenizer

    def chat(messages, sampling_params=None, use_tqdm=True, lora_request=None):
        llm.chat_calls.append({"messages": messages, "sampling_params": sampling_params})
        top = {ord("A"): FakeLogprob(-0.2), ord("C"): FakeLogprob(-2.0), 7: FakeLogprob(-1.5)}
        return [FakeRequestOutput([FakeCompletion("A", [ord("A")], "length", [top])]) for _ in messages]

    llm.chat = chat
    scores = backend.score_labels([conv("q1"), conv("q2")], ["A", "B", "C", "AB"])
    assert backend.passes == 1 and len(llm.chat_calls) == 1
    params = llm.chat_calls[0]["sampling_params"].kwargs
    assert params == {
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": vllm_backend.LABEL_LOGPROBS,
        "allowed_token_ids": [ord("A"), ord("B"), ord("C")],
    }
    for s in scores:
        assert s.logprobs == [-0.2, float("-inf"), -2.0, -0.2]  # "AB" is scored by its first token, "A"
        assert s.first_token_only == ["AB"]
