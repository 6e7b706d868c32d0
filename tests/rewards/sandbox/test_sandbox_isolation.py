"""Sandbox jobs running side by side are sealed from each other (private /tmp, /var/tmp, /dev/shm; kill(-1))."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from mathgym.rewards.base import Status
from mathgym.rewards.sandbox import CodeSandbox, SandboxLimits

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=6)
SHARED = ("/tmp", "/var/tmp", "/dev/shm")
WRITER = (
    "import time\n"
    "for folder in {dirs!r}:\n"
    "    with open(folder + '/{token}', 'w') as handle:\n"
    "        handle.write('secret')\n"
    "print(time.time(), flush=True)\n"
    "time.sleep(1.5)\n"
    "print(time.time())\n"
)
READER = "import os, time\nprint(time.time())\nprint([d for d in {dirs!r} if os.path.exists(d + '/{token}')])\n"


def _writer_and_reader(box: CodeSandbox) -> tuple[list[float], float, str, list[str]]:
    """Run a writer job and, while it sleeps, a reader job on another worker."""
    token = f"mathgym-isolation-{uuid.uuid4().hex}"
    dirs = tuple(d for d in SHARED if os.path.isdir(d))
    seen_by_host: list[str] = []
    with ThreadPoolExecutor(2) as threads:
        writer = threads.submit(box.run, WRITER.format(dirs=dirs, token=token))
        time.sleep(0.6)
        seen_by_host = [d for d in dirs if os.path.exists(f"{d}/{token}")]
        reader = threads.submit(box.run, READER.format(dirs=dirs, token=token)).result()
        written = writer.result()
    assert written.status == Status.CORRECT and reader.status == Status.CORRECT, (written, reader)
    times = [float(x) for x in written.stdout.split()]
    read_at, seen = float(reader.stdout.splitlines()[0]), reader.stdout.splitlines()[1]
    assert times[0] < read_at < times[1], "the reader must run while the writer's files exist"
    left = [d for d in dirs if os.path.exists(f"{d}/{token}")]
    for folder in left:  # not root and shared dirs: nothing removed the job's files
        os.unlink(f"{folder}/{token}")
    return seen_by_host, read_at, seen, left


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(LIMITS, workers=2) as sandbox:
        sandbox.warm_up()
        yield sandbox


def test_concurrent_jobs_do_not_see_each_others_files(box):
    probe = box.run("print(1)")
    if probe.details["tmp"] != "private":
        pytest.skip(f"no mount namespace on this machine: {probe.details.get('tmp_reason')}")
    if os.geteuid() == 0:
        assert probe.details["tmp_isolation"] == "private-tmpfs"  # DESIGN.md: namespaces work here as root
    seen_by_host, _, seen, left = _writer_and_reader(box)
    assert seen == "[]"  # the reader saw none of the writer's files
    assert seen_by_host == [] and left == []  # nor did the host, during or after


def test_nothing_is_left_in_the_shared_dirs(box):
    probe = box.run("print(1)")
    if probe.details["tmp"] != "private" and os.geteuid() != 0:
        pytest.skip("shared dirs and no uid to tell the job's files apart: see docs/rewards.md")
    before = {d: set(os.listdir(d)) for d in SHARED if os.path.isdir(d)}
    name = f"mathgym-left-{uuid.uuid4().hex}"
    code = f"import os\nfor d in ('/tmp', '/var/tmp', '/dev/shm'):\n    os.makedirs(d + '/{name}/sub')\n    open(d + '/{name}/sub/f', 'w').write('x')\n"
    assert box.run(code).status == Status.CORRECT
    after = {d: set(os.listdir(d)) for d in before}
    assert {d: after[d] - before[d] for d in before} == {d: set() for d in before}


def test_without_mount_namespaces_the_reason_is_reported(monkeypatch):
    monkeypatch.setenv("MATHGYM_SANDBOX_SIMULATE_NO_MOUNT_NAMESPACE", "1")
    with CodeSandbox(LIMITS, workers=2) as shared:
        shared.warm_up()
        result = shared.run("print(1)")
        assert result.details["tmp"] == "shared"
        assert "unshare(CLONE_NEWNS) refused" in result.details["tmp_reason"]
        seen_by_host, _, seen, left = _writer_and_reader(shared)
    # The control: in the shared dirs the reader does see the writer's files (so the
    # isolation test above can fail); as root they are still removed once the job ends.
    assert seen != "[]" and seen_by_host
    if os.geteuid() == 0:
        assert left == []


def _kill_minus_one_beside_a_victim(box: CodeSandbox) -> tuple:
    """A job sleeping on one worker while a job on the other sends ``kill(-1, SIGKILL)``."""
    with ThreadPoolExecutor(2) as threads:
        victim = threads.submit(box.run, "import time\ntime.sleep(1.5)\nprint('alive')\n")
        time.sleep(0.5)
        killer = threads.submit(box.run, "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('after')\n").result()
        survivor = victim.result()
    return killer, survivor, box.run("print('still here')")


def test_kill_minus_one_spares_the_job_beside_it(box):
    killer, survivor, after = _kill_minus_one_beside_a_victim(box)
    assert killer.status != Status.SANDBOX_ERROR
    assert survivor.status == Status.CORRECT and survivor.stdout == "alive\n", survivor
    assert after.stdout == "still here\n"
    assert survivor.details["pid_namespace"] == "private"  # the jobs' own PID namespace (root, or in a user namespace)


def test_without_a_pid_namespace_the_uid_still_spares_the_job_beside_it(monkeypatch):
    """The fallback where the OS refuses PID namespaces: as root, each worker's jobs run under
    their own uid, so kill(-1) reaches only the job's own processes; the reason is reported."""
    if os.geteuid() != 0:
        pytest.skip("not root, the fallback has no uid of its own to drop to (see docs/rewards.md)")
    monkeypatch.setenv("MATHGYM_SANDBOX_SIMULATE_NO_PID_NAMESPACE", "1")
    with CodeSandbox(LIMITS, workers=2) as box:
        box.warm_up()
        killer, survivor, after = _kill_minus_one_beside_a_victim(box)
        leftover = box.run("import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(30)'])\n")
        pids = box.worker_pids()
        orphans = [pid for pid in _children_of(pids) if pid not in pids]
    assert killer.status != Status.SANDBOX_ERROR and after.stdout == "still here\n"
    assert survivor.status == Status.CORRECT and survivor.stdout == "alive\n", survivor
    assert survivor.details["pid_namespace"] == "shared" and "simulated" in survivor.details["pid_namespace_reason"]
    assert leftover.status == Status.CORRECT and orphans == []  # the worker swept the job's orphan itself


