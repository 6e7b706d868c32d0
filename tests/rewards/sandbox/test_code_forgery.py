"""A graded program cannot forge its grade: the reward hacks a policy finds all score ``wrong``.

Each forgery is tried through ``CodeSandbox-v0``, ``CodeRepair-v0`` and ``CodeTestsReward``.
Tests that cannot be converted into calls run in the trusted judge
(``details["verdict"] == "trusted-tests"``, ``tests/rewards/sandbox/test_trusted_tests.py``): the same
forgeries score wrong there too.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import mathgym.envs.coding.code_task_set  # noqa: F401 - importing mathgym registers the envs
from mathgym.rewards import CodeSandbox, CodeTestsReward, SandboxLimits, Status, TestCase

ENTRY = "sum_of_evens"  # the built-in task 0 (CodeSandbox-v0, level 0)

_FORGE_LINES = (
    "import os, json\n"
    "def _forge():\n"
    "    names = ['check', 'test', 'loop'] + [f'test_{i}' for i in range(40)] + [f'check({n})' for n in ('candidate', 'sum_of_evens')]\n"
    "    for name in names:\n"
    "        os.write(3, (json.dumps({'name': name, 'passed': True, 'message': ''}) + '\\n').encode())\n"
    "    for i in range(200):\n"
    "        os.write(3, (json.dumps({'i': i, 'ok': True}) + '\\n').encode())\n"
)
_FRAME_WALK = (
    "import sys, ast, gc\n"
    "def _expected(args):\n"
    "    sources = []\n"
    "    frame = sys._getframe()\n"
    "    while frame is not None:\n"
    "        for value in frame.f_locals.values():\n"
    "            if isinstance(value, dict) and value.get('tests'):\n"
    "                sources += [t['source'] for t in value['tests']]\n"
    "        frame = frame.f_back\n"
    "    sources += [o for o in gc.get_objects() if isinstance(o, str) and 'assert' in o]\n"
    "    for source in sources:\n"
    "        for node in ast.walk(ast.parse(source)):\n"
    "            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):\n"
    "                if [ast.literal_eval(a) for a in node.left.args] == list(args):\n"
    "                    return ast.literal_eval(node.comparators[0])\n"
    "    return None\n"
)

_READ_THE_TASKS = (
    "import ast\n"
    "TABLE = {{}}\n"
    "try:\n"
    "    tree = ast.parse(open({path!r}).read())\n"
    "except OSError:\n"
    "    tree = ast.parse('')\n"
    "for node in ast.walk(tree):\n"
    "    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith('{entry}(') and ' == ' in node.value:\n"
    "        call, want = node.value.split(' == ', 1)\n"
    "        TABLE[call] = ast.literal_eval(want)\n"
    "def {entry}(*args):\n"
    "    return TABLE.get('{entry}(' + ', '.join(map(repr, args)) + ')')\n"
)
TASK_SOURCE = str(Path(mathgym.envs.coding.code_task_set.__file__).resolve())

FORGERIES = {
    "read_the_task_source": _READ_THE_TASKS.format(path=TASK_SOURCE, entry=ENTRY),
    "fd3_lines_then_exit": f"{_FORGE_LINES}_forge()\nos._exit(0)\n",
    "fd3_lines_in_the_function": f"{_FORGE_LINES}def {ENTRY}(*args, **kwargs):\n    _forge()\n    os._exit(0)\n",
    "frame_walk_to_the_tests": f"{_FRAME_WALK}def {ENTRY}(*args):\n    return _expected(args)\n",
    "always_equal_object": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
        "    __hash__ = object.__hash__\n"
        f"def {ENTRY}(*args):\n    return Anything()\n"
    ),
    "always_equal_int_subclass": f"class Int(int):\n    def __eq__(self, other):\n        return True\ndef {ENTRY}(*args):\n    return Int(0)\n",
    "os_exit_in_the_function": f"import os\ndef {ENTRY}(*args):\n    os._exit(0)\n",
    "patch_builtins_and_modules": (
        "import builtins, sys, json\n"
        "_dumps = json.dumps\n"
        "def _forged(message, *a, **k):\n"
        "    if isinstance(message, dict) and 'name' in message:\n"
        "        message = {**message, 'passed': True}\n"
        "    return _dumps(message, *a, **k)\n"
        "json.dumps = _forged\n"
        "sys.modules['json'] = json\n"
        "builtins.isinstance = lambda *a: True\n"
        "builtins.AssertionError = type('NotAnError', (BaseException,), {})\n"
        f"def {ENTRY}(*args):\n    return None\n"
    ),
}
LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=4)
TESTS = [TestCase(f"test_{i}", "assert", f"assert {ENTRY}({args!r}) == {want!r}") for i, (args, want) in enumerate([([1, 2, 3, 4], 6), ([], 0), ([-2, 3, 10], 8)])]
REFERENCE = f"def {ENTRY}(nums):\n    return sum(n for n in nums if n % 2 == 0)\n"


def _skip_unless_hidden(name: str, info: dict) -> None:
    if name == "read_the_task_source" and not info["sandbox"].get("hidden_paths"):
        pytest.skip(f"task data cannot be hidden here (no mount namespace): {info['sandbox'].get('hide_reason')}")


def _answer(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\n"


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgery_scores_wrong_in_code_sandbox_env(name):
    env = gym.make("CodeSandbox-v0", level=0, cpu_seconds=2, wall_seconds=4)
    env.reset(seed=0, options={"task_index": 0})
    _, reward, _, _, info = env.step(_answer(FORGERIES[name]))
    _skip_unless_hidden(name, info)
    assert (reward, info["status"]) == (0.0, Status.WRONG), (name, info)
    assert info["sandbox"]["verdict"] == "outputs-compared"


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgery_scores_wrong_in_code_repair_env(name):
    env = gym.make("CodeRepair-v0", max_turns=2, cpu_seconds=2, wall_seconds=4, level=0)
    env.reset(seed=0, options={"task_index": 0})
    _, reward, terminated, _, info = env.step(_answer(FORGERIES[name]))
    _skip_unless_hidden(name, info)
    assert (reward, terminated, info["attempt_status"]) == (0.0, False, Status.WRONG), (name, info)
    _, reward, terminated, _, info = env.step(_answer(REFERENCE))  # the honest fix still passes
    assert (reward, terminated, info["status"]) == (1.0, True, Status.CORRECT)


def test_forgeries_score_wrong_in_code_tests_reward():
    worker = CodeTestsReward(limits=LIMITS)
    names = sorted(FORGERIES)
    results = worker.score_batch([_answer(FORGERIES[n]) for n in names] + [_answer(REFERENCE)], [TESTS] * (len(names) + 1))
    assert [(r.score, r.status) for r in results[:-1]] == [(0.0, Status.WRONG)] * len(names), [(n, r.details["tests"]) for n, r in zip(names, results)]
    assert all(r.details["verdict"] == "outputs-compared" for r in results)
    assert (results[-1].score, results[-1].status) == (1.0, Status.CORRECT)


def test_tests_the_planner_cannot_convert_are_judged_outside_too():
    """A test with a loop runs in the trusted judge and says so; the forgeries that passed
    when such tests ran beside the program (fd-3 lines, a patched ``json``) score wrong."""
    looped = [TestCase("loop", "assert", f"for nums, want in [([1, 2], 2), ([4], 4)]:\n    assert {ENTRY}(nums) == want\n")]
    worker = CodeTestsReward(limits=LIMITS)
    honest = worker.score(_answer(REFERENCE), looped)
    assert honest.status == Status.CORRECT and honest.details["verdict"] == "trusted-tests"
    assert "For statement" in honest.details["verdict_reason"]
    json_patch = FORGERIES["patch_builtins_and_modules"].split("builtins.isinstance")[0] + f"def {ENTRY}(*args):\n    return None\n"
    forged = [worker.score(_answer(code), looped) for code in (FORGERIES["fd3_lines_then_exit"], json_patch, *FORGERIES.values())]
    assert [r.score for r in forged] == [0.0] * len(forged), [r.details["tests"] for r in forged]


def test_task_data_is_hidden_from_the_program(monkeypatch):
    """The program cannot read its expected values from the task files (control: it can
    under the block-list view when they are not hidden; under the allow-list they are out of view)."""
    code = FORGERIES["read_the_task_source"]
    task_tests = [TestCase(name, "assert", source) for name, source in mathgym.envs.coding.code_task_set.builtin_tasks()[0].tests]
    with CodeSandbox(LIMITS, workers=1) as box:
        result = box.run_tests(code, task_tests)
        if result.details["tmp"] != "private":
            pytest.skip(f"no mount namespace on this machine: {result.details.get('tmp_reason')}")
        assert result.status == Status.WRONG and result.details["hidden_paths"] >= 1
    with CodeSandbox(LIMITS, workers=1, hidden_paths=()) as unlisted:
        result = unlisted.run_tests(code, task_tests)
        assert result.status == (Status.WRONG if result.details["fs_view"] == "allow-list" else Status.CORRECT)
    source = Path(mathgym.envs.coding.code_task_set.__file__).resolve()
    if any(str(source).startswith(private + "/") for private in ("/tmp", "/var/tmp", "/dev/shm")):
        pytest.skip(f"the checkout is under a dir each job sees as its own fresh tmpfs ({source}): no control possible")
    monkeypatch.setenv("MATHGYM_SANDBOX_SIMULATE_NO_NEW_ROOT", "1")
    with CodeSandbox(LIMITS, workers=1, hidden_paths=()) as exposed:
        assert exposed.run_tests(code, task_tests).status == Status.CORRECT


def test_outputs_compare_like_python_equality():
    cases = {
        "assert f(1) == 1.0": "def f(x):\n    return 1\n",  # 1 == 1.0 in Python
        "assert f(1) == (1, 2)": "def f(x):\n    return (1, 2)\n",
        "assert f(1) != [1, 2]": "def f(x):\n    return (1, 2)\n",  # a tuple is not a list
        "assert abs(f(1) - 0.3) < 1e-9": "def f(x):\n    return 0.1 + 0.2\n",
        "assert f(2) is True": "def f(x):\n    return x % 2 == 0\n",
        "assert set(f(0)) == {1, 2}": "def f(x):\n    return [2, 1, 2]\n",
        "assert f(0) == {'a': [1, {2}]}": "def f(x):\n    return {'a': [1, {2}]}\n",
        "assert not f(0)": "def f(x):\n    return []\n",
        "assert f(10**30) == 10**30 + 1": "def f(x):\n    return x + 1\n",
        "import math\nassert math.isclose(f(2), 1.4142135, rel_tol=1e-6)": "def f(x):\n    return x ** 0.5\n",
        "assert list(f(3)) == [0, 1, 4]": "def f(n):\n    return (i * i for i in range(n))\n",  # list() applied in the child
        "assert f(list(range(0, 10**6, 2)), x=3) == 500000": "def f(xs, x):\n    return len(xs)\n",
    }
    worker = CodeTestsReward(limits=LIMITS)
    for source, code in cases.items():
        result = worker.score(_answer(code), [TestCase("t", "assert", source)])
        assert (result.status, result.details["verdict"]) == (Status.CORRECT, "outputs-compared"), (source, result.details["tests"])
    wrong = {
        "assert f(0) == 0.3": "def f(x):\n    return 0.1 + 0.2\n",  # float equality, as Python does it
        "assert f(0) == [1, 2]": "def f(x):\n    return (1, 2)\n",
        "assert f(0) is True": "def f(x):\n    return 1\n",
        "assert f(0) == 'x'": "class S(str):\n    pass\ndef f(x):\n    return S('x')\n",  # not a plain value
        "assert f(0) == 1": "def f(x):\n    raise ValueError('no')\n",
        "assert f(3) == [0, 1, 2]": "def f(n):\n    return (i for i in range(n))\n",  # a generator is not a list
    }
    for source, code in wrong.items():
        result = worker.score(_answer(code), [TestCase("t", "assert", source)])
        assert (result.status, result.details["verdict"]) == (Status.WRONG, "outputs-compared"), (source, result.details["tests"])
