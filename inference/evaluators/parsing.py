"""Conservative validation and repair of the prompt evaluator's JSON output.

Repairs (each marks the decision ``repaired``): code fences; text before or after the object; single
quotes / Python literals; a truncated object (open string and brackets closed, a dangling member dropped);
numbers as strings; out-of-range evidence clamped to 0-10; unknown keys dropped; unknown claim references
(``C9`` with no C9 in the inventory) dropped; evidence given without a supported claim zeroed.

When repair fails the decision *fails*: stance ``irrelevant``, no claim, evidence 0 — ignorance, never hidden
support — and it is flagged. :func:`parse_decision` never raises.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from inference.evaluators.contract import EVIDENCE_MAX

__all__ = ["ParsedDecision", "parse_decision"]

MAX_CHARS = 20_000
_FIELDS = ("claim", "answer", "stance", "rationale", "evidence")
_STANCE_SYNONYMS = {
    "supports": "supports",
    "support": "supports",
    "supported": "supports",
    "refutes": "refutes",
    "refute": "refutes",
    "refuted": "refutes",
    "irrelevant": "irrelevant",
    "not relevant": "irrelevant",
    "none": "irrelevant",
}
_REF = re.compile(r"^\s*\[?C(\d{1,4})\]?\s*$", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|$)", re.DOTALL)


@dataclass
class ParsedDecision:
    """One chunk decision after validation/repair (see :class:`inference.types.ChunkEvidence`)."""

    claim: str | None = None
    answer: str | None = None
    stance: str = "irrelevant"
    rationale: str = ""
    evidence: float = 0.0
    valid: bool = False
    repaired: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return not self.valid and not self.repaired


def _failed(errors: list[str], msg: str) -> ParsedDecision:
    return ParsedDecision(errors=[*errors, msg])


@dataclass
class _ScanState:
    end: int | None = None  # index of the "}" that closes the first object, when it closes
    mismatch: int | None = None  # index of a closing bracket that does not match
    stack: list[str] = field(default_factory=list)
    quote: str = ""  # the open string's quote character, "" outside strings
    last_comma: int = -1  # last comma at depth 1 outside strings


def _scan(s: str, start: int) -> _ScanState:
    """String-aware bracket scan of ``s`` from ``start`` until the first object closes."""
    st = _ScanState()
    esc = False
    for i in range(start, len(s)):
        ch = s[i]
        if st.quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == st.quote:
                st.quote = ""
            continue
        if ch in "\"'":
            st.quote = ch
        elif ch in "{[":
            st.stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not st.stack or st.stack[-1] != ch:
                st.mismatch = i
                return st
            st.stack.pop()
            if not st.stack:
                st.end = i
                return st
        elif ch == "," and len(st.stack) == 1:
            st.last_comma = i
    return st


def _scan_object(s: str) -> tuple[str, bool]:
    """The first ``{...}`` in ``s`` (string-aware); returns (text, complete). Incomplete objects get closed:
    an open string and open brackets are closed, and if that does not parse, the last (cut) member is dropped."""
    start = s.find("{")
    if start < 0:
        return "", False
    st = _scan(s, start)
    if st.end is not None:
        return s[start : st.end + 1], True
    if st.mismatch is not None:
        return s[start : st.mismatch + 1], False
    closed = s[start:] + st.quote + "".join(reversed(st.stack))
    try:
        json.loads(closed)
        return closed, False
    except (json.JSONDecodeError, RecursionError):
        pass
    if st.last_comma > start:
        trimmed = s[start : st.last_comma]
        inner = _scan(trimmed, 0)
        return trimmed + "".join(reversed(inner.stack)), False
    return closed, False


def _loads_lenient(candidate: str) -> object:
    try:
        return json.loads(candidate)
    except (json.JSONDecodeError, RecursionError):
        pass
    py = re.sub(r"\bnull\b", "None", candidate)
    py = re.sub(r"\btrue\b", "True", py)
    py = re.sub(r"\bfalse\b", "False", py)
    try:
        return ast.literal_eval(py)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def extract_json_object(text: str) -> tuple[object, bool, list[str]]:
    """The lenient JSON extraction shared by the evaluator and the LLM judge: ``(object or None, parsed
    strictly, repair notes / errors)`` — strict JSON first, then a code fence removed, the first balanced
    object scanned (a truncated one closed) and parsed leniently."""
    stripped = text.strip()
    try:
        return json.loads(stripped), True, []
    except (json.JSONDecodeError, RecursionError):
        pass
    errors = ["not strict JSON"]
    m = _FENCE.search(stripped)
    if m:
        stripped = m.group(1)
        errors.append("code fence removed")
    candidate, complete = _scan_object(stripped)
    if not candidate:
        return None, False, [*errors, "no JSON object found"]
    if not complete:
        errors.append("truncated object closed")
    return _loads_lenient(candidate), False, errors


def _as_number(v: object) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def _as_text(v: object) -> tuple[str | None, bool]:
    """(text, coerced) for optional string fields: strings are stripped (empty → None), numbers become
    text (coerced), anything else is dropped (coerced)."""
    if v is None:
        return None, False
    if isinstance(v, str):
        return (v.strip() or None), False
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return (str(int(v)) if float(v).is_integer() else str(v)), True
    return None, True


def parse_decision(text: object, inventory: Sequence[str] = ()) -> ParsedDecision:
    """Validate (and conservatively repair) one evaluator output. Never raises.

    Args:
        text: The model's raw output.
        inventory: The claim inventory shown in the prompt (``C1`` = ``inventory[0]``).

    Returns:
        A :class:`ParsedDecision`; ``failed`` ones carry zero evidence.
    """
    try:
        return _parse(text, inventory)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises"; a bug here must not leak support
        return _failed([], f"parser error: {type(exc).__name__}")


def _parse(text: object, inventory: Sequence[str]) -> ParsedDecision:
    if not isinstance(text, str):
        return _failed([], f"output is {type(text).__name__}, not text")
    if len(text) > MAX_CHARS:
        return _failed([], f"output longer than {MAX_CHARS} characters")
    obj, strict, errors = extract_json_object(text)
    if not isinstance(obj, dict):
        return _failed(errors, "output is not a JSON object")
    repaired = not strict
    extra = [k for k in obj if k not in _FIELDS]
    if extra:
        errors.append(f"unknown keys dropped: {', '.join(map(str, extra[:5]))}")
        repaired = True
    # stance (required)
    stance_raw = obj.get("stance")
    if not isinstance(stance_raw, str):
        return _failed(errors, "missing or non-text stance")
    stance = _STANCE_SYNONYMS.get(stance_raw.strip().lower())
    if stance is None:
        return _failed(errors, f"unknown stance {stance_raw[:40]!r}")
    if stance != stance_raw:
        errors.append("stance normalized")
        repaired = True
    # evidence (required)
    if "evidence" not in obj:
        return _failed(errors, "missing evidence")
    ev = _as_number(obj["evidence"])
    if ev is None or not math.isfinite(ev):
        return _failed(errors, "evidence is not a finite number")
    if not isinstance(obj["evidence"], int) or isinstance(obj["evidence"], bool):
        errors.append("evidence coerced to a number")
        repaired = True
    if ev < 0 or ev > EVIDENCE_MAX:
        errors.append(f"evidence {ev:g} clamped to 0-{EVIDENCE_MAX}")
        ev = min(max(ev, 0.0), float(EVIDENCE_MAX))
        repaired = True
    # optional texts
    fields: dict[str, str | None] = {}
    for key in ("claim", "answer", "rationale"):
        if key not in obj:
            errors.append(f"missing {key}")
            repaired = True
        value, coerced = _as_text(obj.get(key))
        if coerced or (key == "rationale" and key in obj and not isinstance(obj[key], str)):
            errors.append(f"{key} coerced to text or dropped")
            repaired = True
        fields[key] = value
    claim = fields["claim"]
    if claim is not None:
        ref = _REF.match(claim)
        if ref:
            n = int(ref.group(1))
            if 1 <= n <= len(inventory):
                claim = inventory[n - 1]
            else:
                errors.append(f"unknown claim reference {claim!r} dropped")
                claim = None
                repaired = True
        elif len(claim) > 200:
            claim = claim[:200]
            errors.append("claim truncated")
            repaired = True
    rationale = (fields["rationale"] or "")[:300]
    answer = fields["answer"]
    if answer is not None and len(answer) > 100:
        answer, repaired = answer[:100], True
        errors.append("answer truncated")
    # singleton evidence only for a claim the chunk supports
    if stance == "supports" and claim is None and answer is not None and not _REF.match(answer):
        claim = answer
        errors.append("claim taken from answer")
        repaired = True
    if ev > 0 and (stance != "supports" or claim is None):
        errors.append("evidence without a supported claim zeroed")
        ev = 0.0
        repaired = True
    if stance != "supports":
        claim = claim if stance == "refutes" else None
    return ParsedDecision(
        claim, answer, stance, rationale, ev, valid=not repaired, repaired=repaired, errors=errors
    )
