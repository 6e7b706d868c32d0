"""``mathgym serve`` and its client ``mathgym/Remote-v0``: the contract checks and episodes of real envs
through a server on 127.0.0.1 match the local env; bad requests, limits, timeouts, crashes and
clients that vanish get their documented answers and leave the server serving."""

from __future__ import annotations

import http.client
import json
import math
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("aiohttp")

from mathgym.checks import CHECKS, run_checks  # noqa: E402
from mathgym.core import Judgement, Task, TextEnv  # noqa: E402
from mathgym.envs import REMOTE_ENV_ID  # noqa: E402
from mathgym.envs.served.remote import RemoteEnvError, ServerBusyError, SessionNotFoundError  # noqa: E402
from mathgym.envs.served.wire import decode, encode  # noqa: E402
from mathgym.errors import ConfigError, EpisodeFinishedError, InvalidActionError, ResetNeededError, UnknownEnvError  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402
from mathgym.serve import EnvServer, ServerThread  # noqa: E402

from tests.envs_under_test import contract_kwargs  # noqa: E402

SERVED = ("MathReason-v0", "GuessNumber-v0", "CodeSandbox-v0")
FLAKY_ID = "mathgym-tests/Flaky-v0"


class FlakyEnv(TextEnv):
    """Two turns; ``crash`` raises inside the env, ``sleep`` takes 0.5 s; its info holds numpy values,
    a tuple, a non-finite float and a dict with int keys (what JSON cannot carry as is)."""

    def __init__(self, max_turns: int = 2, render_mode: str | None = None):
        super().__init__(max_turns=max_turns, max_length=64, render_mode=render_mode)

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        return Task(f"flaky-{int(self.np_random.integers(100))}", "Say anything.", "anything")

    def _judge(self, action: str) -> Judgement:
        if action == "crash":
            raise ZeroDivisionError("the env divided by zero")
        if action == "sleep":
            time.sleep(0.5)
        extra = {"board": np.arange(6, dtype=np.int16).reshape(2, 3), "cell": (1, "b"), "score": np.float32(0.25),
                 "worst": float("-inf"), "by_row": {0: "top", 1: "bottom"}, "raw": b"\x00\xff"}
        return Judgement(0.0, Status.IN_PROGRESS, False, observation=f"heard {action}", info=extra)


if FLAKY_ID not in gym.registry:
    gym.register(FLAKY_ID, entry_point=FlakyEnv, disable_env_checker=True, order_enforce=False)


@pytest.fixture(scope="module")
def url():
    with ServerThread(EnvServer([*SERVED, FLAKY_ID], max_sessions=200)) as address:
        yield address


def remote(url: str, env_id: str, **kwargs: Any) -> gym.Env:
    return gym.make(REMOTE_ENV_ID, url=url, env_id=env_id, **kwargs)


