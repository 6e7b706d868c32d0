"""Countdown-v0: reach a target number with the given numbers and + - * /.

The agent's expression is read by a small tokenizer and recursive-descent parser and
evaluated with exact fractions: no ``eval``, no ``ast`` of arbitrary Python, a length and
depth limit, so hostile text can neither run code nor take long.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from mathgym.core import Judgement, Task, TextEnv
from mathgym.errors import ConfigError, DatasetError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking, last_boxed
from mathgym.spaces import DEFAULT_MAX_LENGTH

MIN_NUMBERS, MAX_NUMBERS = 3, 6
MAX_EXPRESSION_CHARS = 300
MAX_DEPTH = 40
DEFAULT_SYSTEM_PROMPT = "Solve the arithmetic puzzle. Put the final expression in \\boxed{}."

_TOKEN = re.compile(r"\s*(?:(\d+)|([-+*/()×÷x]))")
_OPS = {"×": "*", "x": "*", "÷": "/"}


class ExpressionError(ValueError):
    """The text is not an arithmetic expression of the allowed form."""


@dataclass(frozen=True)
class Evaluated:
    """An expression's exact value and the numbers it used (with multiplicity)."""

    value: Fraction
    numbers: tuple[int, ...]


def tokenize(text: str) -> list[str]:
    """Split an expression into numbers, operators and parentheses.

    Raises:
        ExpressionError: On any other character or an over-long text.
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    tokens, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ExpressionError(f"unexpected character {text[pos]!r} at {pos}")
        tokens.append(match.group(1) or _OPS.get(match.group(2), match.group(2)))
        pos = match.end()
    return tokens


class _Parser:
    """expr := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ; factor := NUMBER | '(' expr ')'."""

    def __init__(self, tokens: list[str]):
        self.tokens, self.pos, self.numbers = tokens, 0, []

    def parse(self) -> Evaluated:
        value = self._expr(0)
        if self.pos != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.pos]!r}")
        return Evaluated(value, tuple(self.numbers))

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _expr(self, depth: int) -> Fraction:
        value = self._term(depth)
        while self._peek() in ("+", "-"):
            op = self.tokens[self.pos]
            self.pos += 1
            right = self._term(depth)
            value = value + right if op == "+" else value - right
        return value

    def _term(self, depth: int) -> Fraction:
        value = self._factor(depth)
        while self._peek() in ("*", "/"):
            op = self.tokens[self.pos]
            self.pos += 1
            right = self._factor(depth)
            if op == "/" and right == 0:
                raise ExpressionError("division by zero")
            value = value * right if op == "*" else value / right
        return value

    def _factor(self, depth: int) -> Fraction:
        if depth > MAX_DEPTH:
            raise ExpressionError("parentheses nested too deeply")
        token = self._peek()
        if token is None:
            raise ExpressionError("the expression ends too early")
        self.pos += 1
        if token == "(":
            value = self._expr(depth + 1)
            if self._peek() != ")":
                raise ExpressionError("missing ')'")
            self.pos += 1
            return value
        if token.isdigit():
            self.numbers.append(int(token))
            return Fraction(int(token))
        raise ExpressionError(f"unexpected {token!r}")


def evaluate(text: str) -> Evaluated:
    """Evaluate an expression of integers, ``+ - * /`` (also ``× ÷``) and parentheses exactly.

    Example:
        >>> evaluate("(25 - 5) * 3").value
        Fraction(60, 1)
    """
    return _Parser(tokenize(text)).parse()


def extract_expression(action: str) -> str | None:
    """The expression in the action's answer (after a reasoning model's thinking, whose tries are
    not the answer; none when the thinking never closed): the last ``\\boxed{}``, else
    ``<answer>`` tag, else the last line.

    With an ``=``, the first side holding an operator counts (``3 * 4 = 12`` and ``12 = 3 * 4``
    both give ``3 * 4``).
    """
    action = answer_after_thinking(action) or ""
    text = last_boxed(action)
    if text is None and "<answer>" in action:
        text = action.rsplit("<answer>", 1)[1].split("</answer>", 1)[0]
    if text is None:
        lines = [line for line in action.strip().splitlines() if line.strip()]
        text = lines[-1] if lines else None
    if text is None:
        return None
    text = text.replace("\\times", "*").replace("\\cdot", "*").replace("\\div", "/").strip().strip("$").strip()
    sides = [side.strip() for side in text.split("=")]
    with_operator = [side for side in sides if any(op in side for op in "+-*/")]
    text = with_operator[0] if with_operator else sides[0]
    return text or None


def solve(numbers: Sequence[int], target: int, use_all: bool = False) -> str | None:
    """An expression over (a subset of) ``numbers`` equal to ``target``, or ``None``; with
    ``use_all``, one that uses every number exactly once.

    Exhaustive search over pairs of sub-results, restricted (as in the TV game) to positive
    integer intermediate results, which every generated instance admits; multisets of values
    already explored are memoised, so six numbers take well under a second.
    """
    seen: set[tuple[int, ...]] = set()

    def search(items: list[tuple[int, str]]) -> str | None:
        for value, text in items:
            if value == target and (not use_all or len(items) == 1):
                return text
        key = tuple(sorted(v for v, _ in items))
        if len(items) < 2 or key in seen:
            return None
        seen.add(key)
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                (a, ta), (b, tb) = items[i], items[j]
                if a < b:
                    (a, ta), (b, tb) = (b, tb), (a, ta)
                rest = [items[k] for k in range(len(items)) if k not in (i, j)]
                options = [(a + b, f"({ta} + {tb})")]
                if b > 1:
                    options.append((a * b, f"({ta} * {tb})"))
                if a > b:
                    options.append((a - b, f"({ta} - {tb})"))
                if b > 1 and a % b == 0:
                    options.append((a // b, f"({ta} / {tb})"))
                for value, text in options:
                    found = search(rest + [(value, text)])
                    if found is not None:
                        return found
        return None

    found = search([(int(n), str(n)) for n in numbers])
    return None if found is None else (found[1:-1] if found.startswith("(") and found.endswith(")") else found)


def generate_instance(rng: np.random.Generator, count: int) -> tuple[list[int], int, str]:
    """Numbers, a target and an expression reaching it, built together so the instance is solvable.

    Random numbers are combined pairwise with random operations (integer intermediate
    results only) until one value is left; that value is the target when it lies in
    ``[10, 999]``, otherwise the draw is repeated.
    """
    while True:
        numbers = [int(rng.integers(1, 11)) if rng.random() < 0.75 else int(rng.choice([25, 50, 75, 100])) for _ in range(count)]
        used = int(rng.integers(max(2, count - 1), count + 1))
        items = [(n, str(n)) for n in numbers[:used]]
        while len(items) > 1:
            i, j = (int(k) for k in rng.choice(len(items), size=2, replace=False))
            (a, ta), (b, tb) = items[i], items[j]
            candidates = [(a + b, f"{ta} + {tb}"), (a * b, f"{ta} * {tb}")]
            if a > b:
                candidates.append((a - b, f"{ta} - {tb}"))
            if b > 1 and a % b == 0:
                candidates.append((a // b, f"{ta} / {tb}"))
            value, text = candidates[int(rng.integers(len(candidates)))]
            items = [items[k] for k in range(len(items)) if k not in (i, j)] + [(value, f"({text})")]
        target, expression = items[0]
        if 10 <= target <= 999 and target not in numbers:
            order = rng.permutation(count)
            return [numbers[k] for k in order], int(target), expression[1:-1]


def load_countdown(path: str | Path) -> tuple[tuple[tuple[int, ...], int], ...]:
    """The ``(numbers, target)`` instances of a JSONL (or JSON list) file: TinyZero's layout
    (``Jiayi-Pan/Countdown-Tasks-3to4``: ``nums``, ``target``), or ``numbers`` and ``target``.

    Raises:
        DatasetError: The file is missing, holds no instance, or a row lacks integer numbers
            (2 to 6 of them, each in 1..10**6: the solver behind the expert stays fast) or an
            integer target (naming the row).
    """
    from mathgym.envs.math.data import jsonl_rows  # noqa: PLC0415

    instances = []
    for where, row in jsonl_rows(path, "Countdown data set", json_list=True):
        numbers = (row.get("nums", row.get("numbers")) if isinstance(row, dict) else None)
        target = row.get("target") if isinstance(row, dict) else None
        whole = isinstance(numbers, list) and all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10**6 for n in numbers)
        if not (whole and 2 <= len(numbers) <= MAX_NUMBERS) or isinstance(target, bool) or not isinstance(target, int):
            raise DatasetError(f"{where}: a row needs 'nums' (or 'numbers'): 2 to {MAX_NUMBERS} integers in 1..10**6, and an integer 'target'")
        instances.append((tuple(numbers), target))
    if not instances:
        raise DatasetError(f"Countdown data set {str(path)!r} holds no instances")
    return tuple(instances)


class CountdownEnv(TextEnv):
    """Reach the target with the given numbers, + - * / and parentheses (each number at most once).

    Args:
        num_numbers: How many numbers are given (3 to 6): the difficulty of generated instances.
        format_reward: Reward for a well-formed expression over allowed numbers that misses
            the target (0 by default; e.g. 0.1 as in TinyZero-style shaping).
        dataset: A JSONL (or JSON list) of instances to draw from instead of generating them
            (:func:`load_countdown`: TinyZero's ``nums`` and ``target``); ``options={"task_index": i}``
            picks one.
        use_all_numbers: Every number must be used exactly once, as TinyZero's grader asks
            (default: each at most once).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("Countdown-v0", num_numbers=4)
        >>> obs, info = env.reset(seed=0)
    """

    def __init__(
        self,
        num_numbers: int = 4,
        format_reward: float = 0.0,
        dataset: str | Path | None = None,
        use_all_numbers: bool = False,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=1, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        if not isinstance(num_numbers, int) or not MIN_NUMBERS <= num_numbers <= MAX_NUMBERS:
            raise ConfigError(f"num_numbers={num_numbers!r} is not allowed; choose an integer from {MIN_NUMBERS} to {MAX_NUMBERS}.")
        if not isinstance(use_all_numbers, bool):
            raise ConfigError(f"use_all_numbers={use_all_numbers!r} must be True or False.")
        self.num_numbers = num_numbers
        self.format_reward = float(format_reward)
        self.use_all_numbers = use_all_numbers
        self.dataset = None if dataset is None else str(dataset)
        self._instances = load_countdown(dataset) if dataset is not None else ()

    @property
    def num_tasks(self) -> int | None:
        """Number of instances of the data set, or ``None`` for the (unbounded) generator."""
        return len(self._instances) or None

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        if self._instances:
            numbers, target = self._instances[self._task_index(options, len(self._instances))]
            numbers = list(numbers)
            expression = ""  # the data sets give none: the expert searches
        elif "task_index" in options:
            raise ConfigError("Countdown-v0 generates instances by seed; options['task_index'] is not supported (it is with dataset=).")
        else:
            numbers, target, expression = generate_instance(self.np_random, self.num_numbers)
        listed = ", ".join(map(str, numbers))
        rule = "each number exactly once" if self.use_all_numbers else "each number at most once (you need not use all)"
        prompt = (
            f"Using the numbers [{listed}], write an expression that equals {target}.\n"
            f"You may use + - * / and parentheses; {rule}.\n"
            "Give the expression in \\boxed{}."
        )
        digest = hashlib.sha1(f"{numbers}->{target}".encode()).hexdigest()[:12]
        return Task(f"countdown-{len(numbers)}-{digest}", prompt, expression, {"numbers": numbers, "target": target})

    def _judge(self, action: str) -> Judgement:
        numbers, target = self.task.metadata["numbers"], self.task.metadata["target"]
        text = extract_expression(action)
        if text is None:
            return self._verdict(0.0, Status.UNPARSEABLE, None, "no expression found")
        try:
            result = evaluate(text)
        except ExpressionError as err:
            return self._verdict(0.0, Status.UNPARSEABLE, text, str(err))
        extra = Counter(result.numbers) - Counter(numbers)
        if extra:
            return self._verdict(0.0, Status.FORMAT_ERROR, text, f"uses numbers not available: {sorted(extra.elements())}")
        unused = Counter(numbers) - Counter(result.numbers)
        if self.use_all_numbers and unused:
            return self._verdict(0.0, Status.FORMAT_ERROR, text, f"leaves numbers unused: {sorted(unused.elements())} (each must be used once)")
        if result.value == target:
            return self._verdict(1.0, Status.CORRECT, text, "reaches the target")
        return self._verdict(self.format_reward, Status.WRONG, text, f"evaluates to {result.value}, not {target}")

    @staticmethod
    def _verdict(reward: float, status: Status, expression: str | None, note: str) -> Judgement:
        correct = status is Status.CORRECT
        return Judgement(
            reward=reward,
            status=status,
            done=True,
            reward_breakdown={"correctness": float(correct), "format": reward - float(correct)},
            correct=correct,
            info={"extracted_expression": expression, "feedback": note},
        )

    def expert_action(self) -> str | None:
        """A solution found by the exhaustive solver (for SFT and tests); ``None`` for a data set's
        instance it cannot solve (one needing fractions on the way, or none at all)."""
        found = solve(self.task.metadata["numbers"], self.task.metadata["target"], self.use_all_numbers) or self.task.answer
        return f"\\boxed{{{found}}}" if found else None
