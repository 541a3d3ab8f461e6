"""llama.cpp backend (llama-cpp-python): GGUF models on CPU, JSON-schema output through GBNF grammars.

The optional extra ``llamacpp`` (``pip install 'evidential-rag[llamacpp]'``) builds llama.cpp from source;
``llama_cpp`` is imported only when this backend is chosen.

Batching: llama-cpp-python has no batched chat-completion API, so :meth:`LlamaCppBackend.generate` runs
the prompts of a batch one after another inside the call. The call still counts as ONE pass
(``passes += 1``) in the evaluator's accounting, like every other backend.

Prefix reuse without history: consecutive prompts that share a prefix (system prompt, query) reuse
llama.cpp's KV cache for it, so mostly their differing tails are evaluated. llama-cpp-python on its own
reuses the longest common prefix, which makes a completion depend on what ran before: the tail is then
evaluated in other batches than in a fresh run (a repeated prompt re-evaluates only its last token), the
CPU kernels round differently for another batch shape, and greedy decoding can take another path. This
backend evaluates every prompt in blocks of ``PREFIX_BLOCK`` tokens aligned to position 0
(``n_batch = n_ubatch = PREFIX_BLOCK``) and reuses the cache only up to a block boundary
(:func:`reusable_prefix`), so each block is computed exactly as in a fresh run: a completion, and its
log-probabilities, depend only on its prompt and config, bit for bit.

Structured output: a ``GenerationConfig.json_schema`` is compiled once (per distinct schema) into a llama.cpp
grammar (:meth:`llama_cpp.LlamaGrammar.from_json_schema`) and decoding is constrained to it
(``constrained=True``). A schema the converter cannot compile falls back to free text (``constrained=False``,
with a warning) so that the caller validates and repairs it, as the backend interface prescribes. Note that a
grammar cannot stop ``max_tokens`` from cutting an object short (``finish_reason == "length"``): bound
free-text fields with ``maxLength``.

Chat template: the GGUF's own ``tokenizer.chat_template`` (llama-cpp-python renders it with Jinja2);
SmolLM2's is ChatML.

Threads: ``backend.n_threads=None`` uses every core this process may use, for prompt and generation
alike. llama.cpp's worker threads spin-wait (OpenMP), so when other processes compete for those cores one
step can wait for a descheduled thread, and decoding slows down many times over. Set ``n_threads`` below
the number of free cores there, or ``OMP_WAIT_POLICY=PASSIVE`` before the process starts (it must be in the
environment before torch or llama.cpp loads libgomp; it makes each token slower when the cores are free).

Token log-probabilities: llama-cpp-python only reports ``logprobs`` for models loaded with
``logits_all=True``, which keeps an ``n_ctx x n_vocab`` float32 matrix (about 0.8 GB for SmolLM2 at
``n_ctx=4096``, 4 GB for a 262k-vocabulary model). This backend loads with ``logits_all=False`` and, when
``GenerationConfig.logprobs`` is set, reads the last logits row llama.cpp keeps after each decoding step
instead: the log-probability of each generated token under the model's unconstrained, temperature-1
distribution (what llama-cpp-python and OpenAI report as ``logprobs``).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import numpy as np

from inference.backends.base import (
    BACKENDS,
    BackendConfig,
    BackendError,
    Generation,
    GenerationConfig,
    LabelScores,
    Prompt,
    first_token_ids,
)
from inference.backends.models import resolve_model

__all__ = ["INSTALL_HINT", "PREFIX_BLOCK", "LlamaCppBackend", "llamacpp_backend", "reusable_prefix"]

INSTALL_HINT = (
    "the llamacpp backend needs the optional extra: pip install 'evidential-rag[llamacpp]' "
    "(builds llama.cpp from source, ~8 min on 2 cores)"
)

_NO_GRAMMAR = object()  # cache marker for a schema that could not be compiled to a grammar

# tokens per prompt-evaluation block and granularity of KV-cache reuse (see the module docstring); 128 is as
# fast as llama.cpp's default 512 for a fresh 500-token prompt on one CPU thread, 64 was 14 % slower
PREFIX_BLOCK = 128


def reusable_prefix(cached: Sequence[int], prompt: Sequence[int], block: int) -> int:
    """How many leading tokens of ``prompt`` may be taken from a KV cache that holds ``cached``.

    The longest common prefix, kept below the prompt's length (its last token must be evaluated to give
    the logits that are sampled) and rounded down to a multiple of ``block``, so that the rest of the prompt
    is evaluated in the same blocks as from an empty cache.
    """
    if block < 1:
        raise ValueError(f"block must be >= 1; got {block}")
    common = 0
    for a, b in zip(cached, prompt):
        if a != b:
            break
        common += 1
    return (min(common, len(prompt) - 1) // block) * block if prompt else 0


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """``log softmax(logits)`` in float64 (max-shifted, so no overflow)."""
    x = logits.astype(np.float64)
    x -= x.max()
    return x - math.log(np.exp(x).sum())


def _sampling(prompt: Prompt, config: GenerationConfig, grammar: Any) -> dict[str, Any]:
    """``create_chat_completion`` arguments of one prompt: plain temperature sampling (llama.cpp's
    top-k/top-p/min-p filters off), greedy at temperature 0, the config's seed and the grammar."""
    return {
        "messages": prompt,
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": 0.0,
        "seed": config.seed,
        "grammar": grammar,
    }


