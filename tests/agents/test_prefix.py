"""Shared-prefix forward passes give the plain pass's log-probs and gradients (plain and LoRA models)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy, LoraSettings  # noqa: E402
from mathgym.agents.fast.prefix import MIN_SHARED_TOKENS, shared_prefix_length, shared_prefix_outputs  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def _rows(pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """2 groups (not contiguous) sharing 7 and 9 tokens, right-padded to different lengths."""
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 90, (7,), generator=gen).tolist(), torch.randint(10, 90, (9,), generator=gen).tolist()]
    groups = [0, 1, 0, 1, 0]
    rows = [prompts[g] + torch.randint(10, 90, (2 + 3 * i % 5,), generator=gen).tolist() for i, g in enumerate(groups)]
    width = max(map(len, rows))
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    return ids, mask, torch.tensor(groups)


def test_shared_length_stops_at_the_first_difference_within_any_group():
    ids, mask, groups = _rows(0)
    assert shared_prefix_length(ids, mask, groups) >= 7
    assert shared_prefix_length(ids, mask, torch.arange(5)) == int(mask.sum(1).min())  # lone rows: their real tokens
    assert shared_prefix_length(ids, mask, torch.zeros(5, dtype=torch.long)) < MIN_SHARED_TOKENS  # the two prompts differ


@pytest.mark.parametrize("lora", [False, True])
def test_logprobs_and_gradients_match_the_plain_pass(model_path, lora):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu", lora=LoraSettings(r=4, alpha=8) if lora else None)
    policy.model.train()
    ids, mask, groups = _rows(policy.pad_token_id)
    assert shared_prefix_outputs(policy.model, ids, mask, groups) is not None  # the shared path is taken
    results = []
    for g in (None, groups):
        policy.model.zero_grad()
        logprobs, entropy = policy.token_logprobs(ids, mask, 0.7, g)
        (logprobs * mask).sum().backward()
        results.append((logprobs.detach(), entropy, [p.grad.clone() for p in policy.trainable_parameters()]))
    (lp0, ent0, grads0), (lp1, ent1, grads1) = results
    real = mask.bool()
    assert torch.allclose(lp0[real], lp1[real], atol=1e-5) and torch.allclose(ent0[real], ent1[real], atol=1e-5)
    for a, b in zip(grads0, grads1):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_nothing_to_share_falls_back(model_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    ids, mask, _ = _rows(policy.pad_token_id)
    assert shared_prefix_outputs(policy.model, ids, mask, torch.arange(5)) is None  # every row its own group


def test_sampler_sharing_rows_draws_the_same_samples_as_the_plain_loop(model_path):
    from mathgym.agents.backends import NativeBackend
    from mathgym.agents.policy import SamplingParams

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    prompts = [[12, 30, 41], [12, 30, 41], [7, 8], [12, 30, 41], [7, 8], [50, 51, 52, 53]]  # two groups and a single
    for temperature in (1.0, 0.0):
        params = SamplingParams(temperature=temperature, max_new_tokens=10)
        shared = NativeBackend(policy).generate(prompts, params, torch.Generator().manual_seed(4))
        plain = NativeBackend(policy, share=False).generate(prompts, params, torch.Generator().manual_seed(4))
        assert [g.token_ids for g in shared] == [g.token_ids for g in plain]
        for a, b in zip(shared, plain):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    # while samples agree they are computed once: the prefill sees 3 distinct prompts, not 6 samples
    sizes = []
    from mathgym.agents.fast.lean_decode import lean_step

    lean_step(policy.model)  # its one-time check of the model runs outside the record
    hook = policy.model.get_input_embeddings().register_forward_pre_hook(lambda _m, args: sizes.append(len(args[0])))
    try:
        NativeBackend(policy).generate(prompts, SamplingParams(temperature=0.0, max_new_tokens=4), None)
    finally:
        hook.remove()
    assert sizes and sizes[0] == 3 and max(sizes) <= 3  # greedy: a prompt's samples never diverge
    # the samples of one prompt diverge: rows were split along the way
    assert len({tuple(g.token_ids) for g in NativeBackend(policy).generate(prompts[:4] * 4, SamplingParams(max_new_tokens=10),
                                                                               torch.Generator().manual_seed(0))}) > 2


def test_columns_of_padding_only_are_not_run_and_hold_zero(model_path):
    from mathgym.agents.forward import forward_pass

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    ids, mask, groups = _rows(policy.pad_token_id)
    extra = 6  # a micro-batch cut from a batch padded to a longer row
    wide_ids = torch.cat([ids, torch.full((len(ids), extra), policy.pad_token_id)], dim=1)
    wide_mask = torch.cat([mask, torch.zeros((len(ids), extra), dtype=mask.dtype)], dim=1)
    widths: list[int] = []
    hook = policy.model.register_forward_pre_hook(lambda m, a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    try:
        wide = forward_pass(policy.model, wide_ids, wide_mask, groups=groups)
    finally:
        hook.remove()
    plain = forward_pass(policy.model, ids, mask, groups=groups)
    assert max(widths) <= ids.shape[1]
    assert wide.logprobs.shape == wide_ids.shape and bool((wide.logprobs[:, -extra:] == 0).all())
    assert torch.allclose(wide.logprobs[:, : ids.shape[1]], plain.logprobs, atol=1e-6)
    assert torch.allclose(wide.entropy[:, : ids.shape[1]], plain.entropy, atol=1e-6)


@pytest.mark.parametrize("lora", [False, True])
def test_the_head_run_only_where_wanted_gives_the_whole_pass_there(model_path, lora):
    from mathgym.agents.forward import forward_pass, head_split

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu", lora=LoraSettings(r=4, alpha=8) if lora else None)
    policy.model.train()
    assert head_split(policy.model) is not None
    ids, mask, groups = _rows(policy.pad_token_id)
    wanted = mask.clone()
    wanted[:, :9] = 0  # the prompts: no log-prob wanted there (as for a batch's action tokens)
    wanted[1, -3:] = 0  # and a gap inside a row
    heads: list[int] = []
    head = policy.model.get_output_embeddings()
    hook = head.register_forward_hook(lambda m, a, out: heads.append(out.shape[0] if out.dim() == 2 else out.shape[0] * out.shape[1]))
    results = []
    try:
        for positions in (None, wanted):
            for g in (None, groups):
                policy.model.zero_grad()
                out = forward_pass(policy.model, ids, mask, temperature=0.7, groups=g, positions=positions, entropy_grad=True)
                ((out.logprobs + 0.1 * out.entropy) * wanted).sum().backward()
                results.append((out, [p.grad.clone() for p in policy.trainable_parameters()]))
    finally:
        hook.remove()
    assert heads[-1] == int(wanted[:, 1:].sum())  # the head ran on the wanted tokens only
    (whole, whole_grads) = results[0]
    on = wanted.bool()
    for out, grads in results[2:]:
        assert torch.allclose(out.logprobs[on], whole.logprobs[on], atol=1e-5)
        assert torch.allclose(out.entropy[on], whole.entropy[on], atol=1e-5)
        assert bool((out.logprobs[~on] == 0).all()) and bool((out.entropy[~on] == 0).all())
        for a, b in zip(grads, whole_grads):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_a_model_whose_logits_are_more_than_its_head_keeps_the_whole_pass(model_path):
    from transformers import AutoModelForCausalLM

    from mathgym.agents.forward import forward_pass, head_split

    model = AutoModelForCausalLM.from_pretrained(str(model_path))
    plain = model.forward

    def capped(*args, **kwargs):  # logits soft-capped after the head, as some models do
        out = plain(*args, **kwargs)
        out.logits = 3.0 * torch.tanh(out.logits / 3.0)
        return out

    model.forward = capped
    assert head_split(model) is None
    ids, mask, _ = _rows(0)
    out = forward_pass(model, ids, mask, positions=mask)
    expected = torch.log_softmax(capped(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), -1)
    expected = expected.gather(-1, ids[:, 1:, None]).squeeze(-1)
    assert torch.allclose(out.logprobs[:, 1:][mask[:, 1:].bool()], expected[mask[:, 1:].bool()], atol=1e-5)


def _with_repeats(pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 5 rows of :func:`_rows` and copies of three of them (a group's samples that agree), interleaved."""
    ids, mask, groups = _rows(pad)
    order = torch.tensor([0, 1, 0, 2, 3, 1, 4, 0])
    return ids[order], mask[order], groups[order]


