"""Code sandbox API: run, run_tests (assert and io), limits, retries, the code reward worker."""

from __future__ import annotations

import os
import pickle
import signal
import statistics
import subprocess
import sys
import threading
import time

import pytest

from mathgym.errors import ConfigError
from mathgym.rewards import CodeSandbox, CodeTestsReward, SandboxLimits, Status, TestCase, default_sandbox, extract_code

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=4)


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(LIMITS, workers=2) as sandbox:
        yield sandbox


def test_run_reports_exit_codes_and_streams(box):
    ok = box.run("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert (ok.status, ok.stdout, ok.stderr, ok.exit_code) == (Status.CORRECT, "out\n", "err\n", 0)
    assert box.run("import sys\nsys.exit(3)").exit_code == 3
    assert box.run("import sys\nsys.exit(3)").status == Status.WRONG
    assert box.run("import sys\nsys.exit()").status == Status.CORRECT
    crash = box.run("def f():\n    raise KeyError('k')\nf()")
    assert crash.status == Status.WRONG and crash.exit_code == 1 and "KeyError" in crash.stderr and "trusted_worker" not in crash.stderr and "untrusted_child" not in crash.stderr
    assert box.run("print(input()[::-1])", stdin="abc\n").stdout == "cba\n"
    assert box.run("print(__name__)").stdout == "__main__\n"


def test_large_stdin_is_fed_without_deadlock(box):
    data = "x" * 2_000_000
    result = box.run("import sys\nprint(len(sys.stdin.read()))", stdin=data)
    assert result.stdout.strip() == str(len(data))


def test_memory_limit(box):
    small = SandboxLimits(cpu_seconds=2, wall_seconds=4, memory_mb=256)
    assert box.run("x = bytearray(400 * 2**20)", limits=small).status == Status.WRONG
    assert box.run("x = bytearray(50 * 2**20)", limits=small).status == Status.CORRECT


def test_file_size_limit(box):
    result = box.run("open('big', 'wb').write(b'x' * (3 * 2**20))", limits=SandboxLimits(max_file_mb=1))
    assert result.status == Status.WRONG and "File too large" in result.stderr


def test_run_tests_assert_and_io_with_per_test_results(box):
    code = "def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    a, b = map(int, input().split())\n    print(add(a, b), '  ')\n"
    tests = [
        TestCase("small", "assert", "assert add(1, 2) == 3"),
        TestCase("wrong", "assert", "assert add(1, 2) == 4, 'expected 4'"),
        TestCase("io_ok", "io", stdin="2 3\n", expected_stdout="5\n\n"),
        TestCase("io_bad", "io", stdin="2 2\n", expected_stdout="5"),
        TestCase("after", "assert", "assert add(-1, 1) == 0"),
    ]
    result = box.run_tests(code, tests)
    assert [(t.name, t.passed) for t in result.tests] == [("small", True), ("wrong", False), ("io_ok", True), ("io_bad", False), ("after", True)]
    assert result.status == Status.WRONG and (result.passed, result.total) == (3, 5) and result.fraction == 0.6
    assert "expected 4" in result.tests[1].message
    assert box.run_tests(code, [tests[0], tests[2]]).status == Status.CORRECT


def test_code_that_raises_fails_every_test(box):
    result = box.run_tests("raise ValueError('bad')", [TestCase("a", "assert", "pass"), TestCase("b", "assert", "pass")])
    assert result.passed == 0 and all("ValueError" in t.message for t in result.tests)


def test_timeout_in_a_test_marks_the_rest(box):
    tests = [TestCase("fast", "assert", "pass"), TestCase("loop", "assert", "while True: pass"), TestCase("never", "assert", "pass")]
    result = box.run_tests("", tests)
    assert result.status == Status.TIMEOUT
    assert [t.status for t in result.tests] == [Status.CORRECT, Status.TIMEOUT, Status.TIMEOUT]


def test_infra_failure_is_retried_not_blamed_on_the_model():
    with CodeSandbox(LIMITS, workers=1) as sandbox:
        sandbox.warm_up()
        (victim,) = sandbox.worker_pids()
        killer = threading.Timer(0.5, os.kill, (victim, signal.SIGKILL))
        killer.start()
        result = sandbox.run("import time\ntime.sleep(1.5)\nprint('done')")
        killer.join()
        assert result.status == Status.CORRECT and result.stdout == "done\n"
        assert result.details["retried"] is True
        assert sandbox.worker_pids() and sandbox.worker_pids() != [victim]


def test_persistent_infra_failure_is_a_sandbox_error():
    sandbox = CodeSandbox(LIMITS, workers=1)
    sandbox.close()
    result = sandbox.run("print(1)")
    assert result.status == Status.SANDBOX_ERROR and result.status.is_infra_failure


def test_options_are_validated():
    with pytest.raises(ConfigError):
        SandboxLimits(cpu_seconds=0)
    with pytest.raises(ConfigError):
        SandboxLimits(memory_mb=-1)
    with pytest.raises(ConfigError):
        TestCase("x", "shell")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CodeSandbox(workers=0)
    with pytest.raises(ConfigError):
        default_sandbox().run_tests("pass", [])
    with pytest.raises(ConfigError):
        default_sandbox().run_tests("pass", [TestCase("a", "assert", "pass")] * 2)


def test_sandbox_does_not_pickle_and_default_is_shared():
    assert default_sandbox() is default_sandbox()
    with pytest.raises(TypeError):
        pickle.dumps(default_sandbox())
    box = CodeSandbox()
    box.close()
    box.close()


def test_code_reward_worker():
    tests = [TestCase("one", "assert", "assert sq(2) == 4"), TestCase("two", "assert", "assert sq(3) == 9")]
    good = "Here you go:\n```python\ndef sq(x):\n    return x * x\n```"
    half = "```py\ndef sq(x):\n    return 4\n```"
    worker = CodeTestsReward(limits=LIMITS)
    results = worker.score_batch([good, half, "   "], [tests, tests, tests])
    assert [(r.score, r.status) for r in results] == [(1.0, Status.CORRECT), (0.0, Status.WRONG), (0.0, Status.UNPARSEABLE)]
    partial = CodeTestsReward(limits=LIMITS, partial_credit=True).score(half, tests)
    assert (partial.score, partial.status, partial.details["passed"]) == (0.5, Status.PARTIAL, 1)
    assert pickle.loads(pickle.dumps(worker)).score(good, tests).status == Status.CORRECT
    assert extract_code("a\n```python\nx = 1\n```\nb\n```\ny = 2\n```") == "y = 2\n"


def test_the_worker_holds_no_module_that_works_in_every_fork(box):
    """threading and random register work that runs in every forked child (about 170 copy-on-write
    faults a job between them); the worker never imports them, and a job that does gets its own."""
    probe = ("import sys\nprint(sorted(m for m in ('threading', 'random', 'tempfile', 'queue') if m in sys.modules))\n"
             "import random, tempfile, os\nprint(tempfile.gettempdir() == os.getcwd(), random.random())")
    first, second = box.run(probe), box.run(probe)
    assert first.stdout.splitlines()[0] == "[]", first.stdout + first.stderr
    assert first.stdout.splitlines()[1].startswith("True ") and first.stdout != second.stdout  # each job seeds its own


def test_executions_are_forks_of_the_warm_workers(box):
    """Each run is a fork of a long-lived warm worker, not a fresh interpreter.

    Structural (the run's parent is a warm worker, the workers stay the same, and the
    run finds the worker's preloaded modules already imported) and relative (a warm run
    is at least twice as fast as starting an interpreter on this same machine, measured here).
    """
    box.warm_up()
    workers = set(box.worker_pids())
    probe = "import os, sys\nprint(os.getppid(), 'json' in sys.modules and 'fractions' in sys.modules)"
    warm = []
    for _ in range(10):
        start = time.monotonic()
        result = box.run(probe)
        warm.append(time.monotonic() - start)
        parent, preloaded = result.stdout.split()
        # Its parent is a warm worker, out of sight (0) from the jobs' own PID namespace where it has one.
        assert int(parent) in (workers if result.details.get("pid_namespace") != "private" else {0}), result.details
        assert preloaded == "True", result.stdout
    assert set(box.worker_pids()) == workers
    cold = []
    for _ in range(3):
        start = time.monotonic()
        subprocess.run([sys.executable, "-I", "-c", "import json, fractions"], check=True)
        cold.append(time.monotonic() - start)
    assert 2 * statistics.median(warm) < statistics.median(cold), (warm, cold)  # ~6x apart here, idle or loaded
