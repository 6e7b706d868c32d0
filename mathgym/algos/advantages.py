"""Advantage estimators that need no value function (pure functions of tensors).

Rows of :data:`ADVANTAGE_ESTIMATORS` (the ``advantage`` option) map episode rewards and their
groups (the samples of one task) to per-episode advantages; rows of
:data:`TURN_ADVANTAGE_ESTIMATORS` (the same option) give each turn of a multi-turn episode its
own advantage, from the turns' rewards and observations (:class:`Turns`);
:data:`REWARD_SCALES` (the ``scale_rewards`` option) are the ways to divide the centred rewards.
A row takes the options it reads (:data:`~mathgym.algos.choices.ADVANTAGE_INPUTS`) as keyword
arguments; :func:`episode_advantages` and :func:`turn_advantages` hand each row those alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from mathgym.algos.choices import (
    ADVANTAGE_INPUTS,
    EpisodeAdvantageEstimator,
    ScaleRewards,
    TurnAdvantageEstimator,
)
from mathgym.options import pick, select


class Groups(NamedTuple):
    """The groups of a batch: each episode's group as ``0..G-1`` and each group's size."""

    inverse: torch.Tensor  # (B,)
    counts: torch.Tensor  # (G,)

    @classmethod
    def of(cls, group_ids: torch.Tensor) -> Groups:
        _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
        return cls(inverse, counts)

    def sums(self, values: torch.Tensor) -> torch.Tensor:
        """``(G,)`` sum of ``values`` over each group."""
        return torch.zeros(len(self.counts), dtype=values.dtype, device=values.device).index_add_(0, self.inverse, values)


def scale_by_group_std(rewards: torch.Tensor, centred: torch.Tensor, groups: Groups, eps: float) -> torch.Tensor:
    """Divide by the group's (unbiased) std: GRPO."""
    std = torch.sqrt(groups.sums(centred**2) / (groups.counts - 1).clamp(min=1))
    return centred / (std[groups.inverse] + eps)


def scale_by_batch_std(rewards: torch.Tensor, centred: torch.Tensor, groups: Groups, eps: float) -> torch.Tensor:
    """Divide by the whole batch's (unbiased) std."""
    std = rewards.std() if rewards.numel() > 1 else rewards.new_tensor(0.0)
    return centred / (std + eps)


def unscaled(rewards: torch.Tensor, centred: torch.Tensor, groups: Groups, eps: float) -> torch.Tensor:
    """Keep the centred rewards as they are: Dr. GRPO."""
    return centred


#: ``scale_rewards`` choices -> ``(rewards, centred, groups, eps) -> advantages``.
REWARD_SCALES: dict[str, Callable[[torch.Tensor, torch.Tensor, Groups, float], torch.Tensor]] = {
    "group": scale_by_group_std, "batch": scale_by_batch_std, "none": unscaled,
}


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
    scale = pick(REWARD_SCALES, "scale_rewards", scale_rewards)
    rewards = rewards.float()
    groups = Groups.of(group_ids)
    means = groups.sums(rewards) / groups.counts
    return scale(rewards, rewards - means[groups.inverse], groups, eps)


def rloo_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, scale_rewards: ScaleRewards = "group", eps: float = 1e-4
) -> torch.Tensor:
    """RLOO (Ahmadian et al. 2024, "Back to Basics"): each reward minus the mean of the *other*
    samples of its group, then divided as ``scale_rewards`` says.

    ``A_i = r_i - (sum_group - r_i) / (G - 1)``, which is ``G / (G - 1)`` times GRPO's centred
    reward: ``scale_rewards="none"`` is the paper's estimator; ``"group"`` divides by the std of
    these values and so gives GRPO's advantages exactly; ``"batch"`` divides by the batch's
    reward std. A sample alone in its group gets 0.

    Example:
        >>> rloo_advantages(torch.tensor([1., 0., 0.]), torch.tensor([0, 0, 0]), "none")
        tensor([ 1.0000, -0.5000, -0.5000])
    """
    scale = pick(REWARD_SCALES, "scale_rewards", scale_rewards)
    rewards = rewards.float()
    groups = Groups.of(group_ids)
    counts = groups.counts[groups.inverse].to(rewards.dtype)
    others = (groups.sums(rewards)[groups.inverse] - rewards) / (counts - 1).clamp(min=1)
    centred = torch.where(counts > 1, rewards - others, torch.zeros_like(rewards))
    return scale(rewards, centred, groups, eps)