def _default_threads() -> int:
    """CPU cores this process may use (llama-cpp-python's own default is only half of them)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return max(os.cpu_count() or 1, 1)


def _gguf_path(config: BackendConfig) -> Path:
    """The local ``.gguf`` file ``config`` names, or a :class:`BackendError` saying what to pass instead."""
    ref = resolve_model(config.model, config.gguf_file)
    path = ref.gguf_path
    if path is None or path.suffix != ".gguf":
        raise BackendError(
            f"llama.cpp needs a GGUF model file; backend.model={config.model!r}"
            + (f", backend.gguf_file={config.gguf_file!r}" if config.gguf_file else "")
            + " is not one. Pass a .gguf path, a folder plus backend.gguf_file=<name>.gguf, "
            "or packaged:smollm2-135m-instruct (or use the transformers backend for hub models)"
        )
    if not path.is_file():
        raise BackendError(
            f"GGUF file {path} not found; llama.cpp loads local files only (download it first, "
            "or point backend.model at the folder that holds it)"
        )
    return path


@BACKENDS.register("llamacpp")
def llamacpp_backend(config: BackendConfig) -> LlamaCppBackend:
    """Build a :class:`LlamaCppBackend` for ``config`` (the ``BACKENDS`` factory for ``"llamacpp"``).

    The model is resolved first (so a wrong model is reported even where the extra is missing), then
    ``llama_cpp`` is imported.

    Raises:
        BackendError: The model is not a local GGUF file, the ``llamacpp`` extra is not installed, or
            llama.cpp cannot load the model.
    """
    path = _gguf_path(config)
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendError(INSTALL_HINT) from exc
    except (OSError, RuntimeError) as exc:  # installed, but its compiled library does not load
        raise BackendError(
            f"llama-cpp-python is installed but its llama.cpp library failed to load ({exc}); "
            "reinstall it: pip install --force-reinstall --no-cache-dir llama-cpp-python"
        ) from exc
    return LlamaCppBackend(config, path, llama_cpp)


class LlamaCppBackend:
    """A GGUF model run by llama.cpp; see the module docstring for batching, grammars and logprobs.

    Build it with :func:`llamacpp_backend` (or ``load_backend(BackendConfig(name="llamacpp", ...))``).
    Use it as a context manager, or call :meth:`close`, to free the model deterministically.

    Attributes:
        passes: Number of :meth:`generate` calls that generated something (one batched pass each).
        load_seconds: Wall-clock seconds it took llama.cpp to load the model.
        model_path: The GGUF file loaded.
    """

    name = "llamacpp"
    supports_json_schema = True

    def __init__(self, config: BackendConfig, model_path: Path, llama_cpp: ModuleType) -> None:
        self.config = config
        self.model_path = model_path
        self.passes = 0
        self._lib = llama_cpp
        self._grammars: dict[str, Any] = {}
        threads = config.n_threads or _default_threads()
        start = time.perf_counter()
        try:
            self._llm: Any = llama_cpp.Llama(
                model_path=str(model_path),
                n_ctx=config.n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                seed=0,  # overridden on every request by GenerationConfig.seed
                verbose=False,
                logits_all=False,
                n_batch=PREFIX_BLOCK,
                n_ubatch=PREFIX_BLOCK,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise BackendError(f"llama.cpp could not load {model_path}: {exc}") from exc
        self._llm.generate = self._block_aligned(self._llm.generate)
        self.load_seconds = time.perf_counter() - start
        if "tokenizer.chat_template" not in (getattr(self._llm, "metadata", None) or {}):
            warnings.warn(
                f"{model_path.name} has no chat template; llama-cpp-python formats chats as "
                f"{self._llm.chat_format!r}, which may not be the format the model was trained on",
                stacklevel=2,
            )

    # -- context manager -------------------------------------------------------------------------------

    def __enter__(self) -> LlamaCppBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Free the model and its context now (not at garbage collection); calling it again is harmless."""
        llm, self._llm = self._llm, None
        self._grammars.clear()
        if llm is not None and callable(getattr(llm, "close", None)):
            llm.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._llm is None

    # -- generation ------------------------------------------------------------------------------------

    def generate(self, prompts: list[Prompt], config: GenerationConfig) -> list[Generation]:
        """Generate one completion per chat prompt, in order: ONE batched pass (``passes += 1``).

        The prompts run sequentially inside this call (llama-cpp-python has no batched chat API). An empty
        batch returns ``[]`` and counts no pass.

        Raises:
            BackendError: The backend is closed, or llama.cpp rejects a prompt (e.g. it exceeds ``n_ctx``).
        """
        if self._llm is None:
            raise BackendError("the llamacpp backend is closed; build a new one with load_backend(config)")
        if not prompts:
            return []
        grammar = self._grammar(config.json_schema) if config.json_schema is not None else None
        self.passes += 1
        return [self._generate_one(i, prompt, config, grammar) for i, prompt in enumerate(prompts)]

    def _generate_one(self, index: int, prompt: Prompt, config: GenerationConfig, grammar: Any) -> Generation:
        logprobs: list[float] = []
        try:
            with self._recording_logprobs(logprobs) if config.logprobs else nullcontext():
                response = self._llm.create_chat_completion(**_sampling(prompt, config, grammar))
        except Exception as exc:  # context overflow (ValueError), template errors, llama.cpp failures
            raise BackendError(f"llama.cpp failed on prompt {index} of the batch: {exc}") from exc
        choice = response["choices"][0]
        num_tokens = (response.get("usage") or {}).get("completion_tokens")
        if config.logprobs and num_tokens is not None:
            del logprobs[num_tokens:]  # the end-of-generation token is sampled but not part of the output
        return Generation(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            num_tokens=num_tokens,
            token_logprobs=logprobs if config.logprobs else None,
            constrained=grammar is not None,
        )

    def label_token_ids(self, labels: list[str]) -> tuple[list[int], list[str]]:
        """The first token id of each label in this model's vocabulary, and the labels that are several
        tokens."""
        if self._llm is None:
            raise BackendError("the llamacpp backend is closed; build a new one with load_backend(config)")
        llm = self._llm
        return first_token_ids(
            lambda t: llm.tokenize(t.encode("utf-8"), add_bos=False, special=False),
            labels,
            self.model_path.name,
        )

    def score_labels(self, prompts: list[Prompt], labels: list[str]) -> list[LabelScores]:
        """For each chat prompt, the log-probability of each label's first token as the first token of the
        reply: the prompt is evaluated (block-aligned prefix reuse, as in :meth:`generate`) and the logits
        row llama.cpp keeps for its last token is read before one greedy token is sampled; nothing is
        decoded beyond it. One pass for the batch.

        Raises:
            BackendError: The backend is closed, or llama.cpp rejects a prompt (e.g. it exceeds ``n_ctx``).
        """
        if not prompts:
            return []
        ids, multi = self.label_token_ids(labels)
        greedy = GenerationConfig(max_tokens=1, temperature=0.0)
        out: list[LabelScores] = []
        for index, prompt in enumerate(prompts):
            rows: list[np.ndarray] = []
            try:
                with self._recording_rows(rows):
                    self._llm.create_chat_completion(**_sampling(prompt, greedy, None))
            except Exception as exc:  # context overflow (ValueError), template errors, llama.cpp failures
                raise BackendError(f"llama.cpp failed on prompt {index} of the batch: {exc}") from exc
            if not rows:
                raise BackendError(f"llama.cpp sampled no token for prompt {index} of the batch")
            logprobs = _log_softmax(rows[0])
            out.append(LabelScores(logprobs=[float(logprobs[i]) for i in ids], first_token_only=list(multi)))
        self.passes += 1
        return out

    def stream(
        self, prompt: Prompt, config: GenerationConfig, cancel: threading.Event | None = None
    ) -> Iterator[str | Generation]:
        """Generate one completion for one chat prompt and yield its text as llama.cpp decodes it, then the
        finished :class:`Generation` (one pass). Same sampling settings as :meth:`generate`, so a greedy
        stream has the text of ``generate([prompt], config)``. Setting ``cancel`` stops after the current
        token (``finish_reason`` ``"cancelled"``); so does closing the iterator.

        Raises:
            BackendError: The backend is closed, or llama.cpp rejects the prompt.
        """
        if self._llm is None:
            raise BackendError("the llamacpp backend is closed; build a new one with load_backend(config)")
        grammar = self._grammar(config.json_schema) if config.json_schema is not None else None
        try:
            chunks = self._llm.create_chat_completion(**_sampling(prompt, config, grammar), stream=True)
            pieces: list[str] = []
            finish = "stop"
            for chunk in chunks:
                choice = chunk["choices"][0]
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    pieces.append(piece)
                    yield piece
                finish = choice.get("finish_reason") or finish
                if cancel is not None and cancel.is_set():
                    chunks.close()
                    finish = "cancelled"
                    break
        except BackendError:
            raise
        except Exception as exc:  # context overflow (ValueError), template errors, llama.cpp failures
            raise BackendError(f"llama.cpp failed on the streamed prompt: {exc}") from exc
        self.passes += 1
        yield Generation(text="".join(pieces), finish_reason=finish, constrained=grammar is not None)

    def _grammar(self, schema: dict[str, Any]) -> Any:
        """The llama.cpp grammar for ``schema`` (compiled once per distinct schema), or None if it can't be."""
        key = json.dumps(schema, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            try:
                grammar = self._lib.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            except Exception as exc:  # the converter raises assorted errors on unsupported schema features
                warnings.warn(
                    f"llama.cpp cannot turn this JSON schema into a grammar ({type(exc).__name__}: {exc}); "
                    "generating unconstrained text for the caller to validate",
                    stacklevel=3,
                )
                grammar = _NO_GRAMMAR
            self._grammars[key] = grammar
        return None if grammar is _NO_GRAMMAR else grammar

    def _block_aligned(self, original: Callable[..., Iterator[int]]) -> Callable[..., Iterator[int]]:
        """Wrap this model's ``Llama.generate`` so that it reuses the KV cache only up to a block boundary.

        Cutting the cached tokens to :func:`reusable_prefix` before llama-cpp-python's own prefix match makes
        that match stop there; ``Llama.eval`` then drops the stale cache cells and evaluates the rest of the
        prompt in ``n_batch``-token blocks aligned to position 0, as a fresh run does.
        """
        llm = self._llm

        def generate(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
            tokens = list(tokens)
            keep = reusable_prefix(llm.input_ids[: llm.n_tokens].tolist(), tokens, llm.n_batch)
            if keep < llm.n_tokens:
                llm.n_tokens = keep
            return original(tokens, *args, **kwargs)

        return generate

    @contextmanager
    def _on_sample(self, record: Callable[[np.ndarray, int], None]) -> Iterator[None]:
        """Call ``record(logits, token)`` for every token llama.cpp samples while active: ``logits`` is a view
        of the row the token was sampled from (valid only during the call).

        Wraps this model's ``Llama.sample`` (which ``Llama.generate`` calls once per token) and reads the
        logits row llama.cpp kept for that step; see the module docstring for why not ``logits_all``.
        """
        llm, lib = self._llm, self._lib
        original: Callable[..., int] = llm.sample
        n_vocab = llm.n_vocab()

        def sample(*args: Any, **kwargs: Any) -> int:
            token = original(*args, **kwargs)
            idx = kwargs.get("idx")
            row = -1 if idx is None else idx - llm.n_tokens  # as Llama.sample computes it
            record(np.ctypeslib.as_array(lib.llama_get_logits_ith(llm.ctx, row), shape=(n_vocab,)), token)
            return token

        llm.sample = sample
        try:
            yield
        finally:
            del llm.sample  # back to the class method

    def _recording_rows(self, out: list[np.ndarray]):
        """Append a copy of the logits row of every sampled token to ``out`` while active."""
        return self._on_sample(lambda logits, token: out.append(np.array(logits, dtype=np.float32)))

    def _recording_logprobs(self, out: list[float]):
        """Append the log-probability of every token llama.cpp samples to ``out`` while active."""
        return self._on_sample(lambda logits, token: out.append(float(_log_softmax(logits)[token])))
