"""Which envs the contract tests run on, and the options each needs in a test run."""

from __future__ import annotations

import importlib.util

import mathgym

#: Constructor options for envs that need some to run offline and fast in tests.
CONTRACT_KWARGS: dict[str, dict] = {
    "ReasoningGym-v0": {"task": "basic_arithmetic", "size": 50},
    "MultiTask-v0": {"envs": {"MathReason-v0": 1.0, "Countdown-v0": 1.0, "GuessNumber-v0": 1.0}},
    "CodeRepair-v0": {"max_turns": 3},
    "Sokoban-v0": {"size": 5, "max_turns": 10},
}

#: Envs whose optional dependency is missing are skipped with the reason.
OPTIONAL_DEPENDENCY = {"ReasoningGym-v0": "reasoning_gym"}


def contract_env_ids() -> list[str]:
    ids = []
    for env_id in mathgym.list_envs():
        module = OPTIONAL_DEPENDENCY.get(env_id)
        if module is None or importlib.util.find_spec(module) is not None:
            ids.append(env_id)
    return ids
