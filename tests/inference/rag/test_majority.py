"""The rule-only baseline: majority vote over the evaluator's claims, on hand-built decisions and on real
RAMDocs records with the learned evaluator (same chunks, same extraction as EvidentialRAG)."""

from __future__ import annotations

from inference.config import load_config
from inference.evaluation import metrics as M
from inference.rag import BASELINES, SYSTEMS, MajorityVoteRAG, majority_vote
from inference.rag.evidential import EvidentialRAG
from inference.types import Chunk, ChunkEvidence


def test_majority_vote_counts_supporting_chunks_and_keeps_ties():
    ds = [
        ChunkEvidence("c1", "A", "a", "supports"),
        ChunkEvidence("c2", "B", "b", "supports"),
        ChunkEvidence("c3", "B", "b", "supports"),
        ChunkEvidence("c4", "A", "a", "supports"),
        ChunkEvidence("c5", None, None, "irrelevant"),
    ]
    votes, top = majority_vote(ds)
    assert votes == {"A": ["c1", "c4"], "B": ["c2", "c3"]} and top == ["A", "B"]
    assert majority_vote(ds[:3]) == ({"A": ["c1"], "B": ["c2", "c3"]}, ["B"])
    assert majority_vote(ds[4:]) == ({}, [])


def test_registered_as_a_baseline():
    assert "majority" in BASELINES and SYSTEMS.get("majority") is MajorityVoteRAG


def test_on_real_records_with_the_same_evaluator_as_evidential(tiny_checkpoint, ramdocs_records):
    cfg = load_config(
        None,
        [
            "evaluator.name=learned",
            f"evaluator.checkpoint={tiny_checkpoint}",
            "evaluator.support_threshold=0.0",
            "generator.name=template",
        ],
    )
    evidential = EvidentialRAG(cfg)
    majority = MajorityVoteRAG(cfg, evaluator=evidential.evaluator, generator=evidential.generator)
    recs = ramdocs_records[:4]
    questions = [r["question"] for r in recs]
    chunks = [[Chunk(f"d{i}", d["text"], rank=i + 1) for i, d in enumerate(r["documents"])] for r in recs]
    ours = evidential.ask_batch(questions, chunks)
    theirs = majority.ask_batch(questions, chunks)
    for e, m, cs in zip(ours, theirs, chunks):
        # same chunks, same per-chunk claims
        assert [c["chunk_id"] for c in m["chunks"]] == [c.id for c in cs[: cfg.k]]
        assert [c["claim"] for c in m["chunks"]] == [c["claim"] for c in e["chunks"]]
        votes = {}
        for c in e["chunks"]:
            if c["stance"] == "supports":
                votes[c["claim"]] = votes.get(c["claim"], 0) + 1
        assert m["votes"] == votes
        top = max(votes.values(), default=0)
        assert m["stated_claims"] == [c for c, v in votes.items() if v == top and top > 0]
        assert m["route"] == ("direct" if votes else "abstain")
        assert M.committed_answers(m, m["question"]) == m["stated_claims"]
        for claim in m["stated_claims"]:
            assert claim in m["response"]
