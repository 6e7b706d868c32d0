"""Solutions as steps on any env with a verifiable answer: the env's tasks and verdicts, and a policy writing steps.

What a step is depends on the env. On a step-level env (more than one turn, such as
MathStep-v0) a step is one action. On a single-turn env (MathReason-v0) a step is a piece
of the one answer that ends at a line break or at the end of a sentence (``". "`` or
``"; "``): the pieces keep their separators, so that the answer is their concatenation,
and a policy continues a prefix exactly where it stopped. Labelled rows and the scores a
PRM gives hold the pieces stripped.

The verdict on a solution is always the env's own: :class:`EnvSteps` resets the env with
the task's seed and plays the steps (or the joined text) into it, and reads
``info["correct"]`` and ``info["answer"]`` at the end. A solution that runs out of steps
before stating an answer is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.algos.step_labels import StepTask
from mathgym.rewards.extract import extract_answer


#: Where a step of a single-turn answer ends: after a line break, or after ". " / "; ".
_STEP_END = re.compile(r"(?<=\n)|(?<=[.;] )")
#: Most steps of a single-turn answer (the pieces past it are dropped).
SINGLE_TURN_MAX_STEPS = 16
#: What ends a proposed step of a single-turn answer (the stop strings of its generation).
STEP_STOPS = ("\n", ". ", "; ")


def split_steps(text: str) -> list[str]:
    """A single-turn answer's steps, separators kept (whitespace between steps goes with the step before).

    Example:
        >>> split_steps("2 * 3 = 6; 6 + 1 = 7. \\\\boxed{7}")
        ['2 * 3 = 6; ', '6 + 1 = 7. ', '\\\\boxed{7}']
    """
    steps: list[str] = []
    for piece in _STEP_END.split(text):
        if piece.strip() or not steps:
            steps.append(piece)
        else:
            steps[-1] += piece
    return [s for s in steps if s.strip()]


def has_answer(step: str) -> bool:
    """Whether ``step`` states a final answer (which ends a solution)."""
    return extract_answer(step) is not None


class EnvSteps:
    """An env's tasks as :class:`StepTask` and its verdict on whole solutions.

    Args:
        env_id: Any registered env whose episodes end with ``info["correct"]``.
        env_kwargs: Its options.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None):
        self.env = gym.make(env_id, **dict(env_kwargs or {}))
        _, info = self.env.reset(seed=0)
        #: A step is an action (more than one turn), else a piece of the one answer.
        self.multi_turn = int(info.get("max_turns", 1)) > 1

    def close(self) -> None:
        self.env.close()

    def task(self, seed: int) -> StepTask:
        """The task of ``seed``."""
        obs, info = self.env.reset(seed=seed)
        messages = [dict(m) for m in info.get("messages", [])]
        users = [m["content"] for m in messages if m.get("role") == "user"]
        max_steps = int(info.get("max_turns", 1)) if self.multi_turn else SINGLE_TURN_MAX_STEPS
        return StepTask(seed, users[-1] if users else str(obs), messages, str(info.get("task_id", "")), max_steps)

    def check(self, task: StepTask, steps: Sequence[str]) -> tuple[bool, str | None]:
        """``(right?, gold answer)`` of a whole solution, played into a fresh episode of the task."""
        self.env.reset(seed=task.seed)
        actions = list(steps) if self.multi_turn else ["".join(steps)]
        info: dict[str, Any] = {}
        for action in actions or [""]:
            _, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                break
        else:
            return False, None
        answer = info.get("answer")
        return bool(info.get("correct", False)), None if answer is None else str(answer)

    def chat(self, task: StepTask, prefix: Sequence[str]) -> tuple[list[dict[str, str]], str]:
        """The chat a policy continues after ``prefix``, and the text its turn starts with.

        Step-level env: each step is an assistant turn followed by the env's reply (the env
        is played to get it); the next turn starts empty. Single-turn env: the prefix's pieces
        open the assistant's one turn.
        """
        if not self.multi_turn:
            return list(task.messages), "".join(prefix)
        _, info = self.env.reset(seed=task.seed)
        chat = [dict(m) for m in info.get("messages", task.messages)]
        for step in prefix:
            obs, _, terminated, truncated, _ = self.env.step(step)
            chat += [{"role": "assistant", "content": step}, {"role": "user", "content": str(obs)}]
            if terminated or truncated:
                break
        return chat, ""


class PolicyStepWriter:
    """A language model writing steps: the next step (beam search) or the rest of a solution (labels).

    Args:
        policy: The model.
        steps: The env's tasks and chat (:class:`EnvSteps`).
        temperature: Sampling temperature (``0``: greedy, the same text every time).
        max_new_tokens: Longest step (step-level env) or rest of an answer (single-turn env).
        seed: Seed of the sampling streams.
    """

    def __init__(self, policy: LLMPolicy, steps: EnvSteps, *, temperature: float = 1.0, max_new_tokens: int = 64, seed: int = 0):
        import torch

        self.policy, self.steps = policy, steps
        self.temperature, self.max_new_tokens = float(temperature), int(max_new_tokens)
        self.generator = torch.Generator().manual_seed(seed)

    def _generate(self, tasks: Sequence[StepTask], prefixes: Sequence[Sequence[str]], n: int, stop: tuple[str, ...]) -> list[list[str]]:
        prompts = []
        for task, prefix in zip(tasks, prefixes):
            chat, opening = self.steps.chat(task, prefix)
            ids = self.policy.chat.prompt_ids(chat) + (self.policy.chat.encode(opening) if opening else [])
            prompts += [ids] * n
        params = SamplingParams(self.temperature, 1.0, self.max_new_tokens, stop)
        texts = [self.policy.chat.action_text(g.token_ids) for g in self.policy.generate(prompts, params, self.generator)]
        return [texts[i * n : (i + 1) * n] for i in range(len(tasks))]

    def propose_steps(self, tasks: Sequence[StepTask], prefixes: Sequence[Sequence[str]], n: int) -> list[list[str]]:
        """``n`` candidates for the next step after each prefix."""
        if self.steps.multi_turn:  # a step is a whole action
            return [[text.strip() for text in texts] for texts in self._generate(tasks, prefixes, n, ())]
        return [[_first_step(text) for text in texts] for texts in self._generate(tasks, prefixes, n, STEP_STOPS)]

    def continue_steps(self, tasks: Sequence[StepTask], prefixes: Sequence[Sequence[str]], n: int) -> list[list[list[str]]]:
        """``n`` continuations of each prefix, each up to the step with the answer or the task's step budget."""
        if not self.steps.multi_turn:  # one call writes the rest of the answer
            return [[split_steps(t)[: task.max_steps - len(p)] for t in texts]
                    for task, p, texts in zip(tasks, prefixes, self._generate(tasks, prefixes, n, ()))]
        live = [(i, j, list(p)) for i, p in enumerate(prefixes) for j in range(n)]
        out: list[list[list[str]]] = [[[] for _ in range(n)] for _ in prefixes]
        while live:
            nexts = self.propose_steps([tasks[i] for i, _, _ in live], [p for _, _, p in live], 1)
            still = []
            for (i, j, prefix), (step,) in zip(live, nexts):
                out[i][j].append(step)
                prefix.append(step)
                if not has_answer(step) and len(prefix) < tasks[i].max_steps:
                    still.append((i, j, prefix))
            live = still
        return out


def _first_step(text: str) -> str:
    pieces = split_steps(text)
    return pieces[0] if pieces else ""
