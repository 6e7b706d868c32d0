"""What runs inside a sandboxed child: its own mounts, the privilege drop, the limits, and the code.

Loaded by the warm worker (:mod:`mathgym.rewards._sandbox_worker`) before it forks, so
each forked child already has it; stand-alone (stdlib only). The caller imports
:func:`encode_value` and :func:`decode_value` from here, the one codec both sides use.

The warm worker moves into the allow-list view once (:func:`enter_view`: a fresh root
holding the runtime read-only, tmpfs mounts on /tmp, /var/tmp, /dev/shm and the scratch
base, four devices; nothing else), so each child starts in it. In order, :func:`child`:
a new session, the job's pipes as fds 0-3 (every other fd closed), a mount namespace of
its own with fresh tmpfs mounts on those writable dirs and the task data covered where
it is in view (under the block-list fallback: the host's tree; all of it BEFORE the
privilege drop, since mounting needs the capability the drop removes), the scratch dir,
the drop to an unprivileged uid when root (BEFORE ``RLIMIT_NPROC``, which root ignores),
every capability dropped (not root, the worker's user namespace would give the job all of them),
the job's ``files`` written into the scratch dir (as that uid), rlimits, a replaced
environment, then the code: as a program (``"run"`` mode), as calls on given inputs
(``"calls"`` mode: it writes the returned values and never sees a test), or as a server of
calls (``"rpc"`` mode: it answers the call requests of the judge process, which runs the
tests, see :mod:`mathgym.rewards._trusted_tests`). The child never reports a verdict.
"""

import builtins
import ctypes
import fcntl
import io
import itertools
import json
import os
import re
import resource
import signal
import sys
import time

CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x1000, 0x4000, 0x40000
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
#: The environment of every job, but its scratch dir (``HOME`` and ``TMPDIR``, added per job).
JOB_ENVIRONMENT = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
#: The job's text streams on fds 0-2, made once in the warm worker (:func:`prepare_worker`).
_streams = None
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")
#: Files one private tmpfs may hold (a cap on inodes, so a job cannot exhaust them).
TMPFS_INODES = 4096
#: The C library, opened once in the warm worker (each job's child reuses it).
LIBC = ctypes.CDLL(None, use_errno=True)


def write_id_maps(uid, gid):
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"), ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as handle:
            handle.write(text)


def _own_namespace(simulate_refusal):
    """Enter a mount namespace of this process's own, private to it (nothing propagates back).

    Returns ``("private-tmpfs" | "private-tmpfs-userns", None)`` or ``("shared", reason)``.
    """
    libc = LIBC
    if simulate_refusal:
        return "shared", "unshare(CLONE_NEWNS) refused: Operation not permitted (simulated)"
    global _unshared
    _unshared = False
    how, before = "private-tmpfs", _mount_namespace_id()
    if libc.unshare(CLONE_NEWNS) != 0:
        refused = os.strerror(ctypes.get_errno())
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            again = os.strerror(ctypes.get_errno())
            return "shared", f"unshare(CLONE_NEWNS) refused: {refused}; with a user namespace: {again}"
        try:
            write_id_maps(uid, gid)
        except OSError as err:
            return "shared", f"unshare(CLONE_NEWNS) refused: {refused}; user namespace id maps: {err.strerror}"
        how = "private-tmpfs-userns"
    if before is not None and _mount_namespace_id() == before:
        return "shared", "unshare(CLONE_NEWNS) returned but the mount namespace is the same"
    _unshared = True
    # Our mounts must not propagate back to the host's namespace (systemd makes / shared).
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return "shared", f"mount --make-rprivate / refused: {os.strerror(ctypes.get_errno())}"
    return how, None


def _mount(source, target, fstype, flags, options=None):
    """mount(2), raising OSError with the target named."""
    libc = LIBC
    if libc.mount(source, target.encode(), fstype, flags, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target} refused: {os.strerror(errno)}")


def _mount_private(folders, size_mb, root=""):
    """A fresh tmpfs (mode 1777, capped in size and inodes) on each of ``folders`` under ``root``."""
    options = f"size={size_mb}m,nr_inodes={TMPFS_INODES},mode=1777".encode()
    for folder in folders:
        if root:
            os.makedirs(root + folder, 0o755, exist_ok=True)
        elif not os.path.isdir(folder):
            continue
        _mount(b"tmpfs", root + folder, b"tmpfs", MS_NOSUID | MS_NODEV, options)


def _mount_namespace_id():
    """The inode of this process's mount namespace; None where /proc is out of view (the
    allow-list view has none: asked without raising, which a forked job would pay for)."""
    if not os.access("/proc/self/ns/mnt", os.F_OK):
        return None
    try:
        return os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        return None


def _hide(paths):
    """Cover each path (the task data: its tests and expected values) with an empty read-only
    tmpfs (a directory) or /dev/null (a file), inside the job's mount namespace.

    Returns how many were hidden and, when some could not be, why.
    """
    if not paths:
        return 0, None
    if not _unshared:
        return 0, "not in a mount namespace of its own: nothing hidden"  # never mount over the host's paths
    libc = LIBC
    hidden, failures = 0, []
    for path in paths:
        if os.path.isdir(path):
            done = libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, b"size=4k,mode=0555") == 0
        elif os.path.exists(path):
            done = libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None) == 0
        else:  # not in the job's view at all (outside the allow-list, or under a fresh tmpfs)
            hidden += 1
            continue
        if done:
            hidden += 1
        else:
            failures.append(f"{path}: {os.strerror(ctypes.get_errno())}")
    return hidden, "; ".join(failures)[:500] or None


# -- The allow-list view: a fresh root holding only what a job may see -------------------

