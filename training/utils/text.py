"""Answer-text normalization shared by alignment, data builders and metrics (stdlib only)."""

from __future__ import annotations

import re
import string

__all__ = ["normalize_text"]

PUNCT = frozenset(string.punctuation)
ARTICLES_RE = re.compile(r"\b(a|an|the)\b")


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
