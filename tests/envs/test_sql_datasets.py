"""SQLQuery-v0 on other people's text-to-SQL data: Spider's and BIRD's layouts, on SQLite files
of their own (built here: nothing is downloaded), graded as those data sets' evaluators grade."""

from __future__ import annotations

import json
import sqlite3

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the envs
from mathgym.envs.sql.sql_data import ends_in_order_by, exact_results_match, load_sql_dataset
from mathgym.errors import ConfigError, DatasetError


def _database(path):
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);"
        "CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(singer_id), year INTEGER);"
        "INSERT INTO singer VALUES (1, 'Joe', 'France', 52), (2, 'Timbaland', 'United States', 32), (3, 'Justin', 'France', 29),"
        " (4, 'Rose', 'Netherlands', 41);"
        "INSERT INTO concert VALUES (1, 1, 2014), (2, 1, 2015), (3, 2, 2014), (4, 3, 2015), (5, 3, 2015);"
    )
    conn.commit()
    conn.close()


SPIDER = [
    {"db_id": "concert_singer", "question": "How many singers are there?", "query": "SELECT count(*) FROM singer"},
    {"db_id": "concert_singer", "question": "List the names of singers from oldest to youngest.",
     "query": "SELECT name FROM singer ORDER BY age DESC"},
    {"db_id": "concert_singer", "question": "What are the names and countries of singers with a concert in 2015?",
     "query": "SELECT T1.name, T1.country FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id WHERE T2.year = 2015"},
]
BIRD = [
    {"question_id": 7, "db_id": "concert_singer", "question": "Which countries do singers with concerts come from?",
     "evidence": "a singer with concerts has a row in concert", "SQL": "SELECT DISTINCT T1.country FROM singer T1 JOIN concert T2 USING (singer_id)"},
]


@pytest.fixture()
def data(tmp_path):
    _database(tmp_path / "database" / "concert_singer" / "concert_singer.sqlite")
    (tmp_path / "dev.json").write_text(json.dumps(SPIDER))  # Spider ships a JSON list
    (tmp_path / "bird.jsonl").write_text("".join(json.dumps(row) + "\n" for row in BIRD))
    return tmp_path


def _answer(env, index, sql):
    env.reset(options={"task_index": index})
    return env.step(f"<answer>{sql}</answer>")


def test_spider_layout_grades_as_spiders_evaluator(data):
    env = gym.make("SQLQuery-v0", dataset=str(data / "dev.json"), db_dir=str(data / "database"))
    obs, _ = env.reset(options={"task_index": 0})
    assert "CREATE TABLE singer" in obs and "How many singers are there?" in obs
    for index in range(len(SPIDER)):  # the gold queries themselves
        env.reset(options={"task_index": index})
        assert env.step(env.unwrapped.expert_action())[1] == 1.0
    assert _answer(env, 0, "SELECT 4.0")[1] == 1.0  # numbers by value
    assert _answer(env, 0, "SELECT 4.001")[1] == 0.0  # exactly: no tolerance, as Spider's evaluator
    assert _answer(env, 1, "SELECT name FROM singer ORDER BY age")[1] == 0.0  # the gold orders its rows
    assert _answer(env, 2, "SELECT country, name FROM singer WHERE singer_id IN (1, 3, 3)")[1] == 0.0  # Justin twice in the gold
    sql = "SELECT T1.country, T1.name FROM singer T1, concert T2 WHERE T1.singer_id = T2.singer_id AND year = 2015 ORDER BY 2"
    _, reward, terminated, _, info = _answer(env, 2, sql)  # columns in another order, rows in any order: a multiset
    assert (reward, terminated) == (1.0, True), info
    _, reward, _, _, info = _answer(env, 2, "SELECT name FROM singer LIMIT 3")
    assert reward == 0.0 and "columns" in info["feedback"]
    # a hostile or writing query is refused by the same limits as on generated databases
    env.reset(options={"task_index": 0})
    obs, *_ = env.step("<sql>DELETE FROM singer</sql>")
    assert "not authorized" in obs
    obs, *_ = env.step("<sql>WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r</sql>")
    assert "budget" in obs
    with sqlite3.connect(data / "database" / "concert_singer" / "concert_singer.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM singer").fetchone() == (4,)


def test_bird_layout_compares_sets_and_shows_the_evidence(data):
    env = gym.make("SQLQuery-v0", dataset=str(data / "bird.jsonl"), db_dir=str(data / "database"))
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.task.task_id == "7" and "External knowledge: a singer with concerts" in obs
    # repeated rows do not count against a set, as BIRD's evaluator compares them
    _, reward, _, _, info = _answer(env, 0, "SELECT T1.country FROM singer T1 JOIN concert T2 USING (singer_id)")
    assert reward == 1.0, info
    assert _answer(env, 0, "SELECT country FROM singer")[1] == 0.0  # Netherlands has no concert


