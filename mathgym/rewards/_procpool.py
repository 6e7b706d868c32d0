"""A small pool of long-lived helper processes spoken to in JSON lines, with deadlines.

Used by the math verifier (a watchdog for math-verify: a worker that runs past its
deadline is killed and replaced) and by the code sandbox (warm workers that fork the
sandboxed children). Each helper is a fresh interpreter running a stand-alone script,
started with a scrubbed environment, so it holds none of the caller's state or secrets.

Thread-safe: any number of threads may call :meth:`ProcessPool.call` at once; each call
takes an idle helper, or waits for one. A pool belongs to the process that created it;
after a ``fork`` the child builds its own (see :func:`pool_for`).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: Environment of every helper: nothing inherited from the caller.
SCRUBBED_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0"}


class WorkerTimeout(Exception):
    """The helper did not answer before the deadline (it has been killed)."""


class WorkerCrashed(Exception):
    """The helper died or broke the protocol (it has been killed)."""


#: Bytes of requests written ahead of the replies. Below a pipe's buffer (64 KiB on Linux), so
#: writing never blocks on a helper that is stuck on an earlier request: the deadline holds.
PIPELINE_BYTES = 48 * 1024


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One request as the JSON line a helper reads."""
    return json.dumps(message).encode() + b"\n"


#: Key of a request's part that goes down the helper's side channel, never on its stdin.
SIDE = "_side"


