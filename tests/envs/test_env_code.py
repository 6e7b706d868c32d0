"""CodeSandbox-v0, CodeRepair-v0 and MathTool-v0 against the real sandbox."""

from __future__ import annotations

import ast
import json
import pickle
import re
import warnings

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.envs.coding.code_task_set import builtin_tasks
from mathgym.envs.coding.code_tasks import humaneval_tasks, load_code_jsonl
from mathgym.errors import ConfigError, DatasetError
from mathgym.rewards.code import extract_code
from mathgym.rewards.sandbox import CodeSandbox, Status, TestCase


def _answer(env, index, action=None):
    """Reset to task ``index`` and answer it (with the expert's action when ``action`` is None)."""
    env.reset(options={"task_index": index})
    return env.step(env.unwrapped.expert_action() if action is None else action)


# -- the task sets --------------------------------------------------------------------


def test_builtin_set_has_at_least_40_graded_tasks_with_hidden_tests():
    tasks = builtin_tasks()
    assert len(tasks) >= 40 and len({t.task_id for t in tasks}) == len(tasks)
    levels = [t.level for t in tasks]
    assert levels == sorted(levels) and set(levels) == {0, 1, 2, 3}
    for task in tasks:
        assert len(task.tests) >= 3 and task.entry_point in task.prompt
        checks = [ast.literal_eval(ast.parse(source).body[0].msg) for _, source in task.tests]
        assert checks[0] in task.prompt and not any(check in task.prompt for check in checks[1:])


def test_every_builtin_reference_solution_passes_in_the_sandbox():
    env = gym.make("CodeSandbox-v0")
    failures = []
    for index in range(env.unwrapped.num_tasks):
        _, reward, terminated, _, info = _answer(env, index)
        if reward != 1.0 or info["status"] != "correct":
            failures.append((info["task_id"], info["tests"]))
        assert terminated
    assert not failures, failures[:3]


def test_humaneval_canonical_solutions_score_one():
    env = gym.make("CodeSandbox-v0", dataset="humaneval")
    assert env.unwrapped.num_tasks == 164
    failures = []
    for index in range(164):
        _, reward, _, _, info = _answer(env, index)
        if reward != 1.0:
            failures.append((info["task_id"], info["stderr"][-200:]))
    assert not failures, failures[:3]


def test_stub_solutions_fail_builtin_tasks():
    env = gym.make("CodeSandbox-v0", reward_mode="fraction")
    passed = 0
    for index, task in enumerate(builtin_tasks()):
        stub = f"```python\ndef {task.entry_point}(*args, **kwargs):\n    return None\n```"
        _, reward, _, _, info = _answer(env, index, stub)
        passed += info["status"] == "correct"
        assert info["total"] == len(task.tests) and len(info["tests"]) == len(task.tests)
    assert passed == 0


def test_random_text_scores_zero_without_crashing():
    env = gym.make("CodeSandbox-v0")
    env.action_space.seed(0)
    for seed in range(5):
        env.reset(seed=seed)
        _, reward, terminated, _, info = env.step(env.action_space.sample())
        assert reward == 0.0 and terminated and info["status"] in ("wrong", "unparseable")


# -- grading details ------------------------------------------------------------------


def _index(task_id):
    return [t.task_id for t in builtin_tasks()].index(task_id)


def test_fraction_reward_and_per_test_results():
    wrong_fizzbuzz = (
        "Here is my code:\n```python\ndef fizzbuzz_word(n):\n    if n % 3 == 0:\n        return 'Fizz'\n"
        "    if n % 5 == 0:\n        return 'Buzz'\n    return str(n)\n```"
    )
    env = gym.make("CodeSandbox-v0", reward_mode="fraction")
    _, reward, _, _, info = _answer(env, _index("builtin/fizzbuzz_word"), wrong_fizzbuzz)
    assert reward == 0.75 and info["status"] == "partial" and info["passed"] == 3
    failed = [t for t in info["tests"] if not t["passed"]]
    assert [t["name"] for t in failed] == ["test_2"] and "FizzBuzz" in failed[0]["message"]
    env = gym.make("CodeSandbox-v0")
    _, reward, _, _, info = _answer(env, _index("builtin/fizzbuzz_word"), wrong_fizzbuzz)
    assert reward == 0.0 and info["status"] == "wrong"


def test_loops_time_out_and_crashes_report_stderr():
    env = gym.make("CodeSandbox-v0", cpu_seconds=1, wall_seconds=3)
    _, reward, _, _, info = _answer(env, _index("builtin/clamp"), "def clamp(x, low, high):\n    while True:\n        pass\n")
    assert reward == 0.0 and info["status"] == "timeout"
    _, reward, _, _, info = _answer(env, _index("builtin/clamp"), "import sys\nprint('oops', file=sys.stderr)\nraise SystemExit(3)\n")
    assert reward == 0.0 and info["status"] == "wrong" and "oops" in info["stderr"]
    _, reward, _, _, info = _answer(env, _index("builtin/clamp"), "def clamp(x, low, high):\n    return max(low, min(high, x)\n")
    assert info["status"] == "wrong" and "SyntaxError" in info["tests"][0]["message"]


def test_code_extraction_fenced_raw_and_humaneval_bodies():
    assert extract_code("```py\nx = 1\n```\ntext\n```python\ndef f():\n    pass\n```", "f") == "def f():\n    pass\n"
    assert extract_code("```\ndef g(): return 2\n```\n```bash\nls\n```") == "def g(): return 2\n"
    assert extract_code("def h():\n    return 3") == "def h():\n    return 3\n"
    assert extract_code("Sure!\n```python\ndef k():\n    return 4") == "def k():\n    return 4"
    env = gym.make("CodeSandbox-v0", dataset="humaneval")
    body = "    return [x for x in strings if substring in x]\n"
    _, reward, _, _, _ = _answer(env, 7, body)  # HumanEval/7 filter_by_substring, completion style
    assert reward == 1.0
    full = "```python\ndef filter_by_substring(strings: List[str], substring: str) -> List[str]:\n" + body + "```"
    _, reward, _, _, _ = _answer(env, 7, full)  # chat style: the prompt's imports are kept
    assert reward == 1.0


def test_jsonl_in_mbpp_and_humaneval_format(tmp_path):
    path = tmp_path / "tasks.jsonl"
    mbpp = {"task_id": 2, "text": "Write a function to find the shared elements of two lists.",
            "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
            "test_list": ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == {4, 5}",
                          "assert set(similar_elements((1, 2), (3,))) == set()"],
            "test_setup_code": "", "challenge_test_list": []}
    human = {"task_id": "mine/0", "prompt": "def double(x: int) -> int:\n    \"\"\"Return twice x.\"\"\"\n", "entry_point": "double",
             "canonical_solution": "    return 2 * x\n", "test": "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-1) == -2\n"}
    path.write_text(json.dumps(mbpp) + "\n" + json.dumps(human) + "\n")
    tasks = load_code_jsonl(path)
    assert [t.task_id for t in tasks] == ["mbpp/2", "mine/0"] and tasks[0].entry_point == "similar_elements"
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    for index in range(2):
        _, reward, _, _, info = _answer(env, index)
        assert reward == 1.0, info
    obs, _ = env.reset(options={"task_index": 0})
    assert "shared elements" in obs and "(1, 2), (3,)" not in obs
    _, reward, _, _, info = _answer(env, 1, "def double(x):\n    return 2 * x if x > 0 else 0\n")
    assert reward == 0.5 and len(info["tests"]) == 2
    with pytest.raises(ConfigError):
        env.reset(options={"task_index": 2})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "1+1"}\n')
    with pytest.raises(DatasetError):
        load_code_jsonl(bad)
    with pytest.raises(DatasetError):
        gym.make("CodeSandbox-v0", dataset=str(tmp_path / "missing.jsonl"))


def test_jsonl_in_sanitized_mbpp_format(tmp_path):
    """MBPP's sanitized set: ``prompt`` instead of ``text``, and ``test_imports`` the tests need."""
    row = {"source_file": "x.py", "task_id": 7, "prompt": "Write a function to find the hypotenuse of a right triangle.",
           "code": "import math\ndef hyp(a, b):\n    return math.sqrt(a * a + b * b)",
           "test_imports": ["import math"], "test_list": ["assert math.isclose(hyp(3, 4), 5.0)", "assert math.isclose(hyp(5, 12), 13)"]}
    path = tmp_path / "sanitized.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = load_code_jsonl(path)
    assert (task.task_id, task.entry_point) == ("mbpp/7", "hyp") and "hypotenuse" in task.prompt
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info
    _, reward, _, _, info = _answer(env, 0, "def hyp(a, b):\n    return a + b if a == 3 else 13\n")  # no import of its own
    assert reward == 0.5, info


