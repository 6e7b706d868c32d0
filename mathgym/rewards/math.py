"""Math answer verifier: extraction, an exact numeric fast path, math-verify for the rest."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from mathgym.rewards.base import RewardResult, Status
from mathgym.rewards.extract import DEFAULT_FORMATS, AnswerFormat, extract_answer

_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?$")
_STRIP = ("$", "\\$", "\\%", "%", "\\!", "{", "}", " ", "\\,", "\\text{dollars}")


def parse_number(text: str) -> Fraction | None:
    """Exact value of a plain number, fraction or percentage; ``None`` if it is not one.

    Handles ``-1,234.50``, ``3/4``, ``\\frac{3}{4}``, ``\\dfrac34``-free forms like ``12%``
    (read as 12, as GSM8K writes percentages) and ``$5``.

    Example:
        >>> parse_number("1,234.5")
        Fraction(2469, 2)
    """
    text = text.strip()
    if len(text) > 64:
        return None
    for prefix in ("\\frac", "\\dfrac", "\\tfrac"):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            if rest.startswith("{") and rest.endswith("}") and rest.count("{") == 2 and "}{" in rest:
                num, den = rest[1:-1].split("}{")
                text = f"{num}/{den}"
            break
    for token in _STRIP:
        text = text.replace(token, "")
    if text.count("/") == 1:
        num, den = (parse_number(part) for part in text.split("/"))
        if num is None or den is None or den == 0:
            return None
        return num / den
    if not text or not _NUMBER.match(text) or text in "+-.":
        return None
    return Fraction(text.replace(",", ""))


@dataclass
class MathVerifier:
    """Scores a model's text against a gold answer: 1.0 when the final answer is right.

    Args:
        formats: Where to look for the final answer, in order.
        timeout: Seconds allowed to math-verify for one sample.

    Example:
        >>> MathVerifier().score("... \\\\boxed{42}", "42").status
        <Status.CORRECT: 'correct'>
    """

    formats: Sequence[AnswerFormat] = DEFAULT_FORMATS
    timeout: float = 5.0

    def score(self, completion: str, gold: str) -> RewardResult:
        found = extract_answer(completion, self.formats)
        if found is None:
            return RewardResult(0.0, Status.UNPARSEABLE, {"extracted": None})
        answer, source = found
        gold_value, answer_value = parse_number(gold), parse_number(answer)
        if gold_value is not None and answer_value is not None:
            ok = gold_value == answer_value
            return RewardResult(float(ok), Status.CORRECT if ok else Status.WRONG, {"extracted": answer, "path": "exact", "source": source})
        return self._math_verify(answer, gold, source)

    def _math_verify(self, answer: str, gold: str, source: str) -> RewardResult:
        from math_verify import parse, verify  # noqa: PLC0415 - loads sympy/antlr lazily

        try:
            gold_parsed = parse(f"${gold}$", parsing_timeout=None)
            answer_parsed = parse(f"${answer}$", parsing_timeout=None)
            if not answer_parsed:
                return RewardResult(0.0, Status.UNPARSEABLE, {"extracted": answer, "path": "math_verify"})
            ok = bool(verify(gold_parsed, answer_parsed, timeout_seconds=None))
        except Exception as err:  # a verifier crash is infrastructure, not the model's fault
            return RewardResult(0.0, Status.ERROR, {"extracted": answer, "error": repr(err)})
        return RewardResult(float(ok), Status.CORRECT if ok else Status.WRONG, {"extracted": answer, "path": "math_verify", "source": source})
