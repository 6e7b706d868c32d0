"""Warm worker of the code sandbox: forks one contained child per job.

Trusted side: it never runs untrusted code itself, it forks the children that do, and reads
only what they write on their pipes (capped). Run as a script (``python -I trusted_worker.py``)
by :mod:`mathgym.rewards.sandbox.trusted_caller`; stand-alone (stdlib only) so it never imports
mathgym or holds the caller's state: it loads its siblings by path (:func:`_load_sibling`).

At start it pre-imports common standard-library modules (forked children reuse them),
moves itself into a fresh network namespace where the OS allows it, computes the
allow-list (:func:`runtime_view`: the interpreter, its standard library, the
site-packages, read-only) and moves into a fresh root that holds only that
(:func:`containment.enter_view`), so every job starts there; and it becomes a child
subreaper so that no descendant of a job can escape the final sweep.

Per job it forks a child that seals itself (:mod:`containment`) and runs the job
(:mod:`untrusted_child`; both loaded before any fork); this process feeds stdin, enforces
the wall clock, caps the output, kills the process group and every remaining descendant,
and removes the scratch dir.
An ``"rpc"`` job also has a judge (:mod:`trusted_judge`), which runs the tests and
calls the child's functions through a pair of pipes; the job ends when the judge does,
and its verdict lines (from a pipe only the judge holds) come back as ``"verdicts"``.
The judge is forked by the judge host, started before this process reads any job and
fed the tests by the caller on a side channel: this process never reads a test or an
expected value, so no child forked from it has one in its memory.

Protocol: JSON lines; first line out ``{"ready": true, ...}``; then one reply per job.
"""

import ctypes
import fcntl
import gc
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time


