"""The text-environment contract, as a base class every mathgym env builds on.

A subclass supplies the task (``_sample_task``) and judges each action
(``_judge``); this class does the bookkeeping of the contract in one place:
seeding, ``info`` keys, chat transcript, turn budget, terminated-vs-truncated,
errors for actions out of order, the refusal of actions over ``max_length`` (before any
parser reads them), and ``render()``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym

from mathgym.errors import ConfigError, EpisodeFinishedError, InvalidActionError, ResetNeededError, require_option
from mathgym.rewards.base import Status
from mathgym.spaces import DEFAULT_MAX_LENGTH, UnicodeText
from mathgym.untrusted import clean_text


@dataclass(frozen=True)
class Task:
    """One problem of an environment.

    Attributes:
        task_id: Stable identifier (same task → same id across processes).
        prompt: The text the agent first sees.
        answer: The gold answer as text (revealed only at the end of the episode).
        metadata: Anything the env needs to judge the task (tests, grid, target...).
    """

    task_id: str
    prompt: str
    answer: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """What the env makes of one action.

    Attributes:
        reward: Reward for this step.
        status: Outcome from the closed :class:`~mathgym.rewards.base.Status` set.
        done: True when the task is solved or definitively failed (``terminated``).
        observation: The env's reply (next observation); ignored when ``done``.
        reward_breakdown: Reward components (component name → value).
        correct: Whether the task counts as solved (meaningful when ``done``).
        info: Extra keys merged into the step's ``info``.
    """

    reward: float
    status: Status
    done: bool
    observation: str = ""
    reward_breakdown: Mapping[str, float] = field(default_factory=dict)
    correct: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


class ScoresAhead:
    """Results scored ahead of a step (:mod:`mathgym.envs.ahead`), kept until the step takes them.

    :class:`TextEnv` has it; a wrapper that scores actions itself can too
    (:class:`~mathgym.envs.wrappers.RewardModelBonus`): it adds ``requests_ahead(action)`` and
    scores through :meth:`_scored`.
    """

    _scored_ahead: list[tuple[Any, Any, Any]]

    def keep_scored_ahead(self, results: Sequence[tuple[Any, Any, Any]]) -> None:
        """Keep results scored ahead for the next ``step``: ``(scorer, request, result)`` triples."""
        self._scored_ahead = list(results)

    def _forget_scored_ahead(self) -> None:
        self._scored_ahead = []

    def _scored(self, scorer: Any, request: Any, score: Callable[[], Any]) -> Any:
        """The result of ``request`` to ``scorer``: scored ahead, else ``score()`` now. A result
        scored ahead that is an exception is raised, as the call itself would have raised it."""
        kept_results = getattr(self, "_scored_ahead", [])
        for k, (kept_scorer, kept_request, kept) in enumerate(kept_results):
            if kept_scorer is scorer and kept_request == request:
                del kept_results[k]
                if isinstance(kept, BaseException):
                    raise kept
                return kept
        return score()


def copy_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of a chat the caller may change freely: each message's dict copied, and anything
    in it that is not a string (a tool call, a list of parts) copied deeply.

    Example:
        >>> chat = [{"role": "user", "content": "hi"}]
        >>> copied = copy_messages(chat)
        >>> copied[0]["content"] = "changed"
        >>> chat[0]["content"]
        'hi'
    """
    return [
        dict(message) if all(type(v) is str for v in message.values()) else copy.deepcopy(message)
        for message in messages
    ]


