"""A program cannot find the tests in its own memory: not the judge's test code, not an expected value.

The sandboxed child is forked from a warm worker. Whatever that worker held when it
forked (a job's tests, a previous job's tests in freed memory) is in the child's address
space, where ``gc``, the frame chain or a raw read of memory finds it. Each program below
searches its memory for the prefix of a marker placed in the tests and reports the text
that follows every hit; the random part of the marker must never come back.
"""

from __future__ import annotations

import os
import secrets
import signal
import time

import pytest

from mathgym.rewards import CodeSandbox, SandboxLimits, Status, TestCase

LIMITS = SandboxLimits(cpu_seconds=20, wall_seconds=30, memory_mb=1024)

#: The program knows only the marker's prefix (built at run time, so its source does not hold it).
_SCANNER = r'''
import ctypes, gc, os, sys

PREFIX = "SECRET" + "-" + "MARK"
FOUND = set()


def _note(text):
    at = text.find(PREFIX)
    while at >= 0 and len(FOUND) < 200:
        FOUND.add(text[at + len(PREFIX): at + len(PREFIX) + 24])
        at = text.find(PREFIX, at + 1)


def _gc_walk():
    for obj in gc.get_objects():
        try:
            if isinstance(obj, dict):
                if "tests" in obj or "support" in obj:
                    _note(repr(obj))
                for value in obj.values():
                    if isinstance(value, str):
                        _note(value)
            elif isinstance(obj, (list, tuple)):
                for value in obj:
                    if isinstance(value, (str, bytes, bytearray)):
                        _note(value if isinstance(value, str) else bytes(value).decode("latin-1"))
        except Exception:
            pass


def _frame_walk():
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            try:
                _note(repr(value)[:1 << 22])
            except Exception:
                pass
        frame = frame.f_back


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _raw_scan():
    libc = ctypes.CDLL(None, use_errno=True)
    chunk = 1 << 20
    buffer = ctypes.create_string_buffer(chunk)
    pid = os.getpid()

    def read(address, size):
        local, remote = _Iovec(ctypes.addressof(buffer), size), _Iovec(address, size)
        got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        return buffer.raw[:got] if got > 0 else b""

    prefix = PREFIX.encode()

    def scan(data):
        at = data.find(prefix)
        while at >= 0 and len(FOUND) < 200:
            FOUND.add(data[at + len(prefix): at + len(prefix) + 24].decode("latin-1"))
            at = data.find(prefix, at + 1)

    regions = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                span, perms = line.split()[:2]
                if perms.startswith("r"):
                    start, end = (int(part, 16) for part in span.split("-"))
                    regions.append((start, end))
    except OSError:
        # No /proc in the view: start from the addresses of live objects and the heap's end,
        # and read on from each until memory is unmapped (a failed read, never a crash).
        seeds = {id(obj) & ~(chunk - 1) for obj in gc.get_objects()}
        libc.sbrk.restype = ctypes.c_void_p
        seeds.add((libc.sbrk(0) or 0) & ~(chunk - 1))
        for seed in seeds:
            start = seed
            while start - chunk > 0 and len(read(start - chunk, 4096)) == 4096 and len(read(start - 4096, 4096)) == 4096:
                start -= chunk
            regions.append((start, seed + (64 << 20)))
    done = set()
    for start, end in regions:
        address = start
        while address < end:
            if address in done:
                address += chunk
                continue
            done.add(address)
            data = read(address, min(chunk, end - address))
            if not data:
                page = address + 4096  # the chunk starts unmapped: try its pages
                while page < address + chunk and not read(page, 4096):
                    page += 4096
                if page >= address + chunk:
                    break
                data = read(page, address + chunk - page)
            scan(data)
            if len(data) < min(chunk, end - address):
                break  # the region ends here
            address += chunk
    return len(regions)


def f(x):
    {SCAN}
    print("FOUND", sorted(FOUND))
    return sorted(FOUND)


g = f
'''


def _program(scan: str) -> str:
    return _SCANNER.replace("{SCAN}", scan)


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(LIMITS, workers=1) as sandbox:
        yield sandbox


def _seen(result) -> str:
    return repr((result.stdout, result.stderr, result.tests, result.details))


