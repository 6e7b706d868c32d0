"""A run directory belongs to one run (no torch: ``mathgym train`` checks it before the training stack loads).

- :func:`check_new_run_dir`: a directory that already holds a run (``config.yaml``, ``metrics.jsonl``,
  checkpoints...) is refused to a new run; the run there is continued with ``mathgym train --resume
  RUN_DIR`` (:meth:`~mathgym.algos.trainer.Trainer.resume`), else a new run takes another directory.
- :class:`RunDirLock`: a live run holds an OS lock on ``RUN_DIR/.lock``, and a second process that
  would train in the directory (``--resume`` included) is refused. The kernel drops the lock when the
  process ends, however it ends (SIGKILL, OOM), so there is no stale PID file to clean up.
- :func:`fresh_run_dir`: the default directory (``runs/<algo>-<env>-<time>``) made new, so that runs
  started in the same second each get one.

Example:
    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp()) / "run"
    >>> lock = RunDirLock(run)
    >>> check_not_in_use(run)  # this process holds it: no refusal
    >>> lock.release()
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import threading
from pathlib import Path

from mathgym.errors import ConfigError

LOCK_FILE = ".lock"
#: What a run writes into its directory: any of them there means the directory holds a run.
RUN_FILES = ("config.yaml", "metrics.jsonl", "checkpoints", "eval.json", "final")


def previous_run(run_dir: str | Path) -> list[str]:
    """The files of a run that ``run_dir`` already holds (``[]``: none, or no such directory)."""
    return [name for name in RUN_FILES if (Path(run_dir) / name).exists()]


def check_new_run_dir(run_dir: str | Path) -> None:
    """Raise :class:`ConfigError` when ``run_dir`` already holds a run: a new run there would mix its
    records and files with the old one's."""
    found = previous_run(run_dir)
    if found:
        raise ConfigError(
            f"{run_dir} already holds a run ({', '.join(found)}): continue it with `mathgym train --resume {run_dir}` "
            "(in Python: resume() before train()), or give the new run another --run-dir."
        )


def fresh_run_dir(path: str | Path) -> Path:
    """Create ``path``, or where it exists ``path-2``, ``path-3``...; the directory made. ``mkdir`` either
    makes a directory or fails, so two processes never get the same one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate, n = path, 1
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{path.name}-{n}")


# One descriptor per locked directory in this process, with the number of holders (trainers).
# POSIX record locks (lockf), not flock: a flock belongs to the open file, which worker processes
# forked by the trainer (vector envs, sandbox pools) inherit, so an orphaned worker of a killed run
# would keep the directory locked; a record lock belongs to the process alone. Its trap is that
# closing any descriptor of the file drops the process's lock: hence a single descriptor, shared.
# Within one process record locks never conflict: trainers of one process share the lock (a run
# stopped and resumed in the same Python session).
_HELD: dict[Path, list[int]] = {}  # resolved directory -> [descriptor, holders]
_GUARD = threading.Lock()


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it (``pid 123 on host``); ``""`` when unreadable."""
    try:
        return os.pread(fd, 200, 0).decode(errors="replace").strip()
    except OSError:
        return ""


def _in_use(run_dir: str | Path, holder: str) -> ConfigError:
    who = f" ({holder})" if holder else ""
    return ConfigError(
        f"{run_dir} is in use by a training process that is still running{who}: a run directory holds one run. "
        "Wait for it to end (or stop it), or give this run another --run-dir."
    )


def _lock(run_dir: str | Path, path: Path) -> int | None:
    """Take the lock of the directory ``path``: its descriptor, or ``None`` where the filesystem has no locks."""
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        holder = _holder(fd)
        os.close(fd)
        if err.errno in (errno.EACCES, errno.EAGAIN):
            raise _in_use(run_dir, holder) from None
        # a filesystem without locks (some network mounts): train, but say that nothing guards the directory
        print(f"mathgym: warning: cannot lock {run_dir} ({err.strerror}): a second run started in it would not be refused")
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    return fd


class RunDirLock:
    """This process's hold on ``run_dir`` (created if missing) for as long as a run trains in it.

    Raises :class:`ConfigError` when another live process holds it. :meth:`release` (once is
    enough; the process's exit does it too) lets go of it.
    """

    def __init__(self, run_dir: str | Path):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        self.key = Path(run_dir).resolve()
        with _GUARD:
            if self.key not in _HELD:
                _HELD[self.key] = [_lock(run_dir, self.key), 0]
            _HELD[self.key][1] += 1
        self.held = True

    def release(self) -> None:
        with _GUARD:
            if not self.held:
                return
            self.held = False
            entry = _HELD[self.key]
            entry[1] -= 1
            if entry[1] == 0:
                del _HELD[self.key]
                if entry[0] is not None:
                    os.close(entry[0])  # drops the lock


def check_not_in_use(run_dir: str | Path) -> None:
    """Raise :class:`ConfigError` when another live process holds ``run_dir``'s lock (a quick check
    before a run loads its model; the run takes the lock itself with :class:`RunDirLock`)."""
    path = Path(run_dir) / LOCK_FILE
    if not path.is_file():
        return  # never locked: nothing to ask, and no file made
    with _GUARD:
        if path.parent.resolve() in _HELD:
            return
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EACCES, errno.EAGAIN):
                raise _in_use(run_dir, _holder(fd)) from None
        finally:
            os.close(fd)  # drops the lock just taken, if it was
