"""The reward-worker interface, executors that run it in parallel, and a TRL adapter.

A reward worker scores a batch of completions against per-sample references (a gold
answer, a list of tests, or nothing) and returns one :class:`RewardResult` per sample::

    results = MathVerifier().score_batch(["... \\\\boxed{4}"], ["4"])

:func:`score_in_parallel` splits a batch across an executor (inline, threads or
processes); :func:`trl_reward_function` turns any worker into the reward function TRL's
``GRPOTrainer`` expects: ``f(prompts, completions, **columns) -> list[float | None]``.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Executor as FuturesExecutor
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, runtime_checkable

from mathgym.errors import ConfigError
from mathgym.rewards.base import RewardResult

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class RewardWorker(Protocol):
    """Anything that scores a batch: ``name`` plus ``score`` and ``score_batch``.

    ``references[i]`` is what sample ``i`` is checked against (its type is the worker's
    business: a gold answer string for :class:`~mathgym.rewards.math.MathVerifier`, a
    sequence of :class:`~mathgym.rewards.sandbox.TestCase` for
    :class:`~mathgym.rewards.code.CodeTestsReward`, ignored by format rewards).
    """

    name: str

    def score(self, completion: str, reference: Any) -> RewardResult: ...

    def score_batch(self, completions: Sequence[str], references: Sequence[Any]) -> list[RewardResult]: ...


class Executor(Protocol):
    """Runs a function over items and returns the results in order."""

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


class InlineExecutor:
    """Runs everything in the calling thread."""

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return [fn(item) for item in items]

    def close(self) -> None:
        """Nothing to release."""


class _FuturesExecutor:
    _pool: FuturesExecutor

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        """Shut the pool down; safe to call twice."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ThreadExecutor(_FuturesExecutor):
    """A thread pool: right for workers that wait on processes (math-verify, the sandbox)."""

    def __init__(self, max_workers: int = 4):
        self._pool = ThreadPoolExecutor(max_workers)


class ProcessExecutor(_FuturesExecutor):
    """A process pool; the worker and references must pickle.

    Args:
        max_workers: Processes.
        start_method: ``"spawn"`` (default: safe in a process with threads), ``"forkserver"`` or ``"fork"``.
    """

    def __init__(self, max_workers: int = 2, start_method: str = "spawn"):
        if start_method not in multiprocessing.get_all_start_methods():
            raise ConfigError(f"start_method={start_method!r} is not available; choose from {multiprocessing.get_all_start_methods()}.")
        self._pool = ProcessPoolExecutor(max_workers, mp_context=multiprocessing.get_context(start_method))


def _score_chunk(job: tuple[RewardWorker, Sequence[str], Sequence[Any]]) -> list[RewardResult]:
    worker, completions, references = job
    return worker.score_batch(completions, references)


def score_in_parallel(
    worker: RewardWorker,
    completions: Sequence[str],
    references: Sequence[Any] | None = None,
    *,
    executor: Executor | None = None,
    chunk_size: int = 16,
) -> list[RewardResult]:
    """Score a batch with ``worker``, in chunks spread over ``executor``.

    Args:
        worker: Any :class:`RewardWorker`.
        completions: Model outputs.
        references: One per completion (``None``: the worker needs none).
        executor: Where chunks run; default inline.
        chunk_size: Samples per task handed to the executor.

    Returns:
        One result per completion, in order.
    """
    if references is None:
        references = [None] * len(completions)
    if len(references) != len(completions):
        raise ConfigError(f"got {len(completions)} completions but {len(references)} references.")
    if chunk_size < 1:
        raise ConfigError(f"chunk_size={chunk_size!r} must be a positive integer.")
    jobs = [(worker, completions[i : i + chunk_size], references[i : i + chunk_size]) for i in range(0, len(completions), chunk_size)]
    chunks = (executor or InlineExecutor()).map(_score_chunk, jobs)
    return [result for chunk in chunks for result in chunk]


def completion_text(completion: Any) -> str:
    """The text of a completion as TRL passes it: a ``str`` or a list of chat messages.

    For a message list, the contents of the assistant messages are joined (a multi-part
    content list contributes its ``text`` parts). Anything else becomes ``""`` (scored
    as unparseable rather than crashing the trainer).
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return ""
    texts = []
    for message in completion:
        if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content", "")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(content if isinstance(content, str) else "")
    return "\n".join(texts)


def trl_reward_function(
    worker: RewardWorker | None = None,
    *,
    reference_column: str | None = "answer",
    infra_value: float | None = None,
    executor: Executor | None = None,
) -> Callable[..., list[float | None]]:
    """Wrap a worker as a TRL ``GRPOTrainer`` reward function.

    Without a ``worker``, it is ``MathVerifier(answer_extraction="lenient")``: a TRL data
    set's prompts are someone else's, so answers are read the way math-verify reads them,
    marked or not (pass ``MathVerifier()`` for strict mode, with prompts that ask for a box).
    A :class:`~mathgym.rewards.math.MathVerifier` reads each reference as every other entry
    point does (:func:`~mathgym.rewards.math_gold.gold_forms`: MATH's bare ``3\\sqrt{13}`` as
    LaTeX, a list of forms matched by any), so the verdict is the math envs' on the same pair.

    The returned ``f(prompts, completions, **columns)`` reads each sample's reference
    from the data set column ``reference_column`` (TRL passes every extra column as a
    keyword argument) and returns one float per completion. Infrastructure failures
    (``error``, ``sandbox_error``) return ``infra_value``: ``None`` by default, which TRL
    treats as "no reward from this function" instead of a wrong answer.

    The function is named after the worker (TRL logs ``rewards/<name>``) and keeps the
    last batch's full results in ``f.last_results`` for logging statuses.

    Example:
        >>> from mathgym.rewards import MathVerifier
        >>> reward = trl_reward_function(MathVerifier(), reference_column="answer")
        >>> reward(prompts=["2+2?"] * 2, completions=["\\\\boxed{4}", "It is $4$."], answer=["4", "4"])
        [1.0, 0.0]
        >>> lenient = trl_reward_function(reference_column="answer")
        >>> lenient(prompts=["2+2?"] * 2, completions=["\\\\boxed{4}", "It is $4$."], answer=["4", "4"])
        [1.0, 1.0]
    """
    if worker is None:
        from mathgym.rewards.math import MathVerifier  # noqa: PLC0415 - the default worker only

        worker = MathVerifier(answer_extraction="lenient")

    def reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **columns: Any) -> list[float | None]:
        texts = [completion_text(c) for c in completions]
        references: Sequence[Any] | None = None
        if reference_column is not None:
            if reference_column not in columns:
                raise ConfigError(f"the data set has no column {reference_column!r} (columns passed: {sorted(columns)}); set reference_column.")
            references = list(columns[reference_column])
        results = score_in_parallel(worker, texts, references, executor=executor)
        reward.last_results = results  # type: ignore[attr-defined]
        return [infra_value if r.status.is_infra_failure else r.score for r in results]

    reward.__name__ = reward.__qualname__ = getattr(worker, "name", type(worker).__name__)
    reward.last_results = []  # type: ignore[attr-defined]
    return reward
