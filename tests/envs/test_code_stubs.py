"""Partial credit of the code envs counts only what the program did (issue 48): the tests that a
program doing nothing passes earn nothing, and each one failed costs one passed."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the envs
from mathgym.envs.coding.code import grade
from mathgym.envs.coding.code_stubs import printed_floor, stub_passes
from mathgym.envs.coding.code_tasks import CodeTask, load_tasks
from mathgym.rewards.no_op import credit_beyond


def test_credit_is_the_share_of_the_way_from_the_floor_to_every_test():
    assert [credit_beyond(passed, 6, floor=2) for passed in range(7)] == [0.0, 0.0, 0.0, 0.25, 0.5, 0.75, 1.0]
    assert credit_beyond(3, 5, floor=0) == 0.6  # no test passes by doing nothing: the plain share
    assert credit_beyond(4, 4, floor=4) == 1.0 and credit_beyond(3, 4, floor=4) == 0.0


def test_the_floor_of_a_whole_program_is_the_most_frequent_output_or_its_input_echoed():
    assert printed_floor([("a", "1\n", "YES\n"), ("b", "2", "NO"), ("c", "3", "YES  \n\n")]) == 2
    assert printed_floor([("a", "1\n", "1"), ("b", "2", "2"), ("c", "3", "9")]) == 2  # echoing passes 2
    assert printed_floor([]) == 0


def _task(name: str) -> CodeTask:
    return next(task for task in load_tasks("builtin") if task.task_id == f"builtin/{name}")


def test_a_function_that_returns_a_constant_earns_nothing_and_real_work_still_earns_its_share():
    task = _task("valid_ipv4")  # 6 tests; a function returning False passes the 4 of invalid addresses
    assert stub_passes(task) == 4
    for returned in ("False", "0", "None", "True"):
        verdict = grade(task, f"def valid_ipv4(text):\n    return {returned}\n", "fraction")
        assert verdict.reward == 0.0 and verdict.status == "wrong", (returned, verdict.info["passed"])
    # 5 of 6: one test beyond the 4 that cost nothing, of the 2 a stub fails
    almost = "def valid_ipv4(text):\n    parts = text.split('.')\n    return len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts)\n"
    verdict = grade(task, almost, "fraction")
    assert verdict.info["passed"] == 5 and verdict.reward == pytest.approx(0.5) and verdict.status == "partial"
    assert verdict.info["stub_passed"] == 4
    assert grade(task, task.reference, "fraction").reward == 1.0
    assert grade(task, almost, "all_pass").reward == 0.0


def test_a_program_printing_the_most_common_answer_earns_nothing(tmp_path):
    tests = {"inputs": ["4\n", "7\n", "9\n", "2\n"], "outputs": ["YES\n", "NO\n", "NO\n", "YES\n"]}
    row = {"problem_id": 1, "question": "Print YES when n is even, else NO.", "input_output": json.dumps(tests)}
    path = tmp_path / "parity.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    try:
        env.reset(options={"task_index": 0})
        _, reward, _, _, info = env.step("```python\nprint('NO')\n```")
        assert info["passed"] == 2 and reward == 0.0 and info["status"] == "wrong"
        env.reset(options={"task_index": 0})  # right for every n but 2
        _, reward, _, _, info = env.step("```python\nn = int(input())\nprint('YES' if n % 2 == 0 and n > 2 else 'NO')\n```")
        assert info["passed"] == 3 and reward == pytest.approx(0.5) and info["status"] == "partial"
    finally:
        env.close()


def test_the_code_reward_worker_pays_nothing_for_a_stub_either():
    """``CodeTestsReward(partial_credit=True)`` (a TRL / verl reward) reads the floor from the
    functions the program defines: a constant earns 0, real work its share beyond the floor."""
    from mathgym.rewards import CodeTestsReward
    from mathgym.rewards.sandbox import TestCase

    tests = [TestCase(f"t{n}", "assert", f"assert is_even({n}) == {n % 2 == 0}") for n in (1, 3, 2, 4, 6)]
    worker = CodeTestsReward(partial_credit=True)
    for returned in ("True", "False"):  # True passes 3 (2, 4, 6): the floor
        stub = worker.score(f"```python\ndef is_even(n):\n    return {returned}\n```", tests)
        assert (stub.score, stub.status, stub.details["stub_passed"]) == (0.0, "wrong", 3), returned
    partial = worker.score("```python\ndef is_even(n):\n    return n in (2, 4)\n```", tests)  # 4 of 5: 1 beyond the floor of 2
    assert (partial.details["passed"], partial.score, partial.status) == (4, 0.5, "partial")
    right = worker.score("```python\ndef is_even(n):\n    return n % 2 == 0\n```", tests)
    assert (right.score, right.status) == (1.0, "correct")
