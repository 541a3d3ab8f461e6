"""Atomic output writing: a half-written file never replaces a good one."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_text", "iter_jsonl", "loads_strict", "rounded", "write_json", "write_jsonl"]


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to a temporary file next to ``path``, fsync it, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> Path:
    return atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def rounded(x: float, digits: int = 6) -> float:
    """A float (or 0-d tensor) rounded for JSON outputs."""
    return round(float(x), digits)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large for a number")
    return value


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses what JSON does not allow: ``NaN``, ``Infinity``, and numbers that overflow
    to infinity (``1e999``). Raises ``ValueError`` (``json.JSONDecodeError`` for malformed text) and
    ``RecursionError`` for nesting deeper than Python's recursion limit."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)


def iter_jsonl(path: Path, what: str, error: type[Exception]) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed value)`` for the non-empty lines of a JSONL file.

    Raises ``error`` naming the file (missing) or the file and line (not UTF-8, invalid JSON, ``NaN`` or
    ``Infinity``, a number too large, nesting too deep); ``what`` describes the expected file in the
    message.
    """
    if not path.is_file():
        raise error(f"{path}: no such {what} file; give the path of a {what} JSONL file")
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise error(f"{path}:{n}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
            if not line.strip():
                continue
            try:
                value = loads_strict(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{n}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            except ValueError as exc:
                raise error(f"{path}:{n}: not valid JSON ({exc})") from None
            except RecursionError:
                raise error(f"{path}:{n}: not valid JSON (nested too deeply)") from None
            yield n, value
