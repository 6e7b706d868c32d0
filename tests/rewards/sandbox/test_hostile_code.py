"""Hostile programs are contained: right status, within the limit, nothing left running."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from mathgym.rewards.base import Status
from mathgym.rewards.sandbox import CodeSandbox, SandboxLimits, TestCase

LIMITS = SandboxLimits(cpu_seconds=1, wall_seconds=2, memory_mb=512, max_processes=16)
SLACK_S = 2.0  # process start-up, kill and cleanup on a loaded 2-core machine


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(LIMITS, workers=2) as sandbox:
        sandbox.warm_up()
        yield sandbox


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every process, read from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue  # exited meanwhile
            table[int(entry)] = (int(fields[1]), fields[0].decode())
    return table


def _namespace_init(pid: int) -> bool:
    """Whether ``pid`` is pid 1 of a PID namespace of its own (a worker's, for its jobs)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            return any(line.startswith("NSpid:") and line.split()[-1] == "1" and len(line.split()) > 2 for line in handle)
    except OSError:
        return False


def _leftovers(box: CodeSandbox) -> list[int]:
    """Every live process below the warm workers (there must be none between jobs) but the
    init of each worker's PID namespace; below it, the orphans of jobs are leftovers too."""
    table = _process_table()
    found, frontier = [], set(box.worker_pids())
    while frontier:
        children = {pid for pid, (ppid, _) in table.items() if ppid in frontier}
        found += [pid for pid in children if table[pid][1] != "Z" and not (table[pid][0] in box.worker_pids() and _namespace_init(pid))]
        frontier = children
    return found


def _run(box: CodeSandbox, code: str, **kwargs):
    start = time.monotonic()
    result = box.run(code, **kwargs)
    elapsed = time.monotonic() - start
    assert elapsed < LIMITS.wall_seconds + SLACK_S, (elapsed, result)
    assert result.status != Status.SANDBOX_ERROR, result
    assert not _leftovers(box)
    return result


HOSTILE = {
    "fork_bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", {Status.TIMEOUT}),
    "fork_bomb_crashing": ("import os\nwhile True:\n    os.fork()\n", {Status.WRONG, Status.TIMEOUT}),
    # Large lazily-zeroed blocks reach the address-space cap at once: MemoryError, a wrong answer.
    "memory_bomb": ("x = []\nwhile True:\n    x.append(bytes(2 * 10**8))\n", {Status.WRONG}),
    # Small blocks touch every page; on a slow VM the CPU cap may come first. Either is contained.
    "memory_creep": ("x = []\nwhile True:\n    x.append(bytearray(10**7))\n", {Status.WRONG, Status.TIMEOUT}),
    "infinite_loop": ("while True:\n    pass\n", {Status.TIMEOUT}),
    "sleep_past_limit": ("import time\ntime.sleep(60)\n", {Status.TIMEOUT}),
    "deep_recursion": ("import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1) + 1\nf(0)\n", {Status.WRONG, Status.TIMEOUT}),
    "plain_recursion": ("def f(n):\n    return f(n + 1)\nf(0)\n", {Status.WRONG}),
    "close_stdout": ("import os, sys\nsys.stdout.close()\nos.close(1)\nos.close(2)\nprint('x')\n", {Status.WRONG}),
    "kill_parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", {Status.WRONG}),
    "kill_everyone": ("import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('alive')\n", {Status.CORRECT, Status.WRONG}),
    "setsid_escape": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\nprint('parent done')\n", {Status.CORRECT}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_program_is_contained(box, name):
    code, allowed = HOSTILE[name]
    result = _run(box, code)
    assert result.status in allowed, (name, result.status, result.stderr[-300:], result.details)


def test_100mb_of_output_is_capped(box):
    result = _run(box, "import sys\nchunk = 'x' * 10**6\nfor _ in range(100):\n    sys.stdout.write(chunk)\n")
    assert len(result.stdout) <= LIMITS.max_output_bytes
    assert result.details["stdout_truncated"] is True


