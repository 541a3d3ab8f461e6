"""Fuzzed input files for the training-data readers: the annotated-chunk JSONL reader and every benchmark
builder. Real records from ``../shared/data`` are mutated (fields deleted, replaced with random JSON, added,
blown up) and mixed with random JSON, random bytes (invalid UTF-8), deep nesting, NaN, 1e999 and huge
strings; each reader must either work or raise the project's own error naming the file — never another
exception, never a hang."""

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training.data.annotated import load_annotated
from training.data.benchmarks import build_dataset


def _seeds(path: Path, n: int = 3) -> list:
    if not path.is_file():
        pytest.skip(f"{path} is not there (../shared/data)")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(next(fh)) for _ in range(n)]


@pytest.fixture(scope="module")
def annotated_seeds(shared_data):
    rows = build_dataset("ramdocs", shared_data / "ramdocs" / "RAMDocs_test.jsonl", limit=2)
    return [r.to_dict() for r in rows[:4]]


@settings(max_examples=60)
@given(data=st.data())
def test_annotated_chunk_reader(data, annotated_seeds, fuzzed_file, project_error):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.jsonl"
        path.write_bytes(fuzzed_file(data, annotated_seeds))
        project_error(lambda: load_annotated(path), path)
        project_error(lambda: build_dataset("chunks", path), path)


BENCHMARKS = {
    "ramdocs": "ramdocs/RAMDocs_test.jsonl",
    "wikicontradict": "wikicontradict/wikicontradict_humaneval.jsonl",
    "conflictqa": "conflictqa/conflictQA-strategyQA-chatgpt.jsonl",
    "musique": "musique/musique_ans_v1.0_dev_subset.jsonl",
}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
@settings(max_examples=40)
@given(data=st.data())
def test_benchmark_builders(name, data, shared_data, fuzzed_file, project_error):
    seeds = _seeds(shared_data / BENCHMARKS[name])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        path.write_bytes(fuzzed_file(data, seeds))
        project_error(lambda: build_dataset(name, path), path)