#: Device files a job may open, bound from the host's /dev.
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
MS_NOEXEC, MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 0x8, 0x20, 0x400, 0x800, 0x200000
MNT_DETACH = 2
#: pivot_root(2) has no libc wrapper; its system call number per architecture.
PIVOT_ROOT_SYSCALL = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "ppc64": 203, "s390x": 217}
#: Where the new root is assembled (in the worker's own mount namespace, over its /tmp). The
#: sources are opened before it is covered, so a runtime that lives under /tmp is still bound.
STAGING = "/tmp"
#: Where the view keeps a second, read-only bind of each runtime dir that lies under a private
#: dir (a venv under /tmp): every job mounts a fresh tmpfs there and binds the dir again from here.
RUNTIME_MIRROR = "/.mathgym-runtime"
#: Size of the worker's own tmpfs mounts in the view (each job mounts fresh ones over them).
WORKER_TMPFS_MB = 64
#: A tmpfs of the view that jobs do not cover with their own: where a job whose tests run in the
#: judge (``"rpc"``) gets its working dir, at the same path for the program and the judge, so
#: files a test writes (in its working dir, or through ``tempfile``) are there for the program,
#: and files the program writes are there for the test. One job's dir at a time; emptied after it.
WORKSPACE = "/.mathgym-workspace"

#: Why jobs get the block-list view; None once this process (the warm worker) is in its view.
_view_reason = "the worker has not entered an allow-list view"
#: :data:`WORKSPACE` once this process is in its view (None: jobs have no shared working dir).
workspace = None
#: The dirs a job gets a fresh tmpfs on.
_private = SHARED_WRITABLE
#: Runtime dirs under a private dir, ``(path, flags)``: bound again in each job from RUNTIME_MIRROR.
_runtime_in_private = ()
#: Whether this process is in a mount namespace it unshared itself (mounting never touches the host's).
_unshared = False


def readonly_flags(path):
    """mount(2) flags that remount a bind of ``path`` read-only: nosuid, nodev, and the
    noexec and access-time flags its mount already has (a user namespace may not change them)."""
    have = os.statvfs(path).f_flag
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV
    for statvfs_flag, mount_flag in ((os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if have & statvfs_flag:
            flags |= mount_flag
    return flags


def enter_view(view, reason=None):
    """Move this process (the warm worker, before it forks a job) into a fresh root holding
    only ``view``; every job forked from it starts there, in a mount namespace copied from it.

    ``view`` (see ``runtime_view`` in the worker) holds real paths: ``dirs`` and ``files``
    (bound read-only), ``devices`` (bound as they are), ``links`` (symlinks recreated, e.g.
    ``/lib -> usr/lib``) and ``private`` (a tmpfs each: /tmp, /var/tmp, /dev/shm, the
    scratch base; each job mounts fresh ones over them). Built once, so a job pays only for
    its own namespace and tmpfs mounts, as under the block-list. ``view=None`` (or a
    refusal of the OS) leaves this process where it is: jobs get the block-list view, and
    their ``details["fs_view_reason"]`` says why. Returns that reason, or None.
    """
    global _view_reason, _private, _runtime_in_private, workspace
    if view is None:
        _view_reason = reason or "no allow-list was computed"
        return _view_reason
    how, refused = _own_namespace(False)
    if how == "shared":
        _view_reason = refused
        return _view_reason
    try:
        _assemble_root(view)
    except OSError as err:
        libc = LIBC
        libc.umount2(STAGING.encode(), MNT_DETACH)  # jobs fall back to the host's tree, as it was
        _view_reason = err.strerror if err.errno == 0 else str(err)
        return _view_reason
    _view_reason, _private, workspace = None, tuple(view["private"]), WORKSPACE
    _runtime_in_private = tuple(_in_private(view))
    return None


def _in_private(view):
    """The view's runtime dirs that lie under one of its private dirs (covered by each job's tmpfs)."""
    return [(path, flags) for path, flags in view["dirs"] if any(path == p or path.startswith(p.rstrip("/") + "/") for p in view["private"])]


def _rebind_runtime(root=""):
    """Bind each runtime dir under a private dir again, from the view's mirror, over the fresh tmpfs."""
    for path, flags in _runtime_in_private:
        os.makedirs(root + path, 0o755, exist_ok=True)
        _bind(root + RUNTIME_MIRROR + path, root + path, flags)


def _assemble_root(view):
    """Build the root at :data:`STAGING` and pivot into it; the host's root is detached.

    Raises OSError before the pivot; a failure after it ends the process (its root would
    be in an unknown state).
    """
    global _runtime_in_private
    root = STAGING
    # Each source is opened before the staging tmpfs covers /tmp (a venv may live there) and bound
    # through its descriptor.
    sources = {path: os.open(path, os.O_PATH) for path, _ in (*view["dirs"], *view["files"])}
    try:
        _mount(b"tmpfs", root, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,nr_inodes=4096,mode=0755")
        mirrored = _in_private(view)
        for path, flags in view["dirs"]:
            target = root + (RUNTIME_MIRROR + path if (path, flags) in mirrored else path)
            os.makedirs(target, 0o755, exist_ok=True)
            _bind(f"/proc/self/fd/{sources[path]}", target, flags)
        for path, flags in (*view["files"], *((device, 0) for device in view["devices"])):
            os.makedirs(root + os.path.dirname(path), 0o755, exist_ok=True)
            os.close(os.open(root + path, os.O_WRONLY | os.O_CREAT, 0o644))
            _bind(f"/proc/self/fd/{sources[path]}" if path in sources else path, root + path, flags)
    finally:
        for fd in sources.values():
            os.close(fd)
    for path, target in view["links"]:
        os.makedirs(root + os.path.dirname(path), 0o755, exist_ok=True)
        os.symlink(target, root + path)
    _mount_private(view["private"], WORKER_TMPFS_MB, root)
    os.makedirs(root + WORKSPACE, 0o755)
    _mount(b"tmpfs", root + WORKSPACE, b"tmpfs", MS_NOSUID | MS_NODEV, f"size={WORKER_TMPFS_MB}m,nr_inodes={TMPFS_INODES},mode=0711".encode())
    _runtime_in_private = tuple(mirrored)
    _rebind_runtime(root)
    _mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    number = PIVOT_ROOT_SYSCALL.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"pivot_root: system call number unknown on {os.uname().machine}")
    libc = LIBC
    os.chdir(root)
    if libc.syscall(number, b".", b".") != 0:
        errno = ctypes.get_errno()
        os.chdir("/")
        raise OSError(errno, f"pivot_root refused: {os.strerror(errno)}")
    # The host's root now sits on top of ours at "/": detach it, and with it every host path.
    if libc.umount2(b".", MNT_DETACH) != 0:
        raise SystemExit(f"detaching the host's root failed: {os.strerror(ctypes.get_errno())}")
    os.chdir("/")


def _bind(source, target, flags):
    """Bind ``source`` on ``target`` (which exists); remount it with ``flags`` when given."""
    _mount(source.encode(), target, None, MS_BIND)
    if flags:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | flags)


def _seal_filesystem(hide, size_mb, simulate_refusal):
    """The job's own mounts; the facts for the harness's ready line.

    In a mount namespace of its own (copied from the worker's), a fresh tmpfs on each
    private dir, and the ``hide`` paths covered where the job can see them. The view is
    the worker's: ``"allow-list"`` (:func:`enter_view`), else ``"block-list"`` (the host's
    tree, the task data covered) with the reason.
    """
    view = {"fs_view": "allow-list" if _view_reason is None else "block-list", "fs_view_reason": _view_reason}
    tmp, tmp_reason = _own_namespace(simulate_refusal)
    if tmp == "shared":
        return {"tmp": tmp, "tmp_reason": tmp_reason, "hidden": 0, "hide_reason": tmp_reason, **view}
    try:
        _mount_private(_private, size_mb)
        if _view_reason is None:
            _rebind_runtime()
    except OSError as err:
        return {"tmp": "shared", "tmp_reason": str(err), "hidden": 0, "hide_reason": str(err), **view}
    hidden, hide_reason = _hide(hide)
    return {"tmp": tmp, "tmp_reason": None, "hidden": hidden, "hide_reason": hide_reason, **view}


def drop_privileges(uid):
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


PR_SET_NO_NEW_PRIVS, LINUX_CAPABILITY_VERSION_3 = 38, 0x20080522
#: Made once, in the warm worker: a child that made them itself would pay for it every job.
_CAPSET, _PRCTL = LIBC.capset, LIBC.prctl
_CAP_HEADER, _NO_CAPABILITIES = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0), (ctypes.c_uint32 * 6)()


