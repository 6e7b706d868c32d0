"""Real MCP server processes for the tests: the fixture server (tests/mcp_fixture_server.py) and
mathgym's own (``python -m mathgym.mcp_server``), over stdio and over streamable HTTP on 127.0.0.1.
Every process is bounded in time (its own ``--lifetime``, or ``timeout``) and stopped by the test."""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

FIXTURE_SERVER = str(Path(__file__).with_name("mcp_fixture_server.py"))
#: The fixture server over stdio, as an env's ``server=``.
FIXTURE_STDIO = [sys.executable, FIXTURE_SERVER]
#: mathgym's own server over stdio (its ``--tools`` and options appended).
MATHGYM_STDIO = [sys.executable, "-m", "mathgym.mcp_server"]
#: Longest any test server lives, in seconds.
LIFETIME_S = 240


@contextlib.contextmanager
def http_server(argv: list[str], ready_s: float = 60.0) -> Iterator[str]:
    """Start a server that prints its URL as a line of stdout; yield the URL; stop it."""
    process = subprocess.Popen(["timeout", str(LIFETIME_S), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield _read_url(process, ready_s)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _read_url(process: subprocess.Popen, ready_s: float) -> str:
    deadline = time.monotonic() + ready_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if not line:
                break
            if "http://" in line:
                return line[line.index("http://"):].strip()
    process.kill()
    raise RuntimeError(f"the MCP server {process.args} printed no URL: {process.stderr.read()[-2000:]}")


def fixture_http() -> contextlib.AbstractContextManager[str]:
    """The fixture server over streamable HTTP."""
    return http_server([sys.executable, FIXTURE_SERVER, "--http", "--lifetime", str(LIFETIME_S)])