def batch_whitened(values: torch.Tensor, eps: float) -> torch.Tensor:
    """``(values - mean) / (std + eps)`` over the whole batch (unbiased std; 0 for a single value)."""
    if values.numel() < 2:
        return torch.zeros_like(values)
    return (values - values.mean()) / (values.std() + eps)


def reinforce_pp_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-4) -> torch.Tensor:
    """REINFORCE++ (Hu 2025): the episode returns normalised over the whole batch,
    ``A_i = (r_i - mean_batch) / (std_batch + eps)``; no group baseline (``group_ids``, the table's
    shared input, is not read), so a prompt needs one sample. The batch normalisation is the
    method: ``scale_rewards`` does not apply.

    Example:
        >>> reinforce_pp_advantages(torch.tensor([2., 0.]), torch.tensor([0, 1]), eps=0.0)
        tensor([ 0.7071, -0.7071])
    """
    return batch_whitened(rewards.float(), eps)


def reinforce_pp_baseline_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-4) -> torch.Tensor:
    """REINFORCE++-baseline (Hu 2025): each reward minus its group's mean, then those values
    normalised over the whole batch (their mean and std, not the group's).

    ``scale_rewards`` does not apply (the batch normalisation is the method).
    """
    rewards = rewards.float()
    groups = Groups.of(group_ids)
    centred = rewards - (groups.sums(rewards) / groups.counts)[groups.inverse]
    return batch_whitened(centred, eps)


#: ``advantage`` choices -> ``(rewards (B,), group_ids (B,), **inputs) -> (B,) advantages``; the keyword
#: inputs of each row are :data:`~mathgym.algos.choices.ADVANTAGE_INPUTS`'s.
ADVANTAGE_ESTIMATORS: dict[str, Callable[..., torch.Tensor]] = {
    "grpo": group_normalized_advantages,
    "rloo": rloo_advantages,
    "reinforce++": reinforce_pp_advantages,
    "reinforce++-baseline": reinforce_pp_baseline_advantages,
}


def episode_advantages(
    estimator: EpisodeAdvantageEstimator,
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    scale_rewards: ScaleRewards = "group",
) -> torch.Tensor:
    """``(B,)`` advantages of the :data:`ADVANTAGE_ESTIMATORS` row ``estimator`` (given the options it reads)."""
    row = pick(ADVANTAGE_ESTIMATORS, "advantage", estimator)
    return row(rewards, group_ids, **select(ADVANTAGE_INPUTS, estimator, {"scale_rewards": scale_rewards}))


class Turns(NamedTuple):
    """The turns of a batch on a ``(B, K)`` grid, ``K`` the most turns an episode played.

    Attributes:
        rewards: ``(B, K)`` float, the env's reward of each turn (0 past an episode's last turn).
        mask: ``(B, K)`` bool, the episode played that turn.
        states: ``(B, K)`` long, an id of the observation the turn acted on: turns with equal ids
            saw the same text; ``-1`` where it is not known (such a turn is in no step group).
    """

    rewards: torch.Tensor
    mask: torch.Tensor
    states: torch.Tensor

    @classmethod
    def of(cls, step_rewards: list[list[float]], observations: list[list[str]], bonus: torch.Tensor | None = None) -> Turns:
        """The grid of per-episode turn rewards and observation texts.

        Args:
            step_rewards: Per episode, the reward of each turn.
            observations: Per episode, the observation text before each turn (may be shorter:
                the missing turns' states are unknown).
            bonus: ``(B,)`` reward terms of the whole episode (DAPO's overlong penalty, a KL
                penalty), added to its last turn.

        Example:
            >>> Turns.of([[0.0, 1.0], [0.5]], [["a", "b"], ["a"]]).states.tolist()
            [[0, 1], [0, -1]]
        """
        width = max([1, *(len(r) for r in step_rewards)])
        rewards = torch.zeros(len(step_rewards), width)
        mask = torch.zeros(len(step_rewards), width, dtype=torch.bool)
        states = torch.full((len(step_rewards), width), -1, dtype=torch.long)
        ids: dict[str, int] = {}
        for b, (turn_rewards, texts) in enumerate(zip(step_rewards, observations)):
            rewards[b, : len(turn_rewards)] = torch.tensor(turn_rewards, dtype=torch.float32)
            mask[b, : len(turn_rewards)] = True
            for k, text in enumerate(texts[: len(turn_rewards)]):
                states[b, k] = ids.setdefault(text, len(ids))
            if bonus is not None and turn_rewards:
                rewards[b, len(turn_rewards) - 1] += float(bonus[b])
        return cls(rewards, mask, states)


