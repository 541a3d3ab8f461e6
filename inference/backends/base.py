"""One interface for every text-generation backend (transformers, llama.cpp, vLLM, OpenAI-compatible HTTP).

A backend takes a *batch* of chat prompts and returns one :class:`Generation` per prompt in ONE call: that
call is one *batched model pass* in the paper's accounting (the prompt evaluator sends all k chunk
decisions of a query — or of many queries — in one call). Backends count their passes in ``self.passes``.

Structured output: when ``GenerationConfig.json_schema`` is set, a backend that can constrain decoding to
the schema does so (llama.cpp grammar, vLLM guided decoding, ...) and marks each generation
``constrained=True``; one that cannot returns free text (``constrained=False``) and the caller validates
and repairs it.

Streaming: a backend that can hand out text as it is decoded also has ``stream(prompt, config, cancel)``
(:class:`StreamingBackend`: the transformers and llama.cpp backends); callers check with
``isinstance(backend, StreamingBackend)`` and otherwise make one ``generate`` call.

Label scoring: a backend that can read the next-token distribution after a prompt also has
``score_labels(prompts, labels)`` (:class:`LabelScoringBackend`: every backend here). It returns, for each
prompt, the log-probability under the full vocabulary of each label's first token as the first token of the
reply — one prefill per prompt, nothing decoded — which is what the prompt evaluator's ``logprobs`` scoring
mode reads. A label that is several tokens is scored by its first token and listed in
:attr:`LabelScores.first_token_only`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evidential.errors import ConfigError
from evidential.registry import Registry
from training.utils.configio import check_fields

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendConfig",
    "BackendError",
    "ChatMessage",
    "Generation",
    "GenerationConfig",
    "LabelScores",
    "LabelScoringBackend",
    "LogprobsUnsupportedError",
    "Prompt",
    "StreamingBackend",
    "first_token_ids",
    "load_backend",
    "raw_prompt_text",
]

ChatMessage = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": str}
Prompt = list[ChatMessage]


# name -> factory(BackendConfig) -> Backend. Factories import their heavy/optional libraries lazily, so a
# missing optional extra only fails when that backend is chosen, with a message saying what to install.
# Defined before BackendConfig, which validates ``backend.name`` against it.
BACKENDS: Registry[Any] = Registry("backend")


class BackendError(RuntimeError):
    """A backend that cannot load its model or answer a request; the message says what to fix."""


class LogprobsUnsupportedError(BackendError):
    """The model server answered but reports no token log-probabilities, so labels cannot be scored."""


@dataclass
class GenerationConfig:
    """Decoding settings shared by every backend."""

    max_tokens: int = field(
        default=256, metadata={"help": "Maximum number of new tokens per prompt.", "range": (1, None)}
    )
    temperature: float = field(
        default=0.0,
        metadata={
            "help": "Sampling temperature; 0 means greedy decoding.",
            "range": (0.0, None),
            "must": "be a finite number >= 0",
        },
    )
    seed: int = field(default=0, metadata={"help": "Random seed for sampling (ignored when greedy)."})
    json_schema: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "JSON schema the output must follow; enforced by constrained decoding where the backend can.",
            "check": lambda x: isinstance(x, dict),
            "must": "be a JSON schema object (dict) or null",
        },
    )
    logprobs: bool = field(
        default=False, metadata={"help": "Return per-token log-probabilities where the backend has them."}
    )

    def __post_init__(self) -> None:
        check_fields(self, "generation")


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
        default="transformers",
        metadata={"help": "Backend: transformers, llamacpp, vllm or openai.", "choices": BACKENDS},
    )
    model: str = field(
        default="packaged:smollm2-135m-instruct",
        metadata={
            "help": "Hub id, local folder, .gguf file, or 'packaged:<name>' for a model shipped in a PyPI package.",
            "must": "be a model id or path",
        },
    )
    gguf_file: str | None = field(
        default=None,
        metadata={
            "help": "GGUF file name inside `model` (transformers; dequantized).",
            "allow_empty": True,
        },
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": "transformers weights dtype: auto (bf16 where the CPU supports it), float32, bfloat16, float16.",
            "choices": ("auto", "float32", "bfloat16", "float16"),
            "must": "be auto, float32, bfloat16 or float16",
        },
    )
    device: str = field(default="auto", metadata={"help": "cpu, cuda, cuda:N or auto."})
    n_ctx: int = field(
        default=4096,
        metadata={"help": "Context window (llama.cpp, vLLM max_model_len).", "range": (1, None)},
    )
    n_threads: int | None = field(
        default=None, metadata={"help": "CPU threads (llama.cpp); null = all cores.", "null": "all cores"}
    )
    tensor_parallel_size: int = field(
        default=1, metadata={"help": "vLLM tensor parallel size (GPUs per model).", "range": (1, None)}
    )
    gpu_memory_utilization: float = field(
        default=0.85,
        metadata={"help": "vLLM share of GPU memory to use.", "range": (0.0, 1.0), "ends": "(]"},
    )
    base_url: str = field(
        default="http://127.0.0.1:8000/v1",
        metadata={"help": "OpenAI-compatible server URL (openai backend)."},
    )
    api_key: str | None = field(
        default=None,
        metadata={
            "help": "API key for the openai backend (or $OPENAI_API_KEY).",
            "allow_empty": True,
        },
    )
    timeout_s: float = field(
        default=60.0,
        metadata={
            "help": "Per-request timeout in seconds (openai backend).",
            "range": (0.0, None),
            "ends": "(]",
        },
    )
    max_retries: int = field(
        default=3,
        metadata={
            "help": "Retries with exponential backoff on transient errors (openai backend).",
            "range": (0, None),
        },
    )
    concurrency: int = field(
        default=8, metadata={"help": "Maximum concurrent requests (openai backend).", "range": (1, None)}
    )
    lora_path: str | None = field(
        default=None,
        metadata={
            "help": "LoRA adapter to load on top of the model (transformers/vLLM).",
            "allow_empty": True,
        },
    )
    raw_prompts: bool = field(
        default=False,
        metadata={
            "help": "Send each prompt's message contents as plain text, without a chat template: base or "
            "non-chat models such as the released selfrag_llama2 checkpoints (transformers and vLLM only)."
        },
    )

    def __post_init__(self) -> None:
        check_fields(self, "backend")
        if self.raw_prompts and self.name not in ("transformers", "vllm"):
            raise ConfigError(
                f"backend.raw_prompts is supported by the transformers and vllm backends only; got {self.name!r}"
            )


@runtime_checkable
class Backend(Protocol):
    """What every backend provides. ``generate`` is one batched pass over all prompts."""

    name: str
    passes: int
    supports_json_schema: bool

    def generate(self, prompts: list[Prompt], config: GenerationConfig) -> list[Generation]: ...

    def close(self) -> None: ...


@runtime_checkable
class StreamingBackend(Protocol):
    """A backend that also streams one completion: ``stream`` yields text pieces as they are decoded and
    then the finished :class:`Generation` (whose ``text`` is the pieces joined); it counts one pass.
    Setting ``cancel`` (or closing the iterator) stops decoding after the current token, with
    ``finish_reason`` ``"cancelled"``. A greedy stream has the text of ``generate([prompt], config)``."""

    def stream(
        self, prompt: Prompt, config: GenerationConfig, cancel: threading.Event | None = None
    ) -> Iterator[str | Generation]: ...


@dataclass
class LabelScores:
    """The next-token log-probabilities of a set of labels after one prompt.

    Attributes:
        logprobs: One per label, in the order asked: ``log p(first token of the label | prompt)`` under the
            model's full, temperature-1 vocabulary distribution; ``-inf`` where the backend did not report
            it (an OpenAI-compatible server lists only its ``top_logprobs`` most likely tokens).
        first_token_only: The labels that are several tokens in this model's vocabulary: only their first
            token was scored (two labels sharing a first token then get the same score).
    """

    logprobs: list[float]
    first_token_only: list[str] = field(default_factory=list)


@runtime_checkable
class LabelScoringBackend(Protocol):
    """A backend that scores labels as the first token of the reply: ``score_labels`` runs one prefill per
    prompt (no decoding) and returns one :class:`LabelScores` per prompt, in order; it counts one pass."""

    def score_labels(self, prompts: list[Prompt], labels: list[str]) -> list[LabelScores]: ...


def first_token_ids(
    encode: Callable[[str], list[int]], labels: list[str], model: str
) -> tuple[list[int], list[str]]:
    """The first token id of each label under ``encode`` (a tokenizer's encoding without special tokens),
    and the labels that are several tokens (scored by their first token, :class:`LabelScores`).

    Raises:
        BackendError: A label that encodes to no token in ``model``.
    """
    ids, multi = [], []
    for label in labels:
        tokens = list(encode(label))
        if not tokens:
            raise BackendError(f"the label {label!r} encodes to no token in {model}")
        ids.append(int(tokens[0]))
        if len(tokens) > 1:
            multi.append(label)
    return ids, multi


def raw_prompt_text(prompt: Prompt) -> str:
    """The plain text of a prompt sent without a chat template (``raw_prompts``): its messages' contents,
    concatenated in order."""
    return "".join(m["content"] for m in prompt)


def load_backend(config: BackendConfig) -> Backend:
    """Build the backend named by ``config.name``."""
    return BACKENDS.get(config.name)(config)
