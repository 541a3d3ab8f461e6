"""`evidential-rag ask` end to end with the prompt evaluator on the packaged SmolLM2 and real chunks."""

import json

from typer.testing import CliRunner

from inference.cli import app
from inference.config import RunConfig
from inference.ramdocs import SAMPLE_PATH
from inference.types import load_chunks

runner = CliRunner()
EXAMPLE = SAMPLE_PATH.parent / "example_chunks.jsonl"
PROMPT = ["--evaluator", "prompt", "--set", "evaluator.generation.max_tokens=64"]
FAST = [*PROMPT, "--set", "generator.name=template"]


def test_ask_json_record_on_shipped_real_chunks():
    r = runner.invoke(
        app,
        [
            "ask",
            'Who is the artist of the album "Crazy World"?',
            "--chunks",
            str(EXAMPLE),
            "--json",
            *PROMPT,
            "--set",
            "generator.generation.max_tokens=32",
        ],
    )
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    for key in (
        "question",
        "response",
        "route",
        "answer",
        "stated_claims",
        "claims",
        "uncertainty",
        "ignorance",
        "conflict",
        "mean_pairwise_conflict",
        "confidence",
        "chunks",
        "timings",
        "logical_decisions",
        "batched_passes",
    ):
        assert key in rec, key
    assert rec["route"] in ("direct", "conflict", "abstain")
    # prompt evaluator + LLM generator: k + 1 logical decisions in 2 batched passes (one model, shared)
    assert rec["logical_decisions"] == 4 and rec["batched_passes"] == 2 and rec["evaluator_passes"] == 1
    assert rec["generation"]["generator"] == "llm" and rec["generation"]["raw"] is not None
    assert rec["retrieval"]["retrieved"] is False and rec["retrieval"]["reranked"] is False
    assert [c["chunk_id"] for c in rec["chunks"]] == ["doc1", "doc2", "doc3"]
    for c in rec["chunks"]:
        assert set(c) >= {"chunk_id", "claim", "answer", "stance", "evidence", "valid", "repaired"}
    masses = sum(c["mass"] for c in rec["claims"]) + rec["uncertainty"]
    assert abs(masses - 1) < 1e-5
    assert abs(rec["ignorance"] + rec["conflict"] - rec["uncertainty"]) < 1e-5
    assert {
        "load_evaluator",
        "load_generator",
        "retrieve",
        "evaluate",
        "align",
        "fuse_route",
        "generate",
    } <= set(rec["timings"])
    assert rec["evaluator_meta"]["constrained"] is True


def test_ask_on_real_shared_chunks_with_table_output(shared_data, tmp_path):
    rec = json.loads((shared_data / "ramdocs" / "RAMDocs_test.jsonl").read_text().splitlines()[5])
    path = tmp_path / "chunks.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": d["text"]}) + "\n" for i, d in enumerate(rec["documents"]))
    )
    r = runner.invoke(app, ["ask", rec["question"], "--chunks", str(path), "--set", "k=2", *FAST])
    assert r.exit_code == 0, r.output
    assert (
        "U_global" in r.stdout and "route:" in r.stdout and "2 logical decisions, 1 batched pass" in r.stdout
    )