SUM_PROGRAM = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n"
STDIO_ROWS = {
    "apps": {"problem_id": 4000, "question": "Print the sum of the integers on the input.", "difficulty": "introductory",
             "solutions": json.dumps([SUM_PROGRAM]), "starter_code": "",
             "input_output": json.dumps({"inputs": ["1 2\n", "5\n-5 7\n"], "outputs": ["3\n", ["7"]]})},
    "livecodebench": {"question_id": "abc001_a", "question_title": "Sum", "question_content": "Print the sum of the integers.",
                      "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
                      "private_test_cases": "eJzLSM3JyQcABiwCFQ=="},  # compressed, but no pickled JSON inside: left out
    "codecontests": {"name": "sum", "description": "Print the sum of the integers.",
                     "public_tests": {"input": ["1 2\n"], "output": ["3\n"]}, "private_tests": {"input": ["10 -3\n"], "output": ["7\n"]},
                     "generated_tests": {"input": [], "output": []},
                     "solutions": {"language": [2, 3], "solution": ["int main() {}", SUM_PROGRAM]}},
    "codeforces": {"id": "9999/A", "title": "Sum", "description": "Print the sum of the integers.", "input_format": "Integers.",
                   "output_format": "Their sum.", "examples": [{"input": "4 5\n", "output": "9\n"}], "note": None,
                   "official_tests": [{"input": "1 2\n", "output": "3\n"}, {"input": "4 5\n", "output": "9\n"}],
                   "official_tests_complete": True, "input_mode": "stdio", "generated_checker": None, "executable": True,
                   "interaction_format": None},
}


@pytest.mark.parametrize("layout", sorted(STDIO_ROWS))
def test_jsonl_of_standard_input_output_tasks(tmp_path, layout):
    """APPS / TACO, LiveCodeBench and CodeContests records: each test feeds the whole program its
    input and compares what it prints."""
    path = tmp_path / f"{layout}.jsonl"
    path.write_text(json.dumps(STDIO_ROWS[layout]) + "\n")
    (task,) = load_code_jsonl(path)
    assert task.entry_point == "" and not task.tests and task.io_tests and "standard input" in task.prompt
    assert task.io_tests[0][1:] == ("1 2\n", "3\n")
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    obs, _ = env.reset(options={"task_index": 0})
    assert "sum of the integers" in obs and "1 2" not in obs
    _, reward, _, _, info = env.step(f"```python\n{SUM_PROGRAM}```")
    assert reward == 1.0 and info["passed"] == len(task.io_tests), info
    if layout not in ("livecodebench", "codeforces"):
        assert env.unwrapped.expert_action() == f"```python\n{SUM_PROGRAM}```"
    else:
        assert env.unwrapped.expert_action() is None  # no reference in the record
    _, reward, _, _, info = _answer(env, 0, "```python\nprint(3)\n```")  # prints the same whatever its input
    assert info["passed"] == 1 and reward == (0.0 if len(task.io_tests) > 1 else 1.0), info


def test_codeforces_records_show_the_whole_statement_and_fall_back_on_the_examples(tmp_path):
    """open-r1's Codeforces records keep the statement's parts in separate fields; a problem
    without official tests is graded on its examples."""
    row = {**STDIO_ROWS["codeforces"], "official_tests": [], "note": "Big numbers fit."}
    path = tmp_path / "cf.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = load_code_jsonl(path)
    assert task.task_id == "9999/A" and task.io_tests == (("io_0", "4 5\n", "9\n"),) and task.unverifiable is None
    for part in ("Sum\n\nPrint the sum", "Input\nIntegers.", "Output\nTheir sum.", "Example\nInput:\n4 5\nOutput:\n9", "Note\nBig numbers fit."):
        assert part in task.prompt, part


@pytest.mark.parametrize(("fields", "reason"), [
    ({"generated_checker": "import sys\n# checks any valid answer"}, "its own checker program"),
    ({"interaction_format": "Ask '? x' and read the answer."}, "interactive problem"),
    ({"input_mode": "file"}, "reads and writes files"),
    ({"executable": False}, "not executable"),
])
def test_codeforces_records_graded_otherwise_are_unverifiable_not_wrong(tmp_path, fields, reason):
    """A problem whose outputs a checker grades (several right answers), an interactive one, one
    reading files, or one the data set marks not executable: comparing printed text would fail
    right programs, so the task scores ``unverifiable`` (left out of training), with the reason."""
    path = tmp_path / "cf.jsonl"
    path.write_text(json.dumps({**STDIO_ROWS["codeforces"], **fields}) + "\n")
    with pytest.warns(UserWarning, match="1 of 1 code tasks score 'unverifiable'"):
        (task,) = load_code_jsonl(path)
    assert reason in task.unverifiable
    env = gym.make("CodeSandbox-v0", dataset=str(path))
    _, reward, _, _, info = _answer(env, 0, f"```python\n{SUM_PROGRAM}```")
    assert reward == 0.0 and info["status"] == "unverifiable", info


def test_livecodebench_compressed_private_tests_are_read_without_running_the_pickle(tmp_path):
    """LiveCodeBench packs its private tests as base64 of zlib of a pickled JSON string: they are
    read by an unpickler that refuses every class and function, so a pickle that would run code
    is left out, and runs nothing."""
    import base64
    import os
    import pickle
    import zlib

    def packed(obj):
        return base64.b64encode(zlib.compress(pickle.dumps(obj))).decode()

    private = [{"input": "10 -3\n", "output": "7\n", "testtype": "stdin"}, {"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]
    row = {**STDIO_ROWS["livecodebench"], "private_test_cases": packed(json.dumps(private))}
    marker = tmp_path / "ran"

    class Hostile:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    hostile = {**STDIO_ROWS["livecodebench"], "question_id": "abc002_a", "private_test_cases": packed(Hostile())}
    path = tmp_path / "lcb.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(hostile) + "\n")
    task, left = load_code_jsonl(path)
    assert [t[1:] for t in task.io_tests] == [("1 2\n", "3\n"), ("10 -3\n", "7\n"), ("5 5\n", "10\n")]
    assert [t[1:] for t in left.io_tests] == [("1 2\n", "3\n")] and not marker.exists()
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    assert _answer(env, 0, f"```python\n{SUM_PROGRAM}```")[1] == 1.0
    # 2 of 3 tests passed, 1 more than a program printing the same whatever its input: half the way
    assert _answer(env, 0, "```python\nprint(sum(abs(int(x)) for x in input().split()))\n```")[1] == pytest.approx(0.5)
    assert _answer(env, 0, "```python\nprint(3)\n```")[1] == 0.0  # passes 1, as printing a fixed text does


CALL_ROWS = [
    # APPS / TACO, Codewars style: a module-level function; each output wrapped in a list, as APPS stores many.
    {"problem_id": 2000, "question": "Return the digits of n squared and joined.", "starter_code": "def square_digits(num):\n\t",
     "solutions": json.dumps(["def square_digits(num):\n    return int(''.join(str(int(d) ** 2) for d in str(num)))"]),
     "input_output": json.dumps({"fn_name": "square_digits", "inputs": [[9119], [0], [24]], "outputs": [[811181], [0], [416]]})},
    # APPS, LeetCode style: a method of class Solution, annotated with List (never imported by the starter code).
    {"problem_id": 2001, "question": "Return the best profit of one buy and one later sale.",
     "starter_code": "class Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n        ",
     "solutions": json.dumps(["class Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n        best, low = 0, float('inf')\n"
                              "        for p in prices:\n            low = min(low, p)\n            best = max(best, p - low)\n        return best\n"]),
     "input_output": {"fn_name": "maxProfit", "inputs": [[[7, 1, 5, 3, 6, 4]], [[7, 6, 4, 3, 1]]], "outputs": [5, 0]}},
    # LiveCodeBench: functional tests, one JSON line per argument; the name in metadata.
    {"question_id": "3000", "question_content": "Return each pair of neighbours, the k-th argument unused.",
     "starter_code": "class Solution:\n    def pairUp(self, nums: List[int], k: int) -> List[List[int]]:\n        ",
     "metadata": json.dumps({"func_name": "pairUp"}),
     "public_test_cases": json.dumps([{"input": "[1, 2, 3]\n2", "output": "[[1, 2], [2, 3]]", "testtype": "functional"},
                                      {"input": "[5]\n0", "output": "[]", "testtype": "functional"}]),
     "private_test_cases": "eJzLSM3JyQcABiwCFQ=="},
]


def test_jsonl_of_function_call_tasks(tmp_path):
    """APPS / TACO ``fn_name`` records and LiveCodeBench ``functional`` ones: each test calls the
    function (a ``Solution`` method where the code has one) with the record's arguments, and the
    result is compared outside the sandbox, as those data sets' graders compare it."""
    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in CALL_ROWS))
    tasks = load_code_jsonl(path)
    assert [(t.task_id, t.entry_point, len(t.tests), t.unverifiable) for t in tasks] == [
        ("2000", "square_digits", 3, None), ("2001", "maxProfit", 2, None), ("3000", "pairUp", 2, None)]
    assert "starting from" in tasks[1].prompt and "def maxProfit(self" in tasks[1].prompt and "[7, 1" not in tasks[1].prompt
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    for index in range(2):  # the references, as the records hold them (LiveCodeBench ships none)
        env.reset(options={"task_index": index})
        _, reward, _, _, info = env.step(env.unwrapped.expert_action())
        assert reward == 1.0, info
    answers = {  # (tests passed, reward): a function returning 0 or [] passes 1 test of each task, so 1 pass earns 0
        # a tuple in what is returned compares as a list (JSON has none), as the data sets' graders do
        (2, "class Solution:\n    def pairUp(self, nums, k):\n        return [(a, b) for a, b in zip(nums, nums[1:])]"): (2, 1.0),
        (2, "def pairUp(nums, k):\n    return [[1, 2], [2, 3]]"): (1, 0.0),  # no Solution class: the function is called
        (1, "def maxProfit(prices):\n    return 5"): (1, 0.0),
        (0, "def square_digits(num):\n    return [811181]"): (1, 0.0),  # the stored output itself, or its one element
        (0, "def square_digits(num):\n    return [811181] if num else 0"): (2, 0.5),
        (0, "print(811181)"): (0, 0.0),  # no such function: every call fails
    }
    for (index, code), expected in answers.items():
        _, reward, _, _, info = _answer(env, index, f"```python\n{code}\n```")
        assert (info["passed"], reward) == pytest.approx(expected), (code, info)
    assert "NameError: name 'square_digits' is not defined" in info["tests"][0]["message"]
    box = CodeSandbox()
    try:
        task = tasks[1]
        result = box.run_tests(task.program(task.reference), [TestCase(name, "assert", source) for name, source in task.tests])
        assert result.status == Status.CORRECT and result.details["verdict"] == "outputs-compared"
    finally:
        box.close()


