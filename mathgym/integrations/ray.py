"""Ray executor: env steps (and the rewards scored inside them) on Ray actors.

Two pieces, both on Ray actors:

* :class:`RayExecutor` builds :class:`RayVectorEnv` s: gymnasium vector envs whose
  sub-envs live on a pool of Ray actors (*env hosts*), stepped in parallel. It is what
  ``mathgym train --executor ray`` uses: generation stays on the learner, every
  ``env.step`` (and so every reward, which mathgym envs score inside ``step`` with their
  verifier or sandbox) runs on an actor. Results are those of ``gym.make_vec(...,
  vectorization_mode="sync")``, string for string, including the next-step autoreset.
* :class:`RayRewardPool`: an :class:`~mathgym.rewards.workers.Executor` whose ``map``
  runs items on Ray actors, for scoring outside envs
  (:func:`~mathgym.rewards.workers.score_in_parallel`,
  :func:`~mathgym.rewards.workers.trl_reward_function`).

Faults: a dead actor is restarted by Ray; the episodes it held end with ``truncated=True``
and status ``actor_error`` (infrastructure: out of the loss, counted in ``infra/`` metrics).
See ``docs/scaling.md``. Ray is imported only in this module (``pip install "mathgym[ray]"``).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import ray
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate
from gymnasium.vector.vector_env import AutoresetMode

from mathgym.envs.ahead import score_ahead
from mathgym.errors import ConfigError, MathgymError
from mathgym.rewards.base import Status

T = TypeVar("T")
R = TypeVar("R")

#: Outcome of a job whose sub-env no longer exists on its actor (the actor was restarted).
_LOST = "lost"
_RESET_ATTEMPTS = 3


class ActorFailureError(MathgymError, RuntimeError):
    """A Ray actor kept failing: a reset (or a reward item) could not be completed after restarts."""


def init_ray(num_cpus: int | None = None) -> None:
    """Start or join Ray once per process, quietly.

    With ``RAY_ADDRESS`` set, joins that cluster; otherwise starts a local one with
    ``num_cpus`` (default: every CPU of this machine), without the dashboard and without
    forwarding worker logs. Does nothing when Ray is already initialised.
    """
    if ray.is_initialized():
        return
    quiet = {"log_to_driver": False, "logging_level": "ERROR"}
    if os.environ.get("RAY_ADDRESS"):
        ray.init(**quiet)  # ray.init reads RAY_ADDRESS itself
    else:
        ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, **quiet)


class _EnvHost:
    """A Ray actor holding sub-envs under slot keys ``(vector_env_id, index)``; also runs reward jobs.

    Every env method takes a batch of slots so that one round trip serves them all.
    """

    def __init__(self) -> None:
        import mathgym  # noqa: F401  (registers the built-in and plugin envs in this process)

        self._envs: dict[tuple[str, int], gym.Env] = {}

    def pid(self) -> int:
        return os.getpid()

    def make(self, slots: Sequence[tuple[str, int]], spec: Any, kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        """Build the envs of ``slots`` (as ``gym.make_vec`` does); return the first one's spaces."""
        for slot in slots:
            old = self._envs.pop(slot, None)
            if old is not None:
                old.close()
            self._envs[slot] = gym.make(spec, **dict(kwargs))
        env = self._envs[slots[0]]
        return env.observation_space, env.action_space, dict(env.metadata), env.render_mode

    def run(self, jobs: Sequence[tuple[tuple[str, int], str, Any]]) -> list[Any]:
        """Run ``(slot, op, arg)`` jobs in order; ``op`` is ``reset`` (arg: seed, options) or ``step`` (arg: action).

        The steps' scoring requests are scored together first (:func:`mathgym.envs.ahead.score_ahead`).
        """
        score_ahead([(self._envs[slot], arg) for slot, op, arg in jobs if op == "step" and slot in self._envs])
        out = []
        for slot, op, arg in jobs:
            env = self._envs.get(slot)
            if env is None:
                out.append(_LOST)
            elif op == "reset":
                out.append(env.reset(seed=arg[0], options=arg[1]))
            else:
                out.append(env.step(arg))
        return out

    def call(self, slots: Sequence[tuple[str, int]], name: str, args: tuple, kwargs: dict) -> list[Any]:
        """``env.<name>(*args, **kwargs)`` (or the attribute's value) for each slot."""
        out = []
        for slot in slots:
            value = self._envs[slot].get_wrapper_attr(name)
            out.append(value(*args, **kwargs) if callable(value) else value)
        return out

    def apply(self, fn: Callable[[Any], Any], item: Any) -> Any:
        """``fn(item)`` (the reward pool's jobs)."""
        return fn(item)

    def drop(self, vector_id: str) -> None:
        """Close and forget the sub-envs of one vector env."""
        for slot in [s for s in self._envs if s[0] == vector_id]:
            self._envs.pop(slot).close()


