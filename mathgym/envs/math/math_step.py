"""MathStep-v0: step-level math (one reasoning step per action) with a pluggable process reward.

In the style of OpenR's step-level environments: the observation is the problem plus the
steps written so far, each action adds one step, and the episode ends at a step that
states a final answer (or after ``max_steps``). Every step is scored by a process reward
function ``(problem, steps) -> float``; the final step also gets the outcome reward from
MathReason-v0's verifier. A trained process reward model plugs in as that function.

A process reward shapes; it must not pay more than solving. A step that repeats an earlier
one (up to case, spacing and closing punctuation) or holds no letter or digit earns
nothing, the episode's process rewards add up to at most ``process_cap * outcome_weight``
(half of a right answer by default), and the last step of an episode cut off by the budget
gets no process reward.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from mathgym.core import Judgement, Task
from mathgym.envs.math.math_reason import MathReasonEnv
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import extract_answer
from mathgym.rewards.math import MathVerifier, parse_number
from mathgym.rewards.prm import process_reward_from_path
from mathgym.spaces import DEFAULT_MAX_LENGTH

#: ``(problem, steps) -> reward of the last step``; must be picklable (a module-level function
#: or an object with ``__call__``) for vector envs.
ProcessReward = Callable[[str, Sequence[str]], float]

DEFAULT_SYSTEM_PROMPT = "Solve the problem one step at a time. Write one step per turn; put the final answer in \\boxed{}."
STEP_INSTRUCTION = "Write one step of the solution per turn; the step with the final answer in \\boxed{} ends it."
#: ``a op b = c``. Linear: a claim starts only where a run of digits starts, and no quantifier
#: gives back what it took (possessive), so a run of digits is read once, not once per digit.
_NUMBER = r"(-?\d++(?:\.\d++)?+)"
_EQUATION = re.compile(rf"(?<!\d){_NUMBER}\s*+([-+*/×x÷])\s*+{_NUMBER}\s*+=\s*+{_NUMBER}")


def arithmetic_consistency(problem: str, steps: Sequence[str]) -> float:
    """A simple rule-based process reward: the share of ``a op b = c`` claims in the last step that hold.

    Steps without such a claim score 0. An example of the ``ProcessReward`` signature; a
    trained process reward model replaces it.

    Example:
        >>> arithmetic_consistency("", ["3 + 4 = 7 and 2 * 5 = 11"])
        0.5
    """
    claims = _EQUATION.findall(steps[-1][-4000:]) if steps else []
    if not claims:
        return 0.0
    ok = 0
    for a, op, b, c in claims:
        x, y, z = parse_number(a), parse_number(b), parse_number(c)
        if x is None or y is None or z is None:
            continue
        value = {"+": x + y, "-": x - y, "*": x * y, "×": x * y, "x": x * y}.get(op)
        if value is None:
            value = x / y if y else None
        ok += value is not None and Fraction(value) == z
    return ok / len(claims)


class MathStepEnv(MathReasonEnv):
    """Solve a math problem one step per turn; per-step process reward, outcome reward at the end.

    Problems, data options and the answer verifier are MathReason-v0's.

    Args:
        difficulty: Generator level, 0 to 4.
        dataset: A JSONL path or ``hf:NAME[:SUBSET]``; ``None`` uses the generator.
        split: ``"train"`` or ``"test"``.
        columns: Column mapping for other data formats.
        max_steps: Steps allowed before the episode is truncated (the turn budget).
        process_reward: ``(problem, steps) -> float`` scoring the newest step; a string is the
            directory (or hub id) of a process reward model, scored through
            :func:`mathgym.rewards.prm.process_reward_from_path` (needs ``mathgym[train]``);
            ``None`` (default) gives 0 to every step, so only the outcome counts.
        process_weight: Multiplier of the process reward. ``None`` (default): ``process_cap *
            outcome_weight / max_steps``, so that a full-length solution scored 1 at every step
            just reaches the episode's process budget and a process reward scoring in ``[0, 1]``
            (a PRM's probabilities, a share of claims that hold) keeps its judgement of every
            step in the episode's reward (a weight of 1 would spend the budget at the first
            step and pay every episode alike). With ``process_only``, ``None`` is 1.
        outcome_weight: Multiplier of the outcome reward (1 for a right final answer) on the last step.
        process_cap: The episode's process rewards add up to at most ``process_cap *
            outcome_weight`` (a step past it earns only what is left), in ``[0, 1]``: with the
            default 0.5, writing steps without solving earns at most half of what a right
            answer does.
        process_only: Pay the process reward alone: no outcome reward and no cap. The policy is then
            trained to please the process reward, right answer or not (reward hacking: a PRM's
            blind spots become the policy's target); keep the default (process + verified outcome)
            unless you measure the outcome separately.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        verifier: The answer checker.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> from mathgym.envs.math.math_step import arithmetic_consistency
        >>> env = gym.make("MathStep-v0", process_reward=arithmetic_consistency)
    """

    default_system_prompt = DEFAULT_SYSTEM_PROMPT
    reward_only_options = MathReasonEnv.reward_only_options | {
        "process_reward", "process_weight", "outcome_weight", "process_cap", "process_only",
    }

    def __init__(
        self,
        difficulty: int = 0,
        dataset: str | Path | None = None,
        split: str = "train",
        columns: Mapping[str, str] | None = None,
        max_steps: int = 8,
        process_reward: ProcessReward | str | Path | None = None,
        process_weight: float | None = None,
        outcome_weight: float = 1.0,
        process_cap: float = 0.5,
        process_only: bool = False,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        verifier: MathVerifier | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(difficulty, dataset, split, columns, system_prompt, max_length, verifier, render_mode)
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigError(f"max_steps={max_steps!r} must be a positive integer.")
        self.max_turns = self.max_steps = max_steps
        if isinstance(process_reward, (str, Path)):
            process_reward = process_reward_from_path(process_reward)
        self.process_reward = process_reward
        self.process_only = bool(process_only)
        if not 0.0 <= float(process_cap) <= 1.0:
            raise ConfigError(f"process_cap={process_cap!r} must be between 0 and 1 (a share of outcome_weight).")
        self.outcome_weight, self.process_cap = float(outcome_weight), float(process_cap)
        if process_weight is None:
            process_weight = 1.0 if self.process_only else self.process_cap * self.outcome_weight / max_steps
        self.process_weight = float(process_weight)
        self._steps: list[str] = []
        self._seen: set[str] = set()
        self._process_total = 0.0

    def _prompt(self, question: str) -> str:  # type: ignore[override]
        return f"{question}\n{STEP_INSTRUCTION}"

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        task = super()._sample_task(options)
        self._steps, self._seen, self._process_total = [], set(), 0.0
        question = task.prompt[: -len(STEP_INSTRUCTION) - 1]
        return Task(task.task_id, task.prompt, task.answer, {**task.metadata, "question": question})

    def _observation(self) -> str:
        lines = [self.task.metadata["question"], "", "Steps so far:"]
        lines += [f"Step {i}: {step}" for i, step in enumerate(self._steps, 1)]
        left = self.max_steps - len(self._steps)
        lines += ["", f"Write step {len(self._steps) + 1} ({left} left), or the final answer in \\boxed{{}}."]
        return "\n".join(lines)

    def _judge(self, action: str) -> Judgement:
        self._steps.append(action.strip())
        info: dict[str, Any] = {"step": len(self._steps)}
        process, status = self._process(info)
        if extract_answer(action, self.verifier.formats) is None:
            breakdown = {"process": process, "outcome": 0.0}
            return Judgement(process, status or Status.IN_PROGRESS, False, self._observation(), breakdown, info=info)
        request = (action, self.task.answer)
        result = self._scored(self.verifier, request, lambda: self.verifier.score(*request))
        outcome = 0.0 if self.process_only else self.outcome_weight * result.score
        info["extracted_answer"] = result.details.get("extracted")
        breakdown = {"process": process, "outcome": outcome}
        return Judgement(process + outcome, status or result.status, True, "", breakdown, result.score >= 1.0, info)

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        """The process reward's request for this step (where it scores in batches), and the
        verifier's pair where the step gives a final answer."""
        requests: list[tuple[Any, Any]] = []
        step = action.strip()
        if callable(getattr(self.process_reward, "score_ahead", None)) and any(c.isalnum() for c in step):
            requests.append((self.process_reward, (self.task.metadata["question"], (*self._steps, step))))
        if extract_answer(action, self.verifier.formats) is not None:
            requests.append((self.verifier, (action, self.task.answer)))
        return requests

    def _process(self, info: dict[str, Any]) -> tuple[float, Status | None]:
        """The newest step's process reward (and ``Status.ERROR`` when the process reward raised).

        Nothing for a repeated or content-free step, and never more than what is left of the
        episode's budget of ``process_cap * outcome_weight``; the reason goes in
        ``info["process_zeroed"]``.
        """
        if self.process_reward is None:
            return 0.0, None
        step = self._steps[-1]
        key = "".join(step.casefold().split()).rstrip(".!;,")
        if not any(c.isalnum() for c in step):
            info["process_zeroed"] = "the step holds no letter or digit"
            return 0.0, None
        if key in self._seen:
            info["process_zeroed"] = "the step repeats an earlier one"
            return 0.0, None
        self._seen.add(key)
        question, steps = self.task.metadata["question"], tuple(self._steps)
        try:
            score = self._scored(self.process_reward, (question, steps), lambda: self.process_reward(question, steps))
            process = self.process_weight * float(score)
        except Exception as err:  # a crashing reward model is infrastructure, not the policy's fault
            info["process_reward_error"] = repr(err)[:300]
            return 0.0, Status.ERROR
        if not math.isfinite(process):
            info["process_zeroed"] = f"the process reward is {process}"
            return 0.0, None
        left = math.inf if self.process_only else self.process_cap * self.outcome_weight - self._process_total
        if process > left:
            info["process_zeroed"] = "the episode's process budget (process_cap * outcome_weight) is spent"
            process = max(left, 0.0)
        self._process_total += process
        return process, None

    def _final_judgement(self, last: Judgement) -> Judgement:
        """Out of steps without a final answer: ``unparseable``, and the last step's process reward is withdrawn."""
        status = last.status if last.status is Status.ERROR else Status.UNPARSEABLE
        info = {**last.info, "feedback": f"no final answer within {self.max_steps} steps"}
        breakdown = {"process": 0.0, "outcome": 0.0}
        return Judgement(0.0, status, False, "", breakdown, False, info)

    def expert_action(self) -> str | None:
        """The next step of the worked solution (generator tasks; data sets with solutions)."""
        solution = self.task.metadata.get("solution")
        if not solution:
            return None
        steps = solution_steps(solution, self.task.answer)
        return steps[min(len(self._steps), len(steps) - 1)]


def solution_steps(solution: str, answer: str) -> list[str]:
    """Split a worked solution into steps (lines, else sentences); the last one holds ``\\boxed{answer}``."""
    text = re.sub(r"####\s*(.+?)\s*$", lambda m: f"\\boxed{{{m.group(1)}}}", solution.strip())
    parts = [p.strip() for p in text.splitlines() if p.strip()]
    if len(parts) == 1:
        parts = [p.strip() for p in re.split(r"(?<=[.;])\s+", parts[0]) if p.strip()]
    if "\\boxed" not in parts[-1]:
        parts.append(f"The answer is \\boxed{{{answer}}}.")
    return parts