def _load_sibling(name, **siblings):
    """Import ``name``.py from this script's directory without putting that directory on
    ``sys.path`` (nor in ``sys.modules``, where a job's code would find it by name);
    ``siblings``, loaded before it, are its globals from the start (it imports nothing of mathgym)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    vars(module).update(siblings)
    spec.loader.exec_module(module)
    return module


codec = _load_sibling("codec")
containment = _load_sibling("containment")
untrusted_child = _load_sibling("untrusted_child", codec=codec, containment=containment)
trusted_judge = _load_sibling("trusted_judge")

#: Imported before any fork, so that a job's imports of them cost nothing. Left out: modules that
#: register work to run in every forked child (``threading``, imported by ``queue``, re-creates its
#: state; ``random``, imported by ``statistics``, ``secrets``, ``uuid`` and ``tempfile``, reseeds):
#: with them a job's child starts with about 230 copy-on-write page faults instead of 60, some 0.7 ms
#: of CPU on every job, while a program that imports one itself pays 2-5 ms once.
PRELOAD = (
    "abc array ast base64 binascii bisect builtins calendar cmath collections collections.abc contextlib copy "
    "csv dataclasses datetime decimal difflib enum fractions functools gc hashlib heapq hmac io itertools json "
    "keyword locale math numbers operator pprint re string struct textwrap time "
    "traceback typing unicodedata weakref zlib socket"
).split()
CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWPID = 0x40000000, 0x10000000, 0x20000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
SHARED_WRITABLE = containment.SHARED_WRITABLE
#: The host's /proc, opened before this process moves into the allow-list view (which has none).
PROC = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY) if os.path.isdir("/proc") else None


def _preload(extra):
    for name in (*PRELOAD, *extra):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module missing here is missing for the job too
            pass


#: System dirs a job's programs may need (shared libraries, ``/bin/sh``), where they exist.
SYSTEM_DIRS = ("/bin", "/lib", "/lib64", "/usr/bin", "/usr/lib", "/usr/lib64")
SITE_DIR_NAMES = ("site-packages", "dist-packages")


def runtime_view(base):
    """The allow-list every job's filesystem view is built from: ``(view, None)``, or
    ``(None, reason)`` when it cannot be computed. Computed once, before any fork.

    Read-only: the interpreter, its standard library, the venv it runs in and every
    site-packages dir on ``sys.path``, and :data:`SYSTEM_DIRS`. Never the project
    checkout (the tree holding this file and its ``.git``) or a dir holding a ``.git``:
    a source dir on ``sys.path`` (an editable install, the script's own dir) stays out.
    Writable: a fresh tmpfs on each shared writable dir and on the scratch ``base``.
    Paths are resolved; each symlink met on the way (``/lib -> usr/lib``, the venv's
    ``python``) is recreated in the view.
    """
    import sysconfig  # noqa: PLC0415 - only here, once

    try:
        install = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix, "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix})
        wanted = [*SYSTEM_DIRS, install["stdlib"], install["platstdlib"], sys.executable]
        if sys.prefix != sys.base_prefix:
            wanted.append(sys.prefix)  # a venv: its python link, pyvenv.cfg, site-packages
        if sysconfig.get_config_var("Py_ENABLE_SHARED"):
            wanted.append(os.path.join(sysconfig.get_config_var("LIBDIR") or "/", sysconfig.get_config_var("INSTSONAME") or ""))
        wanted += [p for p in sys.path if os.path.basename(os.path.normpath(p or ".")) in SITE_DIR_NAMES]
        links, real = {}, set()
        for path in wanted:
            resolved = _resolve(path, links)
            if resolved is not None and os.path.exists(resolved):
                real.add(resolved)
        checkout = _checkout_root()
        dirs = []
        for path in sorted(p for p in real if os.path.isdir(p)):
            refused = path == "/" or (checkout is not None and _under(checkout, path)) or os.path.lexists(os.path.join(path, ".git"))
            if not refused and not any(_under(path, d) for d, _ in dirs):
                dirs.append((path, containment.readonly_flags(path)))

        def outside(path):
            return not any(_under(path, d) for d, _ in dirs)

        files = [(p, containment.readonly_flags(p)) for p in sorted(real) if os.path.isfile(p) and outside(p)]
        private = [*SHARED_WRITABLE]
        if not any(_under(base, d) for d in private):
            private.append(base)
        view = {
            "dirs": dirs,
            "files": files,
            "devices": [d for d in containment.DEVICES if os.path.exists(d)],
            "links": sorted((p, t) for p, t in links.items() if outside(p)),
            "private": private,
        }
        return view, None
    except Exception as err:  # noqa: BLE001 - reported; every job then gets the block-list
        return None, f"computing the allow-list failed: {type(err).__name__}: {err}"[:500]


def _resolve(path, links, depth=0):
    """``path`` with each symlink on the way resolved (and added to ``links``); None for a loop."""
    parts = os.path.abspath(path).split("/")[1:]
    current = ""
    for index, part in enumerate(parts):
        step = f"{current}/{part}"
        if os.path.islink(step):
            if depth > 40:
                return None
            links[step] = target = os.readlink(step)
            return _resolve(os.path.normpath(os.path.join(current or "/", target, *parts[index + 1 :])), links, depth + 1)
        current = step
    return current or "/"


def _under(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _checkout_root():
    """The source tree this worker runs from, when it is a checkout (holds ``.git`` or ``pyproject.toml``)."""
    folder = os.path.dirname(os.path.realpath(__file__))
    while folder != "/":
        if os.path.lexists(os.path.join(folder, ".git")) or os.path.exists(os.path.join(folder, "pyproject.toml")):
            return folder
        folder = os.path.dirname(folder)
    return None


def _isolate_network():
    """Enter a new network namespace: plain (root), else through a user namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) == 0:
        return "netns"
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        try:
            containment.write_id_maps(uid, gid)
            return "netns-userns"
        except OSError:
            pass
    return "socket-blocked"


def _nproc_self_test(uid):
    """Whether RLIMIT_NPROC actually stops a fork here (root ignores it)."""
    pid = os.fork()
    if pid == 0:
        try:
            if uid is not None:
                containment.drop_privileges(uid)
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
            try:
                grandchild = os.fork()
            except OSError:
                os._exit(0)  # refused: the limit holds
            if grandchild == 0:
                os._exit(0)
            os.waitpid(grandchild, 0)
            os._exit(1)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    return os.waitpid(pid, 0)[1] == 0



def _remove_leftovers(uid):
    """Delete what the job's uid left in world-writable dirs (its scratch dir is removed apart)."""
    if uid is None:
        return
    for folder in SHARED_WRITABLE:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _have_children():
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if reaped == 0:
            return True


def _in_proc(path, flags):
    return os.open(path, flags, dir_fd=PROC)