def test_function_call_records_that_cannot_be_graded_are_refused(tmp_path):
    path = tmp_path / "bad.jsonl"
    row = CALL_ROWS[2]
    for bad, message in [({**row, "metadata": "{}"}, "bad.jsonl:1: functional tests need the function's name"),
                         ({**CALL_ROWS[0], "input_output": {"fn_name": "f x", "inputs": [[1]], "outputs": [1]}}, "not a Python name"),
                         ({**CALL_ROWS[0], "input_output": {"fn_name": "f", "inputs": [1], "outputs": [1]}}, "not a list of them"),
                         ({**CALL_ROWS[0], "input_output": {"fn_name": "f", "inputs": [], "outputs": []}}, "no test of f"),
                         ({**row, "public_test_cases": [{"input": "[1", "output": "1", "testtype": "functional"}], "metadata": {"func_name": "f"}},
                          "not JSON")]:
        path.write_text(json.dumps(bad) + "\n")
        with pytest.raises(DatasetError, match=message):
            load_code_jsonl(path)


def _first_repair_attempt(tmp_path, row, code):
    """CodeRepair-v0 on the one-record data set ``row``: the env and its reply to a first, wrong ``code``."""
    path = tmp_path / "repair.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = gym.make("CodeRepair-v0", dataset=str(path), max_turns=2)
    env.reset(options={"task_index": 0})
    return env, env.step(f"```python\n{code}\n```")


def test_code_repair_on_function_call_tasks_never_shows_an_expected_value(tmp_path):
    _, (obs, reward, terminated, _, _) = _first_repair_attempt(tmp_path, CALL_ROWS[0], "def square_digits(num):\n    return -1")
    assert not terminated and reward == 0.0
    assert "(9119) returned -1" in obs and "held-back" in obs and "function" in obs
    assert "811181" not in obs and "416" not in obs


def test_code_repair_on_standard_input_tasks_never_shows_an_expected_output(tmp_path):
    row = {**STDIO_ROWS["apps"], "input_output": json.dumps({"inputs": ["1 2\n", "40 2\n"], "outputs": ["3\n", "42\n"]})}
    env, (obs, reward, terminated, _, _) = _first_repair_attempt(tmp_path, row, "print(-1)")
    assert not terminated and reward == 0.0
    assert "with input '1 2\\n' it printed '-1\\n'" in obs and "held-back" in obs and "complete program" in obs
    assert "3\\n" not in obs and "42" not in obs
    _, reward, terminated, _, _ = env.step(f"```python\n{SUM_PROGRAM}```")
    assert terminated and reward == 1.0


def test_standard_input_records_without_tests_or_statement_are_refused(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "Q", "input_output": json.dumps({"inputs": [], "outputs": []})}) + "\n")
    with pytest.raises(DatasetError, match="bad.jsonl:1: the record holds no standard input/output test"):
        load_code_jsonl(path)
    path.write_text(json.dumps({"public_tests": {"input": ["1"], "output": ["1"]}}) + "\n")
    with pytest.raises(DatasetError, match="needs its statement"):
        load_code_jsonl(path)
    path.write_text(json.dumps({"question": "Q", "input_output": "{not json"}) + "\n")
    with pytest.raises(DatasetError, match="input_output is not JSON"):
        load_code_jsonl(path)


def test_env_holds_no_sandbox_and_pickles_after_use():
    env = gym.make("CodeSandbox-v0")
    env.reset(seed=1)
    env.step(env.unwrapped.expert_action())
    blob = pickle.dumps(env)
    assert b"mathgym.rewards.sandbox" not in blob and len(blob) < 200_000
    clone = pickle.loads(blob)
    clone.reset(seed=1)
    assert clone.step(clone.unwrapped.expert_action())[1] == 1.0
    assert len(humaneval_tasks()) == 164


# -- CodeRepair -------------------------------------------------------------------------


def test_code_repair_feedback_then_fix_terminates_solved():
    env = gym.make("CodeRepair-v0", max_turns=3)
    env.reset(options={"task_index": _index("builtin/second_largest")})
    first = "```python\ndef second_largest(nums):\n    return sorted(nums)[-2]\n```"
    obs, reward, terminated, truncated, info = env.step(first)
    assert not terminated and not truncated and reward == 0.0 and info["status"] == "in_progress"
    assert info["attempt_status"] == "wrong" and "Passed 2 of 5" in obs and "test_2" in obs and "IndexError" in obs
    assert "1 held-back test" in obs and "test_1" not in obs  # test_1 fails too, but is held back
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
    assert terminated and not truncated and reward == 1.0 and info["correct"] and info["turn"] == 2
    assert [m["role"] for m in info["messages"]][-3:] == ["assistant", "user", "assistant"]


def test_code_repair_budget_truncates_and_scores_last_attempt():
    env = gym.make("CodeRepair-v0", max_turns=2, reward_mode="fraction")
    env.reset(options={"task_index": _index("builtin/second_largest")})
    env.step("no code here, sorry")
    # 3 tests of 5 pass; 2 (``is None``) pass for a function returning None: 1 of the 3 others is a third of the way
    _, reward, terminated, truncated, info = env.step("def second_largest(nums):\n    return sorted(set(nums))[-2]\n")
    assert truncated and not terminated and reward == pytest.approx(1 / 3) and info["status"] == "partial"
    assert info["answer"].startswith("def second_largest")


# -- MathTool ---------------------------------------------------------------------------


def _tool_agent(obs: str) -> str:
    """Scripted tool user: asks Python for the sum, then answers with what it printed."""
    printed = re.search(r"<output>\n(-?\d+)\n</output>", obs)
    if printed:
        return f"The tool says {printed.group(1)}, so \\boxed{{{printed.group(1)}}}"
    a, b = re.findall(r"\d+", obs.split("?")[0])
    return f"<python>\nprint({a} + {b})\n</python>"


