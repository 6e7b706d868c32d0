"""Policy-gradient losses and estimators as pure functions of tensors, shared by GRPO and PPO.

Shapes: ``B`` episodes, ``T`` tokens; ``mask`` is the ``(B, T)`` float loss mask. Every variant
is a row of a table keyed by its option's choices (:mod:`mathgym.algos.choices`):
:data:`AGGREGATIONS` (``loss_aggregation``), :data:`KL_ESTIMATORS` (``kl_estimator``),
:data:`POLICY_LOSSES` (``policy_loss``: per-token objectives; :func:`policy_loss` does what they
share, and hands each the options it reads). A new variant is a small function and a row.

Example:
    >>> logp = torch.zeros(1, 2)
    >>> loss, stats = clipped_policy_loss(logp, logp, torch.tensor([[1.0, -1.0]]), torch.ones(1, 2))
    >>> float(loss)
    0.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch

from mathgym.algos.choices import POLICY_LOSS_INPUTS, KLEstimator, LossAggregation, PolicyLoss
from mathgym.options import pick, select


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (0 when the mask is empty)."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


# -- aggregation: per-token losses -> a scalar ---------------------------------------------------


class Normalizer(NamedTuple):
    """Denominators of the loss aggregations, computed once over the *whole* batch so that
    micro-batches with gradient accumulation give exactly the full-batch gradient."""

    num_tokens: float  # masked tokens in the full batch
    num_sequences: float  # episodes in the full batch
    max_tokens: float  # Dr. GRPO's constant (max completion length)


def batch_normalizer(mask: torch.Tensor, max_tokens: int) -> Normalizer:
    """The :class:`Normalizer` of a full batch's ``(B, T)`` loss mask."""
    return Normalizer(float(mask.sum().clamp(min=1.0)), float(max(mask.shape[0], 1)), float(max_tokens))


def token_mean(per_token: torch.Tensor, mask: torch.Tensor, norm: Normalizer) -> torch.Tensor:
    """Sum over every masked token / number of masked tokens (DAPO)."""
    return (per_token * mask).sum() / norm.num_tokens


def sequence_mean(per_token: torch.Tensor, mask: torch.Tensor, norm: Normalizer) -> torch.Tensor:
    """Mean over tokens within each sequence, then over sequences (the GRPO paper)."""
    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return per_seq.sum() / norm.num_sequences


def dr_grpo(per_token: torch.Tensor, mask: torch.Tensor, norm: Normalizer) -> torch.Tensor:
    """Sum / (sequences × a constant max length): no length bias (Dr. GRPO, Liu et al. 2025)."""
    return (per_token * mask).sum() / (norm.num_sequences * norm.max_tokens)


#: ``loss_aggregation`` choices -> ``(per_token, mask, norm) -> scalar``.
AGGREGATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, Normalizer], torch.Tensor]] = {
    "token_mean": token_mean, "sequence_mean": sequence_mean, "dr_grpo": dr_grpo,
}


def aggregate_loss(
    per_token: torch.Tensor, mask: torch.Tensor, mode: LossAggregation, norm: Normalizer | None = None
) -> torch.Tensor:
    """Reduce a ``(B, T)`` per-token loss to a scalar with the :data:`AGGREGATIONS` row ``mode``.

    Args:
        per_token: ``(B, T)`` loss per token.
        mask: ``(B, T)`` float mask.
        mode: ``token_mean``, ``sequence_mean`` or ``dr_grpo``.
        norm: Full-batch denominators (default: those of this batch, ``max_tokens = T``).
    """
    reduce = pick(AGGREGATIONS, "loss_aggregation", mode)
    return reduce(per_token, mask, norm or batch_normalizer(mask, mask.shape[1]))


# -- KL to a reference -----------------------------------------------------------------------------


def k1_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """``log pi - log pi_ref``: unbiased, can be negative."""
    return logprobs - ref_logprobs