class PidNamespace:
    """A PID namespace for every job of this worker, and its init, which empties it on request.

    Made after the judge host is forked and before any job is: the jobs' processes see only
    their own processes and the init (pid 1, which no signal from inside reaches), so a
    job's ``kill(-1)`` or ``kill(pid)`` never reaches this worker, the judge host or judges,
    another worker's jobs or the user's other processes (not root, all of the same uid).
    Orphans of a job become the init's children; :meth:`sweep` has it kill everything else
    in the namespace and reap it. When this worker dies the init gets SIGKILL, and the
    kernel then kills every process left in the namespace.
    """

    #: Seconds the init may take to empty the namespace before this worker gives up (and exits).
    SWEEP_TIMEOUT_S = 10.0

    def __init__(self, simulate_refusal=False):
        self.control = None
        self.reason = None
        libc = containment.LIBC
        if simulate_refusal:
            self.reason = "unshare(CLONE_NEWPID) refused: Operation not permitted (simulated)"
            return
        if libc.unshare(CLONE_NEWPID) != 0:  # not root, allowed inside the worker's user namespace
            self.reason = f"unshare(CLONE_NEWPID) refused: {os.strerror(ctypes.get_errno())}"
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if os.fork() == 0:  # the first child: pid 1 of the new namespace
            try:
                ours.close()
                _namespace_init(theirs, libc)
            finally:
                os._exit(0)
        theirs.close()
        ours.settimeout(self.SWEEP_TIMEOUT_S)
        self.control = ours

    @property
    def active(self):
        """Whether the jobs live in the namespace (False: the OS refused it)."""
        return self.control is not None

    @property
    def fact(self):
        """What jobs report: ``"private"``, or ``"shared"`` when the OS refused."""
        return "private" if self.active else "shared"

    def sweep(self):
        """Have the init kill and reap every process in the namespace but itself (and this
        worker's own children, which it reaps itself). Exits this worker if the init is gone."""
        if not self.active:
            return
        try:
            self.control.send(b"k")
            if self.control.recv(1) == b"k":
                return
        except OSError:
            pass
        os._exit(70)  # no init: no job could be forked or swept any more; the caller starts a fresh worker


def _namespace_init(control, libc):
    """Pid 1 of the jobs' namespace: on each request, SIGKILL every other process in it, reap, answer."""
    # If the worker died before this, its end of ``control`` is closed and the loop below ends at once.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    keep = control.fileno()
    os.closerange(0, keep)
    os.closerange(keep + 1, 1 << 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    while control.recv(1):
        for _ in range(1000):
            signaled = libc.kill(-1, signal.SIGKILL) == 0  # from pid 1: everything in the namespace but itself
            reaped = False
            while True:
                try:
                    reaped = os.waitpid(-1, 0)[0] > 0 or reaped
                except ChildProcessError:
                    break
            if not signaled or not reaped:
                break  # nothing left, or only the worker's own children (the worker reaps those)
        control.send(b"k")


def _descendants_sweep(pgid, uid, namespace=None):
    """SIGKILL the job's process group, its uid and every child of ours; reap them.

    With the jobs' PID namespace, its init kills and reaps everything in it instead: no process
    of a job lives outside it, and its orphans are the init's children, not ours."""
    _kill_group(pgid)
    if namespace is not None and namespace.active:
        namespace.sweep()  # the job's own process included, when it still lives
        try:
            os.waitpid(pgid, 0)  # ``pgid`` is the job's process (our child), unless it was reaped already
        except ChildProcessError:
            pass
        return
    me = os.getpid()
    for _ in range(200):
        if not _have_children():
            return  # as a subreaper, no child of ours means no descendant of the job is left
        found = False
        for entry in os.listdir(PROC) if PROC is not None else ():
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                with open(f"{entry}/stat", "rb", opener=_in_proc) as handle:
                    ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
                owned = uid is not None and os.stat(entry, dir_fd=PROC).st_uid == uid
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me or owned:
                found = True
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        while True:
            try:
                reaped, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if reaped == 0:
                break
        if not found:
            return
        time.sleep(0.001)


#: Bytes a job's output pipe holds (``F_SETPIPE_SZ``, where the OS allows it), and how often
#: the worker empties them while the job runs: it wakes for the job's exit, not for each line.
PIPE_BYTES, DRAIN_S = 1 << 20, 0.005
F_SETPIPE_SZ = 1031


def _widen(fd):
    """Give the pipe of ``fd`` room for :data:`PIPE_BYTES` and make this end non-blocking."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass  # the default 64 KiB: the job's writes wait up to DRAIN_S more often
    os.set_blocking(fd, False)


class _Output:
    """The job's stdout, stderr and result pipes (non-blocking ends), read with a cap on what is kept."""

    def __init__(self, fds, cap):
        self.fds, self.cap = list(fds), cap
        self.kept = {fd: bytearray() for fd in fds}
        self.sizes = dict.fromkeys(fds, 0)
        self.open = list(fds)

    def read(self, fd):
        """Read one chunk of ``fd``; False when there was nothing to read now."""
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        if not chunk:
            self.open.remove(fd)
            return False
        self.sizes[fd] += len(chunk)
        room = (self.cap if fd in self.fds[:2] else 1 << 22) - len(self.kept[fd])
        if room > 0:
            self.kept[fd] += chunk[:room]
        return True

    def drain(self):
        """Read what the pipes hold now (after the job: what is left, EOF coming at once)."""
        for fd in list(self.open):
            for _ in range(1 << 12):
                if not self.read(fd):
                    break


def _pump(pid, output, stdin_w, stdin_data, deadline):
    """Feed stdin and keep the output pipes emptied until ``pid`` exits; True when the deadline hit first."""
    pidfd = os.pidfd_open(pid)
    pending = memoryview(stdin_data)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            writers = [stdin_w] if stdin_w is not None else []
            readable, writable, _ = select.select([pidfd], writers, [], min(remaining, DRAIN_S))
            if writable:
                try:
                    pending = pending[os.write(stdin_w, pending[: 1 << 16]) :]
                except OSError:
                    pending = pending[:0]
                if not pending:
                    os.close(stdin_w)
                    stdin_w = None
            output.drain()
            if readable:
                return False
    finally:
        os.close(pidfd)
        if stdin_w is not None:
            os.close(stdin_w)


def scratch_base(requested):
    """Where scratch dirs go: ``requested``, else /dev/shm when it is a writable tmpfs
    (creating and removing a dir there costs microseconds, on some disks milliseconds)."""
    if requested:
        return requested
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        try:
            with open("/proc/mounts") as mounts:
                if any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts):
                    return "/dev/shm"
        except OSError:
            pass
    import tempfile  # noqa: PLC0415 - only here: it imports random, whose reseed would run in every fork

    return tempfile.gettempdir()


