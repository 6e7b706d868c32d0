"""OpenQA-v0: open-ended questions with reference answers, graded by an LLM judge (single turn).

The answer is free text, so no rule can grade it: a judge compares it with the task's reference
answer (:class:`~mathgym.rewards.judge.LLMJudge`, ``mode="reference"``) and its normalised
``[0, 1]`` score is the reward. The judge is an OpenAI-compatible endpoint (``judge_url`` and
``judge_model``: vLLM, SGLang, llama.cpp or a hosted API) or any reward worker passed as ``judge``
(a local model: :class:`~mathgym.agents.local_judge.LocalJudge`). A judgement that failed (the
endpoint never answered well, or its reply held no valid verdict) is ``status="error"``: an
infrastructure status, reward 0 but left out of training, never a wrong answer.

A reasoning model is judged on its answer: the judge is sent the text after its thinking
(:func:`~mathgym.rewards.extract.answer_after_thinking`), never the thinking; a response whose
thinking never closed, or with nothing after it, holds no answer (``unparseable``, 0, no request).
Any answer the env accepts (``max_length``) is judged: the judge reads a long one's start and end.

The built-in data are 50 questions with reference answers written for mathgym
(``mathgym/samples/open_qa.jsonl``: science, history, geography, mathematics, computing,
economics, health, literature); ``dataset=PATH`` reads another JSONL of
``{"question", "reference"}`` rows (``id`` optional; the answers as TriviaQA, Natural Questions,
SQuAD, PopQA, MuSiQue, FlashRAG / Search-R1 and verl keep them work as the reference:
:func:`load_open_qa`).

Example::

    env = gym.make("OpenQA-v0", judge_url="http://127.0.0.1:8000/v1", judge_model="Qwen/Qwen2.5-7B-Instruct")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("Because air scatters blue light more than red.")
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.math.data import jsonl_rows, last_user_message
from mathgym.errors import ConfigError, DatasetError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking
from mathgym.rewards.judge import JudgeInput, LLMJudge
from mathgym.spaces import DEFAULT_MAX_LENGTH

#: The built-in questions and reference answers.
OPEN_QA_SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "open_qa.jsonl"
DEFAULT_SYSTEM_PROMPT = "Answer the question accurately and concisely."


def load_open_qa(path: str | Path) -> list[Task]:
    """The tasks of a JSONL (or JSON list) of ``{"question", "reference", "id"?}`` rows.

    The reference may also come as QA data sets keep it: ``answer`` / ``answers`` (a string, a
    list of accepted answers as Natural Questions' open set and WebQuestions give them, the
    first the reference and the rest named as also accepted, TriviaQA's ``{"value",
    "aliases"}``, SQuAD's ``{"text": [...]}``), FlashRAG's and Search-R1's ``golden_answers``,
    PopQA's ``possible_answers`` (a JSON list in a string), or verl's
    ``reward_model.ground_truth`` (``{"target": [...]}``); MuSiQue's ``answer_aliases`` are
    accepted too. The question may be a chat (its last user message); a ``context`` passage
    (SQuAD) is shown before it.
    """
    tasks = []
    for where, row in jsonl_rows(path, "OpenQA-v0: dataset", json_list=True):
        question = _question(row) if isinstance(row, dict) else None
        reference = reference_text(_accepted(row)) if isinstance(row, dict) else None
        if not question or not reference:
            raise DatasetError(
                f"{where}: a row needs a non-empty 'question' (or a chat 'prompt') and a 'reference' (or 'answer' / "
                "'answers' / 'golden_answers' / 'possible_answers' / reward_model.ground_truth)."
            )
        task_id = str(row.get("id") or "oqa-" + hashlib.sha1(question.encode()).hexdigest()[:12])
        tasks.append(Task(task_id, question, reference))
    if not tasks:
        raise DatasetError(f"OpenQA-v0: dataset {str(path)!r} has no questions.")
    return tasks


def _question(row: dict) -> str | None:
    """A row's question: ``question`` (or ``query``), or a chat's last user message; a ``context``
    passage goes before it."""
    question = next((row[k] for k in ("question", "query") if isinstance(row.get(k), str) and row[k].strip()), None)
    question = question or last_user_message(row.get("prompt")) or last_user_message(row.get("messages"))
    if not isinstance(question, str) or not question.strip():
        return None
    context = row.get("context")
    return f"{context.strip()}\n\n{question.strip()}" if isinstance(context, str) and context.strip() else question


def _accepted(row: dict) -> Any:
    """The accepted answers of a row in any of the layouts :func:`load_open_qa` names."""
    value = next((row[k] for k in ("reference", "answer", "answers", "golden_answers", "possible_answers") if row.get(k) not in (None, "", [])), None)
    truth = row.get("reward_model", {}).get("ground_truth") if isinstance(row.get("reward_model"), dict) else None
    value = truth if value is None else value
    if isinstance(value, str) and value.lstrip().startswith("["):  # PopQA: a JSON list in a string
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            decoded = None
        value = decoded if isinstance(decoded, list) else value
    if isinstance(value, dict) and "value" not in value:  # SQuAD's text, Search-R1's target
        value = next((value[k] for k in ("text", "target") if k in value), None)
    aliases = row.get("answer_aliases")
    if isinstance(aliases, list) and aliases and value is not None:  # MuSiQue
        value = [*(value if isinstance(value, list) else [value]), *aliases]
    return value


def reference_text(value: Any) -> str | None:
    """A reference answer as text; ``None`` when ``value`` holds none.

    Example:
        >>> reference_text(["Paris", "City of Paris"]), reference_text({"value": "Mars", "aliases": ["mars", "Red Planet"]})
        ('Paris (also accepted: City of Paris)', 'Mars (also accepted: mars, Red Planet)')
    """
    if isinstance(value, dict):
        aliases = value.get("aliases") if isinstance(value.get("aliases"), list) else []
        value = [value.get("value"), *aliases]
    if isinstance(value, list):
        texts = list(dict.fromkeys(str(v).strip() for v in value if isinstance(v, (str, int, float)) and str(v).strip()))
        if not texts:
            return None
        return texts[0] + (f" (also accepted: {', '.join(texts[1:])})" if len(texts) > 1 else "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value.strip() or None if isinstance(value, str) else None


class OpenQAEnv(TextEnv):
    """Open-ended questions graded against reference answers by an LLM judge (see the module docstring).

    Args:
        judge_url: The judge's OpenAI-compatible API root (``http://HOST:PORT/v1``).
        judge_model: The model name the endpoint serves.
        judge: A reward worker to grade with instead (``score_batch(completions, references)``),
            e.g. a :class:`~mathgym.agents.local_judge.LocalJudge`; excludes ``judge_url``.
        judge_options: Further :class:`~mathgym.rewards.judge.LLMJudge` options (``timeout_s``,
            ``max_retries``, ``max_concurrency``, ``api_key_env``...).
        dataset: A JSONL of questions and references (default: the built-in 50).
        correct_threshold: A judge score at or above it counts as solved (``info["correct"]``).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    default_system_prompt = DEFAULT_SYSTEM_PROMPT
    reward_only_options = frozenset({"judge_url", "judge_model", "judge", "judge_options", "correct_threshold"})

    def __init__(
        self,
        judge_url: str = "",
        judge_model: str = "",
        judge: Any = None,
        judge_options: Mapping[str, Any] | None = None,
        dataset: str | Path = "",
        correct_threshold: float = 0.8,
        system_prompt: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=1, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        if judge is not None and judge_url:
            raise ConfigError("OpenQA-v0: give judge (a reward worker) or judge_url, not both.")
        if judge is None:
            if not judge_url or not judge_model:
                raise ConfigError(
                    "OpenQA-v0 is graded by an LLM judge: give judge_url=http://HOST:PORT/v1 and judge_model=NAME "
                    "(an OpenAI-compatible endpoint, e.g. `vllm serve Qwen/Qwen2.5-7B-Instruct`), or judge=<reward worker>."
                )
            judge = LLMJudge(judge_url, judge_model, mode="reference", **dict(judge_options or {}))
        elif judge_options:
            raise ConfigError("OpenQA-v0: judge_options apply to the judge built from judge_url, not to judge=.")
        if not callable(getattr(judge, "score_batch", None)):
            raise ConfigError("OpenQA-v0: judge must be a reward worker with score_batch(completions, references).")
        if isinstance(correct_threshold, bool) or not 0.0 < float(correct_threshold) <= 1.0:
            raise ConfigError(f"correct_threshold={correct_threshold!r} is not allowed; choose a value in (0, 1].")
        self.judge, self.correct_threshold = judge, float(correct_threshold)
        self.tasks = load_open_qa(dataset or OPEN_QA_SAMPLE)

    @property
    def num_tasks(self) -> int | None:
        """Number of questions."""
        return len(self.tasks)

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        return self.tasks[self._task_index(options, len(self.tasks))]

    def _requests_ahead(self, action: str) -> list[tuple[Any, Any]]:
        """The judge's request: a vector env's step sends its envs' answers in one batch
        (``max_concurrency`` requests in flight)."""
        answer = answer_after_thinking(action)
        if answer is None or not answer.strip():
            return []
        return [(self.judge, (answer, JudgeInput(self.task.prompt, reference=self.task.answer)))]

    def _judge(self, action: str) -> Judgement:
        # any judge (an endpoint, a local model, a plain worker) is sent the answer, never the thinking
        answer = answer_after_thinking(action)
        if answer is None or not answer.strip():
            feedback = "the thinking never closed: no answer" if answer is None else "empty answer"
            return Judgement(0.0, Status.UNPARSEABLE, True, reward_breakdown={"judge": 0.0}, info={"feedback": feedback})
        request = (answer, JudgeInput(self.task.prompt, reference=self.task.answer))
        result = self._scored(self.judge, request, lambda: self.judge.score_batch([request[0]], [request[1]])[0])
        # what the judgement says, not how it was reached (a cache hit or a retry must not change a step's info)
        details = {k: v for k, v in result.details.items() if k in ("judge_score", "reason")}
        if result.status.is_infra_failure:
            return Judgement(0.0, result.status, True, reward_breakdown={"judge": 0.0}, info={"judge": details})
        score = float(result.score)
        return Judgement(
            score, result.status, True, reward_breakdown={"judge": score}, correct=score >= self.correct_threshold,
            info={"judge": details},
        )

    def expert_action(self) -> str:
        """The task's reference answer."""
        return self.task.answer
