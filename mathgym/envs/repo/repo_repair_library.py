"""The functions RepoRepair-v0 builds its projects from: four packages of four modules.

Each function is real Python, short, pure, and free of ``while`` loops and recursion (so
every mutant of it ends). Its source (normalised by :func:`ast.unparse`) is what the agent
sees in the workspace; the function itself, called here, gives the expected value of each
case. ``CASES`` holds its argument tuples: the first :data:`VISIBLE_CASES` become the
visible tests, the rest the hidden ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Cases of each function that the visible test suite shows; the others are hidden.
VISIBLE_CASES = 3


# -- textkit -----------------------------------------------------------------------------


def word_count(text: str, min_length: int) -> int:
    """Number of words (runs of non-space characters) of ``text`` at least ``min_length`` long."""
    return len([word for word in text.split() if len(word) >= min_length])


def longest_word(text: str) -> str:
    """The longest word of ``text`` (the first one on a tie); "" for no word."""
    best = ""
    for word in text.split():
        if len(word) > len(best):
            best = word
    return best


def capitalize_words(text: str) -> str:
    """Each word with its first letter upper-case and the rest lower-case, one space apart."""
    return " ".join(word[:1].upper() + word[1:].lower() for word in text.split())


def snake_to_camel(name: str) -> str:
    """``"max_word_len"`` -> ``"maxWordLen"``; empty parts are dropped."""
    parts = [part for part in name.split("_") if part]
    if not parts:
        return ""
    return parts[0].lower() + "".join(part[:1].upper() + part[1:].lower() for part in parts[1:])


def camel_to_snake(name: str) -> str:
    """``"maxWordLen"`` -> ``"max_word_len"``."""
    out = []
    for index, char in enumerate(name):
        if char.isupper() and index > 0:
            out.append("_")
        out.append(char.lower())
    return "".join(out)


def is_palindrome(text: str) -> bool:
    """Whether the letters and digits of ``text`` read the same both ways, ignoring case."""
    kept = [char.lower() for char in text if char.isalnum()]
    return kept == kept[::-1]


def caesar_shift(text: str, shift: int) -> str:
    """Lower-case letters moved ``shift`` places along the alphabet (wrapping); the rest kept."""
    out = []
    for char in text:
        if "a" <= char <= "z":
            out.append(chr((ord(char) - ord("a") + shift) % 26 + ord("a")))
        else:
            out.append(char)
    return "".join(out)


def run_length_encode(text: str) -> list:
    """``"aaab"`` -> ``[["a", 3], ["b", 1]]``."""
    runs: list = []
    for char in text:
        if runs and runs[-1][0] == char:
            runs[-1][1] += 1
        else:
            runs.append([char, 1])
    return runs


def vowel_count(text: str) -> int:
    """Number of vowels (a, e, i, o, u, either case) in ``text``."""
    total = 0
    for char in text.lower():
        if char in "aeiou":
            total += 1
    return total


def truncate(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the last three being "..." when it was cut."""
    if len(text) <= width:
        return text
    if width < 3:
        return text[:width]
    return text[: width - 3] + "..."


def pad_center(text: str, width: int, fill: str) -> str:
    """``text`` centred in ``width`` characters of ``fill`` (the extra one on the right)."""
    missing = width - len(text)
    if missing <= 0:
        return text
    left = missing // 2
    return fill * left + text + fill * (missing - left)


def wrap_words(text: str, width: int) -> list:
    """Words greedily packed into lines of at most ``width`` characters (a longer word alone)."""
    lines: list = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current = current + " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


# -- stock -------------------------------------------------------------------------------


def total_quantity(items: list) -> int:
    """Sum of the quantities of ``items``, a list of ``[name, quantity]``."""
    total = 0
    for _, quantity in items:
        total += quantity
    return total


def low_stock(items: list, threshold: int) -> list:
    """Names of the items whose quantity is below ``threshold``, in order."""
    return [name for name, quantity in items if quantity < threshold]


def find_item(items: list, name: str) -> int:
    """Position of the first item called ``name``, or -1."""
    for index in range(len(items)):
        if items[index][0] == name:
            return index
    return -1


