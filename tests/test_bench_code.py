"""benchmarks/bench_code.py: the floor's lean forkers run programs honestly, and the CPU accounting adds up."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_code  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc"), reason="the floor forks and reads /proc")


@pytest.fixture(scope="module")
def forkers():
    pool = bench_code.LeanForkers(2)
    yield pool
    pool.close()


def test_a_lean_forker_tells_a_passing_program_from_a_failing_and_a_hanging_one(forkers):
    ok, seconds = forkers.run("import math\nassert math.gcd(12, 18) == 6\n", 3.0)
    assert ok and 0 <= seconds < 3.0
    assert forkers.run("assert 1 == 2\n", 3.0)[0] is False
    assert forkers.run("print('a program that writes'); print(1 / 0)\n", 3.0)[0] is False
    assert forkers.run("print('and one that passes', flush=True)\n", 3.0)[0] is True  # its output does not reach the answers
    assert forkers.run("raise SystemExit(0)\n", 3.0)[0] is False  # a program that leaves early did not run to its end
    ok, seconds = forkers.run("while True:\n    pass\n", 1.0)
    assert ok is False and seconds == 1.0  # killed at the timeout, counted at it


def test_the_lean_forker_is_lean_and_pre_imports_the_workers_list(forkers):
    from mathgym.rewards.sandbox.trusted_worker import PRELOAD

    # The child sees what its parent imported: the worker's list, and nothing of mathgym.
    probe = "import sys\nassert 'mathgym' not in sys.modules\nassert set({!r}) <= set(sys.modules)\n"
    assert forkers.run(probe.format(sorted({"json", "decimal", "heapq"} & set(PRELOAD))), 3.0)[0]
    assert forkers.fork_exit_seconds(5) > 0


def test_the_floor_runs_every_program_and_the_cpu_per_job_adds_up(forkers):
    problems = [{"prompt": "def f(x):\n", "canonical_solution": f"    return x + {i}\n", "test": f"def check(f):\n    assert f(1) == {i + 1}\n",
                 "entry_point": "f"} for i in range(6)]
    passed, seconds = bench_code._run_floor(forkers, problems, 3.0, 2)
    assert passed == 6 and seconds > 0
    wrong = [{**problem, "canonical_solution": "    return x\n"} for problem in problems]
    assert bench_code._run_floor(forkers, wrong, 3.0, 2)[0] == 1  # only i == 0 passes

    def burn():
        bench_code._run_floor(forkers, [{**problems[0], "test": "def check(f):\n    sum(range(2_000_000))\n"}] * 4, 3.0, 2)

    figures = bench_code._cpu_per_job(burn, 4, 2)
    parts = ("caller", "helpers_user", "helpers_system", "children_user", "children_system")
    assert figures["total_ms"] == pytest.approx(sum(figures[f"{part}_ms"] for part in parts), abs=0.05)
    assert figures["children_user_ms"] > 5  # the programs' work lands in their processes, not the caller
    assert figures["children_faults"] > 0
    assert 0 < figures["busy"] <= 1.05  # a share of the machine's CPUs (a little slack for clock ticks)


def test_the_in_order_bound_follows_the_pool_and_never_beats_the_ideal():
    import random

    rng = random.Random(0)
    for _ in range(200):
        times, workers = [rng.expovariate(1.0) for _ in range(rng.randint(1, 30))], rng.randint(1, 4)
        assert bench_code.in_order_seconds(times, workers) >= bench_code.ideal_seconds(times, workers) - 1e-12
        assert bench_code.in_order_seconds(times, workers) <= sum(times) / workers + max(times) + 1e-12  # list scheduling's bound
    assert bench_code.in_order_seconds([1.0, 1.0, 1.0, 3.0], 2) == 4.0  # the long one starts when a worker frees, at 1.0
    assert bench_code.in_order_seconds([3.0, 1.0, 1.0, 1.0], 2) == 3.0
    assert bench_code.in_order_seconds([2.0, 5.0], 1) == 7.0
