"""A bounded load test of a real ``mathgym serve`` on 127.0.0.1: many clients at once, honest ones
playing episodes through ``mathgym/Remote-v0`` beside hostile ones (a flooded queue, copies past
the limit, dtypes naming hundreds of megabytes, negative seeds). Nothing answers a 5xx other than
503, the server never holds more than ``--max-sessions``, every session is gone once its client
closed it, and the server's memory comes back to its level after each round."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("aiohttp")

from mathgym.envs import REMOTE_ENV_ID  # noqa: E402
from mathgym.envs.served.remote import ServerBusyError  # noqa: E402

MAX_SESSIONS = 16
HONEST, HOSTILE, ROUNDS = 24, 8, 4
DEADLINE_S = 120  # the whole test stops by then, whatever the server does


@pytest.fixture(scope="module")
def served():
    proc = subprocess.Popen(
        [sys.executable, "-m", "mathgym", "serve", "GuessNumber-v0", "--port", "0", "--max-sessions", str(MAX_SESSIONS)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        address = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
        assert address, "the server printed no address"
        yield address.group(), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def raw(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body).encode())
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def memory_mb(pid: int) -> dict[str, float]:
    """The server's resident memory now (VmRSS) and at its highest (VmHWM), in MB."""
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
    return {name: int(fields[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM")}


def honest_client(url: str, seed: int, stop_at: float) -> str:
    """One episode of GuessNumber through the client env, retrying while the server is full."""
    while True:
        try:
            env = gym.make(REMOTE_ENV_ID, url=url, env_id="GuessNumber-v0", high=50)
            break
        except ServerBusyError:
            if time.monotonic() > stop_at:
                return "gave up: busy"
            time.sleep(0.05)
    try:
        env.reset(seed=seed)
        for guess in range(1, 51):
            _, _, terminated, truncated, info = env.step(str(guess))
            if terminated or truncated:
                return str(info["status"])
        return "never ended"
    finally:
        env.close()


def hostile_client(url: str, kind: int, stop_at: float) -> tuple[list[int], int]:
    """The statuses the server answered to one hostile client's requests, and the sessions it held
    right after its copies (0 for the others)."""
    while (made := raw(url, "POST", "/sessions", {"kwargs": {"high": 50}}))[0] == 503 and time.monotonic() < stop_at:
        time.sleep(0.05)
    if made[0] != 201:
        return [made[0]], 0
    sid = made[1]["session_id"]
    huge = {"$type": "ndarray", "dtype": "(6000,6000)f8", "shape": [1], "data": [0]}
    try:
        raw(url, "POST", f"/sessions/{sid}/reset", {"seed": kind})
        if kind % 4 == 0:  # floods its own queue
            with ThreadPoolExecutor(12) as pool:
                return list(pool.map(lambda i: raw(url, "POST", f"/sessions/{sid}/step", {"action": str(i)})[0], range(12))), 0
        if kind % 4 == 1:  # copies past the limit
            with ThreadPoolExecutor(6) as pool:
                copies = list(pool.map(lambda _: raw(url, "POST", f"/sessions/{sid}/copy"), range(6)))
            held = raw(url, "GET", "/")[1]["sessions"]
            for status, answer in copies:
                if status == 201:
                    raw(url, "DELETE", f"/sessions/{answer['session_id']}")
            return [status for status, _ in copies], held
        if kind % 4 == 2:  # a hundred bytes naming 288 MB, three ways
            return [raw(url, "POST", f"/sessions/{sid}/reset", {"options": {"task_index": huge}})[0],
                    raw(url, "POST", "/sessions", {"kwargs": {"high": huge}})[0],
                    raw(url, "POST", f"/sessions/{sid}/reset", {"seed": -5})[0]], 0
        return [raw(url, "POST", f"/sessions/{sid}/step", {"action": 12})[0]], 0
    finally:
        raw(url, "DELETE", f"/sessions/{sid}")


def one_round(url: str, round_: int, stop_at: float) -> tuple[Counter, Counter, int]:
    """Honest and hostile clients at once; returns their outcomes and the most sessions seen held."""
    most, done = [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            most[0] = max(most[0], raw(url, "GET", "/")[1]["sessions"])
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with ThreadPoolExecutor(HONEST + HOSTILE) as pool:
        honest = [pool.submit(honest_client, url, 1000 * round_ + i, stop_at) for i in range(HONEST)]
        hostile = [pool.submit(hostile_client, url, i, stop_at) for i in range(HOSTILE)]
        outcomes = Counter(f.result() for f in honest)
        statuses = Counter(s for f in hostile for s in f.result()[0])
    done.set()
    watcher.join()
    return outcomes, statuses, max(most[0], *(f.result()[1] for f in hostile))


def test_many_clients_at_once_within_the_limits_and_memory_back_to_its_level(served):
    url, pid = served
    stop_at = time.monotonic() + DEADLINE_S
    levels = [memory_mb(pid)]
    for round_ in range(ROUNDS):
        outcomes, statuses, most = one_round(url, round_, stop_at)
        assert sum(outcomes.values()) == HONEST and set(outcomes) <= {"correct", "wrong"}, outcomes
        assert not [s for s in statuses if s >= 500 and s != 503], statuses
        assert most <= MAX_SESSIONS
        assert raw(url, "GET", "/")[1]["sessions"] == 0  # every client closed what it opened
        levels.append(memory_mb(pid))
        assert time.monotonic() < stop_at
    start, first = levels[0]["VmRSS"], levels[1]["VmRSS"]
    assert all(level["VmRSS"] < first + 24 for level in levels[2:]), levels  # no growth round after round
    assert levels[-1]["VmHWM"] < start + 96, levels  # no request ever allocated its hundreds of MB