def fit_observation(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: a longer one keeps its start and its end around a note
    of how much was cut. A reply that quotes the model (MathStep-v0's steps so far) can outgrow
    the observation space, whose bound ``AsyncVectorEnv``'s shared memory holds and no more.

    Example:
        >>> fit_observation("abcdefghij" * 10, 40)
        'abcde\\n[... 90 characters cut ...]\\nfghij'
    """
    if len(text) <= limit:
        return text
    longest_note = len(f"\n[... {len(text)} characters cut ...]\n")  # the count cut has no more digits
    if longest_note >= limit:
        return text[:limit]
    kept = limit - longest_note
    head, tail = (kept + 1) // 2, kept // 2
    return text[:head] + f"\n[... {len(text) - kept} characters cut ...]\n" + text[len(text) - tail :]


class TextEnv(ScoresAhead, gym.Env[str, str]):
    """Base class of mathgym's text environments (``gymnasium.Env[str, str]``).

    Subclasses implement :meth:`_sample_task` and :meth:`_judge`, and may override
    :meth:`_final_judgement` (what happens when the turn budget runs out).

    Args:
        max_turns: Number of ``step`` calls before the episode is truncated.
        max_length: Longest observation or action accepted by the spaces. A longer action is
            refused before the env reads it: reward 0, ``status="too_long"``, and the episode
            ends (``terminated``), whatever the env and the turn. The bound is there against
            abuse, not against real answers: the default (:data:`~mathgym.spaces.DEFAULT_MAX_LENGTH`)
            holds a 32k-token chain of thought.
        system_prompt: System message placed before the task in ``info["messages"]``
            (``None`` or ``""`` for none).
        render_mode: ``None`` or ``"ansi"``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}
    default_system_prompt: ClassVar[str | None] = None
    #: Constructor options that change only how actions are scored: never the tasks, the
    #: observations or the expert's actions. The tiny model's warm start (SFT on the expert's
    #: demonstrations) leaves them out of its env and its cache key, so e.g. a process reward
    #: model given to a run neither scores the demonstrations nor makes a second warm start.
    reward_only_options: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        *,
        max_turns: int = 1,
        max_length: int = DEFAULT_MAX_LENGTH,
        system_prompt: str | None = None,
        render_mode: str | None = None,
    ):
        if int(max_turns) < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        require_option("render_mode", render_mode, (None, "ansi"))
        self.max_turns = int(max_turns)
        self.max_length = int(max_length)
        self.system_prompt = self.default_system_prompt if system_prompt is None else system_prompt
        self.render_mode = render_mode
        self.observation_space = UnicodeText(self.max_length)
        self.action_space = UnicodeText(self.max_length)
        self._task: Task | None = None
        self._turn = 0
        self._finished = False
        self._messages: list[dict[str, str]] = []
        self._scored_ahead: list[tuple[Any, Any, Any]] = []

    # -- what a subclass provides -------------------------------------------------

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        """Pick the next task using ``self.np_random`` (or ``options``)."""
        raise NotImplementedError

    def _task_index(self, options: Mapping[str, Any], count: int) -> int:
        """For a data set of ``count`` tasks: the one ``options["task_index"]`` picks, else one
        drawn by the seed (``self.np_random``).

        Raises:
            ConfigError: ``task_index`` is not an integer in ``[0, count)``.
        """
        index = options.get("task_index")
        if index is None:
            return int(self.np_random.integers(count))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise ConfigError(f"options['task_index']={index!r} is not an index of the {count} tasks: choose an integer from 0 to {count - 1}.")
        return index

    def _judge(self, action: str) -> Judgement:
        """Score ``action`` against ``self.task`` and say whether the episode is over."""
        raise NotImplementedError

    def _final_judgement(self, last: Judgement) -> Judgement:
        """Adjust the last step's judgement when the turn budget runs out (default: keep it)."""
        return last

    def _too_long(self, action: str) -> Judgement:
        """The verdict on an action longer than ``max_length``: refused unread, the episode ends."""
        feedback = f"the reply has {len(action)} characters; this env accepts at most max_length={self.max_length}"
        return Judgement(0.0, Status.TOO_LONG, True, reward_breakdown={"reward": 0.0}, info={"feedback": feedback})

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        """What judging ``action`` will ask of scorers that score in batches (see
        :meth:`requests_ahead`): ``(scorer, request)`` pairs; default none."""
        return []

    # -- one batch for a vector env's step (mathgym.envs.ahead) -------------------------

    def requests_ahead(self, action: Any) -> list[tuple[Any, Any]]:
        """The scoring requests ``step(action)`` will make, for a vector env to score them together.

        Each pair is a scorer with ``score_ahead(requests) -> results`` (and optionally
        ``batch_key()``: scorers with equal keys score each other's requests) and one request
        (anything comparable with ``==``).
        :func:`mathgym.envs.ahead.score_step_ahead` scores the requests of every env of a step
        in one call per scorer and hands each env its results (:meth:`keep_scored_ahead`); the
        env's own judging then takes them (:meth:`ScoresAhead._scored`) instead of scoring one by one. A
        request the env does not make in the end costs a little compute and changes nothing.
        """
        if self._task is None or self._finished or not isinstance(action, str) or len(action) > self.max_length:
            return []
        return self._requests_ahead(action)

    def answer_bounds(self) -> dict[tuple[str, ...], int]:
        """The longest action each part of this env reads, by the path of the constructor option
        that sets it: ``{("max_length",): self.max_length}``. An env that hands actions to envs
        of its own (MultiTask-v0) names theirs, so a trainer can say which bound to raise.

        Example:
            >>> TextEnv(max_length=100).answer_bounds()
            {('max_length',): 100}
        """
        return {("max_length",): self.max_length}

    # -- the contract ---------------------------------------------------------------

    @property
    def task(self) -> Task:
        """The current task; raises :class:`ResetNeededError` before ``reset()``."""
        if self._task is None:
            raise ResetNeededError(f"{type(self).__name__}: call reset() before step().")
        return self._task

    @property
    def turn(self) -> int:
        """Number of steps taken in the current episode."""
        return self._turn

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._task = self._sample_task(dict(options or {}))
        self._turn = 0
        self._forget_scored_ahead()
        self._finished = False
        self._messages = []
        if self.system_prompt:
            self._messages.append({"role": "system", "content": self.system_prompt})
        prompt = clean_text(self._task.prompt)
        self._messages.append({"role": "user", "content": prompt})
        info = {"task_id": self._task.task_id, "messages": copy_messages(self._messages), "max_turns": self.max_turns, "turn": 0}
        return prompt, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._task is None:
            raise ResetNeededError(f"{type(self).__name__}: call reset() before step().")
        if self._finished:
            raise EpisodeFinishedError(f"{type(self).__name__}: the episode has ended; call reset() to start a new one.")
        if not isinstance(action, str):
            raise InvalidActionError(
                f"{type(self).__name__}.step() takes the model's text as a str, got {type(action).__name__}."
            )
        self._turn += 1
        self._messages.append({"role": "assistant", "content": action})
        try:
            judgement = self._too_long(action) if len(action) > self.max_length else self._judge(action)
        finally:
            self._forget_scored_ahead()  # kept for this step only
        terminated = bool(judgement.done)
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            judgement = self._final_judgement(judgement)
        self._finished = terminated or truncated
        # Observations carry text the model's code wrote: valid UTF-8, escape sequences shown, not obeyed.
        observation = "" if self._finished else fit_observation(clean_text(judgement.observation), self.max_length)
        if not self._finished:
            self._messages.append({"role": "user", "content": observation})
        info: dict[str, Any] = {
            "task_id": self._task.task_id,
            "turn": self._turn,
            "max_turns": self.max_turns,
            "status": judgement.status,
            "reward_breakdown": dict(judgement.reward_breakdown) or {"reward": float(judgement.reward)},
            "messages": copy_messages(self._messages),
            **judgement.info,
        }
        if self._finished:
            info["answer"] = self._task.answer
            info["correct"] = bool(judgement.correct)
        return observation, float(judgement.reward), terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        lines = [f"[{m['role']}]\n{m['content']}" for m in self._messages]
        if self._finished and self._task is not None:
            lines.append(f"[answer]\n{self._task.answer}")
        return "\n\n".join(lines) + "\n"