def test_math_tool_scripted_tool_user_solves_in_two_turns():
    env = gym.make("MathTool-v0", difficulty=0)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        obs, reward, terminated, _, info = env.step(_tool_agent(obs))
        assert not terminated and info["tool_calls"] == 1 and info["status"] == "in_progress"
        obs, reward, terminated, _, info = env.step(_tool_agent(obs))
        assert terminated and reward == 1.0 and info["correct"]


def test_math_tool_errors_are_observations_and_budgets_hold():
    env = gym.make("MathTool-v0", max_turns=5, max_tool_calls=2)
    env.reset(seed=0)
    obs, _, _, _, info = env.step("<python>raise ValueError('bad tool input')</python>")
    assert "ValueError: bad tool input" in obs and info["status"] == "in_progress"
    obs, _, _, _, info = env.step("```python\nprint(1 +\n```")
    assert "SyntaxError" in obs and info["tool_calls"] == 2
    obs, _, _, _, info = env.step("<python>print(2)</python>")
    assert info["status"] == "format_error" and "budget" in obs
    obs, _, _, _, info = env.step("thinking out loud")
    assert info["status"] == "format_error"
    _, reward, terminated, truncated, info = env.step("still nothing")
    assert truncated and not terminated and reward == 0.0 and info["status"] == "unparseable"
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("<python>print(1)</python> but I answer \\boxed{-1}")
    assert terminated and info["status"] == "wrong"  # a final answer outside code ends the episode


@pytest.mark.parametrize("row", [
    [1, 2],  # not an object
    {"question": "Q", "input_output": {"inputs": 3, "outputs": ["1"]}},  # inputs not a list
    {"prompt": "def f():\n", "entry_point": "f", "test": ["assert f()"]},  # HumanEval test not text
    {"text": "Write f.", "test_list": None},  # MBPP tests missing
    {"text": "Write f.", "test_list": ["assert f() == 1"], "test_imports": [1, 2]},  # imports not text
])
def test_a_malformed_record_is_one_data_set_error_naming_its_line(tmp_path, row):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"text": "Write g.", "test_list": ["assert g() == 1"], "code": "def g():\n    return 1"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match="bad.jsonl:2: "):
        load_code_jsonl(path)


def test_io_tests_stop_at_the_first_failure_when_only_all_passing_counts():
    """With ``stop_at_failure`` every test up to the first failing one (in order) runs and every
    later one is reported not run, whichever had started on the other worker: the same outcome
    each time. Without it (or for the ``fraction`` reward) every test runs."""
    from mathgym.rewards.sandbox import NOT_RUN

    program = "import sys\nn = int(sys.stdin.read())\nprint(n * n if n != 3 else -1)\n"
    tests = [TestCase(f"io_{n}", "io", stdin=f"{n}\n", expected_stdout=f"{n * n}\n") for n in range(1, 7)]
    box = CodeSandbox(workers=2)
    try:
        for _ in range(3):
            result = box.run_tests(program, tests, stop_at_failure=True)
            assert [(t.status, t.message == NOT_RUN) for t in result.tests] == [
                (Status.CORRECT, False), (Status.CORRECT, False), (Status.WRONG, False), *[(Status.WRONG, True)] * 3]
            assert result.status == Status.WRONG and result.passed == 2
        result = box.run_tests(program, tests)
        assert [t.passed for t in result.tests] == [True, True, False, True, True, True]
        assert box.run_tests(program.replace("-1", "n * n"), tests, stop_at_failure=True).status == Status.CORRECT
    finally:
        box.close()


#: The shape of EvalPlus's MBPP+ ``test`` script (written here): inputs and results, compared by a helper.
MBPP_PLUS_SCRIPT = '''
def assertion(out, exp, atol):
    if atol == 0 and isinstance(exp, float):
        atol = 1e-6
    assert abs(out - exp) <= atol if atol else out == exp

inputs = [[(3, 4, 5, 6), (5, 7, 4, 10)], [(1, 2, 3, 4), (5, 4, 3, 7)], [(), (1,)], [(9, 9), (9,)]]
results = [(4, 5), (3, 4), (), (9,)]
for i, (inp, exp) in enumerate(zip(inputs, results)):
    assertion(similar_elements(*inp), exp, 0)
'''


def test_jsonl_in_mbpp_plus_format_runs_the_extended_script_too(tmp_path):
    row = {"task_id": 2, "prompt": "Write a function to find the shared elements from the given two lists.",
           "code": "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n", "source_file": "x.py",
           "test_imports": [], "test_list": ["assert set(similar_elements((3, 4, 5, 6), (5, 7, 4, 10))) == set((4, 5))"],
           "test": MBPP_PLUS_SCRIPT}
    path = tmp_path / "mbppplus.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = load_code_jsonl(path)
    assert task.test_names == ["test_0", "plus"] and task.entry_point == "similar_elements"
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info
    # right on the shown test, wrong on the empty intersection the extended inputs hold
    _, reward, _, _, info = _answer(env, 0, "```python\ndef similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b))) or (0,)\n```")
    assert reward == 0.5 and [t["passed"] for t in info["tests"]] == [True, False], info


