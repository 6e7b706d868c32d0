"""Hostile math answers return a status within the time limit in any thread or process."""

from __future__ import annotations

import dataclasses
import threading
import time

import gymnasium as gym
import pytest

import mathgym  # noqa: F401  (registers the envs)
from mathgym.rewards import MathVerifier, ProcessExecutor, Status, score_in_parallel

TIMEOUT_S = 1.0
SLACK_S = 2.0  # killing a helper and replying, on a loaded 2-core machine
#: Wall-clock bound including a wait for a replacement helper to start (math-verify import) under load.
WALL_BOUND_S = TIMEOUT_S + 15.0
NESTED = "\\frac{1}{" * 80 + "2" + "}" * 80

HOSTILE = {
    # name: (completion, gold, allowed statuses)
    "tower_of_powers": ("so \\boxed{9^{9^{9^{9}}}}", "1", {Status.TIMEOUT}),
    "tower_as_gold_and_answer": ("\\boxed{9^{9^{9^{9}}}}", "9^{9^{9^{9}}}", {Status.TIMEOUT, Status.CORRECT}),
    "nested_fractions": (f"\\boxed{{{NESTED}}}", "1", {Status.WRONG, Status.TIMEOUT, Status.UNPARSEABLE}),
    # math-verify reads 1/2 after "the answer:" here, and mathgym gives its verdict.
    "unbalanced_box": ("the answer: \\boxed{\\frac{1}{2}" + "{" * 1000, "1/2", {Status.CORRECT, Status.UNPARSEABLE, Status.WRONG, Status.TIMEOUT}),
    "one_megabyte_text": ("x" * 1_000_000, "1", {Status.UNPARSEABLE}),
    "one_megabyte_box": ("\\boxed{" + "1+" * 500_000 + "1}", "1", {Status.UNPARSEABLE}),
    "one_megabyte_braces": ("\\boxed{" + "{" * 500_000 + "}" * 500_000 + "}", "1", {Status.UNPARSEABLE}),
    # Over max_completion_chars and not a fast-path shape: not handed to math-verify.
    "one_megabyte_boxes": ("\\boxed{1}" * 110_000, "1", {Status.UNPARSEABLE}),
    "nul_bytes": ("\x00\\boxed{4\x002}\x00" * 3, "42", {Status.WRONG, Status.UNPARSEABLE}),
    "nul_megabyte": ("\x00" * 1_000_000 + "\\boxed{7}", "7", {Status.CORRECT}),
}


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout=TIMEOUT_S)
    v.warm_up()
    return v


def _check(name, result, elapsed):
    assert result.status in HOSTILE[name][2], (name, result)
    assert result.details.get("seconds", 0.0) <= TIMEOUT_S + SLACK_S, (name, result)  # the sample's own time
    assert elapsed < WALL_BOUND_S, (name, elapsed)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_main_thread(verifier, name):
    completion, gold, _ = HOSTILE[name]
    start = time.monotonic()
    result = verifier.score(completion, gold)
    _check(name, result, time.monotonic() - start)


@pytest.mark.parametrize("name", ["tower_of_powers", "nested_fractions", "one_megabyte_box", "nul_bytes"])
def test_worker_thread(verifier, name):
    completion, gold, _ = HOSTILE[name]
    box: dict = {}

    def target():
        start = time.monotonic()
        box["result"] = verifier.score(completion, gold)
        box["elapsed"] = time.monotonic() - start

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(TIMEOUT_S + SLACK_S + 5)
    assert not thread.is_alive() and "result" in box, "the scoring thread hung or crashed"
    _check(name, box["result"], box["elapsed"])


def test_watchdog_recovers_after_a_timeout(verifier):
    assert verifier.score("\\boxed{9^{9^{9^{9}}}}", "1").status == Status.TIMEOUT
    assert MathVerifier(timeout=30).score("\\boxed{x^2-1}", "(x-1)(x+1)").status == Status.CORRECT


def test_process_pool():
    names = ["tower_of_powers", "nested_fractions", "unbalanced_box", "nul_bytes"]
    completions = [HOSTILE[n][0] for n in names] + ["\\boxed{\\sqrt{4}}"]
    golds = [HOSTILE[n][1] for n in names] + ["2"]
    with ProcessExecutor(max_workers=2) as executor:
        results = score_in_parallel(MathVerifier(timeout=TIMEOUT_S), completions, golds, executor=executor, chunk_size=1)
    for name, result in zip(names, results):
        assert result.status in HOSTILE[name][2], (name, result)
        assert result.details.get("seconds", 0.0) <= TIMEOUT_S + SLACK_S
    assert results[-1].status == Status.CORRECT


