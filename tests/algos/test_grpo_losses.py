"""GRPO building blocks against hand-computed numbers."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.advantages import group_normalized_advantages  # noqa: E402
from mathgym.algos.grpo import grpo_loss  # noqa: E402
from mathgym.algos.losses import Normalizer, aggregate_loss, clipped_surrogate, k3_kl, masked_mean  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402


def test_k3_kl_matches_formula_and_is_zero_at_equality():
    logp = torch.tensor([0.0, math.log(0.5), -2.0])
    ref = torch.tensor([-1.0, math.log(0.25), -2.0])
    # r = ref - logp: -1, ln(0.5), 0  ->  e^r - r - 1
    expected = torch.tensor([math.exp(-1) + 1 - 1, 0.5 - math.log(0.5) - 1, 0.0])
    assert torch.allclose(k3_kl(logp, ref), expected, atol=1e-6)
    assert k3_kl(logp, ref)[0].item() == pytest.approx(0.367879, abs=1e-5)


def test_clipped_surrogate_four_cases_with_asymmetric_eps():
    # ratios 1.5, 1.5, 0.5, 0.5 with advantages +1, -1, -1, +1; eps_low 0.2, eps_high 0.3
    logp = torch.log(torch.tensor([[1.5, 1.5, 0.5, 0.5]]))
    old = torch.zeros_like(logp)
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0]])
    out = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.3)
    # +1: min(1.5, 1.3) = 1.3 -> -1.3 (clipped); -1: min(-1.5, -1.3) = -1.5 -> 1.5 (not clipped)
    # -1 at 0.5: min(-0.5, -0.8) = -0.8 -> 0.8 (clipped); +1 at 0.5: min(0.5, 0.8) = 0.5 -> -0.5
    assert torch.allclose(out.loss, torch.tensor([[-1.3, 1.5, 0.8, -0.5]]), atol=1e-6)
    assert out.clipped.tolist() == [[True, False, True, False]]
    assert torch.allclose(out.ratio, torch.tensor([[1.5, 1.5, 0.5, 0.5]]))


def test_clipped_surrogate_gradient_is_zero_on_clipped_tokens():
    logp = torch.log(torch.tensor([[1.5, 0.9]])).requires_grad_(True)
    out = clipped_surrogate(logp, torch.zeros(1, 2), torch.tensor([1.0]), 0.2, 0.2)
    out.loss.sum().backward()
    # clipped token: no gradient; unclipped: d(-r)/dlogp = -r = -0.9
    assert logp.grad.tolist()[0] == pytest.approx([0.0, -0.9], abs=1e-6)


PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    "mode, expected",
    [("token_mean", 10 / 4), ("sequence_mean", (6 / 3 + 4 / 1) / 2), ("dr_grpo", 10 / (2 * 3))],
)
def test_loss_aggregations(mode, expected):
    assert aggregate_loss(PER_TOKEN, MASK, mode).item() == pytest.approx(expected)


def test_dr_grpo_uses_the_given_constant_and_micro_batches_sum_to_the_full_batch():
    norm = Normalizer(num_tokens=4.0, num_sequences=2.0, max_tokens=5.0)
    assert aggregate_loss(PER_TOKEN, MASK, "dr_grpo", norm).item() == pytest.approx(10 / 10)
    for mode in ("token_mean", "sequence_mean", "dr_grpo"):
        full = aggregate_loss(PER_TOKEN, MASK, mode, norm)
        parts = sum(aggregate_loss(PER_TOKEN[i : i + 1], MASK[i : i + 1], mode, norm) for i in range(2))
        assert parts.item() == pytest.approx(full.item())


def test_unknown_aggregation_names_the_field_and_choices():
    with pytest.raises(ConfigError, match="loss_aggregation='mean'.*token_mean"):
        aggregate_loss(PER_TOKEN, MASK, "mean")


def test_group_advantages_three_scalings():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    groups = torch.tensor([0, 0, 1, 1])
    assert group_normalized_advantages(rewards, groups, "none").tolist() == [0.5, -0.5, 0.0, 0.0]
    # group std of [1, 0] (unbiased) = 1/sqrt(2); group [0, 0] has std 0 -> advantage 0
    grp = group_normalized_advantages(rewards, groups, "group", eps=0.0 + 1e-12)
    assert grp.tolist() == pytest.approx([math.sqrt(0.5), -math.sqrt(0.5), 0.0, 0.0], abs=1e-6)
    # batch std of [1, 0, 0, 0] (unbiased) = sqrt(0.75 / 3) = 0.5
    assert group_normalized_advantages(rewards, groups, "batch", eps=0.0).tolist() == pytest.approx([1.0, -1.0, 0.0, 0.0])
    with pytest.raises(ConfigError, match="scale_rewards"):
        group_normalized_advantages(rewards, groups, "std")


def test_group_advantages_do_not_need_contiguous_groups():
    rewards = torch.tensor([3.0, 1.0, 1.0, 5.0])
    groups = torch.tensor([7, 2, 7, 2])  # group 7: [3, 1] mean 2; group 2: [1, 5] mean 3
    assert group_normalized_advantages(rewards, groups, "none").tolist() == [1.0, -2.0, -1.0, 2.0]


def test_grpo_loss_combines_surrogate_and_kl():
    logp = torch.log(torch.tensor([[1.0, 1.5], [1.0, 1.0]]))
    old = torch.zeros(2, 2)
    ref = torch.tensor([[-1.0, 0.0], [0.0, 0.0]])
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, stats = grpo_loss(logp, old, adv, mask, ref_logprobs=ref, beta=0.5, eps_low=0.2, eps_high=0.2)
    # surrogate: [-1, -1.2], [1, -]; kl: token (0,0) r=-1 -> e^-1; token (0,1) r=-ln1.5 -> 1/1.5 + ln1.5 - 1
    kl01 = 1 / 1.5 + math.log(1.5) - 1
    expected = (-1 + 0.5 * math.exp(-1) + -1.2 + 0.5 * kl01 + 1) / 3
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats["clip_fraction"].item() == pytest.approx(1 / 3)
    assert stats["kl"].item() == pytest.approx((math.exp(-1) + kl01) / 3, abs=1e-6)
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_loss(logp, old, adv, mask, beta=0.1)


def test_masked_mean_of_empty_mask_is_zero():
    assert masked_mean(torch.ones(2, 2), torch.zeros(2, 2)).item() == 0.0


def test_grpo_loss_kl_estimators_and_entropy_bonus_by_hand():
    logp = torch.tensor([[-0.5, -1.0]])
    ref = torch.tensor([[-1.0, -1.0]])
    entropy = torch.tensor([[0.8, 0.4]])
    common = dict(ref_logprobs=ref, beta=0.5, entropy=entropy, entropy_coef=0.1)
    # ratio 1, A = 1: policy loss -1 per token; entropy bonus 0.1 * mean(0.8, 0.4) = 0.06
    # k2: 0.5 * (ref - logp)^2 = 0.125, 0 -> mean 0.0625, * 0.5 = 0.03125
    loss, _ = grpo_loss(logp, logp, torch.tensor([1.0]), torch.ones(1, 2), kl_estimator="k2", **common)
    assert loss.item() == pytest.approx(-1 + 0.03125 - 0.06)
    # k1: logp - ref = 0.5, 0 -> mean 0.25, * 0.5 = 0.125
    loss, _ = grpo_loss(logp, logp, torch.tensor([1.0]), torch.ones(1, 2), kl_estimator="k1", **common)
    assert loss.item() == pytest.approx(-1 + 0.125 - 0.06)
    with pytest.raises(ValueError, match="entropy"):
        grpo_loss(logp, logp, torch.tensor([1.0]), torch.ones(1, 2), entropy_coef=0.1)
