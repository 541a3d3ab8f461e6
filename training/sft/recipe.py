"""TRL SFT recipe for the prompt evaluator: LoRA-fine-tune an instruction LLM on the evaluator's own contract.

Every training pair is (the prompt the prompt evaluator sends for a chunk → the gold JSON reply the contract
asks for), built from annotated chunks (docs/data.md) with the *same* contract the evaluator uses at
inference, so that the adapter drops into it (``evaluator.backend.lora_path``; transformers loads it with
peft, vLLM with a ``LoRARequest``). Loss is on the assistant's JSON only (TRL prompt-completion data with
``completion_only_loss``).

The contract lives in ``inference/evaluators/contract.py``; training never imports inference, so the caller
(the ``evidential-rag train-prompt-evaluator`` command) passes it in as a :class:`PromptContract` of
callables, and resolves ``packaged:`` model names to a local path (:class:`ModelSource`).

Output folder::

    adapter/          a standard peft LoRA adapter (adapter_config.json + adapter_model.safetensors) and a copy
                      of the card; written to a temporary folder and swapped in only when complete
    sft_card.json     model, data, steps, loss curve, config, seed, versions, contract version
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidential.errors import ConfigError
from training.data.annotated import AnnotatedChunk, split_by_question
from training.learned.checkpoint import atomic_dir
from training.trainer.config import DataSourceConfig
from training.trainer.trainer import load_training_rows
from training.utils.configio import apply_overrides, build_dataclass, check_fields, read_yaml_mapping
from training.utils.gguf_cache import dequantized_gguf
from training.utils.io import rounded, write_json
from training.utils.run_metadata import package_versions

__all__ = [
    "ADAPTER_DIR",
    "CARD_FILE",
    "ModelSource",
    "PromptContract",
    "SFTExample",
    "SFTRecipeConfig",
    "build_sft_examples",
    "build_sft_trainer",
    "format_example",
    "load_sft_config",
    "shows_inventory",
    "split_sft_rows",
    "train_prompt_evaluator",
]

ADAPTER_DIR = "adapter"
CARD_FILE = "sft_card.json"
_SCHEDULERS = ("linear", "cosine", "constant", "constant_with_warmup")
_DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class PromptContract:
    """The prompt evaluator's contract as the SFT recipe needs it (passed in by the inference side).

    Attributes:
        version: The contract version (``CONTRACT_VERSION``), recorded in the card: an adapter serves the
            version it was trained on.
        build_prompt: ``(query, chunk_text, inventory) -> chat messages`` (system + user), exactly what the
            evaluator sends.
        gold_output: ``(supported, inventory, *, evidence) -> JSON text``: the contract's reply for a chunk
            that supports ``supported`` (a candidate's text) or nothing (None).
    """

    version: str
    build_prompt: Callable[[str, str, Sequence[str]], list[dict[str, str]]]
    gold_output: Callable[..., str]


@dataclass(frozen=True)
class ModelSource:
    """Where the base model is loaded from: a hub id or local folder, and a GGUF file inside it (dequantized)."""

    path: str
    gguf_file: str | None = None


@dataclass
class SFTRecipeConfig:
    """Everything ``evidential-rag train-prompt-evaluator`` needs (flat: ``--set max_steps=2``)."""

    model: str = field(
        default="packaged:smollm2-135m-instruct",
        metadata={
            "help": "Base instruction LLM: hub id, local folder, .gguf file, or 'packaged:<name>' (a GGUF shipped in "
            "a PyPI package, dequantized). Must have a chat template; the prompt evaluator must use the same model.",
            "must": "be a hub id, a local folder, a .gguf file or 'packaged:<name>'",
        },
    )
    gguf_file: str | None = field(
        default=None, metadata={"help": "GGUF file name inside `model` (dequantized on load)."}
    )
    tokenizer: str | None = field(
        default=None, metadata={"help": "Tokenizer id or folder (null: the model's own)."}
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": "Weights/compute dtype: auto (bfloat16 on a bf16-capable GPU, float32 on CPU), float32, "
            "bfloat16, float16.",
            "choices": _DTYPES,
            "must": "be auto, float32, bfloat16 or float16",
        },
    )
    device: str = field(
        default="auto",
        metadata={
            "help": "'auto' (the GPUs accelerate gives, else CPU) or 'cpu'. Multi-GPU: `accelerate launch`.",
            "choices": ("auto", "cpu"),
            "must": "be 'auto' (GPUs when present) or 'cpu' (choose GPUs with CUDA_VISIBLE_DEVICES or `accelerate launch`)",
        },
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank.", "range": (1, None)})
    lora_alpha: int = field(
        default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r).", "range": (1, None)}
    )
    lora_dropout: float = field(
        default=0.05, metadata={"help": "Dropout on the LoRA branch.", "range": (0.0, 1.0), "ends": "[)"}
    )
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata={
            "help": "Module name suffixes that get LoRA adapters (Llama-style names; vLLM serves adapters on "
            "these and on gate/up/down_proj)."
        },
    )
    lora_layers: list[int] | None = field(
        default=None,
        metadata={
            "help": "Decoder layers that get adapters (null: all). Only the top layers: no backward pass "
            "through the rest (much faster on CPU)."
        },
    )
    learning_rate: float = field(
        default=2e-4,
        metadata={"help": "AdamW learning rate of the adapters.", "range": (0.0, 1.0), "ends": "()"},
    )
    lr_scheduler: str = field(
        default="cosine",
        metadata={"help": f"Learning-rate schedule: {', '.join(_SCHEDULERS)}.", "choices": _SCHEDULERS},
    )
    warmup_ratio: float = field(
        default=0.03,
        metadata={"help": "Share of steps with linear warm-up.", "range": (0.0, 1.0), "ends": "[)"},
    )
    weight_decay: float = field(
        default=0.0, metadata={"help": "AdamW weight decay.", "range": (0.0, 1.0), "ends": "[)"}
    )
    max_grad_norm: float = field(
        default=1.0, metadata={"help": "Gradient-norm clip (0: off).", "range": (0.0, None)}
    )
    epochs: float = field(
        default=1.0,
        metadata={
            "help": "Passes over the training examples (ignored when max_steps is set).",
            "range": (0.0, 1000.0),
            "ends": "(]",
        },
    )
    max_steps: int | None = field(
        default=None,
        metadata={
            "help": "Stop after this many optimizer steps (null: run `epochs`).",
            "range": (1, None),
            "null": "run `epochs`",
        },
    )
    batch_size: int = field(
        default=1, metadata={"help": "Examples per device per forward pass.", "range": (1, None)}
    )
    grad_accumulation: int = field(
        default=8,
        metadata={
            "help": "Forward passes per optimizer step (effective batch = batch_size × this × processes).",
            "range": (1, None),
        },
    )
    max_seq_length: int = field(
        default=1024,
        metadata={
            "help": "Longest prompt + reply in tokens; longer examples are dropped (counted in the card), never "
            "truncated (a cut reply would teach broken JSON).",
            "range": (64, None),
        },
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata={"help": "Recompute activations in the backward pass (saves GPU memory, costs time)."},
    )
    completion_only_loss: bool = field(
        default=True,
        metadata={
            "help": "Loss on the assistant's JSON reply only (the prompt tokens get label -100); false trains "
            "on the whole sequence."
        },
    )
    seed: int = field(
        default=0,
        metadata={"help": "Seed of LoRA initialisation, shuffling and dropout.", "range": (0, None)},
    )
    data: list[DataSourceConfig] = field(
        default_factory=list,
        metadata={
            "help": "Annotated-chunk sources (same format as `evidential-rag train`): merged, split by question, "
            "SFT on the train split only."
        },
    )
    validation_fraction: float = field(
        default=0.2,
        metadata={
            "help": "Share of questions held out (same split as the learned evaluator with the same seed).",
            "range": (0.0, 1.0),
            "ends": "[)",
        },
    )
    split_seed: int = field(
        default=0, metadata={"help": "Seed of the deterministic split by question.", "range": (0, None)}
    )
    max_train_examples: int | None = field(
        default=None,
        metadata={
            "help": "Train on a seeded random subset of at most this many chunks (null: all).",
            "range": (1, None),
            "null": "all",
        },
    )
    max_chunk_chars: int = field(
        default=4000,
        metadata={
            "help": "Chunks are cut to this many characters in the prompt; use the evaluator's "
            "evaluator.max_chunk_chars so training and inference prompts match.",
            "range": (100, None),
        },
    )
    empty_inventory_fraction: float = field(
        default=0.5,
        metadata={
            "help": "Share of examples shown with an empty claim inventory (the reply then writes the claim out, "
            "rule 3) — the pipeline's default when no candidates are given; the others list the candidates "
            "(the reply refers to C<n>, rule 4).",
            "range": (0.0, 1.0),
        },
    )
    support_evidence: int = field(
        default=10,
        metadata={
            "help": "Evidence (1-10) in the gold reply of a supporting chunk; 10 = explicit statement (rule 5).",
            "range": (1, 10),
        },
    )
    logging_steps: int = field(
        default=1,
        metadata={
            "help": "Record the training loss every N optimizer steps (loss curve).",
            "range": (1, None),
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.device == "cpu" and self.dtype == "float16":
            raise ConfigError("dtype float16 needs a GPU; use float32 (or bfloat16) with device cpu")
        if (
            not isinstance(self.lora_target_modules, list)
            or not self.lora_target_modules
            or not all(isinstance(m, str) and m for m in self.lora_target_modules)
        ):
            raise ConfigError(
                f"lora_target_modules must be a non-empty list of module names (e.g. [q_proj, v_proj]); "
                f"got {self.lora_target_modules!r}"
            )
        if self.lora_layers is not None and (
            not isinstance(self.lora_layers, list)
            or not self.lora_layers
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in self.lora_layers)
        ):
            raise ConfigError(
                f"lora_layers must be null or a non-empty list of layer indices >= 0; got {self.lora_layers!r}"
            )
        if not self.data:
            raise ConfigError("data must list at least one source (e.g. {name: ramdocs, path: ...})")
        for i, src in enumerate(self.data):
            if src.name == "ramdocs" and src.options.get("labeling", "stance") != "stance":
                raise ConfigError(
                    f"data[{i}].options.labeling must be 'stance' for SFT: the contract tells the model to report the "
                    "answer a chunk states (rule 3), and credibility labels would teach it to call misinformation "
                    "documents irrelevant"
                )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_sft_config(path: str | Path, overrides: Sequence[str] = ()) -> SFTRecipeConfig:
    """Read an SFT recipe (a YAML path or a name in ``configs/``) with ``key=value`` overrides."""
    return build_dataclass(SFTRecipeConfig, apply_overrides(read_yaml_mapping(path), list(overrides)), "")


# --------------------------------------------------------------------------------------------- data


@dataclass
class SFTExample:
    """One training pair and where it came from."""

    prompt: list[dict[str, str]]
    completion: str
    supported: str | None
    inventory: list[str]
    source_dataset: str | None = None
    doc_type: str | None = None

    def to_trl(self) -> dict[str, Any]:
        """TRL's conversational prompt-completion format."""
        return {"prompt": self.prompt, "completion": [{"role": "assistant", "content": self.completion}]}


def shows_inventory(row: AnnotatedChunk, empty_fraction: float, seed: int = 0) -> bool:
    """Whether ``row``'s prompt lists its candidates (deterministic in the query, chunk and seed)."""
    if empty_fraction <= 0:
        return True
    if empty_fraction >= 1:
        return False
    digest = hashlib.sha256(f"{seed}\x00{row.key}\x00{row.chunk}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 >= empty_fraction


def format_example(
    row: AnnotatedChunk,
    contract: PromptContract,
    *,
    show_inventory: bool = True,
    max_chunk_chars: int = 4000,
    support_evidence: int = 10,
) -> SFTExample:
    """The (prompt, gold reply) pair of one annotated chunk under the contract.

    The prompt is ``contract.build_prompt(query, chunk[:max_chunk_chars], inventory)`` — what the prompt
    evaluator sends — with the row's candidates as the inventory (or none). The reply supports the labelled
    candidate with ``support_evidence`` (stance ``supports``), or is ``irrelevant`` when the label is null.

    Raises:
        ValueError: A row without a human label (only a teacher's evidence).
    """
    if not getattr(row, "labelled", True):
        raise ValueError("an SFT example needs a human label; this row carries only teacher evidence")
    inventory = list(row.candidates) if show_inventory else []
    supported = row.candidates[row.label] if row.label is not None else None
    return SFTExample(
        prompt=contract.build_prompt(row.query, row.chunk[:max_chunk_chars], inventory),
        completion=contract.gold_output(supported, inventory, evidence=support_evidence),
        supported=supported,
        inventory=inventory,
        source_dataset=row.source_dataset,
        doc_type=row.doc_type,
    )


def build_sft_examples(
    rows: Sequence[AnnotatedChunk], contract: PromptContract, config: SFTRecipeConfig
) -> list[SFTExample]:
    """Format ``rows`` (already the train split) under the contract, with the config's inventory mix."""
    return [
        format_example(
            r,
            contract,
            show_inventory=shows_inventory(r, config.empty_inventory_fraction, config.seed),
            max_chunk_chars=config.max_chunk_chars,
            support_evidence=config.support_evidence,
        )
        for r in rows
    ]


def split_sft_rows(
    config: SFTRecipeConfig,
) -> tuple[list[AnnotatedChunk], list[AnnotatedChunk], list[AnnotatedChunk]]:
    """(all rows, train split, validation split) of the configured sources; SFT uses the train split only,
    the validation split is held back (same split as the learned evaluator with the same seed)."""
    # the learned trainer's loader reads the same DataSourceConfig list (it only looks at `data`)

    rows = load_training_rows(config)  # type: ignore[arg-type]
    train, val = split_by_question(rows, config.validation_fraction, config.split_seed)
    return rows, train, val


# ------------------------------------------------------------------------------------------ trainer


def _resolve_dtype(torch, name: str, device: str):
    if name != "auto":
        return getattr(torch, name)
    if device != "cpu" and torch.cuda.is_available():
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def _token_length(tokenizer, ex: SFTExample) -> int:
    ids = tokenizer.apply_chat_template(
        [*ex.prompt, {"role": "assistant", "content": ex.completion}], tokenize=True, return_dict=False
    )
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


@dataclass
class _Prepared:
    trainer: Any
    examples: list[SFTExample]
    data: dict[str, Any]
    dtype: str


def build_sft_trainer(
    config: SFTRecipeConfig,
    contract: PromptContract,
    work_dir: str | Path,
    *,
    model_source: ModelSource | None = None,
    progress: bool = True,
) -> _Prepared:
    """Load rows, split by question, format the train split, load the model and build the TRL trainer.

    Args:
        config: The recipe.
        contract: The prompt evaluator's contract (see :class:`PromptContract`).
        work_dir: Scratch folder for the trainer (nothing is checkpointed there).
        model_source: Where to load ``config.model`` from (the CLI resolves ``packaged:`` names); default: the
            configured name as a hub id / folder.
        progress: Show TRL's progress bar.

    Returns:
        The trainer (``.train()`` not called yet), the formatted examples and a data summary for the card.
    """
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTTrainer

    if model_source is None:
        if config.model.startswith("packaged:"):
            raise ConfigError(
                f"model {config.model!r} is a packaged model: resolve it to a local path first "
                "(the train-prompt-evaluator command does) and pass model_source"
            )
        model_source = ModelSource(config.model, config.gguf_file)
    rows, train_rows, val_rows = split_sft_rows(config)
    n_split = len(train_rows)
    train_rows, n_unlabelled = _labelled_train_rows(train_rows, config)
    tokenizer, model_path = _load_tokenizer(config, model_source)
    examples = build_sft_examples(train_rows, contract, config)
    lengths = [_token_length(tokenizer, ex) for ex in examples]
    kept = [ex for ex, n in zip(examples, lengths) if n <= config.max_seq_length]
    if not kept:
        raise ConfigError(
            f"every training example is longer than max_seq_length={config.max_seq_length} tokens "
            f"(shortest {min(lengths)}); raise max_seq_length or lower max_chunk_chars"
        )

    use_cpu = config.device == "cpu" or not torch.cuda.is_available()
    dtype = _resolve_dtype(torch, config.dtype, "cpu" if use_cpu else "cuda")
    try:
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"could not load model {config.model!r} ({model_path}): {str(exc).splitlines()[0]}"
        ) from None
    trainer = SFTTrainer(
        model=model,
        args=_sft_args(config, work_dir, use_cpu, dtype, progress),
        train_dataset=Dataset.from_list([ex.to_trl() for ex in kept]),
        processing_class=tokenizer,
        peft_config=_lora_config(config),
    )
    kept_lengths = [n for n in lengths if n <= config.max_seq_length]
    data = {
        "sources": [dataclasses.asdict(s) for s in config.data],
        "rows": len(rows),
        "train_rows": n_split,
        "validation_rows": len(val_rows),
        "validation_fraction": config.validation_fraction,
        "split_seed": config.split_seed,
        "unlabelled_skipped": n_unlabelled,
        "subsampled_to": len(train_rows) if len(train_rows) < n_split - n_unlabelled else None,
        "examples": len(kept),
        "dropped_longer_than_max_seq_length": len(examples) - len(kept),
        "by_dataset": dict(Counter(ex.source_dataset or "annotated" for ex in kept)),
        "by_stance": dict(Counter("supports" if ex.supported is not None else "irrelevant" for ex in kept)),
        "empty_inventory": sum(1 for ex in kept if not ex.inventory),
        "tokens": {"mean": rounded(sum(kept_lengths) / len(kept), 1), "max": max(kept_lengths)},
    }
    return _Prepared(trainer, kept, data, str(dtype).replace("torch.", ""))


def _labelled_train_rows(train_rows: list, config: SFTRecipeConfig) -> tuple[list, int]:
    """The labelled rows of the train split (subsampled to ``max_train_examples``) and how many were
    unlabelled: rows with only a teacher's evidence (from ``distill``) have no gold reply."""
    labelled = [r for r in train_rows if getattr(r, "labelled", True)]
    if not labelled:
        raise ConfigError(
            "the train split holds no labelled rows: lower validation_fraction or add annotated data"
        )
    if config.max_train_examples is not None and len(labelled) > config.max_train_examples:
        keep = sorted(random.Random(config.seed).sample(range(len(labelled)), config.max_train_examples))
        labelled = [labelled[i] for i in keep]
    return labelled, len(train_rows) - sum(1 for r in train_rows if getattr(r, "labelled", True))


def _load_tokenizer(config: SFTRecipeConfig, model_source: ModelSource) -> tuple[Any, str]:
    """``(tokenizer, model path)``; a GGUF source is dequantized once into a cached transformers folder
    and then loaded like any other."""
    from transformers import AutoTokenizer

    model_path, tok_path = model_source.path, config.tokenizer or model_source.path
    try:
        if model_source.gguf_file:
            model_path = str(dequantized_gguf(model_source.path, model_source.gguf_file))
            tok_path = config.tokenizer or model_path
        tokenizer = AutoTokenizer.from_pretrained(tok_path)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"could not load the tokenizer of {tok_path!r}: {str(exc).splitlines()[0]} "
            "(offline, name a local folder, a .gguf file or a packaged model)"
        ) from None
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(
            f"{tok_path!r} has no chat template; the prompt evaluator needs an instruction model"
        )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, model_path


