import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from training.utils.text import COPY_MIN_WORDS, near_copies, word_overlap

RAMDOCS = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "ramdocs" / "RAMDocs_test.jsonl"


def test_word_overlap_hand_computed():
    assert word_overlap("a b c d", "a b x") == pytest.approx(2 / 3)
    assert word_overlap("A, B!", "b a") == 1.0
    assert word_overlap("", "a") == 0.0


def test_near_copies_threshold_min_words_and_off():
    base = " ".join(f"w{i}" for i in range(20))
    texts = [base + " alpha", base + " beta", "w0 w1 w2", "something else entirely " * 5]
    assert near_copies(texts, 0.8) == [[1], [0], [], []]
    assert near_copies(texts, None) == [[], [], [], []]
    # a short text is never a copy, however much it overlaps
    assert len(set("w0 w1 w2".split())) < COPY_MIN_WORDS
    for bad in (0, 1.5, True, "0.8"):
        with pytest.raises(ValueError, match="copy overlap"):
            near_copies(texts, bad)


@pytest.mark.skipif(not RAMDOCS.is_file(), reason="../shared/data/ramdocs is absent")
def test_real_planted_documents_are_copies_of_the_document_they_edit():
    records = [json.loads(line) for line in RAMDOCS.read_text(encoding="utf-8").splitlines() if line.strip()]
    bryan = next(r for r in records if r["question"] == "When was General Bryan born?")
    docs = bryan["documents"]
    kinds = [d["type"] for d in docs]
    copies = near_copies([d["text"] for d in docs], 0.8)
    planted, correct = kinds.index("misinfo"), kinds.index("correct")
    assert correct in copies[planted] and planted in copies[correct]
    # over all records: most copy pairs with different answers hold a planted document
    pairs = planted_pairs = 0
    for r in records:
        ds = r["documents"]
        for i, js in enumerate(near_copies([d["text"] for d in ds], 0.8)):
            for j in js:
                if i < j and (ds[i].get("answer") or "").lower() != (ds[j].get("answer") or "").lower():
                    pairs += 1
                    planted_pairs += "misinfo" in (ds[i]["type"], ds[j]["type"])
    assert pairs == 113 and planted_pairs == 104  # measured on the shared RAMDocs_test.jsonl


@given(st.lists(st.text(alphabet="abcdefghij ", max_size=80), max_size=6), st.floats(0.05, 1.0))
def test_near_copies_is_symmetric_and_irreflexive(texts, threshold):
    out = near_copies(texts, threshold)
    assert len(out) == len(texts)
    for i, js in enumerate(out):
        assert i not in js
        assert all(i in out[j] for j in js)