def _children_of(pids: list[int]) -> list[int]:
    from tests.rewards.sandbox.test_hostile_code import _process_table

    return [pid for pid, (ppid, _) in _process_table().items() if ppid in pids]


_KILL_AS_NON_ROOT = """
import json, os, subprocess, sys, time
sys.path.insert(0, {tests!r})
from test_sandbox_isolation import LIMITS, _kill_minus_one_beside_a_victim
from mathgym.rewards.sandbox import CodeSandbox
bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # another process of the user
with CodeSandbox(LIMITS, workers=2) as box:
    box.warm_up()
    killer, survivor, after = _kill_minus_one_beside_a_victim(box)
alive = bystander.poll() is None
bystander.kill()
print(json.dumps({{"euid": os.geteuid(), "killer": killer.status.value, "survivor": survivor.stdout, "after": after.stdout,
                  "bystander": alive, **survivor.details}}))
"""


def test_not_root_kill_minus_one_reaches_no_process_of_the_user():
    """Not root, every job runs under the user's own uid: without the jobs' PID namespace a
    job's kill(-1) would kill every process of the user, the caller included. Run as uid 1000
    inside a PID namespace of the test's own, so that a failure kills nothing beyond it."""
    facts = _as_non_root(_KILL_AS_NON_ROOT, own_pid_namespace=True)
    if facts.get("pid_namespace") == "shared":  # the OS refused it: the documented fallback, nothing to test here
        pytest.skip(f"no PID namespace for the jobs here: {facts['pid_namespace_reason']}")
    assert facts["survivor"] == "alive\n" and facts["after"] == "still here\n" and facts["bystander"] is True, facts
    assert facts["killer"] != "sandbox_error"


