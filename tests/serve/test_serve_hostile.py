"""``mathgym serve`` under a hostile or careless client (issue 47): what a request names is bounded
before it is allocated, a session that floods its own queue delays no other session, every way to
make a session counts against ``--max-sessions`` at once, and client mistakes answer 4xx."""

from __future__ import annotations

import http.client
import json
import threading
import time
import tracemalloc
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("aiohttp")

from mathgym.core import Judgement, Task, TextEnv  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402
from mathgym.serve import MAX_QUEUED_CALLS, EnvServer, ServerThread  # noqa: E402

GATED_ID = "mathgym-tests/Gated-v0"
DIAL_ID = "mathgym-tests/Dial-v0"
#: Opened by a test to let the gated env's blocked calls finish (the server runs in this process).
GATE = threading.Event()


class GatedEnv(TextEnv):
    """``wait`` blocks until the test opens :data:`GATE`; pickling (a copy) waits for it too."""

    def __init__(self, max_turns: int = 50):
        super().__init__(max_turns=max_turns, max_length=64)

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        return Task("gated", "Say anything.", "anything")

    def _judge(self, action: str) -> Judgement:
        if action == "wait":
            GATE.wait(timeout=60)
        return Judgement(0.0, Status.IN_PROGRESS, False, observation=f"heard {action}")

    def __getstate__(self) -> dict[str, Any]:
        GATE.wait(timeout=60)
        return self.__dict__


class DialEnv(gym.Env):
    """An env whose actions are not text (a ``Discrete`` space): its actions are decoded values."""

    observation_space = gym.spaces.Discrete(3)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        return int(action) % 3, 0.0, False, False, {}


for _id, _entry in ((GATED_ID, GatedEnv), (DIAL_ID, DialEnv)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry, disable_env_checker=True, order_enforce=False)


def raw(url: str, method: str, path: str, body: Any = None, *, data: bytes | None = None, timeout: float = 30) -> tuple[int, Any]:
    """One HTTP request, as a client other than mathgym's would send it."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        payload = data if data is not None else (None if body is None else json.dumps(body).encode())
        conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def new_session(url: str, env_id: str) -> str:
    status, answer = raw(url, "POST", "/sessions", {"env_id": env_id})
    assert status == 201, answer
    return answer["session_id"]


@pytest.fixture
def gate():
    GATE.clear()
    yield GATE
    GATE.set()


def _huge(dtype: str, data: list[Any]) -> dict[str, Any]:
    return {"$type": "ndarray", "dtype": dtype, "shape": [len(data)], "data": data}


def test_a_short_request_never_makes_the_server_allocate_much():
    """A dtype of 6000x6000 float64 sub-arrays (288 MB per item) or of 72-million-character strings,
    named in about 100 bytes, in reset options, env options and a non-text action."""
    with ServerThread(EnvServer(["GuessNumber-v0", DIAL_ID], max_sessions=8)) as url:
        guess, dial = new_session(url, "GuessNumber-v0"), new_session(url, DIAL_ID)
        raw(url, "POST", f"/sessions/{dial}/reset", {"seed": 0})
        requests = []
        for value in (_huge("(6000,6000)f8", [0]), _huge("U72000000", ["x"]), {"$type": "numpy", "dtype": "(6000,6000)f8", "value": 0}):
            requests += [
                (f"/sessions/{guess}/reset", {"options": {"task_index": value}}),
                ("/sessions", {"env_id": "GuessNumber-v0", "kwargs": {"high": value}}),
                (f"/sessions/{dial}/step", {"action": value}),
            ]
        tracemalloc.start()
        try:
            for path, body in requests:
                assert len(json.dumps(body)) < 160
                tracemalloc.reset_peak()
                status, answer = raw(url, "POST", path, body)
                peak = tracemalloc.get_traced_memory()[1]
                assert peak < 16 * 2**20, f"{path} {body}: {peak / 2**20:.0f} MB allocated"
                assert (status, answer["error"]["type"]) == (400, "BadRequestError"), (path, body, answer)
        finally:
            tracemalloc.stop()
        assert raw(url, "POST", f"/sessions/{dial}/step", {"action": 2})[1]["observation"] == 2  # the session is intact


def test_a_session_flooding_its_queue_delays_no_other_session(gate):
    """Four pool threads (max_sessions=4) and a session with eight blocked calls queued: another
    session's step still answers, while they wait; a ninth queued call is refused."""
    server = EnvServer([GATED_ID], max_sessions=4)
    with ServerThread(server) as url:
        flooded, other = new_session(url, GATED_ID), new_session(url, GATED_ID)
        for sid in (flooded, other):
            raw(url, "POST", f"/sessions/{sid}/reset", {"seed": 0})
        with ThreadPoolExecutor(MAX_QUEUED_CALLS) as pool:
            queued = [pool.submit(raw, url, "POST", f"/sessions/{flooded}/step", {"action": "wait"}) for _ in range(MAX_QUEUED_CALLS)]
            _wait_for(lambda: server.sessions[flooded].calls_in_flight == MAX_QUEUED_CALLS)
            status, answer = raw(url, "POST", f"/sessions/{other}/step", {"action": "now"}, timeout=20)
            assert status == 200 and answer["observation"] == "heard now"
            status, answer = raw(url, "POST", f"/sessions/{flooded}/step", {"action": "more"})
            assert (status, answer["error"]["type"]) == (503, "ServerBusyError") and "calls waiting" in answer["error"]["message"]
            assert not any(f.done() for f in queued)  # all still queued behind the gate: nothing above raced them
            gate.set()
            assert [f.result()[0] for f in queued] == [200] * MAX_QUEUED_CALLS


