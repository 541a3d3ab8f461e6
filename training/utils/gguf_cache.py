"""Dequantized copies of GGUF models for transformers, converted once and kept on disk.

transformers reads a GGUF file by dequantizing every tensor and rebuilding the tokenizer in Python on every
load, which is slow. :func:`dequantized_gguf` does it once and saves the result as an ordinary transformers
folder (float32 safetensors, tokenizer files, chat template), which loads like any transformers checkpoint,
with the same weights and tokenizer, bit for bit.

The copies live under ``$EVIDENTIAL_RAG_CACHE`` (default ``$XDG_CACHE_HOME/evidential-rag``, else
``~/.cache/evidential-rag``), in ``gguf/<file stem>-<key>/``; the key hashes the GGUF file's resolved path, size
and modification time and the transformers version, so a changed file or library makes a new copy. A copy is
written to a temporary folder and renamed into place when complete: an interrupted conversion never leaves
a folder that looks finished, and two processes converting at once both end with the same complete copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from evidential.errors import ConfigError

__all__ = ["CACHE_ENV", "cache_root", "dequantized_gguf"]

CACHE_ENV = "EVIDENTIAL_RAG_CACHE"
_DONE = "evidential-rag-gguf.json"  # written last: a folder without it is not a finished copy


def cache_root() -> Path:
    """The folder that holds the project's caches (see the module docstring for how it is chosen)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "evidential-rag"


def _key(src: Path) -> str:
    import transformers

    stat = src.stat()
    text = f"{src.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def dequantized_gguf(folder: str | Path, gguf_file: str) -> Path:
    """The folder of a transformers copy of ``folder/gguf_file``, converting the GGUF file the first time.

    Returns:
        A folder that ``AutoTokenizer.from_pretrained`` and ``AutoModelForCausalLM.from_pretrained`` load
        without ``gguf_file``, with float32 weights (pass ``dtype`` to load them in another precision).

    Raises:
        OSError, ValueError: transformers cannot read the GGUF file (as from ``from_pretrained``).
        ConfigError: The cache folder cannot be written; the message names it and the variable to set.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = Path(folder) / gguf_file
    if not src.is_file():
        raise OSError(f"GGUF file {src} not found")
    target = cache_root() / "gguf" / f"{src.stem}-{_key(src)}"
    if (target / _DONE).is_file():
        return target
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:  # the weights are plain float tensors now; only transformers' marker remains
        quantizer.remove_quantization_config(model)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        (tmp / _DONE).write_text(json.dumps({"gguf": str(src.resolve())}) + "\n", encoding="utf-8")
        try:
            tmp.rename(target)
        except OSError:
            if not (target / _DONE).is_file():  # not another process's finished copy: a real failure
                raise
    except OSError as exc:
        raise ConfigError(
            f"cannot write the dequantized copy of {src.name} to {target.parent} ({exc}); "
            f"set {CACHE_ENV} to a writable folder"
        ) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