def _lora_config(config: SFTRecipeConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        layers_to_transform=list(config.lora_layers) if config.lora_layers else None,
        bias="none",
        task_type="CAUSAL_LM",
    )


def _sft_args(
    config: SFTRecipeConfig, work_dir: str | Path, use_cpu: bool, dtype: Any, progress: bool
) -> Any:
    """TRL's :class:`~trl.SFTConfig` for the recipe: no checkpoints or evaluation inside the trainer."""
    import torch
    from trl import SFTConfig

    half = dtype in (torch.bfloat16, torch.float16)
    return SFTConfig(
        output_dir=str(work_dir),
        max_steps=config.max_steps if config.max_steps is not None else -1,
        num_train_epochs=float(config.epochs),
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accumulation,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler,
        warmup_steps=float(config.warmup_ratio),
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        logging_steps=config.logging_steps,
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        seed=config.seed,
        data_seed=config.seed,
        use_cpu=use_cpu,
        bf16=half and dtype == torch.bfloat16,
        fp16=half and dtype == torch.float16,
        optim="adamw_torch",
        gradient_checkpointing=config.gradient_checkpointing,
        max_length=config.max_seq_length,
        completion_only_loss=config.completion_only_loss,
        packing=False,
        disable_tqdm=not progress,
        dataloader_num_workers=0,
    )


