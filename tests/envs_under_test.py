"""Which envs the contract tests run on, and the options each needs in a test run."""

from __future__ import annotations

import importlib.util
import os

import mathgym

#: Constructor options for envs that need some to run offline and fast in tests.
CONTRACT_KWARGS: dict[str, dict] = {
    "ReasoningGym-v0": {"task": "basic_arithmetic", "size": 50},
    "MultiTask-v0": {"envs": {"MathReason-v0": 1.0, "Countdown-v0": 1.0, "GuessNumber-v0": 1.0}},
    "CodeRepair-v0": {"max_turns": 3},
    "Sokoban-v0": {"size": 5, "max_turns": 10},
}

#: Envs with an optional dependency. CI installs every one (the ``dev`` extra), so a missing one
#: is an error there; a local run may set MATHGYM_ALLOW_MISSING_OPTIONAL=1 to leave those envs out.
OPTIONAL_DEPENDENCY = {"ReasoningGym-v0": "reasoning_gym"}


def contract_env_ids() -> list[str]:
    """Every registered env; raises when an env's optional dependency is missing (unless allowed)."""
    ids = []
    allow_missing = os.environ.get("MATHGYM_ALLOW_MISSING_OPTIONAL", "") == "1"
    for env_id in mathgym.list_envs():
        module = OPTIONAL_DEPENDENCY.get(env_id)
        if module is not None and importlib.util.find_spec(module) is None:
            if allow_missing:
                continue
            raise RuntimeError(
                f"{env_id} needs {module!r}, which is not installed: pip install -e '.[dev]' "
                "(or set MATHGYM_ALLOW_MISSING_OPTIONAL=1 to leave it out of a local run)"
            )
        ids.append(env_id)
    return ids
