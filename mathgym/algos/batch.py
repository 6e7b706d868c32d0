"""Typed rollout data: one :class:`Episode` per trajectory, collated into a :class:`RolloutBatch`.

Token layout of an episode (right-padded in the batch)::

    [prompt tokens][turn-0 action tokens][env reply tokens][turn-1 action tokens]...
    action_mask:   0 ... 0  1 ... 1  0 ... 0  1 ... 1
    step_index:   -1 ...-1  0 ... 0 -1 ...-1  1 ... 1

``sampler_logprobs[b, t]`` is the log-prob the sampler gave ``input_ids[b, t]`` given the tokens
before it (0 where ``action_mask`` is 0), the alignment of :func:`mathgym.agents.forward.forward_pass`.

A trainer fills in the rest before its update, once per batch: the learner's own log-probs
before the update (``learner_logprobs``: the ratio's denominator, and the sampler/learner
mismatch metric), the reference's (``ref_logprobs``), the critic's ``values`` and the
``advantages``. A row not scored is 0 there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch

from mathgym.rewards.base import INFRA_STATUSES as REWARD_INFRA_STATUSES

#: Statuses that are infrastructure failures, not model failures: kept out of the loss.
INFRA_STATUSES = frozenset(str(s) for s in REWARD_INFRA_STATUSES)


@dataclass
class Episode:
    """One trajectory of token ids, as the policy saw and produced them.

    Attributes:
        env_id: Environment id.
        task_id: The env's task id.
        group_id: Episodes sampled for the same task share it.
        token_ids: Prompt, actions and env replies, in order.
        action_mask: 1 for tokens the policy generated.
        logprobs: The sampler's log-prob per token (0 for non-action tokens).
        step_index: Env step each action token belongs to; -1 for prompt/env tokens.
        step_rewards: Reward of each env step.
        status: Final status (``info["status"]`` of the last step).
        correct: ``info["correct"]`` at the end.
        truncated_tokens: A completion hit ``max_new_tokens`` or the episode token budget.
        truncated_turns: The env truncated the episode (turn budget) or the collector's turn cap hit.
        completions: The decoded text of each action.
        messages: The env's chat at the end (``info["messages"]`` of the last step).
        sampled: The action tokens were sampled by the policy (their ``logprobs`` are the sampler's).
        observations: The env's observation text before each turn (the state the turn acted in).
    """

    env_id: str
    task_id: str
    group_id: int
    token_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    step_index: list[int] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)
    status: str = "in_progress"
    correct: bool = False
    truncated_tokens: bool = False
    truncated_turns: bool = False
    completions: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    sampled: bool = False
    observations: list[str] = field(default_factory=list)

    def extend(self, tokens: Sequence[int], *, action_step: int | None = None, logprobs: Sequence[float] = ()) -> None:
        """Append tokens; ``action_step`` set means they are the policy's action at that step."""
        self.token_ids.extend(int(t) for t in tokens)
        if action_step is None:
            self.action_mask.extend([0] * len(tokens))
            self.logprobs.extend([0.0] * len(tokens))
            self.step_index.extend([-1] * len(tokens))
        else:
            self.action_mask.extend([1] * len(tokens))
            self.logprobs.extend(float(x) for x in logprobs)
            self.step_index.extend([action_step] * len(tokens))

    @property
    def reward(self) -> float:
        """Return of the episode (sum of step rewards)."""
        return float(sum(self.step_rewards))

    @property
    def num_action_tokens(self) -> int:
        return int(sum(self.action_mask))

    @property
    def truncated(self) -> bool:
        return self.truncated_tokens or self.truncated_turns


@dataclass
class RolloutBatch:
    """A collated batch of episodes (B episodes, T tokens), ready for a loss.

    Attributes:
        input_ids: ``(B, T)`` long, right-padded.
        attention_mask: ``(B, T)`` long.
        action_mask: ``(B, T)`` float, 1 on policy tokens.
        sampler_logprobs: ``(B, T)`` float, the log-probs the sampler drew the action tokens with.
        step_index: ``(B, T)`` long, env step of each action token, -1 elsewhere.
        rewards: ``(B,)`` float, episode returns (the sum of ``step_rewards``).
        group_ids: ``(B,)`` long.
        truncated: ``(B,)`` bool, token or turn budget hit.
        correct: ``(B,)`` bool.
        infra_failure: ``(B,)`` bool, status in :data:`INFRA_STATUSES`.
        step_rewards: Per-episode list of the reward of each turn (env step).
        statuses: Per-episode final status.
        task_ids: Per-episode task id.
        env_ids: Per-episode env id.
        completions: Per-episode list of action texts.
        messages: Per-episode final chat of the env.
        sampled: ``(B,)`` bool, the episode's action tokens were sampled by the policy.
        observations: Per-episode list of the env's observation text before each turn, or ``None``.
        learner_logprobs: ``(B, T)`` the learner's log-probs before the update (no gradient), or ``None``.
        ref_logprobs: ``(B, T)`` the reference policy's log-probs, or ``None``.
        values: ``(B, T)`` the critic's values before the update, or ``None``.
        advantages: ``(B,)`` per episode or ``(B, T)`` per token, or ``None``.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    action_mask: torch.Tensor
    sampler_logprobs: torch.Tensor
    step_index: torch.Tensor
    rewards: torch.Tensor
    group_ids: torch.Tensor
    truncated: torch.Tensor
    correct: torch.Tensor
    infra_failure: torch.Tensor
    step_rewards: list[list[float]]
    statuses: list[str]
    task_ids: list[str]
    env_ids: list[str]
    completions: list[list[str]]
    messages: list[list[dict[str, Any]]]
    sampled: torch.Tensor
    learner_logprobs: torch.Tensor | None = None
    ref_logprobs: torch.Tensor | None = None
    values: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    observations: list[list[str]] | None = None

    @classmethod
    def from_episodes(cls, episodes: Sequence[Episode], pad_token_id: int) -> RolloutBatch:
        """Collate episodes (right padding with ``pad_token_id``)."""
        width = max(len(e.token_ids) for e in episodes)
        B = len(episodes)

        def pad(rows: list[list[Any]], value: Any, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor([list(row) + [value] * (width - len(row)) for row in rows], dtype=dtype).reshape(B, width)

        return cls(
            input_ids=pad([e.token_ids for e in episodes], pad_token_id, torch.long),
            attention_mask=pad([[1] * len(e.token_ids) for e in episodes], 0, torch.long),
            action_mask=pad([e.action_mask for e in episodes], 0, torch.float32),
            sampler_logprobs=pad([e.logprobs for e in episodes], 0.0, torch.float32),
            step_index=pad([e.step_index for e in episodes], -1, torch.long),
            rewards=torch.tensor([e.reward for e in episodes], dtype=torch.float32),
            group_ids=torch.tensor([e.group_id for e in episodes], dtype=torch.long),
            truncated=torch.tensor([e.truncated for e in episodes], dtype=torch.bool),
            correct=torch.tensor([e.correct for e in episodes], dtype=torch.bool),
            infra_failure=torch.tensor([e.status in INFRA_STATUSES for e in episodes], dtype=torch.bool),
            step_rewards=[list(e.step_rewards) for e in episodes],
            statuses=[str(e.status) for e in episodes],
            task_ids=[e.task_id for e in episodes],
            env_ids=[e.env_id for e in episodes],
            completions=[list(e.completions) for e in episodes],
            messages=[list(e.messages) for e in episodes],
            sampled=torch.tensor([e.sampled for e in episodes], dtype=torch.bool),
            observations=[list(e.observations) for e in episodes],
        )

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def loss_mask(self, mask_truncated: bool = False) -> torch.Tensor:
        """``(B, T)`` float: action tokens of episodes that may train (no infra failure, and
        no truncation when ``mask_truncated``)."""
        keep = ~self.infra_failure
        if mask_truncated:
            keep &= ~self.truncated
        return self.action_mask * keep[:, None].float()

    def select(self, index: Sequence[int] | torch.Tensor) -> RolloutBatch:
        """The sub-batch of the given episode indices (for micro-batches)."""
        idx = torch.as_tensor(index, dtype=torch.long)
        ids = idx.tolist()
        values = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                values[f.name] = value[idx.to(value.device)] if isinstance(value, torch.Tensor) else [value[i] for i in ids]
        return replace(self, **values)

    def to(self, device: torch.device | str) -> RolloutBatch:
        """A copy with every tensor on ``device``."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(self, **{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in values.items()})

    @classmethod
    def concat(cls, batches: Sequence[RolloutBatch], pad_token_id: int) -> RolloutBatch:
        """One batch of the rows of ``batches`` in order (right-padded to the widest): e.g. a batch
        refilled by further rollout rounds. A field filled in only some of them is left out."""
        width = max(b.input_ids.shape[1] for b in batches)
        pads = {"input_ids": pad_token_id, "step_index": -1}
        values: dict[str, Any] = {}
        for f in fields(cls):
            parts = [getattr(b, f.name) for b in batches]
            if any(p is None for p in parts):
                continue
            if not isinstance(parts[0], torch.Tensor):
                values[f.name] = [item for part in parts for item in part]
            elif parts[0].dim() == 2 and parts[0].shape[1] == batches[0].input_ids.shape[1]:
                fill = pads.get(f.name, 0)
                values[f.name] = torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=fill) for p in parts])
            else:
                values[f.name] = torch.cat(parts)
        return cls(**values)