def drop_capabilities():
    """Empty this process's capability sets and forbid it (and all it starts) to gain any.

    Not root, the job keeps its uid and lives in the worker's user namespace, where it
    would otherwise hold every capability: enough to remount the view's read-only binds
    writable (and write into the user's own runtime), unmount its tmpfs, or ptrace other
    processes of that namespace. As root the uid drop has already emptied the sets; this
    also sets ``no_new_privs``, so no executable (setuid or with file capabilities) gives
    any back. Raises OSError when the kernel refuses: the job must not run then.
    """
    if _CAPSET(_CAP_HEADER, _NO_CAPABILITIES) != 0:  # effective, permitted, inheritable (two words each): all empty
        errno = ctypes.get_errno()
        raise OSError(errno, f"capset refused: {os.strerror(errno)}")
    if _PRCTL(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"no_new_privs refused: {os.strerror(errno)}")


def _set_limits(limits):
    cpu = max(1, int(limits["cpu_seconds"] + 0.999))
    memory = limits["memory_mb"] << 20
    for which, soft, hard in (
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_NPROC, limits["max_processes"], limits["max_processes"]),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] << 20, limits["max_file_mb"] << 20),
        (resource.RLIMIT_NOFILE, limits["max_open_files"], limits["max_open_files"]),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(which, (soft, hard))


def _write_files(files):
    """Write the job's ``files`` (relative path -> text, checked by the caller) into the
    working directory, the scratch dir; as the job's uid, so the code may change them."""
    for path, text in files.items():
        parts = path.split("/")
        if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
            continue  # the caller refuses these; never written outside the scratch dir
        if len(parts) > 1:
            os.makedirs("/".join(parts[:-1]), 0o700, exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)


def _block_sockets():
    import _socket
    import socket

    class BlockedSocket:
        def __init__(self, *args, **kwargs):
            raise PermissionError(1, "network access is disabled in the mathgym sandbox")

    socket.socket = _socket.socket = BlockedSocket  # Python-level only: see docs/rewards.md
    socket.create_connection = socket.socket


def prepare_worker():
    """Make, once in the warm worker, what every job would otherwise make itself.

    A forked child copies each page it writes, and building these took about 150 such page
    faults a job: the worker's own environment becomes the jobs' (:data:`JOB_ENVIRONMENT`; it
    starts no program of its own), and the text streams on fds 0-2 are made (never used
    here: in a job they read and write the pipes moved onto those fds).
    """
    global _streams
    os.environ.clear()
    os.environ.update(JOB_ENVIRONMENT)
    _streams = tuple(open(fd, mode, encoding="utf-8", errors="replace", closefd=False) for fd, mode in ((0, "r"), (1, "w"), (2, "w")))


def child(job, fds, scratch, uid, network, simulate_refusal):
    """The sandboxed process: never returns."""
    code = 70
    marks = [time.monotonic_ns()]  # entered, sealed, ready: where a job's time goes (bench_code.py --spans)
    try:
        os.setsid()
        # Out of the way of fds 0-4 first, so no pipe is overwritten before it is moved.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in fds]
        for target, fd in enumerate(high):
            os.dup2(fd, target)
        os.closerange(len(fds), 1 << 16)
        # Before the privilege drop: mounting needs the capability the drop takes away.
        sealed = _seal_filesystem(job.get("hide", ()), 4 * job["limits"]["max_file_mb"], simulate_refusal)
        marks.append(time.monotonic_ns())
        # A fresh, unguessable name (from the worker): in the job's own tmpfs, or under the
        # shared fallback in the host's dir, where mkdir fails rather than reuse what is there.
        if not job.get("workspace"):  # a shared working dir is made, and given to the uid, by the worker
            os.mkdir(scratch, 0o700)
            if uid is not None:
                os.chown(scratch, uid, uid)
        os.chdir(scratch)
        if uid is not None:
            drop_privileges(uid)
        drop_capabilities()
        _write_files(job.get("files") or {})
        _set_limits(job["limits"])
        if _streams is None:  # the environment would be the caller's: refuse to run the job
            raise RuntimeError("forked from a worker that did not call prepare_worker()")
        os.environ["HOME"] = os.environ["TMPDIR"] = scratch
        if "tempfile" in sys.modules:  # not in the worker (see its PRELOAD): a program's own import reads TMPDIR
            sys.modules["tempfile"].tempdir = scratch
        if network == "socket-blocked":
            _block_sockets()
        for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGXFSZ else signal.SIG_IGN)
        sys.stdin, sys.stdout, sys.stderr = _streams
        sys.argv = ["main.py"]
        sys.setrecursionlimit(1000)
        marks.append(time.monotonic_ns())
        _write_line({"harness": "ready", **sealed, "marks": marks})
        code = {"calls": _execute_calls, "rpc": _serve_calls}.get(job["mode"], _execute)(job)
    except BaseException:  # noqa: BLE001 - the harness failing before the code ran
        code = 70
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _execute(job):
    import traceback

    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(job["code"], "main.py", "exec"), namespace)  # noqa: S102 - this IS the sandboxed child
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException as err:  # noqa: BLE001
        traceback.print_exception(type(err), err, err.__traceback__.tb_next)  # from the code's own frame
        return 1
    return 0


