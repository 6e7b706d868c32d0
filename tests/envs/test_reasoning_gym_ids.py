"""ReasoningGym/<task>-v0: one id per reasoning-gym task, registered without importing reasoning-gym."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import pytest

import mathgym
from mathgym.checks import run_checks
from mathgym.envs.interop.reasoning_gym_tasks import REASONING_GYM_TASKS, WITHOUT_ID, task_env_id
from mathgym.errors import ConfigError

TASK_IDS = [task_env_id(task) for task, _ in REASONING_GYM_TASKS]


def test_import_registers_every_id_without_importing_reasoning_gym():
    code = (
        "import sys, mathgym; ids = [i for i in mathgym.list_envs() if i.startswith('ReasoningGym/')]; "
        "print(len(ids), 'reasoning_gym' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(len(REASONING_GYM_TASKS)), "False"]
    listed = mathgym.list_envs()
    assert all(env_id in listed and "reasoning-gym" in listed[env_id] for env_id in TASK_IDS)


def test_the_shipped_list_is_the_installed_reasoning_gym():
    pytest.importorskip("reasoning_gym")
    from reasoning_gym.factory import DATASETS

    shipped = {task for task, _ in REASONING_GYM_TASKS}
    assert shipped == set(DATASETS) - WITHOUT_ID, (
        "update REASONING_GYM_TASKS: python -m mathgym.envs.interop.reasoning_gym_tasks"
    )
    for task, category in REASONING_GYM_TASKS:
        assert DATASETS[task][0].__module__.split(".")[1] == category, task


def test_every_id_builds_and_resets():
    pytest.importorskip("reasoning_gym")
    for env_id in TASK_IDS:
        env = gym.make(env_id, size=5)
        obs, info = env.reset(seed=0)
        assert obs and info["task_id"].startswith(f"rg-{env.unwrapped.task_name}-"), env_id


def test_difficulty_is_the_tasks_curriculum_level():
    pytest.importorskip("reasoning_gym")
    easy = gym.make("ReasoningGym/basic_arithmetic-v0", difficulty=0, size=20)
    hard = gym.make("ReasoningGym/basic_arithmetic-v0", difficulty=3, size=20)
    obs_easy, info = easy.reset(seed=1)
    obs_hard, _ = hard.reset(seed=1)
    assert info["task_id"].endswith("-L0") and len(obs_easy) < len(obs_hard)
    assert easy.step(easy.unwrapped.expert_action())[1] == 1.0
    with pytest.raises(ConfigError, match="from 0 to"):
        gym.make("ReasoningGym/basic_arithmetic-v0", difficulty=99)
    with pytest.raises(ConfigError, match="no curriculum"):
        gym.make("ReasoningGym/gsm_symbolic-v0", difficulty=0)


def test_an_item_is_the_same_on_every_draw():
    # list_functions draws from Python's global random: the env seeds it per item.
    pytest.importorskip("reasoning_gym")
    first = gym.make("ReasoningGym/list_functions-v0", size=5).reset(seed=3)[0]
    assert gym.make("ReasoningGym/list_functions-v0", size=5).reset(seed=3)[0] == first


@pytest.mark.heavy
@pytest.mark.parametrize("env_id", TASK_IDS)
def test_contract_of_every_task_id(env_id):
    pytest.importorskip("reasoning_gym")
    failures = [f"{r.name}: {r.detail}" for r in run_checks(env_id, {"size": 50}) if not r.passed]
    assert not failures, "\n".join(failures)
