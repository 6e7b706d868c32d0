"""mathgym envs as verifiers environments (:mod:`mathgym.integrations.verifiers`), against the real
verifiers (≥ 0.4, its ``verifiers.v1`` stack): verifiers' own loader resolves the taskset id
``mathgym-verifiers``, builds the taskset and the env, and the env's own ``run()`` plays episodes.

Most tests stand in for the agent seat: a scripted player answers each turn with a fixed reply,
through verifiers' own ``Segment`` and ``AssistantMessage`` types. One runs verifiers' own evaluation
entry point (``vf-eval``) end to end: its ``null`` harness (verifiers' chat program, in its
``subprocess`` runtime) talks through verifiers' interception server to mathgym's
``PolicyEndpoint`` serving the embedded tiny model on 127.0.0.1. verifiers provisions that program
with ``uv`` (``uv sync --script`` of its PEP 723 dependencies, downloaded); offline, a stand-in for
those two uv commands hands it this venv's interpreter, which has them all (verifiers' own pins).

verifiers pins ``mcp==2.0.0`` and ``openai<3``: CI runs this file in a second venv layered over the
main one (as for verl); where verifiers is not importable, only the install message is tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import mathgym.integrations
from mathgym.errors import ConfigError


def test_without_verifiers_the_message_says_how_to_install_it():
    code = (
        "import sys; sys.modules['verifiers'] = None; sys.modules['verifiers.v1'] = None\n"
        "try:\n    import mathgym.integrations.verifiers\nexcept ImportError as e:\n    print('ImportError', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "ImportError mathgym.integrations.verifiers needs verifiers>=0.4: pip install" in out and "[verifiers]" in out


vf = pytest.importorskip("verifiers.v1", reason="verifiers>=0.4 is an optional extra (mathgym[verifiers]), in its own venv")

from verifiers.v1.utils.loaders import taskset_class  # noqa: E402

from mathgym.integrations.verifiers import TASKSET_ID, MathgymEnv, MathgymTaskset, load_environment  # noqa: E402


class ScriptedTrace:
    """What MathgymEnv writes on a trace: rewards and info."""

    def __init__(self):
        self.rewards: dict[str, tuple[float, float]] = {}
        self.info: dict = {}

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = (value, weight)


class ScriptedInteraction:
    """An agent seat that answers every turn with the next scripted reply."""

    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.user_turns: list[str | None] = []
        self.trace = ScriptedTrace()

    async def turn(self, message=None):
        self.user_turns.append(message)
        if not self.replies:
            return vf.Segment(messages=[], terminated=True)
        return vf.Segment(messages=[vf.AssistantMessage(content=self.replies.pop(0))])


class ScriptedAgents:
    def __init__(self, replies: list[str]):
        self.interactions: list[ScriptedInteraction] = []
        self.replies = replies
        self.player = self

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        interaction = ScriptedInteraction(self.replies)
        self.interactions.append(interaction)
        yield interaction


def local_episode(env_id: str, kwargs: dict, seed: int, replies: list[str]):
    env = gym.make(env_id, **kwargs)
    env.reset(seed=seed)
    observations, total, info = [], 0.0, {}
    for reply in replies:
        obs, reward, terminated, truncated, info = env.step(reply)
        total += reward
        if terminated or truncated:
            break
        observations.append(obs)
    return observations, total, info


def test_verifiers_own_loader_resolves_the_taskset_id():
    assert taskset_class(TASKSET_ID) is MathgymTaskset
    env = load_environment("GuessNumber-v0", num_tasks=3, seed=10, max_turns=5)
    assert isinstance(env, MathgymEnv)
    tasks = list(env.taskset)
    local = gym.make("GuessNumber-v0", max_turns=5)
    for i, task in enumerate(tasks):
        _, info = local.reset(seed=10 + i)
        system, user = info["messages"]
        assert (task.data.system_prompt, task.data.prompt, task.data.id) == (system["content"], user["content"], info["task_id"])
        assert task.data.idx == i and task.data.seed == 10 + i
    assert [t.data.id for t in env.taskset.shuffle(seed=1).take(2)]  # verifiers' own views work on it


@pytest.mark.parametrize(("env_id", "kwargs", "replies"), [
    ("GuessNumber-v0", {"max_turns": 4}, ["50", " 25\n", "hello", "12", "6"]),
    ("MathReason-v0", {"difficulty": 0}, ["So the answer is \\boxed{3}. "]),
    ("Countdown-v0", {}, ["no idea"]),
])
def test_the_env_plays_the_episode_the_local_env_plays(env_id, kwargs, replies):
    """The user turns verifiers' seat reads are the env's observations, character for character; the
    trace's reward is the episode's return, its info the final status."""
    env = load_environment(env_id, num_tasks=2, **kwargs)
    for task in env.taskset:
        agents = ScriptedAgents(list(replies))
        asyncio.run(env.run(task, agents))
        (interaction,) = agents.interactions
        observations, total, info = local_episode(env_id, kwargs, task.data.seed, replies)
        assert interaction.user_turns == [None, *observations]
        assert interaction.trace.rewards == {"env_reward": (total, 1.0)}
        assert interaction.trace.info["mathgym_status"] == info["status"]
        assert interaction.trace.info["mathgym_correct"] == info["correct"]


def test_an_infrastructure_failure_is_an_episode_error_not_a_reward():
    env = load_environment("GuessNumber-v0", num_tasks=1)
    task = next(iter(env.taskset))
    agents = ScriptedAgents(["50"])
    import mathgym.integrations.verifiers as adapter

    original = adapter._make_env

    class Failing(gym.Wrapper):
        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            return obs, 0.0, True, False, {**info, "status": "error", "correct": False}

    adapter._make_env = lambda env_id, kw: Failing(original(env_id, kw))
    try:
        with pytest.raises(RuntimeError, match="infrastructure failure"):
            asyncio.run(env.run(task, agents))
    finally:
        adapter._make_env = original
    assert agents.interactions[0].trace.rewards == {}


def test_unknown_options_are_refused_before_verifiers_loads_anything():
    with pytest.raises(ConfigError, match="no option 'difficultyy'"):
        load_environment("MathReason-v0", difficultyy=1)


# -- verifiers' own evaluation entry point, end to end ------------------------------------------

REPO = Path(__file__).resolve().parents[2]

#: Stands in for the two uv commands verifiers' runtime runs to provision its harness program:
#: ``uv sync --script P`` (here: check that this interpreter has P's PEP 723 dependencies) and
#: ``uv python find --script P`` (here: this interpreter). Anything else fails loudly.
UV_STAND_IN = """\
import importlib.util, re, sys

