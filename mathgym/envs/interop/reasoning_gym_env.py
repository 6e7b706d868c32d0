"""ReasoningGym-v0: every reasoning-gym task as a single-turn mathgym env.

reasoning-gym (optional extra ``mathgym[reasoning-gym]``) generates the questions and
scores answers with each task's own ``score_answer``; this module extracts the answer
from the model's text, keeps the mathgym contract, and lists the tasks.
"""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import select
import signal
import time
from collections.abc import Mapping
from typing import Any

from mathgym.core import Judgement, Task, TextEnv
from mathgym.errors import ConfigError
from mathgym.install import extra_hint, import_extra
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking, last_boxed
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = (
    "Think step by step, then give only the final answer inside <answer></answer> tags. "
    "When the question shows an example of the answer format, follow it exactly."
)
INSTALL_HINT = f"ReasoningGym-v0 needs reasoning-gym: {extra_hint('reasoning-gym')}"


def _reasoning_gym() -> Any:
    return import_extra("reasoning_gym", INSTALL_HINT)  # optional dependency, heavy import


def available_tasks() -> list[str]:
    """Names of every reasoning-gym task (``[]`` when reasoning-gym is not installed)."""
    try:
        from reasoning_gym.factory import DATASETS  # noqa: PLC0415
    except ImportError:
        return []
    return sorted(DATASETS)


@functools.lru_cache(maxsize=32)
def _dataset(task: str, seed: int, size: int, config_json: str) -> Any:
    return _reasoning_gym().create_dataset(task, seed=seed, size=size, **json.loads(config_json))


def _mapped_bytes() -> int:
    """This process's address-space size (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def score_in_child(dataset: Any, answer: str, entry: Mapping[str, Any], timeout: float, memory_mb: int = 2048) -> dict[str, Any]:
    """``dataset.score_answer(answer, entry)`` in a forked child with a deadline and a memory cap
    (``memory_mb`` above what the process already maps).

    Some scorers hand the model's text to sympy, where a hostile answer can run for hours or
    exhaust memory; the child is killed at the deadline. Returns ``{"score": float}``,
    ``{"error": message}`` (the scorer raised) or ``{"timeout": True}``.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: score, report one JSON line, exit without running the parent's cleanup
        os.close(read_end)
        try:
            # memory_mb more than the fork already maps: a caller with torch loaded maps gigabytes,
            # and a cap below that would fail every allocation (and score every answer 0).
            limit = _mapped_bytes() + memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            reply = {"score": float(dataset.score_answer(answer, entry))}
        except BaseException as err:  # noqa: BLE001 - everything is reported to the parent
            reply = {"error": repr(err)[:300]}
        os.write(write_end, json.dumps(reply).encode())
        os._exit(0)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return {"timeout": True}
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    try:
        return dict(json.loads(b"".join(chunks).decode()))
    except ValueError:
        return {"error": "the scoring process died without a result"}


def extract_tagged_answer(text: str) -> str | None:
    """In the answer after a reasoning model's thinking (none when it never closed), the last
    ``<answer>...</answer>`` (stripped), else the last ``\\boxed{}``, else ``None``."""
    text = answer_after_thinking(text) or ""
    end = text.rfind("</answer>")
    if end >= 0:
        start = text.rfind("<answer>", 0, end)
        if start >= 0:
            return text[start + len("<answer>") : end].strip()
    boxed = last_boxed(text)
    return boxed.strip() if boxed is not None else None