def test_pipelined_batch_recovers_after_a_hostile_item_in_the_middle():
    """A hostile sample in the middle of a pipelined batch times out alone; the rest are scored."""
    verifier = MathVerifier(timeout=3.0, workers=1)  # one helper: every sample in one pipeline
    verifier.warm_up()
    # functions: the in-process exact path leaves them to math-verify, so all of them are pipelined
    good = [("so \\boxed{\\sin(\\pi/4)}", "\\frac{1}{\\sqrt{2}}", Status.CORRECT), ("so \\boxed{\\log_2 8}", "3", Status.CORRECT),
            ("so \\boxed{\\sin(\\pi/6)}", "\\frac{\\sqrt{3}}{2}", Status.WRONG), ("so \\boxed{\\sin x}", "\\sin(x)", Status.CORRECT)]
    hostile = (HOSTILE["tower_of_powers"][0], HOSTILE["tower_of_powers"][1], Status.TIMEOUT)
    items = good[:2] * 3 + [hostile] + good * 3
    start = time.monotonic()
    results = verifier.score_batch([c for c, _, _ in items], [g for _, g, _ in items])
    assert time.monotonic() - start < WALL_BOUND_S + 10
    assert [r.status for r in results] == [s for _, _, s in items], results
    assert all(r.details["path"] == "math_verify" for r in results)


def test_the_helper_pool_honours_each_verifiers_workers():
    from mathgym.rewards._procpool import pool_for
    from mathgym.rewards.math import _WORKER_SCRIPT

    one, three = MathVerifier(workers=1), MathVerifier(workers=3)
    one.warm_up()
    three.warm_up()
    assert len(pool_for(_WORKER_SCRIPT, 1).pids()) == 1
    assert len(pool_for(_WORKER_SCRIPT, 3).pids()) == 3
    assert set(pool_for(_WORKER_SCRIPT, 1).pids()).isdisjoint(pool_for(_WORKER_SCRIPT, 3).pids())


@pytest.mark.parametrize("name", ["tower_of_powers", "one_megabyte_text", "nul_megabyte", "unbalanced_box"])
def test_lenient_mode_is_as_safe(name):
    completion, gold, allowed = HOSTILE[name]
    lenient = MathVerifier(timeout=TIMEOUT_S, answer_extraction="lenient")
    start = time.monotonic()
    result = lenient.score(completion, gold)
    assert result.status in allowed, (name, result)
    assert time.monotonic() - start < WALL_BOUND_S, name


#: Hostile chains of thought at MathReason-v0's bound (131,072 characters), each ending with a
#: right final answer that only math-verify can check (``y x`` for ``x y``): the verifier the env
#: builds reads them all (with its own 100,000-character default, they were ``unparseable``).
AT_THE_BOUND = {
    "long_reasoning": ("Let me think it over once more. ", {Status.CORRECT}),
    "many_boxes": ("\\boxed{1}", {Status.CORRECT, Status.WRONG, Status.TIMEOUT}),
    "nested_fractions": (NESTED, {Status.CORRECT, Status.WRONG, Status.TIMEOUT}),
    "dollars": ("$", {Status.CORRECT, Status.WRONG, Status.TIMEOUT}),
    "open_braces": ("{", {Status.CORRECT, Status.WRONG, Status.TIMEOUT}),
}


@pytest.fixture(scope="module")
def env_verifier():
    bound = 131_072  # the default bound: a 32k-token answer
    env = gym.make("MathReason-v0", max_length=bound)
    v = dataclasses.replace(env.unwrapped.verifier, timeout=TIMEOUT_S)
    v.warm_up()
    return v, bound


@pytest.mark.parametrize("name", sorted(AT_THE_BOUND))
def test_hostile_answers_at_the_env_bound_reach_the_verifier(env_verifier, name):
    verifier, bound = env_verifier
    unit, allowed = AT_THE_BOUND[name]
    ending = "\\boxed{y x}"
    completion = (unit * (bound // len(unit) + 1))[: bound - len(ending)] + ending
    start = time.monotonic()
    result = verifier.score(completion, "x y")
    assert len(completion) == bound and result.status in allowed, (name, result.status, result.details.get("reason"))
    assert time.monotonic() - start < WALL_BOUND_S, name
