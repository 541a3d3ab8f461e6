"""Evaluation metrics used during training and in reports (pure functions, value-tested)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch

from evidential.routing import stated_mask
from training.utils.text import normalize_text

__all__ = [
    "YES_NO_FRAME",
    "ReliabilityBins",
    "expected_calibration_error",
    "is_yes_no_frame",
    "mentions",
    "reliability_bins",
    "span_matches",
    "stated_claims",
    "strict_exact_match",
]


class ReliabilityBins(NamedTuple):
    """Per-bin statistics of :func:`reliability_bins` (arrays of length ``n_bins``): ``count`` (samples per
    bin), ``confidence`` (mean confidence) and ``accuracy`` (fraction correct); NaN in an empty bin."""

    count: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray


def reliability_bins(
    confidence: Sequence[float], correct: Sequence[bool], n_bins: int = 15
) -> ReliabilityBins:
    """Bin ``confidence`` into ``n_bins`` equal-width bins over [0, 1] (paper Eqs 26–27) and give each bin's
    sample count, mean confidence and accuracy.

    Bin ``b`` holds confidences in ``(b/n, (b+1)/n]``, the first bin also holds 0 and a confidence of
    exactly 1.0 falls in the last bin.

    >>> reliability_bins([0.9, 0.9, 0.2], [True, False, False], n_bins=2).count
    array([1, 2])

    Raises:
        ValueError: ``confidence`` and ``correct`` differ in length, or a confidence is outside [0, 1].
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1; got {n_bins}")
    conf = np.asarray(confidence, dtype=np.float64)
    corr = np.asarray(correct, dtype=np.float64)
    if conf.shape != corr.shape:
        raise ValueError(f"confidence and correct differ in length: {conf.shape} vs {corr.shape}")
    if np.any((conf < 0) | (conf > 1) | ~np.isfinite(conf)):
        raise ValueError("confidences must lie in [0, 1]")
    bins = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    count = np.zeros(n_bins, dtype=int)
    mean_conf = np.full(n_bins, np.nan)
    acc = np.full(n_bins, np.nan)
    for b in range(n_bins):
        sel = bins == b
        if sel.any():
            count[b] = int(sel.sum())
            mean_conf[b] = conf[sel].mean()
            acc[b] = corr[sel].mean()
    return ReliabilityBins(count, mean_conf, acc)


def expected_calibration_error(
    confidence: Sequence[float], correct: Sequence[bool], n_bins: int = 15
) -> float:
    """ECE over the equal-width bins of :func:`reliability_bins` (paper Eqs 26–27):
    ``Σ_b |B_b|/N · |acc_b − conf_b|``. Returns 0.0 for no samples.

    >>> expected_calibration_error([0.9, 0.9, 0.2], [True, False, False])
    0.333333...
    """
    bins = reliability_bins(confidence, correct, n_bins)
    total = int(bins.count.sum())
    if total == 0:
        return 0.0
    ece = 0.0
    for n, conf, acc in zip(bins.count, bins.confidence, bins.accuracy):
        if n:
            ece += (n / total) * abs(acc - conf)
    return float(ece)


#: The normalized claims of a yes/no frame.
YES_NO_FRAME = frozenset({"yes", "no"})


def is_yes_no_frame(claims: Sequence[str]) -> bool:
    """Whether a frame is a yes/no verdict (every claim normalizes to ``yes`` or ``no``): its answers exclude
    each other, so its stated-set bar is fitted apart from open frames' (``fusion.state_ratio_yes_no``).

    >>> is_yes_no_frame(["Yes", "no"]), is_yes_no_frame(["yes", "Paris"]), is_yes_no_frame([])
    (True, False, False)
    """
    return bool(claims) and all(normalize_text(c) in YES_NO_FRAME for c in claims)


