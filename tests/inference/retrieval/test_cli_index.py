"""``evidential-rag index`` through typer's CliRunner."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from inference.cli import app
from inference.retrieval import BM25Retriever, load_index

runner = CliRunner()
SMALL = ["--set", "retrieval.chunk_tokens=32", "--set", "retrieval.chunk_overlap=8"]


@pytest.fixture
def corpus(tmp_path, write_jsonl, embedder):  # embedder: the model is loaded (and cached) once per session
    return write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {
                "id": "paris",
                "text": "Paris is the capital and most populous city of France. " * 4,
                "url": "u1",
            },
            {"id": "rome", "text": "Rome is the capital city of Italy, on the Tiber.", "title": "Rome"},
        ],
    )


def test_index_command_builds_a_loadable_index(corpus, tmp_path):
    out = tmp_path / "idx"
    r = runner.invoke(app, ["index", "--corpus", str(corpus), "--output", str(out), *SMALL, "--json"])
    assert r.exit_code == 0, r.output
    meta = json.loads(r.stdout)
    assert meta["n_documents"] == 2 and meta["n_chunks"] == 3 and meta["n_shards"] == 1
    assert meta["config"]["retrieval"]["chunk_tokens"] == 32 and meta["config"]["models"]["reranker"] is None
    handle = load_index(out)
    assert handle.ids == ["paris#0", "paris#1", "rome#0"] and handle.sources == ["u1", "u1", "Rome"]
    assert BM25Retriever(handle).search("capital of Italy", 1)[0].id == "rome#0"
    # again, as a table, replacing the index; --no-resume starts over
    r = runner.invoke(app, ["index", "--corpus", str(corpus), "-o", str(out), *SMALL, "--no-resume"])
    assert r.exit_code == 0, r.output
    assert "chunks / shards" in r.stdout and "3 / 1" in r.stdout and "reranking off" in r.stdout
    assert "FAISS index" in r.stdout and "Flat (0.0 MiB)" in r.stdout


@pytest.mark.parametrize(
    "rows, args, message",
    [
        (None, ["--corpus", "missing.jsonl"], "corpus missing.jsonl: no such file"),
        (
            [{"id": "a", "text": "ok"}, {"id": "b", "body": 5}],
            [],
            "corpus.jsonl:2: field 'body' must be a string",
        ),
        (
            [{"id": "a", "text": "ok"}],
            ["--set", "retrieval.chunk_overlap=500"],
            "retrieval.chunk_overlap must be",
        ),
        (
            [{"id": "a", "text": "ok"}],
            ["--set", "retrieval.retriever=splade"],
            "retrieval.retriever must be one of",
        ),
        (
            [{"id": "a", "text": "ok"}],
            ["--set", "models.embedder=./no/such/model"],
            "models.embedder: model folder",
        ),
        (
            [{"id": "a", "text": "ok"}],
            ["--set", "retrieval.index_type=IVF64,Flat"],
            "IVF64 needs at least 64 training vectors but the corpus has only 1 chunk;",
        ),
        (
            [{"id": "a", "text": "ok"}],
            ["--set", "retrieval.index_type=HNSW32,Fast"],
            "retrieval.index_type='HNSW32,Fast' is not a FAISS index factory string",
        ),
    ],
)
def test_index_command_errors_are_one_line_exit_2(tmp_path, monkeypatch, write_jsonl, rows, args, message):
    monkeypatch.chdir(tmp_path)
    if rows is not None:
        write_jsonl(tmp_path / "corpus.jsonl", rows)
    base = ["index", "--corpus", "corpus.jsonl", "--output", "idx"]
    r = runner.invoke(app, [*base, *args] if "--corpus" not in args else ["index", *args, "--output", "idx"])
    assert r.exit_code == 2, r.output
    assert message in r.stderr and r.stderr.startswith("error:") and r.stderr.count("\n") == 1
    assert not (tmp_path / "idx").exists()
