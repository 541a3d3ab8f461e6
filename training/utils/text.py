"""Answer-text normalization shared by alignment, data builders and metrics (stdlib only)."""

from __future__ import annotations

import re
import string

__all__ = ["COPY_MIN_WORDS", "near_copies", "normalize_text", "word_overlap"]

PUNCT = frozenset(string.punctuation)
ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
WORD_RE = re.compile(r"\w+")
#: Texts with fewer distinct words are never called copies (a short list or a heading overlaps anything).
COPY_MIN_WORDS = 12


def normalize_text(text: str) -> str:
    """SQuAD answer normalization: lower case, strip punctuation, remove articles a/an/the, collapse spaces.

    This is the official SQuAD/MuSiQue exact-match normalization (ASCII punctuation only).

    >>> normalize_text("  The  U.S.  Army! ")
    'us army'
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in PUNCT)
    text = ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def word_overlap(a: str, b: str) -> float:
    """Share of the shorter text's distinct words (lower-cased ``\\w+`` tokens) that the other text also has:
    ``|A ∩ B| / min(|A|, |B|)``, 0.0 when either has none. A copy of a text with a few words swapped, cut at
    other places or with words added keeps a high overlap.

    >>> word_overlap("Bryan was born on February 8, 1900 in Alexandria", "Bryan was born on July 15, 1905 in Alexandria")
    0.666...
    """
    wa, wb = set(WORD_RE.findall(a.lower())), set(WORD_RE.findall(b.lower()))
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / min(len(wa), len(wb))


def near_copies(texts: list[str], threshold: float | None) -> list[list[int]]:
    """For each text, the indices of the other texts it is a near-copy of: :func:`word_overlap` at or above
    ``threshold``, both texts with at least :data:`COPY_MIN_WORDS` distinct words (symmetric). ``None``
    turns the check off (no copies).

    >>> base = "Lieutenant General Blackshear Morrison Bryan was a United States Army general who served in the Second World War"
    >>> near_copies([base + " born 1900", base + " born 1905", "Bryan Park is a city park in Richmond, Virginia, with a pond"], 0.8)
    [[1], [0], []]
    """
    if threshold is None:
        return [[] for _ in texts]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise ValueError(f"the copy overlap must be a number in (0, 1] or None; got {threshold!r}")
    words = [set(WORD_RE.findall(t.lower())) for t in texts]
    out: list[list[int]] = [[] for _ in texts]
    for i, wi in enumerate(words):
        for j in range(i):
            wj = words[j]
            if min(len(wi), len(wj)) < COPY_MIN_WORDS:
                continue
            if len(wi & wj) / min(len(wi), len(wj)) >= threshold:
                out[i].append(j)
                out[j].append(i)
    return [sorted(x) for x in out]