def _write_line(message):
    """One JSON line on the result pipe (fd 3), written whole."""
    data = memoryview((json.dumps(message) + "\n").encode())
    while data:
        data = data[os.write(3, data) :]


def _execute_calls(job):
    """Call the code's functions on the job's inputs; write each call's output, never a verdict.

    The job holds no test and no expected value (the caller compares the outputs), so
    nothing this process can reach tells it what a test wants.
    """

    # Inputs first, while builtins are pristine: literals and pure builtins from the test,
    # evaluated as the test would have (a bad input fails the code's load, as it would).
    try:
        calls = [
            (call["function"], [_input(a) for a in call["args"]], {k: _input(v) for k, v in call["kwargs"].items()}, _WRAPPERS.get(call.get("wrap")))
            for call in job["calls"]
        ]
    except BaseException as err:  # noqa: BLE001
        _write_line({"load_error": f"an input of the tests raised {_describe(err)}"})
        return 0
    namespace = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(job["code"], "main.py", "exec"), namespace)  # noqa: S102 - this IS the sandboxed child
    except BaseException as err:  # noqa: BLE001 - SystemExit included: the code did not load
        _write_line({"load_error": _describe(err)})
        return 0
    for index, (name, args, kwargs, wrap) in enumerate(calls):
        try:
            function = namespace[name] if name in namespace else getattr(builtins, name)
        except AttributeError:
            _write_line({"i": index, "error": f"NameError: name {name!r} is not defined"})
            continue
        try:
            value = function(*args, **kwargs)
            line = {"i": index, "ok": encode_value(value if wrap is None else wrap(value))}
        except BaseException as err:  # noqa: BLE001 - SystemExit in a call is a failed call too
            line = {"i": index, "error": _describe(err)}
        _write_line(line)
    return 0


def _serve_calls(job):
    """Load the code, then answer the judge's calls (fd 0 in, fd 4 out) until it closes fd 0.

    One reply line per request: the encoded return value or the exception, never a verdict
    (the judge holds the tests). The helpers are bound before the code runs, so a program
    that patches ``json`` or ``os`` changes only its own answers.
    """
    read, loads, dumps, encode, decode, chdir = os.read, json.loads, json.dumps, encode_value, decode_value, os.chdir
    shared = job.get("workspace")  # the working dir shared with the judge (None: the job has its own)

    def reply(message):
        data = memoryview((dumps(message) + "\n").encode())
        while data:
            data = data[os.write(4, data) :]

    namespace = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(job["code"], "main.py", "exec"), namespace)  # noqa: S102 - this IS the sandboxed child
    except BaseException as err:  # noqa: BLE001 - SystemExit included: the code did not load
        reply({"load_error": _describe(err)})
        return 0
    reply({"ready": True})
    pending = bytearray()
    objects = []  # what calls returned that is not plain data, by handle (the judge holds only the numbers)
    while True:
        end = pending.find(b"\n")
        if end < 0:
            chunk = read(0, 1 << 16)
            if not chunk:
                return 0
            pending += chunk
            continue
        request = loads(bytes(pending[:end]))
        del pending[: end + 1]
        cwd = request.get("cwd")
        if shared and type(cwd) is str and (cwd == shared or cwd.startswith(shared + "/")):
            try:  # the test changed its working dir (into a dir it made): the call runs there too
                chdir(cwd)
            except OSError:
                pass
        if request.get("capture") is True:  # the test reads what the call prints (pytest's capsys)
            reply(_captured(lambda: _answer(namespace, request, encode, decode, objects)))
        else:
            reply(_answer(namespace, request, encode, decode, objects))


#: Most characters of a call's printed output sent back (each of stdout and stderr).
MAX_CAPTURED = 1 << 20


def _captured(answer):
    """``answer()`` with what it prints to ``sys.stdout`` and ``sys.stderr`` caught and added to
    its reply (``"stdout"``, ``"stderr"``), as pytest's ``capsys`` catches it."""
    streams = sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        message = answer()
    finally:
        sys.stdout, sys.stderr = streams
    message["stdout"], message["stderr"] = out.getvalue()[:MAX_CAPTURED], err.getvalue()[:MAX_CAPTURED]
    return message


#: Most objects one job's calls may hand out by handle (each stays alive in the child).
MAX_HANDLES = 100_000


def _set_item(owner, key, value):
    owner[key] = value


def _del_item(owner, key):
    del owner[key]


#: What a test may ask of the program's object besides its methods: each answered by the object
#: itself, as a method's result is (comparisons are not among them: an object's own ``__eq__``
#: would let it equal whatever the test expects).
_OPERATIONS = {
    "len": len, "bool": bool, "str": str, "iter": iter,
    "getitem": lambda owner, key: owner[key], "setitem": _set_item, "delitem": _del_item,
    "setattr": lambda owner, name, value: setattr(owner, str(name), value), "delattr": lambda owner, name: delattr(owner, str(name)),
}