args = sys.argv[1:]
if "--help" in args:  # verifiers checks that this uv knows --script
    print("--script")
    sys.exit(0)
script = open(args[args.index("--script") + 1]).read()
if args[0] == "sync":
    listed = re.search(r"^# dependencies = \\[(.*)\\]$", script, re.M).group(1)
    names = [re.split(r"[<>=!~ ]", d.strip().strip('"'))[0] for d in listed.split(",") if d.strip()]
    missing = [n for n in names if importlib.util.find_spec(n.replace("-", "_")) is None]
    sys.exit(f"uv stand-in: {sys.executable} lacks {missing}" if missing else 0)
if args[:2] == ["python", "find"]:
    print(sys.executable)
    sys.exit(0)
sys.exit(f"uv stand-in: {args} is not a command it stands in for")
"""


def uv_stand_in(directory: Path) -> Path:
    """A directory holding an executable ``uv`` that is :data:`UV_STAND_IN` run by this interpreter."""
    directory.mkdir()
    (directory / "uv_stand_in.py").write_text(UV_STAND_IN)
    uv = directory / "uv"
    uv.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(directory / "uv_stand_in.py"))} "$@"\n')
    uv.chmod(0o755)
    return directory


def test_vf_eval_plays_the_exported_env_against_a_served_model_and_the_rewards_are_mathgyms(tmp_path):
    """``vf-eval mathgym-verifiers`` with verifiers' ``null`` harness against the tiny model behind
    PolicyEndpoint: the trace's user turns are the local env's observations, its ``env_reward`` the
    return mathgym's own env gives the same replies, and those replies are what the model sampled."""
    pytest.importorskip("torch")
    pytest.importorskip("aiohttp")
    from mathgym.agents.endpoint import PolicyEndpoint
    from mathgym.agents.policy import LLMPolicy, SamplingParams
    from mathgym.agents.tiny import tiny_model_path
    from mathgym.aio_server import ServerThread

    kwargs, run_key = {"max_turns": 2}, "vf-eval-run"
    policy = LLMPolicy.from_pretrained(str(tiny_model_path()), device="cpu")
    endpoint = PolicyEndpoint(policy, SamplingParams(temperature=1.0, max_new_tokens=16), sampling_seed=0)
    home = tmp_path / "home"  # verifiers' cache, and no uv or Prime login of the machine's
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PATH": f"{uv_stand_in(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}",
           "MATHGYM_RUN_KEY": run_key, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with ServerThread(endpoint) as url:
        vf_eval = subprocess.run(
            [sys.executable, "-c", "from verifiers.v1.cli.eval.main import main; main()",
             "mathgym-verifiers", "--env.taskset.env-id", "GuessNumber-v0", "--env.taskset.env-kwargs", json.dumps(kwargs),
             "-n", "1", "--model", "tiny", "--client.base-url", f"{url}/v1", "--client.api-key-var", "MATHGYM_RUN_KEY",
             "--env.player.harness.id", "null", "--env.player.runtime.type", "subprocess",
             "--no-push", "--no-rich", "-o", str(tmp_path / "outputs")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )
    assert vf_eval.returncode == 0, vf_eval.stderr[-3000:]
    (traces_file,) = (tmp_path / "outputs").glob("*/traces.jsonl")
    (trace,) = [trace for line in traces_file.read_text().splitlines() for trace in json.loads(line)["traces"]]
    assert trace["ok"] and not trace["errors"], trace["errors"]
    assert trace["task"]["data"]["seed"] == 0 and trace["agent"]["config"]["harness"]["id"] == "null"
    chat = [(n["message"]["role"], n["message"]["content"]) for n in trace["nodes"]]
    replies = [text for role, text in chat if role == "assistant"]
    observations, total, info = local_episode("GuessNumber-v0", kwargs, 0, replies)
    _, first = gym.make("GuessNumber-v0", **kwargs).reset(seed=0)
    assert chat[0] == ("system", first["messages"][0]["content"])
    assert [text for role, text in chat if role == "user"] == [first["messages"][1]["content"], *observations]
    assert len(replies) == kwargs["max_turns"] or info["correct"]  # the episode ran to its end
    assert trace["rewards"] == {"env_reward": {"score": total, "weight": 1.0}}
    assert (trace["info"]["mathgym_status"], trace["info"]["mathgym_correct"]) == (info["status"], info["correct"])
    sampled = [sample.message["content"] for call in endpoint.recorder.run(run_key).calls for sample in call.samples]
    assert replies == sampled