def k2_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """``(log pi_ref - log pi)^2 / 2``: biased, low variance."""
    return 0.5 * (ref_logprobs - logprobs) ** 2


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """``exp(d) - 1 - d`` with ``d = log pi_ref - log pi``: unbiased and never negative.

    Per-token estimators of ``KL(pi || pi_ref)`` from tokens sampled from ``pi`` (Schulman,
    "Approximating KL divergence", 2020).

    Example:
        >>> k3_kl(torch.tensor([0.0]), torch.tensor([-1.0]))   # e^-1 + 1 - 1
        tensor([0.3679])
    """
    d = ref_logprobs - logprobs
    return torch.expm1(d) - d


#: ``kl_estimator`` choices -> ``(logprobs, ref_logprobs) -> (B, T)`` per-token KL.
KL_ESTIMATORS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "k1": k1_kl, "k2": k2_kl, "k3": k3_kl,
}


def kl_estimate(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: KLEstimator = "k3") -> torch.Tensor:
    """Per-token estimate of ``KL(pi || pi_ref)`` with the :data:`KL_ESTIMATORS` row ``estimator``."""
    return pick(KL_ESTIMATORS, "kl_estimator", estimator)(logprobs, ref_logprobs)


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


# -- the policy's surrogate loss ---------------------------------------------------------------------


class SurrogateOutput(NamedTuple):
    """Per-token clipped surrogate loss and which tokens were clipped."""

    loss: torch.Tensor  # (B, T)
    clipped: torch.Tensor  # (B, T) bool: the clipped branch was the active one
    ratio: torch.Tensor  # (B, T)


def ratio_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float) -> SurrogateOutput:
    """``-min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)`` of a ``(B, T)`` ratio and ``(B, 1)``
    or ``(B, T)`` advantages."""
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    return SurrogateOutput(-torch.minimum(unclipped, clipped), clipped < unclipped, ratio)


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> SurrogateOutput:
    """PPO's clipped objective, negated (a loss), with separate low/high clip ranges.

    ``loss = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)``, ``ratio = exp(logprobs - old_logprobs)``.

    Args:
        logprobs: ``(B, T)`` current log-probs (with grad).
        old_logprobs: ``(B, T)`` log-probs of the policy the ratio is taken against.
        advantages: ``(B,)`` per episode or ``(B, T)`` per token.
        eps_low: Lower clip range (ratio floor ``1 - eps_low``).
        eps_high: Upper clip range (ratio ceiling ``1 + eps_high``; DAPO's clip-higher).
    """
    return ratio_surrogate(torch.exp(logprobs - old_logprobs), per_token(advantages), eps_low, eps_high)


def per_token(advantages: torch.Tensor) -> torch.Tensor:
    """``(B, 1)`` per-episode advantages (from ``(B,)``), or ``(B, T)`` per-token ones as they are."""
    return advantages[:, None] if advantages.dim() == 1 else advantages


# Each row of POLICY_LOSSES is a per-token objective of the token log-ratio ``log pi - log pi_old``
# (``(B, T)``, gradient through ``log pi``) and the advantages (``(B, 1)`` or ``(B, T)``), plus the
# inputs its row of POLICY_LOSS_INPUTS names, as keyword arguments. What every row shares (the
# ratio, the aggregation, the statistics) is :func:`policy_loss`'s.


def clip_objective(log_ratio: torch.Tensor, advantages: torch.Tensor, *, eps_low: float, eps_high: float) -> SurrogateOutput:
    """``clip``: PPO's clipped surrogate (:func:`ratio_surrogate`). The clip binds above
    (``r > 1 + eps_high``) for positive advantages and below (``r < 1 - eps_low``) for negative ones."""
    return ratio_surrogate(torch.exp(log_ratio), advantages, eps_low, eps_high)


