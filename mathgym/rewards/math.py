"""Math answer verifier: math-verify's verdicts, with an in-process fast path for plain numbers.

Design (see ``docs/rewards.md``):

* The verdict is math-verify's, read the way math-verify reads by default:
  ``verify(parse(gold), parse(completion))`` with the *whole* completion, gold first
  (``verify`` is asymmetric). The gold is first read as a data set's answer
  (:func:`~mathgym.rewards.math_gold.gold_forms`: bare LaTeX as LaTeX, a GSM8K ``####`` or
  ``\\boxed{}`` gold as its marked answer, a list of forms matched by any), on every call:
  every entry point that takes a gold reaches the same verdict on the same pair.
* Two modes (``answer_extraction``). ``"lenient"``: exactly that. ``"strict"`` (the
  default): the completion must also carry a final-answer marker (a non-empty last
  ``\\boxed{}``, or one of the declared formats: GSM8K ``####``, "the answer is"); no
  marker is ``unparseable``, an empty last box a ``format_error``. Where there is a marker
  the verdict is the same as in lenient mode.
* The fast path (:mod:`mathgym.rewards.math_fast`) decides in-process only completions
  whose shape proves what math-verify extracts (a plain number; a boxed or ``$…$``
  fraction, radical, multiple of π, percentage, set, interval, tuple, matrix, word,
  inequality, equation or polynomial; several boxes; a number with words), with exact
  arithmetic, and only where math-verify's comparison of the two is certain.
* Everything else goes to math-verify in a helper process whose deadline this module
  owns: math-verify runs with its SIGALRM timeouts disabled, and a helper that misses the
  deadline is killed and replaced. So a hostile expression returns ``status="timeout"``
  from any thread.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from mathgym.errors import ConfigError, require_option
from mathgym.spaces import DEFAULT_MAX_LENGTH
from mathgym.rewards._procpool import WorkerTimeout, pool_for
from mathgym.rewards.base import RewardResult, Status
from mathgym.rewards.extract import DEFAULT_FORMATS, AnswerFormat, boxed_contents, extract_answer
from mathgym.rewards.math_fast import Numeric, fast_decision, fast_gold, numeric_verdict
from mathgym.rewards.math_gold import answer_forms, gold_forms, latex_gold
from mathgym.rewards.math_plain_text import SomeRational
from mathgym.rewards.math_polynomials import Polynomial
from mathgym.rewards.math_relations import Answer, Relation
from mathgym.rewards.math_values import Scalar

__all__ = [
    "ANSWER_EXTRACTIONS", "AnswerExtraction", "MathVerifier", "Numeric", "answer_forms", "best_of_forms", "gold_forms", "labels_verifier",
    "latex_gold", "numeric_verdict", "parse_number", "parse_numeric",
]

AnswerExtraction = Literal["strict", "lenient"]
ANSWER_EXTRACTIONS: tuple[AnswerExtraction, ...] = ("strict", "lenient")
_WORKER_SCRIPT = str(Path(__file__).with_name("_math_worker.py"))
_INTEGER = r"(?:\d{1,3}(?:,\d{3})+|0|[1-9]\d*)"
_NUMBER = re.compile(rf"^(?P<sign>[+-]?)(?P<int>{_INTEGER})(?:\.(?P<frac>\d+))?$", re.ASCII)
_FRACTION = re.compile(r"^(?P<sign>[+-]?)(?:\\[dt]?frac\{(?P<n1>\d+)\}\{(?P<d1>\d+)\}|(?P<n2>\d+)/(?P<d2>\d+))$", re.ASCII)
_CURRENCY = ("\\$", "$")
_PERCENT = ("\\%", "%")
_MAX_NUMBER_CHARS = 40
#: Significant digits up to which a decimal compares like math-verify's 15-digit floats.
_MAX_DECIMAL_DIGITS = 14


def best_of_forms(results: Sequence[RewardResult]) -> RewardResult:
    """The verdict against an answer in several forms (:func:`answer_forms`): the first result
    that scores full marks, else the first form's."""
    return next((result for result in results if result.score >= 1.0), results[0])


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


