"""Chunking by tokens and HTML → text (real CRAG pages)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.config import RunConfig
from inference.retrieval import (
    chunk_text,
    documents_from_row,
    html_to_text,
    looks_like_html,
    token_windows,
)


def test_token_windows_hand_values():
    assert token_windows(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert token_windows(8, 4, 0) == [(0, 4), (4, 8)]
    assert token_windows(9, 4, 0) == [(0, 4), (4, 8), (8, 9)]
    assert token_windows(5, 4, 2) == [(0, 4), (2, 5)]
    assert token_windows(4, 4, 2) == [(0, 4)]  # the tail (2 tokens) is already inside the first window
    assert token_windows(3, 4, 1) == [(0, 3)]
    assert token_windows(0, 4, 1) == []
    with pytest.raises(ValueError, match="overlap"):
        token_windows(10, 4, 4)


@given(st.integers(0, 400), st.integers(1, 64), st.data())
def test_token_windows_cover_everything_with_exact_overlap(n, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    w = token_windows(n, size, overlap)
    if n == 0:
        assert w == []
        return
    assert w[0][0] == 0 and w[-1][1] == n
    assert all(0 < e - s <= size for s, e in w)
    for (s0, e0), (s1, e1) in zip(w, w[1:]):
        assert s1 - s0 == size - overlap and e0 - s1 == overlap  # consecutive windows share `overlap` tokens
        assert e1 > e0  # no window lies inside the previous one


@pytest.fixture(scope="module")
def tokenizer(embedder):
    return embedder.tokenizer


def test_chunk_text_counts_tokens_of_the_embedder_and_overlaps_exactly(tokenizer, ramdocs_records):
    text = ramdocs_records[0]["documents"][0]["text"]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    spans = chunk_text(text, tokenizer, 64, 16)
    assert [(s.token_start, s.token_end) for s in spans] == token_windows(len(ids), 64, 16)
    assert len(spans) == len(token_windows(len(ids), 64, 16)) >= 3
    for s in spans:
        assert s.text == text[s.char_start : s.char_end]  # exact substring: nothing invented or normalized
        assert s.n_tokens <= 64
        assert tokenizer(s.text, add_special_tokens=False)["input_ids"] == ids[s.token_start : s.token_end]
    for a, b in zip(spans, spans[1:]):
        assert ids[a.token_end - 16 : a.token_end] == ids[b.token_start : b.token_start + 16]
    assert spans[0].text.startswith("Bobby Carpenter (American football)")
    assert spans[-1].char_end == len(text.rstrip())
    assert chunk_text("   \n ", tokenizer, 64, 16) == []
    assert [s.text for s in chunk_text("Paris is the capital.", tokenizer, 64, 16)] == [
        "Paris is the capital."
    ]


def test_html_to_text_strips_script_style_nav_and_keeps_sentences():
    html = (
        "<!DOCTYPE html><html><head><title>Page</title><style>.x{color:red}</style>"
        "<script>var secret = 1;</script></head><body><nav><a href='/'>Home</a> | Menu</nav>"
        "<!-- a comment --><h1>Heading</h1><p>Paris is the <b>capital</b> of <a href='#'>France</a>.</p>"
        "<table><tr><td>Population</td><td>2.1 M</td></tr></table><ul><li>one</li><li>two</li></ul>"
        "<noscript>enable JS</noscript></body></html>"
    )
    assert html_to_text(html) == (
        "Page\nHeading\nParis is the capital of France.\nPopulation | 2.1 M\none\ntwo"
    )
    assert looks_like_html(html) and looks_like_html("  <!-- c --><html lang='en'>")
    assert not looks_like_html("Paris <b>is</b> nice") and not looks_like_html("")


def test_html_to_text_on_real_crag_pages(shared_data):
    path = shared_data / "crag" / "crag_dev_example.jsonl"
    if not path.is_file():
        pytest.skip(f"CRAG sample not found at {path}")
    with path.open(encoding="utf-8") as fh:
        record = json.loads(fh.readline())
    page = record["search_results"][4]  # en.wikipedia.org/wiki/Microsoft_Office_2019, 169 KB of HTML
    html = page["page_result"]
    text = html_to_text(html)
    assert text.splitlines()[0] == "Microsoft Office 2019 - Wikipedia"
    assert "Available in | 102 languages" in text  # infobox row: cells joined on one line
    assert "Office 2019 requires Windows 10" in text.replace("\n", " ")  # article text survives
    for gone in ("RLCONF", "mw-parser-output", "Main menu", "function(", "<div", "</"):
        assert gone not in text  # script, style and nav content, and no markup
    assert len(text) < len(html) / 5

    # the record as a corpus row: five documents <interaction_id>/j, page_result HTML converted
    cfg = RunConfig().retrieval
    docs = documents_from_row(record, 1, f"{path}:1", cfg)
    assert [d.doc_id for d in docs] == [f"{record['interaction_id']}/{j}" for j in range(5)]
    assert [d.source for d in docs] == [r["page_url"] for r in record["search_results"]]
    assert docs[4].text == text
    assert all(d.text and "<" not in d.text[:50] for d in docs)