def _answer(namespace, request, encode, decode, objects):
    """Run one request; its reply (value, handle or exception, and arguments changed in place).

    A request names a function of the program (``fn``), a name it reads as a value
    (``global``), or a method (``fn``), attribute (``attr``) or operation (``op``) of an object an
    earlier call returned (``obj``, its handle); ``handles`` and
    ``kw_handles`` put such objects in the arguments. A returned value that is not plain data
    stays here and is answered by a new handle (``{"handle": n, "type": name}``), so a test can
    build an instance and call its methods; only plain values ever cross.
    """
    if "global" in request:  # a name of the program the test reads as a value (a constant, an object)
        name = str(request["global"])
        if name not in namespace:
            return {"error": f"NameError: name {name!r} is not defined", "type": "NameError"}
        return _named_value(lambda: namespace[name], encode, objects)
    owner = request.get("obj")
    if owner is not None:
        if not _holds(objects, owner):
            return {"error": "an unknown object", "type": None}
        owner = objects[owner]
        if request.get("op") in _OPERATIONS:  # len(obj), obj[key]... as the object itself answers them
            try:
                value = _OPERATIONS[request["op"]](owner, *[decode(a) for a in request.get("args", ())])
            except BaseException as err:  # noqa: BLE001
                return {"error": _describe(err), "type": type(err).__name__}
            return _reply_value(value, encode, objects)
        if "attr" in request:
            return _named_value(lambda: getattr(owner, request["attr"]), encode, objects)
    name = request["fn"]
    args = [decode(a) for a in request["args"]]
    kwargs = {k: decode(v) for k, v in request["kwargs"].items()}
    handled = {int(k): v for k, v in request.get("handles", {}).items()}  # argument position -> handle
    kw_handled = request.get("kw_handles", {})  # keyword -> handle
    if not all(_holds(objects, handle) for handle in [*handled.values(), *kw_handled.values()]):
        return {"error": "an unknown object", "type": None}
    for position, handle in handled.items():
        args[position] = objects[handle]
    for keyword, handle in kw_handled.items():
        kwargs[keyword] = objects[handle]
    if owner is not None:
        try:
            function = getattr(owner, name)
        except BaseException as err:  # noqa: BLE001
            return {"error": _describe(err), "type": type(err).__name__}
    else:
        function = namespace.get(name)
        if function is None:
            return {"error": f"NameError: name {name!r} is not defined", "type": "NameError"}
    try:
        value = function(*args, **kwargs)
    except BaseException as err:  # noqa: BLE001 - SystemExit in a call is a failed call too
        answer = {"error": _describe(err), "type": type(err).__name__}
    else:
        answer = _reply_value(value, encode, objects)
    try:
        after = [None if i in handled else encode(a) for i, a in enumerate(args)]
        if after != request["args"]:
            answer["args"] = after
        after_kw = {k: encode(v) for k, v in kwargs.items() if k not in kw_handled}
        if after_kw != {k: v for k, v in request["kwargs"].items() if k not in kw_handled}:
            answer["kwargs"] = after_kw
    except BaseException:  # noqa: BLE001 - an argument turned into something unsendable: left as it was
        pass
    return answer


def _holds(objects, handle):
    """Whether ``handle`` names an object this child handed out."""
    return type(handle) is int and 0 <= handle < len(objects)


def _named_value(get, encode, objects):
    """What a name or attribute holds, as a reply: ``{"method": true}`` for something to call, else its value."""
    try:
        value = get()
        if callable(value):
            return {"method": True}
    except BaseException as err:  # noqa: BLE001
        return {"error": _describe(err), "type": type(err).__name__}
    return _reply_value(value, encode, objects)


def _reply_value(value, encode, objects):
    """A returned value as a reply: plain data, an iterator drained, else a handle to the object kept here."""
    try:
        # An iterator (a generator, map, zip...) is drained here and is an iterator again on
        # the judge's side: list(f(x)) works, f(x) == [...] stays False, as in Python.
        if type(value) not in (str, bytes, list, tuple, dict, set, frozenset) and hasattr(type(value), "__next__"):
            return {"iter": encode(list(value))}
    except BaseException as err:  # noqa: BLE001
        return {"error": f"the returned value cannot leave the sandbox: {_describe(err)}"[:500], "type": None}
    try:
        return {"ok": encode(value)}
    except TypeError as err:
        if len(objects) >= MAX_HANDLES:
            return {"error": f"the returned value cannot leave the sandbox: {_describe(err)}"[:500], "type": None}
        objects.append(value)
        try:
            kind = type(value).__name__
        except BaseException:  # noqa: BLE001
            kind = "object"
        return {"handle": len(objects) - 1, "type": str(kind)[:100]}
    except BaseException as err:  # noqa: BLE001
        return {"error": f"the returned value cannot leave the sandbox: {_describe(err)}"[:500], "type": None}


# Taken when this module loads (before any code runs), so a program that patches builtins
# changes only its own results.
WRAPPER_NAMES = "list tuple set frozenset sorted dict len sum min max any all str int float bool abs round".split()
_WRAPPERS = {name: getattr(builtins, name) for name in WRAPPER_NAMES}


def _input(spec):

    if "src" in spec:
        return eval(compile(spec["src"], "<test input>", "eval"), {"__builtins__": builtins})  # noqa: S307 - test text, in the child
    return decode_value(spec["value"])


def _describe(err):
    try:
        return f"{type(err).__name__}: {err}"[:500]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return type(err).__name__


_SCALARS = (type(None), bool, str, float)
_TAGGED = {tuple: "t", set: "s", frozenset: "fs"}
_UNTAGGED = {tag: kind for kind, tag in _TAGGED.items()}
_MAX_DEPTH = 100
_RAW_INT = 1 << 256  # larger ints travel as hex (JSON's decimal digits are capped by Python)


def _is_raw(value):
    kind = type(value)
    return kind in _SCALARS or (kind is int and -_RAW_INT < value < _RAW_INT)


