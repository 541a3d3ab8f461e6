"""Corpus formats (JSONL, Parquet, Hugging Face datasets) and row errors naming file, line and field."""

from __future__ import annotations

import pytest

from inference.config import load_config
from inference.retrieval import Document, documents_from_row, iter_documents, open_corpus
from inference.types import DataError

ROWS = [
    {"id": "d1", "text": "Paris is the capital of France.", "url": "https://example.org/paris"},
    {"contents": "Lyon lies on the Rhône.", "title": "City of Lyon"},
    {"doc_id": 7, "page_result": "<html><body><nav>menu</nav><p>Marseille is a port.</p></body></html>"},
]
EXPECTED = [
    Document("d1", "Paris is the capital of France.", "https://example.org/paris"),
    Document("2", "City of Lyon\nLyon lies on the Rhône.", "City of Lyon"),
    Document("7", "Marseille is a port.", "7"),
]


@pytest.fixture
def rcfg():
    return load_config().retrieval


def test_jsonl_documents_ids_sources_titles_and_html(tmp_path, write_jsonl, rcfg):
    assert list(iter_documents(write_jsonl(tmp_path / "c.jsonl", ROWS), rcfg)) == EXPECTED


def test_parquet_and_saved_hf_dataset_give_the_same_documents(tmp_path, rcfg):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    flat = [
        {"id": str(r.get("id", r.get("doc_id", i + 1))), "text": t.text}
        for i, (r, t) in enumerate(zip(ROWS, EXPECTED))
    ]
    pq.write_table(pa.Table.from_pylist(flat), tmp_path / "c.parquet")
    want = [Document(d.doc_id, d.text, d.doc_id) for d in EXPECTED]
    assert list(iter_documents(tmp_path / "c.parquet", rcfg)) == want
    datasets.Dataset.from_list(flat).save_to_disk(str(tmp_path / "ds"))
    assert open_corpus(tmp_path / "ds").kind == "hf-disk"
    assert list(iter_documents(tmp_path / "ds", rcfg)) == want
    dd = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(flat), "test": datasets.Dataset.from_list(flat)}
    )
    dd.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(DataError, match="splits train, test"):
        list(iter_documents(tmp_path / "dd", rcfg))
    assert list(iter_documents(tmp_path / "dd" / "test", rcfg)) == want


def test_ramdocs_records_expand_to_their_documents(ramdocs_records, rcfg):
    rec = ramdocs_records[0]
    docs = documents_from_row(rec, 1, "ramdocs.jsonl:1", rcfg)
    assert [d.doc_id for d in docs] == [f"1/{j}" for j in range(len(rec["documents"]))]
    assert [d.text for d in docs] == [d["text"] for d in rec["documents"]]


def test_hf_spec_and_bad_locations(tmp_path):
    src = open_corpus("hf:rajpurkar/squad:validation")
    assert (src.kind, src.name, src.split) == ("hf-hub", "rajpurkar/squad", "validation")
    assert open_corpus("hf:wiki").split == "train"
    with pytest.raises(DataError, match="hf:NAME"):
        open_corpus("hf:")
    with pytest.raises(DataError, match="no such file"):
        open_corpus(tmp_path / "missing.jsonl")
    (tmp_path / "c.csv").write_text("id,text\n")
    with pytest.raises(DataError, match=r"unknown file type '\.csv'"):
        open_corpus(tmp_path / "c.csv")
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataError, match="save_to_disk"):
        open_corpus(tmp_path / "folder")


@pytest.mark.parametrize(
    "row, message",
    [
        ({"id": "x", "title": "no text"}, r"c\.jsonl:2: no text field; a document needs 'text', 'contents'"),
        ({"id": "x", "text": 3}, r"c\.jsonl:2: field 'text' must be a string; got int"),
        ([1, 2], r"c\.jsonl:2: expected a JSON object"),
        ({"documents": "abc"}, r"c\.jsonl:2: field 'documents' must be a list"),
        ({"documents": [{"text": "ok"}, {"answer": "x"}]}, r"c\.jsonl:2: documents\[1\]: no text field"),
        ({"id": "a", "text": "again"}, r"c\.jsonl:2: duplicate document id 'a'"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path, write_jsonl, rcfg, row, message):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "fine"}, row])
    with pytest.raises(DataError, match=message):
        list(iter_documents(path, rcfg))


def test_text_field_and_html_settings(tmp_path, write_jsonl):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "body_html": "<p>x <i>y</i></p>", "text": "t"}])
    cfg = load_config(None, ["retrieval.text_field=body_html", "retrieval.html=always"]).retrieval
    assert [d.text for d in iter_documents(path, cfg)] == ["x y"]
    cfg = load_config(None, ["retrieval.text_field=body_html", "retrieval.html=never"]).retrieval
    assert [d.text for d in iter_documents(path, cfg)] == ["<p>x <i>y</i></p>"]
    with pytest.raises(DataError, match=r"'nope' \(retrieval\.text_field\)"):
        list(iter_documents(path, load_config(None, ["retrieval.text_field=nope"]).retrieval))
