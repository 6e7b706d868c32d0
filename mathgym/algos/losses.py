"""Policy-gradient losses and estimators as pure functions of tensors.

Shapes: ``B`` episodes, ``T`` tokens; ``mask`` is the ``(B, T)`` float loss mask.
Each returns plain tensors; the trainers compose them. Shared by GRPO and PPO.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from mathgym.errors import require_option

LossAggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(policy || reference): ``exp(r) - r - 1``, ``r = ref - logp``.

    Non-negative, unbiased in expectation over samples of the policy (Schulman, 2020).

    Example:
        >>> k3_kl(torch.tensor([0.0]), torch.tensor([-1.0]))   # e^-1 + 1 - 1
        tensor([0.3679])
    """
    log_ratio = ref_logprobs - logprobs
    return torch.exp(log_ratio) - log_ratio - 1.0


class SurrogateOutput(NamedTuple):
    """Per-token clipped surrogate loss and which tokens were clipped."""

    loss: torch.Tensor  # (B, T)
    clipped: torch.Tensor  # (B, T) bool: the clipped branch was the active one
    ratio: torch.Tensor  # (B, T)


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> SurrogateOutput:
    """PPO's clipped objective, negated (a loss), with separate low/high clip ranges.

    ``loss = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)``.

    Args:
        logprobs: ``(B, T)`` current log-probs (with grad).
        old_logprobs: ``(B, T)`` log-probs at sampling time.
        advantages: ``(B,)`` per episode or ``(B, T)`` per token.
        eps_low: Lower clip range (ratio floor ``1 - eps_low``).
        eps_high: Upper clip range (ratio ceiling ``1 + eps_high``; DAPO's clip-higher).
    """
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped_ratio = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    clipped = clipped_ratio * advantages
    loss = -torch.minimum(unclipped, clipped)
    return SurrogateOutput(loss, clipped < unclipped, ratio)


class Normalizer(NamedTuple):
    """Denominators of the loss aggregations, computed once over the *whole* batch so that
    micro-batches with gradient accumulation give exactly the full-batch gradient."""

    num_tokens: float  # masked tokens in the full batch
    num_sequences: float  # episodes in the full batch
    max_tokens: float  # Dr. GRPO's constant (max completion length)


def batch_normalizer(mask: torch.Tensor, max_tokens: int) -> Normalizer:
    """The :class:`Normalizer` of a full batch's ``(B, T)`` loss mask."""
    return Normalizer(float(mask.sum().clamp(min=1.0)), float(max(mask.shape[0], 1)), float(max_tokens))


def _token_mean(per_token: torch.Tensor, mask: torch.Tensor, norm: Normalizer) -> torch.Tensor:
    return (per_token * mask).sum() / norm.num_tokens


def _sequence_mean(per_token: torch.Tensor, mask: torch.Tensor, norm: Normalizer) -> torch.Tensor:
    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    return per_seq.sum() / norm.num_sequences


def _dr_grpo(per_token: torch.Tensor, mask: torch.Tensor, norm: Normalizer) -> torch.Tensor:
    return (per_token * mask).sum() / (norm.num_sequences * norm.max_tokens)


_AGGREGATIONS = {"token_mean": _token_mean, "sequence_mean": _sequence_mean, "dr_grpo": _dr_grpo}


def aggregate_loss(
    per_token: torch.Tensor, mask: torch.Tensor, mode: LossAggregation, norm: Normalizer | None = None
) -> torch.Tensor:
    """Reduce a ``(B, T)`` per-token loss to a scalar.

    - ``token_mean``: sum over every masked token / number of masked tokens (DAPO).
    - ``sequence_mean``: mean over tokens within each sequence, then over sequences (GRPO paper).
    - ``dr_grpo``: sum / (sequences × a constant max length) — no length bias (Dr. GRPO).

    Args:
        per_token: ``(B, T)`` loss per token.
        mask: ``(B, T)`` float mask.
        mode: One of the three above.
        norm: Full-batch denominators (default: those of this batch, ``max_tokens = T``).
    """
    require_option("loss_aggregation", mode, tuple(_AGGREGATIONS))
    norm = norm or batch_normalizer(mask, mask.shape[1])
    return _AGGREGATIONS[mode](per_token, mask, norm)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (0 when the mask is empty)."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)
