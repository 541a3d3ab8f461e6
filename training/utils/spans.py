"""Boundary repair of an extracted answer span: from the span head's token edges to whole answers.

An extractive span head chooses token edges, and a small one often stops short of the answer a reader
would give: a word piece ("Ji" of "Jiyeon"), one word of a name ("Ahmed" of "Ahmed Hussen"), a date
without its month ("12, 1666" of "October 12, 1666"), a trailing comma or an unclosed bracket.
:func:`repair_span` moves the edges, by rules on the chunk's own text and never beyond it:

1. **Word edges**: a span that starts or ends inside a word grows to the whole word.
2. **Names**: a span that starts with a capitalized word grows over the capitalized words right before
   and after it on the same clause (no punctuation in between, name particles such as "van" or "de"
   allowed inside), at most :data:`MAX_NAME_WORDS` words in all; function words ("In", "The", "He", ...)
   and ALL-CAPS words never join. An opening bracket ends a name on the left: the name in a title's
   disambiguation, "Crazy World (Boys Like Girls album)", joins "Boys" and stops.
3. **Dates**: a day or "day, year" right after a month name takes the month; "Month day" right before
   ", year" (or " year") takes the year; a month name right before a day or year takes them; a year (or
   "Month year") right after "day Month" (or "day") takes them ("28 May 1860"). Life dates joined by a
   dash, "28 May 1860 – 7 February 1881", keep the first date when the question asks about a birth and
   the second when it asks about a death (otherwise the span stays a range).
4. **Places** (only when the question asks for a place, :func:`asks_for_place`): a name grows over the
   comma-joined names right before and after it ("Chester Springs, Pennsylvania", "Cheras, Selangor,
   Malaysia"), at most :data:`MAX_PLACE_PARTS` names and :data:`MAX_PLACE_WORDS` words in all. A name
   that opens a sentence, or a bracket, never joins from the left. Elsewhere a comma ends a name: "Timbaland, Justin
   Timberlake" lists two artists.
5. **Numbers**: a number cut inside its thousands groups or its decimals grows over them ("147" of
   "40,147", "219" of "219,126", "104" of "104.1"); groups are exactly three digits after a comma with no
   space, so "12, 1666" and "4,411, and" do not join. A count right before the people it counts takes the
   word ("2,764" of "2,764 people", also "inhabitants", "residents", "persons"): the whole answer to a
   population question, which the claim aligner joins with the bare count of other chunks
   (``merge_units``).
6. **Sports** (only when the question asks for a sport, :func:`asks_for_sport`): a player's title names the
   sport, not the sport itself. "tennis player" (or "players") keeps "tennis"; an agent noun such as
   "footballer", "cricketer", "skier" or "cyclist" moves to the chunk's nearest whole word that is its
   stem + "ing" ("skiing", "cycling"), else to the nearest that is its stem ("football", "cricket"), and
   stays when the chunk has neither.
7. **Lines and edges**: a span that runs over a line break keeps its first line (table cells and infobox
   fields are separate values); a span that is only a leading "The" of a name ("The" of "The Killers")
   takes the name; surrounding spaces, trailing commas/semicolons/colons, a trailing possessive ("'s",
   or the apostrophe of "Elvis'") and unbalanced brackets or quotes are trimmed.

Pure string logic (stdlib only).

>>> text = "The band was founded by Ahmed Hussen in Aguadilla on October 12, 1666."
>>> s = text.index("Ahmed"); text[slice(*repair_span(text, s, s + 5))]
'Ahmed Hussen'
>>> s = text.index("12"); text[slice(*repair_span(text, s, s + 8))]
'October 12, 1666'
>>> s = text.index("Aguadilla"); text[slice(*repair_span(text, s, s + 9, "Where was the band founded?"))]
'Aguadilla'
>>> text = "Wadi had 40,147 people (2011), listed in The Killers' notes."
>>> s = text.index("147"); text[slice(*repair_span(text, s, s + 3))]
'40,147 people'
>>> s = text.index("The K"); text[slice(*repair_span(text, s, s + 3))]
'The Killers'
>>> text = "The bridge stands in Chester Springs, Pennsylvania, over Pine Creek."
>>> s = text.index("Penn"); text[slice(*repair_span(text, s, s + 12, "Where is the bridge located?"))]
'Chester Springs, Pennsylvania'
"""

