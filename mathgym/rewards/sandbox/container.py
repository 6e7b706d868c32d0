"""A container runtime for terminal / SWE tasks: podman or docker, whichever works here.

A :class:`Container` is one episode's machine: started from a local image with no network
(``--network none``), memory, process and CPU limits, and (podman as root) a user namespace that
maps the container's root to an unprivileged host uid; commands run in it with a wall-clock limit
enforced inside the container (coreutils ``timeout``) and outside (the client is killed), their
output capped while it is read; :meth:`Container.close` removes it.

:func:`find_runtime` probes rather than assumes: a ``docker`` binary without a daemon, or a
podman whose default OCI runtime cannot start a container on this host (crun on a cgroup v1 /
v2 hybrid, seen here), is not a runtime. The probe runs ``IMAGE true`` with the very flags the
episodes use, trying the runtimes' OCI back ends in turn (crun, then runc).

Example:
    >>> probe = find_runtime()                                  # doctest: +SKIP
    >>> with Container.start(probe.runtime, "localhost/mathgym/debian:bookworm") as box:  # doctest: +SKIP
    ...     box.exec("echo hi").output
    'hi\\n'
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mathgym.errors import ConfigError

#: Container runtimes looked for, in order.
RUNTIMES = ("podman", "docker")
#: The host uid range a container's root maps to when podman runs as root (an unprivileged range).
ROOT_UID_MAP = "0:200000:65536"


class ContainerError(RuntimeError):
    """The runtime could not do what was asked (start, copy, remove): infrastructure, not the agent."""


@dataclass(frozen=True)
class ContainerLimits:
    """Resources of one container.

    Attributes:
        memory: Memory limit (``--memory``), e.g. ``"1g"``.
        pids: Most processes at once (``--pids-limit``).
        cpus: CPUs (``--cpus``).
        open_files: Open files per process (``--ulimit nofile``).
    """

    memory: str = "1g"
    pids: int = 256
    cpus: float = 1.0
    open_files: int = 1024


@dataclass(frozen=True)
class ContainerRuntime:
    """A working runtime: its binary and the flags every ``run`` needs on this host."""

    name: str
    binary: str
    global_flags: tuple[str, ...] = ()
    run_flags: tuple[str, ...] = ()

    def command(self, *args: str) -> list[str]:
        """The argv of ``RUNTIME [global flags] args...``."""
        return [self.binary, *self.global_flags, *args]

    def call(self, *args: str, timeout: float = 60.0, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run a runtime command; raises :class:`ContainerError` when it cannot be run or times out."""
        try:
            return subprocess.run(self.command(*args), input=stdin, capture_output=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise ContainerError(f"{self.name} {args[0] if args else ''} failed: {err}") from None

    def has_image(self, image: str) -> bool:
        """Whether ``image`` is present locally."""
        return self.call("image", "inspect", image, timeout=30).returncode == 0


@dataclass(frozen=True)
class RuntimeProbe:
    """What :func:`find_runtime` found: a runtime, or why there is none (``runtime is None``)."""

    runtime: ContainerRuntime | None
    reason: str = ""


def _limit_flags(limits: ContainerLimits) -> list[str]:
    return [
        "--network", "none", "--memory", limits.memory, "--pids-limit", str(limits.pids), "--cpus", str(limits.cpus),
        "--ulimit", f"nofile={limits.open_files}:{limits.open_files}", "--ulimit", f"nproc={limits.pids * 4}:{limits.pids * 4}",
        "--security-opt", "no-new-privileges",
    ]


def _candidates(name: str, binary: str) -> list[ContainerRuntime]:
    """The ways of running ``name`` worth probing on this host, best first."""
    if name == "docker":
        return [ContainerRuntime(name, binary)]
    userns = ("--uidmap", ROOT_UID_MAP, "--gidmap", ROOT_UID_MAP) if os.geteuid() == 0 else ()  # rootless: podman's own
    found = [ContainerRuntime(name, binary, (), userns)]
    if shutil.which("runc"):
        found.append(ContainerRuntime(name, binary, ("--runtime", "runc"), userns))
    return found


def find_runtime(image: str, preferred: str | None = None, timeout: float = 60.0) -> RuntimeProbe:
    """The first runtime of :data:`RUNTIMES` (or ``preferred``) that runs ``image`` with the
    episodes' flags; else ``RuntimeProbe(None, why)`` naming what was tried and what is needed."""
    names = (preferred,) if preferred else RUNTIMES
    why: list[str] = []
    for name in names:
        binary = shutil.which(name)
        if binary is None:
            why.append(f"{name}: not installed")
            continue
        for runtime in _candidates(name, binary):
            outcome = _probe(runtime, image, timeout)
            if not outcome:
                return RuntimeProbe(runtime)
            why.append(f"{name}{' ' + ' '.join(runtime.global_flags) if runtime.global_flags else ''}: {outcome.rstrip('.')}")
    return RuntimeProbe(None, "; ".join(why) + ". Needs podman (apt-get install podman) or a running docker daemon, "
                        f"and the image {image} (python -m mathgym.rewards.sandbox.container_image).")


def _probe(runtime: ContainerRuntime, image: str, timeout: float) -> str:
    """Why ``runtime`` cannot run ``image`` here ("" when it can)."""
    try:
        if not runtime.has_image(image):
            info = runtime.call("info", timeout=timeout)
            if info.returncode != 0:
                return _last_line(info.stderr) or "`info` failed"
            return f"no image {image}"
        run = runtime.call("run", "--rm", *runtime.run_flags, *_limit_flags(ContainerLimits()), image, "true", timeout=timeout)
    except ContainerError as err:
        return str(err)
    return "" if run.returncode == 0 else _last_line(run.stderr) or f"exit {run.returncode}"


def _last_line(data: bytes) -> str:
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[-1][:300] if lines else ""


@dataclass(frozen=True)
class ExecResult:
    """One command's outcome: exit code (``None`` when stopped), output (stdout and stderr together,
    capped: head and tail with a note between), whether the time limit stopped it, and seconds taken."""

    exit_code: int | None
    output: str
    timed_out: bool
    seconds: float


@dataclass
class Container:
    """One running container (start with :meth:`start`; remove with :meth:`close`)."""

    runtime: ContainerRuntime
    name: str
    workdir: str
    closed: bool = field(default=False)

    @classmethod
    def start(cls, runtime: ContainerRuntime, image: str, workdir: str = "/app", limits: ContainerLimits = ContainerLimits()) -> Container:
        """Start a container of ``image`` that sleeps until removed, with no network and ``limits``."""
        if not workdir.startswith("/"):
            raise ConfigError(f"workdir={workdir!r} must be an absolute path in the container.")
        name = f"mathgym-{uuid.uuid4().hex[:12]}"
        run = runtime.call("run", "-d", "--rm", "--name", name, *runtime.run_flags, *_limit_flags(limits),
                           # "/": a WORKDIR the image only names would be made by the runtime, owned by a uid
                           # the container's mapped root cannot write; made by the container itself below.
                           "--workdir", "/", "--entrypoint", "sleep", image, "infinity", timeout=120)
        if run.returncode != 0:
            raise ContainerError(f"{runtime.name} could not start {image}: {_last_line(run.stderr)}")
        box = cls(runtime, name, "/")
        made = box.exec(f"mkdir -p {shlex.quote(workdir)}", timeout=30)
        if made.exit_code != 0:
            box.close()
            raise ContainerError(f"could not make the workdir {workdir} in {image}: {made.output[-300:]}")
        box.workdir = workdir
        return box

    def exec(self, command: str, timeout: float = 30.0, output_cap: int = 8000, stdin: bytes | None = None, user_env: Sequence[str] = ()) -> ExecResult:
        """Run ``command`` with ``sh -c`` in the workdir; killed inside the container after
        ``timeout`` seconds (and the client a few seconds later); output capped to ``output_cap`` characters."""
        wrapped = f"timeout -s KILL {max(1, round(timeout))} sh -c {shlex.quote(command)}"
        interactive = ["-i"] if stdin is not None else []
        argv = self.runtime.command("exec", *interactive, *[f"--env={e}" for e in user_env],
                                    "--workdir", self.workdir, self.name, "sh", "-c", wrapped)
        start = time.perf_counter()
        try:
            process = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as err:
            raise ContainerError(f"{self.runtime.name} exec failed: {err}") from None
        output, stopped = _read_capped(process, stdin, timeout + 10.0, output_cap * 4)
        code = process.returncode
        timed_out = stopped or code in (137, 124)
        return ExecResult(None if timed_out else code, _capped_text(output, output_cap), timed_out, time.perf_counter() - start)

    def write_file(self, path: str, data: bytes, timeout: float = 30.0) -> ExecResult:
        """Write ``data`` to ``path`` (relative to the workdir or absolute), making its folder."""
        quoted = shlex.quote(path)
        return self.exec(f'mkdir -p "$(dirname {quoted})" && cat > {quoted}', timeout=timeout, stdin=data)

    def copy_in(self, host_path: Path, container_path: str, timeout: float = 120.0) -> None:
        """Copy a host file or folder into the container (``cp``)."""
        done = self.runtime.call("cp", str(host_path), f"{self.name}:{container_path}", timeout=timeout)
        if done.returncode != 0:
            raise ContainerError(f"{self.runtime.name} cp into {self.name} failed: {_last_line(done.stderr)}")

    def close(self) -> None:
        """Remove the container (idempotent; a failure to remove is not raised: nothing else to do)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.runtime.call("rm", "-f", "-t", "0", self.name, timeout=60)
        except ContainerError:
            pass

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_capped(process: subprocess.Popen[bytes], stdin: bytes | None, deadline_s: float, keep: int) -> tuple[bytes, bool]:
    """The head and tail of ``process``'s output (at most ``keep`` bytes each) and whether the
    client deadline killed it. Output past the cap is read and dropped, so memory stays bounded."""
    import threading

    if stdin is not None and process.stdin is not None:
        def feed() -> None:
            try:
                process.stdin.write(stdin)  # type: ignore[union-attr]
                process.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
        threading.Thread(target=feed, daemon=True).start()
    head, tail, dropped = bytearray(), bytearray(), 0
    timer = threading.Timer(deadline_s, process.kill)
    timer.start()
    stdout = process.stdout
    try:
        while stdout is not None and (chunk := stdout.read1(65536)):
            room = keep - len(head)
            head += chunk[:room]
            rest = chunk[room:] if room > 0 else chunk
            if rest:
                tail += rest
                dropped += max(0, len(tail) - keep)
                del tail[: max(0, len(tail) - keep)]
        process.wait()
    finally:
        stopped = timer.finished.is_set()  # the deadline fired before the process ended
        timer.cancel()
    note = f"\n[... {dropped} bytes cut ...]\n".encode() if dropped else b""
    return bytes(head) + note + bytes(tail), stopped


def _capped_text(data: bytes, cap: int) -> str:
    """``data`` as valid UTF-8 text of at most about ``cap`` characters (head and tail kept)."""
    text = data.decode("utf-8", "replace")
    if len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
