"""MathReason-v0: single-turn math problem solving with a verified final answer."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.math.data import MathRecord, load_dataset
from mathgym.envs.math.problems import MAX_LEVEL, generate
from mathgym.errors import ConfigError, require_option
from mathgym.rewards.math import ANSWER_EXTRACTIONS, AnswerExtraction, MathVerifier, best_of_forms
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Solve the problem. Put the final answer in \\boxed{}."
INSTRUCTION = "Give the final answer in \\boxed{}."


@functools.lru_cache(maxsize=8)
def _cached_dataset(spec: str, split: str, columns: tuple[tuple[str, str], ...]) -> tuple[MathRecord, ...]:
    return tuple(load_dataset(spec, split, dict(columns) or None))


class MathReasonEnv(TextEnv):
    """Solve a math problem; reward 1 when the final ``\\boxed{}`` answer is right.

    Problems come from the built-in generator (``difficulty`` 0 to 4) or from a data set
    (``dataset``: a GSM8K/MATH JSONL path or ``hf:NAME[:SUBSET]``).

    Args:
        difficulty: Generator level, 0 (two-number addition) to 4 (word problems).
        dataset: A JSONL path or ``hf:NAME[:SUBSET]``; ``None`` uses the generator.
        split: ``"train"`` or ``"test"`` (generator splits never share a problem);
            for a hub data set, the split to load.
        columns: Column mapping for data sets in other formats
            (``{"question": ..., "answer": ...}``).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        verifier: The answer checker (default :class:`~mathgym.rewards.math.MathVerifier`).
        answer_extraction: ``"strict"`` (the default: the answer must be marked, boxed or
            one of the verifier's formats; unmarked text is ``unparseable``) or
            ``"lenient"`` (math-verify's own extraction of the whole reply). Sets the
            default verifier's mode; with a ``verifier``, leave it out (or give the same).
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("MathReason-v0", difficulty=0)
        >>> obs, info = env.reset(seed=0)
        >>> lenient = gym.make("MathReason-v0", answer_extraction="lenient")
    """

    reward_only_options = frozenset({"verifier", "answer_extraction"})

    def __init__(
        self,
        difficulty: int = 0,
        dataset: str | Path | None = None,
        split: str = "train",
        columns: Mapping[str, str] | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        verifier: MathVerifier | None = None,
        render_mode: str | None = None,
        answer_extraction: AnswerExtraction | None = None,
    ):
        super().__init__(max_turns=1, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        if not isinstance(difficulty, int) or not 0 <= difficulty <= MAX_LEVEL:
            raise ConfigError(f"difficulty={difficulty!r} is not allowed; choose an integer from 0 to {MAX_LEVEL}.")
        if dataset is None:
            require_option("split", split, ("train", "test", "all"))
        self.difficulty = difficulty
        self.split = split
        if answer_extraction is not None:
            require_option("answer_extraction", answer_extraction, ANSWER_EXTRACTIONS)
        if verifier is not None and answer_extraction not in (None, verifier.answer_extraction):
            raise ConfigError(
                f"answer_extraction={answer_extraction!r} conflicts with the verifier's {verifier.answer_extraction!r}; "
                "set it on the verifier (MathVerifier(answer_extraction=...)) or pass one of them only."
            )
        # The default verifier reads every answer the env accepts: its own cap on what goes to
        # math-verify (100,000 characters) would score a long chain of thought 0 as unparseable.
        longest = max(self.max_length, MathVerifier.max_completion_chars)
        extraction = answer_extraction or "strict"
        self.verifier = verifier or MathVerifier(answer_extraction=extraction, max_completion_chars=longest)
        self._records: tuple[MathRecord, ...] | None = None
        self.dataset_name = None
        if dataset is not None:
            self._records = _cached_dataset(str(dataset), split, tuple(sorted((columns or {}).items())))
            self.dataset_name = Path(str(dataset)).stem if not str(dataset).startswith("hf:") else str(dataset)[3:]

    @property
    def num_tasks(self) -> int | None:
        """Number of tasks in the data set, or ``None`` for the (unbounded) generator."""
        return None if self._records is None else len(self._records)

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        if self._records is None:
            if "task_index" in options:
                raise ConfigError("options['task_index'] needs a dataset; the generator draws tasks by seed.")
            problem = generate(self.np_random, self.difficulty, self.split)
            meta = {"level": problem.level, "solution": problem.solution}
            return Task(problem.problem_id, self._prompt(problem.question), problem.answer, meta)
        index = self._task_index(options, len(self._records))
        record = self._records[index]
        meta = {"solution": record.solution, "index": index}
        if record.alternatives:
            meta["alternatives"] = list(record.alternatives)
        return Task(f"{self.dataset_name}-{index}", self._prompt(record.question), record.answer, meta)

    @staticmethod
    def _prompt(question: str) -> str:
        return f"{question}\n{INSTRUCTION}"

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        """The verifier's pairs, one per form of the answer: a vector env's step verifies its envs'
        answers in one batch (the answers math-verify must check go to its helper processes side by side)."""
        return [(self.verifier, (action, gold)) for gold in self._golds()]

    def _golds(self) -> list[str]:
        """The answer's forms: the answer, then the data set's other forms (the verifier reads each
        as every entry point does, :func:`~mathgym.rewards.math_gold.gold_forms`)."""
        return [self.task.answer, *self.task.metadata.get("alternatives", ())]

    def _judge(self, action: str) -> Judgement:
        results = []
        for gold in self._golds():  # the first form that matches decides; most answers have one form
            request = (action, gold)
            results.append(self._scored(self.verifier, request, lambda request=request: self.verifier.score(*request)))
            if results[-1].score >= 1.0:
                break
        result = best_of_forms(results)
        return Judgement(
            reward=result.score,
            status=result.status,
            done=True,
            reward_breakdown={"correctness": result.score},
            correct=result.score >= 1.0,
            info={"extracted_answer": result.details.get("extracted"), "verifier_path": result.details.get("path")},
        )

    def expert_action(self) -> str | None:
        """A worked solution for the current task (generator tasks only), for SFT."""
        solution = self.task.metadata.get("solution")
        return solution if self._records is None else None
