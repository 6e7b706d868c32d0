"""OpenEnv both ways, against the real openenv-core: OpenEnv envs in (OpenEnv-v0) and mathgym's envs
out (:mod:`mathgym.integrations.openenv`), served with OpenEnv's own ``create_app`` and driven by
OpenEnv's own ``GenericEnvClient``."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the ids
from mathgym.checks import run_checks
from mathgym.errors import ConfigError

openenv = pytest.importorskip("openenv.core", reason="openenv-core is an optional extra (mathgym[openenv])")
uvicorn = pytest.importorskip("uvicorn")

from openenv.core import GenericEnvClient  # noqa: E402
from openenv.core.env_server.http_server import create_app  # noqa: E402

from mathgym.integrations.openenv import MathgymEnvironment, TextAction, create_openenv_app  # noqa: E402
from tests.openenv_fixture import GuessAction, GuessEnvironment, GuessObservation, secret_of  # noqa: E402

FIXTURE = "tests.openenv_fixture:GuessEnvironment"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(app) -> Iterator[str]:
    """``app`` served on 127.0.0.1 in a daemon thread (stopped on exit, and with the process)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical", ws_ping_interval=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the OpenEnv server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def bisect(env, seed: int) -> list[tuple]:
    """Play GuessNumber-like feedback by bisection on 1..20 from OpenEnv-v0; the steps' results."""
    _, info = env.reset(options={"task_index": seed})
    secret, low, high, steps = secret_of(seed), 1, 20, []
    while True:
        guess = (low + high) // 2
        obs, reward, terminated, truncated, info = env.step(str(guess))
        steps.append((obs, reward, terminated, truncated, info["status"]))
        if terminated or truncated:
            return steps
        low, high = (guess + 1, high) if guess < secret else (low, guess - 1)


# -- in: OpenEnv environments as mathgym envs --------------------------------------------------


def test_an_in_process_openenv_env_plays_to_a_win():
    env = gym.make("OpenEnv-v0", env=FIXTURE, max_turns=6)
    obs, info = env.reset(options={"task_index": 5})
    assert obs == "Guess my number from 1 to 20. Reply with the number only."
    assert info["task_id"] == "openenv-5" and info["messages"][-1] == {"role": "user", "content": obs}
    steps = bisect(env, 5)
    assert steps[-1][1:] == (1.0, True, False, "correct")
    assert all(s[4] == "in_progress" and s[1] == 0.0 and "wrong: go" in s[0] for s in steps[:-1])


def test_a_reply_the_mapping_refuses_is_the_models_format_error():
    env = gym.make("OpenEnv-v0", env="tests.openenv_fixture:DigitEnvironment", to_action="tests.openenv_fixture:digit_action")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("no digits here")
    assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, "format_error")
    assert "no digit in the reply" in obs
    _, _, terminated, _, info = env.step("7")
    assert terminated and info["status"] in ("correct", "wrong")


def test_an_action_without_a_text_field_needs_a_mapping():
    with pytest.raises(ConfigError, match="to_action="):
        gym.make("OpenEnv-v0", env="tests.openenv_fixture:DigitEnvironment")


def test_an_env_that_fails_is_an_infrastructure_status():
    env = gym.make("OpenEnv-v0", env="tests.openenv_fixture:BrokenEnvironment")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("3")
    assert (reward, terminated, info["status"]) == (0.0, True, "error")
    assert "the env's own bug" in info["error"]


def test_a_served_openenv_env_plays_as_the_in_process_one():
    """OpenEnv's create_app serves the fixture; OpenEnv-v0 plays it through GenericEnvClient."""
    app = create_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=8)
    with served(app) as url:
        remote = gym.make("OpenEnv-v0", env=url, max_turns=6)
        local = gym.make("OpenEnv-v0", env=FIXTURE, max_turns=6)
        for seed in (0, 7):
            assert bisect(remote, seed) == bisect(local, seed)
        remote.close()


def test_openenv_v0_passes_the_contract_checks_on_a_served_env():
    app = create_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=16)
    with served(app) as url:
        failures = [f"{r.name}: {r.detail}" for r in run_checks("OpenEnv-v0", {"env": url}) if not r.passed]
    assert not failures, failures


# -- out: mathgym envs as OpenEnv environments ---------------------------------------------------