from __future__ import annotations

import re

__all__ = [
    "COUNTED_PEOPLE",
    "MAX_NAME_WORDS",
    "MAX_PLACE_PARTS",
    "MAX_PLACE_WORDS",
    "asks_for_place",
    "asks_for_sport",
    "repair_span",
]

#: The longest name a span grows to, in words.
MAX_NAME_WORDS = 4
#: The most comma-joined names a place answer grows to ("Cheras, Selangor, Malaysia": 3).
MAX_PLACE_PARTS = 3
#: The longest place answer a span grows to, in words.
MAX_PLACE_WORDS = 8

_PLACE_QUESTION = re.compile(
    r"\b(?:where|located|location|region|country|city|town|village|county|province|birthplace|hometown|"
    r"headquarter(?:s|ed)?)\b",
    re.IGNORECASE,
)

_SPORT_QUESTION = re.compile(r"\b(?:what|which)\s+(?:kind\s+of\s+|type\s+of\s+)?sports?\b", re.IGNORECASE)
# "tennis player", "ice hockey players": the sport before a player noun
_PLAYER = re.compile(r"\s+players?$", re.IGNORECASE)
# an agent noun's suffixes ("cyclist" → "cycl", "footballer" → "football")
_AGENT_SUFFIXES = ("ist", "er")

# a question about a birth (group 1) or a death (group 2)
_LIFE_QUESTION = re.compile(r"\b(?:(born|birth)|(died|die|death))\b", re.IGNORECASE)

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
    if words == ["The"]:  # the leading article of a name ("The" of "The Killers"): the name to its right
        nxt = re.match(r" (\S+)", text[b : b + 40])
        core = nxt.group(1).rstrip(",;:.!?)]\"'’”") if nxt else ""
        if not _capitalized(core):
            return a, b
        return a, _names(text, b + 1, b + 1 + len(core))[1]
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
        # an opening bracket ends the name: "(Boys" of "Crazy World (Boys Like Girls album)" joins without
        # it, and nothing further left does
        core = word.lstrip("([{")
        if core != word and _capitalized(core) and _is_word_char(core[-1]):
            a -= len(core) + 1
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


#: The people a population count counts, right after the number (rule 5).
COUNTED_PEOPLE = re.compile(r" (?:people|inhabitants|residents|persons)\b", re.IGNORECASE)


def _numbers(text: str, a: int, b: int) -> tuple[int, int]:
    """Grow a number over the thousands groups and decimals it was cut from, then over the people it counts
    right after it (rule 5)."""
    span = text[a:b]
    if re.match(r"\d{3}(?!\d)", span):  # "147" of "40,147": the groups before it
        m = re.search(r"(?<![\d,.])\d{1,3}(?:,\d{3})*,$", text[max(0, a - 24) : a])
        if m:
            a -= len(m.group(0))
    if re.search(r"(?<![\d,])\d{1,3}$", span) or re.search(r",\d{3}$", span):  # "219" of "219,126"
        m = re.match(r"(?:,\d{3})+(?![\d,]\d)", text[b : b + 24])
        if m:
            b += len(m.group(0))
    if re.search(r"\d$", text[a:b]):  # "104" of "104.1"
        m = re.match(r"\.\d+(?![\d.]\d)", text[b : b + 12])
        if m:
            b += len(m.group(0))
    if re.fullmatch(r"\d[\d,.]*", text[a:b]):  # "2,764" of "2,764 people"
        m = COUNTED_PEOPLE.match(text, b)
        if m:
            b = m.end()
    return a, b