def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """``(B, K)`` each turn's return-to-go ``G_k = r_k + gamma * G_{k+1}`` (0 after the last turn).

    Example:
        >>> discounted_returns(torch.tensor([[0.0, 0.0, 1.0]]), 0.5)
        tensor([[0.2500, 0.5000, 1.0000]])
    """
    returns = torch.zeros_like(rewards, dtype=torch.float32)
    following = torch.zeros(rewards.shape[0], dtype=torch.float32, device=rewards.device)
    for k in reversed(range(rewards.shape[1])):
        following = rewards[:, k].float() + gamma * following
        returns[:, k] = following
    return returns


def gigpo_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, turns: Turns, *, gamma: float = 0.95, omega: float = 1.0,
    scale_rewards: ScaleRewards = "group", eps: float = 1e-4,
) -> torch.Tensor:
    """GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training"):
    an episode-level and a step-level group advantage, ``A = A_episode + omega * A_step``.

    ``A_episode`` is GRPO's (:func:`group_normalized_advantages` of the episode rewards). Step
    groups gather, within one group (the samples of one task), the turns that acted on the same
    observation (an "anchor state"); a turn's ``A_step`` is its discounted return-to-go
    (:func:`discounted_returns`) minus the mean of its step group's, divided as ``scale_rewards``
    says (``"group"``: the step group's std, ``"batch"``: the std of the returns of every grouped
    turn). A turn alone in its step group, or whose observation is unknown, gets ``A_step = 0``.

    The first turns of a group all act on the task's prompt, so they form one step group: on a
    single-turn env a turn's return is the episode reward and GiGPO gives ``(1 + omega)`` times
    GRPO's advantages (GRPO's own with ``omega=0``).

    Args:
        rewards: ``(B,)`` episode rewards (the sum of the turns', plus any episode-level terms).
        group_ids: ``(B,)`` group of each episode.
        turns: The turns' rewards, mask and observation ids.
        gamma: Discount of the return-to-go.
        omega: Weight of the step-level advantage.
        scale_rewards: The divisor of both levels' centred values.
        eps: Added to the stds.

    Returns:
        ``(B, K)`` the advantage of each turn (0 on turns not played).

    Example:
        >>> turns = Turns.of([[0., 1.], [1., 0.]], [["start", "a"], ["start", "b"]])
        >>> gigpo_advantages(torch.tensor([1., 1.]), torch.tensor([0, 0]), turns, gamma=0.5, scale_rewards="none")
        tensor([[-0.2500,  0.0000],
                [ 0.2500,  0.0000]])
    """
    scale = pick(REWARD_SCALES, "scale_rewards", scale_rewards)
    episode = group_normalized_advantages(rewards, group_ids, scale_rewards, eps)
    returns = discounted_returns(turns.rewards, gamma)
    grouped, step_groups = anchor_state_groups(group_ids, turns)
    step = torch.zeros_like(returns)
    if len(step_groups.inverse):
        values = returns[grouped]
        centred = values - (step_groups.sums(values) / step_groups.counts)[step_groups.inverse]
        step[grouped] = scale(values, centred, step_groups, eps)
    return (episode[:, None] + omega * step) * turns.mask


