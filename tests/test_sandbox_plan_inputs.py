"""Literal inputs of planned calls travel as values (the child decodes them, no parse per input)."""

from __future__ import annotations

import pytest

from mathgym.rewards import CodeSandbox, Status, TestCase
from mathgym.rewards._test_plan import plan_tests


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
