"""MATH-500's own reference solutions score 1.0 against their own answers, in every mode.

A reference is the data set's ``solution`` (its last ``\\boxed{}`` holds the answer) and,
separately, the bare ``\\boxed{answer}``; the gold goes through
:func:`~mathgym.rewards.math.latex_gold` as the math envs pass it. Checked with the fast
path on and off, in strict and lenient extraction. The answers with commas, intervals,
tuples and sets (``-2,1`` "enter all roots separated by commas", ``(3,4]``,
``10,\\!080``) are also in ``tests/data/math500_tricky.jsonl``, a quick check of their own;
the whole of MATH-500 ships in ``tests/data/math500_test.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mathgym.envs.math.data import load_jsonl
from mathgym.rewards import MathVerifier
from mathgym.rewards.math import ANSWER_EXTRACTIONS, latex_gold

TRICKY = Path(__file__).parents[1] / "data" / "math500_tricky.jsonl"
MATH500 = Path(__file__).parents[1] / "data" / "math500_test.jsonl"
MODES = [(fast, mode) for fast in (True, False) for mode in ANSWER_EXTRACTIONS]


def _misses(path: Path, fast_path: bool, mode: str) -> tuple[int, list]:
    """How many references were scored, and those that did not score 1.0."""
    records = load_jsonl(path)
    golds = [latex_gold(r.answer) for r in records]
    completions = [r.solution for r in records] + [f"\\boxed{{{r.answer}}}" for r in records]
    results = MathVerifier(timeout=30, fast_path=fast_path, answer_extraction=mode).score_batch(completions, golds * 2)
    misses = [(r.answer, c[-80:], res) for r, c, res in zip(records * 2, completions, results) if res.score != 1.0]
    return len(completions), misses


@pytest.mark.parametrize(("fast_path", "mode"), MODES)
def test_tricky_math500_references_score_right(fast_path, mode):
    answers = [r.answer for r in load_jsonl(TRICKY)]
    assert len(answers) == 34 and {"-2,1", "1,-2", "10,\\!080", "(3,4]", "3, 5, 7"} <= set(answers)
    scored, misses = _misses(TRICKY, fast_path, mode)
    assert scored == 68 and not misses, misses


@pytest.mark.parametrize(("fast_path", "mode"), MODES)
def test_every_math500_reference_scores_right(fast_path, mode):
    scored, misses = _misses(MATH500, fast_path, mode)
    assert scored == 1000 and not misses, misses
