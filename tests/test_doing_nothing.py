"""Doing nothing earns nothing, on every registered env (issue 48): an empty action, and each
env's own no-op (submitting the repository untouched, a stub function, a move into a wall, a
reply that ignores the request), never earns a positive reward over a whole episode.

A reward for doing nothing is most of the signal an RL run sees early on: a policy learns to
submit the untouched repository (which paid 0.75 in RepoRepair-v0) rather than to fix it.
The envs that still pay for a no-op are listed in :data:`KNOWN_PAYING` with where the fix
belongs; those cases are strict xfails, so fixing one makes its case fail until it is taken off.
"""

from __future__ import annotations

import re
import warnings

import gymnasium as gym
import pytest

import mathgym

from tests.envs_under_test import REASONING_GYM_PREFIX, contract_env_ids, contract_kwargs

SEEDS = range(3)
MAX_STEPS = 40


def _stub(obs: str, env: gym.Env, value: str = "None") -> str:
    """A function of the name the task asks for that does nothing (returns ``value``)."""
    name = re.search(r"def (\w+)\(", env.unwrapped.task.prompt).group(1)
    return f"```python\ndef {name}(*args, **kwargs):\n    return {value}\n```"


def _stub_zero(obs: str, env: gym.Env) -> str:
    return _stub(obs, env, "0")


#: Each env's no-op: (case name, constructor options, the action sent every turn, or a function of the observation).
NO_OPS: dict[str, list[tuple[str, dict, object]]] = {
    "RepoRepair-v0": [(f"submit untouched, level {level}", {"level": level}, "<submit/>") for level in (0, 1, 2)],
    "SQLQuery-v0": [("an empty answer", {}, "<answer></answer>"), ("a query that selects nothing", {}, "<answer>SELECT NULL</answer>")],
    "CodeSandbox-v0": [("a stub returning None", {}, _stub),
                       ("a stub returning 0, partial credit", {"reward_mode": "fraction"}, _stub_zero),
                       ("a stub returning 0", {}, _stub_zero)],
    "CodeRepair-v0": [("a stub returning 0, partial credit", {"reward_mode": "fraction", "max_turns": 3}, _stub_zero),
                      ("a stub returning 0", {"max_turns": 3}, _stub_zero)],
    "InstructionFollow-v0": [("a reply that ignores the request", {}, "I don't know.")],
    "MathReason-v0": [("an empty box", {}, "\\boxed{}")],
    "Countdown-v0": [("an empty box", {}, "\\boxed{}")],
    "MathTool-v0": [("an empty box", {}, "\\boxed{}")],
    "MathStep-v0": [("an empty box", {}, "\\boxed{}")],
    "GuessNumber-v0": [("the same guess every turn", {}, "50")],
    "Sokoban-v0": [("walking into a wall", {"size": 5, "max_turns": 10}, "up"), ("the other wall", {"size": 5, "max_turns": 10}, "left")],
    "FrozenLakeText-v0": [("walking into the edge", {}, "left"), ("the top edge", {}, "up")],
    "Game2048-v0": [("the same move every turn", {"difficulty": 0, "max_turns": 10}, "up")],
    "Hanoi-v0": [("moving a peg onto itself", {}, "A->A")],
    "Hangman-v0": [("the same letter every turn", {"max_turns": 10}, "E")],
    "Wordle-v0": [("the same word every turn", {}, "RAISE")],
    "Mastermind-v0": [("the same code every turn", {}, "1122")],
    "Minesweeper-v0": [("flagging one cell over and over", {"difficulty": 0}, "flag A1")],
}
#: ReasoningGym data sets get an empty final answer as their no-op.
REASONING_GYM_NO_OP = ("an empty box", {"size": 50}, "\\boxed{}")

#: Cases that still pay for doing nothing, outside RepoRepair-v0's and SQLQuery-v0's code, with where the fix belongs.
KNOWN_PAYING: dict[tuple[str, str], str] = {}


def _best_episode_reward(env_id: str, options: dict, action) -> float:
    """The highest reward of any step of an episode of ``action`` sent every turn, over :data:`SEEDS`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(env_id, **options)
    best = float("-inf")
    try:
        for seed in SEEDS:
            obs, _ = env.reset(seed=seed)
            for _ in range(MAX_STEPS):
                obs, reward, terminated, truncated, _ = env.step(action(obs, env) if callable(action) else action)
                best = max(best, reward)
                if terminated or truncated:
                    break
    finally:
        env.close()
    return best


@pytest.mark.parametrize("env_id", contract_env_ids())
def test_an_empty_action_earns_nothing(env_id):
    assert _best_episode_reward(env_id, contract_kwargs(env_id), "") <= 0.0


def _no_op_cases() -> list:
    registered = set(mathgym.list_envs())
    cases = [(env_id, *case) for env_id, listed in NO_OPS.items() if env_id in registered for case in listed]
    cases += [(env_id, *REASONING_GYM_NO_OP) for env_id in sorted(registered) if env_id.startswith(REASONING_GYM_PREFIX)]
    return [pytest.param(*case, id=f"{case[0]}: {case[1]}",
                         marks=[pytest.mark.xfail(strict=True, reason=KNOWN_PAYING[case[:2]])] if case[:2] in KNOWN_PAYING else [])
            for case in cases]


def test_every_env_with_a_no_op_is_listed():
    assert set(NO_OPS) <= set(mathgym.list_envs())


@pytest.mark.parametrize(("env_id", "case", "options", "action"), _no_op_cases())
def test_a_no_op_earns_nothing(env_id, case, options, action):
    assert _best_episode_reward(env_id, options, action) <= 0.0