def _shared_dir(uid):
    """A fresh dir of the view's workspace for one job (the program's working dir, and the judge's), the job's uid's."""
    path = os.path.join(containment.WORKSPACE, os.urandom(12).hex())
    os.mkdir(path, 0o700)
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def _empty_workspace():
    """Remove everything in the view's workspace (what a job left there, its own dir included)."""
    try:
        names = os.listdir(containment.WORKSPACE)
    except OSError:
        return
    for name in names:
        path = os.path.join(containment.WORKSPACE, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def run_job(job, uid, network, base, simulate_refusal=False, judge_host=None, namespace=None):
    received = time.monotonic_ns()
    limits = job["limits"]
    rpc = job["mode"] == "rpc"
    # The child creates it (in its own tmpfs over ``base``, where it has one) and it is removed here;
    # a job whose tests run in the judge works in a dir of the view's workspace, shared with the judge.
    scratch = os.path.join(base, f"mathgym-sandbox-{os.urandom(12).hex()}")
    if containment.workspace is not None:
        _empty_workspace()  # again: the last job's judge, killed as that job ended, may have written after its clean-up
        if rpc:
            scratch = job["workspace"] = _shared_dir(uid)
    pipes = [os.pipe() for _ in range(6 if rpc else 4)]  # stdin, out, err, result[, judge's calls, replies]
    (stdin_r, stdin_w), (out_r, out_w), (err_r, err_w), (res_r, res_w) = pipes[:4]
    for fd in (out_r, err_r, res_r):
        _widen(fd)
    started = time.monotonic()
    try:
        pid = os.fork()
    except OSError as err:
        _close_all(fd for pair in pipes for fd in pair)
        if namespace is not None:
            namespace.sweep()  # exits this worker when the namespace's init is gone (no fork into it can work)
        return {"infra_error": f"fork failed: {err!r}"}
    if pid == 0:
        child_fds = (pipes[4][0], out_w, err_w, res_w, pipes[5][1]) if rpc else (stdin_r, out_w, err_w, res_w)
        untrusted_child.child(job, child_fds, scratch, uid, network, simulate_refusal)
    _close_all((stdin_r, out_w, err_w, res_w))
    judge_pid, fds = None, [out_r, err_r, res_r]
    if rpc:
        os.close(stdin_w)  # the child's stdin is the judge's call pipe
        stdin_w = None
        try:
            judge_pid = _start_judge(job, judge_host, pipes[4][1], pipes[5][0], fds, uid)
        except OSError:
            # The judge host is gone (killed): end the job and this worker; the caller
            # sees the worker crash, retries on a fresh one (with a fresh judge host).
            _kill_group(pid)
            _descendants_sweep(pid, uid, namespace)
            shutil.rmtree(scratch, ignore_errors=True)
            _empty_workspace()
            os._exit(70)
        _close_all((*pipes[4], *pipes[5]))
    else:
        os.set_blocking(stdin_w, False)
    output = _Output(fds, limits["max_output_bytes"])
    swept = False
    try:
        deadline = started + limits["wall_seconds"]
        if judge_pid is None:
            timed_out = _pump(pid, output, stdin_w, job["stdin"].encode(), deadline)
        else:
            timed_out = _pump(judge_pid, output, None, b"", deadline)
            if not timed_out:  # its calls answered, the child sees the end of its input and exits by itself
                _pump(pid, output, None, b"", min(deadline, time.monotonic() + 0.5))
        wall = time.monotonic() - started
        exited = time.monotonic_ns()
        if timed_out or judge_pid is not None:
            _kill_group(pid)
        _, status, usage = os.wait4(pid, 0)
        _descendants_sweep(pid, uid, namespace)  # before draining: a leftover process could hold the pipes open
        swept = namespace is not None and namespace.active  # nothing can have entered the namespace since
        output.drain()
    finally:
        if judge_pid is not None:
            _kill_group(judge_pid)  # its session; and the process, before it made one
            try:
                os.kill(judge_pid, signal.SIGKILL)
            except OSError:
                pass
        if not swept:
            _descendants_sweep(pid, uid, namespace)
        _close_all(fds)
        shutil.rmtree(scratch, ignore_errors=True)
        if containment.workspace is not None:  # not root, any job may write there (the same uid as this worker)
            _empty_workspace()
    reply = _reply(output, limits, timed_out, wall, status, usage)
    if reply.get("tmp") != "private":
        _remove_leftovers(uid)  # with private tmpfs mounts, they vanished with the job's mount namespace
    if "marks" in reply:
        reply["marks"] = [job.get("sent_ns", received), received, *reply["marks"], exited, time.monotonic_ns()]
    return reply


#: Seconds the judge host may take to fork a judge before it is presumed hung (this worker then exits).
JUDGE_HOST_TIMEOUT_S = 10.0


def start_judge_host(side_fd):
    """Fork the judge host (:func:`trusted_judge.host`) on the caller's side channel; our end of its socket.

    Called before this process reads any job, and the host is detached (a grandchild,
    reparented away), so this process never holds a test and never reaps or sweeps the host.
    ``None`` without a side channel (every ``"rpc"`` job then has no judge).
    """
    if side_fd is None:
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    middle = os.fork()
    if middle == 0:
        try:
            ours.close()
            if os.fork() == 0:
                trusted_judge.host(side_fd, theirs, codec, containment)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)
    theirs.close()
    ours.settimeout(JUDGE_HOST_TIMEOUT_S)
    os.close(side_fd)  # never read here: the tests are the host's alone
    return ours