def test_all_or_nothing_stops_at_the_first_failing_io_test_except_where_feedback_describes_them(tmp_path):
    from mathgym.rewards.sandbox import NOT_RUN

    path = tmp_path / "apps.jsonl"
    row = {**STDIO_ROWS["apps"], "input_output": json.dumps({"inputs": ["1 2\n", "40 2\n", "3 3\n"], "outputs": ["3\n", "42\n", "6\n"]})}
    path.write_text(json.dumps(row) + "\n")
    wrong = "```python\nprint(-1)\n```"
    _, reward, _, _, info = _answer(gym.make("CodeSandbox-v0", dataset=str(path)), 0, wrong)
    assert reward == 0.0 and [t["message"] == NOT_RUN for t in info["tests"]] == [False, True, True]
    _, reward, _, _, info = _answer(gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction"), 0, wrong)
    assert reward == 0.0 and not any(t["message"] == NOT_RUN for t in info["tests"])
    env = gym.make("CodeRepair-v0", dataset=str(path), max_turns=2)  # its feedback describes each failure: all run
    _, reward, _, _, info = _answer(env, 0, wrong)
    assert reward == 0.0 and not any(t["message"] == NOT_RUN for t in info["tests"]) and len(info["tests"]) == 3


KODCODE_TEST = '''import pytest
from solution import two_sum as pair_sum, helper

LIMIT = 10


def test_found():
    assert pair_sum([2, 7, 11, 15], 9) == [0, 1]


@pytest.mark.parametrize("nums, target, expected", [([3, 2, 4], 6, [1, 2]), ([3, 3], 6, [0, 1])])
def test_cases(nums, target, expected):
    assert pair_sum(nums, target) == expected


def test_none_raises():
    with pytest.raises(ValueError):
        pair_sum([1], LIMIT)


class TestHelper:
    def test_helper(self):
        assert helper() == 3


if __name__ == "__main__":
    pytest.main()
'''
KODCODE_SOLUTION = '''def helper():
    return 3


def two_sum(nums, target):
    seen = {}
    for i, n in enumerate(nums):
        if target - n in seen:
            return [seen[target - n], i]
        seen[n] = i
    raise ValueError("no pair")
'''


def test_jsonl_of_pytest_files_importing_from_solution(tmp_path):
    """KodCode's records: a pytest file importing the code from ``solution``; each test function,
    each parametrize case and each test method is one test, run without pytest's runner."""
    rows = [
        {"question_id": "Leetcode_1", "question": "Return the indices of two numbers adding up to target.", "solution": KODCODE_SOLUTION,
         "test": KODCODE_TEST, "test_info": [{"function_name": "two_sum", "parameter_list": "(nums, target)"}], "style": "instruct"},
        {"question_id": "Leetcode_2", "question": "Read HOME.", "solution": "import os\ndef home():\n    return os.environ['HOME']\n",
         "test": "from solution import home\n\ndef test_home(monkeypatch):\n    monkeypatch.setenv('HOME', '/x')\n    assert home() == '/x'\n", "test_info": []},
        # a class: its instances stay in the sandbox, the test calls their methods there
        {"question_id": "Leetcode_3", "question": "Write a counter class.",
         "solution": "class Counter:\n    def __init__(self):\n        self.n = 0\n    def tick(self):\n        self.n += 1\n        return self.n\n",
         "test": "from solution import Counter\n\ndef test_ticks():\n    c = Counter()\n    assert c.tick() == 1 and c.tick() == 2 and c.n == 2\n",
         "test_info": [{"function_name": "Counter"}]},
    ]
    path = tmp_path / "kodcode.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.warns(UserWarning, match="1 of 3 code tasks score 'unverifiable'.*test_home needs the pytest fixture"):
        task, fixture, counter = load_code_jsonl(path)
    assert task.task_id == "Leetcode_1" and task.entry_point == "two_sum" and "defines `two_sum`" in task.prompt
    assert [name for name, _ in task.tests] == ["test_found", "test_cases[0]", "test_cases[1]", "test_none_raises", "TestHelper.test_helper"]
    assert all("pytest.main" not in source for _, source in task.tests)
    with warnings.catch_warnings():  # the load above warned already
        warnings.simplefilter("ignore")
        env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step(env.unwrapped.expert_action())
    assert reward == 1.0, info
    wrong = KODCODE_SOLUTION.replace('raise ValueError("no pair")', "return []").replace("return 3", "return 4")
    _, reward, _, _, info = _answer(env, 0, f"```python\n{wrong}```")
    assert reward == pytest.approx(3 / 5) and [t["passed"] for t in info["tests"]] == [True, True, True, False, False], info
    _, reward, _, _, info = _answer(env, 1, f"```python\n{rows[1]['solution']}```")
    assert (reward, info["status"]) == (0.0, Status.UNVERIFIABLE)
    assert counter.unverifiable is None and _answer(env, 2)[1] == 1.0
    assert _answer(env, 2, "```python\nclass Counter:\n    n = 2\n    def tick(self):\n        return 1\n```")[1] == 0.0


KODCODE_SETUP_TEST = '''import unittest
import pytest
from solution import total

LOG = []


@pytest.fixture(autouse=True)
def fresh_log():
    LOG.clear()
    yield
    LOG.append("done")


class TestWithUnittest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = 10

    def setUp(self):
        self.data = [1, 2]

    def test_sum(self):
        self.assertEqual(total(self.data), 3)

    def test_base(self):
        self.assertEqual(total([self.base]), 10)

    def test_each(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertEqual(total([i, i]), 2 * i)

    def test_refuses_text(self):
        with self.assertRaises(TypeError):
            total(["a", 1])

    def test_skips_itself(self):
        self.skipTest("not today")


class TestPlainClass:
    def setup_method(self, method):
        self.items = [4]

    @pytest.fixture(autouse=True)
    def more(self):
        self.items.append(5)
        yield

    def test_items(self):
        assert LOG == [] and total(self.items) == 9

    @pytest.mark.skip(reason="broken")
    def test_broken(self):
        assert False


def test_log_is_fresh():
    assert LOG == [] and total([]) == 0


def test_skipped_by_pytest():
    pytest.skip("later")
'''


def test_pytest_files_run_the_set_up_pytest_would(tmp_path):
    """A KodCode file's unittest classes get ``setUpClass`` / ``setUp`` (subtests, ``assertRaises``
    and ``skipTest`` behave as under pytest), plain classes ``setup_method``, and every test the
    autouse fixtures (a generator one finished after the test); a test marked skip is left out,
    and an autouse fixture that needs another fixture makes the task unverifiable."""
    row = {"question_id": "kod_setup", "question": "Sum a list.", "solution": "def total(xs):\n    return sum(xs)\n",
           "test": KODCODE_SETUP_TEST, "test_info": [{"function_name": "total"}]}
    path = tmp_path / "setup.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = load_code_jsonl(path)
    names = ["test_log_is_fresh", "test_skipped_by_pytest", *(f"TestWithUnittest.test_{n}" for n in ("sum", "base", "each", "refuses_text", "skips_itself")),
             "TestPlainClass.test_items"]
    assert [name for name, _ in task.tests] == names and task.unverifiable is None
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info
    wrong = "def total(xs):\n    return sum(x for x in xs if isinstance(x, int)) if len(xs) != 2 or xs[0] != 2 else 0\n"
    _, reward, _, _, info = _answer(env, 0, f"```python\n{wrong}```")
    assert [t["name"] for t in info["tests"] if not t["passed"]] == ["TestWithUnittest.test_each", "TestWithUnittest.test_refuses_text"], info
    needy = KODCODE_SETUP_TEST.replace("def fresh_log():", "def fresh_log(monkeypatch):")
    path.write_text(json.dumps({**row, "test": needy}) + "\n")
    with pytest.warns(UserWarning, match="the autouse fixture fresh_log needs the pytest fixture"):
        (task,) = load_code_jsonl(path)


BIGCODEBENCH_ROW = {
    "task_id": "BigCodeBench/0",
    "complete_prompt": "import itertools\n\ndef task_func(numbers=(1, 2, 3)):\n    \"\"\"\n    Sum of absolute differences of neighbours, over every"
                       " permutation, averaged.\n    \"\"\"\n",
    "instruct_prompt": "Average, over every permutation of the numbers, the sum of absolute differences of neighbours.\n"
                       "You should write self-contained code starting with:\n```\nimport itertools\ndef task_func(numbers=(1, 2, 3)):\n```",
    "canonical_solution": "    sums = [sum(abs(a - b) for a, b in zip(p, p[1:])) for p in itertools.permutations(numbers)]\n    return sum(sums) / len(sums)\n",
    "code_prompt": "import itertools\ndef task_func(numbers=(1, 2, 3)):\n",
    "test": "import unittest\n\nclass TestCases(unittest.TestCase):\n    def setUp(self):\n        self.pair = [1, 4]\n\n"
            "    def test_default(self):\n        self.assertAlmostEqual(task_func(), 8 / 3)\n\n"
            "    def test_pair(self):\n        self.assertEqual(task_func(self.pair), 3.0)\n\n"
            "    def test_kind(self):\n        self.assertIsInstance(task_func([5]), float)\n",
    "entry_point": "task_func", "libs": "['itertools']", "doc_struct": "{}",
}


def test_bigcodebench_records_run_their_unittest_classes(tmp_path):
    """BigCodeBench: the instruction shown, each test method one test with its class's ``setUp``,
    the reference the prompt and its canonical body; a body alone continues the prompt. Tests that
    patch modules with ``unittest.mock`` cannot reach the sandboxed program: unverifiable."""
    mocked = {**BIGCODEBENCH_ROW, "task_id": "BigCodeBench/1",
              "test": "import unittest\nfrom unittest.mock import patch\n\nclass TestCases(unittest.TestCase):\n"
                      "    @patch('itertools.permutations', return_value=[(1, 2)])\n    def test_patched(self, mocked):\n"
                      "        self.assertEqual(task_func(), 1.0)\n"}
    path = tmp_path / "bcb.jsonl"
    path.write_text(json.dumps(BIGCODEBENCH_ROW) + "\n" + json.dumps(mocked) + "\n")
    with pytest.warns(UserWarning, match="1 of 2 code tasks score 'unverifiable'.*unittest.mock"):
        task, patched = load_code_jsonl(path)
    assert [name for name, _ in task.tests] == ["TestCases.test_default", "TestCases.test_pair", "TestCases.test_kind"]
    assert task.prompt.startswith("Average, over every permutation") and task.unverifiable is None and patched.unverifiable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    assert _answer(env, 0)[1] == 1.0
    assert _answer(env, 0, "```python\n" + BIGCODEBENCH_ROW["canonical_solution"] + "```")[1] == 1.0  # a body alone
    _, reward, _, _, info = _answer(env, 0, "```python\ndef task_func(numbers=(1, 2, 3)):\n    return 3\n```")
    assert reward == pytest.approx(1 / 3) and [t["passed"] for t in info["tests"]] == [False, True, False], info
    assert _answer(env, 1)[2:4] == (True, False) and _answer(env, 1)[4]["status"] == Status.UNVERIFIABLE
    # a task naming a library that is not installed where the sandbox runs: every answer would fail on the import
    path.write_text(json.dumps({**BIGCODEBENCH_ROW, "libs": "['itertools', 'no_such_library_here']"}) + "\n")
    with pytest.warns(UserWarning, match="it needs no_such_library_here, not installed here"):
        (missing,) = load_code_jsonl(path)
    assert missing.unverifiable == "it needs no_such_library_here, not installed here"


def test_labels_holding_tests_grade_programs_in_verls_and_openrlhfs_reward_functions():
    """verl's compute_score and OpenRLHF's reward_func grade a label that holds a program's tests
    (APPS's inputs and outputs, function calls, a list of cases; an object or JSON) by running the
    response's program in the sandbox; what a label is follows from the label, not data_source."""
    from mathgym.envs.coding.code_tasks import tests_task
    from mathgym.integrations.verl import compute_score

    stdio = json.dumps({"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]})
    calls = {"fn_name": "square", "inputs": [[3], [-2]], "outputs": [9, 4]}
    cases = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    assert [len(tests_task(label).io_tests or tests_task(label).tests) for label in (stdio, calls, cases)] == [2, 2, 1]
    assert all(tests_task(label) is None for label in ("42", "[0, 1]", "{1, 2}", "\\frac{1}{2}", json.dumps(["3", "3.0"]), {"a": 1}))
    fenced = f"My program:\n```python\n{SUM_PROGRAM}```"
    assert compute_score("codecontests", fenced, stdio) == 1.0 and compute_score("math", fenced, stdio) == 1.0
    assert compute_score("codecontests", "```python\nprint(3)\n```", stdio) == 0.0
    assert compute_score("apps", "def square(n):\n    return n * n", calls) == 1.0
    assert compute_score("apps", "def square(n):\n    return 9", calls) == 0.0
    assert compute_score("livecodebench", fenced, cases) == 1.0
    assert compute_score("codecontests", "import os\nos.kill(os.getppid(), 9)", stdio) == 0.0
    assert compute_score("gsm8k", "so \\boxed{42}", "42") == 1.0  # answers stay answers


def test_programs_returning_numpy_and_pandas_values_are_graded_by_value(tmp_path):
    """KodCode's numpy tasks and BigCodeBench's pandas ones: an array, a numpy scalar or a
    DataFrame the program returns reaches the test rebuilt from its data, so numpy's and
    pandas' own assertions judge it (before, they met a handle and failed right programs)."""
    pytest.importorskip("pandas")
    numpy_test = (
        "import numpy as np\nfrom solution import make\n\n"
        "def test_equal():\n    np.testing.assert_array_equal(make(3), np.array([0, 1, 2]))\n\n"
        "def test_close():\n    assert np.allclose(make(3) / 2, [0, 0.5, 1])\n\n"
        "def test_scalar():\n    assert make(3).sum() == 3\n\n"
        "def test_argument():\n    assert make(np.int64(2)).tolist() == [0, 1]\n"
    )
    rows = [
        {"question_id": "np", "question": "Return numpy.arange(n).", "solution": "import numpy as np\ndef make(n):\n    return np.arange(n)\n",
         "test": numpy_test},
        {**BIGCODEBENCH_ROW, "task_id": "BigCodeBench/frame",
         "complete_prompt": "import pandas as pd\n\ndef task_func(n):\n    \"\"\"A frame of n rows.\"\"\"\n",
         "canonical_solution": "    return pd.DataFrame({'a': list(range(n)), 'b': ['x'] * n})\n",
         "test": "import unittest\nimport pandas as pd\n\nclass TestCases(unittest.TestCase):\n"
                 "    def test_frame(self):\n        pd.testing.assert_frame_equal(task_func(2), pd.DataFrame({'a': [0, 1], 'b': ['x', 'x']}))\n"
                 "    def test_column(self):\n        self.assertEqual(task_func(3)['a'].sum(), 3)\n"},
    ]
    path = tmp_path / "arrays.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    for index in (0, 1):
        _, reward, _, _, info = _answer(env, index)
        assert reward == 1.0, info["tests"]
    _, reward, _, _, info = _answer(env, 0, "```python\nimport numpy as np\ndef make(n):\n    return np.arange(1, n + 1)\n```")
    assert reward == 0.0 and all(t["status"] == "wrong" for t in info["tests"]), info["tests"]
    wrong_frame = "```python\nimport pandas as pd\ndef task_func(n):\n    return pd.DataFrame({'a': list(range(n)), 'b': ['y'] * n})\n```"
    _, reward, _, _, info = _answer(env, 1, wrong_frame)
    assert [t["passed"] for t in info["tests"]] == [False, True], info["tests"]


def test_pandas_values_beyond_numpy_dtypes_are_graded_by_value(tmp_path):
    """BigCodeBench tasks whose frames hold dates in a time zone, pd.cut's categories or a
    groupby's MultiIndex: a right program passes pandas' own assertions, a wrong one fails them
    (before, such values reached the test as a handle, and right programs failed)."""
    pytest.importorskip("pandas")
    solution = (
        "    frame = pd.DataFrame({'k': ['x', 'x', 'y'], 'age': ages, 'at': pd.to_datetime(['2024-03-30 12:00'] * 3).tz_localize('UTC')})\n"
        "    frame['group'] = pd.cut(frame['age'], bins=[0, 18, 120], labels=['minor', 'adult'])\n"
        "    frame['at'] = frame['at'].dt.tz_convert(zone)\n"
        "    return frame, frame.groupby(['k', 'group'], observed=True)['age'].sum()\n"
    )
    test = (
        "import unittest\nimport pandas as pd\n\nclass TestCases(unittest.TestCase):\n"
        "    def test_frame(self):\n        frame, _ = task_func([5, 30, 70], 'Europe/Paris')\n"
        "        self.assertEqual(list(frame['group']), ['minor', 'adult', 'adult'])\n"
        "        self.assertEqual(str(frame['at'].dt.tz), 'Europe/Paris')\n"
        "        self.assertEqual(frame['at'].iloc[0].hour, 13)\n"
        "    def test_groups(self):\n        _, sums = task_func([5, 30, 70], 'UTC')\n"
        "        expected = pd.Series([5, 30, 70], name='age', index=pd.MultiIndex.from_arrays(\n"
        "            [['x', 'x', 'y'], pd.Categorical(['minor', 'adult', 'adult'], categories=['minor', 'adult'], ordered=True)], names=['k', 'group']))\n"
        "        pd.testing.assert_series_equal(sums, expected)\n"
    )
    row = {**BIGCODEBENCH_ROW, "task_id": "BigCodeBench/zoned", "libs": "['pandas']",
           "complete_prompt": "import pandas as pd\n\ndef task_func(ages, zone):\n    \"\"\"Ages binned, a time in a zone, sums by key and bin.\"\"\"\n",
           "canonical_solution": solution, "test": test}
    path = tmp_path / "zoned.jsonl"
    path.write_text(json.dumps(row) + "\n")
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info["tests"]
    wrong = "```python\nimport pandas as pd\ndef task_func(ages, zone):\n" + solution.replace("tz_convert(zone)", "tz_convert('UTC')").replace(
        "'minor', 'adult']", "'young', 'adult']") + "```"
    _, reward, _, _, info = _answer(env, 0, wrong)
    assert reward == 0.0 and all(t["status"] == "wrong" for t in info["tests"]), info["tests"]


def _bigcodebench_file(tmp_path, name, prompt, solution, test):
    row = {**BIGCODEBENCH_ROW, "task_id": f"BigCodeBench/{name}", "libs": "['os']", "complete_prompt": prompt,
           "canonical_solution": solution, "test": test}
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")


def test_files_a_test_makes_are_the_programs_and_the_programs_are_the_tests(tmp_path):
    """BigCodeBench's file tasks: the test writes files (through tempfile, or relative to its working
    dir) that the program reads, changes or removes, and reads what the program wrote. The two
    share the job's working dir, at the same path on both sides of the sandbox boundary (before,
    the program saw none of the test's files and right programs failed)."""
    prompt = "import os\nimport shutil\n\ndef task_func(src, dst):\n    \"\"\"Move the .txt files of src to dst; count them.\"\"\"\n"
    solution = (
        "    os.makedirs(dst, exist_ok=True)\n    moved = [n for n in sorted(os.listdir(src)) if n.endswith('.txt')]\n"
        "    for n in moved:\n        shutil.move(os.path.join(src, n), os.path.join(dst, n))\n"
        "    with open(os.path.join(dst, 'log.csv'), 'w') as f:\n        f.write(','.join(moved))\n    return len(moved)\n"
    )
    test = (
        "import os\nimport shutil\nimport tempfile\nimport unittest\n\nclass TestCases(unittest.TestCase):\n"
        "    def setUp(self):\n        self.src = tempfile.mkdtemp()\n        self.dst = os.path.join(self.src, 'out')\n"
        "        for n in ('a.txt', 'b.txt', 'c.csv'):\n            with open(os.path.join(self.src, n), 'w') as f:\n                f.write(n)\n"
        "    def tearDown(self):\n        shutil.rmtree(self.src)\n"
        "    def test_moved(self):\n        self.assertEqual(task_func(self.src, self.dst), 2)\n"
        "        self.assertEqual(sorted(os.listdir(self.src)), ['c.csv', 'out'])\n"
        "        with open(os.path.join(self.dst, 'log.csv')) as f:\n            self.assertEqual(f.read(), 'a.txt,b.txt')\n"
        "    def test_relative(self):\n        os.makedirs('here', exist_ok=True)\n        open('here/x.txt', 'w').close()\n"
        "        self.assertEqual(task_func('here', 'there'), 1)\n        self.assertTrue(os.path.exists('there/x.txt'))\n"
        "    def test_moved_into(self):\n        home = os.getcwd()\n        os.chdir(self.src)  # the program works where the test does\n"
        "        try:\n            self.assertEqual(task_func('.', 'done'), 2)\n            self.assertTrue(os.path.exists('done/a.txt'))\n"
        "        finally:\n            os.chdir(home)\n"
    )
    env = _bigcodebench_file(tmp_path, "move", prompt, solution, test)
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info["tests"]
    lazy = "```python\nimport os\nimport shutil\ndef task_func(src, dst):\n" + solution.replace("shutil.move", "shutil.copy") + "```"
    _, reward, _, _, info = _answer(env, 0, lazy)  # copies instead of moving: the test sees the files still there
    assert [t["passed"] for t in info["tests"]] == [False, True, True], info["tests"]


def test_modules_a_program_writes_in_the_shared_dir_never_run_in_the_judge(tmp_path):
    """The judge shares its working dir with the program, not its imports: a module the program
    writes there (a new name, or one shadowing the standard library) is not what the test imports."""
    prompt = "import os\n\ndef task_func():\n    \"\"\"Return 1.\"\"\"\n"
    planting = (
        "    return 1\n\n\nfor _name in ('planted_mod.py', 'colorsys.py', 'json.py'):\n"
        "    with open(_name, 'w') as _f:\n        _f.write('X = 1\\n')\n"
    )
    test = (
        "import os\nimport unittest\n\nclass TestCases(unittest.TestCase):\n    def test_one(self):\n        self.assertEqual(task_func(), 1)\n"
        "        self.assertTrue(os.path.exists('planted_mod.py'))  # written where the test works\n"
        "        with self.assertRaises(ImportError):\n            import planted_mod\n"
        "        import colorsys, json\n        self.assertFalse(hasattr(colorsys, 'X') or hasattr(json, 'X'))\n"
    )
    env = _bigcodebench_file(tmp_path, "plant", prompt, planting, test)
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info["tests"]


def test_pytest_files_with_tmp_path_and_tmpdir_share_the_dir_with_the_program(tmp_path):
    """KodCode's file tests ask for ``tmp_path`` or ``tmpdir``: a fresh dir in the job's shared
    working dir, where the test writes what the program reads and reads what it writes."""
    test = (
        "from solution import count_lines, write_upper\n\n"
        "def test_count(tmp_path):\n    path = tmp_path / 'a.txt'\n    path.write_text('x\\ny\\n')\n    assert count_lines(str(path)) == 2\n\n"
        "def test_write(tmpdir):\n    source = tmpdir.join('in.txt')\n    source.write('abc')\n"
        "    write_upper(str(source), str(tmpdir.join('out.txt')))\n    assert tmpdir.join('out.txt').read() == 'ABC'\n"
    )
    solution = (
        "def count_lines(path):\n    with open(path) as f:\n        return len(f.read().splitlines())\n\n"
        "def write_upper(source, target):\n    with open(source) as f, open(target, 'w') as out:\n        out.write(f.read().upper())\n"
    )
    path = tmp_path / "files.jsonl"
    path.write_text(json.dumps({"question_id": "tmp", "question": "Count lines; copy in capitals.", "solution": solution, "test": test}) + "\n")
    (task,) = load_code_jsonl(path)
    assert not task.unverifiable
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info["tests"]
    _, reward, _, _, info = _answer(env, 0, "```python\n" + solution.replace(".upper()", "") + "```")
    assert [t["passed"] for t in info["tests"]] == [True, False], info["tests"]


KODCODE_FIXTURES_TEST = """import pytest
from solution import Inventory, total

EVENTS = []


@pytest.fixture
def numbers():
    return [1, 2, 3]


@pytest.fixture(name="stock")
def make_stock(numbers):
    EVENTS.append("stock up")
    inventory = Inventory()
    for n in numbers:
        inventory.add(n)
    yield inventory
    with open("stock.log", "a") as log:  # the job's working dir: the next test of the job reads it
        log.write("down\\n")


@pytest.fixture
def saved(tmp_path, numbers):
    path = tmp_path / "numbers.txt"
    path.write_text(",".join(map(str, numbers)))
    return path


@pytest.fixture(params=[1, 2])
def each(request):
    return request.param


@pytest.fixture
def same(numbers):
    return numbers


def test_total(numbers):
    assert total(numbers) == 6


def test_shared(same, numbers):
    assert same is numbers  # one fixture value per test, whoever asks for it


def test_stock(stock, numbers):
    assert stock.count() == len(numbers)
    assert EVENTS[-1] == "stock up"  # made once for the test, finished after it


def test_stock_was_finished():
    with open("stock.log") as log:
        assert log.read() == "down\\n"


def test_file(saved):
    assert total(saved.read_text()) == 6


class TestStock:
    def test_method(self, stock):
        assert stock.count() == 3

    @pytest.mark.parametrize("extra", [1, 4])
    def test_parametrized(self, stock, extra):
        stock.add(extra)
        assert stock.count() == 4


class TestOwnFixture:
    @pytest.fixture
    def longer(self, numbers):
        return [*numbers, 4]

    def test_longer(self, longer):
        assert total(longer) == 10
"""


def test_pytest_files_with_their_own_named_fixtures(tmp_path):
    """KodCode's pytest files define fixtures that tests ask for by name: each is made for the
    test (once, with the fixtures it asks for itself, ``name=`` aliases, ``yield`` ones finished
    after it), as pytest does; a fixture pytest would parametrize stays out (its test is unverifiable)."""
    solution = (
        "class Inventory:\n    def __init__(self):\n        self.items = []\n    def add(self, n):\n        self.items.append(n)\n"
        "    def count(self):\n        return len(self.items)\n\n"
        "def total(xs):\n    if isinstance(xs, str):\n        xs = [int(x) for x in xs.split(',')]\n    return sum(xs)\n"
    )
    path = tmp_path / "fixtures.jsonl"
    path.write_text(json.dumps({"question_id": "fx", "question": "An inventory; a total.", "solution": solution,
                                "test": KODCODE_FIXTURES_TEST}) + "\n")
    (task,) = load_code_jsonl(path)
    assert [name for name, _ in task.tests] == ["test_total", "test_shared", "test_stock", "test_stock_was_finished", "test_file", "TestStock.test_method",
                                                 "TestStock.test_parametrized[0]", "TestStock.test_parametrized[1]", "TestOwnFixture.test_longer"]
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    _, reward, _, _, info = _answer(env, 0)
    assert reward == 1.0, info["tests"]
    counting_wrong = solution.replace("return len(self.items)", "return len(set(self.items))")  # the parametrized case adding 1 again
    _, reward, _, _, info = _answer(env, 0, f"```python\n{counting_wrong}```")
    assert [t["passed"] for t in info["tests"]] == [True, True, True, True, True, True, False, True, True], info["tests"]
    asking = KODCODE_FIXTURES_TEST + "\n\ndef test_each(each):\n    assert each in (1, 2)\n"
    path.write_text(json.dumps({"question_id": "fx", "question": "q", "solution": solution, "test": asking}) + "\n")
    with pytest.warns(UserWarning, match="test_each needs the pytest fixture"):
        (task,) = load_code_jsonl(path)
    assert task.unverifiable


def test_one_jobs_files_are_gone_before_the_next_job(tmp_path):
    """The shared working dir is the job's alone: what a program leaves in it, or beside it in the
    workspace, is removed before the next job, which starts in an empty dir."""
    prompt = "import os\n\ndef task_func():\n    \"\"\"What earlier jobs left.\"\"\"\n"
    solution = (
        "    here = os.getcwd()\n    parent = os.path.dirname(here)\n"
        "    try:\n        left = [n for n in os.listdir(parent) if n != os.path.basename(here)]\n"
        "    except OSError:  # the workspace is not listable by the job's uid, as root runs it\n        left = []\n"
        "    left += os.listdir(here)\n"
        "    for folder in (here, parent):\n        try:\n            open(os.path.join(folder, 'left-' + str(os.getpid())), 'w').close()\n"
        "        except OSError:\n            pass\n    return left\n"
    )
    test = "import unittest\n\nclass TestCases(unittest.TestCase):\n    def test_empty(self):\n        self.assertEqual(task_func(), [])\n"
    env = _bigcodebench_file(tmp_path, "left", prompt, solution, test)
    for _ in range(3):
        _, reward, _, _, info = _answer(env, 0)
        assert reward == 1.0, info["tests"]


@pytest.mark.parametrize("skip", ["import unittest\ndef f(x):\n    raise unittest.SkipTest('no')\n",
                                  "import pytest\ndef f(x):\n    pytest.skip('no')\n"])
def test_a_program_that_skips_does_not_pass_as_a_skipped_test(tmp_path, skip):
    """A test that skips itself passes; a program raising the same skip does not: its exception
    reaches the judge as a fault of the program, never as the test's own skip."""
    test = "from solution import f\n\ndef test_a():\n    assert f(2) == 4\n\nclass TestB:\n    def test_b(self):\n        assert f(3) == 9\n"
    path = tmp_path / "skip.jsonl"
    path.write_text(json.dumps({"question_id": "s", "question": "Square it.", "solution": "def f(x):\n    return x * x\n", "test": test}) + "\n")
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    assert _answer(env, 0)[1] == 1.0
    _, reward, _, _, info = _answer(env, 0, f"```python\n{skip}```")
    assert reward == 0.0 and all("ProgramFault" in t["message"] for t in info["tests"]), info["tests"]


def test_pytest_files_reading_what_the_code_prints_through_capsys(tmp_path):
    """KodCode's tests of printing functions ask for ``capsys`` (or ``capfd``): the program's
    calls print inside the sandbox, the judge's stand-in gives the test what they printed."""
    test = (
        "import pytest\nimport sys\nfrom solution import greet, shout\n\n"
        "def test_greet(capsys):\n    greet('Ada')\n    assert capsys.readouterr().out == 'Hello, Ada!\\n'\n\n"
        "@pytest.mark.parametrize('name', ['Bo', 'Cy'])\n"
        "def test_many(capsys, name):\n    greet(name)\n    out, err = capsys.readouterr()\n    assert (out, err) == (f'Hello, {name}!\\n', '')\n\n"
        "def test_err(capfd):\n    shout('x')\n    assert capfd.readouterr().err == 'X\\n'\n"
    )
    solution = "import sys\ndef greet(n):\n    print(f'Hello, {n}!')\ndef shout(s):\n    print(s.upper(), file=sys.stderr)\n"
    path = tmp_path / "printing.jsonl"
    path.write_text(json.dumps({"question_id": "cap", "question": "Print greetings.", "solution": solution, "test": test}) + "\n")
    (task,) = load_code_jsonl(path)
    assert task.unverifiable is None and [n for n, _ in task.tests] == ["test_greet", "test_many[0]", "test_many[1]", "test_err"]
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    assert _answer(env, 0)[1] == 1.0
    _, reward, _, _, info = _answer(env, 0, "```python\ndef greet(n):\n    print('Hi', n)\ndef shout(s):\n    print(s.upper())\n```")
    assert reward == 0.0 and all(t["status"] == "wrong" for t in info["tests"]), info["tests"]


PRIME_CASES = [{"fn_name": None, "input": "1 2\n", "output": "3\n", "type": "stdin_stdout"},
               {"fn_name": None, "input": "10 -3\n", "output": "7\n", "type": "stdin_stdout"}]
INPUT_OUTPUT_ROWS = {
    "primeintellect": {"problem_id": "pi_1", "prompt": "Print the sum of the integers.", "task_type": "verifiable_code",
                       "gold_standard_solution": f"```python\n{SUM_PROGRAM}```",
                       "verification_info": json.dumps({"language": "python", "test_cases": PRIME_CASES})},
    "deepcoder": {"problem": "Print the sum of the integers.", "solutions": [SUM_PROGRAM],
                  "tests": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}, {"input": "10 -3\n", "output": "7\n", "testtype": "stdin"}])},
    "verl": {"data_source": "codecontests", "prompt": [{"role": "user", "content": "Print the sum of the integers."}],
             "reward_model": {"style": "rule", "ground_truth": json.dumps({"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]})}},
}


@pytest.mark.parametrize("layout", sorted(INPUT_OUTPUT_ROWS))
def test_jsonl_of_other_input_output_layouts(tmp_path, layout):
    """PrimeIntellect's verification_info, DeepCoder's tests and verl's code rows read as APPS's tests."""
    path = tmp_path / f"{layout}.jsonl"
    path.write_text(json.dumps(INPUT_OUTPUT_ROWS[layout]) + "\n")
    (task,) = load_code_jsonl(path)
    assert task.io_tests == (("io_0", "1 2\n", "3\n"), ("io_1", "10 -3\n", "7\n")) and "sum of the integers" in task.prompt
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    assert _answer(env, 0, f"```python\n{SUM_PROGRAM}```")[1] == 1.0
    _, reward, _, _, info = _answer(env, 0, "```python\nprint(3)\n```")
    assert info["passed"] == 1 and reward == 0.0  # printing a fixed text passes 1 test whatever the program: no credit
    if layout != "verl":  # the record's reference, out of its Markdown fence where it has one
        assert env.unwrapped.expert_action() == f"```python\n{SUM_PROGRAM}```"


def test_jsonl_of_function_calls_and_asserts_in_other_layouts(tmp_path):
    """PrimeIntellect's function_call cases (APPS's fn_name semantics), DeepCoder's functional ones
    (LiveCodeBench's), and AceCode's list of asserts."""
    rows = [
        {"problem_id": "pi_2", "prompt": "Return n squared.",
         "verification_info": {"test_cases": [{"fn_name": "square", "input": [3], "output": [9], "type": "function_call"},
                                              {"fn_name": "square", "input": [-2], "output": [4], "type": "function_call"}]}},
        {"problem": "Return the sum of a list.", "metadata": {"func_name": "total"},
         "tests": [{"input": "[1, 2, 3]", "output": "6", "testtype": "functional"}, {"input": "[]", "output": "0", "testtype": "functional"}]},
        {"id": "oss_1", "question": "Write a function that doubles a number.", "test_cases": ["assert double(2) == 4", "assert double(-1) == -2"]},
    ]
    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    tasks = load_code_jsonl(path)
    assert [(t.task_id, t.entry_point, len(t.tests)) for t in tasks] == [("pi_2", "square", 2), ("calls/1", "total", 2), ("oss_1", "double", 2)]
    answers = {(0, "def square(n):\n    return n * n"): 1.0, (0, "def square(n):\n    return 9"): 0.5,
               (1, "def total(xs):\n    return sum(xs)"): 1.0, (1, "def total(xs):\n    return 6"): 0.0,  # passes 1 test, as returning 0 does
               (2, "def double(x):\n    return 2 * x"): 1.0, (2, "def double(x):\n    return 4"): 0.5}
    env = gym.make("CodeSandbox-v0", dataset=str(path), reward_mode="fraction")
    for (index, code), expected in answers.items():
        assert _answer(env, index, f"```python\n{code}\n```")[1] == pytest.approx(expected), code
    bad = tmp_path / "bad.jsonl"
    for row, message in [({"problem": "p", "tests": "7"}, "neither an object of inputs and outputs nor a list"),
                         ({"prompt": "p", "verification_info": {"test_cases": [{"fn_name": "a", "input": [1], "output": 1, "type": "function_call"},
                                                                               {"fn_name": "b", "input": [1], "output": 1, "type": "function_call"}]}},
                          "name 2 functions"),
                         ({"question": "q", "test": "from solution import f\n\ndef helper():\n    pass\n"}, "no test function"),
                         ({"question": "q", "test": "from solution import f\ndef test_(:\n"}, "does not parse")]:
        bad.write_text(json.dumps(row) + "\n")
        with pytest.raises(DatasetError, match=f"bad.jsonl:1: .*{message}"):
            load_code_jsonl(bad)
