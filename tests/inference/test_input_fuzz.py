"""Fuzzed inputs everywhere a user's file enters the inference package: the chunk JSONL reader, the corpus
reader (JSONL and Parquet), each evaluation-dataset reader, the YAML config loader and the ``--set``
parser, the calibration-file loader, and the CLI on top of them. Real records are mutated and mixed with
random JSON, random bytes (invalid UTF-8), deep nesting, NaN, 1e999 and huge strings (the ``fuzzed_file``
fixture); each reader either works or raises the project's own error naming the file or field."""

import io
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from inference.cli import app
from inference.config import load_config
from inference.evaluation.datasets import load_eval_dataset
from inference.ramdocs import SAMPLE_PATH
from inference.retrieval.config import RetrievalConfig
from inference.retrieval.corpus import iter_documents
from inference.types import load_chunks
from training.calibration.format import read_calibration

REPO = Path(__file__).resolve().parents[2]
CHUNK_SEEDS = [
    json.loads(line) for line in (SAMPLE_PATH.parent / "example_chunks.jsonl").read_text().splitlines()
]
CORPUS_SEEDS = [
    {"id": "d1", "title": "Crazy World", "text": c["text"], "url": "https://example.org"} for c in CHUNK_SEEDS
]
CALIBRATION = json.loads((REPO / "checkpoints" / "learned-minilm" / "calibration.json").read_text())
CONFIG = yaml.safe_load((REPO / "configs" / "cpu.yaml").read_text())


def _tmp(name: str, content: bytes):
    d = tempfile.TemporaryDirectory()
    path = Path(d.name) / name
    path.write_bytes(content)
    return d, path


@settings(max_examples=80)
@given(data=st.data())
def test_chunk_reader(data, fuzzed_file, project_error):
    d, path = _tmp("chunks.jsonl", fuzzed_file(data, CHUNK_SEEDS))
    with d:
        project_error(lambda: load_chunks(path), path)


@settings(max_examples=60)
@given(data=st.data())
def test_corpus_reader_jsonl(data, fuzzed_file, project_error):
    d, path = _tmp("corpus.jsonl", fuzzed_file(data, CORPUS_SEEDS))
    with d:
        project_error(lambda: list(iter_documents(path, RetrievalConfig())), path)


@settings(max_examples=40)
@given(data=st.data())
def test_corpus_reader_parquet(data, fuzzed_value, project_error):
    """A Parquet file of fuzzed rows (pyarrow infers the column types), or random bytes named .parquet."""
    if data.draw(st.booleans()):
        rows = [
            fuzzed_value(data, data.draw(st.sampled_from(CORPUS_SEEDS)))
            for _ in range(data.draw(st.integers(1, 3)))
        ]
        rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
        buf = io.BytesIO()
        try:
            pq.write_table(pa.Table.from_pylist(rows), buf)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):  # rows pyarrow cannot store
            buf = io.BytesIO()
            pq.write_table(pa.table({"junk": [str(rows)[:100]]}), buf)
        content = buf.getvalue()
    else:
        content = data.draw(st.binary(max_size=200))
    d, path = _tmp("corpus.parquet", content)
    with d:
        project_error(lambda: list(iter_documents(path, RetrievalConfig())), path)


EVAL = {
    "ramdocs": "ramdocs/RAMDocs_test.jsonl",
    "wikicontradict": "wikicontradict/wikicontradict_humaneval.jsonl",
    "wikicontradict-instances": "wikicontradict/wikicontradict_instances.jsonl",
    "conflictqa": "conflictqa/conflictQA-strategyQA-chatgpt.jsonl",
    "musique": "musique/musique_ans_v1.0_dev_subset.jsonl",
}


def _eval_fuzz(name, path_in_data, data, shared_data, fuzzed_file, project_error):
    src = shared_data / path_in_data
    if not src.is_file():
        pytest.skip(f"{src} is not there")
    with src.open(encoding="utf-8") as fh:
        seeds = [json.loads(next(fh)) for _ in range(2)]
    d, path = _tmp("data.jsonl", fuzzed_file(data, seeds))
    with d:
        project_error(lambda: load_eval_dataset(name, path), path)


