"""A plain-Python, one-query reference of Eqs 2-15 (no torch).

It is the straightforward per-query fold the benchmark compares the batched tensor code against, and an
independent oracle for the tests. Inputs are lists of floats; no masks (pass only real chunks/claims).
"""

from __future__ import annotations

from evidential.errors import InvalidEvidenceError

__all__ = ["reference_opinions", "reference_combine", "reference_fuse", "reference_route"]


def reference_opinions(evidence: list[list[float]]) -> list[tuple[list[float], float]]:
    """Per chunk ``(belief, vacuity)`` (Eqs 2-6)."""
    out = []
    for i, row in enumerate(evidence):
        for j, e in enumerate(row):
            if not (e >= 0 and e != float("inf")):
                raise InvalidEvidenceError(f"evidence[{i}, {j}] = {e}: evidence must be finite and >= 0")
        m = len(row)
        s = sum(row) + m
        if s == 0:
            out.append(([0.0] * m, 1.0))
        else:
            out.append(([e / s for e in row], m / s))
    return out


def reference_combine(a, b, lam: float = 0.6, rule: str = "lambda"):
    """Combine ``(belief, theta, ignorance, conflict)`` tuples; returns the new tuple and K (Eqs 7-11)."""
    ba, ta, ia, ca = a
    bb, tb, ib, cb = b
    m = len(ba)
    k = sum(ba[r] * bb[s] for r in range(m) for s in range(m) if r != s)
    n = [ba[j] * bb[j] + ba[j] * tb + ta * bb[j] for j in range(m)]
    sn = sum(n)
    h = ta * tb
    ign = ia * ib
    carried = ca * tb + ia * cb
    if rule == "dempster":
        d = h + sn  # = 1 - K
        if d <= 0:
            return ([0.0] * m, 1.0, 0.0, 1.0), k
        return ([x / d for x in n], h / d, ign / d, carried / d), k
    if rule == "yager":
        lam = 1.0
    elif rule != "lambda":
        raise ValueError(f"unknown rule {rule!r}")
    if sn <= 0:
        lam = 1.0  # degenerate case: all mass to Θ
    rest = sn + (1 - lam) * k
    return ([rest * x / sn if sn > 0 else 0.0 for x in n], h + lam * k, ign, carried + lam * k), k


def reference_fuse(evidence: list[list[float]], lam: float = 0.6, rule: str = "lambda") -> dict:
    """Fold the chunks left in rank order (Eq 12); returns a dict of the FusionResult quantities."""
    ops = reference_opinions(evidence)
    m = len(evidence[0]) if evidence else 0
    if not ops:
        return {
            "belief": [0.0] * m,
            "uncertainty": 1.0,
            "ignorance": 1.0,
            "conflict": 0.0,
            "step_conflict": [],
            "mean_pairwise_conflict": 0.0,
            "confidence": 0.0,
        }
    state = (ops[0][0], ops[0][1], ops[0][1], 0.0)
    steps = []
    for b, u in ops[1:]:
        state, k = reference_combine(state, (b, u, u, 0.0), lam, rule)
        steps.append(k)
    pairs = [
        sum(ops[i][0][r] * ops[j][0][s] for r in range(m) for s in range(m) if r != s)
        for i in range(len(ops))
        for j in range(i + 1, len(ops))
    ]
    return {
        "belief": state[0],
        "uncertainty": state[1],
        "ignorance": state[2],
        "conflict": state[3],
        "step_conflict": steps,
        "mean_pairwise_conflict": sum(pairs) / len(pairs) if pairs else 0.0,
        "confidence": max(state[0]) if m else 0.0,
    }


def reference_route(u: float, tau1: float = 0.35, tau2: float = 0.65) -> str:
    """Eq 15."""
    return "direct" if u < tau1 else ("conflict" if u < tau2 else "abstain")
