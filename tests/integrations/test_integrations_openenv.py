"""``mathgym serve --format openenv``: the mathgym command serving a registered env in OpenEnv's wire
format (:mod:`mathgym.integrations.openenv`'s server), played by openenv-core's own client."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the ids

pytest.importorskip("openenv.core", reason="openenv-core is an optional extra (mathgym[openenv])")

from openenv.core import GenericEnvClient  # noqa: E402


def mathgym_cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mathgym", *args], capture_output=True, text=True, timeout=120, **kwargs)


def test_mathgym_serve_format_openenv_plays_the_local_episode_with_openenvs_client():
    actions = ["50", "25", "hello", "12", "6"]
    proc = subprocess.Popen([sys.executable, "-m", "mathgym", "serve", "--format", "openenv", "GuessNumber-v0", "--port", "0", "-o", "max_turns=4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        address = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert address and "OpenEnv" in line, line + proc.stderr.read()
        for seed in (0, 7):
            local = gym.make("GuessNumber-v0", max_turns=4)
            with GenericEnvClient(base_url=address.group()).sync() as client:
                result = client.reset(seed=seed)
                obs, info = local.reset(seed=seed)
                assert (result.observation["text"], result.observation["messages"], result.done) == (obs, info["messages"], False)
                for action in actions:
                    result = client.step({"message": action})
                    obs, reward, terminated, truncated, info = local.step(action)
                    assert (result.observation["text"], result.reward, result.done) == (obs, reward, terminated or truncated)
                    assert result.observation["messages"] == info["messages"]
                    assert result.observation["info"]["status"] == info["status"]
                    if result.done:
                        break
            assert result.done and result.observation["info"]["answer"] == str(info["answer"])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize(("args", "message"), [
    (["GuessNumbr-v0"], "Did you mean: GuessNumber-v0"),
    (["GuessNumber-v0", "MathReason-v0"], "--format openenv serves one env per server"),
    (["GuessNumber-v0", "-o", "max_turnz=3"], "no option 'max_turnz'"),
    (["GuessNumber-v0", "--token-env", "HOME"], "OpenEnv's server checks no token"),
])
def test_what_it_cannot_serve_is_one_line(args, message):
    bad = mathgym_cli("serve", "--format", "openenv", *args)
    assert bad.returncode == 2 and message in bad.stderr
    assert bad.stderr.count("\n") == 1, bad.stderr


def test_without_openenv_core_it_says_how_to_install_it():
    code = ("import sys; sys.modules['openenv'] = None\n"
            "from mathgym.cli import main\n"
            "sys.exit(main(['serve', '--format', 'openenv', 'GuessNumber-v0']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "mathgym serve: error: --format openenv needs openenv-core" in out.stderr and "[openenv]" in out.stderr
