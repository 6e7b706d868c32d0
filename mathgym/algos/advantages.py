"""Advantage estimators that need no value function (pure functions of tensors)."""

from __future__ import annotations

from typing import Literal

import torch

from mathgym.errors import require_option

ScaleRewards = Literal["group", "batch", "none"]


def group_normalized_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, scale_rewards: ScaleRewards = "group", eps: float = 1e-4
) -> torch.Tensor:
    """GRPO advantages: reward minus its group's mean, divided by a standard deviation.

    Args:
        rewards: ``(B,)`` episode rewards.
        group_ids: ``(B,)`` group of each episode (samples of the same task).
        scale_rewards: Divide by the group's std (``"group"``, GRPO), the whole batch's std
            (``"batch"``), or not at all (``"none"``, Dr. GRPO). Stds are unbiased (n-1).
        eps: Added to the std.

    Returns:
        ``(B,)`` advantages (0 for a group whose rewards are all equal).

    Example:
        >>> group_normalized_advantages(torch.tensor([1., 0., 0., 0.]), torch.tensor([0, 0, 1, 1]), "none")
        tensor([ 0.5000, -0.5000,  0.0000,  0.0000])
    """
    require_option("scale_rewards", scale_rewards, ("group", "batch", "none"))
    rewards = rewards.float()
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=rewards.dtype).index_add_(0, inverse, rewards)
    means = sums / counts
    centred = rewards - means[inverse]
    if scale_rewards == "none":
        return centred
    if scale_rewards == "batch":
        std = rewards.std() if rewards.numel() > 1 else rewards.new_tensor(0.0)
        return centred / (std + eps)
    sq = torch.zeros(len(counts), dtype=rewards.dtype).index_add_(0, inverse, centred**2)
    std = torch.sqrt(sq / (counts - 1).clamp(min=1))
    return centred / (std[inverse] + eps)
