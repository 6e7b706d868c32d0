"""The rows of ``POLICY_LOSSES`` beyond PPO's clip, against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.losses import clipped_policy_loss, policy_loss_fn  # noqa: E402


def test_dual_clip_bounds_the_loss_of_negative_advantages_by_c_times_abs_advantage():
    ratio = torch.tensor([[1.5, 4.0, 4.0, 0.5]])
    logp = torch.log(ratio).requires_grad_(True)
    adv = torch.tensor([[-1.0, -1.0, 1.0, -1.0]])
    loss, stats = policy_loss_fn("dual_clip")(logp, torch.zeros(1, 4), adv, torch.ones(1, 4), 0.2, 0.2, dual_clip_c=3.0)
    # r=1.5, A=-1: -min(-1.5, -1.2) = 1.5 (< c|A| = 3, kept, gradient -rA = 1.5)
    # r=4,   A=-1: -min(-4, -1.2) = 4 -> capped at 3 (no gradient)
    # r=4,   A=+1: -min(4, 1.2) = -1.2 (PPO's clip; the dual clip only acts on A < 0)
    # r=0.5, A=-1: -min(-0.5, -0.8) = 0.8 (PPO's clip below)
    assert loss.item() == pytest.approx((1.5 + 3.0 - 1.2 + 0.8) / 4)
    assert stats.clip_fraction.item() == pytest.approx(3 / 4)
    loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([1.5 / 4, 0.0, 0.0, 0.0])
    # the plain clip leaves the r=4, A=-1 token at 4
    plain, _ = clipped_policy_loss(logp, torch.zeros(1, 4), adv, torch.ones(1, 4), 0.2, 0.2)
    assert plain.item() == pytest.approx((1.5 + 4.0 - 1.2 + 0.8) / 4)


def test_gspo_takes_one_ratio_per_sequence_and_clips_it_as_a_whole():
    # sequence 0: log-ratios 0.4 and -0.2 -> mean 0.1 -> s0 = e^0.1 = 1.10517 (inside [0.8, 1.2])
    # sequence 1: log-ratio 0.5 on its one token (the second is padding) -> s1 = e^0.5 = 1.6487 -> clipped at 1.2
    old = torch.zeros(2, 2)
    logp = torch.tensor([[0.4, -0.2], [0.5, 9.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv = torch.tensor([1.0, 1.0])
    loss, stats = policy_loss_fn("gspo")(logp, old, adv, mask, 0.2, 0.2, "sequence_mean")
    s0 = math.exp(0.1)
    # sequence_mean: (mean(-s0, -s0) + (-1.2)) / 2
    assert loss.item() == pytest.approx((-s0 - 1.2) / 2, abs=1e-6)
    assert stats.ratio_mean.item() == pytest.approx((2 * s0 + math.exp(0.5)) / 3, abs=1e-5)
    assert stats.clip_fraction.item() == pytest.approx(1 / 3)
    loss.backward()
    # d/dlogp_t of -s0 * A / 2 (sequences), s0 = exp(mean of 2 log-ratios): -s0 / 2 / 2; the clipped sequence: 0
    assert logp.grad.flatten().tolist() == pytest.approx([-s0 / 4, -s0 / 4, 0.0, 0.0], abs=1e-6)
    # token-level clip drops token (0, 0) (e^0.4 = 1.49 > 1.2), which GSPO keeps inside its sequence
    logp2 = logp.detach().clone().requires_grad_(True)
    clipped_policy_loss(logp2, old, adv, mask, 0.2, 0.2, "sequence_mean")[0].backward()
    assert logp2.grad[0, 0].item() == 0.0 and logp2.grad[0, 1].item() != 0.0


def test_cispo_keeps_every_tokens_gradient_weighted_by_the_clipped_ratio():
    ratio = torch.tensor([[1.5, 0.5, 1.0]])
    logp = torch.log(ratio).requires_grad_(True)
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    loss, stats = policy_loss_fn("cispo")(logp, torch.zeros(1, 3), adv, torch.ones(1, 3), 0.2, 0.2)
    # weights sg(clip(r, 0.8, 1.2)) = 1.2, 0.8, 1.0; per token -w A: -1.2, -0.8, 1.0
    assert loss.item() == pytest.approx((-1.2 - 0.8 + 1.0) / 3)
    assert stats.clip_fraction.item() == pytest.approx(2 / 3)
    loss.backward()
    # gradient -w A / 3 on every token, the clipped ones included (PPO's clip gives 0 on token 0)
    assert logp.grad.tolist()[0] == pytest.approx([-1.2 / 3, -0.8 / 3, 1.0 / 3])


@pytest.mark.parametrize("name", ["clip", "dual_clip", "gspo", "cispo"])
def test_every_policy_loss_is_the_plain_policy_gradient_at_ratio_one(name):
    """On the first pass over a batch (old = current) every row's gradient is -A grad logp (token_mean)."""
    logp = torch.tensor([[-0.5, -1.0], [-2.0, -0.1]], requires_grad=True)
    adv, mask = torch.tensor([2.0, -1.0]), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    weights = torch.tensor([[1.0, 0.5], [2.0, 1.0]])
    loss, stats = policy_loss_fn(name)(logp, logp.detach(), adv, mask, 0.2, 0.28, "token_mean", None, weights)
    loss.backward()
    # -A * w / 3 tokens: [-2/3, -1/3], [2/3, 0 (masked)]
    assert logp.grad.flatten().tolist() == pytest.approx([-2 / 3, -1 / 3, 2 / 3, 0.0], abs=1e-6)
    assert stats.clip_fraction.item() == 0.0 and stats.ratio_mean.item() == pytest.approx(1.0)
