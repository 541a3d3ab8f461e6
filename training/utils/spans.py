"""Boundary repair of an extracted answer span: from the span head's token edges to whole answers.

An extractive span head chooses token edges, and a small one often stops short of the answer a reader
would give: a word piece ("Ji" of "Jiyeon"), one word of a name ("Ahmed" of "Ahmed Hussen"), a date
without its month ("12, 1666" of "October 12, 1666"), a trailing comma or an unclosed bracket.
:func:`repair_span` moves the edges, by rules on the chunk's own text and never beyond it:

1. **Word edges**: a span that starts or ends inside a word grows to the whole word.
2. **Names**: a span that starts with a capitalized word grows over the capitalized words right before
   and after it on the same clause (no punctuation in between, name particles such as "van" or "de"
   allowed inside), at most :data:`MAX_NAME_WORDS` words in all; function words ("In", "The", "He", ...)
   and ALL-CAPS words never join.
3. **Dates**: a day or "day, year" right after a month name takes the month; "Month day" right before
   ", year" (or " year") takes the year; a month name right before a day or year takes them.
4. **Edges**: surrounding spaces, trailing commas/semicolons/colons and unbalanced brackets or quotes are
   trimmed.

Pure string logic (stdlib only).

>>> text = "The band was founded by Ahmed Hussen in Aguadilla on October 12, 1666."
>>> s = text.index("Ahmed"); text[slice(*repair_span(text, s, s + 5))]
'Ahmed Hussen'
>>> s = text.index("12"); text[slice(*repair_span(text, s, s + 8))]
'October 12, 1666'
"""

from __future__ import annotations

import re

__all__ = ["MAX_NAME_WORDS", "repair_span"]

#: The longest name a span grows to, in words.
MAX_NAME_WORDS = 4

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_MONTH_RE = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
# capitalized words that begin clauses rather than names
_FUNCTION_WORDS = frozenset(
    "a an the in on at by for from of to with as and but or nor he she it his her its they their them this "
    "that these those when where who whom whose what which while after before during since until born "
    "is was are were be been i we you our your my".split()
)
_PARTICLES = frozenset("da de del della der di du la le van von bin ibn al el dos das y".split())
_WORD_CHARS = re.compile(r"[\w'’-]")
_OPEN, _CLOSE = "([{“‘«", ")]}”’»"


def _is_word_char(ch: str) -> bool:
    return bool(_WORD_CHARS.match(ch))


def _word_edges(text: str, a: int, b: int) -> tuple[int, int]:
    while a > 0 and _is_word_char(text[a - 1]) and _is_word_char(text[a]):
        a -= 1
    while b < len(text) and b > 0 and _is_word_char(text[b]) and _is_word_char(text[b - 1]):
        b += 1
    return a, b


def _capitalized(word: str) -> bool:
    """A capitalized word that may belong to a name (not a function word, not an ALL-CAPS heading)."""
    return (
        bool(word)
        and word[0].isupper()
        and not (len(word) > 1 and word.isupper())
        and word.lower() not in _FUNCTION_WORDS
    )


def _names(text: str, a: int, b: int) -> tuple[int, int]:
    span = text[a:b]
    words = span.split()
    if not words or not _capitalized(words[0]) or len(words) >= MAX_NAME_WORDS:
        return a, b
    budget = MAX_NAME_WORDS - len(words)
    # left: "<Cap> [particle] <span>" separated by single spaces
    while budget > 0:
        m = re.search(r"(\S+) $", text[max(0, a - 40) : a])
        if not m:
            break
        word = m.group(1)
        if _capitalized(word) and _is_word_char(word[-1]) and word[-1] not in ",;:.":
            a -= len(word) + 1
            budget -= 1
            continue
        break
    # right: "<span> [particle] <Cap>"
    while budget > 0:
        m = re.match(r" (\S+)", text[b : b + 40])
        if not m:
            break
        word = m.group(1)
        core = word.rstrip(",;:.!?)]\"'’”")
        if word.lower() in _PARTICLES:
            n = re.match(r" \S+ (\S+)", text[b : b + 60])
            nxt = n.group(1).rstrip(",;:.!?)]\"'’”") if n else ""
            if _capitalized(nxt):
                b += len(word) + 1
                budget -= 1
                continue
            break
        if _capitalized(core) and core:
            b += 1 + len(core)
            budget -= 1
            if core != word:  # punctuation ends the name
                break
            continue
        break
    return a, b


def _dates(text: str, a: int, b: int) -> tuple[int, int]:
    span = text[a:b]
    # "12, 1666" / "12" right after "October "
    if re.fullmatch(r"\d{1,2}(?:st|nd|rd|th)?(?:,? \d{3,4})?", span):
        m = re.search(_MONTH_RE + r" $", text[max(0, a - 12) : a], re.IGNORECASE)
        if m:
            a -= len(m.group(0))
            span = text[a:b]
    # "October 12" right before ", 1666"
    if re.fullmatch(_MONTH_RE + r" \d{1,2}(?:st|nd|rd|th)?", span, re.IGNORECASE):
        m = re.match(r",? \d{3,4}\b", text[b : b + 7])
        if m:
            b += len(m.group(0))
    # "October" right before " 12, 1666" / " 1666"
    elif re.fullmatch(_MONTH_RE, span, re.IGNORECASE):
        m = re.match(r" \d{1,4}(?:st|nd|rd|th)?(?:,? \d{3,4}\b)?", text[b : b + 12])
        if m:
            b += len(m.group(0))
    # "12 October" right before " 1666"
    elif re.fullmatch(r"\d{1,2} " + _MONTH_RE, span, re.IGNORECASE):
        m = re.match(r",? \d{3,4}\b", text[b : b + 7])
        if m:
            b += len(m.group(0))
    return a, b


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and (text[a].isspace() or text[a] in ",;:"):
        a += 1
    while b > a and (text[b - 1].isspace() or text[b - 1] in ",;:"):
        b -= 1
    # unbalanced brackets / quotes at the edges
    changed = True
    while changed and b > a:
        changed = False
        span = text[a:b]
        for o, c in zip(_OPEN, _CLOSE):
            if span.startswith(o) and c not in span:
                a += 1
                changed = True
            elif span.endswith(c) and o not in span and o != c:
                b -= 1
                changed = True
        if b > a and text[a] == '"' and text[a:b].count('"') == 1:
            a += 1
            changed = True
        elif b > a and text[b - 1] == '"' and text[a:b].count('"') == 1:
            b -= 1
            changed = True
    return a, b


def repair_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The repaired character span ``[start, end)`` of ``text`` (rules in the module docstring).

    Args:
        text: The chunk the span was read from.
        start: First character of the extracted span.
        end: One past its last character.

    Returns:
        The new ``(start, end)``, always inside ``text``; the span itself when no rule applies or the
        input is empty or out of range.
    """
    if not (0 <= start < end <= len(text)):
        return start, end
    a, b = _trim(text, start, end)
    if a >= b:
        return start, end
    a, b = _word_edges(text, a, b)
    a, b = _dates(text, a, b)
    a, b = _names(text, a, b)
    a, b = _trim(text, a, b)
    return (a, b) if a < b else (start, end)