@pytest.mark.parametrize("scan", ["_gc_walk()", "_frame_walk()", "_raw_scan()"])
def test_a_program_finds_no_judge_test_in_its_memory(box, scan):
    token = secrets.token_hex(8)
    tests = [TestCase("judged", "assert", f"i = 0\nwhile i < 1:  # not convertible: judged\n    assert f(1) == 7  # SECRET-MARK{token}\n    i += 1\n")]
    support = f"HIDDEN = 'SECRET-MARK{token}'\n"
    result = box.run_tests(_program(scan), tests, support=support)
    assert result.details["verdict"] == "trusted-tests"
    assert "FOUND" in result.stdout  # the scan ran
    assert token not in _seen(result)
    assert result.status == Status.WRONG


@pytest.mark.parametrize("scan", ["_gc_walk()", "_frame_walk()", "_raw_scan()"])
def test_a_program_finds_no_expected_value_of_a_compared_test(box, scan):
    token = secrets.token_hex(8)
    tests = [TestCase("compared", "assert", f"assert g(1) == ['SECRET-MARK{token}']\n")]
    result = box.run_tests(_program(scan), tests)
    assert result.details["verdict"] == "outputs-compared"
    assert "FOUND" in result.stdout
    assert token not in _seen(result)
    assert result.status == Status.WRONG


def test_a_later_job_finds_no_earlier_jobs_tests(box):
    token = secrets.token_hex(8)
    tests = [TestCase("judged", "assert", f"i = 0\nwhile i < 1:  # not convertible: judged\n    assert f(1) == 7  # SECRET-MARK{token}\n    i += 1\n")]
    honest = box.run_tests("def f(x):\n    return 7\n", tests)
    assert honest.status == Status.CORRECT and honest.details["verdict"] == "trusted-tests"
    later = box.run(_program("_raw_scan(); _gc_walk()") + "\nf(0)\n")
    assert "FOUND" in later.stdout
    assert token not in _seen(later)


def test_an_honest_program_still_passes_judged_and_compared_tests(box):
    judged = [TestCase("judged", "assert", "x = 0\nwhile x < 3:\n    assert f(x) == x + 1  # SECRET-MARKx\n    x += 1\n")]
    compared = [TestCase("compared", "assert", "assert f(1) == 2\n")]
    code = "def f(x):\n    return x + 1\n"
    assert box.run_tests(code, judged).status == Status.CORRECT
    assert box.run_tests(code, compared).status == Status.CORRECT


def _judge_hosts(worker_pid: int) -> list[int]:
    """The worker's detached judge host: a process in the worker's own network namespace that is neither it nor its child."""
    hosts = []
    try:
        namespace = os.readlink(f"/proc/{worker_pid}/ns/net")
    except PermissionError:  # the worker is not dumpable: only root may read its /proc entries
        pytest.skip("not root: the workers' and judge hosts' namespaces cannot be read from /proc")
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == worker_pid:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            same = os.readlink(f"/proc/{entry}/ns/net") == namespace
        except OSError:
            continue
        if same and int(fields[1]) != worker_pid and fields[0] != b"Z":
            hosts.append(int(entry))
    return hosts


def test_a_killed_judge_host_costs_one_retry_and_a_closed_sandbox_leaves_none():
    judged = [TestCase("judged", "assert", "x = 0\nwhile x < 3:\n    assert f(x) == x + 1\n    x += 1\n")]
    code = "def f(x):\n    return x + 1\n"
    box = CodeSandbox(LIMITS, workers=1)
    try:
        first = box.run_tests(code, judged)
        assert first.status == Status.CORRECT
        if first.details["network"] == "socket-blocked":
            pytest.skip("the workers share the host's network namespace: no way to tell their judge hosts apart")
        (host,) = _judge_hosts(box.worker_pids()[0])
        os.kill(host, signal.SIGKILL)
        again = box.run_tests(code, judged)
        assert again.status == Status.CORRECT and again.details["retried"] is True
        (worker,) = box.worker_pids()
        (host,) = _judge_hosts(worker)
    finally:
        box.close()
    deadline = time.monotonic() + 5
    while _alive(host) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(host)  # it exits when its worker and its caller are gone


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
