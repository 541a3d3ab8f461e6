"""vLLM offline engine (``vllm.LLM``) behind the :class:`~inference.backends.base.Backend` interface.

vLLM is an optional GPU extra (``pip install 'evidential-rag[vllm]'``); it is imported only when this
backend is built. A :meth:`VLLMBackend.generate` call is one ``LLM.chat`` over the whole batch, i.e. one
batched pass. JSON schemas are enforced with vLLM's structured outputs; how they are passed changed
across vLLM versions, and :func:`structured_output_kwargs` is the one place that knows.
"""

from __future__ import annotations

import gc
import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from inference.backends.base import (
    BACKENDS,
    BackendConfig,
    BackendError,
    Generation,
    GenerationConfig,
    LabelScores,
    Prompt,
    first_token_ids,
    raw_prompt_text,
)
from inference.backends.models import resolve_model

__all__ = ["LABEL_LOGPROBS", "VLLM_INSTALL_HINT", "VLLMBackend", "structured_output_kwargs", "vllm_backend"]

#: Log-probabilities vLLM returns per position in label scoring (its ``max_logprobs`` default is 20).
LABEL_LOGPROBS = 20

VLLM_INSTALL_HINT = "the vllm backend needs the optional extra: pip install 'evidential-rag[vllm]' (GPU; pulls its own CUDA torch)"

# Ranks vLLM accepts for max_lora_rank (LoRAConfig.max_lora_rank); its default is 16.
_VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def structured_output_kwargs(
    schema: dict[str, Any], sampling_module: ModuleType | None = None
) -> dict[str, Any]:
    """``SamplingParams`` keyword arguments that constrain decoding to the JSON ``schema``.

    vLLM >= 0.11 has ``vllm.sampling_params.StructuredOutputsParams`` passed as ``structured_outputs=``;
    older releases have ``GuidedDecodingParams`` passed as ``guided_decoding=`` (removed in 0.12). The
    newer API wins when a release has both.

    Args:
        schema: The JSON schema.
        sampling_module: The module holding the parameter classes (default: ``vllm.sampling_params``).

    Raises:
        BackendError: The installed vLLM has neither class.
    """
    if sampling_module is None:
        sampling_module = importlib.import_module("vllm.sampling_params")
    cls = getattr(sampling_module, "StructuredOutputsParams", None)
    if cls is not None:
        return {"structured_outputs": cls(json=schema)}
    cls = getattr(sampling_module, "GuidedDecodingParams", None)
    if cls is not None:
        return {"guided_decoding": cls(json=schema)}
    raise BackendError(
        "this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams in vllm.sampling_params; "
        "install a supported release: pip install 'evidential-rag[vllm]'"
    )


