"""The one reading of a gold answer, shared by every entry point that takes one.

A data set's gold is a final answer written for people: bare LaTeX (MATH's ``3\\sqrt{13}``,
``\\frac 59``), a plain number (``18``, ``1,000``), a GSM8K solution ending in ``#### 18``,
a ``\\boxed{}`` answer, or several forms of one answer (Skywork-OR1's ``'["3", "3.0"]'``).
math-verify reads whatever it is given as it reads a completion, so bare LaTeX is misread
(``2x`` as 2, ``1 \\pm \\sqrt{19}`` as 1, ``6 - 5i`` as 6). :func:`gold_forms` turns any
such gold into the strings math-verify is given. :meth:`MathVerifier.score
<mathgym.rewards.math.MathVerifier.score>` and ``score_batch`` call it on every gold, so the
math envs, TRL's, verl's and OpenRLHF's reward functions and a user's own call reach the same
verdict on the same pair by construction, not by each caller remembering to convert.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mathgym.rewards.extract import extract_answer

__all__ = ["answer_forms", "gold_forms", "latex_gold", "read_gold"]

#: A plain number: commas only as thousands separators (groups of three digits).
_PLAIN_GOLD = re.compile(r"[-+]?(?:[1-9][0-9]{0,2}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]*\.?[0-9]+(?:/[0-9]+)?)", re.ASCII)
_DELIMITERS = ("$", "\\(", "\\[", "\\boxed")


def latex_gold(answer: str) -> str:
    """A final answer as math-verify should read it: bare LaTeX gets ``$…$``.

    math-verify's default extraction reads a gold string the way it reads a completion,
    so bare LaTeX is misread (``2x`` reads as ``2``, ``x \\geq 5`` as ``5``, ``25\\%`` as
    ``25``, the roots ``-2,1`` as −2.1) or not read (``x^2+1``). Plain numbers and ``a/b``
    stay as they are (the fast path reads them), commas in them only as thousands
    separators (``1,234,567``); text that already has a delimiter (``$``, ``\\(``,
    ``\\[``, ``\\boxed``) too.

    Example:
        >>> latex_gold("2x"), latex_gold("1,000"), latex_gold("-2,1"), latex_gold("$x$")
        ('$2x$', '1,000', '$-2,1$', '$x$')
    """
    text = answer.strip()
    if _PLAIN_GOLD.fullmatch(text) or any(mark in text for mark in _DELIMITERS):
        return text
    return f"${text}$"


def read_gold(answer: str) -> str:
    """One form of a gold answer as math-verify is given it.

    A gold that marks its own final answer is read as a completion's is: the last
    ``\\boxed{}`` (a MATH solution, ``$\\boxed{18}$``), else what follows GSM8K's ``####``.
    The answer is then :func:`latex_gold`'s. Reading a form twice changes nothing, so a
    caller that already converted its golds (the math envs) gets the same reading.

    Example:
        >>> read_gold("3\\\\sqrt{13}"), read_gold("Janet has 18.\\n#### 18"), read_gold("\\\\boxed{\\\\frac 59}")
        ('$3\\\\sqrt{13}$', '18', '$\\\\frac 59$')
    """
    marked = extract_answer(answer, ("boxed", "gsm8k"))
    return latex_gold(marked[0] if marked is not None else answer)


def answer_forms(reference: Any) -> list[str]:
    """The forms a data set gives one reference answer in; a completion matching any of them is correct.

    A list or tuple of strings, or a string holding a JSON list of strings (Skywork-OR1's
    ``'["\\frac{1}{2}", "0.5"]'``), is one answer in several forms; empty forms are dropped. Anything
    else is one form, as text (``"[0, 1]"`` is an interval, not a list of forms). A Parquet list
    column read through NumPy (an array) counts as a list.

    Example:
        >>> answer_forms('["3", "3.0"]'), answer_forms("[0, 1]"), answer_forms(7)
        (['3', '3.0'], ['[0, 1]'], ['7'])
    """
    if hasattr(reference, "tolist") and not isinstance(reference, (str, bytes)):
        reference = reference.tolist()
    forms: Any = reference
    if isinstance(reference, str) and reference.startswith("[") and reference.endswith("]"):
        try:
            forms = json.loads(reference)
        except (ValueError, RecursionError):
            forms = reference
    if isinstance(forms, (list, tuple)) and forms and all(isinstance(form, str) for form in forms):
        return [form for form in forms if form.strip()] or [""]
    return [str(reference)]


def gold_forms(reference: Any) -> list[str]:
    """Every form of a reference answer (:func:`answer_forms`), each as math-verify is given it
    (:func:`read_gold`): what :class:`~mathgym.rewards.math.MathVerifier` checks a completion
    against, whichever entry point the reference came through.

    Example:
        >>> gold_forms(["\\\\frac{1}{2}", "0.5"]), gold_forms("#### 1,000"), gold_forms(7)
        (['$\\\\frac{1}{2}$', '0.5'], ['1,000'], ['7'])
    """
    return [read_gold(form) for form in answer_forms(reference)]