_EnvHostActor = ray.remote(_EnvHost)


class RayExecutor:
    """A pool of env-host actors and the factory of vector envs over it.

    Call it like ``gym.make_vec``: ``executor(env_id, num_envs, env_kwargs)`` returns a
    :class:`RayVectorEnv`. Vector envs made by one executor share its actors (a trainer's
    rollout and evaluation envs), sub-env ``i`` on actor ``i % num_actors``.

    Args:
        num_actors: Env-host actors (default: one per CPU of the Ray cluster).
        num_cpus_per_actor: CPUs Ray reserves for each actor. 0 (default) lets actors share
            nodes with reward-pool tasks and the learner; ``SPREAD`` scheduling still
            spreads them across the cluster's nodes.
        max_restarts: Times Ray restarts a dead actor (-1: always).
        step_timeout_s: A step that takes longer on an actor gets that actor killed and
            restarted, its episodes ending with ``actor_error`` (``None``: wait forever).

    Example:
        >>> executor = RayExecutor(num_actors=2)  # doctest: +SKIP
        >>> envs = executor("GuessNumber-v0", 4, {})  # doctest: +SKIP
    """

    def __init__(
        self, num_actors: int | None = None, num_cpus_per_actor: float = 0.0, max_restarts: int = -1,
        step_timeout_s: float | None = None,
    ):
        if num_actors is not None and num_actors < 1:
            raise ConfigError(f"num_actors={num_actors!r} must be at least 1 (or None: one per CPU of the cluster).")
        if num_cpus_per_actor < 0:
            raise ConfigError(f"num_cpus_per_actor={num_cpus_per_actor!r} must be 0 or more.")
        self.num_actors = num_actors or cluster_cpus()
        self.step_timeout_s = step_timeout_s
        options = {
            "num_cpus": num_cpus_per_actor, "max_restarts": max_restarts, "max_task_retries": 0,
            "scheduling_strategy": "SPREAD",
        }
        self.actors = [_EnvHostActor.options(**options).remote() for _ in range(self.num_actors)]
        self.failed_calls = 0  # actor calls lost to a dead or hung actor (cumulative)

    def __call__(self, env_id: str, num_envs: int, env_kwargs: Mapping[str, Any] | None = None) -> RayVectorEnv:
        return RayVectorEnv(env_id, num_envs, env_kwargs or {}, executor=self)

    def actor_pids(self) -> list[int]:
        """Process id of each actor (for monitoring and for the fault tests)."""
        return ray.get([a.pid.remote() for a in self.actors])

    def metrics(self) -> dict[str, float]:
        """``infra/`` counters to log with a step."""
        return {"infra/actor_failures": float(self.failed_calls)}

    def close(self) -> None:
        """Kill the actors; safe to call twice."""
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _get(ref: Any, timeout: float | None = None) -> Any:
    """``ray.get``, raising a mathgym error from an actor as itself (its message says what to do)."""
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.RayTaskError as err:
        if isinstance(err.cause, MathgymError):
            raise err.cause from None
        raise


def _is_lost(outcome: Any) -> bool:
    return isinstance(outcome, str) and outcome == _LOST