def test_concurrent_creates_and_copies_never_pass_max_sessions(gate):
    """Six copies and three creates at once, on a server of at most 3 sessions holding 1: each
    way to make a session takes its place before it waits, so 2 are made and 7 refused."""
    server = EnvServer([GATED_ID], max_sessions=3)
    with ServerThread(server) as url:
        sid = new_session(url, GATED_ID)
        with ThreadPoolExecutor(9) as pool:
            copies = [pool.submit(raw, url, "POST", f"/sessions/{sid}/copy") for _ in range(6)]
            creates = [pool.submit(raw, url, "POST", "/sessions", {"env_id": GATED_ID}) for _ in range(3)]
            # every copy either refused or waiting at the gate: then open it
            _wait_for(lambda: sum(f.done() for f in copies) + server.sessions[sid].calls_in_flight == 6)
            gate.set()
            statuses = sorted(f.result()[0] for f in copies + creates)
        assert statuses == [201, 201] + [503] * 7
        assert raw(url, "GET", "/")[1]["sessions"] == 3 == len(server.sessions)


def test_client_mistakes_answer_4xx_with_a_message_and_the_server_carries_on():
    with ServerThread(EnvServer(["GuessNumber-v0", DIAL_ID], max_sessions=8)) as url:
        guess, dial = new_session(url, "GuessNumber-v0"), new_session(url, DIAL_ID)
        raw(url, "POST", f"/sessions/{dial}/reset", {"seed": 0})
        reset, step = f"/sessions/{guess}/reset", f"/sessions/{dial}/step"
        cases = [
            (reset, {"seed": -1}, "non-negative"),
            (reset, None, "nests too deep", b"[" * 200_000),
            (reset, None, "nests too deep", b'{"options": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}"),
            (reset, {"options": {"a": {"$type": "mapping", "items": [[[1], 2]]}}}, "unhashable"),
            (reset, {"options": {"a": {"$type": "set", "items": [{"k": 1}]}}}, "unhashable"),
            (reset, {"options": {"a": {"$type": "nope"}}}, "unknown $type"),
            (reset, {"options": {"a": {"$type": "ndarray", "dtype": "zz", "shape": [1], "data": [1]}}}, "not understood"),
            (reset, {"options": {"a": {"$type": "ndarray", "dtype": "O", "shape": [1], "data": [1]}}}, "plain numeric"),
            (reset, {"options": {"a": {"$type": "ndarray", "dtype": "i8", "shape": [1], "data": [10**30]}}}, "OverflowError"),
            (reset, {"options": {"a": {"$type": "ndarray", "dtype": "i8", "shape": [3], "data": [1]}}}, "cannot hold"),
            (reset, {"options": {"a": {"$type": "numpy", "dtype": "int8", "value": 10**30}}}, "OverflowError"),
            (reset, {"options": {"a": {"$type": "bytes", "base64": "not base64!"}}}, "bytes"),
            (reset, {"options": {"a": {"$type": "status", "value": "nope"}}}, "status"),
            (step, {"action": {"$type": "tuple", "items": 3}}, "items"),
            ("/sessions", {"env_id": "GuessNumber-v0", "kwargs": {"high": {"$type": "float", "value": []}}}, "float"),
        ]
        for path, body, message, *data in cases:
            status, answer = raw(url, "POST", path, body, data=data[0] if data else None)
            assert 400 <= status < 500 and message in answer["error"]["message"], (path, body, status, answer)
        assert raw(url, "POST", reset, {"seed": 3})[0] == 200
        assert raw(url, "POST", step, {"action": 1})[1]["observation"] == 1


def _wait_for(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the server never got there"
        time.sleep(0.01)
