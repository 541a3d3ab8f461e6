"""The learned evaluator's model on a tiny config-built BERT (no download): encodings, evidence, spans."""

from __future__ import annotations

import pytest
import torch

from evidential.errors import ConfigError
from training.learned.model import (
    EvidentialEvaluatorModel,
    LearnedModelConfig,
    is_yes_no_question,
    resolve_encoder,
)


@pytest.fixture(scope="module")
def model(tiny_encoder):
    torch.manual_seed(0)
    return EvidentialEvaluatorModel(
        LearnedModelConfig(encoder=str(tiny_encoder), max_length=48, head_hidden=8)
    )


def test_config_validation_names_fields():
    with pytest.raises(ConfigError, match="model.activation must be 'softplus' or 'exp'"):
        LearnedModelConfig(activation="relu")
    with pytest.raises(ConfigError, match="model.max_length must be an integer >= 16"):
        LearnedModelConfig(max_length=4)
    with pytest.raises(ConfigError, match="model.lora_layers must be null or a non-empty list"):
        LearnedModelConfig(lora_layers=[])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"encoder": ""}, "model.encoder must be a model id or folder; got ''"),
        ({"lora_r": 0}, "model.lora_r must be an integer >= 1; got 0"),
        ({"lora_dropout": 1.0}, "model.lora_dropout must lie in [0, 1); got 1.0"),
        ({"head_dropout": -0.1}, "model.head_dropout must lie in [0, 1); got -0.1"),
        ({"max_evidence": 0}, "model.max_evidence must be a number > 0; got 0"),
        (
            {"lora_target_modules": ["query", ""]},
            "model.lora_target_modules must be a list of module names; got ['query', '']",
        ),
        (
            {"lora_layers": [1, True]},
            "model.lora_layers must be null or a non-empty list of layer indices; got [1, True]",
        ),
        ({"use_lora": "yes"}, "model.use_lora must be true or false; got 'yes'"),
        ({"max_answer_tokens": 0}, "model.max_answer_tokens must be an integer >= 1; got 0"),
    ],
)
def test_config_messages(kwargs, message):
    with pytest.raises(ConfigError) as info:
        LearnedModelConfig(**kwargs)
    assert str(info.value) == message


def test_config_accepts_and_normalizes():
    cfg = LearnedModelConfig(lora_dropout=0, max_evidence=50, lora_layers=[0, 5], lora_target_modules=[])
    assert (cfg.lora_dropout, cfg.max_evidence) == (0.0, 50.0) and isinstance(cfg.max_evidence, float)
    assert cfg.lora_layers == [0, 5] and cfg.lora_target_modules == []


def test_lora_targets_must_exist(tiny_encoder):
    with pytest.raises(ConfigError, match="match no linear layer"):
        EvidentialEvaluatorModel(
            LearnedModelConfig(encoder=str(tiny_encoder), lora_target_modules=["q_proj"])
        )


def test_only_adapters_and_heads_train(model):
    trainable = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"encoder", "proj", "attn_query", "evidence_head", "span_head"}
    enc = [n for n, p in model.encoder.named_parameters() if p.requires_grad]
    assert enc and all("lora_" in n for n in enc)


def test_claim_tokens_cover_each_claim(model):
    batch = model.tokenize(["Who won?"], ["Lyon won the cup in 1999."], [["Paris", "Lyon club"]])
    ids = batch["input_ids"][0]
    tok = model.tokenizer
    for j, claim in enumerate(["paris", "lyon club"]):
        got = tok.decode(ids[batch["claim_tokens"][0, j]])
        assert got == claim
    chunk = tok.decode(ids[batch["sequence"][0] == 1])
    assert chunk == "lyon won the cup in 1999."