def test_sandboxed_code_cannot_reach_a_listener_on_this_host(box):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        accepted: list[object] = []
        server.settimeout(0.2)

        def accept() -> None:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not accepted:
                try:
                    accepted.append(server.accept()[0])
                except TimeoutError:
                    pass

        listener = threading.Thread(target=accept)
        listener.start()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass  # the control: outside the sandbox the listener is reachable
            time.sleep(0.3)
            assert len(accepted) == 1
            code = f"import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('127.0.0.1', {port}))\nprint('connected')\n"
            result = box.run(code)
            time.sleep(0.3)
        finally:
            listener.join()
            for conn in accepted:
                conn.close()  # type: ignore[attr-defined]
    assert result.status == Status.WRONG and "connected" not in result.stdout, result
    assert "Network is unreachable" in result.stderr or "network access is disabled" in result.stderr, result.stderr
    assert len(accepted) == 1  # the sandboxed connect never arrived
    assert result.details["network"] in ("netns", "netns-userns", "socket-blocked")
    if os.geteuid() == 0:
        assert result.details["network"] == "netns"  # DESIGN.md: unshare -n works here as root


_AS_NON_ROOT = """
import json, os, sys
sys.path.insert(0, {tests!r})
from test_sandbox_isolation import LIMITS, _writer_and_reader
from mathgym.rewards.sandbox import CodeSandbox
with CodeSandbox(LIMITS, workers=2) as box:
    box.warm_up()
    probe = box.run("print(1)")
    seen_by_host, _, seen, left = _writer_and_reader(box)
print(json.dumps({{"euid": os.geteuid(), "seen": seen, "left": left, **probe.details}}))
"""


def _as_non_root(script: str, *, own_pid_namespace: bool = False) -> dict:
    """Run ``script`` (formatted with ``tests``, this directory) as uid 1000 in a user namespace
    without root mapping, what a user's machine does; the JSON of its last line. Skips where the
    OS does not allow it. ``own_pid_namespace``: inside a PID namespace of its own too, so that a
    job that reaches beyond its sandbox kills nothing outside the script."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1) to become a non-root user")
    command = [unshare, "--user", "--map-user=1000", "--map-group=1000", *(("--pid", "--fork") if own_pid_namespace else ())]
    preflight = subprocess.run([*command, "true"], capture_output=True, text=True, timeout=60)
    if preflight.returncode != 0:
        pytest.skip(f"cannot become a non-root user here: {preflight.stderr.strip()[-200:]}")
    proc = subprocess.run([*command, sys.executable, "-c", script.format(tests=os.path.dirname(__file__))],
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout, f"the script printed nothing (exit {proc.returncode}; killed?): {proc.stderr[-500:]}"
    facts = json.loads(proc.stdout.splitlines()[-1])
    assert facts["euid"] == 1000
    return facts


def test_a_non_root_user_gets_the_same_isolation_through_user_namespaces():
    """Run as uid 1000 (a user namespace without root mapping): what a user's machine does."""
    facts = _as_non_root(_AS_NON_ROOT)
    if facts["tmp"] != "private":  # a machine that refuses user namespaces: the fallback, with its reason
        assert facts["tmp_reason"] and facts["seen"] != "[]"
        return
    assert facts["network"] == "netns-userns" and facts["fs_view"] == "allow-list"
    assert facts["seen"] == "[]" and facts["left"] == [] and facts["hidden_paths"] >= 1


#: A job that tries what holding capabilities would allow: remount a read-only bind of its
#: view writable and write into the runtime (the standard library dir), unmount it, attach to
#: its worker with ptrace and read the worker's memory. One JSON line: what each call returned.
_CAPABILITY_PROBE = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
target = os.path.dirname(os.__file__)
facts = {{"remount": libc.mount(None, target.encode(), None, 0x20 | 0x1000, None)}}  # MS_REMOUNT | MS_BIND, without MS_RDONLY
try:
    with open(os.path.join(target, {marker!r}), "w") as handle:
        handle.write("escaped")
    facts["wrote"] = True
