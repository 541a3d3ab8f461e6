"""The transformers backend on the packaged SmolLM2-135M-Instruct GGUF (dequantized; nothing downloaded)."""

import json

import pytest

from evidential import ConfigError
from inference.backends import BackendConfig, BackendError, GenerationConfig, load_backend, resolve_model
from inference.evaluators.contract import OUTPUT_SCHEMA


def chat(text):
    return [{"role": "user", "content": text}]


def test_packaged_model_resolves_to_its_gguf():
    ref = resolve_model("packaged:smollm2-135m-instruct")
    assert ref.gguf_file.endswith(".gguf") and ref.gguf_path.is_file()
    with pytest.raises(BackendError, match="unknown packaged model"):
        resolve_model("packaged:nope")
    with pytest.raises(BackendError, match="not found"):
        resolve_model("/no/such/model.gguf")


def test_batch_in_order_one_pass_greedy_and_deterministic(smollm2):
    prompts = [chat("Say hello."), chat("What is 2 + 2?"), chat("Name a colour.")]
    before = smollm2.passes
    a = smollm2.generate(prompts, GenerationConfig(max_tokens=12))
    b = smollm2.generate(prompts[1:2], GenerationConfig(max_tokens=12))
    assert smollm2.passes == before + 2 and len(a) == 3
    assert all(g.text and g.num_tokens <= 12 and g.finish_reason in ("stop", "length") for g in a)
    assert a[1].text == b[0].text  # left padding does not change greedy output


def test_logprobs(smollm2):
    (g,) = smollm2.generate([chat("Say yes.")], GenerationConfig(max_tokens=6, logprobs=True))
    assert g.token_logprobs is not None and len(g.token_logprobs) == g.num_tokens
    assert all(lp <= 0.0 for lp in g.token_logprobs)


def test_json_schema_constrained_decoding(smollm2):
    assert smollm2.supports_json_schema, "xgrammar is a core dependency"
    gens = smollm2.generate(
        [chat("Is Paris in France? Reply in JSON."), chat("Give me a poem.")],
        GenerationConfig(max_tokens=80, json_schema=OUTPUT_SCHEMA),
    )
    for g in gens:
        assert g.constrained
        if g.finish_reason == "stop":
            obj = json.loads(g.text)
            assert list(obj) == OUTPUT_SCHEMA["required"]
            assert obj["evidence"] in range(11) and obj["stance"] in ("supports", "refutes", "irrelevant")


def test_bad_configs_fail_clearly():
    with pytest.raises(ConfigError, match="backend.name"):
        BackendConfig(name="ollama")
    with pytest.raises(ConfigError, match="backend.dtype"):
        BackendConfig(dtype="int3")
    with pytest.raises(BackendError, match="could not load"):
        load_backend(BackendConfig(name="transformers", model="/no/such/folder"))
    with pytest.raises(ConfigError, match="max_tokens"):
        GenerationConfig(max_tokens=0)


@pytest.fixture(scope="module")
def tiny_base_llm(tmp_path_factory, build_tiny_llama):
    """A randomly initialised 2-layer Llama with the SmolLM2 tokenizer and NO chat template (a base model)."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-base-llm"), chat_template=False)


def test_raw_prompts_serve_a_base_model_without_chat_template(tiny_base_llm):
    from inference.backends.base import raw_prompt_text

    with pytest.raises(BackendError, match="raw_prompts: true"):
        load_backend(BackendConfig(name="transformers", model=str(tiny_base_llm), device="cpu"))
    backend = load_backend(
        BackendConfig(name="transformers", model=str(tiny_base_llm), device="cpu", raw_prompts=True)
    )
    prompt = [{"role": "user", "content": "### Instruction:\nWho?\n\n### Response:\n"}]
    assert raw_prompt_text(prompt) == "### Instruction:\nWho?\n\n### Response:\n"
    out = backend.generate([prompt, prompt], GenerationConfig(max_tokens=3))
    assert backend.passes == 1 and len(out) == 2 and out[0].text == out[1].text  # greedy, same prompt
    # the model saw the text itself: the same prompt tokenized by hand gives the same greedy continuation
    import torch

    ids = backend.tokenizer(raw_prompt_text(prompt), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        gen = backend.model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert (
        backend.tokenizer.decode(gen[0, ids["input_ids"].shape[1] :], skip_special_tokens=True) == out[0].text
    )
    with pytest.raises(ConfigError, match="raw_prompts is supported by the transformers and vllm backends"):
        BackendConfig(name="llamacpp", raw_prompts=True)
    with pytest.raises(ConfigError, match="raw_prompts must be true or false"):
        BackendConfig(raw_prompts="yes")


def test_stream_yields_the_greedy_text_of_generate_then_the_generation(smollm2):
    import threading

    from inference.backends import Generation, StreamingBackend

    assert isinstance(smollm2, StreamingBackend)
    cfg = GenerationConfig(max_tokens=24)
    prompt = chat("Name three colours.")
    (want,) = smollm2.generate([prompt], cfg)
    passes = smollm2.passes
    items = list(smollm2.stream(prompt, cfg))
    pieces, final = items[:-1], items[-1]
    assert isinstance(final, Generation) and all(isinstance(p, str) and p for p in pieces)
    assert len(pieces) > 1  # word by word, not one block
    assert "".join(pieces) == final.text == want.text
    assert (final.finish_reason, final.num_tokens) == (want.finish_reason, want.num_tokens)
    assert smollm2.passes == passes + 1
    # a consumer that sets cancel after the first piece stops generation early
    cancel = threading.Event()
    got = []
    for item in smollm2.stream(
        chat("Count from one to fifty in words."), GenerationConfig(max_tokens=64), cancel
    ):
        got.append(item)
        cancel.set()
    assert got[-1].finish_reason == "cancelled" and got[-1].num_tokens < 64
    # closing the iterator early also stops the worker thread (no generation left running)
    it = smollm2.stream(chat("Count from one to fifty in words."), GenerationConfig(max_tokens=64))
    next(it)
    it.close()
    assert not any(t.name == "transformers-stream" for t in threading.enumerate())


@pytest.mark.gpu
def test_cuda_generation_matches_cpu(tmp_path, build_tiny_llama):
    model = build_tiny_llama(tmp_path / "tiny-llm")
    prompt = [{"role": "user", "content": "Who directed Baby Doll?"}]
    out = {}
    for device in ("cpu", "cuda"):
        backend = load_backend(BackendConfig(name="transformers", model=str(model), device=device))
        out[device] = backend.generate([prompt, prompt], GenerationConfig(max_tokens=4))
        assert backend.passes == 1
    assert str(next(backend.model.parameters()).device).startswith("cuda")
    assert [o.text for o in out["cuda"]] == [o.text for o in out["cpu"]]  # greedy on a float32 model
