"""What a sandboxed program sends back cannot crash, stall or corrupt the caller.

Values: huge ints, deep nesting, huge lists, sets and dict keys whose hashes all collide
(returned honestly or forged on the result pipe) are read within bounds and in linear
time, and shown with a capped repr. Text: lone surrogates and terminal escape sequences
in error messages, stdout and stderr never reach an observation or ``info`` as such.
Every step here must finish within :data:`BUDGET_S`; the hash-flood cases took seconds
each before the fix.
"""

from __future__ import annotations

import gc
import json
import time

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the envs
from mathgym.rewards.sandbox.codec import decode_value, encode_value
from mathgym.rewards.base import Status
from mathgym.rewards.code import CodeTestsReward
from mathgym.rewards.sandbox import CodeSandbox, SandboxLimits, TestCase
from mathgym.untrusted import clean_text, safe_repr

#: CPU seconds of this process one step or decode may take (a hash flood held the GIL for
#: seconds before the fix), and wall seconds of a whole sandboxed step on a loaded machine.
BUDGET_S = 1.0
WALL_BUDGET_S = 5.0
#: Ints that all share one hash (k * (2**61 - 1) hashes to 0 on 64-bit CPython).
MODULUS = 2**61 - 1
FLOOD = 40_000  # distinct keys of one hash: ~10 s to put in a set before the fix


def _forge(payload: str) -> str:
    """A program that writes ``payload`` as call 0's answer on the result pipe and exits."""
    return (
        "import os\n"
        f"os.write(3, ({payload} + '\\n').encode())\n"
        "os._exit(0)\n"
        "def f(x):\n    return 0\n"
    )


_FLOOD_INTS = f"', '.join(str(k * {MODULUS}) for k in range({FLOOD}))"
#: name -> (the model's program, the MBPP test it must pass)
ATTACKS = {
    "huge int": ("def f(x):\n    return 10**5000\n", "assert f(1) == 2"),
    "huge ints inside": ("def f(x):\n    return {'a': [10**6000, (7**9000,)]}\n", "assert f(1) == 2"),
    "huge int forged": (_forge("'{\"i\": 0, \"ok\": {\"i\": \"0x' + 'f' * 3_000_000 + '\"}}'"), "assert f(1) == 2"),
    "huge list": ("def f(x):\n    return [0] * 1_000_000\n", "assert f(1) == 2"),
    "deep nesting": ("def f(x):\n    v = []\n    for _ in range(99):\n        v = [v]\n    return v\n", "assert f(1) == 2"),
    "deep nesting forged": (_forge("'{\"i\": 0, \"ok\": ' + '{\"t\": [' * 50_000 + ']}' * 50_000 + '}'"), "assert f(1) == 2"),
    "colliding list made a set here": (f"def f(x):\n    return [[k * {MODULUS} for k in range({FLOOD})]]\n", "assert set(f(1)[0]) == {1}"),
    "colliding pairs made a dict here": (f"def f(x):\n    return [[(k * {MODULUS}, 0) for k in range({FLOOD})]]\n", "assert dict(f(1)[0]) == {1: 0}"),
    "colliding set forged": (_forge(f"'{{\"i\": 0, \"ok\": {{\"s\": [' + {_FLOOD_INTS} + ']}}}}'"), "assert f(1) == {1}"),
    "colliding dict forged": (_forge(f"'{{\"i\": 0, \"ok\": {{\"d\": [' + ', '.join(f'[{{k * {MODULUS}}}, 0]' for k in range({FLOOD})) + ']}}}}'"), "assert f(1) == {1: 0}"),
    "surrogate error": ("def f(x):\n    raise ValueError('bad \\ud800 \\udfff \\x1b[2J\\x1b]0;title\\x07 \\x9b31m')\n", "assert f(1) == 2"),
    "surrogate load error": ("raise ValueError('\\ud800\\x1b[2J')\ndef f(x):\n    return 2\n", "assert f(1) == 2"),
    "surrogate in-process message": ("def f(x):\n    raise ValueError('\\ud800\\x1b[2J')\n", "for i in [1]:\n    assert f(i) == 2"),
    "escapes on stderr": ("import os\nos.write(2, b'\\xed\\xa0\\x80 \\x1b[2J\\x1b]0;x\\x07\\r\\n')\ndef f(x):\n    return 1\n", "assert f(1) == 2"),
    "surrogate string returned": ("def f(x):\n    return '\\ud800\\x1b[2J'\n", "assert f(1) == 2"),
}