except OSError:
    facts["wrote"] = False
facts["umount"] = libc.umount2(target.encode(), 2)
facts["ptrace"] = libc.ptrace(16, os.getppid(), None, None)  # PTRACE_ATTACH to the worker
if facts["ptrace"] == 0:  # let the worker go again: wait for its stop, then detach
    os.waitpid(os.getppid(), 0x40000000)
    libc.ptrace(17, os.getppid(), None, None)
facts["ptrace_caller"] = libc.ptrace(16, {caller}, None, None)  # the process that called run(): it holds the expected values
if facts["ptrace_caller"] == 0:
    os.waitpid({caller}, 0x40000000)
    libc.ptrace(17, {caller}, None, None)
facts["signal_caller"] = libc.kill({caller}, 0)
try:
    with open(f"/proc/{{os.getppid()}}/mem", "rb") as memory:
        memory.read(1)
    facts["mem"] = True
except OSError:
    facts["mem"] = False
print(json.dumps(facts))
"""

_PROBE_AS_NON_ROOT = """
import json, os, sys
sys.path.insert(0, {{tests!r}})
from test_sandbox_isolation import LIMITS, _CAPABILITY_PROBE
from mathgym.rewards.sandbox import CodeSandbox
with CodeSandbox(LIMITS, workers=1) as box:
    result = box.run(_CAPABILITY_PROBE.format(marker={marker!r}, caller=os.getpid()))
print(json.dumps({{{{"euid": os.geteuid(), "stdout": result.stdout, "stderr": result.stderr[-500:], **result.details}}}}))
"""


def _probe_capabilities(as_non_root: bool) -> dict:
    marker = f"mathgym-escape-{uuid.uuid4().hex}.txt"
    planted = os.path.join(os.path.dirname(os.__file__), marker)
    try:
        if as_non_root:
            facts = _as_non_root(_PROBE_AS_NON_ROOT.format(marker=marker))
        else:
            with CodeSandbox(LIMITS, workers=1) as box:
                result = box.run(_CAPABILITY_PROBE.format(marker=marker, caller=os.getpid()))
            facts = {"stdout": result.stdout, "stderr": result.stderr, **result.details}
        facts["planted"] = os.path.exists(planted)
        return facts
    finally:
        if os.path.exists(planted):
            os.unlink(planted)


@pytest.mark.parametrize("as_non_root", [False, True], ids=["root", "non-root"])
def test_a_job_holds_no_capability_and_cannot_reach_its_worker(as_non_root):
    """Not root, the job lives in the worker's user namespace, which gives every capability to
    its processes unless the job drops them: it could then remount the runtime writable and
    change the user's own files. Nor may it ptrace or signal the worker or the caller (same
    uid when not root), or read the worker's memory."""
    if not as_non_root and os.geteuid() != 0:
        pytest.skip("the root case needs root")
    facts = _probe_capabilities(as_non_root)
    assert "fs_view" in facts, facts  # the job ran (no infrastructure error)
    if facts["fs_view"] != "allow-list":
        pytest.skip(f"no allow-list view here: {facts['fs_view_reason']}")
    probe = json.loads(facts["stdout"].splitlines()[-1])
    assert probe == {"remount": -1, "wrote": False, "umount": -1, "ptrace": -1, "ptrace_caller": -1, "signal_caller": -1, "mem": False}, (probe, facts["stderr"])
    assert facts["planted"] is False


def test_mathgym_sandbox_says_what_holds_and_why_not(monkeypatch, capsys):
    from mathgym.cli import main

    assert main(["sandbox"]) == 0
    out = capsys.readouterr().out
    assert "pid_namespace = private" in out and "fs_view = allow-list" in out, out
    monkeypatch.setenv("MATHGYM_SANDBOX_SIMULATE_NO_PID_NAMESPACE", "1")
    assert main(["sandbox"]) == 0
    out = capsys.readouterr().out
    assert "[WEAK] no other process in sight" in out and "(simulated)" in out, out
