"""``mathgym check``: the contract checks a plugin author runs on an environment."""

from __future__ import annotations

import pickle
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from mathgym.errors import DatasetError, EpisodeFinishedError, InvalidActionError, ResetNeededError


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


@dataclass
class ReferenceReport:
    """How the tasks' own reference answers (``expert_action()``) fare when the env grades them:
    what a data set of other people's needs before training on it (a reference that fails points
    at a broken task, a missing library, a gold query SQLite cannot run)."""

    tasks: int = 0
    solved: int = 0
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    """``(task, status, why)`` of each task whose reference did not solve it."""
    unverifiable: list[tuple[str, str]] = field(default_factory=list)
    without_reference: int = 0

    def lines(self, shown: int = 10) -> list[str]:
        """The report as text: counts, then the first ``shown`` failures and unverifiable tasks."""
        out = [f"references: {self.tasks} tasks; {self.solved} solved by their own reference, {len(self.failed)} not, "
               f"{len(self.unverifiable)} unverifiable, {self.without_reference} without a reference"]
        out += [f"  [FAIL] {task}: {status}{f' ({why})' if why else ''}" for task, status, why in self.failed[:shown]]
        out += [f"  [UNVERIFIABLE] {task}: {why}" for task, why in self.unverifiable[:shown]]
        hidden = max(0, len(self.failed) - shown) + max(0, len(self.unverifiable) - shown)
        return out + ([f"  ... and {hidden} more"] if hidden else [])


def check_references(env_id: str, kwargs: dict | None = None, limit: int | None = None, progress: bool = True) -> ReferenceReport:
    """Play each task's reference answer (the env's ``expert_action()``, turn after turn) and
    grade it: every task of a data set (``options={"task_index": i}``), or ``limit`` of them;
    for a generating env, the tasks of seeds ``0 .. limit - 1`` (100 by default).

    A task counts as solved when its episode ends ``correct``; an ``unverifiable`` one is listed
    apart (its tests cannot be judged here), and a task whose expert has no answer (a record
    without a reference) is counted, not failed.
    """
    from tqdm.auto import tqdm  # noqa: PLC0415

    env = gym.make(env_id, **(kwargs or {}))
    base = env.unwrapped
    count = getattr(base, "num_tasks", None)
    by_index = isinstance(count, int) and count > 0
    total = (min(count, limit) if limit else count) if by_index else (limit or 100)
    report = ReferenceReport()
    try:
        for i in tqdm(range(total), desc=f"{env_id} references", unit="task", disable=not progress):
            report.tasks += 1
            try:
                _, info = env.reset(options={"task_index": i}) if by_index else env.reset(seed=i)
            except DatasetError as err:  # the task cannot even be set (a gold query that fails on its database)
                report.failed.append((f"task {i}", "cannot be set up", str(err)[:200]))
                continue
            task_id, done, info = str(info.get("task_id", i)), False, {}
            played = False
            while not done:
                action = base.expert_action()
                if action is None:
                    break
                played = True
                _, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            if not played:
                report.without_reference += 1
                continue
            status = str(info.get("status", ""))
            why = str(info.get("feedback") or info.get("unverifiable") or "")[:200]
            if status == "unverifiable":
                report.unverifiable.append((task_id, why or "its tests cannot be judged here"))
            elif info.get("correct"):
                report.solved += 1
            else:
                if not why and isinstance(info.get("tests"), list):  # the code envs: the first failing test's message
                    why = next((str(t.get("message", ""))[:200] for t in info["tests"] if not t.get("passed")), "")
                report.failed.append((task_id, status or "not solved", why))
    finally:
        env.close()
    return report