def test_writing_outside_the_scratch_dir_fails(box, tmp_path):
    # Outside the private /tmp, /var/tmp, /dev/shm (pytest's tmp_path is under /tmp, which
    # the job sees as its own empty tmpfs): a directory beside the tests.
    # (A checkout under /tmp is itself covered by the job's fresh /tmp: then the home directory.)
    beside = Path(__file__).parent
    private = ("/tmp", "/var/tmp", "/dev/shm")
    under_private = any(str(beside.resolve()).startswith(p + "/") for p in private)
    outside = Path(tempfile.mkdtemp(prefix=".escape-", dir=Path.home() if under_private else beside))
    try:
        hidden = tmp_path / "escaped.txt"
        result = _run(box, f"open({str(hidden)!r}, 'w').write('pwned')\n")
        if result.details["tmp"] == "private":
            assert result.status == Status.WRONG and "FileNotFoundError" in result.stderr
        assert not hidden.exists()
        if os.geteuid() != 0:
            pytest.skip("without root there is no unprivileged uid to drop to; see docs/rewards.md")
        target = outside / "escaped.txt"
        result = _run(box, f"open({str(target)!r}, 'w').write('pwned')\n")
        # Under the allow-list view the dir is not there at all; under the block-list it is
        # there but not the sandbox uid's to write.
        refusal = "FileNotFoundError" if result.details.get("fs_view") == "allow-list" else "PermissionError"
        assert result.status == Status.WRONG and refusal in result.stderr
        assert not target.exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_scratch_dir_is_fresh_and_removed(box):
    first = _run(box, "import os\nopen('left.txt', 'w').write('x')\nprint(os.getcwd())\nprint(os.listdir('.'))\n")
    second = _run(box, "import os\nprint(os.listdir('.'))\n")
    scratch = first.stdout.splitlines()[0]
    assert first.stdout.splitlines()[1] == "['left.txt']" and second.stdout.strip() == "[]"
    assert not os.path.exists(scratch)


def test_parent_environment_is_invisible(monkeypatch):
    monkeypatch.setenv("MATHGYM_TEST_SECRET", "hunter2-secret-value")  # set BEFORE the workers start
    code = (
        "import os\n"
        "print(dict(os.environ))\n"
        "for pid in ('self', os.getppid(), 1):\n"
        "    try:\n"
        "        print(open(f'/proc/{pid}/environ').read())\n"
        "    except OSError as err:\n"
        "        print('denied', err)\n"
    )
    with CodeSandbox(LIMITS, workers=1) as fresh:
        result = _run(fresh, code)
        for pid in fresh.worker_pids():  # the warm worker itself never received the secret
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    assert b"hunter2-secret-value" not in handle.read()
            except PermissionError:
                assert os.geteuid() != 0  # not root, the worker (not dumpable) hides its environ from its own user too
    assert "hunter2-secret-value" not in result.stdout + result.stderr
    assert "'PATH'" in result.stdout and result.status == Status.CORRECT


def test_fork_limit_is_enforced_when_detected(box):
    result = _run(box, "import os\nn = 0\ntry:\n    for _ in range(1000):\n        if os.fork() == 0:\n            import time; time.sleep(30)\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n")
    if result.details["nproc_enforced"]:
        assert int(result.stdout) < LIMITS.max_processes
    else:
        pytest.skip("RLIMIT_NPROC is not enforced here (detected at start-up)")


def test_sys_exit_in_tests_is_a_failure(box):
    tests = [TestCase("escape", "assert", "assert f() == 1"), TestCase("exit", "assert", "import sys\nsys.exit(0)")]
    result = box.run_tests("import sys\ndef f():\n    sys.exit(0)\n", tests)
    assert result.status == Status.WRONG and result.passed == 0, result.tests
    exit_early = box.run_tests("import os\ndef f():\n    os._exit(0)\n", tests[:1])
    assert exit_early.status == Status.WRONG and exit_early.passed == 0
    assert not _leftovers(box)


def test_caller_survives_and_sandbox_still_works(box):
    assert box.run("print('still here')").stdout == "still here\n"
    assert os.getpid() in _process_table()


def test_files_left_in_shared_tmp_are_removed(box):
    if os.geteuid() != 0:
        pytest.skip("without a dedicated uid, files in /tmp cannot be told apart; see docs/rewards.md")
    result = _run(box, "import os\nname = f'/tmp/mathgym-leftover-{os.getpid()}'\nopen(name, 'w').write('x')\nprint(name)\n")
    assert result.status == Status.CORRECT
    assert not os.path.exists(result.stdout.strip())
