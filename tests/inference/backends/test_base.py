"""The backend and decoding configs: declared constraints, checked by ``check_fields``, with exact messages."""

from __future__ import annotations

import pytest

from evidential.errors import ConfigError
from inference.backends import BACKENDS, BackendConfig, GenerationConfig


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "ollama"}, f"backend.name must be one of {', '.join(BACKENDS.names())}; got 'ollama'"),
        ({"model": " "}, "backend.model must be a model id or path; got ' '"),
        ({"dtype": "int3"}, "backend.dtype must be auto, float32, bfloat16 or float16; got 'int3'"),
        ({"n_ctx": 0}, "backend.n_ctx must be an integer >= 1; got 0"),
        ({"n_threads": "4"}, "backend.n_threads must be an integer or null (all cores); got '4'"),
        ({"tensor_parallel_size": 1.0}, "backend.tensor_parallel_size must be an integer >= 1; got 1.0"),
        ({"gpu_memory_utilization": 0}, "backend.gpu_memory_utilization must lie in (0, 1]; got 0"),
        ({"gpu_memory_utilization": 1.5}, "backend.gpu_memory_utilization must lie in (0, 1]; got 1.5"),
        ({"timeout_s": 0}, "backend.timeout_s must be a number > 0; got 0"),
        ({"max_retries": -1}, "backend.max_retries must be an integer >= 0; got -1"),
        ({"concurrency": True}, "backend.concurrency must be an integer >= 1; got True"),
        ({"raw_prompts": "yes"}, "backend.raw_prompts must be true or false; got 'yes'"),
        (
            {"name": "openai", "raw_prompts": True},
            "backend.raw_prompts is supported by the transformers and vllm backends only; got 'openai'",
        ),
    ],
)
def test_backend_config_rejects_with_field_message(kwargs, message):
    with pytest.raises(ConfigError) as info:
        BackendConfig(**kwargs)
    assert str(info.value) == message


def test_backend_config_accepts_and_normalizes():
    cfg = BackendConfig(timeout_s=5, gpu_memory_utilization=1, n_threads=None, api_key="", gguf_file="")
    assert cfg.timeout_s == 5.0 and isinstance(cfg.timeout_s, float)
    assert cfg.gpu_memory_utilization == 1.0 and isinstance(cfg.gpu_memory_utilization, float)
    assert (cfg.n_threads, cfg.api_key, cfg.gguf_file) == (None, "", "")
    assert BackendConfig(name="vllm", raw_prompts=True, n_threads=2).n_threads == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 0}, "generation.max_tokens must be an integer >= 1; got 0"),
        ({"temperature": -0.5}, "generation.temperature must be a finite number >= 0; got -0.5"),
        ({"temperature": float("inf")}, "generation.temperature must be a finite number >= 0; got inf"),
        ({"seed": "1"}, "generation.seed must be an integer; got '1'"),
        ({"json_schema": []}, "generation.json_schema must be a JSON schema object (dict) or null; got []"),
        ({"logprobs": "no"}, "generation.logprobs must be true or false; got 'no'"),
    ],
)
def test_generation_config_rejects_with_field_message(kwargs, message):
    with pytest.raises(ConfigError) as info:
        GenerationConfig(**kwargs)
    assert str(info.value) == message


def test_generation_config_accepts_and_normalizes():
    cfg = GenerationConfig(temperature=1, json_schema={"type": "object"})
    assert cfg.temperature == 1.0 and isinstance(cfg.temperature, float)
    assert cfg.json_schema == {"type": "object"} and GenerationConfig().json_schema is None
