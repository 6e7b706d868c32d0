"""Math answer verifier: extraction, an exact numeric fast path, math-verify for the rest.

Design (see ``docs/rewards.md``):

* The final answer is extracted in-process in linear time (:mod:`mathgym.rewards.extract`).
* When gold and answer are both plain numbers (integers, decimals, fractions, percentages,
  thousands separators), the verdict is computed in-process with exact arithmetic, under
  the same rules math-verify applies to those numbers; where its rules are subtle (a
  float within rounding distance of a fraction), the sample goes to math-verify instead.
* Everything else goes to math-verify — gold first, since ``verify(gold, answer)`` is
  asymmetric — in a helper process whose deadline this module owns: math-verify runs
  with its SIGALRM timeouts disabled, and a helper that misses the deadline is killed and
  replaced. So a hostile expression returns ``status="timeout"`` from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

from mathgym.errors import ConfigError
from mathgym.rewards._procpool import WorkerTimeout, pool_for
from mathgym.rewards.base import RewardResult, Status
from mathgym.rewards.extract import DEFAULT_FORMATS, AnswerFormat, extract_answer

_WORKER_SCRIPT = str(Path(__file__).with_name("_math_worker.py"))
_INTEGER = r"(?:\d{1,3}(?:,\d{3})+|0|[1-9]\d*)"
_NUMBER = re.compile(rf"^(?P<sign>[+-]?)(?P<int>{_INTEGER})(?:\.(?P<frac>\d+))?$")
_FRACTION = re.compile(r"^(?P<sign>[+-]?)(?:\\[dt]?frac\{(?P<n1>\d+)\}\{(?P<d1>\d+)\}|(?P<n2>\d+)/(?P<d2>\d+))$")
_CURRENCY = ("\\$", "$")
_PERCENT = ("\\%", "%")
_MAX_NUMBER_CHARS = 40
#: Significant digits up to which a decimal compares like math-verify's 15-digit floats.
_MAX_DECIMAL_DIGITS = 14


class Numeric(NamedTuple):
    """A plain number as written: its exact value and how math-verify will type it."""

    value: Fraction
    is_float: bool  # written with a decimal point (a sympy Float for math-verify)
    percent: bool

    @property
    def effective(self) -> Fraction:
        return self.value / 100 if self.percent else self.value


def parse_numeric(text: str) -> Numeric | None:
    """Read ``text`` as a plain number, or ``None`` when it is anything else.

    Accepts an optional sign, ``$``/``\\$`` currency, thousands separators (``1,234`` and
    ``1{,}234``), decimals with digits on both sides of the point, ``a/b`` and
    ``\\frac{a}{b}`` of integers, and a trailing ``%``/``\\%``. Deliberately strict:
    anything unusual is left to math-verify.
    """
    text = text.strip()
    if not text or len(text) > _MAX_NUMBER_CHARS:
        return None
    text = text.replace("{,}", ",").replace("\\!", "").replace(" ", "")
    for mark in _CURRENCY:
        if text.startswith(mark):
            text = text[len(mark) :]
            break
    percent = False
    for mark in _PERCENT:
        if text.endswith(mark):
            text, percent = text[: -len(mark)], True
            break
    match = _NUMBER.match(text)
    if match:
        digits = match["int"].replace(",", "") + (match["frac"] or "")
        if match["frac"] is not None and len(digits.lstrip("0")) > _MAX_DECIMAL_DIGITS:
            return None
        value = Fraction(f"{match['sign']}{match['int'].replace(',', '')}.{match['frac'] or '0'}")
        return Numeric(value, match["frac"] is not None, percent)
    match = _FRACTION.match(text)
    if match is None or percent:
        return None
    numerator, denominator = int(match["n1"] or match["n2"]), int(match["d1"] or match["d2"])
    if denominator == 0:
        return None
    value = Fraction(numerator, denominator)
    return Numeric(-value if match["sign"] == "-" else value, False, False)


def parse_number(text: str) -> Fraction | None:
    """Exact value of a plain number, fraction or percentage; ``None`` if it is not one.

    A percentage reads as its number (``12%`` is 12, as GSM8K writes percentages).

    Example:
        >>> parse_number("1,234.5")
        Fraction(2469, 2)
    """
    found = parse_numeric(text)
    return None if found is None else found.value


def numeric_verdict(gold: Numeric, answer: Numeric) -> bool | None:
    """math-verify's verdict on two plain numbers, or ``None`` where it is not certain.

    math-verify compares two integers (percent or not) by their written values (``25%``
    equals ``25``) or by value (``100%`` equals ``1``), otherwise by value (``25%`` equals ``0.25`` and ``1/4``); a float is
    compared after rounding to 6 decimals, which is where this returns ``None``.
    """
    g_int = not gold.is_float and gold.value.denominator == 1
    a_int = not answer.is_float and answer.value.denominator == 1
    if (gold.percent or answer.percent) and g_int and a_int:
        return gold.value == answer.value or gold.effective == answer.effective
    if gold.effective == answer.effective:
        return True
    if not (gold.is_float or answer.is_float or gold.percent or answer.percent):
        return False  # exact rationals: sympy compares them exactly
    if gold.percent or answer.percent:
        return None
    difference = abs(gold.effective - answer.effective)
    scale = max(abs(gold.effective), abs(answer.effective), Fraction(1))
    return False if difference > Fraction(1, 10**5) * scale else None


@dataclass
class MathVerifier:
    """Scores a model's text against a gold answer: 1.0 when the final answer is right.

    Args:
        formats: Where to look for the final answer, in order (``boxed``, ``gsm8k``,
            ``answer_is``).
        timeout: Seconds allowed to math-verify for one sample (in any thread).
        fast_path: Decide plain numbers in-process (same verdicts, much faster).
        max_answer_chars: Longer extracted answers are ``unparseable`` without parsing.
        workers: Helper processes running math-verify (shared by every verifier of a
            process with the same setting); also the parallelism of :meth:`score_batch`.
        name: Component name in a reward breakdown.

    Example:
        >>> MathVerifier().score("... \\\\boxed{42}", "42").status
        <Status.CORRECT: 'correct'>
    """

    formats: Sequence[AnswerFormat] = DEFAULT_FORMATS
    timeout: float = 5.0
    fast_path: bool = True
    max_answer_chars: int = 1000
    workers: int = 2
    name: str = "correctness"

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ConfigError(f"timeout={self.timeout!r} must be a positive number of seconds.")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers={self.workers!r} must be a positive integer.")

    def score(self, completion: str, gold: str) -> RewardResult:
        """Score one completion against its gold answer."""
        early = self._prepare(completion, gold)
        return early if isinstance(early, RewardResult) else self._math_verify(*early)

    def score_batch(self, completions: Sequence[str], golds: Sequence[str]) -> list[RewardResult]:
        """Score many completions; math-verify work is pipelined to ``workers`` helpers at once."""
        if len(completions) != len(golds):
            raise ConfigError(f"got {len(completions)} completions but {len(golds)} gold answers.")
        prepared = [self._prepare(c, g) for c, g in zip(completions, golds)]
        pending = [i for i, p in enumerate(prepared) if not isinstance(p, RewardResult)]
        results: list[RewardResult | None] = [p if isinstance(p, RewardResult) else None for p in prepared]
        groups = _groups_by_gold(pending, [prepared[i][1] for i in pending], self.workers)  # type: ignore[index]

        def check(group: list[int]) -> None:
            for i, result in zip(group, self._math_verify_many([prepared[i] for i in group])):  # type: ignore[misc]
                results[i] = result

        if len(groups) <= 1:
            for group in groups:
                check(group)
        else:
            with ThreadPoolExecutor(len(groups)) as threads:
                list(threads.map(check, groups))
        return results  # type: ignore[return-value]

    def warm_up(self) -> None:
        """Start the math-verify helpers now (else on the first non-numeric answer)."""
        pool_for(_WORKER_SCRIPT, self.workers).warm_up()

    def _prepare(self, completion: str, gold: str) -> RewardResult | tuple[str, str, str]:
        """Extraction and the fast path; returns what math-verify must check otherwise."""
        found = extract_answer(completion, self.formats)
        if found is None:
            return RewardResult(0.0, Status.UNPARSEABLE, {"extracted": None})
        answer, source = found
        if len(answer) > self.max_answer_chars:
            details = {"extracted": answer[:200], "source": source, "reason": f"answer longer than {self.max_answer_chars} characters"}
            return RewardResult(0.0, Status.UNPARSEABLE, details)
        if self.fast_path:
            gold_number, answer_number = parse_numeric(gold), parse_numeric(answer)
            if gold_number is not None and answer_number is not None:
                verdict = numeric_verdict(gold_number, answer_number)
                if verdict is not None:
                    return _verdict(verdict, {"extracted": answer, "source": source, "path": "exact"})
        return answer, gold, source

    def _math_verify(self, answer: str, gold: str, source: str) -> RewardResult:
        return self._math_verify_many([(answer, gold, source)])[0]

    def _math_verify_many(self, items: Sequence[tuple[str, str, str]]) -> list[RewardResult]:
        pool = pool_for(_WORKER_SCRIPT, self.workers)
        replies = pool.call_many([{"gold": f"${gold}$", "answer": f"${answer}$"} for answer, gold, _ in items], self.timeout)
        return [self._judge_reply(reply, *item) for reply, item in zip(replies, items)]

    def _judge_reply(self, reply: dict | Exception, answer: str, gold: str, source: str) -> RewardResult:
        details = {"extracted": answer, "source": source, "path": "math_verify"}
        if isinstance(reply, WorkerTimeout):
            return RewardResult(0.0, Status.TIMEOUT, {**details, "timeout_s": self.timeout, "seconds": self.timeout})
        if isinstance(reply, Exception):  # the helper died: infrastructure, not the model
            return RewardResult(0.0, Status.ERROR, {**details, "error": str(reply)})
        details["seconds"] = reply["_elapsed_s"]
        if "error" in reply:
            return RewardResult(0.0, Status.ERROR, {**details, "error": reply["error"]})
        if not reply["gold_parsed"]:
            return RewardResult(0.0, Status.ERROR, {**details, "error": f"math-verify could not parse the gold answer {gold!r}"})
        if not reply["answer_parsed"]:
            return RewardResult(0.0, Status.UNPARSEABLE, details)
        return _verdict(reply["verdict"], details)


def _groups_by_gold(indices: list[int], golds: list[str], count: int) -> list[list[int]]:
    """Split samples into ``count`` balanced groups, all samples of one gold in one group.

    Each group goes through one helper process, so a gold answer is parsed (and kept in
    math-verify's own cache) by one helper rather than by each of them.
    """
    by_gold: dict[str, list[int]] = {}
    for index, gold in zip(indices, golds):
        by_gold.setdefault(gold, []).append(index)
    groups: list[list[int]] = [[] for _ in range(min(count, len(by_gold)))]
    for members in sorted(by_gold.values(), key=len, reverse=True):
        min(groups, key=len).extend(members)
    return [sorted(group) for group in groups if group]


def _verdict(ok: bool, details: dict) -> RewardResult:
    return RewardResult(float(ok), Status.CORRECT if ok else Status.WRONG, details)
