"""Hostile math answers return a status within the time limit in any thread or process."""

from __future__ import annotations

import threading
import time

import pytest

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
    "unbalanced_box": ("the answer: \\boxed{\\frac{1}{2}" + "{" * 1000, "1/2", {Status.UNPARSEABLE, Status.WRONG, Status.TIMEOUT}),
    "one_megabyte_text": ("x" * 1_000_000, "1", {Status.UNPARSEABLE}),
    "one_megabyte_box": ("\\boxed{" + "1+" * 500_000 + "1}", "1", {Status.UNPARSEABLE}),
    "one_megabyte_braces": ("\\boxed{" + "{" * 500_000 + "}" * 500_000 + "}", "1", {Status.UNPARSEABLE}),
    "one_megabyte_boxes": ("\\boxed{1}" * 110_000, "1", {Status.CORRECT}),
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
