"""Learned-evaluator checkpoints: a standard peft adapter + head weights (safetensors) + config + model card.

Layout of a checkpoint folder::

    adapter/                 peft LoRA adapter (PeftModel.from_pretrained(base_encoder, "adapter"))
    heads.safetensors        evidential and span heads
    learned_config.json      the LearnedModelConfig
    model_card.json          data, metrics, command, versions
    trainer_state.json       (resumable checkpoints only) epoch, step, best metric, RNG states
    optimizer.pt             (resumable checkpoints only) optimizer + scheduler state

Writes are atomic: the folder is written under a temporary name and swapped in with ``os.replace``; a
crash mid-save leaves the previous good checkpoint (and :func:`resolve_checkpoint` recovers it should the
crash fall between the two renames of the swap).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from evidential.errors import ConfigError
from training.learned.model import EvidentialEvaluatorModel, LearnedModelConfig, resolve_encoder
from training.utils.run_metadata import package_versions

__all__ = [
    "CONFIG_FILE",
    "HEADS_FILE",
    "atomic_dir",
    "load_learned_model",
    "resolve_checkpoint",
    "save_checkpoint",
]

CONFIG_FILE = "learned_config.json"
HEADS_FILE = "heads.safetensors"
CARD_FILE = "model_card.json"
REQUIRED = (CONFIG_FILE, HEADS_FILE)


class atomic_dir:
    """Context manager: yields a temporary folder next to ``path`` and swaps it in on success.

    The swap moves the previous ``path`` aside to ``.<name>.old``, renames the new folder into place and
    removes the old one. A process killed between the two renames leaves no ``path`` but a complete
    ``.<name>.old``: :meth:`recover` puts it back.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @staticmethod
    def recover(path: str | Path) -> bool:
        """Restore ``path`` from ``.<name>.old`` when a swap was cut short; returns whether it did."""
        path = Path(path)
        old = path.parent / f".{path.name}.old"
        if not path.exists() and old.is_dir():
            os.replace(old, path)
            return True
        return False

    def __enter__(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.tmp-", dir=self.path.parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        old = self.path.parent / f".{self.path.name}.old"
        if old.exists():
            shutil.rmtree(old)
        if self.path.exists():
            os.replace(self.path, old)
        os.replace(self.tmp, self.path)
        shutil.rmtree(old, ignore_errors=True)


def save_checkpoint(
    path: str | Path,
    model: EvidentialEvaluatorModel,
    *,
    card: dict[str, Any] | None = None,
    trainer_state: dict[str, Any] | None = None,
    optimizer_state: dict[str, Any] | None = None,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write a checkpoint folder atomically (see the module docstring)."""
    from safetensors.torch import save_file

    path = Path(path)
    with atomic_dir(path) as tmp:
        if model.config.use_lora:
            model.encoder.save_pretrained(str(tmp / "adapter"), save_embedding_layers=False)
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in model.head_state_dict().items()},
            str(tmp / HEADS_FILE),
        )
        (tmp / CONFIG_FILE).write_text(json.dumps(model.config.to_dict(), indent=2) + "\n", encoding="utf-8")
        (tmp / CARD_FILE).write_text(
            json.dumps(
                {**(card or {}), "versions": package_versions("torch", "transformers", "peft")},
                indent=2,
                ensure_ascii=False,
            )
            + "\n",
            encoding="utf-8",
        )
        if trainer_state is not None:
            (tmp / "trainer_state.json").write_text(
                json.dumps(trainer_state, indent=2) + "\n", encoding="utf-8"
            )
        if optimizer_state is not None:
            torch.save(optimizer_state, tmp / "optimizer.pt")
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
    return path


def resolve_checkpoint(path: str | Path) -> Path:
    """The checkpoint folder at ``path``: the folder itself, its ``best/`` (a training output folder), or a
    previous copy left by a crash between the two renames of an atomic swap.

    Raises:
        ConfigError: No checkpoint there; the message says which files are missing.
    """
    p = Path(path)
    for cand in (p, p / "best", p.parent / f".{p.name}.old"):
        if all((cand / f).is_file() for f in REQUIRED):
            return cand
    if not p.exists():
        raise ConfigError(
            f"learned-evaluator checkpoint {p} not found; train one with `evidential-rag train`"
        )
    missing = [f for f in REQUIRED if not (p / f).is_file()]
    raise ConfigError(f"{p} is not a learned-evaluator checkpoint: missing {', '.join(missing)}")


def load_learned_model(
    path: str | Path, device: str | torch.device = "cpu", trainable: bool = False, merge: bool = False
) -> EvidentialEvaluatorModel:
    """Load a checkpoint: the base encoder, its peft adapter (``PeftModel.from_pretrained``) and the heads.

    Args:
        path: Checkpoint folder (or a training output folder holding ``best/``).
        device: Where to put the model.
        trainable: Keep the adapter trainable (resuming); otherwise the model is put in eval mode.
        merge: Merge the LoRA weights into the encoder (faster inference; not with ``trainable``).
    """
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModel

    ckpt = resolve_checkpoint(path)
    try:
        raw = json.loads((ckpt / CONFIG_FILE).read_text(encoding="utf-8"))
        config = LearnedModelConfig(**raw)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ConfigError(f"{ckpt / CONFIG_FILE}: not a valid learned-model config ({exc})") from None
    try:
        encoder = AutoModel.from_pretrained(resolve_encoder(config.encoder))
    except OSError as exc:
        raise ConfigError(f"{ckpt}: cannot load its base encoder {config.encoder!r} ({exc})") from None
    if config.use_lora:
        if not (ckpt / "adapter" / "adapter_config.json").is_file():
            raise ConfigError(
                f"{ckpt} is not a learned-evaluator checkpoint: missing adapter/adapter_config.json"
            )
        encoder = PeftModel.from_pretrained(encoder, str(ckpt / "adapter"), is_trainable=trainable)
        if merge and not trainable:
            encoder = encoder.merge_and_unload()
    else:
        encoder.requires_grad_(False)
    model = EvidentialEvaluatorModel(config, encoder=encoder)
    model.load_head_state_dict(load_file(str(ckpt / HEADS_FILE)))
    model.to(device)
    if not trainable:
        model.eval()
    return model
