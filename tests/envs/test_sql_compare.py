"""SQLQuery-v0's tolerant result comparison: the verdicts of the pairwise rules, in about linear work."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from mathgym.envs.sql.sql_compare import FLOAT_TOLERANCE, distinct_rows, results_match


# -- the pairwise rules, as SQLQuery-v0 compared results before the index: the reference ----------


def _reference_same_cell(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=FLOAT_TOLERANCE)
    return type(a) is type(b) and a == b


def _reference_same_row(a, b):
    return len(a) == len(b) and all(_reference_same_cell(x, y) for x, y in zip(a, b))


def _reference_unique(rows):
    kept = []
    for row in rows:
        if not any(_reference_same_row(row, k) for k in kept):
            kept.append(row)
    return kept


def _reference_rows_match(candidate, gold, compare):
    if compare == "set":
        candidate, gold = _reference_unique(candidate), _reference_unique(gold)
    if len(candidate) != len(gold):
        return False
    if compare == "ordered":
        return all(_reference_same_row(c, g) for c, g in zip(candidate, gold))
    unused = list(candidate)
    for row in gold:
        match = next((k for k, c in enumerate(unused) if _reference_same_row(c, row)), None)
        if match is None:
            return False
        unused.pop(match)
    return True


def _reference_match(candidate, gold, compare):
    width = len(gold[0]) if gold else 0
    if candidate and len(candidate[0]) != width:
        return False
    return any(_reference_rows_match([tuple(r[k] for k in order) for r in candidate], gold, compare)
               for order in itertools.permutations(range(width)))


#: Cells that sit on the rules' edges: tolerance chains 0.005 apart, bucket edges, 2 == 2.0 == True,
#: NULL, strings that look like numbers, blobs, the relative tolerance of big numbers, infinities.
EDGE_CELLS = [0, 1, 2, 2.0, True, False, 1.0, 1.004, 1.005, 1.0051, 1.009, 1.01, 1.015, 0.995, 0.999, 0.01, 0.005, -0.005,
              -0.004, None, "2", "a", "b", b"a", 999_999.996, 1_000_000.0, 1_000_000.004, 1e9, 1e9 + 0.9, 1e9 + 2,
              -1e9 - 1, 2**62, 2**62 + 1, math.inf, -math.inf, 41.666666, 41.67]


@pytest.mark.parametrize("compare", ["multiset", "set", "ordered"])
def test_verdicts_are_those_of_the_pairwise_rules(compare):
    rng = random.Random(f"sql-compare-{compare}")
    for _ in range(3000):
        width = rng.choice((1, 1, 2, 3))
        pool = rng.sample(EDGE_CELLS, 6)  # few values: duplicates and near-duplicates are common
        gold = [tuple(rng.choice(pool) for _ in range(width)) for _ in range(rng.randint(0, 5))]
        if rng.random() < 0.5:  # the gold rows again, shuffled, maybe one cell nudged within the tolerance
            candidate = [tuple(c + 0.004 if isinstance(c, float) and rng.random() < 0.3 else c for c in row) for row in gold]
            rng.shuffle(candidate)
        else:
            candidate = [tuple(rng.choice(pool) for _ in range(width)) for _ in range(rng.randint(0, 6))]
        if rng.random() < 0.2 and candidate:
            candidate = [row[::-1] for row in candidate]
        verdict = results_match(candidate, gold, compare)[0]
        assert verdict == _reference_match(candidate, gold, compare), (candidate, gold)


def test_set_deduplication_keeps_the_first_of_each_run():
    assert distinct_rows([(1.0,), (1.004,), (1.008,)]) == [(1.0,), (1.008,)]
    assert distinct_rows([(1.004,), (1.0,), (1.008,)]) == [(1.004,)]
    assert distinct_rows([(None,), (None,), ("x",), (b"x",), ("x",)]) == [(None,), ("x",), (b"x",)]
    assert distinct_rows([(i,) for i in range(100)], limit=10) is None


class CountedText(str):
    """A cell that counts how often it is compared: the comparison's work, measured without a clock."""

    comparisons = 0
    __hash__ = str.__hash__

    def __eq__(self, other):
        CountedText.comparisons += 1
        return str.__eq__(self, other)


def _rows(count):
    return [(CountedText(f"row {i}"), i * 0.37) for i in range(count)]


def _nudged(rows):
    """The rows in reverse order, each number moved within the tolerance."""
    return [(text, value + 0.004) for text, value in reversed(rows)]


CASES = {  # name: (candidate, gold, compare, verdict); pairwise, each took about 2 million cell comparisons
    "a set of distinct rows against 30": ([(CountedText(f"row {i}"), i) for i in range(2000)], _rows(30), "set", False),
    "a multiset in reverse order": (_nudged(_rows(2000)), _rows(2000), "multiset", True),
    "a set with repeated rows": (_nudged(_rows(2000)) * 2, _rows(2000), "set", True),
    "a multiset missing its last row": (_nudged(_rows(2000))[1:] + [(CountedText("other"), 0.0)], _rows(2000), "multiset", False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_comparing_many_rows_takes_about_linear_work(name):
    candidate, gold, compare, verdict = CASES[name]
    CountedText.comparisons = 0
    assert results_match(candidate, gold, compare)[0] is verdict
    assert CountedText.comparisons <= 10 * len(candidate)