def stated_claims(
    claims: Sequence[str],
    masses: Sequence[float],
    route: str,
    selected: int,
    ratio: float = 0.5,
    ratio_yes_no: float | None = None,
    contested: Sequence[bool] | None = None,
    witnessed: Sequence[bool] | None = None,
) -> list[str]:
    """The claims an answer states (the stated set, :func:`evidential.stated_mask`), by fused mass: on
    ``direct`` the selected claim first, then every other claim whose mass reaches the bar × the top mass
    (several valid answers); on ``conflict`` the claims above that bar (minority claims drop out); none on
    ``abstain``. The bar is ``ratio``, or ``ratio_yes_no`` for a yes/no frame (:func:`is_yes_no_frame`)
    when it is given. A ``witnessed`` claim (:func:`evidential.witnessed_claims`: a chunk of its own states
    it clearly) is stated below the bar too, in open frames only (a yes/no verdict excludes the other). A
    ``contested`` claim (:func:`evidential.copy_contested`: backed only by edited copies) is never stated.

    >>> stated_claims(["A", "B", "C"], [0.5, 0.3, 0.05], "conflict", 0)
    ['A', 'B']
    >>> stated_claims(["A", "B", "C"], [0.5, 0.3, 0.05], "direct", 0, ratio=0.7)
    ['A']
    >>> stated_claims(["yes", "no"], [0.5, 0.4], "conflict", 0, ratio=0.5, ratio_yes_no=1.0)
    ['yes']
    >>> stated_claims(["A", "B", "C"], [0.5, 0.3, 0.05], "conflict", 0, contested=[False, True, False])
    ['A']
    >>> stated_claims(["A", "B", "C"], [0.5, 0.3, 0.05], "direct", 0, ratio=0.7, witnessed=[True, False, True])
    ['A', 'C']
    """
    if route == "abstain" or not claims:
        return []
    yes_no = is_yes_no_frame(claims)
    if ratio_yes_no is not None and yes_no:
        ratio = ratio_yes_no
    b = torch.as_tensor([float(m) for m in masses], dtype=torch.float64)
    cont = None if contested is None else torch.as_tensor([bool(c) for c in contested], dtype=torch.bool)
    wit = (
        None
        if witnessed is None or yes_no
        else torch.as_tensor([bool(w) for w in witnessed], dtype=torch.bool)
    )
    mask = stated_mask(b, ratio, contested=cont, witnessed=wit).tolist()
    order = sorted(range(len(claims)), key=lambda j: -float(b[j]))
    out = [claims[selected]] if route == "direct" and selected >= 0 else []
    out += [claims[j] for j in order if mask[j] and claims[j] not in out]
    return out


def mentions(text: str, answer: str) -> bool:
    """Whether ``text`` states ``answer``: after SQuAD normalisation the answer occurs in the text on word
    boundaries. An empty answer is never stated.

    >>> mentions("He lived in Paris, France.", "Paris"), mentions("a parish", "Paris"), mentions("Paris", "")
    (True, False, False)
    """
    a = normalize_text(answer)
    return bool(a) and f" {a} " in f" {normalize_text(text)} "


def span_matches(extracted: str | None, label: str) -> bool:
    """Whether a chunk's extracted answer matches its labelled answer (claim-extraction fidelity, the
    paper's Table 13): after SQuAD normalisation one contains the other on word boundaries, as in the
    benchmark report's fidelity ("Paris, France" matches "Paris"; "parish" does not). No extraction never
    matches.

    >>> span_matches("Paris, France", "Paris"), span_matches("Ahmed", "Ahmed Hussen")
    (True, True)
    >>> span_matches("a parish", "Paris"), span_matches(None, "Paris"), span_matches("", "Paris")
    (False, False, False)
    """
    extracted = extracted or ""
    return mentions(extracted, label) or mentions(label, extracted)


def strict_exact_match(stated: Iterable[str], gold: Iterable[str], wrong: Iterable[str] = ()) -> bool:
    """MADAM-RAG's strict exact match on RAMDocs: every gold answer is stated and no planted wrong answer is
    (SQuAD-normalized comparison).

    >>> strict_exact_match(["Paris", "the Lyon"], ["paris", "lyon"], ["Nice"])
    True
    >>> strict_exact_match(["Paris", "Nice"], ["paris"], ["nice"])
    False
    """
    said = {normalize_text(s) for s in stated}
    gold_n = {normalize_text(g) for g in gold}
    wrong_n = {normalize_text(w) for w in wrong} - gold_n
    return bool(gold_n) and gold_n <= said and not (said & wrong_n)
