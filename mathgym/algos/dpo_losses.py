"""DPO-family preference losses as pure functions of sequence log-probs.

Every loss is a function of the *implicit reward margin*
``h = (log pi(y_w|x) - log pi_ref(y_w|x)) - (log pi(y_l|x) - log pi_ref(y_l|x))``
where ``y_w`` is the chosen and ``y_l`` the rejected completion.

Example:
    >>> import torch
    >>> z = torch.zeros(2)
    >>> loss, stats = preference_loss(z, z, z, z, beta=0.1)
    >>> round(float(loss), 4)  # log 2: no preference yet
    0.6931
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from mathgym.algos.choices import PREFERENCE_LOSS_INPUTS, DPOLossType
from mathgym.algos.configs import check_preference_options
from mathgym.options import pick, select


class PreferenceStats(NamedTuple):
    """Diagnostics of :func:`preference_loss` (detached batch means)."""

    chosen_reward: torch.Tensor
    """``beta * (log pi(y_w) - log pi_ref(y_w))``."""
    rejected_reward: torch.Tensor
    """``beta * (log pi(y_l) - log pi_ref(y_l))``."""
    margin: torch.Tensor
    """Mean of ``chosen_reward - rejected_reward``."""
    accuracy: torch.Tensor
    """Share of pairs whose implicit reward ranks the chosen completion strictly higher."""
    chosen_logp: torch.Tensor
    rejected_logp: torch.Tensor


def sigmoid_loss(h: torch.Tensor, beta: float, *, label_smoothing: float = 0.0) -> torch.Tensor:
    """DPO (Rafailov et al. 2023) with cDPO label smoothing ``eps``: ``-(1-eps) logsig(beta h) - eps logsig(-beta h)``."""
    return -(1.0 - label_smoothing) * F.logsigmoid(beta * h) - label_smoothing * F.logsigmoid(-beta * h)


def ipo_loss(h: torch.Tensor, beta: float) -> torch.Tensor:
    """IPO (Azar et al. 2023): ``(h - 1 / (2 beta))^2``; ``beta`` plays the role of the paper's ``tau``."""
    return (h - 1.0 / (2.0 * beta)) ** 2


def hinge_loss(h: torch.Tensor, beta: float) -> torch.Tensor:
    """SLiC-style hinge (Zhao et al. 2023): ``max(0, 1 - beta h)``."""
    return torch.relu(1.0 - beta * h)


def robust_loss(h: torch.Tensor, beta: float, *, label_smoothing: float) -> torch.Tensor:
    """Robust DPO (Chowdhury et al. 2024), unbiased under label-flip rate ``eps``.

    ``(-(1-eps) logsig(beta h) + eps logsig(-beta h)) / (1 - 2 eps)``.
    """
    return (-(1.0 - label_smoothing) * F.logsigmoid(beta * h) + label_smoothing * F.logsigmoid(-beta * h)) / (
        1.0 - 2.0 * label_smoothing
    )


#: ``loss_type`` choices -> ``(h, beta, **inputs) -> (N,)`` per-pair losses; the keyword inputs of each
#: row are :data:`~mathgym.algos.choices.PREFERENCE_LOSS_INPUTS`'s (``label_smoothing`` for sigmoid and robust).
PREFERENCE_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "sigmoid": sigmoid_loss, "ipo": ipo_loss, "hinge": hinge_loss, "robust": robust_loss,
}


def preference_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float = 0.1,
    loss_type: DPOLossType = "sigmoid",
    label_smoothing: float = 0.0,
) -> tuple[torch.Tensor, PreferenceStats]:
    """Mean DPO-family loss over a batch of preference pairs.

    Args:
        policy_chosen_logps: ``(N,)`` sequence log-prob of each chosen completion under the policy.
        policy_rejected_logps: ``(N,)`` the same for the rejected completions.
        ref_chosen_logps: ``(N,)`` chosen log-probs under the reference (no gradient).
        ref_rejected_logps: ``(N,)`` rejected log-probs under the reference.
        beta: Strength of the implicit KL constraint (larger = stay closer to the reference).
        loss_type: ``sigmoid`` (DPO/cDPO), ``ipo``, ``hinge`` or ``robust``.
        label_smoothing: Assumed label-noise rate for ``sigmoid`` (cDPO) and ``robust``.

    Returns:
        ``(loss, stats)``.
    """
    per_pair = pick(PREFERENCE_LOSSES, "loss_type", loss_type)
    check_preference_options(loss_type, beta, label_smoothing)
    chosen_ratio = policy_chosen_logps - ref_chosen_logps.detach()
    rejected_ratio = policy_rejected_logps - ref_rejected_logps.detach()
    h = chosen_ratio - rejected_ratio  # (N,)
    losses = per_pair(h, beta, **select(PREFERENCE_LOSS_INPUTS, loss_type, {"label_smoothing": label_smoothing}))
    with torch.no_grad():
        chosen_reward, rejected_reward = beta * chosen_ratio, beta * rejected_ratio
        stats = PreferenceStats(
            chosen_reward=chosen_reward.mean(),
            rejected_reward=rejected_reward.mean(),
            margin=(chosen_reward - rejected_reward).mean(),
            accuracy=(chosen_reward > rejected_reward).float().mean(),
            chosen_logp=policy_chosen_logps.mean(),
            rejected_logp=policy_rejected_logps.mean(),
        )
    return losses.mean(), stats
