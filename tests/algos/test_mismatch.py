"""Sampler/learner mismatch correction: the weights by hand, and on a small categorical policy
sampled at another temperature the corrected policy gradient is the on-policy one in expectation."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.losses import clipped_policy_loss  # noqa: E402
from mathgym.algos.mismatch import mismatch_weights  # noqa: E402

# rho = pi / mu per token: row 0: 3, 0.5 and a padding token (ratio 100, off the mask); row 1: 0.25, 1.5
RHO = torch.tensor([[3.0, 0.5, 100.0], [0.25, 1.5, 1.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
SAMPLER = torch.full((2, 3), -1.0)


@pytest.mark.parametrize(
    "mode, weights, capped",
    [
        # min(rho, 2): only 3 -> 2
        ("tis", [[2.0, 0.5, 1.0], [0.25, 1.5, 1.0]], 1 / 4),
        # rho inside [1/2, 2] (0.5 is inside), else 0: 3 and 0.25 masked
        ("token_mask", [[0.0, 0.5, 1.0], [0.0, 1.5, 1.0]], 2 / 4),
        # sequence ratios 3 * 0.5 = 1.5 and 0.25 * 1.5 = 0.375, both under the cap 2
        ("seq_tis", [[1.5, 1.5, 1.0], [0.375, 0.375, 1.0]], 0.0),
        # 0.375 < 1/2: the whole second sequence masked (its 2 tokens)
        ("seq_mask", [[1.5, 1.5, 1.0], [0.0, 0.0, 1.0]], 2 / 4),
        ("none", [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], 0.0),
    ],
)
def test_weights_of_each_mode_by_hand(mode, weights, capped):
    out = mismatch_weights(SAMPLER + torch.log(RHO), SAMPLER, MASK, mode, cap=2.0)
    assert out.weights.flatten().tolist() == pytest.approx(torch.tensor(weights).flatten().tolist())
    on_mask = [w for row in weights for w in row[:2]]
    assert out.stats["rollout/is_weight_mean"] == pytest.approx(sum(on_mask) / 4)
    assert out.stats["rollout/is_weight_max"] == pytest.approx(max(on_mask))
    assert out.stats["rollout/is_capped_fraction"] == pytest.approx(capped)


# A policy over 4 tokens; the learner scores at temperature 1, the sampler draws at 1.5
# (token ratios pi/mu between 0.62 and 1.21: inside the caps below, so the weights are exact).
LOGITS = torch.tensor([1.0, 0.3, -0.2, -1.0])
VALUE = torch.tensor([1.0, 0.0, 2.0, -1.0])  # reward of a token


def reward(seqs: torch.Tensor) -> torch.Tensor:
    """A reward that is not a sum over tokens: the first token's value times (1 + the last's)."""
    return VALUE[seqs[:, 0]] * (1.0 + VALUE[seqs[:, -1]])


def on_policy_gradient(length: int) -> torch.Tensor:
    """Exact grad of J = E_pi[R(y)] over every sequence of ``length`` tokens, by enumeration."""
    theta = LOGITS.clone().requires_grad_(True)
    seqs = torch.tensor(list(itertools.product(range(4), repeat=length)))
    logp = torch.log_softmax(theta, 0)[seqs].sum(-1)
    (torch.exp(logp) * reward(seqs)).sum().backward()
    return theta.grad


def estimated_gradient(length: int, mode: str, cap: float, n: int = 100_000) -> tuple[torch.Tensor, float]:
    """The policy loss's gradient on ``n`` sequences drawn at temperature 1.5, weighted by ``mode``."""
    gen = torch.Generator().manual_seed(0)
    mu = torch.softmax(LOGITS / 1.5, 0)
    seqs = torch.multinomial(mu, n * length, replacement=True, generator=gen).view(n, length)
    theta = LOGITS.clone().requires_grad_(True)
    logp = torch.log_softmax(theta, 0)[seqs]  # (B, T)
    mask = torch.ones(n, length)
    weights = mismatch_weights(logp.detach(), torch.log(mu)[seqs], mask, mode, cap)
    # first pass over the batch (old = current): the gradient is -sum_t w A grad logp_t / (n * length)
    loss, _ = clipped_policy_loss(logp, logp.detach(), reward(seqs), mask, weights=weights.weights)
    loss.backward()
    return -theta.grad * length, weights.stats["rollout/is_capped_fraction"]


def relative_error(estimate: torch.Tensor, exact: torch.Tensor) -> float:
    return float((estimate - exact).norm() / exact.norm())


@pytest.mark.parametrize("mode, length, cap", [("tis", 1, 2.0), ("token_mask", 1, 2.0), ("seq_tis", 3, 5.0), ("seq_mask", 3, 5.0)])
def test_corrected_gradient_matches_the_on_policy_gradient_and_the_uncorrected_one_does_not(mode, length, cap):
    # token-level weights are exact for one token; over several tokens of a sequence-level reward
    # only the sequence's ratio (the product) is, hence one token for tis/token_mask and three for seq_*.
    exact = on_policy_gradient(length)
    corrected, capped = estimated_gradient(length, mode, cap)
    uncorrected, _ = estimated_gradient(length, "none", cap)
    assert capped == 0.0  # the caps do not bind here: no truncation bias
    assert relative_error(corrected, exact) < 0.03
    assert relative_error(uncorrected, exact) > 0.15