@dataclass
class MathVerifier:
    """Scores a model's text against a gold answer: 1.0 when the final answer is right.

    The verdict is math-verify's on the whole completion (gold first). ``details`` says
    which path decided (``"exact"``: the in-process fast path; ``"math_verify"``), the
    mode, the marker found (``source``) and the answer read (``extracted``).

    Args:
        answer_extraction: ``"strict"`` (default): the answer must be marked (last
            ``\\boxed{}``, or one of ``formats``); no marker is ``unparseable``, an empty
            last box ``format_error``. ``"lenient"``: math-verify's own extraction of the
            whole completion, marker or not (for scoring other people's prompts).
        formats: The markers strict mode accepts, in order (``boxed``, ``gsm8k``,
            ``answer_is``).
        timeout: Seconds allowed to math-verify for one sample (in any thread).
        fast_path: Decide plain numbers and MATH-style boxed answers in-process (same
            verdicts, much faster).
        max_answer_chars: In strict mode, a longer marked answer is ``unparseable``.
        max_completion_chars: Longer completions are ``unparseable`` unless the fast path
            decides them (math-verify is not given a megabyte of text). The default is every
            env's bound (:data:`~mathgym.spaces.DEFAULT_MAX_LENGTH`, a 32k-token answer), so a
            reasoning model's long answer is graded, not refused.
        workers: Helper processes running math-verify (shared by every verifier of a
            process with the same setting); also the parallelism of :meth:`score_batch`.
        name: Component name in a reward breakdown.

    Example:
        >>> MathVerifier().score("... \\\\boxed{42}", "42").status
        <Status.CORRECT: 'correct'>
        >>> MathVerifier(answer_extraction="lenient").score("Answer $9$", "9").status
        <Status.CORRECT: 'correct'>
        >>> MathVerifier().score("so \\\\boxed{3\\\\sqrt{13}}", "3\\\\sqrt{13}").status  # a MATH gold, bare LaTeX
        <Status.CORRECT: 'correct'>
    """

    formats: Sequence[AnswerFormat] = DEFAULT_FORMATS
    timeout: float = 5.0
    fast_path: bool = True
    max_answer_chars: int = 1000
    workers: int = 2
    name: str = "correctness"
    answer_extraction: AnswerExtraction = "strict"
    max_completion_chars: int = DEFAULT_MAX_LENGTH

    def __post_init__(self) -> None:
        require_option("answer_extraction", self.answer_extraction, ANSWER_EXTRACTIONS)
        if not self.timeout > 0:
            raise ConfigError(f"timeout={self.timeout!r} must be a positive number of seconds.")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers={self.workers!r} must be a positive integer.")

    def score(self, completion: str, gold: Any) -> RewardResult:
        """Score one completion against its gold answer, read as :meth:`score_batch` reads it."""
        return self._score_golds([completion], [gold])[0]

    def score_batch(self, completions: Sequence[str], golds: Sequence[Any]) -> list[RewardResult]:
        """Score many completions; math-verify work is pipelined to ``workers`` helpers at once.

        Each gold is read as a data set's answer (:func:`~mathgym.rewards.math_gold.gold_forms`):
        bare LaTeX (``3\\sqrt{13}``) as LaTeX, a GSM8K ``#### 18`` or a ``\\boxed{}`` as the
        answer it marks, a list of forms (or a JSON list in a string) matched by any.
        """
        if len(completions) != len(golds):
            raise ConfigError(f"got {len(completions)} completions but {len(golds)} gold answers.")
        return self._score_golds(completions, golds)

    def score_references(self, completions: Sequence[str], references: Sequence[Any]) -> list[RewardResult]:
        """The same as :meth:`score_batch` (which reads every gold as a data set's reference answer)."""
        return self.score_batch(completions, references)

    def _score_golds(self, completions: Sequence[str], golds: Sequence[Any]) -> list[RewardResult]:
        """Each completion against every form of its gold (:func:`~mathgym.rewards.math_gold.gold_forms`),
        the best verdict kept: the one gold reader of every entry point."""
        forms = [gold_forms(gold) for gold in golds]
        flat = self._score_pairs([c for c, each in zip(completions, forms) for _ in each], [f for each in forms for f in each])
        results, start = [], 0
        for each in forms:
            results.append(best_of_forms(flat[start : start + len(each)]))
            start += len(each)
        return results

    def _score_pairs(self, completions: Sequence[str], golds: Sequence[str]) -> list[RewardResult]:
        """Score each completion against one gold already read (:func:`~mathgym.rewards.math_gold.read_gold`)."""
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

    def batch_key(self) -> tuple[Any, ...]:
        """Verifiers of equal settings score each other's pairs (one vector-env step's envs, each
        with a verifier of its own: :mod:`mathgym.envs.ahead`)."""
        return (type(self), *(repr(getattr(self, f.name)) for f in fields(self)))

    def warm_up(self) -> None:
        """Start the math-verify helpers now (else on the first non-numeric answer)."""
        pool_for(_WORKER_SCRIPT, self.workers).warm_up()

    def _prepare(self, completion: str, gold: str) -> RewardResult | tuple[str, str, dict]:
        """The marker gate and the fast path; else what math-verify must check, with details."""
        details: dict = {"mode": self.answer_extraction}
        if self.answer_extraction == "strict":
            refused = self._strict_marker(completion, details)
            if refused is not None:
                return refused
        if self.fast_path:
            gold_value = fast_gold(gold)
            decided = fast_decision(gold_value, completion) if gold_value is not None else None
            if decided is not None:
                verdict, shape, answer = decided
                if shape == "nothing":  # math-verify reads nothing: unparseable, as on its own path
                    return RewardResult(0.0, Status.UNPARSEABLE, {**details, "path": "exact", "shape": shape, "extracted": None})
                return _verdict(verdict, {**details, "path": "exact", "shape": shape, "extracted": _show(answer)})
        if len(completion) > self.max_completion_chars:
            reason = f"completion longer than {self.max_completion_chars} characters"
            return RewardResult(0.0, Status.UNPARSEABLE, {**details, "extracted": None, "reason": reason})
        return completion, gold, details

    def _strict_marker(self, completion: str, details: dict) -> RewardResult | None:
        """Record the marker in ``details``; a result when strict mode refuses the text."""
        boxes = boxed_contents(completion) if "boxed" in self.formats else []
        if boxes and not boxes[-1].strip():
            details.update(extracted=None, source="boxed", reason="the last \\boxed{} is empty")
            return RewardResult(0.0, Status.FORMAT_ERROR, details)
        if boxes and self.formats[0] == "boxed":
            found: tuple[str, str] | None = (boxes[-1].strip(), "boxed")
        else:  # no box, or other formats first: the scan for boxes is not repeated
            found = extract_answer(completion, [f for f in self.formats if f != "boxed" or boxes])
        if found is None:
            details.update(extracted=None, reason=f"no final-answer marker ({', '.join(self.formats)})")
            return RewardResult(0.0, Status.UNPARSEABLE, details)
        answer, details["source"] = found
        if len(answer) > self.max_answer_chars:
            details.update(extracted=answer[:200], reason=f"answer longer than {self.max_answer_chars} characters")
            return RewardResult(0.0, Status.UNPARSEABLE, details)
        return None

    def _math_verify_many(self, items: Sequence[tuple[str, str, dict]]) -> list[RewardResult]:
        pool = pool_for(_WORKER_SCRIPT, self.workers)
        replies = pool.call_many([{"gold": gold, "answer": completion} for completion, gold, _ in items], self.timeout)
        return [self._judge_reply(reply, gold, details) for reply, (_, gold, details) in zip(replies, items)]

    def _judge_reply(self, reply: dict | Exception, gold: str, details: dict) -> RewardResult:
        details = {**details, "path": "math_verify"}
        if isinstance(reply, WorkerTimeout):
            return RewardResult(0.0, Status.TIMEOUT, {**details, "timeout_s": self.timeout, "seconds": self.timeout})
        if isinstance(reply, Exception):  # the helper died: infrastructure, not the model
            return RewardResult(0.0, Status.ERROR, {**details, "error": str(reply)})
        details["seconds"] = reply["_elapsed_s"]
        if "error" in reply:
            return RewardResult(0.0, Status.ERROR, {**details, "error": reply["error"]})
        details.update(extracted=reply["extracted"], gold_as_latex=reply["gold_as_latex"] or details.get("gold_as_latex", False))
        if not reply["gold_parsed"]:
            error = f"math-verify could not parse the gold answer {gold!r}"
            return RewardResult(0.0, Status.ERROR, {**details, "error": error})
        if not reply["verdict"] and not reply["answer_parsed"]:
            return RewardResult(0.0, Status.UNPARSEABLE, details)
        return _verdict(reply["verdict"], details)


