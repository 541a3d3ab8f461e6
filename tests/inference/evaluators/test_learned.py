"""The learned evaluator behind the evaluator interface: frames, passes, decisions, the registry and `ask`."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from evidential.errors import ConfigError
from inference.cli import app
from inference.evaluators import EVALUATORS, LearnedEvaluator, build_evaluator
from inference.evaluators.config import EvaluatorConfig
from inference.ramdocs import load_ramdocs
from inference.types import Chunk
from training.learned.checkpoint import load_learned_model


def _tiny_evaluator(checkpoint, **settings):
    """The tiny *random* head's decision rule; grounding, which would drop its arbitrary picks, is tested in
    test_grounding.py on the shipped checkpoint."""
    return build_evaluator(
        EvaluatorConfig(
            name="learned", checkpoint=str(checkpoint), support_threshold=0.0, grounding="off", **settings
        )
    )


@pytest.fixture(scope="module")
def evaluator(tiny_checkpoint):
    # no fallback extraction pass: the pass counts below are those of the two-pass path
    return _tiny_evaluator(tiny_checkpoint, span_fallback_margin=None)


def _chunks(record, k=4):
    return [Chunk(f"d{i}", d["text"], rank=i + 1) for i, d in enumerate(record["documents"][:k])]


def test_registered_and_built_from_config(evaluator, tiny_checkpoint):
    assert "learned" in EVALUATORS
    assert isinstance(evaluator, LearnedEvaluator)
    assert evaluator.checkpoint == str(tiny_checkpoint)
    assert evaluator.card["command"] == "tests"


def test_candidates_open_the_frame_in_one_pass(evaluator):
    rec = load_ramdocs()[0]
    cands = [*rec["gold_answers"], *rec["wrong_answers"]]
    res = evaluator.evaluate(rec["question"], _chunks(rec), cands)
    assert res.claim_texts[: len(cands)] == cands
    assert res.evidence.shape == (len(res.chunks), len(res.claims))
    assert bool((res.evidence >= 0).all()) and res.evidence.dtype == torch.float64
    assert res.batched_passes == 1 and res.logical_decisions == len(res.chunks)
    assert res.meta["claims_from"] == "candidates" and res.counts["valid"] == len(res.chunks)
    for d, row in zip(res.decisions, res.evidence):
        top = int(row.argmax())
        assert d.stance == "supports" and d.claim == res.claims[top].text  # threshold 0: the top claim
        assert d.evidence[res.claims[top].id] == pytest.approx(float(row[top]), abs=1e-6)
        assert d.chunk_id in res.claims[top].chunk_ids


def test_yes_no_questions_get_the_fixed_frame(evaluator):
    res = evaluator.evaluate("Is the Nile longer than the Amazon?", [Chunk("c", "The Nile is 6650 km long.")])
    assert res.claim_texts == ["yes", "no"] and res.batched_passes == 1


def test_extraction_then_scoring_batched_across_queries(evaluator):
    recs = load_ramdocs()[:3]
    calls = []
    hook = evaluator.model.encoder.register_forward_hook(lambda *a: calls.append(1))
    try:
        results = evaluator.evaluate_batch([r["question"] for r in recs], [_chunks(r, 3) for r in recs])
    finally:
        hook.remove()
    assert len(calls) == 2  # one extraction pass + one evidence pass for all three queries
    for res in results:
        assert res.meta["claims_from"] == "extracted" and res.batched_passes == 2
        assert res.evidence.shape == (len(res.chunks), len(res.claims))
        for c in res.claims:  # every extracted claim is a span of one of the chunks
            assert any(f in ch.text for f in c.forms for ch in res.chunks)


def test_a_query_whose_chunks_give_no_span_is_read_again_at_the_fallback_margin(tiny_checkpoint):
    """No chunk beats the no-answer score by 1e6, so the frame would be empty and the answer an abstention.
    With a fallback margin the chunks of that query only are read once more and each gives its best span;
    a query with candidates is not re-read; with the fallback off (or not below the null margin) the frame
    stays empty."""
    recs = load_ramdocs()[:2]
    chunks = [_chunks(recs[0], 3), _chunks(recs[1], 2)]
    questions = [r["question"] for r in recs]
    candidates = [[], [*recs[1]["gold_answers"], *recs[1]["wrong_answers"]]]

    def build(fallback):
        return _tiny_evaluator(tiny_checkpoint, span_null_margin=1e6, span_fallback_margin=fallback)

    on = build(-1e6)
    rows = []
    hook = on.model.encoder.register_forward_hook(
        lambda mod, args, kwargs, out: rows.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True
    )
    try:
        res = on.evaluate_batch(questions, chunks, candidates)
    finally:
        hook.remove()
    k = len(chunks[0])
    assert rows[:2] == [k, k] and len(rows) == 3  # extraction, fallback (query 0's chunks only), evidence
    assert res[0].meta["span_fallback"] is True and res[0].batched_passes == 3
    assert res[0].claims and all(
        any(f in ch.text for f in c.forms for ch in chunks[0]) for c in res[0].claims
    )
    assert res[1].meta["span_fallback"] is False and res[1].meta["claims_from"] == "candidates"
    for off in (build(None), build(1e6)):
        got = off.evaluate(questions[0], chunks[0])
        assert got.claims == [] and got.meta["span_fallback"] is False and got.batched_passes == 1
    with pytest.raises(ConfigError, match="span_fallback_margin must be null or a finite number"):
        EvaluatorConfig(name="learned", span_fallback_margin=float("nan"))


def test_threshold_turns_weak_evidence_into_irrelevance(tiny_checkpoint):
    model = load_learned_model(tiny_checkpoint)
    ev = LearnedEvaluator(model, support_threshold=1e9)
    res = ev.evaluate("Who?", [Chunk("c", "Text.")], ["A", "B"])
    assert res.decisions[0].stance == "irrelevant" and res.decisions[0].claim is None
    assert res.claims[0].chunk_ids == [] and res.evidence.shape == (1, 2)  # evidence is still fused as given


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found; train one with `evidential-rag train`"):
        build_evaluator(EvaluatorConfig(name="learned", checkpoint=str(tmp_path / "none")))
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "learned_config.json").write_text("{}")
    with pytest.raises(ConfigError, match="missing heads.safetensors"):
        build_evaluator(EvaluatorConfig(name="learned", checkpoint=str(tmp_path / "half")))


def test_ask_with_the_learned_evaluator(tiny_checkpoint, tmp_path):
    chunks = tmp_path / "c.jsonl"
    chunks.write_text(
        "\n".join(
            json.dumps({"id": f"c{i}", "text": t}) for i, t in enumerate(["Paris is the capital.", "Lyon."])
        )
    )
    res = CliRunner().invoke(
        app,
        [
            "ask",
            "What is the capital?",
            "--chunks",
            str(chunks),
            "--evaluator",
            "learned",
            "--json",
            "--set",
            f"evaluator.checkpoint={tiny_checkpoint}",
            "--candidates",
            "Paris,Lyon",
            "--set",
            "generator.name=template",
        ],
    )
    assert res.exit_code == 0, res.output
    record = json.loads(res.stdout)
    assert record["evaluator"] == "learned" and record["batched_passes"] == 1
    assert [c["text"] for c in record["claims"]] == ["Paris", "Lyon"]
    assert record["route"] in ("direct", "conflict", "abstain")


def test_span_candidates_add_alternates_to_the_frame():
    """The shipped checkpoint on real RAMDocs chunks: with two spans per chunk the frame keeps every claim
    of the one-span frame, first and in order, and the alternates follow (said in the rationale)."""
    recs = load_ramdocs()[:3]
    qs = [r["question"] for r in recs]
    chunks = [_chunks(r, k=5) for r in recs]
    one, two = (
        build_evaluator(EvaluatorConfig(name="learned", span_candidates=n, span_candidate_margin=5.0))
        for n in (1, 2)
    )
    grew = 0
    for a, b in zip(one.evaluate_batch(qs, chunks), two.evaluate_batch(qs, chunks)):
        for c, d in zip(a.chunks, a.decisions):  # the answer read from each chunk: its repaired span
            assert (d.extracted is None) == (not d.rationale.startswith("span "))
            assert d.extracted is None or (
                d.extracted in c.text and d.rationale.startswith(f"span {d.extracted!r}")
            )
        ta, tb = a.claim_texts, b.claim_texts
        assert tb[: len(ta)] == ta
        grew += len(tb) > len(ta)
        if len(tb) > len(ta):
            assert any("alternates" in d.rationale for d in b.decisions)
    assert grew > 0


def test_every_read_chunk_carries_its_reader_score_and_the_answer_record_its_answers():
    """The shipped checkpoint on real RAMDocs chunks: each chunk of an extracted frame has the span head's
    reader score (the score decode_spans gives it, also for a chunk that gives no span), a chunk whose span
    is extracted scores above the null margin, and the answer record's reader score is the best score of
    the chunks backing its answer; frames the span head does not read (yes/no, given candidates) have none."""
    from evidential import FusionConfig
    from inference.answer import build_answer_record

    recs = load_ramdocs()[:3]
    qs = [r["question"] for r in recs]
    chunks = [_chunks(r, k=5) for r in recs]
    ev = build_evaluator(EvaluatorConfig(name="learned"))
    results = ev.evaluate_batch(qs, chunks)
    for q, cs, res in zip(qs, chunks, results):
        want = [s for _, s in ev.model.decode_spans([q] * len(cs), [c.text for c in cs])]
        got = [d.reader_score for d in res.decisions]
        assert got == pytest.approx(want, abs=1e-5)
        for d in res.decisions:
            if d.extracted is not None and not res.meta["span_fallback"]:
                assert d.reader_score > ev.span_null_margin
        rec = build_answer_record(res, FusionConfig())
        assert all(c.reader_score == d.reader_score for c, d in zip(rec.chunks, res.decisions))
        if rec.answer is not None:
            backing = [
                d.reader_score
                for d, row in zip(res.decisions, res.evidence)
                if row.numel() and row.max() > 0 and res.claims[int(row.argmax())].text == rec.answer
            ]
            assert rec.reader_score == pytest.approx(max(backing or got), abs=1e-5)
        assert rec.to_dict()["reader_score"] == rec.reader_score
    yn = ev.evaluate("Is the Nile longer than the Amazon?", [Chunk("c", "The Nile is 6650 km long.")])
    given = ev.evaluate(qs[0], chunks[0], [*recs[0]["gold_answers"], *recs[0]["wrong_answers"]])
    for res in (yn, given):
        assert all(d.reader_score is None for d in res.decisions)
        assert build_answer_record(res, FusionConfig()).reader_score is None
