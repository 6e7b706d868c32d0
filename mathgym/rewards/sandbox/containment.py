"""Containment: what a sandboxed child does to itself before any untrusted code runs.

The walls, not what runs inside them. Stand-alone (standard library only): the warm worker
(:mod:`mathgym.rewards.sandbox.trusted_worker`) loads this file by path before it forks, so
each forked child already has it, and uses it itself for what it sets up once for every job:
the allow-list view (:func:`enter_view`: a fresh root holding the runtime read-only, tmpfs
mounts on /tmp, /var/tmp, /dev/shm and the scratch base, four devices; nothing else), the
jobs' environment and text streams (:func:`prepare_worker`), the user namespace's id maps.

In order, :func:`contain` (in the forked child, called by
:func:`mathgym.rewards.sandbox.untrusted_child.child`): a new session, the job's pipes as fds
0-3 (and 4, a server of calls' replies; every other fd closed), a mount namespace of its own
with fresh tmpfs mounts on those writable dirs and the task data covered where it is in view
(under the block-list fallback: the host's tree; all of it BEFORE the privilege drop, since mounting needs the capability the
drop removes), the scratch dir, the drop to an unprivileged uid when root (BEFORE
``RLIMIT_NPROC``, which root ignores), every capability dropped (not root, the worker's user
namespace would give the job all of them), the job's ``files`` written into the scratch dir
(as that uid), rlimits, a replaced environment, sockets blocked where the worker found no
network namespace. What runs next is :mod:`~mathgym.rewards.sandbox.untrusted_child`'s.
See ``docs/sandbox-internals.md`` for the fallbacks where the OS refuses a step.
"""

import ctypes
import fcntl
import os
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


def contain(job, fds, scratch, uid, network, simulate_refusal, marks):
    """Seal this process (a child just forked from the warm worker) before the job's code runs.

    Appends to ``marks`` the times it sealed the filesystem and finished; returns the facts
    of the job's view (``fs_view``, ``tmp``, ``hidden``... and why, where a step was refused)
    for the harness's ready line. Raises where a step that must hold fails: the job must not run.
    """
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
    return sealed
