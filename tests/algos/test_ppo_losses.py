"""PPO losses against hand-computed numbers."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.ppo_losses import (  # noqa: E402
    clipped_policy_loss,
    clipped_value_loss,
    kl_estimate,
    kl_penalty_rewards,
    whiten,
)
from mathgym.errors import ConfigError  # noqa: E402


def test_policy_loss_both_clips_bind():
    # token 1: r=1.5, A=+1  -> max(-1.5, -1.2) = -1.2   (upper clip binds, no gradient)
    # token 2: r=0.5, A=-1  -> max(0.5, 0.8)   =  0.8   (lower clip binds, no gradient)
    # token 3: r=0.5, A=+2  -> max(-1.0, -1.6) = -1.0   (unclipped, pessimistic side)
    # token 4: masked out.
    ratios = torch.tensor([[1.5, 0.5, 0.5, 1.0]])
    old = torch.tensor([[-1.0, -2.0, -0.5, -1.0]])
    logp = (old + ratios.log()).requires_grad_(True)
    adv = torch.tensor([[1.0, -1.0, 2.0, 3.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, stats = clipped_policy_loss(logp, old, adv, mask, eps_low=0.2)
    assert loss.item() == pytest.approx((-1.2 + 0.8 - 1.0) / 3)
    assert float(stats.clip_fraction) == pytest.approx(2 / 3)
    loss.backward()
    # d/dlogp of -r*A = -r*A; only token 3 has a gradient: -(0.5 * 2) / 3.
    assert logp.grad[0].tolist() == pytest.approx([0.0, 0.0, -1.0 / 3, 0.0])
    # approx KL = mean(r - 1 - log r) over the 3 tokens.
    expected_kl = sum(r - 1 - math.log(r) for r in (1.5, 0.5, 0.5)) / 3
    assert float(stats.approx_kl) == pytest.approx(expected_kl, rel=1e-5)


def test_policy_loss_clip_higher():
    # r=1.25, A=1: eps_high=0.3 leaves it unclipped, eps=0.2 clips it at 1.2.
    old = torch.zeros(1, 1)
    logp = old + math.log(1.25)
    adv = torch.ones(1, 1)
    loss_sym, _ = clipped_policy_loss(logp, old, adv, torch.ones(1, 1), eps_low=0.2)
    loss_high, _ = clipped_policy_loss(logp, old, adv, torch.ones(1, 1), eps_low=0.2, eps_high=0.3)
    assert loss_sym.item() == pytest.approx(-1.2)
    assert loss_high.item() == pytest.approx(-1.25)


def test_value_loss_clipped_by_hand():
    values = torch.tensor([[1.0, 0.0, 0.5, 1.0]], requires_grad=True)
    old = torch.tensor([[0.5, 0.1, 0.5, 0.5]])
    returns = torch.tensor([[2.0, -1.0, 0.0, 0.6]])
    # 1: unclipped (1-2)^2 = 1, clipped V = 0.7 -> 1.69; max 1.69 (clipped, no gradient)
    # 2: unclipped 1, clipped V = 0.0 (within range) -> 1; max 1
    # 3: 0.25 both
    # 4: unclipped 0.16, clipped V = 0.7 -> 0.01; max 0.16
    loss, stats = clipped_value_loss(values, old, returns, torch.ones(1, 4), clip_range=0.2)
    assert loss.item() == pytest.approx(0.5 * (1.69 + 1 + 0.25 + 0.16) / 4)
    assert float(stats.clip_fraction) == pytest.approx(0.25)
    loss.backward()
    # d/dV 0.5*(V-R)^2/4 = (V-R)/4 on unclipped tokens; 0 on token 1.
    assert values.grad[0].tolist() == pytest.approx([0.0, 1.0 / 4, 0.5 / 4, 0.4 / 4])


def test_value_loss_unclipped_is_half_mse():
    values, returns = torch.tensor([[1.0, 3.0]]), torch.tensor([[0.0, 1.0]])
    loss, stats = clipped_value_loss(values, values + 5, returns, torch.ones(1, 2), clip_range=None)
    assert loss.item() == pytest.approx(0.5 * (1 + 4) / 2)
    assert float(stats.clip_fraction) == 0.0


def test_kl_estimators():
    logp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-2.0, -1.0])
    # d = ref - logp = (-1, 1)
    assert kl_estimate(logp, ref, "k1").tolist() == pytest.approx([1.0, -1.0])
    assert kl_estimate(logp, ref, "k2").tolist() == pytest.approx([0.5, 0.5])
    assert kl_estimate(logp, ref, "k3").tolist() == pytest.approx([math.exp(-1), math.e - 2])
    assert kl_estimate(logp, logp, "k3").tolist() == [0.0, 0.0]
    with pytest.raises(ConfigError, match="kl_estimator"):
        kl_estimate(logp, ref, "k4")  # type: ignore[arg-type]


def test_kl_penalty_rewards_only_on_mask():
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    logp, ref = torch.tensor([[-1.0, -1.0, -1.0]]), torch.tensor([[-2.0, -2.0, -2.0]])
    out, kl = kl_penalty_rewards(rewards, logp, ref, torch.tensor([[0.0, 1.0, 1.0]]), coef=0.1, estimator="k1")
    assert out.tolist() == [pytest.approx([0.0, -0.1, 0.9])]
    assert kl.tolist() == [[0.0, 1.0, 1.0]]


def test_whiten():
    x = torch.tensor([1.0, 2.0, 3.0, 100.0])
    mask = torch.tensor([1.0, 1.0, 1.0, 0.0])
    s = math.sqrt(1.5)  # 1 / std, std = sqrt(2/3)
    assert whiten(x, mask).tolist() == pytest.approx([-s, 0.0, s, 0.0], rel=1e-5)
    assert whiten(x, mask, shift_mean=False).tolist() == pytest.approx([2 - s, 2.0, 2 + s, 0.0], rel=1e-5)


def test_token_level_advantages_and_micro_batch_norm():
    # Two micro-batches with the full batch's normaliser add up to the full-batch loss.
    from mathgym.algos.losses import batch_normalizer

    logp = torch.tensor([[-1.0, -0.5, 0.0], [-2.0, -1.0, -0.3]])
    old = logp - 0.1
    adv = torch.tensor([[1.0, -2.0, 0.5], [0.3, 0.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    full, _ = clipped_policy_loss(logp, old, adv, mask)
    norm = batch_normalizer(mask, 3)
    parts = [clipped_policy_loss(logp[i : i + 1], old[i : i + 1], adv[i : i + 1], mask[i : i + 1], norm=norm)[0] for i in range(2)]
    assert (parts[0] + parts[1]).item() == pytest.approx(full.item())
