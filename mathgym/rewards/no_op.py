"""Partial credit counted from what doing nothing earns (issue 48).

Some checks of a task hold for any reply that does nothing: a test ``assert f([]) == 0`` passes
for a function that returns 0 whatever it is given; "do not use commas" holds for "I don't
know.". Like SWE-bench's pass-to-pass tests, they must hold but earn nothing. An env that pays
partial credit pays the share of the way from the most checks a do-nothing reply meets (the
*floor*) to all of them (:func:`credit_beyond`), so every do-nothing reply earns 0.
"""

from __future__ import annotations


def credit_beyond(passed: int, total: int, floor: int) -> float:
    """The share of the way from what doing nothing passes (``floor`` checks) to every check.

    ``(passed - floor) / (total - floor)``, never below 0: each check a do-nothing reply meets
    and this one fails takes one back. 1.0 when every check passes; 0.0 otherwise when a
    do-nothing reply meets every check (the task is then all-or-nothing).

    Example:
        >>> credit_beyond(3, 5, floor=1), credit_beyond(1, 5, floor=1), credit_beyond(5, 5, floor=5)
        (0.5, 0.0, 1.0)
    """
    if passed >= total:
        return 1.0
    if total <= floor:
        return 0.0
    return max(0, passed - floor) / (total - floor)
