"""SQLQuery-v0's tolerant comparison of an answer's rows with the gold rows (generated tasks).

Two cells are the same when both are numbers within :data:`FLOAT_TOLERANCE` of each other
(or a relative :data:`RELATIVE_TOLERANCE`; ``2 == 2.0``), or else of the same type and equal
(``NULL`` equals ``NULL``; ``'2'`` is not ``2``). Rows are the same when their cells are, in
order. A result matches the gold one, for some order of its columns:

* ``ordered``: row by row;
* ``multiset``: each gold row, in order, takes the first candidate row not taken yet that is
  the same as it; every gold row must find one, and no candidate row may be left;
* ``set``: the same as ``multiset`` after each side keeps only the first of rows that are the
  same as one kept before it.

Tolerance is not transitive, so these first-come rules decide (as they always have here) what
a chain of values 0.005 apart means. They are computed through an index of the rows by
bucket (:class:`_RowIndex`): a row is compared only with the few rows whose numbers fall in the
buckets its own can match, so a comparison costs about linear time in the rows, where comparing
every row with every other took quadratic time (101 s for 10,000 distinct rows).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from mathgym.envs.sql.sql_tasks import Compare

#: Two numbers are equal when they differ by at most this much (a result rounded to two decimals passes).
FLOAT_TOLERANCE = 0.005 + 1e-9
#: ... or by at most this share of the larger one.
RELATIVE_TOLERANCE = 1e-9
#: Width of a number's bucket: wider than FLOAT_TOLERANCE, so a number's matches lie in the
#: buckets of ``value - tolerance`` to ``value + tolerance`` (at most three in a row).
_BUCKET_WIDTH = 0.01
#: Numbers from 1e6 up (and down from -1e6) share one bucket per sign: there the relative
#: tolerance would outgrow a bucket, and such values are rare in the results compared.
_LAST_BUCKET = 10**8
#: A NaN's bucket (SQLite returns NULL where a NaN would be, so only a caller's rows hold one).
_NAN_BUCKET = "nan"
#: Numeric columns bucketed in a row's key; the other cells of a wider row are compared one by one.
_INDEXED_NUMBERS = 3

Row = Sequence[Any]


def same_cell(a: Any, b: Any) -> bool:
    """Whether two cells are the same (see the module's docstring)."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
    return type(a) is type(b) and a == b


def same_row(a: Row, b: Row) -> bool:
    """Whether two rows are the same, cell by cell."""
    return len(a) == len(b) and all(same_cell(x, y) for x, y in zip(a, b))


def _bucket(value: float) -> int | str:
    """The bucket of a number: non-decreasing in ``value``, so a range of values maps to a range of buckets."""
    if value != value:
        return _NAN_BUCKET
    if value >= _LAST_BUCKET * _BUCKET_WIDTH:
        return _LAST_BUCKET
    if value <= -_LAST_BUCKET * _BUCKET_WIDTH:
        return -_LAST_BUCKET
    return math.floor(value / _BUCKET_WIDTH)


def _buckets_near(value: float) -> list[int | str]:
    """Every bucket that holds a number :func:`same_cell` as ``value``."""
    if not math.isfinite(value):
        return [_bucket(value)]
    # |a - b| <= rel * max(|a|, |b|) bounds |a - b| by rel * |a| / (1 - rel); the slack covers rounding.
    reach = max(RELATIVE_TOLERANCE * abs(value) / (1 - RELATIVE_TOLERANCE), FLOAT_TOLERANCE) * (1 + 1e-6)
    low, high = _bucket(value - reach), _bucket(value + reach)
    return list(range(int(low), int(high) + 1))


def _cell_key(value: Any) -> Hashable:
    """What a non-number cell must share with a cell that is the same as it."""
    try:
        hash(value)
    except TypeError:  # not a SQLite value: the row-by-row check decides
        return ("other", type(value))
    return ("other", type(value), value)


def _key_choices(row: Row) -> list[list[Hashable]]:
    """For each cell of ``row``, the keys a cell the same as it may have (one for a stored row's own)."""
    choices: list[list[Hashable]] = []
    numbers = 0
    for value in row:
        if isinstance(value, (int, float)):
            numbers += 1
            choices.append([("number", b) for b in _buckets_near(float(value))] if numbers <= _INDEXED_NUMBERS else [("number",)])
        else:
            choices.append([_cell_key(value)])
    return choices


def _own_key(row: Row) -> tuple[Hashable, ...]:
    """The key ``row`` is stored under."""
    keys: list[Hashable] = []
    numbers = 0
    for value in row:
        if isinstance(value, (int, float)):
            numbers += 1
            keys.append(("number", _bucket(float(value))) if numbers <= _INDEXED_NUMBERS else ("number",))
        else:
            keys.append(_cell_key(value))
    return tuple(keys)


class _RowIndex:
    """Rows by key, each key's row numbers in increasing order; rows can be taken out."""

    def __init__(self, rows: Sequence[Row] = ()):
        self.rows: list[Row] = []
        self._by_key: dict[tuple[Hashable, ...], list[int]] = {}
        for row in rows:
            self.add(row)

    def add(self, row: Row) -> None:
        self._by_key.setdefault(_own_key(row), []).append(len(self.rows))
        self.rows.append(row)

    def first_same(self, row: Row) -> int | None:
        """The lowest number of a stored row :func:`same_row` as ``row``, or ``None``."""
        best: int | None = None
        for key in itertools.product(*_key_choices(row)):
            for number in self._by_key.get(key, ()):
                if best is not None and number > best:
                    break
                if same_row(self.rows[number], row):
                    best = number
                    break
        return best

    def take(self, number: int) -> None:
        """Take stored row ``number`` out (it is no longer found)."""
        self._by_key[_own_key(self.rows[number])].remove(number)


def distinct_rows(rows: Sequence[Row], limit: int | None = None) -> list[Row] | None:
    """``rows`` without those the same as a row kept before them; ``None`` as soon as more than ``limit`` are kept.

    Example:
        >>> distinct_rows([(1.0,), (1.004,), (2,)])
        [(1.0,), (2,)]
    """
    index = _RowIndex()
    for row in rows:
        if index.first_same(row) is None:
            index.add(row)
            if limit is not None and len(index.rows) > limit:
                return None
    return index.rows


def _first_come_match(candidate: Sequence[Row], gold: Sequence[Row]) -> bool:
    """Whether each gold row, in order, takes the first candidate row left that is the same as it."""
    index = _RowIndex(candidate)
    for row in gold:
        number = index.first_same(row)
        if number is None:
            return False
        index.take(number)
    return True


def _rows_match(candidate: Sequence[Row], gold: Sequence[Row], compare: Compare) -> bool:
    if len(candidate) != len(gold):
        return False
    if compare == "ordered":
        return all(same_row(c, g) for c, g in zip(candidate, gold))
    return _first_come_match(candidate, gold)


def _column_orders(width: int) -> Iterator[tuple[int, ...]]:
    return itertools.permutations(range(width))


def results_match(candidate: Sequence[Row], gold: Sequence[Row], compare: Compare) -> tuple[bool, str]:
    """Whether a result equals the gold one (columns in any order); and, when not, why.

    Example:
        >>> results_match([("Oslo", 2), ("Lima", 3.0)], [(3, "Lima"), (2, "Oslo")], "multiset")
        (True, '')
    """
    width = len(gold[0]) if gold else 0
    if candidate and len(candidate[0]) != width:
        return False, f"the result has {len(candidate[0])} columns; the question asks for {width}"
    differ = "the rows differ from the expected result" + (" (in this order)" if compare == "ordered" else "")
    if compare == "set":
        # Keeping a row or not does not depend on the order of the columns: de-duplicate once;
        # past the gold's count the sets differ, so stop there.
        gold = distinct_rows(gold) or []
        kept = distinct_rows(candidate, limit=len(gold))
        if kept is None:
            return False, differ
        candidate = kept
    for order in _column_orders(width):
        if _rows_match([tuple(row[k] for k in order) for row in candidate], gold, compare):
            return True, ""
    return False, differ
