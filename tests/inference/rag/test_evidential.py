"""The pipeline end to end on real RAMDocs records: retrieval from a real index, the learned evaluator,
fusion, routing and generation; batching; counters; the Naive RAG baseline; the `batch` command."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from inference.cli import app
from inference.config import RunConfig, load_config
from inference.evaluators import PromptEvaluator
from inference.rag import NaiveRAG
from inference.rag.evidential import EvidentialRAG
from inference.types import Chunk


def _cfg(checkpoint, *extra):
    return load_config(
        None,
        [
            "evaluator.name=learned",
            f"evaluator.checkpoint={checkpoint}",
            # the tiny random checkpoint's span head sits near its null score: always extract, so that
            # every question has a frame (what these plumbing tests assume), whatever the thread count
            "evaluator.span_null_margin=-1000",
            "evaluator.support_threshold=0.0",
            "generator.name=template",
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def rag(tiny_checkpoint, ramdocs_index):
    path, _, _ = ramdocs_index
    return EvidentialRAG(_cfg(tiny_checkpoint), path)


def test_retrieve_evaluate_fuse_route_generate(rag, ramdocs_records):
    questions = [r["question"] for r in ramdocs_records[:3]]
    records = rag.ask_batch(questions)
    assert [r["question"] for r in records] == questions
    for rec in records:
        ret = rec["retrieval"]
        assert ret["retrieved"] and ret["retriever"] == "dense" and ret["reranked"] is False
        assert ret["reranker"] is None and len(ret["chunks"]) == rag.config.k == len(rec["chunks"])
        assert [c["rank"] for c in ret["chunks"]] == list(range(1, rag.config.k + 1))
        assert rec["route"] in ("direct", "conflict", "abstain") and 0 <= rec["uncertainty"] <= 1
        total = sum(c["mass"] for c in rec["claims"]) + rec["uncertainty"]
        assert total == pytest.approx(1.0, abs=1e-5)
        assert {"retrieve", "extract", "evaluate", "align", "fuse_route", "generate"} <= set(rec["timings"])
        # learned evaluator with extracted claims: 2 encoder passes; template generator: no model call
        assert rec["logical_decisions"] == rag.config.k and rec["batched_passes"] == 2
        assert rec["generation"]["generator"] == "template" and rec["response"]
    # the first question's own documents are retrieved for it (real dense retrieval over the index)
    own = {d["text"][:50] for d in ramdocs_records[0]["documents"]}
    got = rag.retriever.search(questions[0], rag.config.k)
    assert any(c.text[:50] in own for c in got)


def test_given_chunks_candidates_and_fusion_overrides(rag, ramdocs_records):
    rec = ramdocs_records[1]
    chunks = [Chunk(f"d{i}", d["text"], rank=i + 1) for i, d in enumerate(rec["documents"])]
    cands = [*rec["gold_answers"], *rec["wrong_answers"]]
    base = rag.ask(rec["question"], chunks, cands)
    assert base["retrieval"]["retrieved"] is False and base["batched_passes"] == 1
    assert [c["text"] for c in base["claims"]][: len(cands)] == cands
    forced = rag.ask(rec["question"], chunks, cands, fusion=rag.with_fusion(tau1=0.0, tau2=1e-9))
    assert forced["route"] == "abstain"  # U >= tau2 ~ 0 abstains (Eq 15): finite evidence leaves U > 0
    assert forced["uncertainty"] == pytest.approx(base["uncertainty"])
    everything = rag.ask(rec["question"], chunks, cands, fusion=rag.with_fusion(tau1=0.999999, tau2=1.0))
    assert everything["route"] == "direct"  # U < tau1: answer directly


def test_no_index_and_no_chunks_is_a_clear_error(tiny_checkpoint):
    rag = EvidentialRAG(_cfg(tiny_checkpoint))
    with pytest.raises(Exception, match="no index loaded"):
        rag.ask("Who?")


def test_prompt_evaluator_and_llm_generator_share_one_model(smollm2, tiny_checkpoint):
    cfg = load_config(
        None,
        ["evaluator.name=prompt", "evaluator.generation.max_tokens=48", "generator.generation.max_tokens=24"],
    )
    evaluator = PromptEvaluator(smollm2, cfg.evaluator.generation)
    rag = EvidentialRAG(cfg, evaluator=evaluator)
    assert rag.generator.backend is smollm2  # same backend section: the model is loaded once
    before = smollm2.passes
    chunks = [
        [Chunk("a", "Paris is the capital of France.")],
        [Chunk("b", "Berlin is the capital of Germany.")],
    ]
    recs = rag.ask_batch(["Capital of France?", "Capital of Germany?"], chunks)
    assert smollm2.passes - before == 2  # one evaluator pass + one generator pass for both questions
    assert all(r["logical_decisions"] == 2 and r["batched_passes"] == 2 for r in recs)


def test_naive_rag_one_pass(smollm2, ramdocs_index, tiny_checkpoint):
    path, _, _ = ramdocs_index
    cfg = load_config(None, ["generator.generation.max_tokens=16", "k=3"])
    naive = NaiveRAG(cfg, path, backend=smollm2)
    before = smollm2.passes
    recs = naive.ask_batch(["What sport is Bobby Carpenter associated with?", "Who wrote Hamlet?"])
    assert smollm2.passes - before == 1 and naive.passes == 1
    assert all(
        r["batched_passes"] == 1 and r["logical_decisions"] == 1 and len(r["chunks"]) == cfg.k for r in recs
    )
    assert all(isinstance(r["response"], str) for r in recs)


def test_batch_command_over_ramdocs_rows(tiny_checkpoint, ramdocs_records, tmp_path):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(
        "".join(json.dumps({"id": f"r{i}", **r}) + "\n" for i, r in enumerate(ramdocs_records[:5]))
    )
    out = tmp_path / "answers.jsonl"
    args = [
        "--set",
        "evaluator.name=learned",
        "--set",
        f"evaluator.checkpoint={tiny_checkpoint}",
        "--set",
        "generator.name=template",
    ]
    res = CliRunner().invoke(
        app,
        [
            "batch",
            "--questions",
            str(qfile),
            "--chunks-field",
            "documents",
            "--out",
            str(out),
            "--batch-size",
            "2",
            *args,
        ],
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(5)]
    assert all(len(r["chunks"]) <= RunConfig().k and r["retrieval"]["retrieved"] is False for r in rows)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "documents": "oops"}\n')
    res = CliRunner().invoke(
        app, ["batch", "--questions", str(bad), "--chunks-field", "documents", "--out", str(out), *args]
    )
    assert res.exit_code == 2 and "bad.jsonl:1: field 'documents' must be a list of chunks" in res.stderr
    res = CliRunner().invoke(app, ["batch", "--questions", str(qfile), "--out", str(out), *args])
    assert res.exit_code == 2 and "exactly one of --index DIR" in res.stderr