def line_total(price_cents: int, quantity: int, discount_percent: int) -> int:
    """Price of ``quantity`` units after a percentage discount, rounded down to a cent."""
    gross = price_cents * quantity
    return gross - gross * discount_percent // 100


def bulk_discount(quantity: int) -> int:
    """Discount percentage for an order size: 0 under 10, 5 from 10, 10 from 50, 20 from 100."""
    if quantity >= 100:
        return 20
    if quantity >= 50:
        return 10
    if quantity >= 10:
        return 5
    return 0


def apply_tax(cents: int, rate_percent: int) -> int:
    """``cents`` plus tax at ``rate_percent``, rounded to the nearest cent (half up)."""
    return cents + (cents * rate_percent + 50) // 100


def can_fulfil(stock: dict, order: dict) -> bool:
    """Whether ``stock`` (name -> quantity) holds every quantity ``order`` asks for."""
    for name, wanted in order.items():
        if stock.get(name, 0) < wanted:
            return False
    return True


def remaining_stock(stock: dict, order: dict) -> dict:
    """``stock`` after ``order`` is taken from it (never below zero); items left at 0 are dropped."""
    left = {}
    for name, quantity in stock.items():
        rest = quantity - order.get(name, 0)
        if rest > 0:
            left[name] = rest
    return left


def order_weight(weights: dict, order: dict) -> int:
    """Total weight of ``order``: each quantity times the item's unit weight (0 if unknown)."""
    return sum(weights.get(name, 0) * quantity for name, quantity in order.items())


def top_sellers(sales: dict, count: int) -> list:
    """The ``count`` best-selling names, most sold first, ties by name."""
    ranked = sorted(sales.items(), key=lambda pair: (-pair[1], pair[0]))
    return [name for name, _ in ranked[:count]]


def restock_plan(stock: dict, target: int) -> dict:
    """How many of each item to order to bring it up to ``target`` (items at or above it left out)."""
    plan = {}
    for name, quantity in stock.items():
        if quantity < target:
            plan[name] = target - quantity
    return plan


def value_by_category(items: list) -> dict:
    """Total value (quantity times price) per category of ``[category, quantity, price]`` items."""
    totals: dict = {}
    for category, quantity, price in items:
        totals[category] = totals.get(category, 0) + quantity * price
    return totals


# -- geom --------------------------------------------------------------------------------


def manhattan(p: tuple, q: tuple) -> int:
    """Manhattan distance between points ``p`` and ``q``."""
    return abs(p[0] - q[0]) + abs(p[1] - q[1])


