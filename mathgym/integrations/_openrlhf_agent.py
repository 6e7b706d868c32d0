"""OpenRLHF's agent classes over mathgym envs (imports OpenRLHF and torch: reached through
``mathgym.integrations.openrlhf``, which hands them out on first use).

Kept apart so that writing data rows needs neither OpenRLHF nor torch.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

import mathgym  # noqa: F401 - registers the envs
from mathgym.errors import ConfigError
from mathgym.integrations._env_reply import env_reply_text


class AgentInstance(AgentInstanceBase):
    """One episode of the mathgym env named by the row's ``label`` (OpenRLHF creates one per prompt)."""

    __module__ = "mathgym.integrations.openrlhf"  # its public home (a pickle names it there)

    def __init__(self, *args: Any, **kwargs: Any):
        self.env: gym.Env | None = None
        self.chat: list[dict[str, str]] = []
        self.tokenizer_path = ""
        self.total = 0.0

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        """Reset the env with the label's seed; the observation (the rendered prompt) is kept as given."""
        try:
            label = json.loads(states["label"])
            env_id, tokenizer_path = label["env_id"], label["tokenizer"]
        except (TypeError, ValueError, KeyError) as exc:
            raise ConfigError(f"the row's label must be the JSON that openrlhf_rows() writes ({exc!r}).") from exc
        self.env = gym.make(env_id, **dict(label.get("env_kwargs") or {}))
        _, info = self.env.reset(seed=label.get("seed"))
        self.chat = [dict(m) for m in info["messages"]]
        self.tokenizer_path, self.total = tokenizer_path, 0.0
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs: Any) -> dict:
        """Step the env with the action text; the env's reward, the return so far, its reply as chat text."""
        if self.env is None:
            raise ConfigError("AgentInstance.step() before reset().")
        action = str(states["action_text"])
        reply, reward, terminated, truncated, info = self.env.step(action)
        self.total += float(reward)
        done = bool(terminated or truncated)
        feedback = "" if done else env_reply_text(self.tokenizer_path, self.chat, action, str(reply))
        if not done:
            self.chat += [{"role": "assistant", "content": action}, {"role": "user", "content": str(reply)}]
        else:
            self.env.close()
        return {
            "rewards": torch.tensor(float(reward)),
            "scores": torch.tensor(self.total),
            "environment_feedback": feedback,
            "done": done,
            "extra_logs": {"env_turns": torch.tensor(float(info.get("turn", 0))),
                           "env_correct": torch.tensor(float(bool(info.get("correct", False))))},
        }


class AgentExecutor(MultiTurnAgentExecutor):
    """What ``--agent_func_path`` loads: OpenRLHF's multi-turn executor over :class:`AgentInstance`."""

    __module__ = "mathgym.integrations.openrlhf"

    def __init__(self) -> None:
        super().__init__(AgentInstance)
