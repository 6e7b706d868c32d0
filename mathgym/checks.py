"""``mathgym check``: the contract checks a plugin author runs on an environment."""

from __future__ import annotations

import pickle
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from mathgym.errors import EpisodeFinishedError, InvalidActionError, ResetNeededError


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one named check."""

    name: str
    passed: bool
    detail: str = ""


def _gymnasium_checker(env_id: str, kwargs: dict) -> str:
    env = gym.make(env_id, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    env.close()
    return "gymnasium check_env passed with warnings as errors"


def _determinism(env_id: str, kwargs: dict) -> str:
    first, second = gym.make(env_id, **kwargs), gym.make(env_id, **kwargs)
    for seed in (0, 1, 12345):
        (obs_a, info_a), (obs_b, info_b) = first.reset(seed=seed), second.reset(seed=seed)
        if obs_a != obs_b or info_a["task_id"] != info_b["task_id"]:
            raise AssertionError(f"seed {seed} gave two different tasks: {obs_a[:60]!r} vs {obs_b[:60]!r}")
    return "same seed gives the same task (3 seeds)"


def _pickling(env_id: str, kwargs: dict) -> str:
    env = gym.make(env_id, **kwargs)
    obs, _ = env.reset(seed=7)
    clone = pickle.loads(pickle.dumps(env))
    action = "\\boxed{0}"
    if env.step(action)[:4] != clone.step(action)[:4]:
        raise AssertionError("a pickled copy answers the same action differently")
    return "a pickled env continues identically"


def _random_episode(env_id: str, kwargs: dict) -> str:
    env = gym.make(env_id, **kwargs)
    env.action_space.seed(0)
    _, info = env.reset(seed=0)
    for key in ("task_id", "messages", "max_turns"):
        if key not in info:
            raise AssertionError(f"reset() info lacks {key!r}")
    steps = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        steps += 1
        if terminated and truncated:
            raise AssertionError("terminated and truncated both true")
        for key in ("status", "reward_breakdown", "turn"):
            if key not in info:
                raise AssertionError(f"step() info lacks {key!r}")
        if terminated or truncated:
            break
        if steps > 10_000:
            raise AssertionError("a random episode did not end within 10,000 steps")
    for key in ("answer", "correct"):
        if key not in info:
            raise AssertionError(f"final step() info lacks {key!r}")
    return f"random episode ended after {steps} step(s), status={info['status']}, reward={reward}"


def _bad_actions(env_id: str, kwargs: dict) -> str:
    env = gym.make(env_id, **kwargs).unwrapped
    try:
        env.step("x")
        raise AssertionError("step() before reset() did not raise")
    except ResetNeededError:
        pass
    env.reset(seed=0)
    try:
        env.step(123)  # type: ignore[arg-type]
        raise AssertionError("a non-str action did not raise")
    except InvalidActionError:
        pass
    while True:
        _, _, terminated, truncated, _ = env.step("")
        if terminated or truncated:
            break
    try:
        env.step("x")
        raise AssertionError("step() after the end did not raise")
    except EpisodeFinishedError:
        pass
    return "non-str, before-reset and after-end actions raise mathgym errors"


def _vector_agreement(env_id: str, kwargs: dict) -> str:
    seeds = [3, 3, 4, 5]
    results = []
    for mode in ("sync", "async"):
        vec = gym.make_vec(env_id, len(seeds), vectorization_mode=mode, **kwargs)
        try:
            obs, _ = vec.reset(seed=seeds)
            step_obs = vec.step(["\\boxed{1}"] * len(seeds))[0]
            results.append((tuple(obs), tuple(step_obs)))
        finally:
            vec.close()
    if results[0] != results[1]:
        raise AssertionError(f"async observations differ from sync ones: {results[1][0][0][:60]!r} vs {results[0][0][0][:60]!r}")
    if results[0][0][0] != results[0][0][1]:
        raise AssertionError("reset(seed=[s, s, ...]) did not give identical tasks")
    return "async == sync observations, character for character"


CHECKS: tuple[tuple[str, Callable[[str, dict], str]], ...] = (
    ("check_env", _gymnasium_checker),
    ("determinism", _determinism),
    ("pickle", _pickling),
    ("random_episode", _random_episode),
    ("bad_actions", _bad_actions),
    ("vector_sync_async", _vector_agreement),
)


def run_checks(env_id: str, kwargs: dict | None = None) -> list[CheckResult]:
    """Run every check on ``env_id``; never raises, reports each outcome."""
    results = []
    for name, check in CHECKS:
        try:
            results.append(CheckResult(name, True, check(env_id, dict(kwargs or {}))))
        except Exception as err:  # report, do not stop: the author wants the whole list
            detail = f"{type(err).__name__}: {err}"
            if not isinstance(err, AssertionError):
                detail += "\n" + traceback.format_exc(limit=3)
            results.append(CheckResult(name, False, detail))
    return results