def _dates(text: str, a: int, b: int, question: str | None = None) -> tuple[int, int]:
    span = text[a:b]
    # "1860 – 7 February 1881": life dates joined by a dash; a question about a birth keeps the first date,
    # one about a death the second
    life = _LIFE_QUESTION.search(question or "")
    m = re.search(
        r"\d(\s*[–—]\s*|\s+-\s+)(?:\d{1,2}(?:st|nd|rd|th)? )?" + _MONTH_RE + r" ", span, re.IGNORECASE
    )
    if m and life:
        a, b = (a, a + m.start(1)) if life.group(1) else (a + m.end(1), b)
        span = text[a:b]
    # "1860" / "May 1860" right after "28 May " / "28 ": the day and month before them
    if re.fullmatch(r"\d{3,4}", span):
        m = re.search(
            r"(?:\b\d{1,2}(?:st|nd|rd|th)? )?" + _MONTH_RE + r",? $", text[max(0, a - 18) : a], re.IGNORECASE
        )
        if m:
            a -= len(m.group(0))
            span = text[a:b]
    elif re.fullmatch(_MONTH_RE + r",? \d{3,4}", span, re.IGNORECASE):
        m = re.search(r"\b\d{1,2}(?:st|nd|rd|th)? $", text[max(0, a - 6) : a])
        if m:
            a -= len(m.group(0))
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


def asks_for_place(question: str | None) -> bool:
    """Whether a question asks for a place: "where", or a place noun such as "location", "region",
    "country", "city", "county", "birthplace" or "headquarters" (case-insensitive, whole words).

    >>> asks_for_place("Where is YHSS located?"), asks_for_place("Who founded YHSS?")
    (True, False)
    """
    return bool(question) and bool(_PLACE_QUESTION.search(question))


def asks_for_sport(question: str | None) -> bool:
    """Whether a question asks for a sport ("What sport ...", "Which sports ...", "what kind of sport").

    >>> asks_for_sport("What sport is Nathan Wood associated with?"), asks_for_sport("Who won the cup?")
    (True, False)
    """
    return bool(question) and bool(_SPORT_QUESTION.search(question))


def _sports(text: str, a: int, b: int) -> tuple[int, int]:
    """A player's title to its sport (rule 6): "tennis player" → "tennis"; a one-word agent noun to the
    nearest word of the chunk that is its stem + "ing", else its stem."""
    span = text[a:b]
    player = _PLAYER.search(span)
    if player and player.start() > 0:
        return a, a + player.start()
    word = span.lower()
    if not word.isalpha():
        return a, b
    # "player" alone names no sport: its stem "play" is not one
    stems = [
        word[: -len(s)]
        for s in _AGENT_SUFFIXES
        if word.endswith(s) and len(word) - len(s) >= 3 and word[: -len(s)] != "play"
    ]
    if not stems:
        return a, b
    # the activity ("skiing") before the bare stem ("Ski" may name the equipment), then the nearest
    rank = {stem + "ing": 0 for stem in stems} | {stem: 1 for stem in stems}
    hits = [
        (rank[w], abs(m.start() - a), m.start(), m.end())
        for m in re.finditer(r"[A-Za-z]+", text)
        if (w := m.group(0).lower()) in rank
    ]
    return min(hits)[2:] if hits else (a, b)


def _all_capitalized(span: str) -> bool:
    words = span.split()
    return bool(words) and all(_capitalized(w) or w.lower() in _PARTICLES for w in words)