#: Checks that, computed naively here, would take this process seconds on outputs the
#: program chose: name -> (program, test).
CHECK_ATTACKS = {
    "sum concatenating lists": ("def f(x):\n    return [[0]] * 200_000\n", "assert sum(f(1), []) == [1]"),
    "division of huge ints": ("def f(x):\n    return [2**(2**22) + 1, 2**(2**21) + 1]\n", "assert f(1)[0] % f(1)[1] == 0"),
    "power of a huge int": ("def f(x):\n    return 2**(2**20) - 1\n", "assert f(1) ** 100 == 0"),
    "KeyError holding a huge int": ("def f(x):\n    return 10**5000\n", "assert {1: 2}[f(1)] == 2"),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "attacks.jsonl"
    rows = [{"task_id": i, "text": name, "code": "def f(x):\n    return 2\n", "test_list": [test]} for i, (name, (_, test)) in enumerate(ATTACKS.items())]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _strings(value):
    """Every str inside ``value`` (info dicts, lists, dataclasses' fields)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _strings(getattr(value, name))


def _assert_safe_text(*values):
    for text in (s for v in values for s in _strings(v)):
        text.encode("utf-8")  # a lone surrogate raises here, as a tokenizer would


def _assert_clean_observation(observation):
    _assert_safe_text(observation)
    assert not any(ord(c) < 32 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in observation), repr(observation[:300])


def _timed_step(env, action):
    gc.collect()  # the step pays for its own garbage, not for what earlier tests in this process left
    start, cpu = time.monotonic(), time.process_time()
    result = env.step(action)
    return result, time.process_time() - cpu, time.monotonic() - start


@pytest.mark.parametrize("name", list(ATTACKS))
@pytest.mark.parametrize("env_id", ["CodeSandbox-v0", "CodeRepair-v0"])
def test_env_step_survives_attack_within_budget(env_id, name, dataset):
    env = gym.make(env_id, dataset=dataset, cpu_seconds=5, wall_seconds=5, max_turns=2 if env_id == "CodeRepair-v0" else 1)
    env.reset(options={"task_index": list(ATTACKS).index(name)})
    (observation, reward, _, _, info), cpu, wall = _timed_step(env, f"```python\n{ATTACKS[name][0]}```")
    assert reward == 0.0
    if env_id == "CodeRepair-v0":
        assert info["status"] is Status.IN_PROGRESS and info["attempt_status"] is Status.WRONG, info["tests"]
        assert observation.startswith("Passed 0 of 1"), observation
    else:
        assert info["status"] is Status.WRONG, info["tests"]
    _assert_clean_observation(observation)
    _assert_safe_text(info)
    for shown in [info["stderr"], *(test["message"] for test in info["tests"])]:
        _assert_clean_observation(shown)
    for message in info["messages"][1:]:
        if message["role"] == "user":
            _assert_clean_observation(message["content"])
    assert cpu < BUDGET_S and wall < WALL_BUDGET_S, f"{cpu:.2f} CPU s, {wall:.2f} s"


def test_tool_output_reaches_the_observation_clean():
    env = gym.make("MathTool-v0", difficulty=0, max_turns=3)
    env.reset(seed=0)
    program = "import os, sys\nos.write(1, b'\\x1b]0;owned\\x07\\x1b[2J \\xed\\xa0\\x80 \\xc2\\x9b\\r\\n')\nsys.stdout.flush()\nraise ValueError('\\udc80\\x1b[31m')\n"
    observation, _, _, _, info = env.step(f"<python>\n{program}</python>")
    assert "owned" in observation and "ValueError" in observation, observation
    _assert_clean_observation(observation)
    _assert_safe_text(info)


def test_failure_messages_show_values_capped():
    env = gym.make("CodeRepair-v0", dataset="builtin", max_turns=2)
    env.reset(options={"task_index": 0})
    entry = env.unwrapped.task.metadata["code_task"].entry_point
    observation, *_ , info = env.step(f"```python\ndef {entry}(*args, **kwargs):\n    return 10**5000\n```")
    assert "<int of 16610 bits>" in observation
    assert all("<int of 16610 bits>" in t["message"] for t in info["tests"] if t["status"] == "wrong")


@pytest.fixture(scope="module")
def box():
    with CodeSandbox(SandboxLimits(cpu_seconds=5, wall_seconds=5), workers=1) as sandbox:
        sandbox.warm_up()
        yield sandbox


@pytest.mark.parametrize(
    "name",
    ["huge int", "huge ints inside", "huge int forged", "colliding list made a set here", "colliding set forged", "colliding dict forged",
     "surrogate error", "surrogate in-process message", *CHECK_ATTACKS],
)
def test_code_tests_reward_survives(name, box):
    program, test = {**ATTACKS, **CHECK_ATTACKS}[name]
    reward = CodeTestsReward(sandbox=box)
    start, cpu = time.monotonic(), time.process_time()
    result = reward.score(f"```python\n{program}```", [TestCase("t", "assert", test)])
    cpu, wall = time.process_time() - cpu, time.monotonic() - start
    assert result.score == 0.0 and result.status is Status.WRONG, result
    _assert_safe_text(result.details)
    assert all(not any(ord(c) < 32 and c not in "\n\t" for c in t.message) for t in result.details["tests"])
    assert cpu < BUDGET_S and wall < WALL_BUDGET_S, f"{name}: {cpu:.2f} CPU s, {wall:.2f} s"


def test_copies_of_colliding_values_still_pass(box):
    """The cap counts distinct keys of one hash: many copies of a few such values are fine."""
    program = f"def f(x):\n    return [[k * {MODULUS} for k in range(16)] * 5000, {{k * {MODULUS}: k for k in range(16)}}]\n"
    tests = [TestCase("set", "assert", "assert len(set(f(1)[0])) == 16"), TestCase("dict", "assert", f"assert f(1)[1][15 * {MODULUS}] == 15")]
    result = CodeTestsReward(sandbox=box).score(f"```python\n{program}```", tests)
    assert result.status is Status.CORRECT, result.details["tests"]


# -- the codec and the helpers, on their own ----------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {"s": [k * MODULUS for k in range(FLOOD)]},
        {"fs": [k * MODULUS for k in range(FLOOD)]},
        {"d": [[k * MODULUS, k] for k in range(FLOOD)]},
        {"s": [{"t": [k * MODULUS, 1]} for k in range(FLOOD)]},  # tuples of colliding ints collide too
        {"d": [[{"t": [{"t": [k * MODULUS]}]}, 0] for k in range(FLOOD)]},
    ],
    ids=["set", "frozenset", "dict", "set of tuples", "nested tuple keys"],
)
def test_decoding_a_hash_flood_is_refused_fast(data):
    start = time.process_time()
    with pytest.raises(ValueError, match="hash"):
        decode_value(data)
    assert time.process_time() - start < BUDGET_S


@pytest.mark.parametrize(
    "data",
    [
        {"i": "0x" + "f" * 2_000_000},  # 8M bits
        [0] * 3_000_000,
        json.loads("[" * 200 + "]" * 200),
        json.loads('{"t": [' * 150 + "]}" * 150),
        [[]] * 600_000,
        {"d": [[1, 2, 3]]},
        {"c": [10**400, 0]},
    ],
    ids=["int bits", "elements", "list depth", "tuple depth", "containers", "bad pair", "complex of a huge int"],
)
def test_decoding_out_of_bounds_is_refused(data):
    with pytest.raises(ValueError):
        decode_value(data)


@pytest.mark.parametrize(
    "value",
    [
        {-1, -2, 0, 1, 2**61 - 1, 2**61, -(2**61)},  # a few shared hashes are normal
        {(1, 2): frozenset({3}), 10**100: [1.5, None, b"x", 2j]},
        [[[]]] * 3,
        10**5000,
        "\ud800",
    ],
    ids=["shared hashes", "mixed", "nested", "big int", "surrogate"],
)
def test_plain_values_round_trip(value):
    assert decode_value(json.loads(json.dumps(encode_value(value)))) == value


def test_numpy_and_pandas_values_cross_by_value():
    """Arrays, numpy scalars, Series and DataFrames are rebuilt from their data (never unpickled,
    never the program's own objects); only exact types and simple dtypes cross."""
    np, pd = pytest.importorskip("numpy"), pytest.importorskip("pandas")
    values = [np.arange(6, dtype=np.int32).reshape(2, 3), np.array([1.5, np.nan]), np.array(["a", "bc"]), np.array([b"x"]),
              np.array([[1 + 2j]]), np.array([True, False]), np.array([1, "a", None], dtype=object), np.float32(2.5), np.int64(-3),
              np.str_("hi"), np.zeros((0, 4))]
    for value in values:
        back = decode_value(json.loads(json.dumps(encode_value(value))))
        assert type(back) is type(value) and back.dtype == value.dtype and np.array_equal(back, value, equal_nan=value.dtype.kind == "f")
    frame = pd.DataFrame({"n": [1, 2], "s": ["x", "y"], "f": [0.5, None]}, index=pd.Index([10, 20], name="id"))
    back = decode_value(json.loads(json.dumps(encode_value(frame))))
    pd.testing.assert_frame_equal(back, frame)
    series = pd.Series([3, 4], name="count")
    pd.testing.assert_series_equal(decode_value(json.loads(json.dumps(encode_value(series)))), series)
    dated = pd.DataFrame({"when": pd.to_datetime(["2020-01-01", None]), "v": [1, 2]}, index=pd.date_range("2021-01-01", periods=2, name="day"))
    pd.testing.assert_frame_equal(decode_value(json.loads(json.dumps(encode_value(dated)))), dated)  # dates, NaT, the index's frequency
    for value in (np.array(["2020-01-01", "NaT"], dtype="datetime64[m]"), np.timedelta64(3, "h"), np.datetime64("2020-02-02")):
        back = decode_value(json.loads(json.dumps(encode_value(value))))
        assert back.dtype == value.dtype and (np.asarray(back).view("<i8") == np.asarray(value).view("<i8")).all()
    for refused in (np.array([1], dtype=[("a", "<i4")]), np.ma.array([1]), pd.DataFrame({"a": [1]}, index=pd.period_range("2020-01", periods=1, freq="M")),
                    pd.Series(pd.to_datetime(["2020-01-01"]).tz_localize("UTC+01:00"))):  # a fixed offset has no zone name
        with pytest.raises(TypeError):
            encode_value(refused)


def test_zoned_dates_categories_and_multi_indexes_cross_by_value():
    """What BigCodeBench's pandas tasks return beyond numpy's dtypes: dates in a time zone (a
    column or the index), categories (pd.cut's bins, a CategoricalIndex), a groupby's MultiIndex."""
    pd = pytest.importorskip("pandas")

    def back(value):
        return decode_value(json.loads(json.dumps(encode_value(value))))

    zoned = pd.Series([1, 2, 3], index=pd.date_range("2021-03-27", periods=3, freq="D", tz="Europe/Berlin", name="day"), name="v")
    pd.testing.assert_series_equal(back(zoned), zoned)  # across the change to summer time, its frequency kept
    when = pd.to_datetime(["2020-01-01 10:00", None]).tz_localize("UTC").tz_convert("America/New_York")
    frame = pd.DataFrame({"when": when, "v": [1, 2]})
    pd.testing.assert_frame_equal(back(frame), frame)
    binned = pd.DataFrame({"age": [5, 30, 70], "group": pd.cut([5, 30, 70], bins=[0, 18, 65, 120], labels=["child", "adult", "senior"])})
    pd.testing.assert_frame_equal(back(binned), binned)
    keyed = pd.Series([1, 2], index=pd.CategoricalIndex(["a", "b"], categories=["b", "a"], ordered=True, name="k"))
    pd.testing.assert_series_equal(back(keyed), keyed)
    rows = pd.DataFrame({"a": ["x", "x", "y"], "b": [1, 2, 1], "v": [1.0, 2.0, 3.0]})
    pd.testing.assert_frame_equal(back(rows.groupby(["a", "b"]).sum()), rows.groupby(["a", "b"]).sum())
    pd.testing.assert_series_equal(back(rows.groupby(["a", "b"])["v"].mean()), rows.groupby(["a", "b"])["v"].mean())
    assert not back(zoned).equals(zoned.tz_convert("UTC").tz_localize(None))  # the zone is part of the value
    spans = pd.DataFrame({"x": [1, 5, 9], "bin": pd.cut([1, 5, 9], bins=3)})  # pd.cut without labels: intervals
    pd.testing.assert_frame_equal(back(spans), spans)
    pd.testing.assert_series_equal(back(spans.groupby("bin", observed=False)["x"].sum()), spans.groupby("bin", observed=False)["x"].sum())
    sales = pd.DataFrame({"r": ["a", "a", "b"], "c": ["p", "q", "p"], "v": [1, 2, 3], "w": [4, 5, 6]})
    for pivot in (sales.pivot_table(index="r", columns="c", values="v", aggfunc="sum"), sales.pivot_table(index="r", columns="c", values=["v", "w"])):
        pd.testing.assert_frame_equal(back(pivot), pivot)  # the columns' name, and a MultiIndex of columns


@pytest.mark.parametrize("column", [
    {"tz": ["dateutil//etc/passwd", {"nd": ["<M8[ns]", [1], [0]]}]},  # a zone name that pandas would read as a file
    {"tz": ["dateutil/Europe/Paris", {"nd": ["<M8[ns]", [1], [0]]}]},  # dateutil's lookup by name, never asked for
    {"tz": ["Mars/Olympus", {"nd": ["<M8[ns]", [1], [0]]}]},  # no such zone
    {"tz": ["UTC", {"nd": ["<i8", [1], [0]]}]},  # not dates
    {"cat": [{"nd": ["|O", [1], ["a"]]}, {"nd": ["<i1", [1], [5]]}, False]},  # a code past the categories
    {"cat": [{"nd": ["|O", [2], ["a", "a"]]}, {"nd": ["<i1", [1], [0]]}, False]},  # categories that repeat
    {"cat": [{"mi": [[{"nd": ["<i8", [1], [0]]}], [None]]}, {"nd": ["<i1", [1], [0]]}, False]},  # a MultiIndex as categories
    {"mi": [[{"nd": ["<i8", [1], [0]]}], [None]]},  # a MultiIndex as a column
    {"iv": [{"nd": ["<i8", [1], [0]]}, {"nd": ["<i8", [1], [1]]}, "sideways"]},  # no such closed side
    {"iv": [{"nd": ["<i8", [1], [2]]}, {"nd": ["<i8", [1], [1]]}, "left"]},  # a left end past its right end
    {"iv": [{"nd": ["|O", [1], ["a"]]}, {"nd": ["|O", [1], ["b"]]}, "left"]},  # ends that are not numbers or dates
], ids=["file zone", "dateutil zone", "unknown zone", "not dates", "code out of range", "repeated categories", "nested index", "index as column",
        "interval side", "reversed interval", "text interval"])
def test_decoding_pandas_extensions_out_of_bounds_is_refused(column):
    pytest.importorskip("pandas")
    frame = {"pd": {"kind": "series", "index": {"nd": ["<i8", [1], [0]]}, "labels": ["a"], "label_names": [], "columns": [column], "index_name": None,
                    "freq": None}}
    decode_value({"pd": {**frame["pd"], "columns": [{"nd": ["<i8", [1], [7]]}]}})  # the same frame with a plain column decodes
    with pytest.raises(ValueError):
        decode_value(frame)


def test_a_frames_column_names_must_fit_its_columns():
    pytest.importorskip("pandas")
    frame = {"kind": "frame", "index": {"nd": ["<i8", [1], [0]]}, "labels": [{"t": ["v", "p"]}], "label_names": [None, "c"],
             "columns": [{"nd": ["<i8", [1], [7]]}], "index_name": None, "freq": None}
    assert list(decode_value({"pd": frame}).columns.names) == [None, "c"]
    with pytest.raises(ValueError, match="column names do not match"):
        decode_value({"pd": {**frame, "label_names": ["c"]}})


@pytest.mark.parametrize(
    "data",
    [
        {"nd": ["<U999999", [2_000_000], [""] * 2_000_000]},  # a wide text dtype, for every short item
        {"nd": ["<i8", [4], [1, 2, 3]]},
        {"nd": ["<M8[xs]", [1], [0]]},
        {"nd": ["<i8", [10**9, 10**9], []]},
        {"nd": ["<i1", [1], [1000]]},
        {"np": ["O", None]},
        {"pd": {"kind": "frame", "index": {"nd": ["<i8", [2], [0, 1]]}, "labels": ["a"], "label_names": [None], "columns": [{"nd": ["<i8", [1], [5]]}],
                "index_name": None, "freq": None}},
    ],
    ids=["text width", "short items", "dates", "huge shape", "out of range", "object scalar", "ragged frame"],
)
def test_decoding_arrays_out_of_bounds_is_refused(data):
    pytest.importorskip("pandas")
    with pytest.raises(ValueError):
        decode_value(data)


def test_clean_text_is_valid_and_shows_escapes():
    text = "a\x1b[2J\x1b]0;title\x07b\r\nc\rd\x9b31m\ud800\udfff\t\x00\x7f"
    cleaned = clean_text(text)
    cleaned.encode("utf-8")
    assert cleaned == "a␛[2J␛]0;title␇b\nc␍d�31m��\t␀␡"
    assert clean_text(cleaned) == cleaned
    assert clean_text("x" * 50, limit=10) == "x" * 10
    start = time.process_time()
    assert len(clean_text("\x1b\ud800\r\n" * 500_000)) == 1_500_000
    assert time.process_time() - start < BUDGET_S


def test_safe_repr_is_capped_and_never_raises():
    assert safe_repr(10**5000) == "<int of 16610 bits>"
    assert safe_repr([1, (2,), {3: "x"}, frozenset(), set(), b"\x00"]) == repr([1, (2,), {3: "x"}, frozenset(), set(), b"\x00"])
    assert safe_repr([0] * 10**6, limit=50).endswith("…") and len(safe_repr([0] * 10**6, limit=50)) == 50
    assert safe_repr("\ud800" * 1000, limit=30) == "'" + "\\ud800" * 4 + "\\ud8…"
    nested: list = []
    for _ in range(10_000):
        nested = [nested]
    assert len(safe_repr(nested, limit=100_000)) < 200

    class Hostile:
        def __repr__(self):
            raise RuntimeError("no")

    assert safe_repr(Hostile()) == "<Hostile object>"
