"""MathStep-v0's process reward shapes and never pays more than solving: repeated or
content-free steps earn nothing, the episode's process total is capped by the outcome
weight, and the step cut off by the budget earns no process reward."""

from __future__ import annotations

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.envs.math.math_step import arithmetic_consistency
from mathgym.errors import ConfigError


def always_one(problem, steps):
    return 1.0


def quarter(problem, steps):
    return 0.25


def _episode(env, seed, actions):
    env.reset(seed=seed)
    rewards, info = [], {}
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        if terminated or truncated:
            break
    return rewards, info


def _solve(env, seed):
    env.reset(seed=seed)
    question = env.unwrapped.task.metadata["question"]
    a, b = question.removeprefix("What is ").rstrip("?").split(" + ")
    total = int(a) + int(b)
    rewards = [env.step(f"{a} + {b} = {total}")[1]]
    _, reward, terminated, _, info = env.step(f"So the answer is \\boxed{{{total}}}.")
    return rewards + [reward], info


def test_repeating_a_true_claim_earns_less_than_solving():
    env = gym.make("MathStep-v0", process_reward=arithmetic_consistency)
    farmed, info = _episode(env, 0, ["1 + 1 = 2"] * 8)
    assert info["status"] == "unparseable" and sum(farmed) <= 0.5
    assert farmed[1:] == [0.0] * 7 and info["process_zeroed"]
    solved, info = _solve(env, 0)
    assert info["correct"] and sum(solved) > sum(farmed) and sum(solved) >= 1.0


def test_variants_of_a_step_and_content_free_steps_earn_nothing():
    env = gym.make("MathStep-v0", process_reward=quarter, process_weight=1.0, process_cap=1.0, max_steps=8)
    rewards, _ = _episode(env, 0, ["1+1=2", " 1 + 1 = 2 ", "1 + 1 = 2.", "1  +  1 =  2!", "...", "$$ \\[ \\] $$", "", "Next."])
    assert rewards[:7] == [0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize(("outcome_weight", "process_cap"), [(1.0, 0.5), (3.0, 0.5), (2.0, 1.0)])
def test_distinct_true_steps_stay_within_the_budget(outcome_weight, process_cap):
    env = gym.make("MathStep-v0", process_reward=always_one, outcome_weight=outcome_weight, process_cap=process_cap)
    rewards, info = _episode(env, 0, [f"{k} + {k} = {2 * k}" for k in range(1, 9)])
    assert sum(rewards) <= process_cap * outcome_weight + 1e-9
    assert sum(rewards) <= outcome_weight  # never more than a right answer pays


def test_the_step_cut_off_by_the_budget_earns_no_process_reward():
    env = gym.make("MathStep-v0", process_reward=quarter, process_weight=1.0, max_steps=2, process_cap=1.0)
    rewards, info = _episode(env, 0, ["First I add.", "Then I think."])
    assert rewards == [0.25, 0.0] and info["reward_breakdown"] == {"process": 0.0, "outcome": 0.0}
    assert info["status"] == "unparseable"


def test_the_default_weight_spreads_the_budget_over_the_step_budget():
    """A full-length solution scored 1 at every step just reaches process_cap * outcome_weight, and
    episodes whose steps score differently keep different process totals (a weight of 1 would pay
    the whole budget at the first step, whatever the later steps' scores)."""
    env = gym.make("MathStep-v0", process_reward=always_one, max_steps=4, outcome_weight=2.0, process_cap=0.5)
    assert env.unwrapped.process_weight == pytest.approx(0.5 * 2.0 / 4)
    rewards, info = _episode(env, 0, [f"{k} + {k} = {2 * k}" for k in range(1, 4)] + ["I stop here."])
    assert rewards == pytest.approx([0.25, 0.25, 0.25, 0.0]) and "process_zeroed" not in info
    totals = []
    for score in (0.2, 0.6, 1.0):
        env = gym.make("MathStep-v0", process_reward=lambda problem, steps, s=score: s, max_steps=8)
        totals.append(sum(_episode(env, 0, [f"{k} + 1 = {k + 1}" for k in range(1, 4)])[0]))
    assert totals == pytest.approx([3 * s * 0.5 / 8 for s in (0.2, 0.6, 1.0)])
    assert gym.make("MathStep-v0", process_reward=always_one, process_only=True).unwrapped.process_weight == 1.0


def test_process_reward_still_shapes_a_solution():
    env = gym.make("MathStep-v0", process_reward=arithmetic_consistency, process_weight=0.25)
    rewards, info = _solve(env, 3)
    assert rewards[0] == 0.25 and info["reward_breakdown"]["outcome"] == 1.0


@pytest.mark.parametrize("cap", [-0.1, 1.5])
def test_process_cap_is_a_share(cap):
    with pytest.raises(ConfigError, match="process_cap"):
        gym.make("MathStep-v0", process_cap=cap)
