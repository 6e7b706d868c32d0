"""Which envs the contract tests run on, and the options each needs in a test run."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import mathgym

#: Constructor options for envs that need some to run offline and fast in tests.
CONTRACT_KWARGS: dict[str, dict] = {
    "ReasoningGym-v0": {"task": "basic_arithmetic", "size": 50},
    "MultiTask-v0": {"envs": {"MathReason-v0": 1.0, "Countdown-v0": 1.0, "GuessNumber-v0": 1.0}},
    "CodeRepair-v0": {"max_turns": 3},
    "Sokoban-v0": {"size": 5, "max_turns": 10},
    "Game2048-v0": {"difficulty": 0, "max_turns": 10},
    "Hangman-v0": {"max_turns": 10},
    "Minesweeper-v0": {"difficulty": 0},
    # tests/mcp_fixture_server.py, a third-party-style MCP server, started over stdio (one per process).
    "MCPTools-v0": {"server": [sys.executable, str(Path(__file__).with_name("mcp_fixture_server.py"))], "call_timeout_s": 10.0},
    # tests/openenv_fixture.py: a small OpenEnv environment on OpenEnv's own base classes, in process.
    "OpenEnv-v0": {"env": "tests.openenv_fixture:GuessEnvironment"},
    # tests/verifiers_fixture.py: a small verifiers (v1) taskset on verifiers' own base classes.
    "Verifiers-v0": {"env": "tests.verifiers_fixture:SumTaskset"},
}

#: The ReasoningGym/<task>-v0 ids whose whole contract runs in every test run (one per kind of task:
#: arithmetic, words, games, graphs, logic, probability). Every id is registered and built by
#: tests/envs/test_reasoning_gym_ids.py; MATHGYM_CONTRACT_ALL_REASONING_GYM=1 (or `pytest -m heavy`
#: there) runs the contract on all of them.
REASONING_GYM_SAMPLE = (
    "ReasoningGym/basic_arithmetic-v0", "ReasoningGym/spell_backward-v0", "ReasoningGym/maze-v0",
    "ReasoningGym/family_relationships-v0", "ReasoningGym/syllogism-v0", "ReasoningGym/coin_flip-v0",
)
REASONING_GYM_PREFIX = "ReasoningGym/"
#: The TextArena/<game>-v0 ids in every contract run (the rest share their class): a board game and an
#: imperfect-information one; tests/envs/test_two_player.py builds every listed id. Single-player: a guessing
#: game and a puzzle; tests/envs/test_textarena_single.py builds every id.
TEXTARENA_SAMPLE = ("TextArena/TicTacToe-v0", "TextArena/KuhnPoker-v0", "TextArena/GuessTheNumber-v0", "TextArena/TowerOfHanoi-v0")
TEXTARENA_PREFIX = "TextArena/"

#: Envs with an optional dependency. CI installs every one (the ``dev`` extra), so a missing one
#: is an error there; a local run may set MATHGYM_ALLOW_MISSING_OPTIONAL=1 to leave those envs out.
OPTIONAL_DEPENDENCY = {"ReasoningGym-v0": "reasoning_gym", "MCPTools-v0": "mcp", "OpenEnv-v0": "openenv"}
#: Envs whose package conflicts with the main venv's pins (verifiers: mcp==2.0.0, openai<3): CI tests them
#: in a venv layered over the main one (.ci/run); where the package is missing they are left out.
LAYERED_VENV_DEPENDENCY = {"Verifiers-v0": "verifiers"}


def needs_layered_venv(env_id: str) -> bool:
    """Whether ``env_id``'s package lives in a layered venv and is missing from this one."""
    module = LAYERED_VENV_DEPENDENCY.get(env_id)
    return module is not None and importlib.util.find_spec(module) is None


#: Envs graded by an LLM judge: in a test run, the fixture judge served on 127.0.0.1 (tests/judge_server.py).
JUDGED_ENVS = ("OpenQA-v0",)


def contract_kwargs(env_id: str) -> dict:
    """The constructor options of ``env_id`` in a contract run."""
    if env_id.startswith(REASONING_GYM_PREFIX):
        return {"size": 50}
    if env_id in JUDGED_ENVS:
        from tests.judge_server import fixture_judge_url

        return {"judge_url": fixture_judge_url(), "judge_model": "fixture-judge", "judge_options": {"timeout_s": 10.0}}
    if env_id == "NeMoGym-v0":  # nemo-gym's mcqa server, from a Python >= 3.12 venv (a skip saying why without one)
        from tests.nemo_gym_servers import contract_kwargs as nemo_gym_kwargs

        return nemo_gym_kwargs()
    return CONTRACT_KWARGS.get(env_id, {})


def contract_env_ids() -> list[str]:
    """Every registered env (of the ReasoningGym/<task>-v0 and TextArena/<game>-v0 ids, the samples); raises when an env's optional dependency is missing (unless allowed)."""
    ids = []
    allow_missing = os.environ.get("MATHGYM_ALLOW_MISSING_OPTIONAL", "") == "1"
    every_task = os.environ.get("MATHGYM_CONTRACT_ALL_REASONING_GYM", "") == "1"
    for env_id in mathgym.list_envs():
        if env_id.startswith(REASONING_GYM_PREFIX) and env_id not in REASONING_GYM_SAMPLE and not every_task:
            continue
        if env_id.startswith(TEXTARENA_PREFIX) and env_id not in TEXTARENA_SAMPLE:
            continue
        if needs_layered_venv(env_id):
            continue
        module = "reasoning_gym" if env_id.startswith(REASONING_GYM_PREFIX) else OPTIONAL_DEPENDENCY.get(env_id)
        module = "textarena" if env_id.startswith(TEXTARENA_PREFIX) else module
        if module is not None and importlib.util.find_spec(module) is None:
            if allow_missing:
                continue
            raise RuntimeError(
                f"{env_id} needs {module!r}, which is not installed: pip install -e '.[dev]' "
                "(or set MATHGYM_ALLOW_MISSING_OPTIONAL=1 to leave it out of a local run)"
            )
        ids.append(env_id)
    return ids