class VLLMBackend:
    """Batched chat generation with a vLLM engine on the GPU.

    Args:
        config: Uses ``model`` (hub id, local folder or ``.gguf`` file), ``dtype``, ``n_ctx`` (as
            ``max_model_len``), ``tensor_parallel_size``, ``gpu_memory_utilization`` and ``lora_path``.
        vllm: The imported ``vllm`` module (the factory passes it; tests may pass a fake).
        seed: Engine seed (per-request seeds come from :class:`GenerationConfig`).
        engine_kwargs: Extra ``vllm.LLM`` keyword arguments (e.g. ``enforce_eager=True``).

    Raises:
        BackendError: A packaged model (those are small GGUF files for the CPU backends), a missing LoRA
            adapter, or an engine that fails to start (the message carries vLLM's own error).
    """

    name = "vllm"
    supports_json_schema = True

    def __init__(
        self,
        config: BackendConfig,
        vllm: ModuleType,
        *,
        seed: int = 0,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if config.model.startswith("packaged:"):
            raise BackendError(
                f"the vllm backend loads Hugging Face checkpoints; backend.model is the packaged GGUF model "
                f"{config.model!r}. Set backend.model to a hub id or folder (e.g. HuggingFaceTB/SmolLM2-135M-Instruct) "
                f"or use backend.name=llamacpp/transformers for packaged models"
            )
        ref = resolve_model(config.model, config.gguf_file)
        model = str(ref.gguf_path) if ref.gguf_path else ref.path
        self.config = config
        self.passes = 0
        self._vllm = vllm
        kwargs: dict[str, Any] = {
            "model": model,
            "dtype": config.dtype,
            "tensor_parallel_size": config.tensor_parallel_size,
            "gpu_memory_utilization": config.gpu_memory_utilization,
            "max_model_len": config.n_ctx,
            "seed": seed,
            "enable_lora": bool(config.lora_path),
        }
        self._lora_request = None
        if config.lora_path:
            rank = _lora_rank(config.lora_path)
            if rank is not None and rank > 16:
                kwargs["max_lora_rank"] = next((r for r in _VLLM_LORA_RANKS if r >= rank), rank)
            lora_module = importlib.import_module("vllm.lora.request")
            self._lora_request = lora_module.LoRARequest("adapter", 1, config.lora_path)
        kwargs.update(engine_kwargs or {})
        self.engine_kwargs = kwargs
        try:
            self.llm: Any = vllm.LLM(**kwargs)
        except Exception as exc:  # vLLM raises many types (ValueError, RuntimeError, OOM, ...)
            raise BackendError(
                f"vLLM could not start {model!r}: {type(exc).__name__}: {exc}. Check backend.model, "
                f"lower backend.gpu_memory_utilization or backend.n_ctx if memory is short"
            ) from exc

    def sampling_params(self, config: GenerationConfig) -> Any:
        """The ``vllm.SamplingParams`` for ``config``."""
        kwargs: dict[str, Any] = {
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "seed": config.seed,
        }
        if config.logprobs:
            kwargs["logprobs"] = 1
        if config.json_schema is not None:
            kwargs.update(structured_output_kwargs(config.json_schema))
        return self._vllm.SamplingParams(**kwargs)

    def generate(self, prompts: list[Prompt], config: GenerationConfig) -> list[Generation]:
        """One ``LLM.chat`` over all prompts (one pass); one generation per prompt, in input order."""
        if self.llm is None:
            raise BackendError("the vllm backend is closed; build a new one with load_backend()")
        if not prompts:
            return []
        return [self._generation(out, config) for out in self._run(prompts, self.sampling_params(config))]

    def _run(self, prompts: list[Prompt], params: Any) -> list[Any]:
        """One ``LLM.chat`` (or, with ``raw_prompts``, ``LLM.generate`` over the plain texts) of all prompts
        under ``params``: one pass; the request outputs in input order."""
        if self.config.raw_prompts:  # a base model (e.g. selfrag_llama2): plain text, no chat template
            outputs = self.llm.generate(
                [raw_prompt_text(p) for p in prompts],
                sampling_params=params,
                use_tqdm=False,
                lora_request=self._lora_request,
            )
        else:
            outputs = self.llm.chat(
                prompts, sampling_params=params, use_tqdm=False, lora_request=self._lora_request
            )
        if len(outputs) != len(prompts):
            raise BackendError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        self.passes += 1
        return outputs

    def label_token_ids(self, labels: list[str]) -> tuple[list[int], list[str]]:
        """The first token id of each label in the engine's tokenizer, and the labels that are several
        tokens."""
        tokenizer = self.llm.get_tokenizer()
        return first_token_ids(
            lambda t: tokenizer.encode(t, add_special_tokens=False), labels, repr(self.config.model)
        )

    def score_labels(self, prompts: list[Prompt], labels: list[str]) -> list[LabelScores]:
        """One ``LLM.chat`` over all prompts with ``max_tokens=1``, greedy, sampling restricted to the labels'
        first tokens (``allowed_token_ids``) and ``logprobs=LABEL_LOGPROBS``: vLLM reports the model's own
        log-probabilities of the most likely tokens and of the sampled one, so a label outside those gets
        ``-inf``. One pass."""
        if self.llm is None:
            raise BackendError("the vllm backend is closed; build a new one with load_backend()")
        if not prompts:
            return []
        ids, multi = self.label_token_ids(labels)
        params = self._vllm.SamplingParams(
            max_tokens=1, temperature=0.0, logprobs=LABEL_LOGPROBS, allowed_token_ids=sorted(set(ids))
        )
        outputs = self._run(prompts, params)
        scores = []
        for out in outputs:
            positions = out.outputs[0].logprobs or []
            if not positions:
                raise BackendError("vLLM returned no logprobs for a label-scoring request")
            first = positions[0]
            scores.append(
                LabelScores(
                    logprobs=[_logprob(first, i) if i in first else float("-inf") for i in ids],
                    first_token_only=list(multi),
                )
            )
        return scores

    def close(self) -> None:
        """Shut the engine down and free its GPU memory. Idempotent."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        engine = getattr(llm, "llm_engine", None)
        shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
        if callable(shutdown):
            try:
                shutdown()  # V1 engine: stop the engine-core process now rather than at garbage collection
            except Exception:  # best effort; the engine is going away either way
                pass
        del llm, engine, shutdown
        gc.collect()
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a core dependency
            return
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    @staticmethod
    def _generation(request_output: Any, config: GenerationConfig) -> Generation:
        completion = request_output.outputs[0]
        token_ids = list(completion.token_ids or [])
        token_logprobs = None
        if config.logprobs and completion.logprobs is not None:
            token_logprobs = [
                _logprob(position, token) for position, token in zip(completion.logprobs, token_ids)
            ]
        return Generation(
            text=completion.text,
            finish_reason=completion.finish_reason or "stop",
            num_tokens=len(token_ids),
            token_logprobs=token_logprobs,
            constrained=config.json_schema is not None,
        )


def _logprob(position: Any, token_id: int) -> float:
    """Log-probability of the sampled ``token_id`` from one position's ``{token_id: Logprob}`` mapping."""
    entry = position[token_id]
    return float(getattr(entry, "logprob", entry))


def _lora_rank(lora_path: str) -> int | None:
    """The adapter's rank ``r`` from ``adapter_config.json`` (PEFT), or None when unreadable."""
    path = Path(lora_path)
    if not path.exists():
        raise BackendError(
            f"backend.lora_path {lora_path!r} does not exist; point it at a PEFT adapter folder"
        )
    try:
        rank = json.loads((path / "adapter_config.json").read_text()).get("r")
    except (OSError, ValueError, AttributeError):
        return None
    return rank if isinstance(rank, int) else None


@BACKENDS.register("vllm")
def vllm_backend(config: BackendConfig) -> VLLMBackend:
    """Factory registered as ``vllm``; imports vLLM here so a missing extra fails only when chosen."""
    try:
        import vllm
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and exc.name == "vllm"
        raise BackendError(
            VLLM_INSTALL_HINT if missing else f"{VLLM_INSTALL_HINT}; importing vllm failed: {exc}"
        ) from exc
    return VLLMBackend(config, vllm)
