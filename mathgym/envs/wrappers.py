"""Env wrappers that change the reward of any text env.

:class:`RewardModelBonus` adds a reward model's score to each step's reward. The model is any
reward worker (``score_batch(completions, references) -> list[RewardResult]``), such as
:class:`~mathgym.agents.reward_model.RewardModel` or :class:`~mathgym.rewards.judge.LLMJudge`; the
wrapper holds no torch of its own, so an env module never imports it.

Example::

    rm = RewardModel.from_pretrained("runs/rm-.../final", device="cpu")
    env = RewardModelBonus(gym.make("MathReason-v0"), rm, coef=0.1)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("... \\\\boxed{4}")
    info["reward_breakdown"]          # {"reward": 1.0, "rm": 0.1 * score}
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym

from mathgym.core import ScoresAhead
from mathgym.errors import ConfigError

BonusWhen = Literal["every_step", "final"]


class RewardModelBonus(ScoresAhead, gym.Wrapper[str, str, str, str]):
    """Add ``coef × score`` of a reward model to the wrapped env's reward.

    The action of a step is scored against the observation it answers (the prompt of a single-turn
    env; the env's last reply in a multi-turn one). The bonus is recorded under ``name`` in
    ``info["reward_breakdown"]`` and the score itself in ``info["rm_score"]``. A score the worker
    could not give (an infrastructure status, such as a judge that failed) adds nothing and leaves
    ``info["rm_status"]`` saying so; the env's own status is untouched.

    Args:
        env: Any ``Env[str, str]``.
        reward_model: A reward worker (``score_batch``).
        coef: Weight of the score in the reward.
        when: ``final`` scores the last action of an episode only (terminated or truncated);
            ``every_step`` scores every action.
        name: The breakdown key.
    """

    def __init__(self, env: gym.Env, reward_model: Any, coef: float = 1.0, when: BonusWhen = "final", name: str = "rm"):
        super().__init__(env)
        if not callable(getattr(reward_model, "score_batch", None)):
            raise ConfigError("RewardModelBonus needs a reward worker with score_batch(completions, references).")
        if when not in ("every_step", "final"):
            raise ConfigError(f"when={when!r} is not allowed; choose one of 'every_step', 'final'.")
        self.reward_model, self.coef, self.when, self.name = reward_model, float(coef), when, name
        self._observation = ""
        self._scored_ahead = []

    def requests_ahead(self, action: Any) -> list[tuple[Any, Any]]:
        """The reward model's request, where this step will certainly be scored (every step, or
        the wrapped env's last turn): a vector env's step scores its envs' actions in one batch
        (:mod:`mathgym.envs.ahead`)."""
        inner = self.env.unwrapped
        last_turn = getattr(inner, "max_turns", None) is not None and inner.max_turns - getattr(inner, "turn", 0) <= 1
        if not isinstance(action, str) or (self.when == "final" and not last_turn):
            return []
        return [(self.reward_model, (action, {"prompt": self._observation}))]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._observation = obs
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        prompt = self._observation
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._observation = obs
        if self.when == "final" and not (terminated or truncated):
            self._forget_scored_ahead()
            return obs, reward, terminated, truncated, info
        request = (action, {"prompt": prompt})
        result = self._scored(self.reward_model, request, lambda: self.reward_model.score_batch([action], [request[1]])[0])
        self._forget_scored_ahead()
        info = dict(info)
        breakdown = dict(info.get("reward_breakdown") or {"reward": float(reward)})
        info["rm_status"] = str(result.status)
        if result.status.is_infra_failure:
            breakdown[self.name] = 0.0
        else:
            bonus = self.coef * float(result.score)
            breakdown[self.name] = bonus
            info["rm_score"] = float(result.score)
            reward = float(reward) + bonus
        info["reward_breakdown"] = breakdown
        return obs, reward, terminated, truncated, info