def local_episode(env_id: str, kwargs: dict, seed: int, actions: list[str]) -> list[tuple]:
    env = gym.make(env_id, **kwargs)
    obs, info = env.reset(seed=seed)
    episode = [(obs, None, False, info["messages"])]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        episode.append((obs, reward, terminated or truncated, info["messages"]))
        if terminated or truncated:
            break
    return episode


def openenv_episode(url: str, seed: int, actions: list[str]) -> list[tuple]:
    with GenericEnvClient(base_url=url).sync() as client:
        result = client.reset(seed=seed)
        episode = [(result.observation["text"], result.reward, result.done, result.observation["messages"])]
        for action in actions:
            result = client.step({"message": action})
            episode.append((result.observation["text"], result.reward, result.done, result.observation["messages"]))
            if result.done:
                break
    return episode


@pytest.mark.parametrize(("env_id", "kwargs", "actions"), [
    ("GuessNumber-v0", {"max_turns": 4}, ["50", "25", "hello", "12", "6"]),
    ("MathReason-v0", {"difficulty": 0}, ["The answer is \\boxed{3}."]),
])
def test_openenvs_own_client_plays_the_episode_the_local_env_plays(env_id, kwargs, actions):
    """Observations, rewards, done and the chat, character for character (so token for token)."""
    with served(create_openenv_app(env_id, kwargs)) as url:
        for seed in (0, 11):
            assert openenv_episode(url, seed, actions) == local_episode(env_id, kwargs, seed, actions)


def test_the_served_env_reports_status_truncation_and_the_answer():
    with served(create_openenv_app("GuessNumber-v0", {"max_turns": 2})) as url:
        with GenericEnvClient(base_url=url).sync() as client:
            first = client.reset(seed=1)
            assert first.observation["info"]["task_id"] and first.done is False
            client.step({"message": "1"})
            last = client.step({"message": "2"})
    info = last.observation["info"]
    assert last.done and info["truncated"] and not info["terminated"]
    assert info["status"] == "wrong" and info["answer"] and info["correct"] is False


def test_round_trip_a_mathgym_env_served_as_openenv_passes_mathgym_check():
    """mathgym -> OpenEnv server -> OpenEnv-v0 -> mathgym's contract checks."""
    with served(create_openenv_app("GuessNumber-v0", {"max_turns": 5})) as url:
        failures = [f"{r.name}: {r.detail}" for r in run_checks("OpenEnv-v0", {"env": url, "max_turns": 5}) if not r.passed]
        wrapped = gym.make("OpenEnv-v0", env=url, observation_field="text", max_turns=5)
        obs, _ = wrapped.reset(options={"task_index": 3})
        assert obs == gym.make("GuessNumber-v0", max_turns=5).reset(seed=3)[0]
    assert not failures, failures


def test_the_openenv_environment_in_process():
    env = MathgymEnvironment("GuessNumber-v0", max_turns=3)
    first = env.reset(seed=2, episode_id="ep-1")
    assert env.state.episode_id == "ep-1" and env.state.task_id == first.info["task_id"]
    after = env.step(TextAction(message="50"))
    assert env.state.step_count == 1 and after.info["turn"] == 1 and after.done is False
    assert env.get_metadata().name == "GuessNumber-v0"


def test_python_m_serves_and_refuses_an_unknown_env():
    bad = subprocess.run([sys.executable, "-m", "mathgym.integrations.openenv", "NoSuchEnv-v0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "No environment registered as 'NoSuchEnv-v0'" in bad.stderr
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mathgym.integrations.openenv", "MathReason-v0", "--port", str(port), "-o", "difficulty=0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:
                    assert client.reset(seed=0).observation["text"] == gym.make("MathReason-v0", difficulty=0).reset(seed=0)[0]
                break
            except ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        server.kill()
        server.wait(10)


def test_without_openenv_the_messages_say_how_to_install_it():
    code = (
        "import sys; sys.modules['openenv'] = None; sys.modules['openenv.core'] = None\n"
        "import gymnasium as gym, mathgym\n"
        "try:\n    gym.make('OpenEnv-v0', env='x:Y')\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
        "try:\n    import mathgym.integrations.openenv\nexcept ImportError as e:\n    print('ImportError', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "ConfigError OpenEnv-v0 needs openenv-core: pip install" in out and "[openenv]" in out
    assert "ImportError mathgym.integrations.openenv needs openenv-core" in out