def test_ask_bad_inputs(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n')
    r = runner.invoke(app, ["ask", "q", "--chunks", str(bad), *FAST])
    assert r.exit_code == 2 and "bad.jsonl:1: field 'text'" in r.stderr
    r = runner.invoke(app, ["ask", "q", "--chunks", str(tmp_path / "none.jsonl"), *FAST])
    assert r.exit_code == 2 and "no such chunks file" in r.stderr
    r = runner.invoke(app, ["ask", "q", "--chunks", str(EXAMPLE), "--evaluator", "oracle"])
    assert r.exit_code == 2 and "evaluator.name" in r.stderr
    r = runner.invoke(
        app, ["ask", "q", "--chunks", str(EXAMPLE), *FAST, "--set", "evaluator.backend.model=/no/model"]
    )
    assert r.exit_code == 2 and "could not load" in r.stderr
    r = runner.invoke(app, ["ask", "q", *FAST])
    assert r.exit_code == 2 and "exactly one of --index DIR (retrieve) or --chunks FILE" in r.stderr
    r = runner.invoke(app, ["ask", "q", "--index", str(tmp_path / "noindex"), *FAST])
    assert r.exit_code == 2 and "noindex" in r.stderr


def test_ask_defaults_to_the_shipped_learned_evaluator():
    """The CPU default evaluator is the shipped checkpoint: claims extracted by its span head, scored in one
    more encoder pass, no LLM involved with the template generator."""
    r = runner.invoke(
        app,
        [
            "ask",
            'Who is the artist of the album "Crazy World"?',
            "--chunks",
            str(EXAMPLE),
            "--json",
            "--set",
            "generator.name=template",
        ],
    )
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert rec["evaluator"] == "learned" and rec["evaluator_meta"]["claims_from"] == "extracted"
    assert rec["evaluator_meta"]["checkpoint"].endswith("learned-minilm/best")
    # an extraction pass, then a scoring pass when the span head found any claim
    assert rec["logical_decisions"] == 3 and rec["batched_passes"] == (2 if rec["claims"] else 1)
    assert all(c["valid"] for c in rec["chunks"])
    texts = [c.text for c in load_chunks(EXAMPLE)]
    for c in rec["claims"]:  # extracted claims are spans of the chunks
        assert any(form in t for form in c["forms"] for t in texts)


# the key order of the `ask --json` record (learned evaluator, template generator, given chunks) as written
# before the record was typed: AnswerRecord.to_dict must keep it
RECORD_KEY_ORDER = {
    "": [
        "question",
        "response",
        "cited_chunk_ids",
        "route",
        "answer",
        "stated_claims",
        "claims",
        "uncertainty",
        "ignorance",
        "conflict",
        "mean_pairwise_conflict",
        "confidence",
        "step_conflict",
        "chunks",
        "output_counts",
        "timings",
        "logical_decisions",
        "batched_passes",
        "evaluator",
        "evaluator_meta",
        "fusion",
        "calibrated_confidence",
        "calibration",
        "generation",
        "retrieval",
        "evaluator_passes",
        "k",
        "stated_mass",
        "copy_contested",
        "reader_score",
    ],
    "claims[]": ["id", "text", "mass", "chunk_ids", "forms"],
    "chunks[]": [
        "chunk_id",
        "rank",
        "source",
        "claim",
        "answer",
        "stance",
        "rationale",
        "evidence",
        "valid",
        "repaired",
        "errors",
        "grounded",
        "grounding_notes",
        "copies",
        "extracted",
        "reader_score",
    ],
    "fusion": [
        "rule",
        "lam",
        "tau1",
        "tau2",
        "policy",
        "state_ratio",
        "state_ratio_yes_no",
        "copy_overlap",
        "state_witness_ratio",
    ],
    "generation": [
        "generator",
        "route",
        "fallback",
        "fallback_reason",
        "raw",
        "prompt_version",
        "finish_reason",
        "batched_passes",
    ],
    "retrieval": ["retrieved", "index", "retriever", "reranker", "reranked", "chunks"],
    "retrieval.chunks[]": ["id", "rank", "score", "source"],
    "timings": [
        "load_evaluator",
        "load_generator",
        "retrieve",
        "extract",
        "align",
        "evaluate",
        "fuse_route",
        "generate",
    ],
}


def _ask_json(tmp_path) -> tuple[str, dict]:
    record = json.loads(SAMPLE_PATH.read_text(encoding="utf-8").splitlines()[0])
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": d["text"]}) + "\n" for i, d in enumerate(record["documents"])
        ),
        encoding="utf-8",
    )
    args = ["ask", record["question"], "--chunks", str(chunks), "--json", "--set", "generator.name=template"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    return r.stdout, json.loads(r.stdout)


def test_answer_record_round_trips_and_keeps_the_key_order(tmp_path):
    from inference.answer import AnswerRecord, ChunkDecision, ClaimRecord, GenerationInfo, RetrievalInfo

    text, rec = _ask_json(tmp_path)
    typed = AnswerRecord.from_dict(rec)
    assert isinstance(typed.claims[0], ClaimRecord) and isinstance(typed.chunks[0], ChunkDecision)
    assert isinstance(typed.generation, GenerationInfo) and isinstance(typed.retrieval, RetrievalInfo)
    assert typed.claims[0].text == rec["answer"] and typed.route == rec["route"]
    assert typed.retrieval.details == {"retriever": None, "reranker": None, "reranked": False}
    assert typed.k == rec["k"] == RunConfig().k and len(typed.chunks) == len(typed.retrieval.chunks) == 2
    # the shipped default is calibrated (calibration: auto loads the checkpoint's calibration.json)
    assert typed.calibration["file"].endswith("calibration.json") and typed.calibrated_confidence is not None
    assert typed.stated_claims == rec["stated_claims"]
    assert typed.to_dict() == rec
    # byte for byte: the same JSON text as `ask --json` printed, and a second round trip changes nothing
    assert json.dumps(typed.to_dict(), indent=2, ensure_ascii=False) == json.dumps(
        rec, indent=2, ensure_ascii=False
    )
    assert AnswerRecord.from_dict(typed.to_dict()) == typed
    got = {
        "": list(rec),
        "claims[]": list(rec["claims"][0]),
        "chunks[]": list(rec["chunks"][0]),
        "fusion": list(rec["fusion"]),
        "generation": list(rec["generation"]),
        "retrieval": list(rec["retrieval"]),
        "retrieval.chunks[]": list(rec["retrieval"]["chunks"][0]),
        "timings": list(rec["timings"]),
    }
    assert got == RECORD_KEY_ORDER
    # a record without the pipeline's parts (answer_record alone) leaves them out of the JSON
    pipeline_parts = (
        "calibrated_confidence",
        "calibration",
        "generation",
        "retrieval",
        "evaluator_passes",
        "k",
    )
    bare = {k: v for k, v in rec.items() if k not in pipeline_parts}
    assert AnswerRecord.from_dict(bare).to_dict() == bare
