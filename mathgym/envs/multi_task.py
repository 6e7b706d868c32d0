"""MultiTask-v0: a weighted mixture of registered envs (multi-domain RLVR).

Each ``reset`` draws the source env from the mixture with ``self.np_random`` and resets
it with a seed drawn from the same generator, so one seed fixes both the source and its
task. Steps go to the drawn env unchanged; ``info["source_env"]`` names it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from mathgym.core import Task, TextEnv
from mathgym.errors import ConfigError, ResetNeededError
from mathgym.registry import resolve_env_id

DEFAULT_MIXTURE: Mapping[str, float] = {"MathReason-v0": 0.5, "Countdown-v0": 0.5}


class MultiTaskEnv(TextEnv):
    """Each episode comes from one env of a weighted mixture; ``info["source_env"]`` names it.

    Args:
        envs: Env id → weight (weights are normalised), or a list of ids (equal weights).
        env_kwargs: Env id → constructor options of that env.
        render_mode: ``None`` or ``"ansi"`` (passed on to every env).

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("MultiTask-v0", envs={"MathReason-v0": 0.5, "Countdown-v0": 0.5})
        >>> obs, info = env.reset(seed=0)
        >>> info["source_env"] in ("MathReason-v0", "Countdown-v0")
        True

    ``reset(options=...)`` passes options on to the drawn env, except ``"env_id"``, which
    forces the source env.
    """

    def __init__(
        self,
        envs: Mapping[str, float] | Sequence[str] | None = None,
        env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        render_mode: str | None = None,
    ):
        mixture = dict(DEFAULT_MIXTURE if envs is None else envs if isinstance(envs, Mapping) else dict.fromkeys(envs, 1.0))
        if not mixture:
            raise ConfigError("envs is empty; give at least one env id, e.g. {'MathReason-v0': 1.0}.")
        ids = [resolve_env_id(env_id) for env_id in mixture]
        weights = np.array([float(w) for w in mixture.values()], dtype=np.float64)
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise ConfigError(f"envs weights {list(mixture.values())} must be non-negative numbers with a positive sum.")
        if "MultiTask-v0" in ids:
            raise ConfigError("MultiTask-v0 cannot contain itself.")
        kwargs = {resolve_env_id(k): dict(v) for k, v in (env_kwargs or {}).items()}
        unknown = set(kwargs) - set(ids)
        if unknown:
            raise ConfigError(f"env_kwargs names env(s) not in the mixture: {sorted(unknown)}; the mixture has {ids}.")
        self.env_ids, self.weights = ids, weights / weights.sum()
        self.envs: dict[str, TextEnv] = {}
        for env_id in ids:
            env = gym.make(env_id, render_mode=render_mode, **kwargs.get(env_id, {})).unwrapped
            if not isinstance(env, TextEnv):
                raise ConfigError(f"{env_id} is not a mathgym TextEnv; MultiTask-v0 mixes TextEnv subclasses only.")
            self.envs[env_id] = env
        longest = max(env.max_length for env in self.envs.values())
        super().__init__(max_turns=max(env.max_turns for env in self.envs.values()), max_length=longest, render_mode=render_mode)
        self.system_prompt = None
        self.source_env: str | None = None

    def answer_bounds(self) -> dict[tuple[str, ...], int]:
        """Each mixed env's bounds, under ``env_kwargs`` → its id: an action goes to the drawn env,
        which refuses it past its own ``max_length`` (this env's spaces hold the longest)."""
        return {
            ("env_kwargs", env_id, *path): bound
            for env_id, env in self.envs.items()
            for path, bound in env.answer_bounds().items()
        }

    @property
    def active(self) -> TextEnv:
        """The env of the current episode."""
        if self.source_env is None:
            raise ResetNeededError("MultiTaskEnv: call reset() before step().")
        return self.envs[self.source_env]

    @property
    def task(self) -> Task:
        return self.active.task

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        gym.Env.reset(self, seed=seed)
        options = dict(options or {})
        forced = options.pop("env_id", None)
        if forced is not None:
            forced = resolve_env_id(forced)
            if forced not in self.envs:
                raise ConfigError(f"options['env_id']={forced!r} is not in the mixture {self.env_ids}.")
        choice = int(self.np_random.choice(len(self.env_ids), p=self.weights))
        sub_seed = int(self.np_random.integers(2**31 - 1))
        self.source_env = forced or self.env_ids[choice]
        obs, info = self.active.reset(seed=sub_seed, options=options)
        return obs, self._tag(info)

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.active.step(action)
        return obs, reward, terminated, truncated, self._tag(info)

    def _tag(self, info: dict[str, Any]) -> dict[str, Any]:
        info = copy.copy(info)
        info["source_env"] = self.source_env
        info["task_id"] = f"{self.source_env}/{info['task_id']}"
        return info

    def render(self) -> str | None:
        return self.active.render() if self.source_env is not None else None

    def expert_action(self) -> str | None:
        """The drawn env's expert action, where it has one."""
        expert = getattr(self.active, "expert_action", None)
        return expert() if expert is not None else None
