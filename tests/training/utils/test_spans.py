"""Boundary repair of extracted spans: the cut-short answers of the evidence-quality issue, real RAMDocs
documents, and properties over any text and span."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from training.utils.spans import MAX_NAME_WORDS, repair_span


def _repair(text: str, part: str) -> str:
    a = text.index(part)
    s, e = repair_span(text, a, a + len(part))
    return text[s:e]


def test_cut_short_answers_become_whole_answers():
    assert _repair("The winner was Ahmed Hussen of Ethiopia.", "Ahmed") == "Ahmed Hussen"
    assert _repair("The singer Park Ji-yeon debuted in 2009.", "Ji-yeon") == "Park Ji-yeon"
    assert _repair("It was founded on October 12, 1666 by the king.", "12, 1666") == "October 12, 1666"
    assert _repair("It was founded on October 12, 1666 by the king.", "October 12") == "October 12, 1666"
    assert _repair("born on 5 March 2001 in Oslo", "5 March") == "5 March 2001"
    assert _repair("Baby Doll was directed by Elia Kazan in 1956.", "Kazan") == "Elia Kazan"
    assert _repair("the works of Leonardo da Vinci are", "Leonardo") == "Leonardo da Vinci"
    assert _repair("a town in Aguadilla, Puerto Rico today", "Puerto Rico") == "Puerto Rico"  # comma: stop
    assert _repair("It is a footballer", "footbal") == "footballer"  # a word piece grows to the word


def test_function_words_headings_and_punctuation_do_not_join():
    assert _repair("In Paris he met her.", "Paris") == "Paris"
    assert _repair("He met The Beatles", "Beatles") == "Beatles"  # "The" is a function word
    assert _repair("SPORTS BASEBALL Football", "Football") == "Football"  # ALL-CAPS never joins
    assert _repair('"Needtobreathe album) X', "Needtobreathe album)") == "Needtobreathe album"
    assert _repair("answer: 1,000, they said", "1,000,") == "1,000"


def test_names_stop_at_the_word_budget():
    text = "Alpha Beta Gamma Delta Epsilon Zeta were here"
    got = _repair(text, "Gamma")
    assert len(got.split()) == MAX_NAME_WORDS and "Gamma" in got


def test_real_ramdocs_answers_survive_repair(shared_data):
    """On real documents, a span that already is the labelled answer stays that answer (repair never
    breaks a whole answer), for every validation-free RAMDocs document whose label it states once."""
    checked = 0
    for line in (
        (shared_data / "ramdocs" / "RAMDocs_test.jsonl").read_text(encoding="utf-8").splitlines()[:60]
    ):
        for doc in json.loads(line)["documents"]:
            text, ans = doc["text"], doc["answer"]
            if doc["type"] != "correct" or text.count(ans) != 1 or not ans[0].isupper() or " " not in ans:
                continue
            a = text.index(ans)
            before, after = text[a - 1 : a], text[a + len(ans) : a + len(ans) + 1]
            if before.isalnum() or after.isalnum():
                continue
            s, e = repair_span(text, a, a + len(ans))
            assert ans in text[s:e] and len(text[s:e].split()) <= max(len(ans.split()), MAX_NAME_WORDS)
            checked += 1
    assert checked >= 10


@given(st.text(max_size=80), st.integers(0, 80), st.integers(0, 80))
def test_repair_stays_inside_the_text(text, i, j):
    a, b = sorted((i, j))
    s, e = repair_span(text, a, b)
    if 0 <= a < b <= len(text):
        assert 0 <= s < e <= len(text)
    else:
        assert (s, e) == (a, b)