def encode_value(value, depth=0):
    """A plain value as JSON-ready data that keeps its exact type; anything else raises TypeError.

    Plain: None, bool, int, float, complex, str, bytes, and list, tuple, set, frozenset,
    dict of plain values. Subclasses are refused (an ``int`` subclass could redefine
    ``==``). JSON's own types travel as themselves (Python writes a float with a point or
    exponent, so ``1`` and ``1.0`` stay apart); a list is a JSON array; everything else
    is a one-key object: ``{"t": [...]}`` tuple, ``{"s": ...}`` set, ``{"fs": ...}``,
    ``{"d": [[k, v], ...]}`` dict, ``{"i": hex}`` big int, ``{"c": [re, im]}``, ``{"b": hex}``.
    """
    if _is_raw(value):
        return value
    kind = type(value)
    if depth > _MAX_DEPTH:
        raise ValueError("the value is nested too deeply")
    if kind is int:
        return {"i": hex(value)}
    if kind is list:
        return list(value) if all(map(_is_raw, value)) else [encode_value(item, depth + 1) for item in value]
    if kind in _TAGGED:
        return {_TAGGED[kind]: encode_value(list(value), depth + 1)}
    if kind is dict:
        return {"d": [[encode_value(k, depth + 1), encode_value(v, depth + 1)] for k, v in value.items()]}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if kind is bytes:
        return {"b": value.hex()}
    arrays = _encode_array(value, depth)
    if arrays is not None:
        return arrays
    raise TypeError(f"returned a {kind.__name__}, which is not a plain value (None, bool, int, float, complex, str, bytes, list, tuple, set, dict, "
                    "a numpy array or scalar, a pandas Series or DataFrame)")


#: The numpy dtypes that cross by value: bool, ints, floats, complex, text, bytes and objects
#: (whose items must be plain), written as ``numpy.dtype.str`` writes them.
_ARRAY_DTYPE = re.compile(r"\A[<>|=]?(b1|i[1248]|u[1248]|f[248]|c(8|16)|U\d{1,6}|S\d{1,6}|O|[Mm]8\[(Y|M|W|D|h|m|s|ms|us|ns)\])\Z")
_MAX_DIMENSIONS = 32
#: Most bytes a decoded array may take.
MAX_ARRAY_BYTES = 1 << 28


def _encode_array(value, depth):
    """A numpy array or scalar, or a pandas Series or DataFrame, as data that rebuilds it
    (``{"nd": [dtype, shape, items]}``, ``{"np": [dtype, item]}``, ``{"pd": ...}``); ``None`` for
    anything else. Only the modules the program imported are looked at (none is imported here),
    and only their exact types: a subclass could redefine ``==``."""
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    kind = type(value)
    if numpy is not None and kind is getattr(numpy, "ndarray", None):
        if not _ARRAY_DTYPE.match(value.dtype.str):
            raise TypeError(f"returned an array of {value.dtype}, which does not cross the sandbox boundary")
        flat = value.ravel()
        items = flat.view("<i8").tolist() if value.dtype.kind in "Mm" else flat.tolist()  # dates as their integer ticks
        return {"nd": [value.dtype.str, list(value.shape), encode_value(items, depth + 1)]}
    if numpy is not None and isinstance(value, getattr(numpy, "generic", ())) and _ARRAY_DTYPE.match(value.dtype.str) and value.dtype.kind != "O":
        item = int(value.view("<i8")) if value.dtype.kind in "Mm" else value.item()
        return {"np": [value.dtype.str, encode_value(item, depth + 1)]}
    if pandas is not None and kind in (getattr(pandas, "Series", None), getattr(pandas, "DataFrame", None)):
        columns = [value] if kind is pandas.Series else [value.iloc[:, k] for k in range(value.shape[1])]
        labels = [value.name] if kind is pandas.Series else list(value.columns)
        plain = (pandas.RangeIndex, pandas.Index, pandas.DatetimeIndex, pandas.MultiIndex)
        rows = (*plain, pandas.CategoricalIndex, pandas.IntervalIndex)
        if type(value.index) not in rows or (kind is pandas.DataFrame and type(value.columns) not in plain):
            raise TypeError("returned a pandas object whose index is not a plain one (a period or timedelta index...)")
        body = {
            "kind": "series" if kind is pandas.Series else "frame",
            "index": _encode_pandas_values(value.index, depth + 1, pandas),
            "labels": encode_value(labels, depth + 1),
            "label_names": encode_value(list(value.columns.names) if kind is pandas.DataFrame else [], depth + 1),
            "columns": [_encode_pandas_values(column, depth + 1, pandas) for column in columns],
            "index_name": encode_value(value.index.name, depth + 1),
            "freq": encode_value(getattr(value.index, "freqstr", None), depth + 1),
        }
        return {"pd": body}
    return None


#: Time zones that cross by name (``America/New_York``, ``UTC``, ``Etc/GMT+5``): a name, never a path
#: (pandas would read ``dateutil/...`` names as files) or a fixed offset's description.
_TZ_NAME = re.compile(r"(?!dateutil/)[A-Za-z][A-Za-z0-9_+\-]{0,40}(/[A-Za-z0-9_+\-]{1,40}){0,2}")
#: Most levels of a decoded MultiIndex.
_MAX_LEVELS = 32


def _encode_pandas_values(values, depth, pandas):
    """A pandas index or column as data that rebuilds it: its numpy array, or, for what numpy does
    not hold, ``{"tz": [zone, naive UTC datetimes]}``, ``{"cat": [categories, codes, ordered]}``,
    ``{"iv": [left ends, right ends, closed side]}`` (intervals, as ``pd.cut`` makes them),
    ``{"mi": [levels, names]}`` (a MultiIndex, each level by itself)."""
    if depth > _MAX_DEPTH:
        raise ValueError("the value is nested too deeply")
    dtype = values.dtype
    if type(values) is pandas.MultiIndex:
        levels = [_encode_pandas_values(values.get_level_values(k), depth + 1, pandas) for k in range(values.nlevels)]
        return {"mi": [levels, encode_value(list(values.names), depth + 1)]}
    if type(dtype) is pandas.DatetimeTZDtype:
        zone = str(dtype.tz)
        if not _TZ_NAME.fullmatch(zone):
            raise TypeError(f"returned dates in the time zone {zone[:40]!r}, which does not cross the sandbox boundary by name")
        naive = values.tz_convert(None) if isinstance(values, pandas.Index) else values.dt.tz_convert(None)
        return {"tz": [zone, encode_value(naive.to_numpy(), depth + 1)]}
    if type(dtype) is pandas.IntervalDtype:
        spans = values if isinstance(values, pandas.Index) else values.array
        ends = [_encode_pandas_values(pandas.Index(side), depth + 1, pandas) for side in (spans.left, spans.right)]
        return {"iv": [*ends, str(spans.closed)]}
    if type(dtype) is pandas.CategoricalDtype:
        codes = values.codes if isinstance(values, pandas.Index) else values.cat.codes.to_numpy()
        return {"cat": [_encode_pandas_values(dtype.categories, depth + 1, pandas), encode_value(codes, depth + 1), bool(dtype.ordered)]}
    return encode_value(values.to_numpy(), depth + 1)