@functools.lru_cache(maxsize=1)
def labels_verifier() -> MathVerifier:
    """The one :class:`MathVerifier` (``"lenient"``) that the trainers' reward functions share to
    grade other people's labels (verl's ``compute_score``, OpenRLHF's ``reward_func``, TRL's
    ``math_reward``): they score prompts whose answer format mathgym does not control."""
    return MathVerifier(answer_extraction="lenient")


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


def _show(value: Answer | SomeRational) -> str:
    """The value read, for ``details["extracted"]``: ``42``, ``0.5``, ``3/4``, ``2*sqrt(3)``, ``x >= 3``, ``1 + 2*x^1``."""
    if isinstance(value, SomeRational):
        return "a rational number, or nothing"
    if isinstance(value, Relation):
        return " and ".join(f"{value.variable} {op} {_show(bound)}" for op, bound in value.links)
    if isinstance(value, Polynomial):
        return " + ".join(f"{c}*{value.variable}^{k}" if k else str(c) for k, c in enumerate(value.coefficients) if c)
    if isinstance(value, Scalar):
        if value.rational is not None:
            shown = str(float(value.rational)) if value.is_float else str(value.rational)
            return shown + "%" if value.percent else shown
        return " + ".join(f"{c}" + (f"*sqrt({r})" if r != 1 else "") + (f"*pi^{k}" if k else "") for r, k, c in value.terms)
    return repr(value)[:200]


def _verdict(ok: bool, details: dict) -> RewardResult:
    return RewardResult(float(ok), Status.CORRECT if ok else Status.WRONG, details)
