"""A ``mathgym/Remote-v0`` client process owns its sessions (issue 48): it releases them as it exits,
normally or on an error; killed outright, the server closes them ``--client-timeout`` seconds later,
while a live client keeps them however long it is idle. And ``mathgym serve`` on a port in use
says so in one line."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

import pytest

pytest.importorskip("aiohttp")

from mathgym.serve import EnvServer, ServerThread  # noqa: E402

CLIENT = """
import sys, time
import gymnasium as gym, mathgym
envs = [gym.make("mathgym/Remote-v0", url=sys.argv[1], env_id="GuessNumber-v0") for _ in range(3)]
envs[0].reset(seed=0)
print("ready", flush=True)
if sys.argv[2] == "raise":
    raise RuntimeError("the run stopped on an error, its envs not closed")
time.sleep(120)
"""


def held(url: str) -> int:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", "/")
        return json.loads(conn.getresponse().read())["sessions"]
    finally:
        conn.close()


def client(url: str, how: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, url, how], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def test_a_client_that_stops_on_an_error_releases_its_sessions_as_it_exits():
    """Both timeouts at ten minutes: only the client's own release can free its places."""
    with ServerThread(EnvServer(["GuessNumber-v0"], max_sessions=4, session_timeout=600, client_timeout=600)) as url:
        proc = client(url, "raise")
        assert proc.wait(timeout=60) == 1 and "the run stopped on an error" in proc.stderr.read()
        assert held(url) == 0


def test_a_killed_client_is_noticed_within_its_client_timeout():
    with ServerThread(EnvServer(["GuessNumber-v0"], max_sessions=4, session_timeout=600, client_timeout=1.0)) as url:
        proc = client(url, "sleep")
        try:
            time.sleep(2.5)  # idle past the client timeout, but alive: its heartbeat keeps its sessions
            assert held(url) == 3
            proc.send_signal(signal.SIGKILL)  # no atexit, no goodbye
            proc.wait(timeout=30)
            killed = time.monotonic()
            while held(url) and time.monotonic() - killed < 20:
                time.sleep(0.1)
            assert held(url) == 0 and time.monotonic() - killed < 10
        finally:
            proc.kill()


def test_serve_on_a_port_in_use_says_so_in_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "mathgym", "serve", "GuessNumber-v0", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr, done.stderr