def raw(url: str, method: str, path: str, body: Any = None, *, data: bytes | None = None) -> tuple[int, Any]:
    """One HTTP request, as a client other than mathgym's would send it."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    payload = data if data is not None else (None if body is None else json.dumps(body).encode())
    conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    status, text = response.status, response.read()
    conn.close()
    return status, json.loads(text)


@pytest.mark.parametrize("env_id", SERVED)
def test_the_contract_checks_pass_through_the_server(url, env_id):
    results = run_checks(REMOTE_ENV_ID, {"url": url, "env_id": env_id, **contract_kwargs(env_id)})
    assert [r.name for r in results] == [name for name, _ in CHECKS]
    assert not [f"{r.name}: {r.detail}" for r in results if not r.passed]


def _untimed(result: tuple) -> tuple:
    """A step's result less what is measured, not decided: the sandbox's CPU seconds and the
    microseconds of each stage of its job."""
    info = dict(result[4])
    if isinstance(info.get("sandbox"), dict):
        info["sandbox"] = {k: v for k, v in info["sandbox"].items() if k not in ("cpu_s", "spans_us")}
    return (*result[:4], info)


def _expert_or(env: gym.Env, fallback: str) -> str:
    expert = getattr(env.unwrapped, "expert_action", None)
    return expert() if callable(expert) else fallback


@pytest.mark.parametrize(("env_id", "kwargs"), [
    ("MathReason-v0", {"difficulty": 1}),
    ("GuessNumber-v0", {"high": 20}),
    ("CodeSandbox-v0", {}),
])
def test_episodes_match_the_local_env(url, env_id, kwargs):
    local, served = gym.make(env_id, render_mode="ansi", **kwargs), remote(url, env_id, render_mode="ansi", **kwargs)
    assert (served.observation_space, served.action_space) == (local.observation_space, local.action_space)
    for seed in (0, 1, 2):
        assert served.reset(seed=seed) == local.reset(seed=seed)
        actions = iter(["\\boxed{7}", "I do not know", "def f(:"])
        while True:
            action = _expert_or(local, "") if seed == 0 else next(actions, "10")  # seed 0: solved, others: wrong turns
            mine, theirs = served.step(action), local.step(action)
            assert _untimed(mine) == _untimed(theirs)
            assert type(mine[4]["status"]) is Status
            if mine[2] or mine[3]:
                break
        assert served.render() == local.render()
    assert theirs[4]["correct"] is False and mine[4]["answer"] == theirs[4]["answer"]
    served.close()


def test_a_short_training_rollout_matches_the_local_one(url, tmp_path):
    """The rollout collector (what `mathgym train` steps, from sync vector envs) over the server:
    the same tokens, rewards and statuses as with the local env."""
    torch = pytest.importorskip("torch")
    from mathgym.agents.policy import LLMPolicy, SamplingParams
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings
    from tests.trainkit import build_small_model

    policy = LLMPolicy.from_pretrained(str(build_small_model(tmp_path / "model")), device="cpu")
    settings = RolloutSettings(group_size=2, sampling=SamplingParams(max_new_tokens=6))
    options = {"high": 1000, "max_turns": 3}
    batches = []
    for env_id, kwargs in (("GuessNumber-v0", options), (REMOTE_ENV_ID, {"url": url, "env_id": "GuessNumber-v0", **options})):
        collector = RolloutCollector(env_id, kwargs, policy, num_tasks=2, settings=settings)
        torch.manual_seed(0)
        batches.append(collector.collect([5, 6]))
        collector.close()
    local, served = batches
    assert torch.equal(local.input_ids, served.input_ids) and torch.equal(local.action_mask, served.action_mask)
    assert torch.equal(local.rewards, served.rewards) and local.statuses == served.statuses
    assert int(local.step_index.max()) >= 1  # multi-turn: the env's replies came back into the token sequence


@pytest.mark.heavy
def test_a_training_run_through_the_server_logs_the_local_runs_metrics(url, tmp_path):
    """`mathgym train --env mathgym/Remote-v0` (2 steps, small model): the same metrics as the local run."""
    pytest.importorskip("torch")
    from mathgym import train_cli
    from tests.trainkit import build_small_model

    model = build_small_model(tmp_path / "model")
    common = ["--model", str(model), "--steps", "2", "--num-tasks", "2", "--group-size", "2", "--max-new-tokens", "8",
              "--max-turns", "3", "--eval-tasks", "2", "--progress", "false"]
    runs = {}
    for name, env_id, kwargs in (("local", "GuessNumber-v0", {}), ("served", REMOTE_ENV_ID, {"url": url, "env_id": "GuessNumber-v0"})):
        assert train_cli.main("train", ["--env", env_id, "--env-kwargs", json.dumps(kwargs), *common, "--run-dir", str(tmp_path / name)]) == 0
        records = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        runs[name] = [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in records]
    assert runs["served"] == runs["local"]
    assert [r["step"] for r in runs["local"] if "rollout/reward" in r] == [1, 2]


def test_errors_come_back_as_the_local_envs_errors(url):
    env = remote(url, "GuessNumber-v0").unwrapped
    with pytest.raises(ResetNeededError):
        env.step("5")
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(5)
    while not any(env.step("1")[2:4]):
        pass
    with pytest.raises(EpisodeFinishedError, match="reset"):
        env.step("1")
    with pytest.raises(UnknownEnvError, match="GuessNumber-v0"):
        remote(url, "GuessNumbr-v0")
    with pytest.raises(ConfigError, match="Did you mean 'high'"):
        remote(url, "GuessNumber-v0", hihg=3)
    with pytest.raises(ConfigError, match="max_turns must be at least 1"):
        remote(url, "GuessNumber-v0", max_turns=0)
    env.close()
    with pytest.raises(SessionNotFoundError):
        env.reset(seed=0)
    with pytest.raises(RemoteEnvError, match="cannot reach"):
        gym.make(REMOTE_ENV_ID, url="http://127.0.0.1:9", env_id="GuessNumber-v0")


def test_bad_requests_get_4xx_with_a_message(url):
    _, made = raw(url, "POST", "/sessions", {"env_id": "GuessNumber-v0"})
    sid = made["session_id"]
    cases = [
        (("POST", f"/sessions/{sid}/reset"), {"data": b"{not json"}, 400, "BadRequestError", "not JSON"),
        (("POST", f"/sessions/{sid}/reset"), {"body": [1]}, 400, "BadRequestError", "JSON object"),
        (("POST", f"/sessions/{sid}/reset"), {"body": {"seed": "0"}}, 400, "BadRequestError", "'seed' must be an integer"),
        (("POST", f"/sessions/{sid}/step"), {"body": {"action": "1"}}, 409, "ResetNeededError", "reset"),
        (("POST", "/sessions/nope/step"), {"body": {"action": "1"}}, 404, "SessionNotFoundError", "no session 'nope'"),
        (("POST", "/sessions"), {"body": {"env_id": "Nope-v0"}}, 404, "UnknownEnvError", "does not serve 'Nope-v0'"),
        (("POST", "/sessions"), {"body": {"env_id": 3}}, 400, "BadRequestError", "'env_id' must be a string or null"),
        (("GET", "/no/such/route"), {}, 404, "BadRequestError", "Not Found"),
    ]
    for (method, path), kwargs, status, kind, message in cases:
        got_status, answer = raw(url, method, path, **kwargs)
        assert (got_status, answer["error"]["type"]) == (status, kind), (path, answer)
        assert message in answer["error"]["message"], answer
    raw(url, "POST", f"/sessions/{sid}/reset", {"seed": 1})
    assert raw(url, "POST", f"/sessions/{sid}/step", {})[1]["error"]["message"] == "the request body lacks 'action'."
    status, answer = raw(url, "POST", f"/sessions/{sid}/step", {"action": 12})
    assert (status, answer["error"]["type"]) == (422, "InvalidActionError") and "got an integer" in answer["error"]["message"]
    assert raw(url, "POST", f"/sessions/{sid}/step", {"action": "50"})[0] == 200  # the session is intact
    assert raw(url, "DELETE", f"/sessions/{sid}") == (200, {"closed": True})


def test_an_env_exception_is_a_500_and_the_server_carries_on(url):
    env = remote(url, FLAKY_ID)
    env.reset(seed=0)
    with pytest.raises(RemoteEnvError, match="ZeroDivisionError: the env divided by zero"):
        env.step("crash")
    _, _, _, _, info = env.step("fine")  # the same session still answers
    assert info["board"].dtype == np.int16 and info["board"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert info["cell"] == (1, "b") and type(info["score"]) is np.float32 and info["worst"] == -math.inf
    assert info["by_row"] == {0: "top", 1: "bottom"} and info["raw"] == b"\x00\xff"
    env.close()


def test_a_client_that_disappears_mid_request_leaves_the_server_serving(url):
    _, made = raw(url, "POST", "/sessions", {"env_id": FLAKY_ID})
    sid = made["session_id"]
    raw(url, "POST", f"/sessions/{sid}/reset", {"seed": 0})
    host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
    step = json.dumps({"action": "sleep"}).encode()
    with socket.create_connection((host, port)) as sock:  # the whole request, then gone during the slow step
        sock.sendall(f"POST /sessions/{sid}/step HTTP/1.1\r\nHost: x\r\nContent-Length: {len(step)}\r\n\r\n".encode() + step)
    with socket.create_connection((host, port)) as sock:  # half a body, then gone
        sock.sendall(f"POST /sessions/{sid}/step HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{{\"act".encode())
    status, answer = raw(url, "POST", f"/sessions/{sid}/step", {"action": "after"})  # waits for the slow step
    assert status == 200 and answer["info"]["turn"] == 2 and answer["truncated"] is True
    assert raw(url, "GET", "/")[0] == 200


def test_max_sessions_and_idle_timeout():
    with ServerThread(EnvServer(["GuessNumber-v0"], max_sessions=2, session_timeout=0.6, client_timeout=2.0)) as address:
        first, second = remote(address, "GuessNumber-v0"), remote(address, None)
        with pytest.raises(ServerBusyError, match="maximum of 2 sessions"):
            remote(address, "GuessNumber-v0")
        status, answer = raw(address, "POST", "/sessions", {})
        assert status == 503 and "--max-sessions" in answer["error"]["message"]
        second.close()
        third = remote(address, "GuessNumber-v0")  # a closed session frees its place
        first.reset(seed=0)
        time.sleep(2.5)  # idle past both timeouts, but this process beats its lease: kept
        assert first.step("1")[4]["turn"] == 1
        first.close(), third.close()
        _, made = raw(address, "POST", "/sessions", {})  # a client without a lease (curl): the idle timeout
        time.sleep(1.5)
        status, answer = raw(address, "POST", f"/sessions/{made['session_id']}/reset", {"seed": 0})
        assert status == 404 and "session-timeout" in answer["error"]["message"]
        assert raw(address, "GET", "/")[1]["sessions"] == 0


def test_pickled_client_continues_on_its_own_session(url):
    env = remote(url, "GuessNumber-v0")
    env.reset(seed=4)
    env.step("10")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.unwrapped.session_id != env.unwrapped.session_id
    assert clone.step("30") == env.step("30")
    env.close()
    assert clone.step("40")[4]["turn"] == 3  # the copy outlives the original's session
    clone.close()


def test_encoding_round_trips_what_json_cannot_carry():
    values = [{"$type": "mine", "x": 1}, (1, (2,)), {1, 2}, frozenset({"a"}), float("nan"), np.array([[True, False]]),
              np.int64(3), {(1, 2): "pair"}, Status.CORRECT, "plain", [1.5, None]]
    for value in values:
        back = decode(json.loads(json.dumps(encode(value), allow_nan=False)))
        assert type(back) is type(value) and repr(back) == repr(value), value
    assert decode(encode(object()))[:8] == "<object "  # documented as the one lossy case: its repr


def test_the_serve_command_prints_its_address_and_stops_on_sigterm():
    proc = subprocess.Popen([sys.executable, "-m", "mathgym", "serve", "GuessNumber-v0", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        address = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert address, line + proc.stderr.read()
        env = gym.make(REMOTE_ENV_ID, url=address.group())
        assert env.reset(seed=0) == gym.make("GuessNumber-v0").reset(seed=0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    bad = subprocess.run([sys.executable, "-m", "mathgym", "serve", "GuessNumbr-v0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Did you mean: GuessNumber-v0" in bad.stderr
