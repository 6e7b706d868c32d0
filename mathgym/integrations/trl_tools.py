"""Tool-style mathgym envs as TRL ``environment_factory`` classes.

TRL's ``GRPOTrainer(environment_factory=...)`` creates one instance per rollout, calls
``reset(**row)`` with the data set row, exposes every public method as a tool (name,
type hints and Google-style docstring become the tool schema), runs the model's tool
calls in its own loop, and scores the rollout with ``get_reward()``.

Each class here drives one mathgym env: a tool call becomes the env action the env's own
parser reads, the env's reply is the tool result, and ``get_reward`` is the episode's
return. Which class serves an env is decided by the env's class (so subclasses and
renamed ids inherit it); plugins add theirs with :func:`register_tool_environment`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from mathgym.envs.games.frozen_lake import FrozenLakeEnv
from mathgym.envs.games.guess_number import GuessNumberEnv
from mathgym.envs.math.math_tool import MathToolEnv
from mathgym.envs.games.sokoban import SokobanEnv
from mathgym.errors import ConfigError


class MathgymToolEnvironment:
    """Base class: one mathgym env, stepped by tool calls (not itself a tool).

    Args:
        env_id: Registered env id.
        env_kwargs: Its constructor options.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None):
        self._env = gym.make(env_id, **dict(env_kwargs or {}))
        self._return = 0.0
        self._done = False
        self._status = "in_progress"

    def reset(self, **row: Any) -> str | None:
        """Start the episode of the data set row (``seed`` from ``TRLEnv.dataset``); the prompt is in the row."""
        seed = row.get("seed")
        self._env.reset(seed=None if seed is None else int(seed))
        self._return, self._done, self._status = 0.0, False, "in_progress"
        return None

    def get_reward(self) -> float:
        """The episode's return so far (sum of the env's step rewards)."""
        return self._return

    def _step(self, action: str) -> str:
        """Step the env with ``action``; the env's reply, or a closing line once the episode ends."""
        if self._done:
            return f"The episode is over ({self._status}); no more actions are accepted."
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._return += float(reward)
        self._status = str(info.get("status", ""))
        if terminated or truncated:
            self._done = True
            return f"The episode is over: {self._status}."
        return str(observation)


class GuessNumberTools(MathgymToolEnvironment):
    """GuessNumber-v0: guess the secret integer; the env says higher or lower."""

    def guess(self, number: int) -> str:
        """Guess the secret number.

        Args:
            number: The integer you guess.

        Returns:
            Whether the secret is higher or lower than the guess, or that the game is over.
        """
        return self._step(str(number))


class SokobanTools(MathgymToolEnvironment):
    """Sokoban-v0: push every box onto a target."""

    def move(self, directions: str) -> str:
        """Move the player; pushing a box moves it one cell.

        Args:
            directions: One or more of up, down, left, right, separated by spaces.

        Returns:
            The grid after the moves, or that the game is over.
        """
        return self._step(directions)


class FrozenLakeTools(MathgymToolEnvironment):
    """FrozenLakeText-v0: walk from the start to the goal without falling into a hole."""

    def move(self, direction: str) -> str:
        """Take one step on the lake.

        Args:
            direction: One of left, down, right, up.

        Returns:
            The map after the step, or that the game is over.
        """
        return self._step(direction)


class MathToolTools(MathgymToolEnvironment):
    """MathTool-v0: run Python in mathgym's sandbox, then submit the final answer."""

    def python(self, code: str) -> str:
        """Run Python code in a sandbox and read what it prints.

        Args:
            code: A Python program; use print() to see values.

        Returns:
            The program's output (and the end of its error output if it failed).
        """
        return self._step(f"<python>{code}</python>")

    def answer(self, answer: str) -> str:
        """Submit the final answer; this ends the episode.

        Args:
            answer: The final answer (a number or a LaTeX expression).

        Returns:
            Whether the episode is over and how it ended.
        """
        return self._step(f"\\boxed{{{answer}}}")


#: Env class -> tool environment class (looked up along the env class's MRO).
TOOL_ENVIRONMENTS: dict[type, type[MathgymToolEnvironment]] = {
    GuessNumberEnv: GuessNumberTools,
    SokobanEnv: SokobanTools,
    FrozenLakeEnv: FrozenLakeTools,
    MathToolEnv: MathToolTools,
}


def register_tool_environment(env_class: type, tools_class: type[MathgymToolEnvironment]) -> None:
    """Make ``tools_class`` the TRL tool interface of ``env_class`` (and its subclasses)."""
    TOOL_ENVIRONMENTS[env_class] = tools_class


def tool_environment_factory(
    env_id: str, env_kwargs: Mapping[str, Any] | None = None
) -> Callable[[], MathgymToolEnvironment]:
    """A zero-argument factory of the tool environment for ``env_id`` (TRL's ``environment_factory``).

    Raises:
        ConfigError: The env's class has no registered tool interface.
    """
    probe = gym.make(env_id, **dict(env_kwargs or {}))
    env_class = type(probe.unwrapped)
    probe.close()
    for cls in env_class.__mro__:
        if cls in TOOL_ENVIRONMENTS:
            return functools.partial(TOOL_ENVIRONMENTS[cls], env_id, dict(env_kwargs or {}))
    names = ", ".join(sorted(c.__name__ for c in TOOL_ENVIRONMENTS))
    raise ConfigError(
        f"{env_id} ({env_class.__name__}) has no tool interface for TRL's environment_factory (envs with one: "
        f"{names}). Use rollout_func=TRLEnv(...).rollout_func, which drives any env, or add one with "
        "mathgym.integrations.trl_tools.register_tool_environment."
    )