class ReasoningGymEnv(TextEnv):
    """A reasoning-gym task (``task=NAME``), scored by the task's own ``score_answer``.

    Reward is reasoning-gym's score in ``[0, 1]`` (``correct`` at 1, ``partial`` between,
    ``wrong`` at 0); text without an ``<answer>`` tag or ``\\boxed{}``, or with an empty one
    (unless the item's own answer is the empty text), is ``unparseable``, never scored; an
    answer that keeps the scorer busy past ``score_timeout`` is ``timeout``. An answer the
    scorer raises on (``[[[[`` where it expects an int, ``1e999999``, 5,000 nines) is
    ``wrong``, the exception in ``info["scorer_error"]``; the status is the infrastructure
    ``error`` only when the scorer also fails on the task's own reference answer (checked
    once per item; ``info["error"]`` says so). A task without a reference answer counts
    every exception as the answer's.
    ``mathgym envs`` lists the task names; so does :func:`available_tasks`.

    Args:
        task: A reasoning-gym task name, e.g. ``"gsm_symbolic"``, ``"sudoku"``.
        size: Number of items in the (procedurally generated) data set.
        dataset_seed: Seed of the data set; ``reset(seed=...)`` then picks an item.
        task_config: Extra options of the task's config (e.g. ``{"min_terms": 3}``).
        score_timeout: Seconds allowed to ``score_answer``, which then runs in a forked child
            (killed past the deadline: status ``timeout``); ``None`` scores in this process.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("ReasoningGym-v0", task="gsm_symbolic")
    """

    def __init__(
        self,
        task: str = "basic_arithmetic",
        size: int = 1000,
        dataset_seed: int = 0,
        task_config: Mapping[str, Any] | None = None,
        score_timeout: float | None = 10.0,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=1, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        _reasoning_gym()
        tasks = available_tasks()
        if task not in tasks:
            import difflib  # noqa: PLC0415

            close = difflib.get_close_matches(str(task), tasks, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"task={task!r} is not a reasoning-gym task.{hint} `mathgym envs` lists them.")
        if not isinstance(size, int) or size < 1:
            raise ConfigError(f"size={size!r} must be a positive integer.")
        if score_timeout is not None and not score_timeout > 0:
            raise ConfigError(f"score_timeout={score_timeout!r} must be a positive number of seconds or None.")
        self.task_name, self.size, self.dataset_seed = task, size, int(dataset_seed)
        self.score_timeout = score_timeout
        self._reference_checks: dict[int, str] = {}
        try:
            self._config_json = json.dumps(dict(task_config or {}), sort_keys=True)
        except TypeError as err:
            raise ConfigError(f"task_config must be JSON-like (numbers, strings, lists, dicts): {err}") from None

    @property
    def num_tasks(self) -> int:
        """Number of items in the data set."""
        return self.size

    @property
    def dataset(self) -> Any:
        """The reasoning-gym data set (built on first use, cached per process)."""
        try:
            return _dataset(self.task_name, self.dataset_seed, self.size, self._config_json)
        except ConfigError:
            raise
        except Exception as err:  # reasoning-gym validates its config with asserts
            raise ConfigError(f"reasoning-gym could not build task {self.task_name!r} with {self._config_json}: {err!r}") from None

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        index = self._task_index(options, self.size)
        entry = self.dataset[index]
        answer = entry.get("answer")
        task_id = f"rg-{self.task_name}-{self.dataset_seed}-{index}"
        return Task(task_id, str(entry["question"]), "" if answer is None else str(answer), {"entry": entry, "index": index})

    def _judge(self, action: str) -> Judgement:
        answer = extract_tagged_answer(action)
        info: dict[str, Any] = {"extracted_answer": answer, "task": self.task_name}
        # An empty answer is no answer, asked of no scorer: several of reasoning-gym's pay a format
        # credit (0.01-0.05) for any answer given, so an empty box would earn for doing nothing.
        # Only an item whose own answer is the empty text (not a missing one) is answered by nothing.
        if answer is None or (not answer and self.task.metadata["entry"].get("answer") != ""):
            return Judgement(0.0, Status.UNPARSEABLE, True, reward_breakdown={"score": 0.0}, info=info)
        reply = self._score(answer)
        if "timeout" in reply:  # the answer kept the scorer busy past the deadline: the model's doing
            return Judgement(0.0, Status.TIMEOUT, True, reward_breakdown={"score": 0.0}, info=info)
        if "error" in reply:
            info["scorer_error"] = reply["error"]
            # The scorer raised on this answer (int("[[[["), a float overflow, a 5,000-digit int):
            # the answer's doing, unless the scorer fails on the task's own answer too.
            broken = self._scorer_broken()
            if broken:
                info["error"] = broken
                return Judgement(0.0, Status.ERROR, True, reward_breakdown={"score": 0.0}, info=info)
            return Judgement(0.0, Status.WRONG, True, reward_breakdown={"score": 0.0}, info=info)
        score = reply["score"]
        if not math.isfinite(score):  # no NaN or infinity reaches a trainer
            score = 0.0
        score = min(max(score, 0.0), 1.0)
        status = Status.CORRECT if score >= 1.0 else Status.PARTIAL if score > 0 else Status.WRONG
        return Judgement(score, status, True, reward_breakdown={"score": score}, correct=score >= 1.0, info=info)

    def _scorer_broken(self) -> str:
        """Why the task's scorer fails on the task's own reference answer (``""`` when it scores
        it, or when the task has none); checked once per item."""
        entry = self.task.metadata["entry"]
        reference = entry.get("answer")
        if reference is None:
            return ""
        key = self.task.metadata["index"]
        if key not in self._reference_checks:
            reply = self._score(str(reference))
            self._reference_checks[key] = (
                "" if "score" in reply else f"the scorer fails on the reference answer too: {reply.get('error', 'timeout')}"
            )
        return self._reference_checks[key]

    def _score(self, answer: str) -> dict[str, Any]:
        entry = self.task.metadata["entry"]
        if self.score_timeout is not None and hasattr(os, "fork"):
            return score_in_child(self.dataset, answer, entry, self.score_timeout)
        try:
            return {"score": float(self.dataset.score_answer(answer, entry))}
        except Exception as err:
            return {"error": repr(err)[:300]}

    def expert_action(self) -> str | None:
        """The task's reference answer in ``<answer>`` tags (``None`` for tasks without one)."""
        return f"<answer>{self.task.answer}</answer>" if self.task.answer else None

    @classmethod
    def catalogue_listing(cls) -> str:
        """The task names, for ``mathgym envs``."""
        tasks = available_tasks()
        return f"tasks ({len(tasks)}): " + ", ".join(tasks) if tasks else f"tasks: none ({INSTALL_HINT})"
