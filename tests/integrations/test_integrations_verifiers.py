"""mathgym envs as verifiers environments (:mod:`mathgym.integrations.verifiers`), against the real
verifiers (≥ 0.4, its ``verifiers.v1`` stack): verifiers' own loader resolves the taskset id
``mathgym-verifiers``, builds the taskset and the env, and the env's own ``run()`` plays episodes.

The one stand-in is the agent seat: verifiers runs a model through a harness program (the ``null``
harness is a uv script), which needs ``uv`` and a model server; here a scripted player answers each
turn with a fixed reply, through verifiers' own ``Segment`` and ``AssistantMessage`` types. verifiers
pins ``mcp==2.0.0`` and ``openai<3``: CI runs this file in a second venv layered over the main one
(as for verl); where verifiers is not importable, only the install message is tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys

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
