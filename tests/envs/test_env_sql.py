"""SQLQuery-v0: the expert solves every level, grading compares result sets, the agent's
queries are read-only and capped, and hostile SQL gets a clear error quickly."""

from __future__ import annotations

import contextlib
import json
import pickle
import threading
import time

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the envs
from mathgym.envs.sql.sql_query import SQLQueryEnv, parse_reply, results_match
from mathgym.envs.sql.sql_tasks import LEVELS
from mathgym.rewards.base import Status

#: A hostile query must come back (with its error) well within the hostile-action budget.
HOSTILE_BUDGET_S = 1.0


@contextlib.contextmanager
def _watchdog(env: SQLQueryEnv, seconds: float):
    """Interrupt the env's database after ``seconds``: a query its budget did not stop fails the
    test's time limit instead of hanging it (a signal cannot stop SQLite's C loop)."""
    timer = threading.Timer(seconds, env._connection().interrupt)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _env(**kwargs) -> SQLQueryEnv:
    return gym.make("SQLQuery-v0", **kwargs).unwrapped


def _seed_where(env: SQLQueryEnv, wanted, seeds=range(500)) -> int:
    """The first seed whose task satisfies ``wanted(task)`` (the env is left reset on it)."""
    for seed in seeds:
        env.reset(seed=seed)
        if wanted(env.task):
            return seed
    raise AssertionError("no seed gives such a task")


def _tool_call(query: str, name: str = "sql") -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"query": query}}) + "\n</tool_call>"


@pytest.mark.parametrize("level", LEVELS)
def test_the_expert_solves_every_task_of_every_level(level):
    env = _env(difficulty=level)
    for seed in range(60):
        env.reset(seed=seed)
        _, reward, terminated, _, info = env.step(env.expert_action())
        assert (reward, terminated, info["status"]) == (1.0, True, Status.CORRECT), (seed, env.task.answer, info["feedback"])


def _gold_queries(level: int, count: int = 40) -> list[str]:
    env = _env(difficulty=level)
    return [env.reset(seed=s) and env.task.answer for s in range(count)]


def test_levels_ask_for_their_kind_of_sql():
    level0, level1, level2, level3 = (_gold_queries(level) for level in LEVELS)
    assert not any(word in q for q in level0 for word in ("JOIN", "GROUP BY", "ORDER BY"))
    assert not any("JOIN" in q for q in level1) and any("GROUP BY" in q for q in level1) and any("ORDER BY" in q for q in level1)
    assert all("JOIN" in q for q in level2) and not any("HAVING" in q for q in level2)
    assert any("HAVING" in q for q in level3) and any("(SELECT" in q for q in level3)


def test_same_seed_same_database_and_question_in_a_fresh_env():
    first, second = _env(difficulty=2), _env(difficulty=2)
    for seed in (0, 5, 77):
        assert first.reset(seed=seed) == second.reset(seed=seed)
        probe = "<sql>SELECT * FROM sqlite_master</sql>"
        assert first.step(probe)[0] == second.step(probe)[0]


def test_a_query_then_the_answer_in_tool_call_format():
    env = _env(difficulty=1)
    obs, info = env.reset(seed=4)
    assert env.task.answer not in obs and "answer" not in info
    obs, reward, terminated, truncated, info = env.step("Let me look." + _tool_call(env.task.answer))
    assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, Status.IN_PROGRESS)
    assert "queries left" in obs and "Error" not in obs
    _, reward, terminated, _, info = env.step(_tool_call(env.task.answer, name="answer"))
    assert (reward, terminated, info["correct"], info["answer"]) == (1.0, True, True, env.task.answer)


