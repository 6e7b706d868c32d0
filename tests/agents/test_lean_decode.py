"""The lean decoding step: taken for Llama-layout models (Llama, Qwen2 with GQA and biases, LoRA),
it samples what the model's own forward samples; anything else keeps the model's forward."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents import backends  # noqa: E402
from mathgym.agents.fast.lean_decode import lean_step  # noqa: E402
from mathgym.agents.policy import LLMPolicy, LoraSettings, SamplingParams  # noqa: E402
from tests.chat_fixtures import build_model, build_tokenizer, cached_chat_model  # noqa: E402
from tests.trainkit import build_dropout_model, build_small_model  # noqa: E402


@pytest.fixture(scope="module")
def llama_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("llama"))


def _prompts(policy):
    questions = ("What is 2 + 3?", "Name a prime.", "Count to four.")
    return [policy.chat.prompt_ids([{"role": "user", "content": q}]) for q in questions for _ in range(4)]


def _generate(policy, monkeypatch, lean: bool):
    with monkeypatch.context() as patch:
        if not lean:
            patch.setattr(backends, "lean_step", lambda model: None)
        steps: list[int] = []
        hook = policy.model.get_input_embeddings().register_forward_pre_hook(lambda m, args: steps.append(len(args[0])))
        try:
            out = policy.generate(_prompts(policy), SamplingParams(max_new_tokens=24), seeds=list(range(12)))
        finally:
            hook.remove()
    return out, steps


def _same_samples(policy, monkeypatch, joined: bool | None = None):
    """The lean step's samples are the model's own; ``joined``: whether its decoding steps must (not) join weights."""
    step = lean_step(policy.model)
    assert step is not None
    if joined is not None:
        assert (step.joined_weights() is not None) == joined
    calls: list[int] = []
    hook = policy.model.register_forward_pre_hook(lambda m, a, kw: calls.append(1), with_kwargs=True)
    try:
        lean, steps = _generate(policy, monkeypatch, lean=True)
    finally:
        hook.remove()
    plain, _ = _generate(policy, monkeypatch, lean=False)
    assert len(calls) == 1 and len(steps) > 2  # the prefill is the model's forward, every decoding step is lean
    assert {g.finish_reason for g in plain} == {"stop", "length"}
    for a, b in zip(lean, plain):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


@pytest.mark.parametrize("lora", [False, True])
def test_llama_samples_what_its_own_forward_samples(llama_path, lora, monkeypatch):
    policy = LLMPolicy.from_pretrained(str(llama_path), device="cpu", lora=LoraSettings(r=4, alpha=8, dropout=0.0) if lora else None)
    if lora:  # a trained adapter: its update must reach the lean step (the modules are called, not read)
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(param, std=0.5)
    _same_samples(policy, monkeypatch, joined=not lora)  # a LoRA layer is called, never joined


def test_qwen2_with_grouped_query_attention_and_biases_samples_what_its_own_forward_samples(tmp_path_factory, monkeypatch):
    policy = LLMPolicy.from_pretrained(str(cached_chat_model(tmp_path_factory, "chatml")), device="cpu")
    attn = policy.model.get_decoder().layers[0].self_attn
    assert attn.q_proj.bias is not None and attn.num_key_value_groups == 2
    _same_samples(policy, monkeypatch, joined=True)


def test_other_layouts_keep_the_models_own_forward(tmp_path, llama_path, monkeypatch):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer("chatml")
    base = build_model(tokenizer, "chatml", "qwen2")
    config = Qwen3Config(**{k: getattr(base.config, k) for k in (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id")})
    qwen3 = Qwen3ForCausalLM(config)  # a norm of the queries and keys: not Llama's attention
    assert lean_step(qwen3) is None
    from transformers import MistralConfig, MistralForCausalLM

    windowed = MistralForCausalLM(MistralConfig(vocab_size=config.vocab_size, hidden_size=32, intermediate_size=64,
                                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                 sliding_window=16))
    assert lean_step(windowed) is None  # a sliding window the probe's few tokens would never reach

    policy = LLMPolicy.from_pretrained(str(llama_path), device="cpu")
    model_forward = policy.model.forward
    policy.model.forward = lambda *a, **k: _soft_capped(model_forward(*a, **k))  # more than its head's logits
    assert lean_step(policy.model) is None  # the probe step disagrees with the model's own logits
    gens = policy.generate(_prompts(policy)[:2], SamplingParams(max_new_tokens=4), seeds=[0, 1])
    assert all(len(g.token_ids) for g in gens)

    dropout = LLMPolicy.from_pretrained(str(build_dropout_model(tmp_path / "dropout")), device="cpu")
    dropout.model.train()
    assert lean_step(dropout.model) is None  # each row would draw its own dropout in the model's forward
    dropout.model.eval()
    assert lean_step(dropout.model) is not None


def _soft_capped(out):
    out.logits = 3.0 * torch.tanh(out.logits / 3.0)
    return out


def test_half_precision_autocast_is_checked_at_its_own_precision_and_nothing_keeps_the_model(llama_path):
    import gc
    import weakref

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(llama_path))  # fp32 weights, bf16 computation
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        assert lean_step(model) is not None
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None  # the step the model was checked for does not hold it


def test_a_forward_wrapped_after_the_check_is_checked_again(llama_path, monkeypatch):
    """accelerate wraps a trained model's forward in autocast (TRL's bf16 default on a CPU): the
    prefill then runs in bf16 while the modules called alone would not. The step is checked again
    for the new forward and the sampler follows the model's own forward."""
    policy = LLMPolicy.from_pretrained(str(llama_path), device="cpu")
    assert lean_step(policy.model) is not None
    policy.model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(policy.model.forward)
    lean, _ = _generate(policy, monkeypatch, lean=True)
    plain, _ = _generate(policy, monkeypatch, lean=False)
    for a, b in zip(lean, plain):
        assert a.token_ids == b.token_ids and a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_the_buffers_grow_as_rows_go_on_and_the_samples_stay_the_models(llama_path, monkeypatch):
    from mathgym.agents.fast import lean_decode

    policy = LLMPolicy.from_pretrained(str(llama_path), device="cpu")
    widths: list[int] = []
    reserve = lean_decode.LeanCache.reserve

    def recording(self, column):
        reserve(self, column)
        widths.append(self.layers[0].key_buffer.shape[-2])
        assert widths[-1] <= self.limit  # never more room than the longest generation needs

    monkeypatch.setattr(lean_decode, "GROWTH", 2)  # grow every few columns
    monkeypatch.setattr(lean_decode.LeanCache, "reserve", recording)
    _same_samples(policy, monkeypatch)
    assert len(set(widths)) > 3  # the room grew several times within one generation


