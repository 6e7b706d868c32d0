"""MathStep-v0 and MultiTask-v0."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest

import mathgym  # noqa: F401
from mathgym.envs.math.math_step import arithmetic_consistency, solution_steps
from mathgym.errors import ConfigError, EpisodeFinishedError, ResetNeededError


def _expert_episode(env, seed):
    env.reset(seed=seed)
    rewards, info = [], None
    while True:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        rewards.append(reward)
        if terminated or truncated:
            return rewards, info, terminated


# -- MathStep -------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0, 2, 4])
def test_math_step_expert_steps_earn_outcome_reward_on_the_last_step_only(level):
    env = gym.make("MathStep-v0", difficulty=level)
    for seed in range(10):
        rewards, info, terminated = _expert_episode(env, seed)
        assert terminated and info["correct"] and info["status"] == "correct"
        assert rewards[-1] == 1.0 and all(r == 0.0 for r in rewards[:-1])
        assert len(rewards) >= 2


def test_math_step_observation_holds_problem_and_steps_and_budget_truncates():
    env = gym.make("MathStep-v0", max_steps=3)
    obs, info = env.reset(seed=5)
    problem = env.unwrapped.task.metadata["question"]
    obs, reward, terminated, truncated, info = env.step("First I look at the numbers.")
    assert problem in obs and "Step 1: First I look at the numbers." in obs and info["status"] == "in_progress"
    env.step("Then I think harder.")
    _, reward, terminated, truncated, info = env.step("Still thinking.")
    assert truncated and not terminated and info["status"] == "unparseable" and not info["correct"]
    assert len([m for m in info["messages"] if m["role"] == "assistant"]) == 3
    with pytest.raises(EpisodeFinishedError):
        env.step("more")


def test_math_step_wrong_final_answer_scores_zero():
    env = gym.make("MathStep-v0")
    env.reset(seed=1)
    gold = env.unwrapped.task.answer
    _, reward, terminated, _, info = env.step(f"\\boxed{{{int(gold) + 1}}}")
    assert terminated and reward == 0.0 and info["status"] == "wrong" and info["answer"] == gold


def _crashing_prm(problem, steps):
    raise RuntimeError("reward model is down")


def test_math_step_process_reward_is_pluggable_and_its_crash_is_infrastructure():
    env = gym.make("MathStep-v0", process_reward=arithmetic_consistency, process_weight=0.5)
    env.reset(seed=0)
    a, b = env.unwrapped.task.metadata["question"].removeprefix("What is ").rstrip("?").split(" + ")
    _, reward, _, _, info = env.step(f"{a} + {b} = {int(a) + int(b)}")
    assert reward == 0.5 and info["reward_breakdown"] == {"process": 0.5, "outcome": 0.0}
    _, reward, _, _, info = env.step(f"{a} + {b} = {int(a) + int(b) + 1}, so \\boxed{{{int(a) + int(b)}}}")
    assert reward == 1.0 and info["reward_breakdown"] == {"process": 0.0, "outcome": 1.0}
    clone = pickle.loads(pickle.dumps(gym.make("MathStep-v0", process_reward=arithmetic_consistency)))
    assert clone.unwrapped.process_reward is arithmetic_consistency
    env = gym.make("MathStep-v0", process_reward=_crashing_prm)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("a step")
    assert info["status"] == "error" and reward == 0.0 and "reward model is down" in info["process_reward_error"]


def test_solution_steps_splits_lines_and_sentences():
    assert solution_steps("2 + 2 = 4. \\boxed{4}", "4") == ["2 + 2 = 4.", "\\boxed{4}"]
    assert solution_steps("She has 3.\nShe buys 2 more.\n#### 5", "5") == ["She has 3.", "She buys 2 more.", "\\boxed{5}"]
    assert solution_steps("It is five", "5")[-1] == "The answer is \\boxed{5}."
    assert arithmetic_consistency("", ["3 + 4 = 7 and 2 * 5 = 11"]) == 0.5
    assert arithmetic_consistency("", ["no claims here"]) == 0.0


# -- MultiTask ------------------------------------------------------------------------


def test_multi_task_mixes_sources_by_weight_and_seeds_deterministically():
    env = gym.make("MultiTask-v0", envs={"MathReason-v0": 0.75, "Countdown-v0": 0.25})
    sources = [env.reset(seed=seed)[1]["source_env"] for seed in range(400)]
    share = sources.count("MathReason-v0") / len(sources)
    assert 0.68 < share < 0.82, share
    other = gym.make("MultiTask-v0", envs={"MathReason-v0": 0.75, "Countdown-v0": 0.25})
    for seed in (0, 1, 2, 99):
        (obs_a, info_a), (obs_b, info_b) = env.reset(seed=seed), other.reset(seed=seed)
        assert obs_a == obs_b and info_a["task_id"] == info_b["task_id"] and info_a["task_id"].startswith(info_a["source_env"])
    env.reset(seed=7)
    other.reset(seed=7)
    stream_a = [env.reset()[0] for _ in range(5)]
    stream_b = [other.reset()[0] for _ in range(5)]
    assert stream_a == stream_b and len(set(stream_a)) > 1


def test_multi_task_delegates_steps_and_names_the_source_at_the_end():
    env = gym.make("MultiTask-v0", envs=["GuessNumber-v0", "Countdown-v0"], env_kwargs={"GuessNumber-v0": {"high": 10}})
    with pytest.raises(ResetNeededError):
        env.unwrapped.step("1")
    obs, info = env.reset(seed=0, options={"env_id": "GuessNumber-v0"})
    assert info["source_env"] == "GuessNumber-v0" and "1 to 10" in obs
    env.reset(seed=0, options={"env_id": "GuessNumber-v0"})
    while True:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        assert info["source_env"] == "GuessNumber-v0"
        if terminated or truncated:
            break
    assert reward == 1.0 and info["correct"]
    with pytest.raises(ConfigError):
        gym.make("MultiTask-v0", envs={"MathReason-v0": -1.0})
    with pytest.raises(ConfigError):
        gym.make("MultiTask-v0", envs=["MathReason-v0"], env_kwargs={"Countdown-v0": {}})
    with pytest.raises(KeyError):
        gym.make("MultiTask-v0", envs=["MathReasn-v0"])


def test_multi_task_vector_envs_agree():
    seeds = [11, 11, 12]
    got = []
    for mode in ("sync", "async"):
        vec = gym.make_vec("MultiTask-v0", len(seeds), vectorization_mode=mode, envs=["MathReason-v0", "Countdown-v0", "Sokoban-v0"])
        try:
            obs, infos = vec.reset(seed=seeds)
            got.append((tuple(obs), tuple(infos["source_env"])))
        finally:
            vec.close()
    assert got[0] == got[1] and got[0][0][0] == got[0][0][1]
    assert np.all(np.asarray(got[0][1]) != None)  # noqa: E711


@pytest.mark.parametrize(
    "env_id,kwargs",
    [(env_id, {"max_turns": 3}) for env_id in ("GuessNumber-v0", "Sokoban-v0", "FrozenLakeText-v0", "MathTool-v0", "CodeRepair-v0")]
    + [("MathStep-v0", {"max_steps": 3})],
)
def test_multi_turn_envs_keep_the_transcript_and_render_it(env_id, kwargs):
    env = gym.make(env_id, render_mode="ansi", **kwargs)
    obs, info = env.reset(seed=0)
    actions = ["first try", "second try", "third try"]
    for action in actions:
        obs, _, terminated, truncated, info = env.step(action)
    assert truncated and not terminated and info["turn"] == 3
    roles = [m["role"] for m in info["messages"] if m["role"] != "system"]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert [m["content"] for m in info["messages"] if m["role"] == "assistant"] == actions
    text = env.render()
    assert all(action in text for action in actions) and f"[answer]\n{info['answer']}" in text