def _start_judge(job, judge_host, request_w, reply_r, fds, uid=None):
    """Have the judge host fork this job's judge on the pipes; its pid (its verdict pipe joins
    ``fds``), or None when there is no judge (every test is then reported unfinished).
    The judge works in the job's shared dir (``job["workspace"]``) as the job's ``uid``, so that
    the program may change or remove the files a test makes. Raises OSError when the judge host is gone."""
    if judge_host is None:
        return None
    verdict_r, verdict_w = os.pipe()
    message = {"id": job.get("judge_id"), "workspace": job.get("workspace"), "uid": uid}
    try:
        socket.send_fds(judge_host, [json.dumps(message).encode()], [request_w, reply_r, verdict_w])
        answer = judge_host.recv(64)
    except OSError:
        os.close(verdict_r)
        raise
    finally:
        os.close(verdict_w)
    if not answer:
        os.close(verdict_r)
        raise OSError("the judge host closed its socket")
    judge_pid = int(answer)
    if judge_pid <= 0:
        os.close(verdict_r)
        return None
    _widen(verdict_r)
    fds.append(verdict_r)
    return judge_pid


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _reply(output, limits, timed_out, wall, status, usage):
    """The JSON reply for a finished job (or an infra error if the harness never started)."""
    out_r, err_r, res_r = output.fds[:3]
    cap = limits["max_output_bytes"]
    truncated = {"stdout_truncated": output.sizes[out_r] > cap, "stderr_truncated": output.sizes[err_r] > cap}
    stdout, stderr, results = (output.kept[fd] for fd in (out_r, err_r, res_r))
    cpu = usage.ru_utime + usage.ru_stime
    signaled = os.WIFSIGNALED(status) and not timed_out
    term_signal = os.WTERMSIG(status) if signaled else None
    cpu_limited = signaled and (term_signal == signal.SIGXCPU or cpu >= int(limits["cpu_seconds"] + 0.999) - 0.05)
    # Lines are handed on as text: the caller parses them, treating any it cannot read as
    # no output; a line crafted to break a JSON parser here must not become an infra error.
    lines = results.decode("utf-8", "replace").splitlines()
    ready = _harness_ready(lines[0] if lines else "")
    if ready is None:
        return {"infra_error": f"the sandboxed process failed before running the code (exit status {status})"}
    return {
        "tmp": "private" if ready["tmp"] != "shared" else "shared",
        "tmp_isolation": ready["tmp"],
        "tmp_reason": ready["tmp_reason"],
        "hidden_paths": ready.get("hidden"),
        "hide_reason": ready.get("hide_reason"),
        "fs_view": ready.get("fs_view"),
        "fs_view_reason": ready.get("fs_view_reason"),
        "timed_out": timed_out or cpu_limited,
        "limit": "wall" if timed_out else ("cpu" if cpu_limited else None),
        "exit_code": os.WEXITSTATUS(status) if not timed_out and os.WIFEXITED(status) else None,
        "signal": term_signal,
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "lines": lines[1:],
        **({"verdicts": output.kept[output.fds[3]].decode("utf-8", "replace").splitlines()} if len(output.fds) > 3 else {}),
        "duration_s": wall,
        **({"marks": ready["marks"]} if _marks(ready.get("marks")) else {}),
        "cpu_s": cpu,
        **truncated,
    }