def split_request(request: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """``request`` as its stdin line and its side-channel line (empty when it has no :data:`SIDE` part)."""
    if SIDE not in request:
        return encode_line(request), b""
    return encode_line({k: v for k, v in request.items() if k != SIDE}), encode_line(request[SIDE])


class Helper:
    """One helper process and its line-based channel.

    With ``side_channel``, the helper also gets the read end of a second pipe, its file
    descriptor number appended to its arguments: the part of a request under :data:`SIDE`
    is written there (before the request's own line), for a process of the helper's that
    must receive it while the helper itself never reads it.
    """

    def __init__(self, script: str, args: Sequence[str] = (), side_channel: bool = False):
        side_r, side_w = os.pipe() if side_channel else (-1, -1)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", script, *args, *([str(side_r)] if side_channel else [])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=SCRUBBED_ENV,
                close_fds=True,
                pass_fds=(side_r,) if side_channel else (),
                cwd="/",
            )
        except BaseException:
            if side_channel:
                os.close(side_w)
            raise
        finally:
            if side_channel:
                os.close(side_r)
        self.side_fd = side_w if side_channel else None
        self._buffer = bytearray()
        self.ready = False
        self.calls = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, message: Mapping[str, Any]) -> None:
        self.send_many([message])

    def send_many(self, messages: Sequence[Mapping[str, Any]]) -> None:
        lines, sides = zip(*map(split_request, messages)) if messages else ((), ())
        self.send_lines(lines, b"".join(sides))

    def send_lines(self, lines: Sequence[bytes], side: bytes = b"") -> None:
        """Write already-encoded request lines (see :func:`encode_line`), after their ``side`` lines."""
        assert self.proc.stdin is not None
        try:
            if side:
                if self.side_fd is None:
                    raise OSError("this helper has no side channel")
                data = memoryview(side)
                while data:
                    data = data[os.write(self.side_fd, data) :]
            self.proc.stdin.write(b"".join(lines))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            self.kill()
            raise WorkerCrashed(f"helper {self.pid} is gone: {err!r}") from err

    def receive(self, deadline: float | None) -> dict[str, Any]:
        """The next JSON line from the helper; kills it on a missed deadline or EOF."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                self.kill()
                raise WorkerTimeout(f"helper {self.pid} missed its deadline")
            readable, _, _ = select.select([fd], [], [], wait)
            if not readable:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.kill()
                raise WorkerCrashed(f"helper {self.pid} exited with code {self.proc.poll()}")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        try:
            return json.loads(line)
        except ValueError as err:
            self.kill()
            raise WorkerCrashed(f"helper {self.pid} sent a malformed reply") from err

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a zombie the kernel will reap
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self.side_fd is not None:
            try:
                os.close(self.side_fd)
            except OSError:
                pass
            self.side_fd = None


class ProcessPool:
    """Up to ``size`` helpers running ``script``, started lazily and replaced when killed.

    Args:
        script: Path of a stand-alone Python script speaking the JSON-lines protocol: it
            first prints ``{"ready": ...}`` once warm, then answers one line per request.
        size: Maximum number of helpers (and of calls served at once).
        startup_timeout: Seconds allowed for a helper to become ready (not counted
            against a request's own deadline).
        args: Extra command-line arguments for the script.
        side_channel: Give each helper a side channel (see :class:`Helper`); a request's
            :data:`SIDE` part goes there.
    """

    def __init__(self, script: str, size: int, *, startup_timeout: float = 60.0, args: Sequence[str] = (), side_channel: bool = False):
        self.script = script
        self.side_channel = side_channel
        self.size = size
        self.startup_timeout = startup_timeout
        self.args = tuple(args)
        self.ready_info: dict[str, Any] = {}
        self._idle: queue.LifoQueue[Helper | None] = queue.LifoQueue()
        for _ in range(size):
            self._idle.put(None)  # a free slot without a started helper yet
        self._all: set[Helper] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.owner_pid = os.getpid()

    def _start(self) -> Helper:
        try:
            helper = Helper(self.script, self.args, self.side_channel)
        except OSError as err:
            raise WorkerCrashed(f"could not start {self.script}: {err!r}") from err
        with self._lock:
            self._all.add(helper)
        hello = helper.receive(time.monotonic() + self.startup_timeout)
        helper.ready = True
        self.ready_info = hello
        return helper

    def call(self, request: Mapping[str, Any], timeout: float | None) -> dict[str, Any]:
        """Send ``request`` to an idle helper and return its reply.

        Raises:
            WorkerTimeout: No reply within ``timeout`` seconds; the helper was killed.
            WorkerCrashed: The helper could not start, died, or sent garbage.
        """
        (reply,) = self.call_many([request], timeout)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def call_many(self, requests: Sequence[Mapping[str, Any]], timeout: float | None, window: int = 16) -> list[dict[str, Any] | Exception]:
        """Pipeline ``requests`` through one helper, up to ``window`` requests ahead of the replies.

        Pipelining saves two process wake-ups per request, and keeping one helper for
        the whole sequence keeps its caches warm for repeated gold answers. Each request
        gets ``timeout`` seconds from the previous reply; on a miss (or a crash) that
        request's entry is the :class:`WorkerTimeout` (or :class:`WorkerCrashed`), the
        helper is killed, and the remaining requests continue on another helper.
        Requests are written ahead only while the unanswered ones total at most
        :data:`PIPELINE_BYTES` (one request at a time when it is larger), so a write
        never blocks behind a helper stuck on an earlier request.
        """
        lines, sides = map(list, zip(*map(split_request, requests))) if requests else ([], [])
        results: list[dict[str, Any] | Exception] = []
        while len(results) < len(requests):
            if self._closed:
                results.append(WorkerCrashed("the pool is closed"))
                continue
            slot = self._idle.get()
            helper: Helper | None = None
            try:
                helper = slot if slot is not None and slot.alive() else None
                if slot is not None and helper is None:
                    self._forget(slot)
                if helper is None:
                    helper = self._start()
                self._pipeline(helper, lines, sides, results, timeout, window)
            except (WorkerTimeout, WorkerCrashed) as err:
                results.append(err)
                if helper is not None:
                    self._forget(helper)
                # Warm a replacement in the background so the next caller does not pay for it.
                threading.Thread(target=self._replace, daemon=True).start()
                continue
            except BaseException:
                if helper is not None:
                    self._forget(helper)
                self._idle.put(None)
                raise
            self._idle.put(helper)
        return results

    @staticmethod
    def _pipeline(helper: Helper, lines: Sequence[bytes], sides: Sequence[bytes], results: list, timeout: float | None, window: int) -> None:
        """Send ``lines[len(results):]`` (and their ``sides``) to ``helper`` and append its replies to ``results``."""
        sent_upto, in_flight = len(results), 0  # in_flight: bytes written and not yet answered

        def send_more() -> None:
            nonlocal sent_upto, in_flight
            batch, side = [], []
            while sent_upto < len(lines) and sent_upto - len(results) < window:
                size = len(lines[sent_upto])
                if in_flight and in_flight + size > PIPELINE_BYTES:
                    break
                batch.append(lines[sent_upto])
                side.append(sides[sent_upto])
                in_flight += size
                sent_upto += 1
            if batch:
                helper.send_lines(batch, b"".join(side))

        send_more()
        sent = time.monotonic()
        while len(results) < len(lines):
            reply = helper.receive(None if timeout is None else sent + timeout)
            now = time.monotonic()
            reply["_elapsed_s"] = now - sent  # the request's own time, without start-up
            in_flight -= len(lines[len(results)])
            results.append(reply)
            sent = now
            helper.calls += 1
            send_more()

    def _replace(self) -> None:
        replacement: Helper | None = None
        try:
            if not self._closed:
                replacement = self._start()
        except (WorkerTimeout, WorkerCrashed, OSError):
            replacement = None
        finally:
            self._idle.put(replacement)

    def _forget(self, helper: Helper) -> None:
        helper.kill()
        with self._lock:
            self._all.discard(helper)

    def warm_up(self) -> None:
        """Start every helper now rather than on first use."""
        slots = [self._idle.get() for _ in range(self.size)]
        try:
            slots = [s if s is not None and s.alive() else self._start() for s in slots]
        finally:
            for slot in slots:
                self._idle.put(slot)

    def pids(self) -> list[int]:
        """Process ids of the running helpers."""
        with self._lock:
            return [h.pid for h in self._all if h.alive()]

    def close(self) -> None:
        """Kill every helper; safe to call twice."""
        self._closed = True
        with self._lock:
            helpers, self._all = list(self._all), set()
        for helper in helpers:
            helper.kill()


_POOLS: dict[tuple[str, int, tuple[str, ...], int], ProcessPool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(script: str, size: int, args: Sequence[str] = ()) -> ProcessPool:
    """The process-wide pool of ``size`` helpers running ``script``.

    Callers asking for the same script, size and arguments share one pool; a different
    ``size`` gets its own pool of that size. One per process id, so forks get their own.
    """
    key = (script, os.getpid(), tuple(args), size)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool._closed:
            pool = _POOLS[key] = ProcessPool(script, size, args=args)
        return pool


@atexit.register
def _close_all() -> None:
    for (_, pid, _, _), pool in list(_POOLS.items()):
        if pid == os.getpid():
            pool.close()
