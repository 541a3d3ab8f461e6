"""Pure text functions of indexing: HTML → text, token windows and chunking by tokens.

Nothing here loads a model: :func:`chunk_text` takes any tokenizer that returns character offsets (a
Hugging Face fast tokenizer, e.g. the embedder's own), so chunk lengths are counted in the embedder's tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["STRIP_TAGS", "TextSpan", "chunk_text", "html_to_text", "looks_like_html", "token_windows"]

# elements whose content is never document text (scripts, styles, navigation, embedded media)
STRIP_TAGS = ("script", "style", "nav", "noscript", "template", "svg", "iframe", "object", "embed")
# elements that end a line of text; everything else (a, b, span, ...) flows inline
_BLOCK_TAGS = (
    "address article aside blockquote body br caption dd details dialog div dl dt fieldset figcaption figure "
    "footer form h1 h2 h3 h4 h5 h6 header hr html li main ol p pre section summary table tbody tfoot thead "
    "title tr ul"
).split()
_CELL_TAGS = ("td", "th")
_HTML_START = re.compile(r"\s*(<!--.*?-->\s*)*<(!doctype\s+html|html[\s>])", re.IGNORECASE | re.DOTALL)
_SPACES = re.compile(r"[^\S\n]+")  # whitespace except newlines (includes NBSP and other Unicode spaces)


def looks_like_html(text: str) -> bool:
    """True when ``text`` starts like an HTML page (``<!doctype html`` or ``<html``, after comments)."""
    return bool(_HTML_START.match(text[:4096]))


def html_to_text(html: str) -> str:
    """Visible text of an HTML page: one line per block element, whitespace collapsed, empty lines dropped.

    ``script``, ``style``, ``nav`` and the other :data:`STRIP_TAGS` are removed with their content, as are
    comments; block elements (paragraphs, headings, list items, table rows, ...) end a line, inline elements
    (links, emphasis) stay inside their sentence and table cells are separated by `` | ``. Uses
    BeautifulSoup with the standard-library parser (no lxml needed).

    >>> html_to_text("<html><head><title>T</title><style>p{}</style></head>"
    ...              "<body><nav>Menu</nav><p>Paris is the <b>capital</b>.</p><p>x</p></body></html>")
    'T\\nParis is the capital.\\nx'
    """
    from bs4 import BeautifulSoup, Comment

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(STRIP_TAGS):
        tag.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    for tag in soup.find_all(_CELL_TAGS):
        tag.insert_after(" | ")
    lines = (_SPACES.sub(" ", line).strip(" |") for line in soup.get_text().split("\n"))
    return "\n".join(line.strip() for line in lines if line.strip())


def token_windows(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Half-open token windows ``[start, end)`` of at most ``size`` tokens, consecutive ones sharing ``overlap``.

    Windows start every ``size - overlap`` tokens; the last one ends at ``n_tokens`` and no window lies
    inside the previous one (a tail no longer than the overlap is already covered). No tokens, no windows.

    >>> token_windows(10, 4, 1)
    [(0, 4), (3, 7), (6, 10)]
    >>> token_windows(3, 4, 1)
    [(0, 3)]
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"need size >= 1 and 0 <= overlap < size; got size={size}, overlap={overlap}")
    if n_tokens <= 0:
        return []
    step = size - overlap
    return [(s, min(s + size, n_tokens)) for s in range(0, max(n_tokens - overlap, 1), step)]


@dataclass(frozen=True)
class TextSpan:
    """One chunk of a text: the exact substring ``text[char_start:char_end]`` and its token window."""

    text: str
    token_start: int
    token_end: int
    char_start: int
    char_end: int

    @property
    def n_tokens(self) -> int:
        return self.token_end - self.token_start


Tokenizer = Callable[..., Any]


def chunk_text(text: str, tokenizer: Tokenizer, size: int, overlap: int) -> list[TextSpan]:
    """Split ``text`` into chunks of at most ``size`` tokens of ``tokenizer``, consecutive ones sharing ``overlap``.

    The text is tokenized once (no special tokens) with character offsets; each chunk is the original
    substring from its first token's start to its last token's end, so whitespace and casing are kept and no
    character is invented. Windows come from :func:`token_windows`.

    Args:
        text: The document text.
        tokenizer: A Hugging Face *fast* tokenizer (it must return ``offset_mapping``).
        size: Maximum tokens per chunk.
        overlap: Tokens shared by consecutive chunks.
    """
    if not text.strip():
        return []
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = enc["offset_mapping"]
    spans = []
    for start, end in token_windows(len(offsets), size, overlap):
        c0, c1 = offsets[start][0], offsets[end - 1][1]
        spans.append(TextSpan(text[c0:c1], start, end, c0, c1))
    return spans
