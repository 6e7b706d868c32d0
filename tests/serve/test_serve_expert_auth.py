"""A served env keeps its expert (so a warm start runs against ``mathgym/Remote-v0``), and a
server started with a token (``mathgym serve --token-env VAR``) answers 401 to requests without it."""

from __future__ import annotations

import http.client
import json
import os
import pickle
import re
import subprocess
import sys
import urllib.parse
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("aiohttp")

from mathgym.algos.sft import env_demonstrations  # noqa: E402
from mathgym.envs import REMOTE_ENV_ID  # noqa: E402
from mathgym.envs.served.wire import UnauthorizedError  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from mathgym.serve import EnvServer, ServerThread  # noqa: E402

from tests.serve.test_serve import FLAKY_ID  # noqa: E402  (registers the test's env without an expert)

TOKEN_VAR = "MATHGYM_TEST_SERVE_TOKEN"


@pytest.fixture(scope="module")
def url():
    with ServerThread(EnvServer(["GuessNumber-v0", "Mastermind-v0", FLAKY_ID])) as address:
        yield address


def raw(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    status, text = response.status, response.read()
    conn.close()
    return status, json.loads(text)


@pytest.mark.parametrize(("env_id", "kwargs"), [("GuessNumber-v0", {"high": 20}), ("Mastermind-v0", {"difficulty": 0})])
def test_the_served_expert_plays_the_local_experts_moves(url, env_id, kwargs):
    local, served = gym.make(env_id, **kwargs), gym.make(REMOTE_ENV_ID, url=url, env_id=env_id, **kwargs)
    assert served.unwrapped.max_turns == local.unwrapped.max_turns
    for seed in (0, 3):
        local.reset(seed=seed), served.reset(seed=seed)
        while True:
            move = served.unwrapped.expert_action()
            assert move == local.unwrapped.expert_action()
            _, reward, terminated, truncated, _ = served.step(move)
            local.step(move)
            if terminated or truncated:
                break
        assert reward == 1.0
    clone = pickle.loads(pickle.dumps(served))  # a copy asks its own session
    clone.reset(seed=5), local.reset(seed=5)
    assert clone.unwrapped.expert_action() == local.unwrapped.expert_action()
    served.close(), clone.close()


def test_a_warm_starts_demonstrations_come_through_the_server(url):
    kwargs = {"difficulty": 0}
    served = env_demonstrations(REMOTE_ENV_ID, {"url": url, "env_id": "Mastermind-v0", **kwargs}, 3, seed=7)
    assert served == env_demonstrations("Mastermind-v0", kwargs, 3, seed=7)


def test_an_env_without_an_expert_has_none_through_the_server(url):
    served = gym.make(REMOTE_ENV_ID, url=url, env_id=FLAKY_ID)
    assert not hasattr(served.unwrapped, "expert_action")
    with pytest.raises(ConfigError, match="no expert_action"):
        env_demonstrations(REMOTE_ENV_ID, {"url": url, "env_id": FLAKY_ID}, 1)
    status, answer = raw(url, f"/sessions/{served.unwrapped.session_id}/expert")
    assert status == 400 and "has no expert_action()" in answer["error"]["message"]
    served.close()


def test_a_server_with_a_token_answers_401_without_it(monkeypatch):
    with ServerThread(EnvServer(["GuessNumber-v0"], token="s3cret-token")) as address:
        monkeypatch.delenv(TOKEN_VAR, raising=False)
        with pytest.raises(UnauthorizedError, match="no token"):
            gym.make(REMOTE_ENV_ID, url=address)
        with pytest.raises(ConfigError, match=f"{TOKEN_VAR} is not set"):
            gym.make(REMOTE_ENV_ID, url=address, token_env=TOKEN_VAR)
        monkeypatch.setenv(TOKEN_VAR, "s3cret-tokeN")
        with pytest.raises(UnauthorizedError, match="a wrong token"):
            gym.make(REMOTE_ENV_ID, url=address, token_env=TOKEN_VAR)
        assert raw(address, "/")[0] == 401
        assert raw(address, "/", {"Authorization": "Bearer s3cret-tokeN"})[0] == 401

        monkeypatch.setenv(TOKEN_VAR, "s3cret-token")
        env = gym.make(REMOTE_ENV_ID, url=address, token_env=TOKEN_VAR)
        assert env.reset(seed=0) == gym.make("GuessNumber-v0").reset(seed=0)
        assert "s3cret" not in repr(pickle.dumps(env))  # the copy reads the variable too; the token is in no pickle
        assert raw(address, "/", {"Authorization": "Bearer s3cret-token"})[1]["envs"] == ["GuessNumber-v0"]
        env.close()


def test_the_serve_command_reads_its_token_from_the_environment():
    unset = subprocess.run([sys.executable, "-m", "mathgym", "serve", "GuessNumber-v0", "--token-env", TOKEN_VAR],
                           capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != TOKEN_VAR})
    assert unset.returncode != 0 and f"{TOKEN_VAR} is not set" in unset.stderr
    proc = subprocess.Popen([sys.executable, "-m", "mathgym", "serve", "GuessNumber-v0", "--port", "0", "--token-env", TOKEN_VAR],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, TOKEN_VAR: "from-the-env", "PYTHONUNBUFFERED": "1"})
    try:
        address = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
        assert address
        assert raw(address.group(), "/")[0] == 401
        assert raw(address.group(), "/", {"Authorization": "Bearer from-the-env"})[0] == 200
    finally:
        proc.kill()
        proc.wait(timeout=30)
