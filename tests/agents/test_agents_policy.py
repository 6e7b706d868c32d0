"""LLMPolicy and the embedded tiny model: tokenizer, chat template, save/load, sampling, backends."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.backends import BACKENDS, sample_token  # noqa: E402
from mathgym.agents.policy import LLMPolicy, SamplingParams, pick_dtype  # noqa: E402
from mathgym.agents.tiny import build_tokenizer, cache_dir, tiny_model_path  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return LLMPolicy.from_pretrained(str(build_small_model(tmp_path_factory.mktemp("model"))), device="cpu")


def test_char_tokenizer_round_trips_text_and_has_a_chat_template():
    tok = build_tokenizer()
    plain = "Hello, world!\n  x^2 ~ {}"
    ids = tok(plain, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(plain) and tok.decode(ids) == plain  # one token per character
    text = "What is 23 + 45?\n\\boxed{68}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert [tok.decode([i]) for i in ids] == ["What is ", "2", "3", " + ", "4", "5", "?", "\n", "\\boxed{", "6", "8", "}"]
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert chat == "<|user|>hi<|end|><|assistant|>"
    assert tok.eos_token == "<|end|>" and tok.pad_token_id != tok.eos_token_id


def test_tiny_model_is_built_once_in_the_cache_and_loads_with_auto_classes(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("MATHGYM_CACHE", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"
    path = tiny_model_path()
    assert path.parent.parent == tmp_path / "cache" and (path / "config.json").is_file()
    stamp = (path / "config.json").stat().st_mtime_ns
    assert tiny_model_path() == path and (path / "config.json").stat().st_mtime_ns == stamp
    model = AutoModelForCausalLM.from_pretrained(path)
    assert 0.5e6 < sum(p.numel() for p in model.parameters()) < 2e6
    tok = AutoTokenizer.from_pretrained(path)
    assert tok("a b", add_special_tokens=False)["input_ids"] == build_tokenizer()("a b", add_special_tokens=False)["input_ids"]


def test_generate_returns_tokens_logprobs_text_and_respects_limits(policy):
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    gen = torch.Generator().manual_seed(0)
    outs = policy.generate([prompt, prompt[:5]], SamplingParams(max_new_tokens=7), gen)
    for out in outs:
        assert 1 <= len(out.token_ids) <= 7 and len(out.logprobs) == len(out.token_ids)
        assert out.finish_reason == ("stop" if out.token_ids[-1] == policy.chat.eos_token_id else "length")
        assert out.text == policy.chat.decode(out.token_ids)
    again = policy.generate([prompt, prompt[:5]], SamplingParams(max_new_tokens=7), torch.Generator().manual_seed(0))
    assert [o.token_ids for o in again] == [o.token_ids for o in outs]  # seeded → reproducible


def test_greedy_is_the_argmax_and_matches_batch_of_one(policy):
    p1 = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    p2 = policy.chat.prompt_ids([{"role": "user", "content": "hello there, a longer prompt"}])
    both = policy.generate([p1, p2], SamplingParams(temperature=0, max_new_tokens=6))
    alone = policy.generate([p1], SamplingParams(temperature=0, max_new_tokens=6))
    assert both[0].token_ids == alone[0].token_ids  # left padding does not change the result


@pytest.mark.parametrize("backend", ["native", "hf"])
def test_a_policy_built_directly_generates_with_its_backend(policy, backend):
    """``LLMPolicy(model=..., tokenizer=...)``, as a user wraps a model already loaded, generates
    (and reuses turns) through the backend it names without a ``set_backend`` call first."""
    direct = LLMPolicy(model=policy.model, tokenizer=policy.tokenizer, device=policy.device, backend=backend)
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    with direct.reusing_turns():
        out = direct.generate([prompt], SamplingParams(temperature=0, max_new_tokens=6))
    assert out[0].token_ids == policy.generate([prompt], SamplingParams(temperature=0, max_new_tokens=6))[0].token_ids
    assert isinstance(direct._backend_impl, BACKENDS[backend])


def test_stop_strings_cut_the_completion(policy):
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "x"}])
    params = SamplingParams(max_new_tokens=12)
    free = policy.generate([prompt], params, torch.Generator().manual_seed(5))[0]
    assert len(free.text) >= 4, free
    stop = free.text[2:4]
    cut_params = SamplingParams(max_new_tokens=12, stop=(stop,))
    cut = policy.generate([prompt], cut_params, torch.Generator().manual_seed(5))[0]  # same seed, same tokens
    assert cut.text == free.text[: free.text.index(stop) + len(stop)]
    assert cut.finish_reason == "stop"


def test_hf_generate_backend_agrees_with_native_greedy(policy):
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    native = policy.generate([prompt], SamplingParams(temperature=0, max_new_tokens=6))[0]
    policy.set_backend("hf")
    try:
        hf = policy.generate([prompt], SamplingParams(temperature=0, max_new_tokens=6))[0]
    finally:
        policy.set_backend("native")
    assert hf.token_ids == native.token_ids
    assert hf.logprobs == pytest.approx(native.logprobs, abs=1e-4)


def test_vllm_backend_is_import_guarded_or_agrees_with_native_greedy(policy):
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(ConfigError, match="pip install vllm"):
            policy.set_backend("vllm")
        return
    if not torch.cuda.is_available():
        pytest.skip("vllm is installed but there is no GPU for its engine")
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    native = policy.generate([prompt], SamplingParams(temperature=0, max_new_tokens=6))[0]
    policy.set_backend("vllm")
    try:
        served = policy.generate([prompt], SamplingParams(temperature=0, max_new_tokens=6))[0]
    finally:
        policy.set_backend("native")
    assert served.token_ids == native.token_ids
    assert served.logprobs == pytest.approx(native.logprobs, abs=1e-2)


def test_an_unknown_backend_names_the_choices(policy):
    with pytest.raises(ConfigError, match="backend='fast' is not allowed; choose one of 'native', 'hf', 'vllm'"):
        policy.set_backend("fast")


def test_sample_token_top_p_keeps_only_the_nucleus():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]]))
    gen = torch.Generator().manual_seed(0)
    picks = {int(sample_token(logits, SamplingParams(top_p=0.5), torch.rand(1, generator=gen))[0]) for _ in range(50)}
    assert picks == {0}
    token, logp = sample_token(logits, SamplingParams(temperature=0), None)
    assert int(token) == 0 and float(logp) == pytest.approx(torch.log(torch.tensor(0.6)).item(), abs=1e-6)


def test_sample_token_inverts_each_rows_distribution_at_its_draw():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]])).expand(5, 4)
    draws = torch.tensor([0.0, 0.59, 0.61, 0.92, 0.97], dtype=torch.float64)
    assert sample_token(logits, SamplingParams(), draws)[0].tolist() == [0, 0, 1, 2, 3]
    # top-p renormalises the nucleus {0, 1} (2/3, 1/3) before inverting
    assert sample_token(logits, SamplingParams(top_p=0.7), draws)[0].tolist() == [0, 0, 0, 1, 1]


def test_a_prompts_sample_depends_on_its_seed_not_on_the_batch(policy):
    prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
    other = policy.chat.prompt_ids([{"role": "user", "content": "a different, longer question"}])
    params = SamplingParams(max_new_tokens=12)
    batch = policy.generate([other, prompt, prompt, other], params, seeds=[1, 2, 3, 4])
    alone = policy.generate([prompt], params, seeds=[3])[0]
    shorter = policy.generate([prompt, other], SamplingParams(max_new_tokens=5), seeds=[3, 9])[0]
    assert batch[2].token_ids == alone.token_ids and batch[2].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert shorter.token_ids == alone.token_ids[:5]  # fewer tokens asked: the same first tokens
    assert batch[1].token_ids != batch[2].token_ids  # another seed, another sample
    with pytest.raises(ValueError, match="one seed per prompt"):
        policy.generate([prompt], params, seeds=[1, 2])


def test_dtype_choice_on_cpu():
    assert pick_dtype("auto", torch.device("cpu")) == torch.float32
    with pytest.raises(ConfigError, match="dtype='fp8'"):
        pick_dtype("fp8", torch.device("cpu"))
