"""Countdown-v0, GuessNumber-v0, Sokoban-v0, FrozenLakeText-v0: scripted agents win, random ones do not."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import mathgym  # noqa: F401
from mathgym.envs.math.countdown import ExpressionError, evaluate, extract_expression, generate_instance, solve
from mathgym.envs.games.sokoban import apply_move, generate_level
from mathgym.envs.games.sokoban import solve as solve_sokoban
from mathgym.errors import ConfigError


def _play(env, policy, seed):
    obs, info = env.reset(seed=seed)
    total, steps = 0.0, 0
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(env))
        total += reward
        steps += 1
        if terminated or truncated:
            return total, info, steps


# -- Countdown ----------------------------------------------------------------------


@pytest.mark.parametrize("count", [3, 4, 5, 6])
def test_countdown_solver_finds_a_solution_for_every_generated_instance(count):
    rng = np.random.default_rng(count)
    for _ in range(40 if count < 6 else 15):
        numbers, target, expression = generate_instance(rng, count)
        assert len(numbers) == count and 10 <= target <= 999 and target not in numbers
        assert evaluate(expression).value == target
        found = solve(numbers, target)
        assert found is not None, (numbers, target)
        result = evaluate(found)
        assert result.value == target
        assert not (np.bincount(result.numbers, minlength=101) > np.bincount(numbers, minlength=101)).any()


def test_countdown_expert_wins_and_wrong_answers_lose():
    env = gym.make("Countdown-v0", num_numbers=4)
    for seed in range(20):
        assert _play(env, lambda e: e.unwrapped.expert_action(), seed)[0] == 1.0
    env.reset(seed=0)
    numbers = env.unwrapped.task.metadata["numbers"]
    _, reward, _, _, info = env.step(f"\\boxed{{{numbers[0]} + {numbers[1]} + 1000}}")
    assert reward == 0.0 and info["status"] == "format_error"  # 1000 is not one of the numbers
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"so the answer is \\boxed{{{numbers[0]} * {numbers[0]} * {numbers[0]} * {numbers[0]} * {numbers[0]}}}")
    assert info["status"] == "format_error"  # a number used more often than given
    env.reset(seed=0)
    _, reward, _, _, info = env.step("I give up")
    assert reward == 0.0 and info["status"] == "unparseable" and info["answer"]


def test_countdown_random_agent_mostly_fails():
    """A random player that writes *valid* expressions (the given numbers, random order and
    operators) is scored "wrong", and rarely hits the target."""
    env = gym.make("Countdown-v0", num_numbers=4)
    rng = np.random.default_rng(0)

    def random_expression(e):
        numbers = [int(n) for n in rng.permutation(e.unwrapped.task.metadata["numbers"])]
        ops = rng.choice(["+", "-", "*"], size=len(numbers) - 1)
        return "\\boxed{" + str(numbers[0]) + "".join(f" {o} {n}" for o, n in zip(ops, numbers[1:])) + "}"

    results = [_play(env, random_expression, seed) for seed in range(40)]
    statuses = [info["status"] for _, info, _ in results]
    assert statuses.count("wrong") >= 30, statuses  # the expressions are valid: judged, not rejected
    assert sum(total for total, _, _ in results) <= 4


def test_countdown_evaluator_is_exact_and_refuses_code():
    assert evaluate("(10 - 4) / 4 * 2").value == 3
    assert evaluate("7 ÷ 2 × 4").value == 14
    assert extract_expression("work...\n$3 \\times (4 + 5) = 27$") == "3 * (4 + 5)"
    assert extract_expression("\\boxed{27 = 3 * (4 + 5)}") == "3 * (4 + 5)"
    for bad in ("__import__('os')", "2 ** 10", "1 +", "(((1)", "3 / (2 - 2)", "1" * 400, "(" * 60 + "1" + ")" * 60):
        with pytest.raises(ExpressionError):
            evaluate(bad)


# -- GuessNumber --------------------------------------------------------------------


def test_countdown_on_tinyzeros_data_with_every_number_used_once(tmp_path):
    """TinyZero's Countdown rows (``nums``, ``target``, a JSON list or JSONL): drawn by seed or
    picked by index; with ``use_all_numbers`` (TinyZero's rule) an answer leaving a number out is
    refused, and the expert finds an expression using all of them."""
    import json

    from mathgym.errors import ConfigError, DatasetError

    rows = [{"target": 24, "nums": [4, 6, 1, 1]}, {"target": 10, "nums": [2, 5, 3]}]
    path = tmp_path / "countdown.json"
    path.write_text(json.dumps(rows))
    env = gym.make("Countdown-v0", dataset=str(path), use_all_numbers=True)
    obs, _ = env.reset(options={"task_index": 0})
    assert "[4, 6, 1, 1]" in obs and "24" in obs and "exactly once" in obs
    assert env.step("\\boxed{4 * 6}")[4]["feedback"].startswith("leaves numbers unused: [1, 1]")
    env.reset(options={"task_index": 0})
    assert env.step("\\boxed{4 * 6 * 1 * 1}")[1] == 1.0
    for index in (0, 1):
        env.reset(options={"task_index": index})
        expert = env.unwrapped.expert_action()
        assert env.step(expert)[1] == 1.0, expert
    lenient = gym.make("Countdown-v0", dataset=str(path))  # the default rule: each number at most once
    lenient.reset(options={"task_index": 1})
    assert lenient.step("<answer>2 * 5</answer>")[1] == 1.0
    assert {gym.make("Countdown-v0", dataset=str(path)).reset(seed=s)[0].split("]")[0] for s in range(8)} == {
        "Using the numbers [4, 6, 1, 1", "Using the numbers [2, 5, 3"}
    for bad in ({"target": "24", "nums": [4, 6]}, {"target": 24, "nums": -1}, {"target": 24, "nums": [4, True]}):
        path.write_text(json.dumps(bad) + "\n")
        with pytest.raises(DatasetError, match="countdown.json:1: a row needs 'nums'"):
            gym.make("Countdown-v0", dataset=str(path))
    with pytest.raises(ConfigError, match="with dataset="):
        gym.make("Countdown-v0").reset(options={"task_index": 0})


def test_binary_search_always_wins_guess_number():
    env = gym.make("GuessNumber-v0", low=1, high=100)
    for secret in range(1, 101):
        env.reset(options={"secret": secret})
        total, info, steps = 0.0, None, 0
        while True:
            _, reward, terminated, truncated, info = env.step(f"My guess: {env.unwrapped.expert_action()}")
            total, steps = total + reward, steps + 1
            if terminated or truncated:
                break
        assert total == 1.0 and info["correct"] and terminated and steps <= 7, secret


def test_guess_number_feedback_format_errors_and_budget():
    env = gym.make("GuessNumber-v0", low=1, high=100, max_turns=3)
    obs, info = env.reset(options={"secret": 40})
    assert "40" not in obs and "40" not in info["task_id"] and "answer" not in info
    obs, reward, terminated, truncated, info = env.step("fifty?")
    assert info["status"] == "format_error" and not terminated and "integer" in obs and "2 guesses left" in obs
    obs, *_ , info = env.step("50")
    assert "lower" in obs and info["status"] == "in_progress"
    obs, reward, terminated, truncated, info = env.step("\\boxed{30}")
    assert truncated and not terminated and reward == 0.0 and info["status"] == "wrong" and info["answer"] == "40"
    assert [m["role"] for m in info["messages"]] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    with pytest.raises(ConfigError):
        gym.make("GuessNumber-v0", low=5, high=5)


@pytest.mark.parametrize("guess", ["50.5", "1e2", "150", "0", "\\boxed{-3}", "about 12.75"])
def test_guess_number_non_integer_or_out_of_range_is_a_format_error_that_uses_a_guess(guess):
    env = gym.make("GuessNumber-v0", low=1, high=100, max_turns=3)
    env.reset(options={"secret": 5})  # 50.5 must not read as 5, 1e2 not as 2
    obs, reward, terminated, truncated, info = env.step(guess)
    assert info["status"] == "format_error" and reward == 0.0 and not terminated, (guess, obs)
    assert "from 1 to 100" in obs and "used up a guess (2 guesses left)" in obs and info["turn"] == 1
    obs, reward, terminated, truncated, info = env.step("I guess 5.")
    assert terminated and info["correct"] and info["status"] == "correct"


def test_random_guessing_mostly_loses():
    env = gym.make("GuessNumber-v0")
    rng = np.random.default_rng(0)
    wins = sum(_play(env, lambda e: str(int(rng.integers(1, 101))), seed)[0] for seed in range(100))
    assert wins <= 20  # 7 uniform guesses out of 100 win about 7% of the time


# -- Sokoban ------------------------------------------------------------------------


@pytest.mark.parametrize("size,boxes", [(5, 1), (6, 1), (7, 2)])
def test_bfs_solution_solves_every_generated_sokoban_level(size, boxes):
    rng = np.random.default_rng(size)
    for _ in range(15):
        level, moves = generate_level(rng, size, boxes)
        player, state = level.player, level.boxes
        assert not state <= level.targets
        for move in moves:
            player, state, moved = apply_move(level, player, state, move)
            assert moved
        assert state <= level.targets
        assert len(moves) == len(solve_sokoban(level))


def test_sokoban_expert_wins_through_the_env_and_random_agent_does_not():
    env = gym.make("Sokoban-v0", size=6, num_boxes=1, max_turns=10)
    for seed in range(10):
        total, info, steps = _play(env, lambda e: e.unwrapped.expert_action(), seed)
        assert total == 1.0 and info["correct"] and steps == 1
    rng = np.random.default_rng(0)
    moves = ["up", "down", "left", "right"]
    wins = sum(_play(env, lambda e: moves[int(rng.integers(4))], seed)[0] for seed in range(30))
    assert wins <= 10


def test_sokoban_invalid_text_is_a_format_error_observation():
    env = gym.make("Sokoban-v0", render_mode="ansi")
    obs, _ = env.reset(seed=3)
    grid = obs.split("\n\n")[1]
    obs, reward, terminated, truncated, info = env.step("I would rather not")
    assert info["status"] == "format_error" and not terminated and reward == 0.0 and grid in obs
    assert "format_error" not in env.render() and "I would rather not" in env.render()


# -- FrozenLake ---------------------------------------------------------------------


def test_frozen_lake_shortest_path_agent_wins_on_firm_ice():
    env = gym.make("FrozenLakeText-v0", size=5)
    for seed in range(20):
        total, info, _ = _play(env, lambda e: e.unwrapped.expert_action(), seed)
        assert total == 1.0 and info["correct"], seed


def test_frozen_lake_random_agent_mostly_fails_and_uses_gymnasium_dynamics():
    env = gym.make("FrozenLakeText-v0", map_name="8x8")
    rng = np.random.default_rng(0)
    moves = ["left", "down", "right", "up"]
    wins = sum(_play(env, lambda e: moves[int(rng.integers(4))], seed)[0] for seed in range(30))
    assert wins <= 3
    obs, _ = env.reset(seed=0)
    assert obs.split("\n\n")[1].count("H") == 10  # gymnasium's fixed 8x8 map
    obs, _, _, _, info = env.step("go left")  # into the west wall: gymnasium keeps the agent in place
    assert info["position"] == 0 and info["status"] == "in_progress"
    obs, _, _, _, info = env.step("hmm")
    assert info["status"] == "format_error"


def test_frozen_lake_old_id_is_a_deprecated_alias_of_the_text_env():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make("FrozenLake-v0", size=5)
    ours = [w for w in caught if "'FrozenLake-v0' is deprecated; use 'FrozenLakeText-v0'" in str(w.message)]
    assert ours and ours[0].category is DeprecationWarning, [str(w.message) for w in caught]
    new = gym.make("FrozenLakeText-v0", size=5)
    assert env.reset(seed=3)[0] == new.reset(seed=3)[0]
    assert "FrozenLake-v0" not in mathgym.list_envs() and "FrozenLakeText-v0" in mathgym.list_envs()
