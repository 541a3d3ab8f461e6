"""Run metadata written next to artifacts (checkpoint cards, index manifests, reports): package versions."""

from __future__ import annotations

import functools
import importlib.metadata as md
import platform

import evidential

__all__ = ["package_versions"]

NOT_INSTALLED = "not installed"


@functools.cache
def _distributions_of(module: str) -> tuple[str, ...]:
    return tuple(md.packages_distributions().get(module, ()))


def _version(name: str) -> str:
    if name == "python":
        return platform.python_version()
    if name == "evidential-rag":  # the code that is imported, also when run from a checkout
        return evidential.__version__
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        pass
    for dist in _distributions_of(name.replace("-", "_")):  # an import name, e.g. faiss -> faiss-cpu
        try:
            return md.version(dist)
        except md.PackageNotFoundError:  # pragma: no cover - a stale mapping entry
            continue
    return NOT_INSTALLED


def package_versions(*names: str) -> dict[str, str]:
    """``{name: version}`` of the named packages, in the order given, without importing them.

    A name is a distribution name (``torch``, ``sentence-transformers``), an import name whose
    distribution is named differently (``faiss`` for ``faiss-cpu``), ``python`` (the interpreter's
    version) or ``evidential-rag`` (this project's ``evidential.__version__``). Packages that are not
    installed map to ``"not installed"``.

    >>> package_versions("python")["python"].count(".")
    2
    >>> package_versions("no-such-package-xyz")
    {'no-such-package-xyz': 'not installed'}
    """
    return {name: _version(name) for name in names}