def _marks(marks):
    """Whether ``marks`` are the harness's three clock readings (diagnostics only)."""
    return type(marks) is list and len(marks) == 3 and all(type(mark) is int for mark in marks)


def _harness_ready(line):
    """The harness's first line (written before the code ran), or ``None``."""
    try:
        ready = json.loads(line)
    except Exception:  # noqa: BLE001
        return None
    if type(ready) is not dict or ready.get("harness") != "ready" or type(ready.get("tmp")) is not str:
        return None
    return ready


def main():
    extra = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else []
    base = scratch_base(sys.argv[2] if len(sys.argv) > 2 else "")
    # Tests only: act as if the OS refused mount namespaces (or the new root, or PID namespaces), to exercise the fallbacks.
    simulate = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set()
    simulate_refusal = "simulate-no-mount-namespace" in simulate
    side_fd = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else None
    # Not dumpable, before anything is forked (the flag is inherited): a process of the same
    # uid (a job, when the user is not root) cannot ptrace this one, the judge host or a judge,
    # nor read their memory, without CAP_SYS_PTRACE in the initial user namespace.
    libc = containment.LIBC
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _preload(extra)
    network = _isolate_network()
    if simulate_refusal:
        view = (None, "unshare(CLONE_NEWNS) refused: Operation not permitted (simulated)")
    elif "simulate-no-new-root" in simulate:
        view = (None, "pivot_root refused: Operation not permitted (simulated)")
    else:
        view = runtime_view(base)
    containment.enter_view(*view)
    judge_host = start_judge_host(side_fd)  # before the subreaper flag: the host is not ours to sweep
    namespace = PidNamespace("simulate-no-pid-namespace" in simulate)  # after the judge host: it stays out of the jobs' sight
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    uid = 100_000 + os.getpid() if os.geteuid() == 0 else None
    containment.prepare_worker()  # the jobs' environment and streams, made here once
    # Forked children inherit the preloaded heap copy-on-write; keep the garbage collector
    # from walking (and so copying) it in every child.
    gc.collect()
    gc.freeze()
    hello = {"ready": True, "network": network, "uid": uid, "nproc_enforced": _nproc_self_test(uid), "pid": os.getpid(),
             "pid_namespace": namespace.fact, "pid_namespace_reason": namespace.reason}
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        try:
            reply = run_job(json.loads(line), uid, network, base, simulate_refusal, judge_host, namespace)
        except Exception as err:  # noqa: BLE001 - reported as an infrastructure failure
            reply = {"infra_error": f"{type(err).__name__}: {err}"[:500]}
        reply.update(network=network, nproc_enforced=hello["nproc_enforced"], uid=uid, scratch_base=base,
                     pid_namespace=namespace.fact, pid_namespace_reason=namespace.reason)
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