@pytest.mark.parametrize("name", sorted(EVAL))
@settings(max_examples=30)
@given(data=st.data())
def test_evaluation_dataset_readers(name, data, shared_data, fuzzed_file, project_error):
    _eval_fuzz(name, EVAL[name], data, shared_data, fuzzed_file, project_error)


@settings(max_examples=4)  # CRAG records carry whole HTML pages: each example parses megabytes
@given(data=st.data())
def test_crag_reader(data, shared_data, fuzzed_file, project_error):
    _eval_fuzz("crag", "crag/crag_dev_example.jsonl", data, shared_data, fuzzed_file, project_error)


@settings(max_examples=80)
@given(data=st.data())
def test_yaml_config_loader(data, fuzzed_value, project_error):
    kind = data.draw(st.sampled_from(["mutated", "mutated", "bytes", "deep"]))
    if kind == "mutated":
        value = fuzzed_value(data, CONFIG)
        content = yaml.safe_dump(value, allow_unicode=True).encode()
    elif kind == "bytes":
        content = data.draw(st.binary(max_size=200))
    else:
        content = b"a: " + b"[" * 800 + b"]" * 800
    d, path = _tmp("run.yaml", content)
    with d:
        project_error(lambda: load_config(path), path)


FIELDS = ["k", "fusion.lam", "fusion.tau1", "fusion.rule", "evaluator.name", "evaluator.grounding",
          "generator.generation.max_tokens", "retrieval.chunk_tokens", "calibration", "nope", "fusion.nope"]  # fmt: skip


@settings(max_examples=120)
@given(
    overrides=st.lists(
        st.one_of(
            st.builds(lambda k, v: f"{k}={v}", st.sampled_from(FIELDS), st.text(max_size=20)),
            st.builds(
                lambda k, v: f"{k}={json.dumps(v)}",
                st.sampled_from(FIELDS),
                st.floats() | st.integers(-(10**30), 10**30),
            ),
            st.text(max_size=30),
            st.just("fusion.lam=" + "[" * 800),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_set_overrides(overrides, project_error):
    project_error(
        lambda: load_config(None, overrides), *[o[:40] for o in overrides], "override", "fusion", "must"
    )


@settings(max_examples=80)
@given(data=st.data())
def test_calibration_loader(data, fuzzed_value, project_error):
    kind = data.draw(st.sampled_from(["mutated", "mutated", "mutated", "bytes", "trap"]))
    if kind == "mutated":
        content = json.dumps(fuzzed_value(data, CALIBRATION)).encode()
    elif kind == "bytes":
        content = data.draw(st.binary(max_size=200))
    else:
        content = data.draw(st.sampled_from([b"[" * 100_000, b'{"version": NaN}', b"1e999", b"\xff"]))
    d, path = _tmp("calibration.json", content)
    with d:
        project_error(lambda: read_calibration(path), path)


@settings(max_examples=20)
@given(data=st.data())
def test_cli_reports_bad_files_in_one_line_with_exit_code_2(data, fuzzed_file):
    """``ask --chunks`` (read before any model loads) and ``fuse --evidence @file``: exit 0, or 2 with one
    ``error:`` line naming the file, never a traceback."""
    content = fuzzed_file(data, CHUNK_SEEDS)
    d, path = _tmp("chunks.jsonl", content)
    with d:
        for args in (
            # a checkpoint that does not exist: a readable file then fails at model loading, also with exit 2
            ["ask", "Who?", "--chunks", str(path), "--set", "evaluator.checkpoint=/no/such/checkpoint"],
            ["fuse", "--evidence", f"@{path}"],
        ):
            r = CliRunner().invoke(app, args)
            assert r.exit_code in (0, 2), (args, r.output, r.exception)
            assert "Traceback" not in r.output
            if r.exit_code == 2:
                lines = [line for line in r.stderr.splitlines() if line.strip()]
                assert len(lines) == 1 and lines[0].startswith("error:"), lines