def test_evidence_is_nonnegative_and_one_pass_per_batch(model):
    calls = []
    handle = model.encoder.register_forward_hook(lambda *a: calls.append(1))
    try:
        mats = model.evidence_matrices(
            ["q1", "q2"], [["a b c", "d e f", "g"], ["h i"]], [["x", "y"], ["z", "w", "v"]]
        )
    finally:
        handle.remove()
    assert len(calls) == 1  # one encoder pass for all k x M pairs of both queries
    assert [tuple(m.shape) for m in mats] == [(3, 2), (1, 3)]
    assert all(bool((m >= 0).all()) for m in mats)


def test_evidence_of_a_row_does_not_depend_on_batch_padding(model):
    model.eval()
    with torch.no_grad():
        alone = model.evidence_matrices(["q"], [["short chunk"]], [["x"]])[0]
        padded = model.evidence_matrices(
            ["q", "q"], [["short chunk"], ["a much longer chunk " * 5]], [["x"], ["x", "y", "z"]]
        )[0]
    assert torch.allclose(alone, padded, atol=1e-5)


def test_exp_activation_is_clamped(tiny_encoder):
    m = EvidentialEvaluatorModel(
        LearnedModelConfig(encoder=str(tiny_encoder), activation="exp", max_evidence=2.0, use_lora=False)
    )
    with torch.no_grad():
        m.evidence_head[-1].bias.fill_(50.0)
        ev = m.evidence_matrices(["q"], [["chunk"]], [["x"]])[0]
    assert ev.item() == pytest.approx(2.0, rel=1e-5)


class _FixedSpan(torch.nn.Module):
    """A span head whose logits peak at given token positions (start, end); -1 peaks at [CLS]."""

    def __init__(self, start: int, end: int):
        super().__init__()
        self.start, self.end = start, end

    def forward(self, hidden):
        out = torch.zeros(*hidden.shape[:2], 2)
        out[:, self.start, 0] = 10.0
        out[:, self.end, 1] = 10.0
        return out


def test_extract_spans_decodes_offsets(tiny_encoder):
    model = EvidentialEvaluatorModel(
        LearnedModelConfig(encoder=str(tiny_encoder), max_length=48, use_lora=False)
    )
    chunk = "Paris is nice in spring"
    batch = model.tokenize(["where?"], [chunk])
    chunk_pos = (batch["sequence"][0] == 1).nonzero().flatten().tolist()  # tokens of the chunk
    model.span_head = _FixedSpan(chunk_pos[2], chunk_pos[3])  # "nice in"
    (span,) = model.extract_spans(["where?"], [chunk])
    assert span.text == "nice in"
    assert chunk[span.start_char : span.end_char] == "nice in"
    assert span.score == pytest.approx(20.0)
    model.span_head = _FixedSpan(0, 0)  # [CLS]: no answer here
    assert model.extract_spans(["where?"], [chunk])[0].text is None
    model.span_head = _FixedSpan(chunk_pos[3], chunk_pos[2])  # end before start
    assert model.extract_spans(["where?"], [chunk])[0].text != "nice in"


class _TwoSpans(torch.nn.Module):
    """A span head with two peaks: ``(s1, e1)`` scored 10 + 10 and ``(s2, e2)`` scored ``second`` + ``second``."""

    def __init__(self, s1: int, e1: int, s2: int, e2: int, second: float):
        super().__init__()
        self.pos, self.second = (s1, e1, s2, e2), second

    def forward(self, hidden):
        s1, e1, s2, e2 = self.pos
        out = torch.zeros(*hidden.shape[:2], 2)
        out[:, s1, 0], out[:, e1, 1] = 10.0, 10.0
        out[:, s2, 0], out[:, e2, 1] = self.second, self.second
        return out