def anchor_state_groups(group_ids: torch.Tensor, turns: Turns) -> tuple[torch.Tensor, Groups]:
    """GiGPO's step groups: the played turns whose observation is known (``(B, K)`` mask), and
    their groups (:class:`Groups` over those turns, row-major), keyed by ``(group, observation)``."""
    grouped = turns.mask & (turns.states >= 0)
    keys = torch.stack([group_ids[:, None].expand_as(turns.states)[grouped], turns.states[grouped]], dim=1)  # (N, 2)
    if not len(keys):
        return grouped, Groups(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    _, inverse, counts = torch.unique(keys, dim=0, return_inverse=True, return_counts=True)
    return grouped, Groups(inverse, counts)


def shared_state_fraction(group_ids: torch.Tensor, turns: Turns) -> float:
    """Fraction of the played turns that share their observation with another turn of their group
    (a GiGPO step group of two or more: the turns that get a step-level signal).

    Example:
        >>> turns = Turns.of([[0.0, 1.0], [0.0, 0.0]], [["a", "b"], ["a", "c"]])
        >>> shared_state_fraction(torch.tensor([0, 0]), turns)
        0.5
    """
    _, groups = anchor_state_groups(group_ids, turns)
    played = int(turns.mask.sum())
    return float((groups.counts[groups.inverse] > 1).sum()) / max(played, 1)


def step_reinforce_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, turns: Turns, *, gamma: float = 0.95, eps: float = 1e-4
) -> torch.Tensor:
    """Step-level REINFORCE (as ROLL's agentic pipeline): each turn's discounted return-to-go
    (:func:`discounted_returns`), whitened over every turn of the batch (minus their mean,
    divided by their unbiased std).

    No group baseline (``rewards`` and ``group_ids``, the table's shared inputs, are not read: the
    turns' rewards are); ``omega`` and ``scale_rewards`` do not apply.

    Returns:
        ``(B, K)`` the advantage of each turn (0 on turns not played).

    Example:
        >>> turns = Turns.of([[0., 2.], [0.]], [[], []])
        >>> step_reinforce_advantages(torch.tensor([2., 0.]), torch.tensor([0, 1]), turns, gamma=0.5, eps=0.0)
        tensor([[ 0.,  1.],
                [-1.,  0.]])
    """
    returns = discounted_returns(turns.rewards, gamma)
    advantages = torch.zeros_like(returns)
    advantages[turns.mask] = batch_whitened(returns[turns.mask], eps)
    return advantages


#: Per-turn ``advantage`` choices -> ``(rewards (B,), group_ids (B,), turns, **inputs) -> (B, K)``; the
#: keyword inputs of each row are :data:`~mathgym.algos.choices.ADVANTAGE_INPUTS`'s.
TURN_ADVANTAGE_ESTIMATORS: dict[str, Callable[..., torch.Tensor]] = {
    "gigpo": gigpo_advantages,
    "step_reinforce": step_reinforce_advantages,
}


def turn_advantages(
    estimator: TurnAdvantageEstimator,
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    turns: Turns,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    scale_rewards: ScaleRewards = "group",
) -> torch.Tensor:
    """``(B, K)`` per-turn advantages of the :data:`TURN_ADVANTAGE_ESTIMATORS` row ``estimator`` (given the options it reads)."""
    row = pick(TURN_ADVANTAGE_ESTIMATORS, "advantage", estimator)
    options = {"gamma": gamma, "omega": omega, "scale_rewards": scale_rewards}
    return row(rewards, group_ids, turns, **select(ADVANTAGE_INPUTS, estimator, options))


def overlong_penalty(lengths: torch.Tensor, max_length: int, buffer: int, penalty: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025): a reward term that falls linearly from 0
    to ``-penalty`` over the last ``buffer`` tokens before ``max_length``.

    ``0`` for ``L <= max_length - buffer``, ``penalty * ((max_length - buffer) - L) / buffer`` up to
    ``max_length``, and ``-penalty`` beyond. ``buffer = 0``: no penalty.

    Args:
        lengths: ``(B,)`` completion lengths in tokens.
        max_length: The token budget of a completion (``max_new_tokens``).
        buffer: ``L_cache``, the tokens before the budget where the penalty grows.
        penalty: The penalty at the budget.

    Example:
        >>> overlong_penalty(torch.tensor([10, 14, 16]), max_length=16, buffer=4)
        tensor([ 0.0000, -0.5000, -1.0000])
    """
    lengths = lengths.float()
    if buffer <= 0:
        return torch.zeros_like(lengths)
    start = max_length - buffer
    return penalty * ((start - lengths) / buffer).clamp(min=-1.0, max=0.0)


def longest_turn_lengths(step_index: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
    """``(B,)`` the action tokens of each episode's longest turn (what ``max_new_tokens`` bounds).

    Example:
        >>> longest_turn_lengths(torch.tensor([[-1, 0, 0, -1, 1]]), torch.tensor([[0., 1, 1, 0, 1]]))
        tensor([2.])
    """
    steps = int(step_index.max()) + 1 if step_index.numel() else 0
    counts = torch.zeros(step_index.shape[0], max(steps, 1), dtype=action_mask.dtype, device=action_mask.device)
    counts.scatter_add_(1, step_index.clamp(min=0), action_mask * (step_index >= 0))
    return counts.max(-1).values


def flat_group_fraction(rewards: torch.Tensor, group_ids: torch.Tensor) -> float:
    """Fraction of groups whose rewards are all equal (they carry no group-relative signal)."""
    groups = group_ids.unique()
    flat = sum(bool((rewards[group_ids == g] == rewards[group_ids == g][0]).all()) for g in groups)
    return flat / max(len(groups), 1)
