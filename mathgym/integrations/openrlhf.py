"""mathgym envs inside OpenRLHF: this file is an ``--agent_func_path`` agent and a ``reward_func`` file.

Multi-turn, any env (OpenRLHF's ``MultiTurnAgentExecutor`` drives :class:`AgentInstance`)::

    python -m openrlhf.cli.train_ppo_ray ... --train.agent_func_path \\
        $(python -c "import mathgym.integrations.openrlhf as m; print(m.__file__)")

Each data row's ``label`` names the env task as JSON (``env_id``, ``env_kwargs``, ``seed``,
and ``tokenizer``: the model path, whose chat template renders the env's replies);
:func:`openrlhf_rows` writes such rows. ``step`` returns the env's reward, the episode's
return as ``scores``, and ``environment_feedback``: the env's reply as the chat-template
text that follows the action (end of the assistant turn, a user turn, the next generation
prompt), computed by mathgym's rollout collector.

Single-turn math (``--reward.remote_url`` pointing at this file): :func:`reward_func`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import gymnasium as gym
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

import mathgym  # noqa: F401 - registers the envs
from mathgym.errors import ConfigError
from mathgym.rewards.math import MathVerifier


def openrlhf_rows(env_id: str, n: int, *, tokenizer: str, env_kwargs: Mapping[str, Any] | None = None,
                  start_seed: int = 0) -> list[dict[str, Any]]:
    """``n`` rows for OpenRLHF (``--data.input_key prompt --data.label_key label --data.apply_chat_template``).

    Args:
        env_id: Registered env id.
        n: Number of tasks (seeds ``start_seed`` ...).
        tokenizer: Path or hub id of the trained model's tokenizer (renders the env's replies).
        env_kwargs: Constructor options of the env.
        start_seed: First seed.
    """
    env = gym.make(env_id, **dict(env_kwargs or {}))
    rows = []
    try:
        for seed in range(start_seed, start_seed + n):
            _, info = env.reset(seed=seed)
            label = {"env_id": env_id, "env_kwargs": dict(env_kwargs or {}), "seed": seed, "tokenizer": tokenizer}
            rows.append({"prompt": [dict(m) for m in info["messages"]], "label": json.dumps(label)})
    finally:
        env.close()
    return rows


@lru_cache(maxsize=4)
def _reply_policy(tokenizer_path: str) -> Any:
    """A model-less :class:`LLMPolicy` (tokenizer and chat template only) for rendering env replies."""
    from mathgym.agents.policy import LLMPolicy, load_tokenizer

    return LLMPolicy(model=None, tokenizer=load_tokenizer(tokenizer_path), device=torch.device("cpu"))


def env_reply_text(tokenizer_path: str, chat: list[dict[str, str]], action: str, reply: str) -> str:
    """The chat-template text that follows ``action``: mathgym's ``env_reply_tokens``, as text.

    The action is taken to end with the template's end-of-turn token: OpenRLHF generates
    again only after an action that stopped (one cut by the length budget ends the episode).
    """
    from types import SimpleNamespace

    from mathgym.algos.rollout import RolloutCollector

    policy = _reply_policy(tokenizer_path)
    collector = SimpleNamespace(policy=policy)  # env_reply_tokens reads only self.policy
    tokens = RolloutCollector.env_reply_tokens(collector, chat, reply, last_token=policy.end_of_turn_id)  # type: ignore[arg-type]
    return policy.tokenizer.decode(tokens, skip_special_tokens=False)


class AgentInstance(AgentInstanceBase):
    """One episode of the mathgym env named by the row's ``label`` (OpenRLHF creates one per prompt)."""

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

    def __init__(self) -> None:
        super().__init__(AgentInstance)


_VERIFIER: MathVerifier | None = None


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """OpenRLHF's ``reward_func(queries, prompts, labels)``: 1.0 where the response's final answer is the label.

    ``queries`` are prompt + response as text; the response is what follows the prompt.
    Scored by :class:`~mathgym.rewards.math.MathVerifier` in ``"lenient"`` mode.
    """
    global _VERIFIER
    if _VERIFIER is None:
        _VERIFIER = MathVerifier(answer_extraction="lenient")
    responses = [q[len(p):] if q.startswith(p) else q for q, p in zip(queries, prompts)]
    results = _VERIFIER.score_batch(responses, [str(x) for x in labels])
    scores = torch.tensor([r.score for r in results], dtype=torch.float32)
    return {"rewards": scores, "scores": scores, "extra_logs": {}}