def test_reply_formats_and_their_precedence():
    assert parse_reply("<sql>SELECT 1</sql>").kind == "query"
    assert parse_reply(_tool_call("SELECT 1")).sql == "SELECT 1"
    assert parse_reply("<answer>\n```sql\nSELECT 2;\n```\n</answer>").sql == "SELECT 2;"
    assert parse_reply("<sql>SELECT 1</sql> so <answer>SELECT 2</answer>").kind == "answer"
    assert parse_reply("Final:\n```sql\nSELECT 3\n```").sql == "SELECT 3"
    assert parse_reply("```sql\nSELECT 3\n```\n<sql>SELECT 4</sql>") == parse_reply("<sql>SELECT 4</sql>")
    assert parse_reply('<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>').error.startswith("unknown tool")
    assert parse_reply("<tool_call>{not json</tool_call>").error
    assert parse_reply("I do not know.").kind == "none"


def test_a_reply_without_query_or_answer_is_a_format_error_that_keeps_the_episode():
    env = _env()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("Hmm, \\boxed{3}")
    assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, Status.FORMAT_ERROR)
    assert "<answer>" in obs


def test_turn_and_query_budgets():
    env = _env(max_turns=3, max_queries=1)
    env.reset(seed=0)
    assert env.step("<sql>SELECT 1</sql>")[4]["status"] is Status.IN_PROGRESS
    obs, *_, info = env.step("<sql>SELECT 2</sql>")
    assert info["status"] is Status.FORMAT_ERROR and "budget" in obs
    _, reward, terminated, truncated, info = env.step("<sql>SELECT 3</sql>")
    assert (reward, terminated, truncated, info["status"], info["correct"]) == (0.0, False, True, Status.UNPARSEABLE, False)


def test_results_are_capped_in_rows_and_characters():
    env = _env(result_rows=5, result_chars=300)
    env.reset(seed=0)
    obs = env.step("<sql>WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r</sql>")[0]
    assert obs.splitlines()[:6] == ["x", "1", "2", "3", "4", "5"] and "there are more" in obs
    env.reset(seed=0)
    obs = env.step("<sql>SELECT hex(zeroblob(4000)) AS big, 1 UNION ALL SELECT 'x', 2</sql>")[0]
    assert len(obs) < 500 and "..." in obs


def test_grading_compares_result_sets():
    gold = [("Oslo", 2), ("Lima", 3)]
    assert results_match([("Lima", 3), ("Oslo", 2)], gold, "multiset")[0]
    assert results_match([(3, "Lima"), (2.0, "Oslo")], gold, "multiset")[0]  # columns in another order, 2 == 2.0
    assert not results_match([("Lima", 3), ("Oslo", 2)], gold, "ordered")[0]
    assert not results_match([("Oslo", 2)], gold, "multiset")[0]
    assert not results_match([("Oslo", 2, 1), ("Lima", 3, 1)], gold, "multiset")[0]  # an extra column
    assert not results_match([("oslo", 2), ("Lima", 3)], gold, "multiset")[0]
    assert results_match([("Oslo",), ("Oslo",), ("Lima",)], [("Oslo",), ("Lima",)], "set")[0]
    assert not results_match([("Oslo",), ("Oslo",), ("Lima",)], [("Oslo",), ("Lima",)], "multiset")[0]
    assert results_match([(41.67,)], [(41.666666,)], "multiset")[0]  # rounded to two decimals
    assert not results_match([(41.6,)], [(41.666666,)], "multiset")[0]
    assert not results_match([("2",)], [(2,)], "multiset")[0]


def test_an_order_asked_for_is_graded_and_rounded_averages_pass():
    env = _env(difficulty=1)
    _seed_where(env, lambda t: t.metadata["compare"] == "ordered" and "LIMIT 1" not in t.answer)
    gold = env.task.answer
    reversed_order = gold.replace(" DESC", " ASC") if " DESC" in gold else gold.replace(" ASC", " DESC")
    info = env.step(f"<answer>{reversed_order}</answer>")[4]
    assert info["status"] is Status.WRONG and "order" in info["feedback"]
    _seed_where(env, lambda t: "AVG(" in t.answer)
    rounded = env.task.answer.replace("AVG(", "ROUND(AVG(").replace(") FROM", "), 2) FROM")
    assert env.step(f"<answer>{rounded}</answer>")[1] == 1.0