def test_extract_span_candidates_keeps_non_overlapping_alternates_within_the_margin(tiny_encoder):
    model = EvidentialEvaluatorModel(
        LearnedModelConfig(encoder=str(tiny_encoder), max_length=48, use_lora=False)
    )
    chunk = "Paris is nice in spring"
    pos = (model.tokenize(["where?"], [chunk])["sequence"][0] == 1).nonzero().flatten().tolist()
    model.span_head = _TwoSpans(pos[0], pos[0], pos[4], pos[4], 9.5)  # "Paris" (20), "spring" (19)
    (spans,) = model.extract_span_candidates(["where?"], [chunk], n=3, margin=2.0, repair=False)
    assert [x.text for x in spans] == ["Paris", "spring"]  # "Paris … spring" overlaps "Paris": left out
    assert spans[0].score == pytest.approx(20.0) and spans[1].score == pytest.approx(19.0)
    assert [x.text for x in model.extract_span_candidates(["where?"], [chunk], n=3, margin=0.5)[0]] == [
        "Paris"
    ]
    assert [x.text for x in model.extract_span_candidates(["where?"], [chunk], n=1, margin=5.0)[0]] == [
        "Paris"
    ]
    # n = 1 is extract_spans
    assert model.extract_spans(["where?"], [chunk], repair=False)[0] == spans[0]
    model.span_head = _FixedSpan(0, 0)  # no answer: no candidates either
    assert model.extract_span_candidates(["where?"], [chunk], n=2)[0] == []


def test_yes_no_and_encoder_resolution():
    assert is_yes_no_question("Does the Nile flow north?")
    assert not is_yes_no_question("Which river is longest?")
    assert resolve_encoder("sentence-transformers/all-MiniLM-L6-v2").endswith("model")
    assert resolve_encoder("some/other-model") == "some/other-model"


def test_a_frame_too_long_for_one_row_is_listed_over_several(model):
    claims = [f"candidate answer number {i} with several words" for i in range(8)]
    groups = model.claim_groups("Which candidate is right?", claims)
    assert len(groups) > 1 and sorted(j for g in groups for j in g) == list(range(8))
    model.eval()
    with torch.no_grad():
        (ev,) = model.evidence_matrices(["Which candidate is right?"], [["a chunk " * 40, "short"]], [claims])
        alone = model.evidence_matrices(["Which candidate is right?"], [["short"]], [[claims[5]]])[0]
    assert ev.shape == (2, 8) and bool((ev > 0).all())  # every claim got its tokens (none truncated away)
    assert 0 < float(alone[0, 0])


def test_tokenize_is_safe_from_concurrent_threads(model):
    """Server threads share one model: a call without padding (``claim_groups``) must not switch padding off
    under a concurrent batched ``tokenize`` (it did: "expected sequence of length 138 at dim 1 (got 123)")."""
    from concurrent.futures import ThreadPoolExecutor

    batch = (
        ["a question about the album"] * 64,
        [("word " * n) for n in range(64)],
        [["alpha", "beta"]] * 64,
    )
    expected = model.tokenize(*batch)["input_ids"]

    def job(i: int):
        if i % 2:
            return model.claim_groups("a question", ["alpha", "beta gamma"])
        return model.tokenize(*batch)["input_ids"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(job, range(200)))
    assert all(r == [[0, 1]] for r in results[1::2])
    assert all(torch.equal(ids, expected) for ids in results[::2])


@pytest.mark.gpu
def test_cuda_bf16_forward_matches_cpu(tiny_encoder):
    torch.manual_seed(0)
    model = EvidentialEvaluatorModel(
        LearnedModelConfig(encoder=str(tiny_encoder), max_length=64, head_hidden=16)
    )
    model.eval()
    args = (
        ["Who directed it?"] * 2,
        ["Elia Kazan directed it.", "Franco Giraldi did."],
        [["Kazan", "Giraldi"]] * 2,
    )
    with torch.no_grad():
        cpu = model(*args)["evidence"]
        model.cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            gpu = model(*args)["evidence"]
    assert gpu.is_cuda and bool((gpu >= 0).all())
    assert torch.allclose(gpu.float().cpu(), cpu, rtol=0.05, atol=0.05)  # bfloat16 keeps 8 bits of mantissa
