"""EvaluatorConfig: one flat section built from field groups (prompt / claim alignment / learned)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from evidential import ConfigError
from inference.config import load_config, to_dict
from inference.evaluators.config import (
    ClaimAlignmentFields,
    EvaluatorConfig,
    LearnedEvaluatorFields,
    PromptEvaluatorFields,
)

KEYS = [
    "name",
    "backend",
    "generation",
    "constrained",
    "max_chunk_chars",
    "scoring",
    "logprob_scale",
    "logprob_floor",
    "logprob_debias",
    "logprob_claims",
    "claims_max_tokens",
    "max_claims",
    "similarity",
    "similarity_threshold",
    "number_tolerance",
    "merge_subspans",
    "merge_units",
    "grounding",
    "aliases",
    "checkpoint",
    "support_threshold",
    "span_repair",
    "span_null_margin",
    "span_fallback_margin",
    "span_candidates",
    "span_candidate_margin",
    "device",
]


def test_keys_and_their_order_are_those_of_the_flat_section():
    assert [f.name for f in fields(EvaluatorConfig)] == KEYS
    assert list(to_dict(EvaluatorConfig())) == KEYS
    assert list(to_dict(load_config("cpu"))["evaluator"]) == KEYS


def test_groups_say_which_evaluator_reads_which_field():
    assert [f.name for f in fields(PromptEvaluatorFields)] == [
        "backend",
        "generation",
        "constrained",
        "max_chunk_chars",
        "scoring",
        "logprob_scale",
        "logprob_floor",
        "logprob_debias",
        "logprob_claims",
        "claims_max_tokens",
        "max_claims",
    ]
    assert [f.name for f in fields(LearnedEvaluatorFields)] == [
        "checkpoint",
        "support_threshold",
        "span_repair",
        "span_null_margin",
        "span_fallback_margin",
        "span_candidates",
        "span_candidate_margin",
        "device",
    ]
    assert [f.name for f in fields(ClaimAlignmentFields)] == [
        "similarity",
        "similarity_threshold",
        "number_tolerance",
        "merge_subspans",
        "merge_units",
        "grounding",
        "aliases",
    ]
    assert EvaluatorConfig.fields_for("learned") == (
        "checkpoint",
        "support_threshold",
        "span_repair",
        "span_null_margin",
        "span_fallback_margin",
        "span_candidates",
        "span_candidate_margin",
        "device",
        "similarity",
        "similarity_threshold",
        "number_tolerance",
        "merge_subspans",
        "merge_units",
        "grounding",
        "aliases",
    )
    assert EvaluatorConfig.fields_for("prompt")[:4] == (
        "backend",
        "generation",
        "constrained",
        "max_chunk_chars",
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("evaluator.name=oracle", "evaluator.name must be one of "),
        ("evaluator.max_chunk_chars=50", "evaluator.max_chunk_chars must be an integer >= 100; got 50"),
        ("evaluator.similarity=bert", "evaluator.similarity must be 'none' or 'minilm'; got 'bert'"),
        ("evaluator.similarity_threshold=0", "evaluator.similarity_threshold must lie in (0, 1]; got 0.0"),
        ("evaluator.number_tolerance=1", "evaluator.number_tolerance must lie in [0, 1); got 1.0"),
        ("evaluator.checkpoint=''", "evaluator.checkpoint must be a folder path; got ''"),
        ("evaluator.support_threshold=-1", "evaluator.support_threshold must be a number >= 0; got -1.0"),
        ("evaluator.device=tpu", "evaluator.device must be 'cpu', 'cuda[:n]' or 'auto'; got 'tpu'"),
        ("evaluator.constrained=maybe", "evaluator.constrained must be true or false; got 'maybe'"),
    ],
)
def test_every_group_is_validated_with_the_dotted_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert str(err.value).startswith(message)


def test_set_keys_of_every_group_still_apply():
    cfg = load_config(
        "cpu",
        [
            "evaluator.name=prompt",
            "evaluator.max_chunk_chars=200",
            "evaluator.device=cuda:1",
            "evaluator.similarity=minilm",
        ],
    )
    ev = cfg.evaluator
    assert (ev.name, ev.max_chunk_chars, ev.device, ev.similarity) == ("prompt", 200, "cuda:1", "minilm")