def test_a_wrong_answer_and_a_failing_answer_score_zero():
    env = _env(difficulty=2)
    env.reset(seed=1)
    info = env.step("<answer>SELECT 1</answer>")[4]
    assert (info["status"], info["correct"]) == (Status.WRONG, False)
    env.reset(seed=1)
    info = env.step("<answer>SELECT nope FROM nowhere</answer>")[4]
    assert info["status"] is Status.WRONG and "no such table" in info["feedback"]


HOSTILE = {
    "endless recursive CTE": "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r",
    "huge cross join": "SELECT count(*) FROM {t} a, {t} b, {t} c, {t} d, {t} e",
    "sorted cross join": "SELECT * FROM {t} a, {t} b, {t} c, {t} d ORDER BY random()",
    "randomblob(1e9)": "SELECT randomblob(1e9)",
    "string growth": "SELECT group_concat(hex(a.id)) FROM {t} a, {t} b, {t} c",
    "uninterruptible printf": "SELECT printf('%.*c', 100000000, 'x')",
    "attach": "ATTACH DATABASE '{path}' AS other",
    "vacuum into": "VACUUM INTO '{path}'",
    "drop": "DROP TABLE {t}",
    "delete": "DELETE FROM {t}",
    "temp table": "CREATE TEMP TABLE scratch(x)",
    "query_only off": "PRAGMA query_only = OFF",
    "load_extension": "SELECT load_extension('/nonexistent')",
    "two statements": "SELECT 1; DELETE FROM {t}",
    "NUL character": "SELECT '\x00'",
    "lone surrogate": "SELECT '\ud800'",
    "too many columns": "SELECT " + ", ".join(["1"] * 1000),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_sql_gets_a_clear_error_quickly_and_changes_nothing(name, tmp_path):
    env = _env(difficulty=2)
    env.reset(seed=0)
    table = env.task.answer.split(" FROM ")[1].split()[0]
    count = f"<sql>SELECT count(*) FROM {table}</sql>"
    rows_before = env.step(count)[0].splitlines()[1]
    query = HOSTILE[name].format(t=table, path=tmp_path / "out.db")
    for wrap in ("<sql>{}</sql>", "<answer>{}</answer>"):
        start = time.perf_counter()
        with _watchdog(env, 5 * HOSTILE_BUDGET_S):
            obs, reward, terminated, _, info = env.step(wrap.format(query))
        elapsed = time.perf_counter() - start
        assert elapsed < HOSTILE_BUDGET_S, (name, elapsed)
        if wrap.startswith("<sql>"):
            assert obs.startswith("Error: "), (name, obs[:200])
            assert env.step(count)[0].splitlines()[1] == rows_before
        else:
            assert (reward, terminated, info["status"]) in {(0.0, True, Status.WRONG), (0.0, True, Status.TIMEOUT)}, name
            assert info["feedback"].startswith("the answer query failed"), info["feedback"]
    assert not (tmp_path / "out.db").exists()


def test_a_budget_stop_says_so_and_an_answer_that_runs_out_is_a_timeout():
    env = _env()
    env.reset(seed=0)
    loop = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
    with _watchdog(env, 5 * HOSTILE_BUDGET_S):
        assert "ran past its budget" in env.step(f"<sql>{loop}</sql>")[0]
    with _watchdog(env, 5 * HOSTILE_BUDGET_S):
        assert env.step(f"<answer>{loop}</answer>")[4]["status"] is Status.TIMEOUT


def test_a_pickled_env_continues_on_the_same_database():
    env = _env(difficulty=2)
    env.reset(seed=3)
    env.step(f"<sql>{env.task.answer}</sql>")
    clone = pickle.loads(pickle.dumps(env))
    action = f"<answer>{env.task.answer}</answer>"
    assert env.step(action)[:4] == clone.step(action)[:4]


def test_bad_options_are_refused():
    for bad in ({"difficulty": 4}, {"difficulty": True}, {"max_queries": -1}, {"result_rows": 0}, {"query_budget_ms": 0}):
        with pytest.raises(ValueError):
            SQLQueryEnv(**bad)