def dual_clip_objective(
    log_ratio: torch.Tensor, advantages: torch.Tensor, *, eps_low: float, eps_high: float, dual_clip_c: float
) -> SurrogateOutput:
    """``dual_clip``: dual-clip PPO (Ye et al. 2020, "Mastering Complex Control in MOBA Games with
    Deep RL"): the ``clip`` loss, and for a negative advantage at most ``c * |A|``.

    With ``A < 0`` a large ratio makes PPO's loss ``-r A`` grow without bound; the dual clip caps it:
    ``loss = min(-min(r A, clip(r) A), -c A)`` with ``c = dual_clip_c > 1`` (no gradient where the
    cap binds; those tokens count as clipped).
    """
    surrogate = ratio_surrogate(torch.exp(log_ratio), advantages, eps_low, eps_high)
    cap = (-dual_clip_c * advantages).expand_as(surrogate.loss)
    capped = (advantages < 0) & (surrogate.loss > cap)
    return SurrogateOutput(torch.where(capped, cap, surrogate.loss), surrogate.clipped | capped, surrogate.ratio)


def sequence_log_ratio(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(B,)`` mean over each sequence's masked tokens of the ``(B, T)`` ``log_ratio`` (0 for an empty row)."""
    return (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def gspo_objective(
    log_ratio: torch.Tensor, advantages: torch.Tensor, *, mask: torch.Tensor, eps_low: float, eps_high: float
) -> SurrogateOutput:
    """``gspo``: GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"): one ratio per
    sequence, clipped at the sequence level.

    ``s_i = exp(mean_t (logp_t - logp_old_t))`` over sequence ``i``'s tokens (``mask``). Each token
    carries ``s_it = sg(s_i) * exp(logp_t - sg(logp_t))`` (GSPO-token: its value is ``s_i``, its
    gradient ``s_i * grad logp_t``), in PPO's clipped surrogate with ``clip(s_it, 1 - eps_low, 1 + eps_high)``.
    With one advantage per sequence this is GSPO's gradient under any aggregation;
    ``sequence_mean`` is the paper's objective, whose clip ranges are much smaller than the
    token-level ones (3e-4 / 4e-4).
    """
    sequence = sequence_log_ratio(log_ratio.detach(), mask)  # (B,)
    token_log_ratio = sequence[:, None] + (log_ratio - log_ratio.detach())  # value: log s_i; gradient: grad logp_t
    return ratio_surrogate(torch.exp(token_log_ratio), advantages, eps_low, eps_high)


def cispo_objective(log_ratio: torch.Tensor, advantages: torch.Tensor, *, eps_low: float, eps_high: float) -> SurrogateOutput:
    """``cispo``: CISPO (MiniMax-M1, 2025): the clipped importance weight, without gradient, times the
    policy gradient, on every token.

    ``loss_t = -sg(clip(r_t, 1 - eps_low, 1 + eps_high)) * A * exp(logp_t - sg(logp_t))``: the
    gradient is the paper's ``-sg(clip(r)) A grad logp_t``, and the value ``-clip(r) A`` reads
    like the ``clip`` loss. Unlike PPO's clip, no token loses its gradient; the clipped tokens are
    those whose weight was clipped.
    """
    ratio = torch.exp(log_ratio.detach())
    clipped_ratio = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    loss = -clipped_ratio * advantages * torch.exp(log_ratio - log_ratio.detach())
    return SurrogateOutput(loss, clipped_ratio != ratio, ratio)


#: ``policy_loss`` choices -> ``(log_ratio, advantages, **inputs) -> SurrogateOutput`` (per token); the
#: keyword inputs of each row are :data:`~mathgym.algos.choices.POLICY_LOSS_INPUTS`'s.
POLICY_LOSSES: dict[str, Callable[..., SurrogateOutput]] = {
    "clip": clip_objective, "dual_clip": dual_clip_objective, "gspo": gspo_objective, "cispo": cispo_objective,
}


class PolicyLossStats(NamedTuple):
    """Diagnostics of a policy loss (all detached scalars)."""

    clip_fraction: torch.Tensor
    """Share of tokens whose clipped term was the one used (the gradient is zero there; for
    ``cispo``: whose importance weight was clipped)."""
    approx_kl: torch.Tensor
    """``k3`` estimate of ``KL(pi_old || pi)`` over the tokens, for early stopping."""
    ratio_mean: torch.Tensor
    ratio_max: torch.Tensor


def policy_loss_stats(
    ratio: torch.Tensor, clipped: torch.Tensor, logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor
) -> PolicyLossStats:
    """The :class:`PolicyLossStats` of a ``(B, T)`` ratio and its clipped tokens."""
    with torch.no_grad():
        return PolicyLossStats(
            clip_fraction=masked_mean(clipped.to(logprobs.dtype), mask),
            approx_kl=masked_mean(k3_kl(old_logprobs.detach(), logprobs.detach()), mask),
            ratio_mean=masked_mean(ratio.detach(), mask),
            ratio_max=(ratio.detach() * mask).max() if mask.any() else logprobs.new_zeros(()),
        )


def weighted(per_token: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``per_token`` times the importance ``weights`` (no gradient through them), if any."""
    return per_token if weights is None else per_token * weights.detach()


def policy_loss(
    name: PolicyLoss,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    aggregation: LossAggregation = "token_mean",
    norm: Normalizer | None = None,
    weights: torch.Tensor | None = None,
    *,
    dual_clip_c: float = 3.0,
) -> tuple[torch.Tensor, PolicyLossStats]:
    """The policy loss ``name`` (a row of :data:`POLICY_LOSSES`), aggregated, with its statistics.

    The ratio, the aggregation and the statistics are done here once; the row gets the token
    log-ratio, the advantages and the inputs it reads (:data:`~mathgym.algos.choices.POLICY_LOSS_INPUTS`).

    Args:
        name: ``clip``, ``dual_clip``, ``gspo`` or ``cispo``.
        logprobs: ``(B, T)`` log-probs of the sampled tokens under the current policy.
        old_logprobs: ``(B, T)`` the same under the policy the ratio is taken against (no gradient).
        advantages: ``(B,)`` per episode or ``(B, T)`` per token.
        mask: ``(B, T)`` 1 on the tokens that train.
        eps_low: Lower clip range.
        eps_high: Upper clip range (default ``eps_low``; larger values are DAPO's clip-higher).
        aggregation: How the per-token losses become a scalar (:func:`aggregate_loss`).
        norm: Full-batch denominators, so micro-batches add up to the full-batch loss.
        weights: ``(B, T)`` per-token importance weights multiplying the per-token loss (no
            gradient through them), e.g. a correction for the sampler/learner mismatch.
        dual_clip_c: The bound of ``dual_clip`` (:func:`dual_clip_objective`).

    Returns:
        ``(loss, stats)``.
    """
    objective = pick(POLICY_LOSSES, "policy_loss", name)
    old_logprobs = old_logprobs.detach()
    eps_high = eps_low if eps_high is None else eps_high
    available = {"mask": mask, "eps_low": eps_low, "eps_high": eps_high, "dual_clip_c": dual_clip_c}
    out = objective(logprobs - old_logprobs, per_token(advantages), **select(POLICY_LOSS_INPUTS, name, available))
    loss = aggregate_loss(weighted(out.loss, weights), mask, aggregation, norm)
    return loss, policy_loss_stats(out.ratio, out.clipped, logprobs, old_logprobs, mask)


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    aggregation: LossAggregation = "token_mean",
    norm: Normalizer | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, PolicyLossStats]:
    """The ``clip`` policy loss: PPO's clipped surrogate (:func:`clipped_surrogate`), aggregated;
    arguments as :func:`policy_loss`."""
    return policy_loss("clip", logprobs, old_logprobs, advantages, mask, eps_low, eps_high, aggregation, norm, weights)


def policy_loss_fn(name: PolicyLoss) -> Callable[..., tuple[torch.Tensor, PolicyLossStats]]:
    """:func:`policy_loss` of the :data:`POLICY_LOSSES` row ``name`` (``name`` checked now)."""
    pick(POLICY_LOSSES, "policy_loss", name)
    return functools.partial(policy_loss, name)