def train_prompt_evaluator(
    config: SFTRecipeConfig,
    output: str | Path,
    contract: PromptContract,
    *,
    model_source: ModelSource | None = None,
    command: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the SFT recipe and write ``OUTPUT/adapter`` (peft LoRA adapter) and ``OUTPUT/sft_card.json``.

    The adapter is written to a temporary folder and swapped in when complete, so an interrupted or failed
    run never replaces a good adapter. Under ``accelerate launch`` only the main process writes.

    Returns:
        The card (also written to disk).
    """
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} exists and is not a folder")
    output.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".sft-work-", dir=output))
    try:
        prepared = build_sft_trainer(config, contract, scratch, model_source=model_source, progress=progress)
        trainer = prepared.trainer
        t0 = time.perf_counter()
        result = trainer.train()
        elapsed = time.perf_counter() - t0
        curve = [
            {
                "step": h["step"],
                "loss": rounded(h["loss"]),
                "learning_rate": rounded(h.get("learning_rate", 0.0), 9),
                **({"grad_norm": rounded(h["grad_norm"])} if "grad_norm" in h else {}),
            }
            for h in trainer.state.log_history
            if "loss" in h and "step" in h
        ]
        card = {
            "kind": "prompt-evaluator-sft",
            "contract_version": contract.version,
            "model": {
                "name": config.model,
                "path": (model_source.path if model_source else config.model),
                "gguf_file": model_source.gguf_file if model_source else config.gguf_file,
                "tokenizer": config.tokenizer,
                "dtype": prepared.dtype,
            },
            "use_with": {
                "evaluator.name": "prompt",
                "evaluator.backend.model": config.model,
                "evaluator.backend.lora_path": str(output / ADAPTER_DIR),
                "evaluator.max_chunk_chars": config.max_chunk_chars,
            },
            "data": prepared.data,
            "steps": int(trainer.state.global_step),
            "epochs_run": rounded(trainer.state.epoch or 0.0, 4),
            "effective_batch": config.batch_size * config.grad_accumulation * trainer.args.world_size,
            "train_loss": rounded(result.training_loss),
            "final_loss": curve[-1]["loss"] if curve else None,
            "loss_curve": curve,
            "train_seconds": rounded(elapsed, 2),
            "processes": trainer.args.world_size,
            "device": str(trainer.args.device),
            "config": config.to_dict(),
            "seed": config.seed,
            "command": command,
            "versions": package_versions(
                "python", "torch", "transformers", "trl", "peft", "accelerate", "datasets"
            ),
        }
        if trainer.is_world_process_zero():
            with atomic_dir(output / ADAPTER_DIR) as tmp:
                trainer.model.save_pretrained(str(tmp))
                write_json(tmp / CARD_FILE, card)
            write_json(output / CARD_FILE, card)
        return card
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
