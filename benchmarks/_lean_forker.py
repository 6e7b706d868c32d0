"""A lean, warm process that forks one child per program, with no containment at all.

Run by ``bench_code.py`` as ``python -I _lean_forker.py MODULE...``: standard library only,
it imports the named modules first (the sandbox worker's pre-import list, so a program's own
imports cost the same on both sides), freezes its objects for the garbage collector, then
reads one JSON request per line: ``{"program": ..., "timeout": ...}``. Per request it forks a
child that compiles and ``exec``s the program, timed inside the child, and answers one line,
``"1 SECONDS"`` (ran to the end) or ``"0 SECONDS"`` (raised, or killed at the timeout).

It is the floor of a one-process-per-program runner: what forking a warm interpreter of the
sandbox worker's size and reading back one result costs, without limits, namespaces, a uid
drop, output capture or comparison. It is not a sandbox.
"""

import gc
import json
import math
import os
import signal
import sys
import time


#: Where a program's own output goes (this process's stdout is its answer channel).
_NULL = os.open(os.devnull, os.O_WRONLY)


def _run(program, timeout):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: time the program, report through the pipe
        os.close(read)
        os.dup2(_NULL, 1)
        os.dup2(_NULL, 2)
        signal.alarm(max(1, math.ceil(timeout)))  # the default action ends the child: nothing is written
        start, ok = time.perf_counter(), True
        try:
            exec(compile(program, "<program>", "exec"), {"__name__": "__main__"})  # noqa: S102 - trusted benchmark input
        except BaseException:  # noqa: BLE001
            ok = False
        os.write(write, f"{int(ok)} {time.perf_counter() - start!r}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read().decode() or f"0 {timeout!r}"
    os.waitpid(pid, 0)
    return answer


def fork_exit_seconds(count):
    """Mean seconds of ``fork`` + the child's immediate ``_exit`` + ``waitpid``, over ``count``."""
    start = time.perf_counter()
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return (time.perf_counter() - start) / count


def main():
    for name in sys.argv[1:]:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - missing here, missing for the worker too
            pass
    gc.collect()
    gc.freeze()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if "forks" in request:
            answer = f"1 {fork_exit_seconds(request['forks'])!r}"
        else:
            answer = _run(request["program"], request["timeout"])
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
