"""Value head on the shared trunk, separate critic, and LoRA sharing."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from mathgym.agents.value_head import ValueHead, ValueModel, hidden_size_of, logits_and_hidden  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402


def tiny_lm(seed: int = 0):
    config = transformers.Qwen2Config(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    return transformers.Qwen2ForCausalLM(config)


def batch():
    ids = torch.tensor([[1, 5, 7, 9, 3], [0, 0, 4, 6, 8]])
    return ids, (ids > 0).long()


def test_zero_init_head_starts_at_zero_and_shapes():
    model = tiny_lm()
    assert hidden_size_of(model) == 16
    value = ValueModel.for_policy(model, "shared")
    ids, mask = batch()
    logits, hidden = logits_and_hidden(model, ids, mask)
    values = value(ids, mask, policy_hidden=hidden)
    assert logits.shape == (2, 5, 32) and values.shape == (2, 5)
    assert torch.count_nonzero(values) == 0


def test_values_are_causal():
    model = tiny_lm()
    value = ValueModel.for_policy(model, "shared", init_std=0.1)
    ids, mask = batch()
    _, hidden = logits_and_hidden(model, ids, mask)
    changed = ids.clone()
    changed[0, 3] = 11
    _, hidden2 = logits_and_hidden(model, changed, mask)
    v1, v2 = value(ids, mask, hidden), value(changed, mask, hidden2)
    assert torch.allclose(v1[0, :3], v2[0, :3], atol=1e-6)
    assert not torch.allclose(v1[0, 3:], v2[0, 3:])


def test_shared_head_gradient_reaches_trunk_and_head():
    model = tiny_lm()
    value = ValueModel.for_policy(model, "shared", init_std=0.1)
    ids, mask = batch()
    _, hidden = logits_and_hidden(model, ids, mask)
    value(ids, mask, hidden).pow(2).sum().backward()
    assert value.head.summary.weight.grad is not None
    assert model.model.layers[0].mlp.up_proj.weight.grad is not None
    assert len(value.trainable_parameters()) == 2  # head only: the trunk is the policy's


def test_separate_critic_has_its_own_trunk():
    model = tiny_lm()
    critic = ValueModel.for_policy(model, "separate", init_std=0.1)
    before = [p.clone() for p in model.parameters()]
    opt = torch.optim.Adam(critic.trainable_parameters(), lr=1e-2)
    ids, mask = batch()
    target = torch.tensor([[0.0, 1.0, -1.0, 2.0, 0.5], [0.0, 0.0, 1.0, 1.0, -1.0]])
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = ((critic(ids, mask) - target) ** 2 * mask).sum() / mask.sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]  # the critic fits a target
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # the policy is untouched
    with pytest.raises(ConfigError):
        ValueModel("separate", ValueHead(16))
    with pytest.raises(ConfigError, match="value_model"):
        ValueModel("both", ValueHead(16))  # type: ignore[arg-type]


def test_shared_head_under_lora_trains_adapter_and_head_only():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(tiny_lm(), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    value = ValueModel.for_policy(model, "shared", init_std=0.1)
    assert hidden_size_of(model) == 16
    ids, mask = batch()
    _, hidden = logits_and_hidden(model, ids, mask)
    value(ids, mask, hidden).pow(2).sum().backward()
    base = model.base_model.model.model.layers[0].mlp.up_proj.weight
    assert base.grad is None and not base.requires_grad
    lora_grads = [p.grad for n, p in model.named_parameters() if "lora_" in n]
    assert lora_grads and any(g is not None and g.abs().sum() > 0 for g in lora_grads)
    assert value.head.summary.weight.grad is not None