#: Bounds of a decoded value (the child's answer is untrusted): elements in all, elements
#: that are containers or tagged values (each decoded by a Python call), bits of one int.
MAX_ELEMENTS = 1 << 21
MAX_NESTED = 1 << 19
MAX_INT_BITS = 1 << 22
#: Most distinct keys of one set or dict that may share a hash. Python compares each new
#: key with every stored key of its hash, so n distinct keys of one hash cost n**2 / 2
#: comparisons (ints ``k * (2**61 - 1)`` all hash alike; so do tuples built from them).
MAX_EQUAL_HASHES = 16


def check_hash_spread(keys):
    """Raise ValueError when more than :data:`MAX_EQUAL_HASHES` distinct ``keys`` share one hash.

    Run before untrusted keys go into a set or dict, so that building it stays linear.
    The hashes are sorted, not put in a table; only a hash held by more keys than the cap
    has its keys compared (copies of one value are fine), each with at most twice the
    cap of others. TypeError for an unhashable key, as ``set()`` would raise.
    """
    keys = keys if type(keys) is list else list(keys)
    hashes = list(map(hash, keys))
    ordered = sorted(hashes)
    cap = MAX_EQUAL_HASHES
    crowded = set(itertools.compress(ordered, map(int.__eq__, ordered, ordered[cap:])))
    if not crowded:
        return
    groups = {}
    for key, value in zip(keys, hashes):
        if value in crowded:
            groups.setdefault(value, []).append(key)
    for group in groups.values():
        seen = set()
        for start in range(0, len(group), cap):
            seen.update(group[start : start + cap])  # at most 2 * cap keys of this hash in ``seen``
            if len(seen) > cap:
                raise ValueError(f"more than {cap} of its {len(keys)} keys are distinct and share one hash")


class _Budget:
    """Elements, and nested or tagged values, left to decode in one value."""

    def __init__(self):
        self.elements, self.nested = MAX_ELEMENTS, MAX_NESTED

    def take(self, count):
        self.elements -= count
        if self.elements < 0:
            raise ValueError(f"more than {MAX_ELEMENTS} elements")

    def nest(self):
        self.nested -= 1
        if self.nested < 0:
            raise ValueError(f"more than {MAX_NESTED} containers or tagged values")


_JSON_SCALARS = frozenset((type(None), bool, str, float, int))


def decode_value(data):
    """The value :func:`encode_value` encoded; ValueError on anything it could not have written.

    Bounded, since the data comes from the child: at most :data:`MAX_ELEMENTS` elements,
    :data:`MAX_NESTED` of them containers or tagged values, nesting depth 100, ints of :data:`MAX_INT_BITS` bits (a JSON
    parser already refuses decimal ints over 4300 digits), sets and dicts whose keys
    spread over hashes (:func:`check_hash_spread`); linear in the data's size (n log n
    for sets and dicts).
    """
    return _decode(data, 0, _Budget())


def _decode(data, depth, budget):
    kind = type(data)
    if kind is list:
        budget.nest()
        budget.take(len(data))
        if _JSON_SCALARS.issuperset(map(type, data)):
            return data
        if depth >= _MAX_DEPTH:
            raise ValueError("nested too deeply")
        return [_decode(item, depth + 1, budget) for item in data]
    if kind is not dict:
        if kind in _JSON_SCALARS:
            return data
        raise ValueError("not an encoded value")
    if len(data) != 1 or depth >= _MAX_DEPTH:
        raise ValueError("not an encoded value" if len(data) != 1 else "nested too deeply")
    budget.nest()
    ((tag, body),) = data.items()
    if tag in _UNTAGGED and type(body) is list:
        items = _decode(body, depth + 1, budget)
        if tag != "t":
            check_hash_spread(items)
        return _UNTAGGED[tag](items)
    if tag == "d" and type(body) is list and all(type(pair) is list and len(pair) == 2 for pair in body):
        budget.take(len(body))
        pairs = [(_decode(k, depth + 1, budget), _decode(v, depth + 1, budget)) for k, v in body]
        check_hash_spread([k for k, _ in pairs])
        return dict(pairs)
    if tag == "i" and type(body) is str:
        if len(body) > MAX_INT_BITS // 4 + 3:
            raise ValueError(f"an int of more than {MAX_INT_BITS} bits")
        return int(body, 16)
    if tag == "c" and type(body) is list and len(body) == 2 and all(type(part) in (int, float) and _is_raw(part) for part in body):
        return complex(*body)
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag in ("nd", "np") and type(body) is list:
        return _decode_array(tag, body, depth, budget)
    if tag == "pd" and type(body) is dict:
        return _decode_pandas(body, depth, budget)
    raise ValueError(f"unknown encoding {str(tag)[:20]!r}")


def _module(name):
    """numpy or pandas, imported when a value of theirs arrives; ValueError where it is missing."""
    try:
        return __import__(name)
    except ImportError:
        raise ValueError(f"a {name} value arrived and {name} is not installed here") from None