GRETEL = [
    {"id": 5097, "domain": "music", "sql_prompt": "How many singers are from France?", "sql_complexity": "basic SQL",
     "sql_context": "CREATE TABLE singer (id INT, name VARCHAR(50), country VARCHAR(50));"
                    " INSERT INTO singer (id, name, country) VALUES (1, 'Joe', 'France'), (2, 'Tim', 'USA'), (3, 'Justin', 'France');",
     "sql": "SELECT COUNT(*) FROM singer WHERE country = 'France';", "sql_explanation": "Counts them."},
    # MySQL's functions, which SQLite lacks: the gold query cannot run here
    {"id": 5098, "sql_prompt": "What day was yesterday?", "sql_context": "CREATE TABLE d (x INT); INSERT INTO d VALUES (1);",
     "sql": "SELECT DATE_SUB(NOW(), INTERVAL 1 DAY)"},
    # b-mc2's sql-create-context: tables without rows, where every query returns nothing
    {"question": "What are the names of the heads?", "context": "CREATE TABLE head (name VARCHAR, age INTEGER)", "answer": "SELECT name FROM head"},
]


def test_records_that_carry_their_database_build_it_in_memory(tmp_path):
    """Gretel's synthetic_text_to_sql: the database's statements travel with the record and build
    it for each episode; a record whose statements or gold query do not run in SQLite, or whose
    tables hold no rows (b-mc2's contexts: nothing could tell queries apart), is left out."""
    path = tmp_path / "gretel.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in GRETEL))
    records = load_sql_dataset(path, None)
    assert [r.db_path for r in records] == ["", "", ""] and records[0].task_id == "5097"
    env = gym.make("SQLQuery-v0", dataset=str(path))
    obs, _ = env.reset(options={"task_index": 0})
    assert "CREATE TABLE singer" in obs and "INSERT" not in obs and "How many singers are from France?" in obs
    assert env.step("<sql>SELECT name FROM singer WHERE country = 'France'</sql>")[0].count("Justin") == 1
    assert env.step("<answer>SELECT count(name) FROM singer WHERE country LIKE 'fr%'</answer>")[1] == 1.0
    assert _answer(env, 0, "SELECT count(*) FROM singer")[1] == 0.0
    for index, why in ((1, "gold query cannot be graded against .no such function: NOW|syntax error"), (2, "tables hold no rows")):
        with pytest.raises(DatasetError, match=why):
            env.reset(options={"task_index": index})
    with pytest.warns(UserWarning, match="left out"):
        assert {env.reset(seed=seed)[1] is not None and env.unwrapped.task.task_id for seed in range(6)} == {"5097"}


def test_records_and_options_that_cannot_work_are_refused(data):
    with pytest.raises(DatasetError, match="give db_dir"):
        load_sql_dataset(data / "dev.json", None)
    with pytest.raises(DatasetError, match="database file"):
        load_sql_dataset(data / "dev.json", data / "elsewhere")
    (data / "bad.jsonl").write_text(json.dumps({"db_id": "concert_singer", "question": "?"}) + "\n")
    with pytest.raises(DatasetError, match="record 0 needs a question and its gold query"):
        load_sql_dataset(data / "bad.jsonl", data / "database")
    with pytest.raises(ConfigError, match="give dataset= too"):
        gym.make("SQLQuery-v0", db_dir=str(data))
    (data / "broken.json").write_text(json.dumps([{**SPIDER[0], "query": "SELECT count(*) FROM nowhere"}, SPIDER[0]]))
    env = gym.make("SQLQuery-v0", dataset=str(data / "broken.json"), db_dir=str(data / "database"))
    with pytest.raises(DatasetError, match="broken/0: its gold query cannot be graded against .no such table: nowhere"):
        env.reset(options={"task_index": 0})
    with pytest.warns(UserWarning, match="left out"):
        for seed in range(8):  # drawn by seed, the broken record is skipped
            env.reset(seed=seed)
            assert env.unwrapped.task.task_id == "broken/1"


def test_the_comparison_helpers():
    assert ends_in_order_by("select a from t order by b limit 3") and not ends_in_order_by("SELECT 'order by' FROM t")
    assert not ends_in_order_by("SELECT a FROM (SELECT a FROM t ORDER BY a) GROUP BY a")
    assert exact_results_match([(1, "a"), (1, "a")], [("a", 1)], "set") == (True, "")
    assert not exact_results_match([(1, "a"), (1, "a")], [("a", 1)], "multiset")[0]
    assert exact_results_match([(2, 1), (1, 2)], [(1, 2), (2, 1)], "ordered") == (True, "")  # columns swapped
    assert not exact_results_match([(1, 2), (2, 1)], [(1, 2), (1, 2)], "multiset")[0]
    assert exact_results_match([], [], "multiset") == (True, "")
    rows = [(i, i % 7, str(i)) for i in range(5000)]  # large results stay quick: linear per column order
    assert exact_results_match(list(reversed(rows)), rows, "multiset") == (True, "")


def test_wide_results_of_like_columns_are_matched_without_trying_every_order():
    """Forty columns holding the same values: the column orders are searched depth first, within a
    bound, rather than as every combination (40**40)."""
    gold = [(1,) * 40] * 3
    assert exact_results_match([(1,) * 40] * 3, gold, "multiset") == (True, "")
    assert not exact_results_match([(1,) * 39 + (2,)] * 3, gold, "multiset")[0]
