"""Step labels for process reward models: Monte-Carlo estimates, and the public labelled sets.

Math-Shepherd's automatic labels (Wang et al., 2024): a policy writes a solution, split
into steps; from every prefix ``steps[:i]`` it writes ``k`` completions, and step ``i``'s
label is the share of them that reach the right answer (``"soft"``) or whether any does
(``"hard"``). A step after which the policy can no longer solve the problem is a bad step.
The step that states the final answer needs no rollouts: its label is whether the answer
is right.

Every source gives the same rows (:class:`StepLabelRow`, one JSON object per line):
``problem``, ``steps``, ``labels`` (one number in ``[0, 1]`` per step) and ``answer`` (the
gold answer, ``None`` where the source has none), which a PRM trains on.

The public formats read here:

* Math-Shepherd (``peiyi9979/Math-Shepherd``): ``input`` is the problem and its steps, each
  step followed by the tag ``ки``; ``label`` is the same text with each tag replaced by
  ``+`` (good step) or ``-`` (bad step). ``+`` → 1.0, ``-`` → 0.0.
* ProcessBench (``Qwen/ProcessBench``): ``problem``, ``steps`` and ``label``, the index of the
  first wrong step (``-1``: none); the steps before it 1.0, it and the later ones 0.0.
* RLHFlow (``RLHFlow/Mistral-PRM-Data``, ``RLHFlow/Deepseek-PRM-Data``): ``conversations``, a
  user turn per step (the problem before ``Step 1:`` in the first) answered ``+`` or ``-``.
* PRM800K (``openai/prm800k``): ``question.problem``, ``question.ground_truth_answer`` and
  ``label.steps``, each step a list of rated ``completions`` (rating -1, 0 or 1) with the one
  the labeller kept in ``chosen_completion`` (or a ``human_completion`` the labeller wrote,
  labelled 1.0). Rating 1 → 1.0, -1 → 0.0, 0 (neutral: not wrong, not helpful) → ``neutral``
  (1.0 by default, as the step is not an error). Where no completion was chosen (the
  labeller stopped at an error), the first completion rated -1 ends the solution; a step
  with neither ends it before that step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from mathgym.errors import ConfigError

LabelKind = Literal["soft", "hard"]
LABEL_KINDS: tuple[LabelKind, ...] = ("soft", "hard")
#: Math-Shepherd's step tag (Cyrillic "ки"), which its label text replaces with ``+`` or ``-``.
SHEPHERD_TAG = "ки"


@dataclass
class StepLabelRow:
    """One labelled solution.

    Attributes:
        problem: The problem as the policy saw it.
        steps: The solution's steps, in order.
        labels: One number in ``[0, 1]`` per step: how likely the solution can still be finished right.
        answer: The gold answer (``None`` when the source has none).
        task_id: Where the problem came from (the env's task id, or the data set's).
    """

    problem: str
    steps: list[str]
    labels: list[float]
    answer: str | None = None
    task_id: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


@dataclass
class StepTask:
    """A problem to write steps for, as an env gave it (see :mod:`mathgym.algos.step_policy`).

    Attributes:
        seed: The env seed that gives this task.
        problem: The problem text (the user's message).
        messages: The env's chat prompt.
        task_id: The env's task id.
        max_steps: Most steps a solution may have.
    """

    seed: int
    problem: str
    messages: list[dict[str, str]]
    task_id: str = ""
    max_steps: int = 8


class StepWriter(Protocol):
    """Writes solutions step by step: a policy (``PolicyStepWriter``) or a scripted one in tests."""

    def continue_steps(self, tasks: Sequence[StepTask], prefixes: Sequence[Sequence[str]], n: int) -> list[list[list[str]]]:
        """For each ``(task, prefix)`` pair, ``n`` continuations, each the list of steps after the prefix."""
        ...


#: ``(task, steps) -> (right?, gold answer)``: the env's verdict on a whole solution.
StepChecker = Callable[[StepTask, Sequence[str]], tuple[bool, str | None]]


def label_steps(
    tasks: Sequence[StepTask],
    writer: StepWriter,
    check: StepChecker,
    *,
    k: int = 8,
    kind: LabelKind = "soft",
    on_task: Callable[[], None] | None = None,
    batch_tasks: int = 8,
    samples: int = 1,
) -> list[StepLabelRow]:
    """Write ``samples`` solutions per task and label each of their steps by ``k`` rollouts from it.

    Args:
        tasks: The problems.
        writer: Writes the solutions and the rollouts.
        check: Says whether a whole solution is right (and gives the gold answer).
        k: Rollouts from each step's prefix.
        kind: ``"soft"``: the share of rollouts that end right; ``"hard"``: 1.0 when any does.
        on_task: Called after each task (a progress bar's update).
        batch_tasks: Tasks whose solutions (then rollouts) are asked of the writer in one call.
        samples: Solutions written per task. Several give a PRM right and wrong solutions of the same problem
            to tell apart, which is what best-of-N selection asks of it; with one, a PRM can score well on
            step AUC by learning which problems are hard. Identical solutions of a task are labelled once.

    Returns:
        One row per distinct solution with at least one step.
    """
    if kind not in LABEL_KINDS:
        raise ConfigError(f"kind={kind!r}: choose one of {', '.join(LABEL_KINDS)}.")
    if k < 1:
        raise ConfigError(f"k={k}: at least one rollout per step is needed.")
    if samples < 1:
        raise ConfigError(f"samples={samples}: at least one solution per task is needed.")
    rows = []
    for start in range(0, len(tasks), batch_tasks):
        chunk = list(tasks[start : start + batch_tasks])
        written = writer.continue_steps(chunk, [[]] * len(chunk), samples)
        pairs = []  # (task, solution, last of its task's solutions?), identical solutions of a task once
        for task, candidates in zip(chunk, written):
            seen: set[tuple[str, ...]] = set()
            distinct = []
            for candidate in candidates:
                solution = list(candidate[: task.max_steps])
                key = tuple(s.strip() for s in solution)
                if solution and key not in seen:
                    seen.add(key)
                    distinct.append(solution)
            pairs += [(task, solution, False) for solution in distinct[:-1]]
            pairs.append((task, distinct[-1] if distinct else [], True))
        # every prefix but the whole solution, of every solution of the chunk: one call
        owners = [(t, s[: i + 1]) for t, s, _ in pairs for i in range(len(s) - 1)]
        rollouts = iter(writer.continue_steps([t for t, _ in owners], [p for _, p in owners], k) if owners else [])
        for task, solution, last in pairs:
            if solution:
                labels = []
                for i in range(len(solution) - 1):
                    wins = [check(task, [*solution[: i + 1], *rest])[0] for rest in next(rollouts)]
                    labels.append(sum(wins) / len(wins) if kind == "soft" else float(any(wins)))
                right, answer = check(task, solution)
                labels.append(float(right))  # the last step: the solution's own verdict
                rows.append(StepLabelRow(task.problem, [s.strip() for s in solution], labels, answer, task.task_id))
            if last and on_task:
                on_task()
    return rows


def write_rows(rows: Iterable[StepLabelRow], path: str | Path) -> int:
    """Write rows as JSONL; returns how many."""
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(row.to_json() + "\n")
            count += 1
    return count


# -- public formats ------------------------------------------------------------


def math_shepherd_row(record: dict[str, Any]) -> StepLabelRow:
    """A Math-Shepherd record (``input``, ``label``) → a row.

    Example:
        >>> r = math_shepherd_row({"input": "What is 1+2? Step 1: 1+2=3 ки\\nStep 2: The answer is: 3 ки",
        ...                        "label": "What is 1+2? Step 1: 1+2=3 +\\nStep 2: The answer is: 3 +"})
        >>> r.problem, r.steps, r.labels, r.answer
        ('What is 1+2?', ['Step 1: 1+2=3', 'Step 2: The answer is: 3'], [1.0, 1.0], '3')
    """
    from mathgym.rewards.extract import extract_answer

    text, marked = record.get("input"), record.get("label")
    if not isinstance(text, str) or not isinstance(marked, str):
        raise ValueError("a Math-Shepherd record needs the strings 'input' and 'label'")
    pieces = text.split(SHEPHERD_TAG)
    if len(pieces) < 2:
        raise ValueError(f"'input' holds no step tag {SHEPHERD_TAG!r}")
    labels, at = [], 0
    for piece in pieces[:-1]:
        if marked[at : at + len(piece)] != piece:
            raise ValueError(f"'label' differs from 'input' near character {at}: it must be 'input' with each tag replaced by + or -")
        at += len(piece)
        mark = marked[at : at + 1]
        if mark not in ("+", "-"):
            raise ValueError(f"'label' has {mark!r} where a step tag is replaced; expected '+' or '-'")
        labels.append(1.0 if mark == "+" else 0.0)
        at += 1
    start = pieces[0].find("Step 1:")
    if start < 0:  # no step numbers: the first line is the problem
        head, _, first = pieces[0].partition("\n")
    else:
        head, first = pieces[0][:start], pieces[0][start:]
    steps = [first.strip(), *(p.strip() for p in pieces[1:-1])]
    found = extract_answer(steps[-1])
    return StepLabelRow(head.strip(), steps, labels, found[0] if found else None, str(record.get("task", "")))


def prm800k_row(record: dict[str, Any], neutral: float = 1.0) -> StepLabelRow | None:
    """A PRM800K record → a row (``None`` when no step could be read); see the module doc for the mapping."""
    question, label = record.get("question") or {}, record.get("label") or {}
    if not isinstance(question, dict) or not isinstance(label, dict):
        raise ValueError("a PRM800K record needs the objects 'question' and 'label'")
    values = {1: 1.0, 0: float(neutral), -1: 0.0}
    steps, labels = [], []
    for step in label.get("steps") or []:
        completions = step.get("completions") or []
        chosen, human = step.get("chosen_completion"), step.get("human_completion")
        if isinstance(chosen, int) and 0 <= chosen < len(completions):
            picked = completions[chosen]
        elif human:
            steps.append(str(human.get("text", "")).strip())
            labels.append(1.0)
            continue
        else:  # the labeller stopped here: the step rated -1 ends the solution
            picked = next((c for c in completions if c.get("rating") == -1), None)
            if picked is None:
                break
        if picked.get("rating") not in values:
            break
        steps.append(str(picked.get("text", "")).strip())
        labels.append(values[picked["rating"]])
        if picked["rating"] == -1:
            break
    if not steps:
        return None
    answer = question.get("ground_truth_answer")
    return StepLabelRow(str(question.get("problem", "")), steps, labels, None if answer is None else str(answer))


def processbench_row(record: dict[str, Any]) -> StepLabelRow:
    """A ProcessBench record (``problem``, ``steps``, ``label``: the index of the first wrong
    step, ``-1`` when none is) → a row: the steps before the first wrong one 1.0, it and every
    later one 0.0 (a solution cannot be finished right from a wrong step: Math-Shepherd's
    reading), all 1.0 when none is wrong.

    Example:
        >>> processbench_row({"problem": "p", "steps": ["a", "b", "c"], "label": 1}).labels
        [1.0, 0.0, 0.0]
    """
    problem, steps, first = record.get("problem"), record.get("steps"), record.get("label")
    if not isinstance(problem, str) or not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
        raise ValueError("a ProcessBench record needs a string 'problem' and a list of strings 'steps'")
    if isinstance(first, bool) or not isinstance(first, int) or not -1 <= first < len(steps):
        raise ValueError(f"'label' {first!r} is not the index of a step, or -1")
    labels = [1.0] * len(steps) if first < 0 else [1.0] * first + [0.0] * (len(steps) - first)
    return StepLabelRow(problem, list(steps), labels, None, str(record.get("id", "")))


def rlhflow_row(record: dict[str, Any]) -> StepLabelRow:
    """An RLHFlow PRM record (``conversations``: a user turn per step, the problem before the
    first, each answered by an assistant turn ``+`` or ``-``) → a row.

    Example:
        >>> turns = [{"role": "user", "content": "What is 1+2? Step 1: 1+2=3"}, {"role": "assistant", "content": "+"},
        ...          {"role": "user", "content": "Step 2: The answer is: 3"}, {"role": "assistant", "content": "+"}]
        >>> r = rlhflow_row({"conversations": turns})
        >>> r.problem, r.steps, r.labels
        ('What is 1+2?', ['Step 1: 1+2=3', 'Step 2: The answer is: 3'], [1.0, 1.0])
    """
    turns = record.get("conversations")
    if not isinstance(turns, list) or not turns or len(turns) % 2 or not all(isinstance(t, dict) for t in turns):
        raise ValueError("an RLHFlow record needs 'conversations': user and assistant turns in pairs")
    steps, labels = [], []
    for user, mark in zip(turns[::2], turns[1::2]):
        text, verdict = user.get("content"), mark.get("content")
        if user.get("role") != "user" or mark.get("role") != "assistant" or not isinstance(text, str):
            raise ValueError("an RLHFlow record's turns alternate user (a step) and assistant (its mark)")
        if verdict not in ("+", "-"):
            raise ValueError(f"a step's mark is {verdict!r}; expected '+' or '-'")
        steps.append(text.strip())
        labels.append(1.0 if verdict == "+" else 0.0)
    start = steps[0].find("Step 1:")
    if start > 0:
        problem, steps[0] = steps[0][:start].strip(), steps[0][start:]
    else:  # no step numbers: the first line is the problem
        problem, _, steps[0] = steps[0].partition("\n")
        steps[0] = steps[0].strip()
    found = None
    if steps[-1]:
        from mathgym.rewards.extract import extract_answer

        found = extract_answer(steps[-1])
    return StepLabelRow(problem.strip(), steps, labels, found[0] if found else None)


#: The formats :func:`read_step_labels` reads, by the name ``source`` takes.
StepLabelSource = Literal["auto", "mathgym", "math-shepherd", "prm800k", "processbench", "rlhflow"]


def read_step_labels(path: str | Path, source: StepLabelSource = "auto") -> Iterator[StepLabelRow]:
    """Rows of a JSONL file (or a JSON list) of step labels: mathgym's own, Math-Shepherd's,
    PRM800K's, ProcessBench's or RLHFlow's.

    ``"auto"`` tells them apart by their keys (``steps``/``labels``; ``input``/``label``;
    ``question``/``label``; ``steps``/``label``; ``conversations``). A record that cannot be
    read raises ``ValueError`` naming it.
    """
    from mathgym.envs.math.data import jsonl_rows  # noqa: PLC0415

    for where, record in jsonl_rows(path, "step-label file", json_list=True):
        try:
            row = step_label_row(record, source)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"{where}: {type(err).__name__}: {err}") from None
        if row is not None:
            if len(row.steps) != len(row.labels):
                raise ValueError(f"{where}: {len(row.steps)} steps but {len(row.labels)} labels")
            yield row


def _mathgym_row(record: dict[str, Any]) -> StepLabelRow:
    return StepLabelRow(str(record["problem"]), [str(s) for s in record["steps"]], [float(x) for x in record["labels"]],
                        record.get("answer"), str(record.get("task_id", "")))


#: The reader of each format :func:`read_step_labels` reads.
READERS: dict[str, Callable[[dict[str, Any]], StepLabelRow | None]] = {
    "mathgym": _mathgym_row, "math-shepherd": math_shepherd_row, "prm800k": prm800k_row,
    "processbench": processbench_row, "rlhflow": rlhflow_row,
}


def step_label_row(record: Any, source: StepLabelSource = "auto") -> StepLabelRow | None:
    """One record of any format :func:`read_step_labels` reads, told apart by its keys under
    ``"auto"``; ``None`` for a PRM800K record with no step.

    Raises:
        ValueError: The record fits no format, or not the one named.
    """
    return READERS[source if source != "auto" else _source_of(record)](record)


def _source_of(record: Any) -> str:
    if not isinstance(record, dict):
        raise ValueError("each record must be a JSON object")
    if "steps" in record and "labels" in record:
        return "mathgym"
    if "steps" in record and "label" in record:
        return "processbench"
    if "input" in record and "label" in record:
        return "math-shepherd"
    if "question" in record and "label" in record:
        return "prm800k"
    if "conversations" in record:
        return "rlhflow"
    raise ValueError(
        f"unknown step-label format (keys {sorted(record)[:6]}): expected mathgym's (problem, steps, labels), Math-Shepherd's "
        "(input, label), PRM800K's (question, label), ProcessBench's (problem, steps, label) or RLHFlow's (conversations)"
    )