def _decode_array(tag, body, depth, budget):
    """A numpy array (``nd``: dtype, shape, items) or scalar (``np``: dtype, item)."""
    if not body or type(body[0]) is not str or not _ARRAY_DTYPE.match(body[0]):
        raise ValueError("not an encoded array")
    numpy = _module("numpy")
    dtype = numpy.dtype(body[0])
    if tag == "np":
        if len(body) != 2 or dtype.kind == "O":
            raise ValueError("not an encoded numpy scalar")
        item = _decode(body[1], depth + 1, budget)
        try:
            if dtype.kind in "Mm":
                return numpy.array([item], dtype="<i8").view(dtype)[0]
            return dtype.type(item)
        except (TypeError, OverflowError) as err:
            raise ValueError(f"not a {dtype} value: {err}") from None
    if len(body) != 3 or type(body[1]) is not list or len(body[1]) > _MAX_DIMENSIONS:
        raise ValueError("not an encoded array")
    shape = body[1]
    if not all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape):
        raise ValueError("an array's shape is not a list of sizes")
    items = _decode(body[2], depth + 1, budget)
    size = 1
    for n in shape:
        size *= n
        if size > MAX_ELEMENTS:
            raise ValueError(f"an array of more than {MAX_ELEMENTS} elements")
    if type(items) is not list or len(items) != size:
        raise ValueError("an array's items do not fill its shape")
    if size * dtype.itemsize > MAX_ARRAY_BYTES:  # a wide text dtype takes its width for every item, however short
        raise ValueError(f"an array of more than {MAX_ARRAY_BYTES} bytes")
    try:
        if dtype.kind == "O":
            array = numpy.empty(size, dtype=object)
            for index, item in enumerate(items):
                array[index] = item
        elif dtype.kind in "Mm":  # dates and durations travel as their integer ticks
            array = numpy.array(items, dtype="<i8").view(dtype)
        else:
            array = numpy.array(items, dtype=dtype)
        return array.reshape(shape)
    except (TypeError, OverflowError, ValueError) as err:
        raise ValueError(f"not an array of {dtype}: {str(err)[:100]}") from None


def _decode_pandas_values(data, depth, budget, levels=True):
    """What :func:`_encode_pandas_values` wrote: a 1-d numpy array, or a tz-aware DatetimeIndex, a
    Categorical or (``levels``) a MultiIndex, built by pandas from checked parts."""
    numpy = _module("numpy")
    tag, body = next(iter(data.items())) if type(data) is dict and len(data) == 1 else (None, None)
    if depth >= _MAX_DEPTH:
        raise ValueError("nested too deeply")
    if tag not in ("tz", "cat", "iv", "mi") or type(body) is not list:
        array = _decode(data, depth + 1, budget)
        if type(array) is not numpy.ndarray or array.ndim != 1:
            raise ValueError("not an encoded pandas value")
        return array
    pandas = _module("pandas")
    budget.nest()
    try:
        if tag == "tz" and len(body) == 2 and type(body[0]) is str and _TZ_NAME.fullmatch(body[0]):
            naive = _decode(body[1], depth + 1, budget)
            if type(naive) is numpy.ndarray and naive.ndim == 1 and naive.dtype.kind == "M":
                return pandas.DatetimeIndex(naive).tz_localize("UTC").tz_convert(body[0])
        if tag == "cat" and len(body) == 3 and type(body[2]) is bool:
            categories = _decode_pandas_values(body[0], depth + 1, budget, levels=False)
            codes = _decode(body[1], depth + 1, budget)
            if type(codes) is numpy.ndarray and codes.ndim == 1 and codes.dtype.kind == "i" and type(categories) is not pandas.Categorical:
                return pandas.Categorical.from_codes(codes, categories=categories, ordered=body[2])
        if tag == "iv" and len(body) == 3 and body[2] in ("left", "right", "both", "neither"):
            left, right = (_decode_pandas_values(side, depth + 1, budget, levels=False) for side in body[:2])
            if all(type(side) is numpy.ndarray and side.dtype.kind in "iufM" for side in (left, right)):
                return pandas.IntervalIndex.from_arrays(left, right, closed=body[2])
        if tag == "mi" and levels and len(body) == 2 and type(body[0]) is list and 0 < len(body[0]) <= _MAX_LEVELS:
            arrays = [_decode_pandas_values(level, depth + 1, budget, levels=False) for level in body[0]]
            names = _decode(body[1], depth + 1, budget)
            if type(names) is list and len(names) == len(arrays) and len({len(a) for a in arrays}) == 1:
                return pandas.MultiIndex.from_arrays(arrays, names=names)
    except (TypeError, ValueError, KeyError, OverflowError) as err:  # an unknown zone, codes out of range, unhashable names
        raise ValueError(f"not a pandas value: {str(err)[:100]}") from None
    raise ValueError("not an encoded pandas value")


def _decode_pandas(body, depth, budget):
    """A pandas Series or DataFrame: its columns as arrays, its labels, index and index name."""
    if set(body) != {"kind", "index", "labels", "label_names", "columns", "index_name", "freq"} or body["kind"] not in ("series", "frame"):
        raise ValueError("not an encoded pandas value")
    index = _decode_pandas_values(body["index"], depth + 1, budget)
    labels, label_names = _decode(body["labels"], depth + 1, budget), _decode(body["label_names"], depth + 1, budget)
    if type(body["columns"]) is not list:
        raise ValueError("not an encoded pandas value")
    columns = [_decode_pandas_values(column, depth + 1, budget, levels=False) for column in body["columns"]]
    name, freq = _decode(body["index_name"], depth + 1, budget), _decode(body["freq"], depth + 1, budget)
    if type(labels) is not list or len(labels) != len(columns):
        raise ValueError("not an encoded pandas value")
    if any(len(column) != len(index) for column in columns) or (body["kind"] == "series" and len(columns) != 1):
        raise ValueError("a pandas value's columns do not match its index")
    pandas = _module("pandas")
    try:
        if type(index) is pandas.MultiIndex:
            axis = index
        elif type(index) is pandas.Categorical:
            axis = pandas.CategoricalIndex(index, name=name)
        elif type(freq) is str and index.dtype.kind == "M":  # a date index keeps its frequency (pandas compares it)
            axis = pandas.DatetimeIndex(index, name=name, freq=freq)
        elif type(index) in (pandas.DatetimeIndex, pandas.IntervalIndex):  # dates in a time zone, intervals
            axis = index.rename(name)
        else:
            axis = pandas.Index(index, name=name) if len(index) else pandas.RangeIndex(0)
        columns = [column.array if type(column) in (pandas.DatetimeIndex, pandas.IntervalIndex) else column for column in columns]
        if type(label_names) is not list:
            raise ValueError("not an encoded pandas value")
        if body["kind"] == "series":
            return pandas.Series(columns[0], index=axis, name=labels[0])
        header = pandas.Index(labels, tupleize_cols=True)  # tuples: a MultiIndex
        if len(label_names) != header.nlevels:
            raise ValueError("a pandas value's column names do not match its columns")
        header = header.set_names(label_names)
        return pandas.DataFrame(dict(zip(range(len(columns)), columns)), index=axis).set_axis(header, axis=1)
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"not a pandas value: {str(err)[:100]}") from None
