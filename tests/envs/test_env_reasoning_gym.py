"""ReasoningGym-v0: reference answers score 1, wrong ones do not, tasks are listed."""

from __future__ import annotations

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.errors import ConfigError

reasoning_gym = pytest.importorskip("reasoning_gym")

SAMPLE_TASKS = ["basic_arithmetic", "gsm_symbolic", "spell_backward", "word_sorting", "mini_sudoku", "maze", "gcd", "letter_counting"]


@pytest.mark.parametrize("task", SAMPLE_TASKS)
def test_reasoning_gym_reference_answers_score_one_and_wrong_ones_do_not(task):
    env = gym.make("ReasoningGym-v0", task=task, size=20)
    for index in range(5):
        obs, info = env.reset(options={"task_index": index})
        assert info["task_id"] == f"rg-{task}-0-{index}" and obs
        _, reward, terminated, truncated, info = env.step("Reasoning... " + env.unwrapped.expert_action())
        assert reward == 1.0 and info["status"] == "correct" and terminated and not truncated
        env.reset(options={"task_index": index})
        _, reward, _, _, info = env.step("<answer>certainly not this</answer>")
        assert reward < 1.0 and info["status"] in ("wrong", "partial")


def test_reasoning_gym_unparseable_seeding_and_bad_task():
    env = gym.make("ReasoningGym-v0", task="chain_sum", size=50)
    obs_a, info_a = env.reset(seed=3)
    obs_b, info_b = gym.make("ReasoningGym-v0", task="chain_sum", size=50).reset(seed=3)
    assert obs_a == obs_b and info_a["task_id"] == info_b["task_id"]
    _, reward, _, _, info = env.step("I think it is 12")
    assert info["status"] == "unparseable" and reward == 0.0
    env.reset(seed=3)
    _, reward, _, _, info = env.step(f"\\boxed{{{env.unwrapped.task.answer}}}")
    assert reward == 1.0
    with pytest.raises(ConfigError, match="gsm_symbolic"):
        gym.make("ReasoningGym-v0", task="gsm_symbolc")
    with pytest.raises(ConfigError):
        gym.make("ReasoningGym-v0", task="composite").reset(seed=0)  # needs a config: a clear error


@pytest.mark.parametrize("task", ["countdown", "sentence_reordering", "rubiks_cube"])
def test_an_empty_answer_is_no_answer_and_asks_no_scorer(task):
    """reasoning-gym's own scorers of these pay 0.01-0.05 for an empty answer (issue 48); rubiks_cube's
    items have no reference answer, which an empty one does not match either."""
    env = gym.make("ReasoningGym-v0", task=task, size=20)
    for action in ("\\boxed{}", "<answer>  \n</answer>", "<think>it is 3</think><answer></answer>"):
        env.reset(options={"task_index": 0})
        _, reward, _, _, info = env.step(action)
        assert reward == 0.0 and info["status"] == "unparseable" and info["extracted_answer"] == "", action


def test_reasoning_gym_tasks_are_listed_by_mathgym_envs(capsys):
    from mathgym.cli import main

    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for task in ("gsm_symbolic", "sudoku", "zebra_puzzles", "basic_arithmetic"):
        assert task in out


def test_reasoning_gym_hostile_answer_times_out_instead_of_hanging():
    # intermediate_integration hands the answer to sympy; this one ran for over a minute in-process.
    env = gym.make("ReasoningGym-v0", task="intermediate_integration", size=5, score_timeout=2)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("<answer>exp(exp(exp(exp(x**99999))))</answer>")
    assert terminated and reward == 0.0 and info["status"] == "timeout"
    env.reset(seed=0)
    assert env.step(env.unwrapped.expert_action())[1] == 1.0
    with pytest.raises(ConfigError):
        gym.make("ReasoningGym-v0", score_timeout=0)
