"""The TextEnv base class and UnicodeText space, on a small env defined here."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import pytest

from mathgym import Judgement, Task, TextEnv
from mathgym.errors import EpisodeFinishedError, InvalidActionError, ResetNeededError
from mathgym.rewards import Status
from mathgym.spaces import UnicodeText


class Echo(TextEnv):
    """Says 'again' until the agent types 'stop' (for testing the base class)."""

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        return Task(f"echo-{int(self.np_random.integers(1000))}", "type stop", "stop")

    def _judge(self, action: str) -> Judgement:
        done = action == "stop"
        return Judgement(float(done), Status.CORRECT if done else Status.IN_PROGRESS, done, observation="again", correct=done)


def test_unicode_text_accepts_any_string_up_to_max_length():
    space = UnicodeText(10)
    for text in ("", "a b, c!", "é中\x00\n\t", "\ud800", "x" * 10):
        assert space.contains(text)
    assert not space.contains("x" * 11)
    assert not space.contains(b"bytes")
    assert space.contains(space.sample())
    assert pickle.loads(pickle.dumps(space)) == space


def test_gymnasium_text_rejects_what_we_accept():
    # The reason UnicodeText exists: the stock space refuses ordinary model output.
    assert not gym.spaces.Text(10).contains("a b, c!")


def test_multi_turn_truncation_and_termination():
    env = Echo(max_turns=3, render_mode="ansi")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("go")
    assert (obs, reward, terminated, truncated, info["turn"]) == ("again", 0.0, False, False, 1)
    assert "answer" not in info
    env.step("go")
    obs, reward, terminated, truncated, info = env.step("go")
    assert (terminated, truncated) == (False, True)
    assert info["answer"] == "stop" and info["correct"] is False
    env.reset(seed=0)
    *_, terminated, truncated, info = env.step("stop")
    assert (terminated, truncated, info["correct"]) == (True, False, True)
    assert [m["role"] for m in info["messages"]] == ["user", "assistant"]
    assert "[assistant]\nstop" in env.render()


def test_errors_name_the_problem():
    env = Echo()
    with pytest.raises(ResetNeededError, match="reset"):
        env.step("x")
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="str, got int"):
        env.step(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # also catchable as the builtin
        env.step(None)  # type: ignore[arg-type]
    env.step("stop")
    with pytest.raises(EpisodeFinishedError, match="ended"):
        env.step("x")


def test_gold_answer_is_hidden_until_the_end():
    env = Echo(max_turns=2)
    obs, info = env.reset(seed=1)
    assert "answer" not in info and "stop" not in repr(info["messages"][1:])
    _, _, _, _, info = env.step("no")
    assert "answer" not in info and "correct" not in info
