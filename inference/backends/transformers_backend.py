"""Hugging Face transformers backend: hub ids, local folders and GGUF files (dequantized once and cached:
:func:`training.utils.gguf_cache.dequantized_gguf`).

Batched generation with left padding over the chat-templated prompts: one ``generate`` call per batch is one
batched pass. JSON-schema-constrained decoding uses xgrammar's logits processor when the ``xgrammar``
package is importable (it works offline: the grammar is compiled from the tokenizer); otherwise outputs
are free text and the caller validates and repairs them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
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
from training.utils.gguf_cache import dequantized_gguf

__all__ = ["TransformersBackend", "transformers_backend"]


def _pick_dtype(torch, name: str, device: str):
    if name != "auto":
        return getattr(torch, name)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    cap = str(torch.backends.cpu.get_cpu_capability()).upper()
    # bf16 only where the CPU computes it natively (AVX512-BF16 / AMX); elsewhere it is slower than fp32
    return torch.bfloat16 if ("AMX" in cap or "BF16" in cap) else torch.float32


class TransformersBackend:
    """A causal LM from transformers. See :class:`inference.backends.base.Backend`."""

    name = "transformers"

    def __init__(self, config: BackendConfig) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.passes = 0
        ref = resolve_model(config.model, config.gguf_file)
        self.model_ref = ref
        device = config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.dtype = _pick_dtype(torch, config.dtype, device)
        try:
            # a GGUF file is dequantized once into a cached transformers folder (27 s -> < 1 s per load)
            path = dequantized_gguf(ref.path, ref.gguf_file) if ref.gguf_file else ref.path
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"transformers could not load {config.model!r} ({ref.path}{'/' + ref.gguf_file if ref.gguf_file else ''}): "
                f"{str(exc).splitlines()[0]}. Give a local folder, a .gguf file, 'packaged:smollm2-135m-instruct', "
                "or a hub id that is cached (no hub is reachable offline)."
            ) from None
        if config.lora_path:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, config.lora_path)
        self.model.to(device).eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if not config.raw_prompts and not getattr(self.tokenizer, "chat_template", None):
            raise BackendError(
                f"{config.model!r} has no chat template; the evaluator needs an instruction (chat) model "
                "(for a base model whose prompts are plain text, set backend.raw_prompts: true)"
            )
        self._grammar_cache: dict[str, Any] = {}
        self._xgr_tokenizer_info = None
        try:
            import xgrammar  # noqa: F401

            self.supports_json_schema = True
        except ImportError:
            self.supports_json_schema = False

    def _logits_processor(self, schema: dict) -> Any:
        import xgrammar as xgr

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammar_cache:
            if self._xgr_tokenizer_info is None:
                vocab = getattr(self.model.config, "vocab_size", None) or len(self.tokenizer)
                self._xgr_tokenizer_info = xgr.TokenizerInfo.from_huggingface(
                    self.tokenizer, vocab_size=vocab
                )
            compiler = xgr.GrammarCompiler(self._xgr_tokenizer_info)
            # compile from the schema as written: the property order is the order the model fills them in
            self._grammar_cache[key] = compiler.compile_json_schema(
                json.dumps(schema), any_whitespace=False, strict_mode=True
            )
        return xgr.contrib.hf.LogitsProcessor(self._grammar_cache[key])

    def _encode(self, prompts: list[Prompt]) -> Any:
        texts = [
            raw_prompt_text(p)
            if self.config.raw_prompts
            else self.tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
            for p in prompts
        ]
        return self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(
            self.device
        )

    def _generate_kwargs(self, config: GenerationConfig) -> dict[str, Any]:
        """``model.generate`` keyword arguments of ``config`` (seeds torch when sampling)."""
        import torch

        kwargs: dict[str, Any] = {
            "max_new_tokens": config.max_tokens,
            "do_sample": config.temperature > 0,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if config.temperature > 0:
            kwargs["temperature"] = config.temperature
            torch.manual_seed(config.seed)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if config.json_schema is not None and self.supports_json_schema:
            # one processor per sequence: xgrammar's HF processor keeps a matcher per batch row
            kwargs["logits_processor"] = [self._logits_processor(config.json_schema)]
        return kwargs

    def generate(self, prompts: list[Prompt], config: GenerationConfig) -> list[Generation]:
        """One batched pass over all prompts (left-padded)."""
        import torch

        if not prompts:
            return []
        enc = self._encode(prompts)
        constrained = config.json_schema is not None and self.supports_json_schema
        kwargs = self._generate_kwargs(config)
        kwargs.update(return_dict_in_generate=True, output_scores=config.logprobs)
        with torch.inference_mode():
            out = self.model.generate(**enc, **kwargs)
        self.passes += 1
        new = out.sequences[:, enc["input_ids"].shape[1] :]
        logprobs = None
        if config.logprobs:
            steps = torch.stack(out.scores, 1).float().log_softmax(-1)  # [B, T, V]
            logprobs = steps.gather(-1, new[:, : steps.shape[1], None]).squeeze(-1)
        eos = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}
        gens = []
        for i in range(new.shape[0]):
            ids = new[i].tolist()
            n = next((j for j, t in enumerate(ids) if t in eos), len(ids))
            finish = "stop" if n < len(ids) else "length"
            gens.append(
                Generation(
                    text=self.tokenizer.decode(ids[:n], skip_special_tokens=True),
                    finish_reason=finish,
                    num_tokens=n,
                    token_logprobs=logprobs[i, :n].tolist() if logprobs is not None else None,
                    constrained=constrained,
                )
            )
        return gens

    def label_token_ids(self, labels: list[str]) -> tuple[list[int], list[str]]:
        """The first token id of each label as this tokenizer encodes it at the start of a reply, and the
        labels that are several tokens."""
        return first_token_ids(
            lambda t: self.tokenizer.encode(t, add_special_tokens=False), labels, repr(self.config.model)
        )

    def score_labels(self, prompts: list[Prompt], labels: list[str]) -> list[LabelScores]:
        """One batched forward pass over all prompts (left-padded, no ``generate``): the log-softmax of the
        logits at each prompt's last position, read at the labels' first tokens. Position ids follow the
        attention mask, as in ``generate``, so a padded prompt scores as it does alone."""
        import torch

        if not prompts:
            return []
        ids, multi = self.label_token_ids(labels)
        enc = self._encode(prompts)
        mask = enc["attention_mask"]
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            logits = self.model(**enc, position_ids=positions, logits_to_keep=1).logits[:, -1, :]
        self.passes += 1
        rows = logits.float().log_softmax(-1)[:, ids].tolist()
        return [LabelScores(logprobs=row, first_token_only=list(multi)) for row in rows]

    def stream(
        self, prompt: Prompt, config: GenerationConfig, cancel: threading.Event | None = None
    ) -> Iterator[str | Generation]:
        """Generate one completion for one prompt and yield its text as it is decoded, then the finished
        :class:`Generation` (one pass). The tokens are those of ``generate([prompt], config)``: the same
        call, with transformers' ``TextIteratorStreamer`` reading the new tokens in this thread while
        ``model.generate`` runs in another. Setting ``cancel`` stops generation after the current token
        (``finish_reason`` ``"cancelled"``).

        Raises:
            BackendError: ``model.generate`` failed (the message of its exception).
        """
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        stop = cancel if cancel is not None else threading.Event()

        class _Cancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kw):
                flag = stop.is_set()
                return torch.full((input_ids.shape[0],), flag, dtype=torch.bool, device=input_ids.device)

        enc = self._encode([prompt])
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        kwargs = self._generate_kwargs(config)
        kwargs.update(streamer=streamer, stopping_criteria=StoppingCriteriaList([_Cancelled()]))
        result: dict[str, Any] = {}

        def run() -> None:
            try:
                with torch.inference_mode():
                    result["ids"] = self.model.generate(**enc, **kwargs)[0, enc["input_ids"].shape[1] :]
            except Exception as exc:  # re-raised in the caller's thread
                result["error"] = exc
                streamer.end()

        worker = threading.Thread(target=run, name="transformers-stream", daemon=True)
        worker.start()
        pieces, done = [], False
        try:
            for piece in streamer:
                if piece:
                    pieces.append(piece)
                    yield piece
            done = True
        finally:
            if not done:
                stop.set()  # the consumer stopped early: let generate stop too
            worker.join()
        if "error" in result:
            raise BackendError(f"transformers generation failed: {result['error']}") from result["error"]
        self.passes += 1
        ids = result["ids"].tolist()
        eos = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}
        n = next((j for j, t in enumerate(ids) if t in eos), len(ids))
        # an end-of-sequence token: stop; all max_tokens generated: length; otherwise cancel stopped it
        finish = "stop" if n < len(ids) else "length" if len(ids) >= config.max_tokens else "cancelled"
        yield Generation(
            text="".join(pieces),
            finish_reason=finish,
            num_tokens=n,
            constrained=config.json_schema is not None and self.supports_json_schema,
        )

    def close(self) -> None:
        self.model = None
        self._grammar_cache.clear()

    def __enter__(self) -> TransformersBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@BACKENDS.register("transformers")
def transformers_backend(config: BackendConfig) -> TransformersBackend:
    return TransformersBackend(config)
