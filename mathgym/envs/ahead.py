"""One scoring batch for a vector env's step.

A synchronous vector env steps its envs one after another, so an env whose reward comes from a
model (a process reward model, a reward model) would run that model once per env: 64 forward
passes of one sequence where one pass of 64 would do. :func:`score_step_ahead`, called with the
actions just before ``vector_env.step(actions)``, asks each env what it will score
(:meth:`mathgym.core.TextEnv.requests_ahead`), scores each scorer's requests in one call, and
hands every env its results; each env's ``step`` then takes them instead of scoring alone.

Nothing else changes: the envs still step, through their wrappers, exactly as before. A result
is keyed by the scorer and the request itself, so an env whose step asks something else (a
wrapper changed the action) scores it alone, as it would have. A batch that fails is dropped:
each env then scores its own request and meets the error itself (as an infrastructure status).

Where the envs do not live in this process (gymnasium's ``AsyncVectorEnv``), nothing is scored
ahead; the Ray executor's actors score the steps each of them holds (:func:`score_ahead`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym


def batch_key(scorer: Any) -> Hashable:
    """Scorers with the same key score each other's requests: ``scorer.batch_key()`` where it has
    one (e.g. two process rewards over the same loaded model and rule, two LLM judges of one
    endpoint), else the scorer itself."""
    key = getattr(scorer, "batch_key", None)
    return ("key", key()) if callable(key) else ("id", id(scorer))


def _score(scorer: Any, requests: list[Any]) -> list[Any]:
    """``scorer.score_ahead(requests)``; a reward worker without it (``score_batch(completions,
    references)``) takes ``(completion, reference)`` requests."""
    if callable(getattr(scorer, "score_ahead", None)):
        return list(scorer.score_ahead(requests))
    return list(scorer.score_batch([c for c, _ in requests], [r for _, r in requests]))


def _layers(env: gym.Env) -> list[Any]:
    """The layers of ``env`` (its wrappers, outermost first, and the env) that score ahead."""
    layers = []
    while True:
        if callable(getattr(type(env), "requests_ahead", None)):  # its own, not forwarded by a wrapper
            layers.append(env)
        if not isinstance(env, gym.Wrapper):
            return layers
        env = env.env


def score_step_ahead(envs: gym.vector.VectorEnv, actions: Sequence[Any], active: Sequence[int]) -> int:
    """Score together what the ``active`` envs of ``envs`` will score when stepped with ``actions``.

    Args:
        envs: A vector env; only a synchronous one (its envs in ``envs.envs``) is scored ahead.
        actions: One action per env, as ``envs.step`` will get them.
        active: The envs that will step their action (the others are being reset).

    Returns:
        How many requests were scored ahead (0 where there is nothing to batch).
    """
    members = getattr(envs, "envs", None)
    if not isinstance(members, (list, tuple)):
        return 0
    return score_ahead([(members[i], actions[i]) for i in active])


def score_ahead(steps: Sequence[tuple[gym.Env, Any]]) -> int:
    """Score together what each ``(env, action)`` step will score, and hand each env its results.

    Returns:
        How many requests were scored ahead.
    """
    groups: dict[Hashable, list[tuple[Any, Any, Any]]] = {}
    for env, action in steps:
        for layer in _layers(env):
            try:
                asked = list(layer.requests_ahead(action))
            except Exception:  # noqa: BLE001 - the step itself scores alone and meets the error, if it is one
                continue
            for scorer, request in asked:
                groups.setdefault(batch_key(scorer), []).append((layer, scorer, request))
    kept: dict[int, tuple[Any, list[tuple[Any, Any, Any]]]] = {}
    for items in groups.values():
        if len(items) < 2:  # one request: nothing to gain
            continue
        try:
            results = _score(items[0][1], [request for _, _, request in items])
        except Exception:  # noqa: BLE001 - each env then scores alone and meets the error itself
            continue
        if len(results) != len(items):
            continue
        for (env, scorer, request), result in zip(items, results):
            kept.setdefault(id(env), (env, []))[1].append((scorer, request, result))
    for env, results in kept.values():
        env.keep_scored_ahead(results)
    return sum(len(results) for _, results in kept.values())


class SideBySide:
    """A scorer that calls ``function(*request)`` for a step's requests in threads, up to
    ``width()`` at once: for work that waits on other processes (the sandbox's warm workers).

    Each result is what the call returned, or the exception it raised (the env's own call then
    raises it again).
    """

    def __init__(self, function: Callable[..., Any], width: Callable[[], int]):
        self.function, self.width = function, width

    def score_ahead(self, requests: Sequence[tuple[Any, ...]]) -> list[Any]:
        def run(request: tuple[Any, ...]) -> Any:
            try:
                return self.function(*request)
            except Exception as err:  # noqa: BLE001 - handed to the env, which raises it in its own step
                return err

        with ThreadPoolExecutor(max(1, min(self.width(), len(requests)))) as threads:
            return list(threads.map(run, requests))


def sandbox_width() -> int:
    """How many sandbox jobs run at once in this process: its sandbox's warm workers."""
    from mathgym.rewards.sandbox import default_sandbox  # noqa: PLC0415 - starts workers lazily

    return default_sandbox().workers


def sandbox_call(method: str, args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> Any:
    """``default_sandbox().<method>(*args, **dict(kwargs))``: one sandbox job, as a request of :data:`SANDBOX_JOBS`."""
    from mathgym.rewards.sandbox import default_sandbox  # noqa: PLC0415 - starts workers lazily

    return getattr(default_sandbox(), method)(*args, **dict(kwargs))


#: A step's sandbox jobs side by side: a request is :func:`sandbox_call`'s arguments.
SANDBOX_JOBS = SideBySide(lambda *request: sandbox_call(*request), sandbox_width)
