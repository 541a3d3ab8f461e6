"""The LLM generator on the real packaged SmolLM2-135M-Instruct over real RAMDocs records (label-derived
evidence): the three routes of one batch in ONE backend pass, with the post-check and template fallback."""

import pytest
import torch

from evidential import FusionConfig
from inference.answer import answer_record
from inference.backends.base import GenerationConfig
from inference.evaluators.base import EvaluationResult, FrameClaim
from inference.generation import (
    GENERATION_PROMPT_VERSION,
    LLMGenerator,
    attach_generation,
    check_output,
    generation_input_from_record,
    template_response,
)
from inference.ramdocs import label_evidence, load_ramdocs
from inference.types import Chunk, ChunkEvidence


def label_result(record, types=("correct", "misinfo", "noise"), candidates=None):
    """An EvaluationResult whose evidence is the record's labels (inference.ramdocs.label_evidence)."""
    le = label_evidence(record, 5.0, types=types, candidates=candidates)
    docs = [d for d in record["documents"] if d["type"] in types]
    chunks = [Chunk(f"doc{i}", d["text"], source=d["type"], rank=i + 1) for i, d in enumerate(docs)]
    frame = [
        FrameClaim(f"a{j + 1}", c, [chunks[i].id for i, s in enumerate(le.supports) if s == j], [c])
        for j, c in enumerate(le.claims)
    ]
    decisions = [
        ChunkEvidence(
            ch.id,
            claim=le.claims[s] if s is not None else None,
            answer=le.claims[s] if s is not None else None,
            stance="supports" if s is not None else "irrelevant",
            evidence={frame[s].id: float(le.evidence[i, s])} if s is not None else {},
        )
        for i, (ch, s) in enumerate(zip(chunks, le.supports))
    ]
    counts = {"valid": len(chunks), "repaired": 0, "failed": 0}
    result = EvaluationResult(
        record["question"],
        chunks,
        decisions,
        frame,
        le.evidence.to(torch.float64),
        len(chunks),
        0,
        counts,
        {},
        "labels",
    )
    return result, chunks


@pytest.fixture(scope="module")
def real_inputs():
    """Three real records, one per route: agreeing sources (direct), planted misinformation (conflict) and a
    noise-only retrieval with the gold answer as candidate (abstain)."""
    by_q = {r["question"]: r for r in load_ramdocs()}  # the packaged sample of RAMDocs (MIT)
    direct = by_q["In which city did Conry practice law?"]
    conflict = by_q['Who is the artist of the album "Crazy World"?']
    noise = by_q["Who is the current Minister of Immigration?"]
    built = [
        label_result(direct),
        label_result(conflict),
        label_result(noise, types=("noise",), candidates=noise["gold_answers"]),
    ]
    records = [answer_record(res, FusionConfig()) for res, _ in built]
    return records, [generation_input_from_record(rec, chunks) for rec, (_, chunks) in zip(records, built)]


def test_label_records_route_as_expected(real_inputs):
    records, inputs = real_inputs
    assert [r["route"] for r in records] == ["direct", "conflict", "abstain"]
    assert [r["answer"] for r in records] == ["Boston", "Boys Like Girls", None]
    # the planted "The Beatles" (one document, mass well under half of the top claim's) is below the
    # stated-set bar: the conflict-aware answer states and cites only the supported claim
    assert [r["stated_claims"] for r in records] == [["Boston"], ["Boys Like Girls"], []]
    assert [r["cited_chunk_ids"] for r in records] == [["doc0", "doc1"], ["doc0", "doc1"], []]
    assert [len(i.chunks) for i in inputs] == [3, 3, 2]


def test_llm_generator_one_batched_pass_on_real_records(smollm2, real_inputs):
    records, inputs = real_inputs
    before = smollm2.passes
    gen = LLMGenerator(smollm2, GenerationConfig(max_tokens=24), max_chunk_chars=200)
    outs = gen.generate_batch(inputs)
    assert smollm2.passes - before == 1 and gen.passes == 1 and len(outs) == 3
    assert gen.generated == 3 and gen.fallbacks == sum(o.fallback for o in outs)
    for rec, x, o in zip(records, inputs, outs):
        assert o.text.strip() and isinstance(o.raw, str)
        assert o.route == rec["route"] and o.cited_chunk_ids == rec["cited_chunk_ids"]
        assert (o.generator, o.batched_passes, o.prompt_version) == ("llm", 1, GENERATION_PROMPT_VERSION)
        assert o.finish_reason in ("stop", "length") and o.seconds > 0
        assert o.fallback_reason == check_output(x, o.raw.strip())
        if o.fallback:  # the template replaced the LLM text; the raw text stays
            assert o.text == template_response(x.route, x.claims, x.answer, x.stated)
        else:
            assert o.text == o.raw.strip()
        full = attach_generation(rec, o)
        assert full["response"] == o.text and full["generation"]["raw"] == o.raw
        assert full["generation"]["fallback"] == o.fallback and full["timings"]["generate"] > 0
    # whether it came from the LLM (post-checked) or the template, the direct answer states the claim
    assert "boston" in outs[0].text.lower()


class _NoStreaming:
    """The packaged model behind a backend that only has ``generate`` (as vLLM and the OpenAI-compatible
    HTTP backend do)."""

    name, supports_json_schema = "generate-only", False

    def __init__(self, inner):
        self.inner = inner

    @property
    def passes(self):
        return self.inner.passes

    def generate(self, prompts, config):
        return self.inner.generate(prompts, config)

    def close(self):
        pass


def test_stream_pieces_join_to_the_batched_answer_on_real_records(smollm2, real_inputs):
    from inference.generation import GenerationOutput, TemplateGenerator, stream_generation

    _, inputs = real_inputs
    cfg = GenerationConfig(max_tokens=16)
    gen = LLMGenerator(smollm2, cfg, max_chunk_chars=200)
    for inp in inputs[:2]:  # a direct and a conflict-aware answer
        (want,) = gen.generate_batch([inp])
        items = list(stream_generation(gen, inp))
        pieces, out = items[:-1], items[-1]
        assert isinstance(out, GenerationOutput) and all(isinstance(p, str) and p for p in pieces)
        assert "".join(pieces) == want.raw.strip() == out.raw.strip()
        assert (out.text, out.fallback, out.fallback_reason, out.route, out.cited_chunk_ids) == (
            want.text,
            want.fallback,
            want.fallback_reason,
            want.route,
            want.cited_chunk_ids,
        )
        assert out.batched_passes == 1 and out.generator == "llm"
    # a backend without streaming answers in one piece; the template too
    one = LLMGenerator(_NoStreaming(smollm2), cfg, max_chunk_chars=200)
    items = list(stream_generation(one, inputs[0]))
    assert len(items) == 2 and items[0] == items[1].raw.strip()
    items = list(stream_generation(TemplateGenerator(), inputs[1]))
    assert len(items) == 2 and items[0] == items[1].text and items[1].generator == "template"