def midpoint(p: tuple, q: tuple) -> tuple:
    """Midpoint of ``p`` and ``q``, each coordinate rounded down."""
    return ((p[0] + q[0]) // 2, (p[1] + q[1]) // 2)


def quadrant(p: tuple) -> int:
    """Quadrant 1-4 of point ``p`` (counter-clockwise from the top right); 0 on an axis."""
    x, y = p
    if x == 0 or y == 0:
        return 0
    if x > 0:
        return 1 if y > 0 else 4
    return 2 if y > 0 else 3


def rect_area(width: int, height: int) -> int:
    """Area of a rectangle; 0 when a side is not positive."""
    if width <= 0 or height <= 0:
        return 0
    return width * height


def overlap_area(a: tuple, b: tuple) -> int:
    """Area shared by rectangles ``(x1, y1, x2, y2)`` (``x1 < x2``, ``y1 < y2``)."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0
    return width * height


def triangle_kind(a: int, b: int, c: int) -> str:
    """"equilateral", "isosceles", "scalene", or "invalid" for sides that make no triangle."""
    x, y, z = sorted([a, b, c])
    if x <= 0 or x + y <= z:
        return "invalid"
    if x == z:
        return "equilateral"
    if x == y or y == z:
        return "isosceles"
    return "scalene"


def neighbours(cell: tuple, width: int, height: int) -> list:
    """The up-to-four cells next to ``(row, col)`` inside a ``height`` x ``width`` grid, in order."""
    row, col = cell
    out = []
    for dr, dc in [(-1, 0), (0, -1), (0, 1), (1, 0)]:
        r, c = row + dr, col + dc
        if 0 <= r < height and 0 <= c < width:
            out.append((r, c))
    return out


def cell_index(row: int, col: int, width: int) -> int:
    """Index of ``(row, col)`` in a row-major grid ``width`` cells wide."""
    return row * width + col


def count_inside(points: list, width: int, height: int) -> int:
    """How many ``(x, y)`` points lie in ``0 <= x < width``, ``0 <= y < height``."""
    total = 0
    for x, y in points:
        if 0 <= x < width and 0 <= y < height:
            total += 1
    return total


def vec_dot(u: list, v: list) -> int:
    """Dot product of two vectors of the same length."""
    return sum(a * b for a, b in zip(u, v))


def vec_sub(u: list, v: list) -> list:
    """``u - v``, component by component."""
    return [a - b for a, b in zip(u, v)]


def vec_scale(v: list, factor: int) -> list:
    """``v`` with each component multiplied by ``factor``."""
    return [a * factor for a in v]


# -- planner (a calendar of numbered days, free of any date library) ----------------------


def weekday_name(day: int) -> str:
    """Name of day ``day`` of the week, 0 being Monday (any integer, counted round the week)."""
    names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    return names[day % 7]


def days_until(today: int, target: int) -> int:
    """Days from weekday ``today`` to the next weekday ``target`` (0 when it is today)."""
    return (target - today) % 7


def is_weekend(day: int) -> bool:
    """Whether weekday ``day`` (0 = Monday) is a Saturday or a Sunday."""
    return day % 7 >= 5


def is_leap(year: int) -> bool:
    """Gregorian leap year rule."""
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def month_length(month: int, leap: bool) -> int:
    """Days in month ``month`` (1-12)."""
    if month == 2:
        return 29 if leap else 28
    if month in (4, 6, 9, 11):
        return 30
    return 31


def day_of_year(month: int, day: int, leap: bool) -> int:
    """Day number in the year (1 for January 1st)."""
    lengths = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return sum(lengths[: month - 1]) + day


def slots_overlap(a: list, b: list) -> bool:
    """Whether time slots ``[start, end)`` (minutes) share a minute."""
    return a[0] < b[1] and b[0] < a[1]


def free_slots(busy: list, start: int, end: int) -> list:
    """The free ``[start, end]`` gaps between sorted, non-overlapping busy slots in the day."""
    gaps = []
    current = start
    for slot_start, slot_end in busy:
        if slot_start > current:
            gaps.append([current, slot_start])
        current = max(current, slot_end)
    if current < end:
        gaps.append([current, end])
    return gaps


def total_minutes(slots: list) -> int:
    """Sum of the lengths of ``[start, end]`` slots."""
    total = 0
    for slot_start, slot_end in slots:
        total += slot_end - slot_start
    return total


def to_minutes(clock: str) -> int:
    """``"HH:MM"`` as minutes after midnight."""
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


def format_minutes(minutes: int) -> str:
    """Minutes after midnight as ``"HH:MM"`` (wrapping past midnight)."""
    minutes = minutes % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def duration_label(minutes: int) -> str:
    """``90`` -> ``"1h 30m"``, ``45`` -> ``"45m"``, ``120`` -> ``"2h"``."""
    hours, rest = divmod(minutes, 60)
    if hours == 0:
        return f"{rest}m"
    if rest == 0:
        return f"{hours}h"
    return f"{hours}h {rest}m"


Cases = tuple[tuple[Any, ...], ...]

#: Argument tuples of each function (the first ``VISIBLE_CASES`` visible, the rest hidden).
CASES: dict[Callable[..., Any], Cases] = {
    word_count: (("one two three", 1), ("", 1), ("a bb ccc dddd", 3), ("single", 6), ("a b c d e", 2), ("tab\tand\nnewline", 4), ("x  yy", 0)),
    longest_word: (("a bb ccc",), ("",), ("tie one two",), ("hello world",), ("aa b aa",), ("x",), ("short longer longest mid",)),
    capitalize_words: (("hello world",), ("",), ("mIxEd CaSe",), ("a",), ("  two   spaces ",), ("ALL CAPS HERE",), ("x y z",)),
    snake_to_camel: (("max_word_len",), ("single",), ("__a__b",), ("",), ("one_two",), ("HTTP_code",), ("a_b_c_d",)),
    camel_to_snake: (("maxWordLen",), ("simple",), ("HTTPCode",), ("",), ("aB",), ("Leading",), ("oneTwoThree",)),
    is_palindrome: (("A man, a plan, a canal: Panama",), ("hello",), ("",), ("abba",), ("abca",), ("Noon",), ("ab",)),
    caesar_shift: (("abc", 1), ("xyz", 3), ("hi there!", 13), ("abc", 0), ("zz", 1), ("abc", -1), ("Hello", 2)),
    run_length_encode: (("aaab",), ("",), ("abba",), ("a",), ("zzzzz",), ("aabbcc",), ("abc",)),
    vowel_count: (("hello",), ("",), ("AEIOU",), ("rhythm",), ("banana",), ("Queue",), ("xyz a",)),
    truncate: (("hello world", 8), ("short", 10), ("abcdef", 2), ("abcdef", 6), ("abcdefg", 6), ("abcdef", 3), ("", 0)),
    pad_center: (("ab", 6, "*"), ("abc", 2, "-"), ("x", 4, "."), ("", 3, "#"), ("abc", 3, "="), ("hi", 7, "_"), ("a", 2, "+")),
    wrap_words: (("the quick brown fox", 10), ("", 5), ("a b c", 3), ("one two", 7), ("elephant ant", 4), ("aa bb cc dd", 5), ("x", 1)),
    total_quantity: (([["nut", 3], ["bolt", 4]],), ([],), ([["a", 0], ["b", 7]],), ([["x", 10]],), ([["a", 1], ["b", 2], ["c", 3]],), ([["q", 5], ["q", 5]],), ([["z", 2]],)),
    low_stock: (([["nut", 3], ["bolt", 9]], 5), ([], 2), ([["a", 5], ["b", 4]], 5), ([["x", 0]], 1), ([["a", 6], ["b", 7]], 6), ([["a", 1], ["b", 2], ["c", 3]], 3), ([["p", 2]], 2)),
    find_item: (([["nut", 3], ["bolt", 4]], "bolt"), ([], "nut"), ([["a", 1], ["b", 2]], "a"), ([["a", 1]], "z"), ([["x", 1], ["y", 2], ["x", 3]], "x"), ([["a", 1], ["b", 2], ["c", 3]], "c"), ([["q", 1], ["r", 1]], "r")),
    line_total: ((250, 4, 10), (100, 0, 50), (999, 1, 0), (333, 3, 33), (1000, 2, 25), (50, 7, 100), (120, 5, 5)),
    bulk_discount: ((5,), (10,), (75,), (100,), (9,), (50,), (49,), (0,), (250,)),
    apply_tax: ((1000, 20), (0, 15), (199, 8), (250, 10), (333, 7), (1, 50), (100, 0)),
    can_fulfil: (({"nut": 5}, {"nut": 3}), ({"nut": 2}, {"nut": 3}), ({}, {}), ({"a": 1}, {"b": 1}), ({"a": 4, "b": 2}, {"a": 4, "b": 2}), ({"a": 4}, {"a": 5}), ({"x": 1, "y": 0}, {"x": 1})),
    remaining_stock: (({"nut": 5, "bolt": 2}, {"nut": 3}), ({"a": 1}, {"a": 1}), ({}, {"a": 2}), ({"a": 3, "b": 3}, {"a": 1, "b": 3}), ({"x": 10}, {}), ({"a": 2}, {"a": 5}), ({"p": 4, "q": 1}, {"q": 1})),
    order_weight: (({"nut": 2, "bolt": 5}, {"nut": 3, "bolt": 1}), ({}, {"a": 2}), ({"a": 4}, {}), ({"a": 1, "b": 10}, {"b": 2}), ({"x": 3}, {"x": 3, "y": 1}), ({"a": 7}, {"a": 1}), ({"a": 2, "b": 3}, {"a": 5, "b": 5})),
    top_sellers: (({"tea": 5, "jam": 9, "oat": 1}, 2), ({}, 3), ({"b": 4, "a": 4, "c": 1}, 2), ({"x": 1}, 0), ({"x": 1, "y": 2}, 5), ({"p": 3, "q": 7, "r": 5}, 1), ({"m": 2, "n": 2, "o": 2}, 3)),
    restock_plan: (({"nut": 3, "bolt": 12}, 10), ({}, 5), ({"a": 5, "b": 4}, 5), ({"x": 0}, 2), ({"a": 9, "b": 1, "c": 10}, 10), ({"q": 7}, 7), ({"a": 1, "b": 2}, 3)),
    value_by_category: (([["tools", 2, 300], ["food", 1, 50], ["tools", 1, 100]],), ([],), ([["a", 0, 5]],), ([["x", 3, 3], ["y", 2, 2]],), ([["k", 1, 1], ["k", 1, 1], ["k", 1, 1]],), ([["a", 2, 10], ["b", 1, 7]],), ([["z", 5, 2]],)),
    manhattan: (((0, 0), (3, 4)), ((1, 1), (1, 1)), ((-2, 3), (2, -3)), ((5, 0), (0, 0)), ((-1, -1), (-4, -5)), ((2, 7), (9, 3)), ((0, 6), (0, 1))),
    midpoint: (((0, 0), (4, 6)), ((1, 1), (2, 2)), ((-3, 5), (3, -5)), ((0, 0), (0, 0)), ((2, 8), (6, 2)), ((-1, -1), (-4, -4)), ((10, 3), (0, 5))),
    quadrant: (((3, 4),), ((-2, 5),), ((0, 7),), ((-1, -1),), ((6, -2),), ((4, 0),), ((5, 5),), ((-3, 2),)),
    rect_area: ((3, 4), (0, 5), (-2, 3), (1, 1), (7, 6), (5, -1), (10, 2)),
    overlap_area: (((0, 0, 4, 4), (2, 2, 6, 6)), ((0, 0, 2, 2), (3, 3, 5, 5)), ((0, 0, 4, 4), (4, 0, 8, 4)), ((0, 0, 10, 10), (2, 3, 5, 7)), ((1, 1, 3, 6), (0, 2, 5, 4)), ((-3, -3, 0, 0), (-1, -5, 2, -1)), ((0, 0, 5, 5), (1, 1, 4, 2))),
    triangle_kind: ((3, 3, 3), (3, 4, 5), (2, 2, 3), (1, 2, 3), (5, 5, 8), (0, 1, 1), (7, 4, 4), (6, 7, 9)),
    neighbours: (((0, 0), 3, 3), ((1, 1), 3, 3), ((2, 1), 3, 3), ((0, 2), 3, 2), ((1, 0), 1, 3), ((0, 0), 1, 1), ((1, 3), 4, 2)),
    cell_index: ((0, 0, 5), (2, 3, 5), (1, 0, 4), (3, 4, 5), (0, 7, 8), (4, 1, 2), (5, 5, 6)),
    count_inside: (([(0, 0), (3, 3), (5, 1)], 4, 4), ([], 3, 3), ([(4, 0), (0, 4), (3, 3)], 4, 4), ([(-1, 0), (1, 1)], 2, 2), ([(0, 0), (1, 0), (2, 0)], 3, 1), ([(2, 2)], 2, 3), ([(1, 2), (2, 1)], 3, 2)),
    vec_dot: (([1, 2, 3], [4, 5, 6]), ([], []), ([2, -1], [3, 4]), ([0, 0], [5, 7]), ([1], [9]), ([-2, -3], [-4, 5]), ([3, 1, 2], [1, 0, 4])),
    vec_sub: (([5, 7], [2, 3]), ([], []), ([1, 2, 3], [3, 2, 1]), ([0], [4]), ([-1, -2], [-3, 5]), ([10, 0, 4], [1, 1, 1]), ([6], [6])),
    vec_scale: (([1, 2], 3), ([], 5), ([4, -1], 0), ([2, 2, 2], -1), ([7], 2), ([3, 0], 4), ([1, 5, 9], 1)),
    weekday_name: ((0,), (6,), (9,), (3,), (-1,), (14,), (5,)),
    days_until: ((0, 4), (5, 1), (3, 3), (6, 0), (2, 6), (4, 2), (1, 2)),
    is_weekend: ((5,), (4,), (13,), (6,), (0,), (12,), (7,)),
    is_leap: ((2024,), (1900,), (2000,), (2023,), (2100,), (1600,), (1996,)),
    month_length: ((2, False), (4, False), (2, True), (1, False), (11, True), (12, False), (9, False), (7, True)),
    day_of_year: ((1, 1, False), (3, 1, True), (12, 31, False), (2, 28, False), (3, 1, False), (12, 31, True), (7, 4, False)),
    slots_overlap: (([0, 10], [5, 15]), ([0, 10], [10, 20]), ([5, 6], [0, 30]), ([20, 30], [0, 10]), ([0, 5], [4, 9]), ([8, 9], [9, 10]), ([3, 7], [3, 7])),
    free_slots: (([[60, 120]], 0, 240), ([], 0, 100), ([[0, 30], [30, 60]], 0, 60), ([[10, 20], [40, 50]], 0, 50), ([[5, 10]], 0, 10), ([[0, 100]], 0, 200), ([[20, 40], [30, 50]], 0, 60)),
    total_minutes: (([[0, 30], [60, 90]],), ([],), ([[5, 5]],), ([[100, 160]],), ([[0, 1], [2, 4], [5, 8]],), ([[10, 70], [80, 95]],), ([[30, 45]],)),
    to_minutes: (("01:30",), ("00:00",), ("23:59",), ("12:05",), ("09:10",), ("00:45",), ("10:00",)),
    format_minutes: ((90,), (0,), (1439,), (1440,), (605,), (61,), (1500,)),
    duration_label: ((90,), (45,), (120,), (0,), (61,), (180,), (59,)),
}

#: Package name -> module name -> (module docstring, functions).
PACKAGES: dict[str, dict[str, tuple[str, tuple[Callable[..., Any], ...]]]] = {
    "textkit": {
        "words": ("Counting and picking words.", (word_count, longest_word, capitalize_words)),
        "cases": ("Identifier cases and palindromes.", (snake_to_camel, camel_to_snake, is_palindrome)),
        "codes": ("Small text encodings.", (caesar_shift, run_length_encode, vowel_count)),
        "layout": ("Fitting text into a width.", (truncate, pad_center, wrap_words)),
    },
    "stock": {
        "items": ("Lists of [name, quantity] items.", (total_quantity, low_stock, find_item)),
        "pricing": ("Prices in cents.", (line_total, bulk_discount, apply_tax)),
        "orders": ("Orders taken from the stock (name -> quantity).", (can_fulfil, remaining_stock, order_weight)),
        "reports": ("Summaries of sales and stock.", (top_sellers, restock_plan, value_by_category)),
    },
    "geom": {
        "points": ("Points of the integer plane.", (manhattan, midpoint, quadrant)),
        "shapes": ("Rectangles and triangles.", (rect_area, overlap_area, triangle_kind)),
        "grid": ("Cells of a rectangular grid.", (neighbours, cell_index, count_inside)),
        "vectors": ("Integer vectors as lists.", (vec_dot, vec_sub, vec_scale)),
    },
    "planner": {
        "days": ("Weekdays numbered from 0 (Monday).", (weekday_name, days_until, is_weekend)),
        "months": ("Months and years, without any date library.", (is_leap, month_length, day_of_year)),
        "slots": ("Time slots in minutes after midnight.", (slots_overlap, free_slots, total_minutes)),
        "clock": ("Clock times as text.", (to_minutes, format_minutes, duration_label)),
    },
}
