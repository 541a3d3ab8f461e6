"""Conservative validation and repair of the prompt evaluator's JSON output.

Repairs (each marks the decision ``repaired``): code fences; text before or after the object; single
quotes / Python literals, and a truncated object (open string and brackets closed, a dangling member
dropped), both by :mod:`json_repair`;
numbers as strings; out-of-range evidence clamped to 0-10; unknown keys dropped; unknown claim references
(``C9`` with no C9 in the inventory) dropped; evidence given without a supported claim zeroed.

When repair fails the decision *fails*: stance ``irrelevant``, no claim, evidence 0 — ignorance, never hidden
support — and it is flagged. :func:`parse_decision` never raises.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import json_repair

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


# Deeper nesting than this is never an evaluator decision (the schema is flat); such text fails at once
# instead of going to the repairer, which is slow on thousands of unclosed brackets.
MAX_DEPTH = 32


def _first_object(s: str) -> tuple[str, bool, bool]:
    """The first ``{...}`` in ``s`` (string-aware): ``(text, complete, too deep)``. A truncated object runs
    to the end of ``s``; one cut by a mismatched closing bracket runs to that bracket."""
    start = s.find("{")
    if start < 0:
        return "", False, False
    st = _scan(s, start)
    if st.end is not None:
        return s[start : st.end + 1], True, False
    if st.mismatch is not None:
        return s[start : st.mismatch + 1], False, False
    return s[start:], False, len(st.stack) > MAX_DEPTH


# a member cut before its value: `"key":` at the end, or `, "key"` without a colon
_DANGLING = re.compile(r'(?:,\s*"(?:[^"\\]|\\.)*"\s*|,?\s*"(?:[^"\\]|\\.)*"\s*:\s*)$')


def _repair(candidate: str) -> object:
    """``candidate`` parsed by :mod:`json_repair` (single quotes, Python literals, an open string or open
    brackets closed, a dangling member dropped); None when it yields no object."""
    try:
        obj = json_repair.loads(candidate, skip_json_loads=True)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, list):  # the repairer read more than one value: keep the first object
        obj = next((o for o in obj if isinstance(o, dict)), None)
    return obj if isinstance(obj, dict) else None


def extract_json_object(text: str) -> tuple[object, bool, list[str]]:
    """The lenient JSON extraction shared by the evaluator and the LLM judge: ``(object or None, parsed
    strictly, repair notes / errors)`` — strict JSON first, then a code fence removed, the first
    object located (string-aware) and parsed, or repaired by :mod:`json_repair` when it is not strict JSON.
    What cannot be repaired gives None."""
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
    candidate, complete, too_deep = _first_object(stripped)
    if not candidate:
        return None, False, [*errors, "no JSON object found"]
    if too_deep:
        return None, False, [*errors, f"object nested deeper than {MAX_DEPTH}"]
    if not complete:
        errors.append("truncated object closed")
        # the repairer would give a cut member an empty value: the conservative policy drops it instead
        candidate = _DANGLING.sub("", candidate)
    try:
        return json.loads(candidate), False, errors
    except (json.JSONDecodeError, RecursionError):
        return _repair(candidate), False, errors


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
