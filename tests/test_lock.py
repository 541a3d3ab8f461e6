"""The dependency lock: it matches pyproject.toml, and the test environment holds exactly its versions."""

from __future__ import annotations

import importlib.util
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _dev():
    spec = importlib.util.spec_from_file_location("dev_script", REPO / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dev = _dev()

PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]

[project]
name = "x"
dependencies = [
    "torch>=2.4",  # a comment
]

[project.optional-dependencies]
dev = ["pytest>=8"]

[tool.pytest.ini_options]
addopts = "-ra"
"""


def test_lock_matches_pyproject():
    assert dev.lock_problem() is None, dev.lock_problem()


def test_hash_follows_dependencies_not_tool_settings(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT, encoding="utf-8")
    base = dev.dependency_hash(path)
    path.write_text(PYPROJECT.replace('"-ra"', '"-ra -q"').replace("# a comment", ""), encoding="utf-8")
    assert dev.dependency_hash(path) == base  # tool settings and comments do not call for a new lock
    for old, new in [
        ("torch>=2.4", "torch>=2.5"),
        ("pytest>=8", "pytest>=9"),
        ("setuptools>=69", "setuptools"),
    ]:
        path.write_text(PYPROJECT.replace(old, new), encoding="utf-8")
        assert dev.dependency_hash(path) != base, (old, new)


def test_stale_or_missing_lock_is_refused_with_the_command_to_run(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(PYPROJECT, encoding="utf-8")
    lock = tmp_path / "requirements-lock.txt"
    assert "run `python3 dev.py lock`" in dev.lock_problem(pyproject, lock)
    lock.write_text("torch==2.13.0\n", encoding="utf-8")
    assert "has no" in dev.lock_problem(pyproject, lock)
    lock.write_text(f"{dev.HASH_LINE}{dev.dependency_hash(pyproject)}\ntorch==2.13.0\n", encoding="utf-8")
    assert dev.lock_problem(pyproject, lock) is None
    pyproject.write_text(PYPROJECT.replace("torch>=2.4", "torch>=2.5"), encoding="utf-8")
    assert "changed since" in dev.lock_problem(pyproject, lock)


def test_installed_versions_are_the_locked_ones():
    pins = dev.locked_pins()
    assert {"transformers", "peft", "llama-cpp-python", "pytest", "pytest-xdist"} <= set(pins)
    assert "torch" not in pins  # installed first from TORCH_SPEC (the CPU build by default)
    installed = {}
    for name in pins:  # the distribution import finds first (not vendored copies further down sys.path)
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    if installed.get("llama-cpp-python") is None:
        pytest.skip(
            "not the locked test environment (llama-cpp-python is missing): run `python3 dev.py test`"
        )
    wrong = {
        name: (version, installed[name])
        for name, version in pins.items()
        if installed.get(name, version) != version
    }
    assert not wrong, f"installed versions differ from requirements-lock.txt (locked, installed): {wrong}"