def _rows_run(model, call) -> tuple[object, list[int]]:
    """``call()`` and the number of rows of each pass of ``model``'s decoder it made."""
    sizes: list[int] = []
    hook = model.get_decoder().register_forward_pre_hook(lambda m, a, kw: sizes.append(len(kw["input_ids"])), with_kwargs=True)
    try:
        return call(), sizes
    finally:
        hook.remove()


@pytest.mark.parametrize("lora", [False, True])
def test_repeated_rows_run_once_with_the_outputs_and_gradients_of_every_copy(model_path, lora, monkeypatch):
    from mathgym.agents import forward
    from mathgym.agents.forward import forward_pass

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu", lora=LoraSettings(r=4, alpha=8, dropout=0.0) if lora else None)
    policy.model.train()
    ids, mask, groups = _with_repeats(policy.pad_token_id)
    weights = torch.linspace(0.5, 2.0, len(ids))[:, None]  # each copy its own weight in the loss

    def run(g):
        policy.model.zero_grad()
        out = forward_pass(policy.model, ids, mask, temperature=0.7, groups=g, positions=mask, entropy_grad=True)
        (((out.logprobs + 0.1 * out.entropy) * mask) * weights).sum().backward()
        return out, [p.grad.clone() for p in policy.trainable_parameters()]

    (_, _), sizes = _rows_run(policy.model, lambda: run(None))
    assert max(sizes) == 8  # without groups every row runs (an SFT batch keeps its last bits)
    for g in (groups, torch.zeros_like(groups)):  # groups that share a prefix, and one that shares none
        (once, grads_once), sizes = _rows_run(policy.model, lambda: run(g))
        assert max(sizes) == 5  # 8 rows, 5 distinct
        with monkeypatch.context() as patch:
            patch.setattr(forward, "repeated_rows", lambda *tensors: None)  # every row run, as before
            (every, grads_every), all_sizes = _rows_run(policy.model, lambda: run(g))
        assert max(all_sizes) == 8
        assert torch.allclose(once.logprobs, every.logprobs, atol=1e-5) and torch.allclose(once.entropy, every.entropy, atol=1e-5)
        for a, b in zip(grads_once, grads_every):  # the same sums, added in another order
            assert float((a - b).abs().max()) <= 1e-5 * float(b.abs().max())


def test_repeated_rows_each_run_where_the_pass_draws_dropout(tmp_path):
    from mathgym.agents.forward import forward_pass
    from tests.trainkit import build_dropout_model

    policy = LLMPolicy.from_pretrained(str(build_dropout_model(tmp_path / "model")), device="cpu")
    ids, mask, groups = _with_repeats(policy.pad_token_id)
    policy.model.train()  # each copy draws its own dropout: none may stand in for another
    run = lambda **kw: max(_rows_run(policy.model, lambda: forward_pass(policy.model, ids, mask, groups=groups, **kw))[1])  # noqa: E731
    assert policy.has_active_dropout and run() == 8
    policy.model.eval()  # no draw: copies run once
    assert run() == 5
    # rows with the same tokens but other wanted positions are not copies
    positions = mask.clone()
    positions[2, :3] = 0
    assert run(positions=positions) == 6
