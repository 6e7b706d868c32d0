"""PPO losses as pure functions of tensors, each returning ``(loss, stats)``.

All token tensors are ``(B, T)`` and come with a ``mask`` (1 on the tokens that count);
the losses average over the masked tokens (``token_mean``) unless told otherwise.

Example:
    >>> import torch
    >>> logp = torch.zeros(1, 2)
    >>> loss, stats = clipped_policy_loss(logp, logp, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
    >>> float(loss)
    0.0
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from mathgym.algos.losses import LossAggregation, Normalizer, aggregate_loss, clipped_surrogate, masked_mean
from mathgym.errors import ConfigError

KLEstimator = Literal["k1", "k2", "k3"]


def masked_var(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Population variance of the masked entries of ``x``."""
    mean = masked_mean(x, mask)
    return masked_mean((x - mean) ** 2, mask)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``1 - Var(returns - values) / Var(returns)`` over the masked entries (1: perfect, 0: a constant)."""
    return 1.0 - masked_var(returns - values, mask) / masked_var(returns, mask).clamp(min=1e-8)


def whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """Normalise the masked entries of ``x`` to unit variance (and zero mean if ``shift_mean``).

    Masked-out entries come back as 0. With ``shift_mean=False`` the mean is kept, which is
    what one wants for returns or rewards whose sign matters.
    """
    mean, var = masked_mean(x, mask), masked_var(x, mask)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * mask.to(x.dtype)


def kl_estimate(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: KLEstimator = "k3") -> torch.Tensor:
    """Per-token estimate of ``KL(pi || pi_ref)`` from log-probs of tokens sampled from ``pi``.

    With ``d = log pi_ref - log pi`` (Schulman, "Approximating KL divergence", 2020):
    ``k1 = -d`` (unbiased, can be negative), ``k2 = d**2 / 2`` (biased, low variance),
    ``k3 = exp(d) - 1 - d`` (unbiased, always >= 0).
    """
    d = ref_logprobs - logprobs
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d**2
    if estimator == "k3":
        return torch.expm1(d) - d
    raise ConfigError(f"kl_estimator={estimator!r} is not allowed; choose 'k1', 'k2' or 'k3'.")


class PolicyLossStats(NamedTuple):
    """Diagnostics of :func:`clipped_policy_loss` (all detached scalars)."""

    clip_fraction: torch.Tensor
    """Share of tokens whose clipped term was the one used (the gradient is zero there)."""
    approx_kl: torch.Tensor
    """``k3`` estimate of ``KL(pi_old || pi)`` over the tokens, for early stopping."""
    ratio_mean: torch.Tensor
    ratio_max: torch.Tensor


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    aggregation: LossAggregation = "token_mean",
    norm: Normalizer | None = None,
) -> tuple[torch.Tensor, PolicyLossStats]:
    """PPO's clipped surrogate: ``-min(r * A, clip(r, 1 - eps, 1 + eps_high) * A)``.

    ``r = exp(logprobs - old_logprobs)``. The clip binds above (``r > 1 + eps_high``) for
    positive advantages and below (``r < 1 - eps``) for negative ones.

    Args:
        logprobs: ``(B, T)`` log-probs of the sampled tokens under the current policy.
        old_logprobs: ``(B, T)`` the same under the policy that sampled them.
        advantages: ``(B, T)`` advantage of each token.
        mask: ``(B, T)`` 1 on action tokens.
        clip_eps: Lower clip range ``eps``.
        clip_eps_high: Upper clip range (default ``clip_eps``; larger values are DAPO's clip-higher).
        aggregation: How the per-token losses become a scalar (:func:`~mathgym.algos.losses.aggregate_loss`).
        norm: Full-batch denominators, so micro-batches add up to the full-batch loss.

    Returns:
        ``(loss, stats)``.
    """
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    surrogate = clipped_surrogate(logprobs, old_logprobs.detach(), advantages, clip_eps, eps_high)
    loss = aggregate_loss(surrogate.loss, mask, aggregation, norm)
    with torch.no_grad():
        log_ratio = surrogate.ratio.log()
        stats = PolicyLossStats(
            clip_fraction=masked_mean(surrogate.clipped.to(logprobs.dtype), mask),
            approx_kl=masked_mean(torch.expm1(log_ratio) - log_ratio, mask),
            ratio_mean=masked_mean(surrogate.ratio, mask),
            ratio_max=(surrogate.ratio * mask).max() if mask.any() else logprobs.new_zeros(()),
        )
    return loss, stats


class ValueLossStats(NamedTuple):
    """Diagnostics of :func:`clipped_value_loss` (detached scalars)."""

    clip_fraction: torch.Tensor
    """Share of tokens whose clipped error was the larger one."""
    value_mean: torch.Tensor
    explained_variance: torch.Tensor
    """``1 - Var(returns - values) / Var(returns)``: 1 is perfect, 0 is as good as a constant."""


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float | None = 0.2,
    aggregation: LossAggregation = "token_mean",
    norm: Normalizer | None = None,
) -> tuple[torch.Tensor, ValueLossStats]:
    """``0.5 * max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2)``; plain MSE/2 if ``clip_range`` is None.

    Args:
        values: ``(B, T)`` current value predictions.
        old_values: ``(B, T)`` predictions at rollout time.
        returns: ``(B, T)`` value targets.
        mask: ``(B, T)`` 1 where the value is trained.
        clip_range: ``c``; ``None`` disables clipping.
        aggregation: See :func:`~mathgym.algos.losses.aggregate_loss`.
        norm: Full-batch denominators of the value mask.

    Returns:
        ``(loss, stats)``.
    """
    unclipped = (values - returns) ** 2
    if clip_range is None:
        per_token, clipped = unclipped, unclipped
    else:
        old_values = old_values.detach()
        clipped_values = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
        clipped = (clipped_values - returns) ** 2
        per_token = torch.maximum(unclipped, clipped)
    loss = 0.5 * aggregate_loss(per_token, mask, aggregation, norm)
    with torch.no_grad():
        stats = ValueLossStats(
            clip_fraction=masked_mean((clipped > unclipped).to(values.dtype), mask),
            value_mean=masked_mean(values, mask),
            explained_variance=explained_variance(values, returns, mask),
        )
    return loss, stats


def kl_penalty_rewards(
    token_rewards: torch.Tensor,
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    mask: torch.Tensor,
    coef: float,
    estimator: KLEstimator = "k1",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Subtract ``coef * KL`` from each action token's reward (KL as a reward penalty).

    Returns:
        ``(rewards, kl)``: penalised ``(B, T)`` rewards and the per-token KL estimate (0 off-mask).
    """
    kl = kl_estimate(logprobs.detach(), ref_logprobs.detach(), estimator) * mask.to(logprobs.dtype)
    return token_rewards - coef * kl, kl
