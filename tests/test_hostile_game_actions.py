"""Hostile actions on the games and InstructionFollow-v0: huge, nested, Unicode-broken text is scored
with a documented status, never an exception, at the env's full bound (131,072 characters by
default: a reasoning model's 32k-token answer). What a step costs is measured by
``benchmarks/bench_long_answers.py``; here a step that hangs fails."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.rewards.base import Status
from tests.test_hostile_actions import HANG_S, _step_or_fail

ENVS = ("Wordle-v0", "Mastermind-v0", "Minesweeper-v0", "Game2048-v0", "Hanoi-v0", "Hangman-v0", "InstructionFollow-v0")
#: Each hostile action as a function of the length wanted.
HOSTILE: dict[str, Callable[[int], str]] = {
    "letters": lambda n: "a" * n,
    "digits": lambda n: "1" * n,
    "spaced_letters": lambda n: "a " * (n // 2),
    "spaced_digits": lambda n: "1 " * (n // 2),
    "coordinates": lambda n: "B3 " * (n // 3),
    "moves": lambda n: "A->C left " * (n // 10),
    "open_boxes": lambda n: "\\boxed{" * (n // 7),
    "nested_boxes": lambda n: "\\boxed{" * (n // 16) + "x" + "}" * (n // 16),
    "brackets": lambda n: "[" * n,
    "stars": lambda n: "*a" * (n // 2),
    "dots": lambda n: "." * (n - 1) + "x",
    "quotes": lambda n: "'a" * (n // 2),
    "lone_surrogates": lambda n: "\ud800\udfff" * (n // 2),
    "nul_and_escapes": lambda n: "\x00\x1b[2J" * (n // 5),
    "mixed_scripts": lambda n: "ｃｒａｎｅ１２３４Ⅻ" * (n // 10),
    "empty": lambda n: "",
}
STATUSES = set(Status)
assert HANG_S  # a step past it fails (tests.test_hostile_actions._step_or_fail)


@pytest.mark.parametrize("env_id", ENVS)
def test_hostile_actions_at_the_bound_get_a_status(env_id):
    env = gym.make(env_id, difficulty=1)
    max_length = env.unwrapped.max_length
    for name, shape in HOSTILE.items():
        env.reset(seed=0)
        action = shape(max_length)
        assert len(action) <= max_length, name
        obs, reward, _, _, info = _step_or_fail(env, action, f"{env_id} {name} {len(action)} chars")
        assert info["status"] in STATUSES and info["status"] is not Status.TOO_LONG, (name, info["status"])
        assert isinstance(reward, float) and 0.0 <= reward <= 1.0, name
        assert isinstance(obs, str) and len(obs) < 20_000, name  # nothing of the action is echoed back in bulk
        obs.encode("utf-8")  # the env's reply is valid text
    env.close()
