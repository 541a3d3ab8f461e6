"""Corrective RAG (CRAG): config, the action rule, strips and their selection, relevance as belief mass, and
end to end on real RAMDocs questions with the shipped learned checkpoint and the packaged SmolLM2."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from evidential.errors import ConfigError, UnknownNameError  # noqa: E402
from inference.rag import BASELINES, RETRIEVAL_EVALUATORS, CorrectiveConfig, CorrectiveRAG  # noqa: E402
from inference.rag.corrective import (  # noqa: E402
    CORRECTIVE_PROMPT_VERSION,
    EmbeddingRelevance,
    LearnedRelevance,
    Strip,
    decide_action,
    relevance_from_evidence,
    select_strips,
    split_sentences,
    split_strips,
)
from inference.types import Chunk  # noqa: E402

RECORD_FIELDS = {
    "system",
    "question",
    "response",
    "route",
    "action",
    "relevance",
    "knowledge",
    "fallback",
    "chunks",
    "external_chunks",
    "retrieval_evaluator",
    "thresholds",
    "timings",
    "logical_decisions",
    "batched_passes",
    "prompt_version",
    "deviations",
}


def _flat(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------------------------- config


def test_config_defaults_and_help():
    from dataclasses import fields

    cfg = CorrectiveConfig()
    assert cfg.retrieval_evaluator == "learned" and cfg.lower < cfg.upper and cfg.expand is None
    assert all(f.metadata.get("help") for f in fields(CorrectiveConfig))
    assert set(RETRIEVAL_EVALUATORS.names()) == {"learned", "embedding"}
    assert BASELINES.get("corrective") is CorrectiveRAG


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"retrieval_evaluator": "t5"},
            "corrective.retrieval_evaluator must be one of learned, embedding; got 't5'",
        ),
        ({"upper": 1.5}, "corrective.upper must be a number in [0, 1]; got 1.5"),
        ({"lower": -0.1}, "corrective.lower must be a number in [0, 1]; got -0.1"),
        ({"upper": True}, "corrective.upper must be a number in [0, 1]; got True"),
        ({"strip_threshold": "0.5"}, "corrective.strip_threshold must be a number in [0, 1]; got '0.5'"),
        (
            {"lower": 0.6, "upper": 0.6},
            "corrective.lower must be below baselines.corrective.upper; got lower=0.6, upper=0.6",
        ),
        (
            {"lower": 0.7, "upper": 0.3},
            "corrective.lower must be below baselines.corrective.upper; got lower=0.7, upper=0.3",
        ),
        ({"max_strips": 0}, "corrective.max_strips must be an integer >= 1; got 0"),
        ({"max_strips": 2.0}, "corrective.max_strips must be an integer >= 1; got 2.0"),
        ({"strip_sentences": 0}, "corrective.strip_sentences must be an integer >= 1; got 0"),
        ({"expand": 0}, "corrective.expand must be an integer >= 1 or null (= k); got 0"),
        ({"expand": True}, "corrective.expand must be an integer >= 1 or null (= k); got True"),
    ],
)
def test_config_validation_messages(kwargs, message):
    with pytest.raises(ConfigError) as err:
        CorrectiveConfig(**kwargs)
    assert str(err.value) == f"baselines.{message}"


def test_unknown_scorer_name_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match="choose one of: embedding, learned"):
        RETRIEVAL_EVALUATORS.get("t5-large")


# ----------------------------------------------------------------------------------------- actions


@pytest.mark.parametrize(
    ("scores", "action"),
    [
        ([0.61, 0.0], "correct"),  # one score above upper
        ([0.6, 0.59], "ambiguous"),  # equal to upper is not above it
        ([0.600001], "correct"),
        ([0.2, 0.1], "ambiguous"),  # equal to lower is not below it
        ([0.199999, 0.0], "incorrect"),  # every score below lower
        ([0.0, 0.0, 0.0], "incorrect"),
        ([0.1, 0.3], "ambiguous"),
        ([0.1, 0.9], "correct"),  # correct wins over low scores
        ([], "incorrect"),  # nothing retrieved: external knowledge
    ],
)
def test_decide_action_at_and_around_thresholds(scores, action):
    assert decide_action(scores, upper=0.6, lower=0.2) == action


# ----------------------------------------------------------------------------------------- strips


def test_split_sentences():
    text = 'He was born in 1983.  He said "Go!" Then he left? 2006 was his year. A.B. Smith came'
    assert split_sentences(text) == [
        "He was born in 1983.",
        'He said "Go!"',
        "Then he left?",
        "2006 was his year.",
        "A.B. Smith came",
    ]
    assert split_sentences("Mr. Smith met Dr. Jones in St. Louis. They talked.") == [
        "Mr. Smith met Dr. Jones in St. Louis.",
        "They talked.",
    ]
    assert split_sentences("  \n ") == []
    assert split_sentences("3.5 million people live there. no capital after this. Done") == [
        "3.5 million people live there. no capital after this.",
        "Done",
    ]


@pytest.mark.parametrize(
    ("n", "sizes"),
    [(1, [1]), (2, [2]), (3, [3]), (4, [2, 2]), (5, [3, 2]), (6, [3, 3]), (7, [3, 2, 2]), (10, [3, 3, 2, 2])],
)
def test_split_strips_groups_two_or_three_sentences(n, sizes):
    text = " ".join(f"Sentence {i} ends here." for i in range(n))
    strips = split_strips(text, 3)
    assert [s.count("ends here.") for s in strips] == sizes
    assert " ".join(strips) == text  # nothing lost, order kept


def test_split_strips_cuts_long_strips_to_max_chars():
    text = "word " * 90 + "tail."  # one 455-character sentence
    strips = split_strips(text, 3, max_chars=100)
    assert all(len(s) <= 100 for s in strips) and len(strips) == 5
    assert " ".join(strips) == _flat(text)
    assert split_strips("x" * 250, 3, max_chars=100) == ["x" * 100, "x" * 100, "x" * 50]
    assert split_strips("", 3) == []
    with pytest.raises(ValueError, match="sentences_per_strip must be an integer >= 1"):
        split_strips("A. B.", 0)


def _strip(order, score, origin="internal", text=None):
    return Strip(f"c{order}", text or f"s{order}" * 5, origin, order, None, score)


def test_select_strips_threshold_top_and_original_order():
    strips = [_strip(0, 0.3), _strip(1, 0.9), _strip(2, 0.05), _strip(3, 0.5), _strip(4, 0.7)]
    got = select_strips(strips, threshold=0.3, max_strips=3, budget_chars=10_000)
    assert [s.order for s in got] == [1, 3, 4]  # best three of those >= 0.3, in original order
    got = select_strips(strips, threshold=0.3, max_strips=10, budget_chars=10_000)
    assert [s.order for s in got] == [0, 1, 3, 4]  # 0.3 == threshold is kept, 0.05 is not
    assert select_strips(strips, threshold=0.95, max_strips=3, budget_chars=10_000) == []


def test_select_strips_respects_the_char_budget():
    strips = [_strip(0, 0.9, text="a" * 60), _strip(1, 0.8, text="b" * 50), _strip(2, 0.7, text="c" * 40)]
    got = select_strips(strips, threshold=0.0, max_strips=3, budget_chars=100)
    assert [s.order for s in got] == [0, 2]  # 60 fits, 50 would exceed 100, 40 fits
    assert sum(len(s.text) for s in got) == 100


def test_select_strips_alternates_origins_for_ambiguous():
    strips = [
        _strip(0, 0.5),
        _strip(1, 0.4),
        _strip(2, 0.9, "external"),
        _strip(3, 0.8, "external"),
        _strip(4, 0.7, "external"),
    ]
    got = select_strips(strips, threshold=0.0, max_strips=3, budget_chars=10_000)
    # picks: internal 0.5, external 0.9, internal 0.4 -> original order
    assert [s.order for s in got] == [0, 1, 2]
    got = select_strips(strips, threshold=0.6, max_strips=3, budget_chars=10_000)
    assert [s.order for s in got] == [2, 3, 4]  # no internal strip clears the bar


# ----------------------------------------------------------------------------------------- relevance


def test_relevance_is_belief_mass_of_the_opinion():
    ev = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, 0.0], [6.0, 2.0]], dtype=torch.float64)
    # Σe / (Σe + M) with M = 2
    assert relevance_from_evidence(ev) == pytest.approx([3 / 5, 2 / 4, 0.0, 8 / 10], abs=1e-12)
    assert relevance_from_evidence(torch.zeros(3, 0, dtype=torch.float64)) == [0.0, 0.0, 0.0]  # M = 0
    assert relevance_from_evidence(torch.zeros(0, 2, dtype=torch.float64)) == []
    one = torch.tensor([[4.0]], dtype=torch.float64)
    assert relevance_from_evidence(one) == pytest.approx([0.8])
    with pytest.raises(ValueError, match=r"shape \[k, M\]"):
        relevance_from_evidence(torch.zeros(2))


def test_learned_scorer_refuses_another_evaluator():
    class Prompt:
        name = "prompt"

    with pytest.raises(ConfigError, match="needs the learned evaluator; got 'prompt'"):
        LearnedRelevance(Prompt())


def test_embedding_relevance_is_mapped_cosine(embedder):
    q = "What sport is Bobby Carpenter associated with?"
    chunks = [
        Chunk("a", "Bobby Carpenter is a former American football linebacker drafted by the Dallas Cowboys."),
        Chunk("b", "The courthouse in Adel, Iowa was built in 1902 by Proudfoot and Bird."),
    ]
    scorer = EmbeddingRelevance(embedder)
    got = scorer.score([q, "unused"], [chunks, []])
    assert scorer.passes == 1 and got[1] == []
    qv = embedder.encode_queries([q])[0]
    dv = embedder.encode_documents([c.text for c in chunks])
    assert got[0] == pytest.approx(list((1 + dv @ qv) / 2), abs=1e-5)
    assert 0 <= got[0][1] < got[0][0] <= 1


# ----------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def learned():
    from inference.config import load_config
    from inference.evaluators import build_evaluator

    return build_evaluator(load_config(None, []).evaluator)  # the shipped checkpoints/learned-minilm


@pytest.fixture(scope="module")
def instances(shared_data):
    from inference.evaluation.datasets import load_eval_dataset

    path = shared_data / "ramdocs" / "RAMDocs_test.jsonl"
    if not path.is_file():
        pytest.skip(f"RAMDocs not found at {path}")
    return load_eval_dataset("ramdocs", path, limit=6)


def _chunks(inst, k, extra, embedder):
    from inference.evaluation.runner import select_chunks

    got, _ = select_chunks(inst, k + extra, embedder, 256, 40)
    return got[:k], got[k:]


def test_end_to_end_two_ramdocs_questions(learned, smollm2, instances, embedder):
    from inference.config import load_config

    # the shared 2-core CPU generates about a token a second: 8 new tokens, 300-character chunks
    cfg = load_config(None, ["generator.generation.max_tokens=8", "generator.max_chunk_chars=300", "k=4"])
    budget = cfg.k * 300
    rag = CorrectiveRAG(cfg, backend=smollm2, evaluator=learned, corrective=CorrectiveConfig(max_strips=10))
    assert rag.name == "corrective" and rag.budget_chars == budget and rag.expand == cfg.k
    picked = [instances[2], instances[4]]
    rows = [_chunks(inst, cfg.k, cfg.k, embedder) for inst in picked]
    questions = [inst.question for inst in picked]
    gen0, ev0 = smollm2.passes, learned.passes
    recs = rag.ask_batch(questions, [r[0] for r in rows], [r[1] for r in rows])
    assert smollm2.passes - gen0 == 1  # ONE batched generation call for the batch
    ev_passes = learned.passes - ev0
    assert 1 <= ev_passes <= 4  # chunk pass(es) + strip pass(es), each shared by the batch
    # relevance = belief mass of the learned evaluator's opinions on the same chunks
    expected = [
        relevance_from_evidence(r.evidence) for r in learned.evaluate_batch(questions, [r[0] for r in rows])
    ]
    c = rag.corrective
    for rec, q, (chunks, extra), exp in zip(recs, questions, rows, expected):
        assert set(rec) == RECORD_FIELDS
        assert rec["system"] == "corrective" and rec["question"] == q and rec["route"] == "direct"
        assert isinstance(rec["response"], str) and rec["response"]
        assert rec["retrieval_evaluator"] == "learned"
        assert rec["prompt_version"] == CORRECTIVE_PROMPT_VERSION == "corrective/1.0"
        assert rec["batched_passes"] == ev_passes + 1
        assert set(rec["timings"]) == {"retrieve", "evaluate", "refine", "generate"}
        assert rec["timings"]["retrieve"] == 0.0 and rec["timings"]["generate"] > 0
        assert len(rec["deviations"]) == 2
        assert "web search" in rec["deviations"][0] and "T5-large" in rec["deviations"][1]
        assert rec["chunks"] == [{"chunk_id": ch.id, "rank": ch.rank, "source": ch.source} for ch in chunks]
        scores = [r["score"] for r in rec["relevance"]]
        assert [r["chunk_id"] for r in rec["relevance"]] == [ch.id for ch in chunks]
        assert scores == pytest.approx(exp, abs=1e-6) and all(0 <= s <= 1 for s in scores)
        assert rec["action"] == decide_action(scores, c.upper, c.lower)
        # knowledge: refined strips within the budget, in original order
        know = rec["knowledge"]
        assert sum(len(s["text"]) for s in know) <= budget and len(know) <= c.max_strips
        assert all(len(s["text"]) <= 300 and s["score"] >= c.strip_threshold for s in know)
        texts = {ch.id: _flat(ch.text) for ch in chunks + extra}
        assert all(s["text"] in texts[s["chunk_id"]] for s in know)
        order = [ch.id for ch in chunks + extra]
        assert [order.index(s["chunk_id"]) for s in know] == sorted(order.index(s["chunk_id"]) for s in know)
        above = {r["chunk_id"] for r in rec["relevance"] if r["score"] > c.lower}
        internal = [s for s in know if s["origin"] == "internal"]
        assert all(s["chunk_id"] in above for s in internal)
        if rec["action"] == "correct":
            assert rec["fallback"] is None and rec["external_chunks"] == [] and know == internal
        else:
            assert rec["fallback"] == ("extra_chunks" if extra else "none")
        assert rec["logical_decisions"] > len(chunks) + 1  # chunk and strip judgments + the answer
    assert {rec["action"] for rec in recs} <= {"correct", "ambiguous", "incorrect"}
    assert any(rec["knowledge"] for rec in recs)


def _forced(**kw):
    # every relevance in [0, 1) is below lower: the incorrect action for every question
    return CorrectiveConfig(upper=1.0, lower=1.0 - 1e-9, **kw)


def test_incorrect_uses_extra_chunks_or_falls_back_to_refined_internal(learned, smollm2, instances, embedder):
    from inference.config import load_config

    cfg = load_config(None, ["k=2", "generator.generation.max_tokens=2", "generator.max_chunk_chars=100"])
    rag = CorrectiveRAG(cfg, backend=smollm2, evaluator=learned, corrective=_forced(strip_threshold=0.0))
    inst_a = next(i for i in instances if len(i.passages) >= 4)
    chunks_a, extra_a = _chunks(inst_a, 2, 2, embedder)
    chunks_b, _ = _chunks(instances[0], 2, 0, embedder)
    assert len(extra_a) == 2
    gen0 = smollm2.passes
    # question A: extra passages (one duplicate of a retrieved chunk is dropped); question B: none
    rec_a, rec_b = rag.ask_batch(
        [inst_a.question, instances[0].question], [chunks_a, chunks_b], [[chunks_a[0], *extra_a], None]
    )
    assert smollm2.passes - gen0 == 1
    assert rec_a["action"] == rec_b["action"] == "incorrect"
    assert rec_a["fallback"] == "extra_chunks"
    assert [c["chunk_id"] for c in rec_a["external_chunks"]] == [c.id for c in extra_a]  # unseen, <= expand
    assert rec_a["knowledge"] and all(s["origin"] == "external" for s in rec_a["knowledge"])
    assert {s["chunk_id"] for s in rec_a["knowledge"]} <= {c.id for c in extra_a}  # retrieved ones discarded
    assert sum(len(s["text"]) for s in rec_a["knowledge"]) <= 200
    assert rec_b["fallback"] == "none" and rec_b["external_chunks"] == []
    assert rec_b["knowledge"] and all(s["origin"] == "internal" for s in rec_b["knowledge"])
    assert {s["chunk_id"] for s in rec_b["knowledge"]} <= {c.id for c in chunks_b}
    assert sum(len(s["text"]) for s in rec_b["knowledge"]) <= 200


def test_incorrect_with_an_index_uses_expanded_retrieval(
    learned, smollm2, ramdocs_records, embedder, make_cfg, write_jsonl, tmp_path
):
    from inference.retrieval import build_index, build_retriever

    corpus = write_jsonl(tmp_path / "corpus.jsonl", ramdocs_records[:3])
    cfg = make_cfg("k=2", "generator.generation.max_tokens=2", "generator.max_chunk_chars=100")
    build_index(corpus, tmp_path / "index", cfg, embedder=embedder, show_progress=False)
    retriever = build_retriever(tmp_path / "index", cfg, embedder=embedder)
    rag = CorrectiveRAG(
        cfg,
        backend=smollm2,
        retriever=retriever,
        evaluator=learned,
        corrective=_forced(expand=3, strip_threshold=0.0),
    )
    q = ramdocs_records[1]["question"]
    gen0 = smollm2.passes
    (rec,) = rag.ask_batch([q], extra_chunks=[[Chunk("ignored", "Not used when an index exists.")]])
    assert smollm2.passes - gen0 == 1
    top = retriever.search(q, 2 + 3)
    assert [c["chunk_id"] for c in rec["chunks"]] == [c.id for c in top[:2]]
    assert rec["action"] == "incorrect" and rec["fallback"] == "index"
    assert [c["chunk_id"] for c in rec["external_chunks"]] == [c.id for c in top[2:5]]
    assert rec["knowledge"] and all(s["origin"] == "external" for s in rec["knowledge"])
    assert rec["timings"]["retrieve"] > 0


def test_embedding_scorer_is_built_and_bad_inputs_fail(smollm2):
    from dataclasses import replace

    from inference.config import load_config

    cfg = load_config(None, ["k=2"])
    rag = CorrectiveRAG(cfg, backend=smollm2, corrective=CorrectiveConfig(retrieval_evaluator="embedding"))
    assert isinstance(rag.scorer, EmbeddingRelevance) and rag.scorer.embedder.name == cfg.models.embedder
    with pytest.raises(ValueError, match="got 1 questions but 2 chunk lists"):
        rag.ask_batch(["q"], [[], []])
    with pytest.raises(ValueError, match="got 1 questions but 0 extra_chunks lists"):
        rag.ask_batch(["q"], [[]], [])
    with pytest.raises(ConfigError, match="no index loaded: pass an index folder or give chunks"):
        rag.ask_batch(["q"])
    template = replace(cfg, generator=replace(cfg.generator, name="template"))
    with pytest.raises(ConfigError, match=r"Corrective RAG needs an LLM generator \(generator.name: llm\)"):
        CorrectiveRAG(template, backend=smollm2)
