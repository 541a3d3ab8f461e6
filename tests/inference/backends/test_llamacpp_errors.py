"""llama.cpp backend errors that need no llama-cpp-python: the missing extra and non-GGUF models."""

from __future__ import annotations

import sys

import pytest

from inference.backends import BACKENDS, BackendConfig, BackendError, load_backend
from inference.backends.llamacpp import INSTALL_HINT, llamacpp_backend


@pytest.fixture
def fake_gguf(tmp_path):
    """A file with a .gguf name: enough for model resolution, never loaded in these tests."""
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF\x00not a real model")
    return path


def test_registered_under_llamacpp():
    assert BACKENDS.get("llamacpp") is llamacpp_backend


def test_missing_extra_says_how_to_install(monkeypatch, fake_gguf):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` raise ImportError
    with pytest.raises(BackendError) as info:
        load_backend(BackendConfig(name="llamacpp", model=str(fake_gguf)))
    assert str(info.value) == INSTALL_HINT
    assert "pip install 'evidential-rag[llamacpp]'" in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)


@pytest.mark.parametrize(
    ("model", "gguf_file"),
    [
        ("HuggingFaceTB/SmolLM2-135M-Instruct", None),  # hub id: transformers weights, no GGUF
        ("some/local-folder", None),
        ("some/local-folder", "model.safetensors"),  # a file, but not a GGUF one
    ],
)
def test_non_gguf_model_is_rejected(monkeypatch, model, gguf_file):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # the model check comes first, extra or not
    with pytest.raises(BackendError, match="llama.cpp needs a GGUF model file"):
        llamacpp_backend(BackendConfig(name="llamacpp", model=model, gguf_file=gguf_file))


def test_missing_gguf_file_is_reported(tmp_path):
    with pytest.raises(BackendError, match="not found"):
        llamacpp_backend(BackendConfig(name="llamacpp", model=str(tmp_path), gguf_file="absent.gguf"))
    with pytest.raises(BackendError, match="not found"):
        llamacpp_backend(BackendConfig(name="llamacpp", model=str(tmp_path / "absent.gguf")))