def test_joined_weights_are_taken_anew_for_each_generation(llama_path, monkeypatch):
    """A plain model's decoding steps use its q/k/v and gate/up weights joined when a generation
    starts: after an update the next generation joins the new weights."""
    from mathgym.agents.fast import lean_decode

    policy = LLMPolicy.from_pretrained(str(llama_path), device="cpu")
    runs: list[int] = []
    joined_step = lean_decode.LeanStep._joined_step
    monkeypatch.setattr(lean_decode.LeanStep, "_joined_step", lambda self, *a: runs.append(1) or joined_step(self, *a))
    _same_samples(policy, monkeypatch, joined=True)
    assert runs
    with torch.no_grad():  # an optimizer step between two generations
        for layer in policy.model.get_decoder().layers:
            layer.self_attn.k_proj.weight.mul_(1.7)
            layer.mlp.up_proj.weight.add_(0.05)
    _same_samples(policy, monkeypatch, joined=True)


def test_a_hook_or_another_norm_keeps_the_modules_called(llama_path, monkeypatch):
    policy = LLMPolicy.from_pretrained(str(llama_path), device="cpu")
    layer = policy.model.get_decoder().layers[0]
    seen: list[int] = []
    hook = layer.self_attn.v_proj.register_forward_hook(lambda m, a, out: seen.append(1))
    try:
        _same_samples(policy, monkeypatch, joined=False)  # the hook runs at every step
        assert len(seen) > 3
    finally:
        hook.remove()

    other = LLMPolicy.from_pretrained(str(llama_path), device="cpu")
    norm = other.model.get_decoder().layers[1].post_attention_layernorm
    rms = norm.forward
    norm.forward = lambda x: rms(x) * 0.5 + x * 0.1  # not an RMS norm of its weight: the probe finds the joined step differs
    step = lean_step(other.model)
    assert step is not None and not step.joins
    _same_samples(other, monkeypatch, joined=False)