def _places(text: str, a: int, b: int) -> tuple[int, int]:
    """Grow a name over the comma-joined names around it (rule 4 of the module docstring): first to the
    left, where the more specific names stand ("Cheras, Selangor"), then to the right."""
    if not _all_capitalized(text[a:b]):
        return a, b
    parts, words = 1, len(text[a:b].split())
    name = r"[^\W\d_][\w'’.-]*(?: [^\W\d_][\w'’.-]*){0,3}"
    while parts < MAX_PLACE_PARTS:  # left: "<Name>, <span>", the name not opening a sentence
        m = re.search(r"(?:^|(?<=[\s(]))(" + name + r"), $", text[max(0, a - 60) : a])
        if not m:
            break
        cand: list[str] = []  # the capitalized words right before ", <span>"
        for w in reversed(m.group(1).split()):
            if not (_capitalized(w) or w.lower() in _PARTICLES):
                break
            cand.insert(0, w)
        while cand and not _capitalized(cand[0]):
            cand.pop(0)
        if not cand:
            break
        start = a - 2 - len(" ".join(cand))
        if start < 0 or text[start : a - 2] != " ".join(cand):
            break
        before = text[max(0, start - 2) : start]
        if start == 0 or before.endswith((". ", "! ", "? ", "\n")) or not before.endswith(" "):
            break
        if words + len(cand) > MAX_PLACE_WORDS:
            break
        a = start
        parts, words = parts + 1, words + len(cand)
    while parts < MAX_PLACE_PARTS:  # right: "<span>, <Name>"
        m = re.match(r", (" + name + r")", text[b : b + 60])
        if not m:
            break
        # the name ends at its last capitalized word ("Pennsylvania, over Pine Creek" stops at "Pennsylvania")
        # or at a full stop
        kept = []
        for w in m.group(1).split():
            core = w.rstrip(".")
            if not _capitalized(core):
                break
            kept.append(core)
            if core != w:
                break
        if not kept or words + len(kept) > MAX_PLACE_WORDS:
            break
        b += 2 + len(" ".join(kept))
        parts, words = parts + 1, words + len(kept)
    return a, b


def _first_line(text: str, a: int, b: int) -> tuple[int, int]:
    """The span's first non-empty line (rule 7)."""
    for line in re.finditer(r"[^\n]+", text[a:b]):
        if line.group(0).strip():
            return a + line.start(), a + line.end()
    return a, b


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and (text[a].isspace() or text[a] in ",;:"):
        a += 1
    while b > a and (text[b - 1].isspace() or text[b - 1] in ",;:"):
        b -= 1
    if b - a > 2 and text[b - 2 : b] in ("'s", "’s") and not text[b : b + 1].isalnum():  # "Coldplay's"
        b -= 2
    elif (
        b - a > 2
        and text[b - 2 : b] in ("s'", "s’")
        and text[a:b].count(text[b - 1]) == 1
        and not text[b : b + 1].isalnum()
    ):  # "Elvis'" of "Elvis' version": a possessive, not a closing quote
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


def repair_span(text: str, start: int, end: int, question: str | None = None) -> tuple[int, int]:
    """The repaired character span ``[start, end)`` of ``text`` (rules in the module docstring).

    Args:
        text: The chunk the span was read from.
        start: First character of the extracted span.
        end: One past its last character.
        question: The question the span answers; when it asks for a place (:func:`asks_for_place`) the
            place rule applies, and when it asks for a sport (:func:`asks_for_sport`) the sport rule.
            ``None``: neither does.

    Returns:
        The new ``(start, end)``, always inside ``text``; the span itself when no rule applies or the
        input is empty or out of range.
    """
    if not (0 <= start < end <= len(text)):
        return start, end
    a, b = _trim(text, *_first_line(text, start, end))
    if a >= b:
        return start, end
    a, b = _word_edges(text, a, b)
    a, b = _numbers(text, a, b)
    a, b = _dates(text, a, b, question)
    a, b = _names(text, a, b)
    if asks_for_place(question):
        a, b = _places(text, a, b)
    if asks_for_sport(question):
        a, b = _sports(text, a, b)
    a, b = _trim(text, a, b)
    return (a, b) if a < b else (start, end)
