"""The one registry of RAG systems, the RAGSystem base and the EvidentialRAG variants (no models loaded)."""

from __future__ import annotations

import pytest

from evidential.errors import ConfigError, UnknownNameError
from inference.config import load_config
from inference.rag import (
    BASELINES,
    SYSTEMS,
    CorrectiveRAG,
    EvidentialNoFusion,
    EvidentialRAG,
    NaiveRAG,
    RAGSystem,
    SelfRAG,
    build_systems,
    config_with_seed,
)
from inference.rag.base import given_or_retrieved
from inference.types import Chunk


def test_one_registry_with_the_harness_names_in_order():
    assert SYSTEMS.names() == (
        "evidential",
        "evidential-learned",
        "evidential-prompt",
        "evidential-no-fusion",
        "evidential-no-routing",
        "evidential-decomposed",
        "naive",
        "corrective",
        "selfrag",
        "majority",
    )
    for name in SYSTEMS:
        cls = SYSTEMS.get(name)
        assert issubclass(cls, RAGSystem) and cls.name == name
    assert [SYSTEMS.get(n).uses_extra_chunks for n in ("evidential", "naive", "corrective", "selfrag")] == [
        False,
        False,
        True,
        False,
    ]


def test_baselines_is_a_view_of_the_registry():
    assert BASELINES.names() == ("naive", "selfrag", "corrective", "majority")
    assert BASELINES.get("naive") is NaiveRAG and BASELINES.get("selfrag") is SelfRAG
    assert BASELINES.get("corrective") is CorrectiveRAG and "evidential" not in BASELINES
    with pytest.raises(UnknownNameError, match="choose one of: corrective, majority, naive, selfrag"):
        BASELINES.get("evidential")


def test_unknown_system_fails_before_anything_loads():
    with pytest.raises(UnknownNameError, match="unknown system 'nope'"):
        build_systems(["naive", "nope"], None)


def test_variants_configure_the_pipeline():
    cfg = load_config(None, [])
    assert EvidentialRAG.configured(cfg) == cfg
    assert EvidentialNoFusion.configured(cfg).fusion.rule == "average"
    assert SYSTEMS.get("evidential-no-routing").configured(cfg).fusion.policy == "direct"
    assert SYSTEMS.get("evidential-decomposed").configured(cfg).fusion.policy == "decomposed"
    assert SYSTEMS.get("evidential-prompt").configured(cfg).evaluator.name == "prompt"
    assert SYSTEMS.get("evidential-learned").configured(cfg).evaluator.name == "learned"
    assert EvidentialNoFusion.configured(cfg).fusion.lam == cfg.fusion.lam  # only the named fields change


def test_config_with_seed_sets_both_seeds():
    cfg = config_with_seed(load_config(None, []), 123)
    assert cfg.seed == 123 and cfg.generator.generation.seed == 123


class _Retriever:
    def __init__(self):
        self.calls = []

    def search_batch(self, questions, k):
        self.calls.append((list(questions), k))
        return [[Chunk(f"{q}-{r}", "t", rank=r) for r in range(1, k + 2)] for q in questions]


def test_given_or_retrieved_retrieves_only_the_missing_lists_in_one_call():
    given = [Chunk("g1", "a", rank=1), Chunk("g2", "b", rank=2), Chunk("g3", "c", rank=3)]
    ret = _Retriever()
    rows, need, seconds = given_or_retrieved(["q0", "q1"], [given, None], 2, ret)
    assert [[c.id for c in r] for r in rows] == [["g1", "g2"], ["q1-1", "q1-2"]]
    assert need == [1] and ret.calls == [(["q1"], 2)] and seconds >= 0.0
    with pytest.raises(ConfigError, match="no index loaded"):
        given_or_retrieved(["q"], None, 2, None)
    with pytest.raises(ConfigError, match="2 questions but 1 chunk lists"):
        given_or_retrieved(["a", "b"], [given], 2, ret)


def test_the_base_is_abstract_until_ask_batch_is_implemented():
    from inference.config import RunConfig
    from inference.rag.base import RAGSystem

    with pytest.raises(TypeError, match="ask_batch"):
        RAGSystem(RunConfig())