def cluster_cpus() -> int:
    """CPUs of the Ray cluster (starting or joining it first)."""
    init_ray()
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _lost_step(message: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """The step result of a sub-env whose actor died: truncated, infrastructure status."""
    return "", 0.0, False, True, {"status": str(Status.ACTOR_ERROR), "correct": False, "error": message}


class RayVectorEnv(gym.vector.VectorEnv):
    """A vector env whose sub-envs live on Ray actors; results as ``SyncVectorEnv``'s.

    Same ``reset(seed=int | list | None, options=...)`` (``options["reset_mask"]``
    included), the same next-step autoreset (a sub-env that ended is reset, not stepped,
    on the following ``step``, with reward 0), the same batched observations (a tuple of
    exact strings for text spaces) and ``infos`` layout (``key`` / ``_key`` arrays).

    Args:
        env_id: Any registered env id.
        num_envs: Sub-envs.
        env_kwargs: Constructor options of each sub-env.
        executor: The actor pool (default: a new :class:`RayExecutor`, closed with the env).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        env_kwargs: Mapping[str, Any] | None = None,
        executor: RayExecutor | None = None,
    ):
        super().__init__()
        if num_envs < 1:
            raise ConfigError(f"num_envs={num_envs!r} must be at least 1.")
        if executor is not None and not executor.actors:
            raise ConfigError("this RayExecutor is closed (no actors); make the vector env with an open one.")
        self._owns_executor = executor is None
        self.executor = executor or RayExecutor(num_actors=min(int(num_envs), cluster_cpus()))
        self._id = os.urandom(8).hex()
        self._spec = gym.spec(env_id) if isinstance(env_id, str) else env_id
        self._kwargs = dict(env_kwargs or {})
        self.num_envs = int(num_envs)
        self._actor_of = [i % len(self.executor.actors) for i in range(self.num_envs)]
        self._stale: set[int] = set()  # actors whose sub-envs must be rebuilt before the next call
        self._lost: set[int] = set()  # sub-envs whose episode died with their actor (until reset)
        spaces = [self._make(a) for a in sorted(set(self._actor_of))][0]  # every actor builds its sub-envs now
        self.single_observation_space, self.single_action_space, metadata, self.render_mode = spaces
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self._observations = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        self._autoreset_envs = np.zeros(self.num_envs, dtype=np.bool_)

    # -- plumbing --------------------------------------------------------------------------

    def _slots(self, actor: int) -> list[tuple[str, int]]:
        return [(self._id, i) for i in range(self.num_envs) if self._actor_of[i] == actor]

    def _make(self, actor: int) -> tuple[Any, ...]:
        return _get(self.executor.actors[actor].make.remote(self._slots(actor), self._spec, self._kwargs))

    def _run(self, jobs: dict[int, tuple[str, Any]]) -> dict[int, Any]:
        """Run ``{env index: (op, arg)}`` on the actors in parallel; ``_LOST`` for envs whose actor failed
        (and for steps of envs whose episode was lost earlier, e.g. outside a masked reset)."""
        results: dict[int, Any] = {i: _LOST for i, (op, _) in jobs.items() if op == "step" and i in self._lost}
        by_actor: dict[int, list[int]] = {}
        for i in sorted(set(jobs) - set(results)):
            by_actor.setdefault(self._actor_of[i], []).append(i)
        refs = {}
        for actor, envs in by_actor.items():
            if actor in self._stale:
                try:
                    self._make(actor)
                    self._stale.discard(actor)
                except ray.exceptions.RayActorError:
                    pass  # still down: the run below fails too and is counted there
            payload = [((self._id, i), *jobs[i]) for i in envs]
            refs[actor] = self.executor.actors[actor].run.remote(payload)
        for actor, ref in refs.items():
            try:
                outcomes = _get(ref, timeout=self.executor.step_timeout_s)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
                if isinstance(err, ray.exceptions.GetTimeoutError):
                    ray.kill(self.executor.actors[actor], no_restart=False)  # Ray restarts it
                outcomes = [_LOST] * len(by_actor[actor])
            if any(_is_lost(o) for o in outcomes):
                self.executor.failed_calls += 1
                self._stale.add(actor)
                self._lost.update(i for i in range(self.num_envs) if self._actor_of[i] == actor)
                outcomes = [_LOST] * len(outcomes)  # a restarted actor lost every sub-env it held
            else:
                self._lost.difference_update(by_actor[actor])  # jobs that ran there were resets or live steps
            results.update(zip(by_actor[actor], outcomes))
        return results

    # -- the gymnasium API ----------------------------------------------------------------------

    def _seeds_and_mask(self, seed: Any, options: dict[str, Any] | None) -> tuple[list[Any], np.ndarray, dict | None]:
        """``reset``'s arguments as ``SyncVectorEnv`` reads them (the caller's ``options`` left unchanged)."""
        n = self.num_envs
        seeds = [None] * n if seed is None else [seed + i for i in range(n)] if isinstance(seed, int) else list(seed)
        if len(seeds) != n:
            raise ValueError(f"reset(seed=...) needs one seed per sub-env: num_envs={n}, got {len(seeds)} seeds.")
        options = dict(options) if options is not None else None
        mask = options.pop("reset_mask") if options and "reset_mask" in options else np.ones(n, dtype=np.bool_)
        if not isinstance(mask, np.ndarray) or mask.shape != (n,) or mask.dtype != np.bool_ or not mask.any():
            raise ValueError(f"options['reset_mask'] must be a numpy bool array of shape ({n},) with a True value.")
        return seeds, mask, options

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset sub-envs (all, or ``options["reset_mask"]``); seeds as ``SyncVectorEnv`` takes them."""
        seed, mask, options = self._seeds_and_mask(seed, options)
        pending = {int(i): ("reset", (seed[i], options)) for i in np.flatnonzero(mask)}
        done: dict[int, Any] = {}
        for _ in range(_RESET_ATTEMPTS):
            results = self._run(pending)
            done.update({i: r for i, r in results.items() if not _is_lost(r)})
            pending = {i: job for i, job in pending.items() if i not in done}
            if not pending:
                break
            for actor in self._stale:
                wait_for_actor(self.executor.actors[actor])
        if pending:
            raise ActorFailureError(
                f"Ray actors failed {_RESET_ATTEMPTS} times resetting sub-envs {sorted(pending)}; see the Ray logs."
            )
        self._autoreset_envs[mask] = False
        env_obs = list(self._observations) if not mask.all() else [None] * self.num_envs
        infos: dict[str, Any] = {}
        for i in sorted(done):
            env_obs[i], info = done[i]
            infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, env_obs, self._observations)
        return copy.deepcopy(self._observations), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-env (a sub-env that ended on the previous step is reset instead)."""
        actions = list(iterate(self.action_space, actions))
        jobs = {i: ("reset", (None, None)) if self._autoreset_envs[i] else ("step", a) for i, a in enumerate(actions)}
        results = self._run(jobs)
        env_obs: list[Any] = [None] * self.num_envs
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i in range(self.num_envs):
            result = results[i]
            if _is_lost(result):
                result = _lost_step(f"the Ray actor holding sub-env {i} died or hung; Ray restarts it")
            if jobs[i][0] == "reset" and len(result) == 2:
                env_obs[i], info = result
            else:
                env_obs[i], rewards[i], terminations[i], truncations[i], info = result
            infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, env_obs, self._observations)
        self._autoreset_envs = np.logical_or(terminations, truncations)
        return copy.deepcopy(self._observations), rewards, terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``sub_env.<name>(*args, **kwargs)`` on every sub-env (an attribute's value if not callable)."""
        actors = sorted(set(self._actor_of))
        refs = [self.executor.actors[a].call.remote(self._slots(a), name, args, kwargs) for a in actors]
        by_slot = {slot: value for a, ref in zip(actors, refs) for slot, value in zip(self._slots(a), _get(ref))}
        return tuple(by_slot[(self._id, i)] for i in range(self.num_envs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def render(self) -> tuple[Any, ...]:
        return self.call("render")

    def close_extras(self, **kwargs: Any) -> None:
        """Drop the sub-envs from the actors (and close an executor this env made itself)."""
        if self._owns_executor:
            self.executor.close()
            return
        for actor in sorted(set(self._actor_of)):
            try:
                ray.get(self.executor.actors[actor].drop.remote(self._id))
            except (ray.exceptions.RayActorError, IndexError):
                pass  # a dead actor holds nothing any more


class RayRewardPool:
    """Reward workers on Ray actors: ``map`` spreads items over them, retrying an item whose actor died.

    An :class:`~mathgym.rewards.workers.Executor`: pass it to
    :func:`~mathgym.rewards.workers.score_in_parallel` or
    :func:`~mathgym.rewards.workers.trl_reward_function`; each chunk of samples is scored
    on an actor (item ``i`` on actor ``i % num_actors``), which keeps its warm sandbox and
    math-verify helpers between calls, on any node of the cluster. Scoring is a pure
    function of (completion, reference), so a retried item gives the same result.

    Args:
        num_actors: Worker actors (default: one per CPU of the Ray cluster).
        max_retries: Times an item whose actor died is run again (on the restarted actor).

    Example:
        >>> from mathgym.rewards import MathVerifier, score_in_parallel
        >>> pool = RayRewardPool()  # doctest: +SKIP
        >>> score_in_parallel(MathVerifier(), ["\\\\boxed{4}"], ["4"], executor=pool)[0].score  # doctest: +SKIP
        1.0
    """

    def __init__(self, num_actors: int | None = None, max_retries: int = 3):
        self.hosts = RayExecutor(num_actors=num_actors)
        self.max_retries = max_retries

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        actors, fn_ref = self.hosts.actors, ray.put(fn)
        refs = [actors[i % len(actors)].apply.remote(fn_ref, item) for i, item in enumerate(items)]
        out = []
        for i, ref in enumerate(refs):
            for attempt in range(self.max_retries + 1):
                try:
                    out.append(_get(ref))
                    break
                except ray.exceptions.RayActorError:
                    self.hosts.failed_calls += 1
                    if attempt == self.max_retries:
                        raise ActorFailureError(f"item {i} failed {attempt + 1} times on its Ray actor; see the Ray logs.") from None
                    wait_for_actor(actors[i % len(actors)])
                    ref = actors[i % len(actors)].apply.remote(fn_ref, items[i])
        return out

    def actor_pids(self) -> list[int]:
        """Process id of each actor."""
        return self.hosts.actor_pids()

    def close(self) -> None:
        """Kill the actors; safe to call twice."""
        self.hosts.close()


def wait_for_actor(actor: Any, timeout_s: float = 60.0) -> int:
    """Block until ``actor`` answers again (after a restart); return its pid."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(actor.pid.remote(), timeout=max(1.0, deadline - time.monotonic()))
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
