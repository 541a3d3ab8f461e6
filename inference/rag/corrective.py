"""Corrective RAG (CRAG; Yan et al., 2024) on the same retriever, generator and context budget as Naive RAG.

CRAG puts a *retrieval evaluator* between retrieval and generation. It scores every retrieved chunk's
relevance to the question and takes one of three actions per question:

* **Correct** (some score ``> upper``): *knowledge refinement* of the chunks scoring above ``lower`` — each is
  decomposed into strips (sentences grouped into strips of two or three), the strips are scored by the same
  retrieval evaluator, and those scoring ``>= strip_threshold`` are kept (the best ``max_strips``, in their
  original order);
* **Incorrect** (every score ``< lower``): the retrieved chunks are discarded for *external knowledge*, which
  is refined into strips the same way;
* **Ambiguous** (otherwise): refined internal *and* external knowledge.

The generator then answers every question of the batch in ONE batched call, with Naive RAG's prompt (the
kept strips as the passages), decoding settings and total context budget (``k × max_chunk_chars``
characters).

Deviations from the paper, recorded with every answer (:data:`CORRECTIVE_DEVIATIONS`):

* **No web search** (offline): the external knowledge is *expanded corpus retrieval* — with an index, the
  ``k + expand`` best chunks are retrieved and the ones not already seen are kept; without one, the caller's
  ``extra_chunks`` (the evaluation harness passes an instance's next-ranked passages); with neither, the
  refined strips of the retrieved chunks are used (``fallback: "none"``).
* **Retrieval evaluator**: the learned evidential evaluator's relevance (its belief mass, Eqs 2-6) or the
  retrieval embedder's cosine similarity (:data:`RETRIEVAL_EVALUATORS`), instead of CRAG's fine-tuned
  T5-large; thresholds are on that scale.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from evidential import opinions_from_evidence
from evidential.errors import ConfigError
from inference.backends import load_backend
from inference.backends.base import Backend, Prompt
from inference.evaluators import build_evaluator
from inference.io import rounded
from inference.rag.base import RAGSystem, SharedModels, check_llm_generator, given_or_retrieved
from inference.rag.config import RETRIEVAL_EVALUATORS, CorrectiveConfig
from inference.rag.naive import naive_prompt
from inference.retrieval import Embedder
from inference.types import Chunk
from training.utils.configio import is_int

if TYPE_CHECKING:
    from inference.config import RunConfig

__all__ = [
    "ACTIONS",
    "CORRECTIVE_DEVIATIONS",
    "CORRECTIVE_PROMPT_VERSION",
    "RETRIEVAL_EVALUATORS",
    "CorrectiveConfig",
    "CorrectiveRAG",
    "EmbeddingRelevance",
    "LearnedRelevance",
    "Strip",
    "corrective_prompt",
    "decide_action",
    "relevance_from_evidence",
    "select_strips",
    "split_sentences",
    "split_strips",
]

CORRECTIVE_PROMPT_VERSION = "corrective/1.0"
ACTIONS = ("correct", "ambiguous", "incorrect")
CORRECTIVE_DEVIATIONS = (
    "no web search (offline): external knowledge is expanded corpus retrieval (index, else the caller's "
    "extra_chunks, else the refined retrieved chunks)",
    "retrieval evaluator: {evaluator} instead of CRAG's fine-tuned T5-large; thresholds on its [0, 1] scale",
)
_EVALUATOR_DESCRIPTIONS = {
    "learned": "the learned evidence head's relevance (belief mass 1 - vacuity)",
    "embedding": "the retrieval embedder's cosine similarity mapped to [0, 1]",
}


# ------------------------------------------------------------------------------------------ pure parts


def decide_action(scores: Sequence[float], upper: float, lower: float) -> str:
    """CRAG's action from a question's chunk relevance scores.

    ``correct`` when some score is strictly above ``upper``; ``incorrect`` when every score is strictly
    below ``lower`` (also when there are no chunks); ``ambiguous`` otherwise (a score equal to a threshold
    is not beyond it).

    >>> decide_action([0.2, 0.7], 0.6, 0.2), decide_action([0.1, 0.19], 0.6, 0.2), decide_action([0.6], 0.6, 0.2)
    ('correct', 'incorrect', 'ambiguous')
    """
    if any(s > upper for s in scores):
        return "correct"
    if all(s < lower for s in scores):
        return "incorrect"
    return "ambiguous"


# no break after an initial ("J.", "U.S.") or a common abbreviation ("Mr.", "St.")
_NO_BREAK = "".join(
    rf"(?<!\b{a}\.)" for a in ("[A-Z]", "Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "No", "vs")
)
_SENTENCE_END = re.compile(rf"(?<=[.!?]){_NO_BREAK}[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences: after ``.``/``!``/``?`` (and closing quotes/brackets) followed by space
    and an upper-case letter or a digit, but not after an initial (``J.``, ``U.S.``) or a common
    abbreviation (``Mr.``, ``Dr.``, ``St.``, ...). Whitespace is collapsed; empty text gives ``[]``.

    >>> split_sentences("He was born in 1983. He played football!  Then he retired.")
    ['He was born in 1983.', 'He played football!', 'Then he retired.']
    """
    text = " ".join(text.split())
    if not text:
        return []
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        end = m.start() + len(m.group(0).rstrip())
        out.append(text[start:end].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def _cut(text: str, max_chars: int) -> list[str]:
    """Cut a text longer than ``max_chars`` into word windows of at most ``max_chars`` characters."""
    if len(text) <= max_chars:
        return [text]
    pieces, cur = [], ""
    for word in text.split(" "):
        while len(word) > max_chars:  # a single overlong token
            if cur:
                pieces.append(cur)
                cur = ""
            pieces.append(word[:max_chars])
            word = word[max_chars:]
        if not word:
            continue
        if cur and len(cur) + 1 + len(word) > max_chars:
            pieces.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        pieces.append(cur)
    return pieces


def split_strips(text: str, sentences_per_strip: int = 3, max_chars: int | None = None) -> list[str]:
    """CRAG's decomposition of a chunk into knowledge strips.

    The sentences (:func:`split_sentences`) are grouped, in order, into ``ceil(n / sentences_per_strip)``
    strips of near-equal size (with 3: every strip of a chunk with two or more sentences holds two or three
    sentences). A strip longer than ``max_chars`` is cut into word windows that fit.

    >>> split_strips("A a. B b. C c. D d.", 3)
    ['A a. B b.', 'C c. D d.']
    """
    if not is_int(sentences_per_strip) or sentences_per_strip < 1:
        raise ValueError(f"sentences_per_strip must be an integer >= 1; got {sentences_per_strip!r}")
    sents = split_sentences(text)
    if not sents:
        return []
    groups = math.ceil(len(sents) / sentences_per_strip)
    base, extra = divmod(len(sents), groups)
    strips, pos = [], 0
    for g in range(groups):
        size = base + (1 if g < extra else 0)
        strips.append(" ".join(sents[pos : pos + size]))
        pos += size
    if max_chars is None:
        return strips
    return [piece for s in strips for piece in _cut(s, max_chars)]


@dataclass
class Strip:
    """A knowledge strip: its text, the chunk it came from, ``origin`` (``internal`` = retrieved,
    ``external`` = the fallback's chunks), its place in the original order and its relevance score."""

    chunk_id: str
    text: str
    origin: str
    order: int
    source: str | None = None
    score: float = 0.0

    def as_chunk(self) -> Chunk:
        """The strip as a passage of the generator prompt (cited by its chunk's id)."""
        return Chunk(id=self.chunk_id, text=self.text, source=self.source)


def select_strips(
    strips: Sequence[Strip], threshold: float, max_strips: int, budget_chars: int
) -> list[Strip]:
    """Knowledge refinement's selection: the strips scoring ``>= threshold``, at most ``max_strips`` of them
    with at most ``budget_chars`` characters of text in all, returned in their original order.

    The best-scoring strips are taken first (ties: original order), alternating between origins
    (internal, external, internal, ...) so that an ambiguous question keeps both kinds of knowledge when
    both have strips above the threshold; a strip that no longer fits the budget is skipped.
    """
    queues: dict[str, list[Strip]] = {}
    for s in strips:
        if s.score >= threshold:
            queues.setdefault(s.origin, []).append(s)
    for q in queues.values():
        q.sort(key=lambda s: (-s.score, s.order))
    order = sorted(queues, key=lambda o: (o != "internal", o))
    chosen: list[Strip] = []
    used = 0
    while len(chosen) < max_strips and any(queues[o] for o in order):
        for o in order:
            if len(chosen) >= max_strips:
                break
            while queues[o]:
                s = queues[o].pop(0)
                if used + len(s.text) <= budget_chars:
                    chosen.append(s)
                    used += len(s.text)
                    break
    return sorted(chosen, key=lambda s: s.order)


def relevance_from_evidence(evidence: torch.Tensor) -> list[float]:
    """Per-chunk relevance from an evidence tensor ``[k, M]``: the opinion's belief mass
    ``Σ_j b_ij = 1 − u_i = Σ_j e_ij / (Σ_j e_ij + M)`` (Eqs 2-6); 0 when ``M = 0`` (vacuous opinion).

    >>> relevance_from_evidence(torch.tensor([[3.0, 0.0], [0.0, 0.0]], dtype=torch.float64))
    [0.6, 0.0]
    """
    if evidence.ndim != 2:
        raise ValueError(f"evidence must have shape [k, M]; got {tuple(evidence.shape)}")
    if evidence.shape[0] == 0:
        return []
    op = opinions_from_evidence(evidence.to(torch.float64))
    return [float(x) for x in (1.0 - op.vacuity).clamp(0.0, 1.0)]


# ------------------------------------------------------------------------------------------ scorers


class LearnedRelevance:
    """Relevance from the learned evaluator: one batched evaluator call for every (question, chunk) of the
    batch, relevance = belief mass of the chunk's opinion (:func:`relevance_from_evidence`).

    Args:
        evaluator: A built learned evaluator (:class:`~inference.evaluators.LearnedEvaluator`).
    """

    name = "learned"

    def __init__(self, evaluator):
        if getattr(evaluator, "name", None) != "learned":
            raise ConfigError(
                "corrective.retrieval_evaluator 'learned' needs the learned evaluator; got "
                f"{getattr(evaluator, 'name', type(evaluator).__name__)!r} (pass evaluator=None to build it)"
            )
        self.evaluator = evaluator

    @property
    def passes(self) -> int:
        """Batched model passes made so far (the evaluator's counter)."""
        return self.evaluator.passes

    def score(self, questions: Sequence[str], chunk_lists: Sequence[Sequence[Chunk]]) -> list[list[float]]:
        """Relevance in [0, 1] of every chunk of every question (lists with no chunks give ``[]``)."""
        live = [n for n, cs in enumerate(chunk_lists) if cs]
        out: list[list[float]] = [[] for _ in chunk_lists]
        if not live:
            return out
        results = self.evaluator.evaluate_batch(
            [questions[n] for n in live], [list(chunk_lists[n]) for n in live]
        )
        for n, res in zip(live, results):
            out[n] = relevance_from_evidence(res.evidence)
        return out


class EmbeddingRelevance:
    """Relevance from the retrieval embedder: cosine similarity of the unit vectors of the question (with the
    embedder's query instruction) and the chunk, mapped to [0, 1] as ``(1 + cos) / 2``; one encoder pass
    over all questions and chunks of the batch. Untrained as a relevance judge — a cheap reference scorer.

    Args:
        embedder: An :class:`~inference.retrieval.Embedder` (e.g. the retriever's packaged MiniLM).
    """

    name = "embedding"

    def __init__(self, embedder):
        self.embedder = embedder
        self.passes = 0

    def score(self, questions: Sequence[str], chunk_lists: Sequence[Sequence[Chunk]]) -> list[list[float]]:
        """Relevance in [0, 1] of every chunk of every question (lists with no chunks give ``[]``)."""
        live = [n for n, cs in enumerate(chunk_lists) if cs]
        out: list[list[float]] = [[] for _ in chunk_lists]
        if not live:
            return out
        prefix = self.embedder.query_instruction
        texts = [prefix + questions[n] for n in live] + [c.text for n in live for c in chunk_lists[n]]
        vecs = self.embedder.encode_documents(texts)  # unit vectors; the queries carry their instruction
        self.passes += 1
        pos = len(live)
        for j, n in enumerate(live):
            q = vecs[j]
            for _ in chunk_lists[n]:
                cos = float(vecs[pos] @ q)
                out[n].append(min(1.0, max(0.0, (1.0 + cos) / 2.0)))
                pos += 1
        return out


def _find_embedder(retriever):
    """The dense embedder inside a retriever (dense, hybrid, reranked), or ``None``."""
    seen = 0
    while retriever is not None and seen < 5:
        if getattr(retriever, "embedder", None) is not None:
            return retriever.embedder
        retriever = getattr(retriever, "dense", None) or getattr(retriever, "first_stage", None)
        seen += 1
    return None


@RETRIEVAL_EVALUATORS.register("learned")
def learned_relevance(config: RunConfig, *, evaluator=None, retriever=None) -> LearnedRelevance:
    """The ``learned`` scorer: the given learned evaluator, else one built from ``config.evaluator``
    (the shipped checkpoint by default; ``name`` forced to ``learned``)."""
    if evaluator is None:
        evaluator = build_evaluator(replace(config.evaluator, name="learned"))
    return LearnedRelevance(evaluator)


@RETRIEVAL_EVALUATORS.register("embedding")
def embedding_relevance(config: RunConfig, *, evaluator=None, retriever=None) -> EmbeddingRelevance:
    """The ``embedding`` scorer: the retriever's dense embedder, else ``config.models.embedder`` (the
    packaged all-MiniLM-L6-v2 by default)."""
    embedder = _find_embedder(retriever)
    if embedder is None:
        embedder = Embedder(
            config.models.embedder,
            query_instruction=config.retrieval.query_instruction,
            backend=config.retrieval.backend,
            device=config.retrieval.device,
            batch_size=config.retrieval.batch_size,
        )
    return EmbeddingRelevance(embedder)


# ------------------------------------------------------------------------------------------ the system


def corrective_prompt(question: str, strips: Sequence[Strip], max_chunk_chars: int) -> Prompt:
    """The generator prompt: Naive RAG's prompt with the kept strips as the passages (cited by chunk id)."""
    return naive_prompt(question, [s.as_chunk() for s in strips], max_chunk_chars)


@dataclass
class _Batch:
    """One batch of questions as it moves through Corrective RAG's steps."""

    questions: list[str]
    extra: list[Sequence[Chunk] | None]
    rows: list[list[Chunk]] = field(default_factory=list)
    retrieved: list[int] = field(default_factory=list)
    scores: list[list[float]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    wanted: list[int] = field(default_factory=list)
    external: dict[int, list[Chunk]] = field(default_factory=dict)
    fallback: dict[int, str] = field(default_factory=dict)
    strips: list[list[Strip]] = field(default_factory=list)
    kept: list[list[Strip]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


class CorrectiveRAG(RAGSystem):
    """Corrective RAG: retrieval evaluator → action (correct / ambiguous / incorrect) → knowledge refinement
    → ONE batched generation call for all questions (see the module docstring).

    Args:
        config: The run config (``k``, ``generator`` section, ``retrieval`` / ``models``, ``evaluator``).
        index: Index folder for retrieval and for the expanded-retrieval fallback (``None``: chunks are
            given per question, the fallback uses ``extra_chunks``).
        backend: An already-loaded generator backend (share it with the systems it is compared with).
        retriever: An already-built retriever (share it too).
        evaluator: An already-built learned evaluator to share (``retrieval_evaluator: learned``).
        corrective: CRAG's settings (``None``: the defaults of :class:`CorrectiveConfig`).
    """

    name = "corrective"
    uses_extra_chunks = True

    def __init__(
        self,
        config: RunConfig,
        index: str | Path | None = None,
        *,
        backend: Backend | None = None,
        retriever=None,
        evaluator=None,
        corrective: CorrectiveConfig | None = None,
    ):
        check_llm_generator(config, "Corrective RAG")
        self.corrective = corrective if corrective is not None else CorrectiveConfig()
        if not isinstance(self.corrective, CorrectiveConfig):
            raise ConfigError(f"corrective must be a CorrectiveConfig; got {type(self.corrective).__name__}")
        super().__init__(config, index, retriever=retriever)
        self.scorer = RETRIEVAL_EVALUATORS.get(self.corrective.retrieval_evaluator)(
            config, evaluator=evaluator, retriever=self.retriever
        )
        self.backend = backend if backend is not None else load_backend(config.generator.backend)
        self.passes = 0

    @classmethod
    def from_shared(cls, config: RunConfig, shared: SharedModels) -> CorrectiveRAG:
        """Corrective RAG (settings ``baselines.corrective``) on the evaluation's shared generator backend;
        the ``learned`` retrieval evaluator is the evaluation's learned evaluator (shared with
        EvidentialRAG). The incorrect branch's web search is the harness's ``extra_chunks``."""
        settings = config.baselines.corrective
        evaluator = shared.learned_evaluator if settings.retrieval_evaluator == "learned" else None
        return cls(config, backend=shared.generator_backend, evaluator=evaluator, corrective=settings)

    def details(self) -> dict[str, Any]:
        c = self.corrective
        return {
            "retrieval_evaluator": c.retrieval_evaluator,
            "thresholds": {"upper": c.upper, "lower": c.lower},
        }

    @property
    def expand(self) -> int:
        """Extra chunks the fallback fetches (``corrective.expand``, default ``k``)."""
        return self.corrective.expand if self.corrective.expand is not None else self.config.k

    @property
    def budget_chars(self) -> int:
        """The knowledge budget: Naive RAG's context, ``k × generator.max_chunk_chars`` characters."""
        return self.config.k * self.config.generator.max_chunk_chars

    def _external(
        self,
        questions: list[str],
        rows: list[list[Chunk]],
        extra: list[Sequence[Chunk] | None],
        wanted: list[int],
    ) -> tuple[dict[int, list[Chunk]], dict[int, str], float]:
        """External knowledge for the questions in ``wanted``: (chunks, fallback name, retrieval seconds)."""
        chunks: dict[int, list[Chunk]] = {}
        fallback: dict[int, str] = {}
        seconds = 0.0
        if wanted and self.retriever is not None:
            t0 = time.perf_counter()
            got = self.retriever.search_batch([questions[i] for i in wanted], self.config.k + self.expand)
            seconds = time.perf_counter() - t0
            for i, cs in zip(wanted, got):
                seen = {c.id for c in rows[i]}
                chunks[i] = [c for c in cs if c.id not in seen][: self.expand]
                fallback[i] = "index"
        else:
            for i in wanted:
                if extra[i] is None:
                    chunks[i], fallback[i] = [], "none"
                    continue
                seen = {c.id for c in rows[i]}
                chunks[i] = [c for c in extra[i] if c.id not in seen][: self.expand]
                fallback[i] = "extra_chunks"
        for i in wanted:
            if not chunks[i]:
                fallback[i] = "none"
        return chunks, fallback, seconds

    def ask_batch(
        self,
        questions: Sequence[str],
        chunks: Sequence[Sequence[Chunk] | None] | None = None,
        extra_chunks: Sequence[Sequence[Chunk] | None] | None = None,
    ) -> list[dict[str, Any]]:
        """Answer every question: one retrieval call, one batched relevance pass over all chunks, one over
        all strips, ONE batched generation call.

        Args:
            questions: The questions.
            chunks: Per question its retrieved chunks (``None`` entries, or ``None``: retrieve top-k).
            extra_chunks: Per question the external knowledge used without an index (e.g. the instance's
                next-ranked passages); ``None`` entries (or ``None``): none.

        Returns:
            One JSON-ready record per question: ``system``, ``question``, ``response``, ``route``
            (``direct``), ``action`` (``correct`` / ``ambiguous`` / ``incorrect``), ``relevance`` (per chunk
            ``chunk_id``, ``score``), ``knowledge`` (the strips used: ``chunk_id``, ``text``, ``score``,
            ``origin`` ``internal`` / ``external``), ``fallback`` (what replaced web search: ``index``,
            ``extra_chunks``, ``none``; ``None`` for ``correct``, which needs no external knowledge),
            ``chunks`` and ``external_chunks`` (``chunk_id``, ``rank``, ``source``),
            ``retrieval_evaluator``, ``thresholds``, ``timings`` (``retrieve``, ``evaluate``, ``refine``,
            ``generate``; the last three are batch totals), ``logical_decisions`` (chunk and strip
            judgments + the answer), ``batched_passes`` (model passes of the whole batch: scorer passes +
            the generation call), ``prompt_version`` and ``deviations``.
        """
        questions = list(questions)
        n = len(questions)
        extra = list(extra_chunks) if extra_chunks is not None else [None] * n
        if len(extra) != n:
            raise ValueError(f"got {n} questions but {len(extra)} extra_chunks lists")
        passes0 = self.scorer.passes
        batch = _Batch(questions, extra)
        batch.rows, batch.retrieved, batch.timings["retrieve"] = given_or_retrieved(
            questions, chunks, self.config.k, self.retriever
        )
        self._evaluate_retrieval(batch)
        self._gather_external(batch)
        self._refine(batch)
        self._generate(batch)
        return self._records(batch, passes=self.scorer.passes - passes0 + 1)

    def _evaluate_retrieval(self, batch: _Batch) -> None:
        """Step 1, the retrieval evaluator: one batched pass over every (question, chunk), then the actions."""
        c = self.corrective
        t0 = time.perf_counter()
        batch.scores = self.scorer.score(batch.questions, batch.rows)
        batch.timings["evaluate"] = time.perf_counter() - t0
        batch.actions = [decide_action(s, c.upper, c.lower) for s in batch.scores]

    def _gather_external(self, batch: _Batch) -> None:
        """Step 2, external knowledge for the incorrect and ambiguous questions."""
        batch.wanted = [i for i, a in enumerate(batch.actions) if a != "correct"]
        batch.external, batch.fallback, t_ext = self._external(
            batch.questions, batch.rows, batch.extra, batch.wanted
        )
        batch.timings["external_each"] = t_ext / len(batch.wanted) if batch.wanted else 0.0

    def _knowledge_sources(self, batch: _Batch, i: int) -> list[tuple[Chunk, str]]:
        """The chunks question ``i``'s strips come from, each with its origin (``internal`` / ``external``)."""
        action, sources = batch.actions[i], []
        if action != "incorrect" or batch.fallback.get(i) == "none":
            cs = batch.rows[i]
            keep = (
                [ch for ch, x in zip(cs, batch.scores[i]) if x > self.corrective.lower]
                if action != "incorrect"
                else cs
            )
            sources += [(ch, "internal") for ch in keep]
        if action != "correct":
            sources += [(ch, "external") for ch in batch.external.get(i, [])]
        return sources

    def _refine(self, batch: _Batch) -> None:
        """Step 3, knowledge refinement: strips of the kept chunks, scored in one batched pass, selected."""
        c = self.corrective
        t0 = time.perf_counter()
        max_chars = self.config.generator.max_chunk_chars
        for i in range(len(batch.questions)):
            found: list[Strip] = []
            for ch, origin in self._knowledge_sources(batch, i):
                for text in split_strips(ch.text, c.strip_sentences, max_chars):
                    found.append(Strip(ch.id, text, origin, len(found), ch.source))
            batch.strips.append(found)
        strip_scores = self.scorer.score(
            batch.questions,
            [
                [Chunk(id=f"{s.chunk_id}#s{s.order}", text=s.text, source=s.source) for s in ss]
                for ss in batch.strips
            ],
        )
        for ss, sc in zip(batch.strips, strip_scores):
            for s, x in zip(ss, sc):
                s.score = x
            batch.kept.append(select_strips(ss, c.strip_threshold, c.max_strips, self.budget_chars))
        batch.timings["refine"] = time.perf_counter() - t0

    def _generate(self, batch: _Batch) -> None:
        """Step 4, ONE batched generation call with the kept strips as the passages."""
        gcfg = self.config.generator
        prompts = [
            corrective_prompt(q, ks, gcfg.max_chunk_chars) for q, ks in zip(batch.questions, batch.kept)
        ]
        t0 = time.perf_counter()
        gens = self.backend.generate(prompts, gcfg.generation)
        batch.timings["generate"] = time.perf_counter() - t0
        self.passes += 1
        batch.texts = [g.text.strip() for g in gens]

    def _records(self, batch: _Batch, passes: int) -> list[dict[str, Any]]:
        """The answer records of the batch (see :meth:`ask_batch`)."""
        c = self.corrective
        description = _EVALUATOR_DESCRIPTIONS.get(self.scorer.name, self.scorer.name)
        deviations = [d.format(evaluator=description) for d in CORRECTIVE_DEVIATIONS]
        t = batch.timings
        records = []
        for i, (q, cs, text) in enumerate(zip(batch.questions, batch.rows, batch.texts)):
            t_ret = (t["retrieve"] if i in batch.retrieved else 0.0) + (
                t["external_each"] if i in batch.wanted else 0.0
            )
            records.append(
                {
                    "system": self.name,
                    "question": q,
                    "response": text,
                    "route": "direct",
                    "action": batch.actions[i],
                    "relevance": [
                        {"chunk_id": ch.id, "score": rounded(x)} for ch, x in zip(cs, batch.scores[i])
                    ],
                    "knowledge": [
                        {
                            "chunk_id": s.chunk_id,
                            "text": s.text,
                            "score": rounded(s.score),
                            "origin": s.origin,
                        }
                        for s in batch.kept[i]
                    ],
                    "fallback": batch.fallback.get(i),
                    "chunks": [{"chunk_id": ch.id, "rank": ch.rank, "source": ch.source} for ch in cs],
                    "external_chunks": [
                        {"chunk_id": ch.id, "rank": ch.rank, "source": ch.source}
                        for ch in batch.external.get(i, [])
                    ],
                    "retrieval_evaluator": self.scorer.name,
                    "thresholds": {"upper": c.upper, "lower": c.lower, "strip": c.strip_threshold},
                    "timings": {
                        "retrieve": rounded(t_ret),
                        "evaluate": rounded(t["evaluate"]),
                        "refine": rounded(t["refine"]),
                        "generate": rounded(t["generate"]),
                    },
                    "logical_decisions": len(cs) + len(batch.strips[i]) + 1,
                    "batched_passes": passes,
                    "prompt_version": CORRECTIVE_PROMPT_VERSION,
                    "deviations": deviations,
                }
            )
        return records
