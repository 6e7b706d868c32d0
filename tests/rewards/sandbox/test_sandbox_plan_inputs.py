"""Literal inputs of planned calls travel as values (the child decodes them, no parse per input)."""

from __future__ import annotations

import pytest

from mathgym.rewards import CodeSandbox, Status, TestCase
from mathgym.rewards.sandbox.trusted_plan import plan_tests


def _inputs(source: str) -> list[dict]:
    plan, reason = plan_tests([("t", source)])
    assert plan is not None, reason
    return plan.payload[0]["args"]


def test_literals_are_values_and_the_rest_stay_source():
    args = _inputs('assert f([1, -2], {"a": (1.5, None)}, b"x", -0.0, {1, 2}, range(3), [[]] * 2, {[1]: 2}) == 3')
    assert args[:4] == [{"value": [1, -2]}, {"value": {"d": [["a", {"t": [1.5, None]}]]}}, {"value": {"b": "78"}}, {"value": -0.0}]
    # A set (its order once rebuilt), a call, a shared element, an unhashable key: evaluated in the child, as the test would.
    assert args[4:] == [{"src": "{1, 2}"}, {"src": "range(3)"}, {"src": "[[]] * 2"}, {"src": "{[1]: 2}"}]


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(workers=1) as sandbox:
        yield sandbox


def test_value_inputs_keep_their_types_and_a_bad_input_still_fails_the_load(box):
    code = "def f(*args):\n    return [type(a).__name__ for a in args]\n"
    good = box.run_tests(code, [TestCase("t", "assert", "assert f((1, 2), -0.0, b'x', {'k': [1]}, 2**70) == ['tuple', 'float', 'bytes', 'dict', 'int']")])
    assert good.status == Status.CORRECT and good.details["verdict"] == "outputs-compared"
    bad = box.run_tests(code, [TestCase("t", "assert", "assert f({[1]: 2}) == []")])
    assert bad.status == Status.WRONG and "an input of the tests raised TypeError" in bad.tests[0].message


LOOP_TEST = "def check(candidate):\n    print\n    for x in range(2, 6):\n        assert candidate(x, x + 1) == str(x)\n\ncheck(f)"


def test_a_for_loop_over_literals_is_unrolled_and_a_bare_print_is_skipped():
    plan, reason = plan_tests([("t", LOOP_TEST)])
    assert plan is not None, reason
    assert [call["args"] for call in plan.payload] == [[{"value": x}, {"value": x + 1}] for x in range(2, 6)]
    plan, reason = plan_tests([("t", "for x in range(10**6):\n    assert f(x) == x")])
    assert plan is None and "more than 1000 passes" in reason


def test_an_unrolled_loop_stops_at_its_first_failing_pass(box):
    good = box.run_tests("def f(x, base):\n    return str(x)\n", [TestCase("t", "assert", LOOP_TEST)])
    assert good.status == Status.CORRECT and good.details["verdict"] == "outputs-compared"
    bad = box.run_tests("def f(x, base):\n    return str(x) if x < 4 else 'no'\n", [TestCase("t", "assert", LOOP_TEST)])
    assert bad.status == Status.WRONG and bad.tests[0].call == "f(4, 5) returned 'no'"


def test_comprehensions_of_the_tests_own_values_are_computed_here():
    """HumanEval/151's ``odd_sum = sum([i**2 for i in lst if ...])``: a comprehension that reads no
    output and calls nothing of the code is evaluated outside the sandbox, in a scope of its own;
    one over outputs, or too long, stays the judge's."""
    source = ("lst = list(range(-9, 10, 2))\nodd = sum([i**2 for i in lst if i % 2 != 0 and i > 0])\n"
              "assert f(lst) == odd\nassert g(3) == {i: [(i, j) for j in range(i) if j != i] for i in range(3)}\n"
              "assert h(2) in {(a, b) for a, b in [(1, 2), (2, 1)]}\ni = 'kept'\nassert all(x > 0 for x in [1, 2]) and f(i) == sorted(c for c in i)")
    plan, reason = plan_tests([("t", source)])
    assert plan is not None, reason
    assert [call["args"] for call in plan.payload][:1] == [[{"value": list(range(-9, 10, 2))}]]
    code = ("def f(x):\n    return sum(i * i for i in x if i > 0) if isinstance(x, list) else sorted(x)\n"
            "def g(n):\n    return {i: [(i, j) for j in range(i)] for i in range(n)}\n"
            "def h(n):\n    return (1, 2)\n")
    with CodeSandbox(workers=1) as box:
        good = box.run_tests(code, [TestCase("t", "assert", source)])
        assert good.status == Status.CORRECT and good.details["verdict"] == "outputs-compared", good.tests
        bad = box.run_tests(code.replace("(i, j)", "(j, i)"), [TestCase("t", "assert", source)])
        assert bad.status == Status.WRONG and bad.tests[0].call.startswith("g(3) returned")
    for source, reason in [("assert all(f(i) for i in range(3))", "a comprehension calling the code's function"),
                           ("assert [x for x in f(3)] == [1]", "a comprehension calling the code's function"),
                           ("assert f(1) == sum(x for x in range(10**7))", "the comprehension raises MemoryError"),
                           ("assert f(1) == [y for x in [1] if y]", "the name 'y' is read as a value")]:
        plan, found = plan_tests([("t", source)])
        assert plan is None and reason in found, found
