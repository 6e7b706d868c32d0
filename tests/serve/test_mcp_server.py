"""mathgym's own tools served over MCP (``python -m mathgym.mcp_server`` / ``mathgym mcp-serve``),
called through a real ``mcp`` client over stdio and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import gymnasium as gym
import pytest

pytest.importorskip("mcp", reason="MCP tools need the mcp package: pip install '.[mcp]'")

import mathgym  # noqa: E402,F401 - registers the envs
from mathgym.envs.tools.mcp_client import MCPConnection  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402

from tests.mcp_servers import MATHGYM_STDIO, http_server  # noqa: E402


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE fruit (name TEXT, price REAL)")
        conn.executemany("INSERT INTO fruit VALUES (?, ?)", [("apple", 1.5), ("pear", 2.0), ("fig", 3.25)])
    return path


@pytest.fixture(scope="module")
def served(database):
    connection = MCPConnection([*MATHGYM_STDIO, "--sql-db", str(database), "--wall-seconds", "3", "--cpu-seconds", "2"], connect_timeout_s=60)
    yield connection
    connection.close()


def test_the_three_tools_are_listed_with_the_databases_schema(served):
    tools = {tool.name: tool for tool in served.list_tools()}
    assert set(tools) == {"run_python", "sql_query", "verify_math"}
    assert "CREATE TABLE fruit (name TEXT, price REAL);" in tools["sql_query"].description
    assert tools["verify_math"].input_schema["required"] == ["answer", "gold"]


def test_run_python_runs_in_the_sandbox(served):
    assert served.call("run_python", {"code": "print(6 * 7)"}).text == "42"
    failed = served.call("run_python", {"code": "1 / 0"})
    assert failed.is_error and "ZeroDivisionError" in failed.text
    assert served.call("run_python", {"code": "print(("}).is_error  # a syntax error, before any run


def test_run_python_keeps_the_sandboxs_containment(served):
    looping = served.call("run_python", {"code": "while True:\n    pass"})
    assert looping.is_error and "Timed out" in looping.text and not looping.unavailable
    network = served.call("run_python", {"code": "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=2)"})
    assert network.is_error and not network.unavailable
    hostile = served.call("run_python", {"code": "import sys\nsys.stdout.write('\\x1b[2J' + '\\udcff'.encode('utf-8', 'surrogateescape').decode('latin-1'))"})
    assert "\x1b" not in hostile.text and not hostile.unavailable
    assert served.call("run_python", {"code": "print('still here')"}).text == "still here"


def test_sql_query_reads_and_never_writes(served, database):
    result = served.call("sql_query", {"query": "SELECT name FROM fruit WHERE price > 1.9 ORDER BY price"})
    assert not result.is_error and result.text.splitlines() == ["name", "pear", "fig"]
    for write in ("DELETE FROM fruit", "INSERT INTO fruit VALUES ('kiwi', 1)", "ATTACH ':memory:' AS x", "DROP TABLE fruit"):
        refused = served.call("sql_query", {"query": write})
        assert refused.is_error and "Error:" in refused.text, write
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT COUNT(*) FROM fruit").fetchone() == (3,)
    endless = served.call("sql_query", {"query": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT MAX(x) FROM n"})
    assert endless.is_error and "budget" in endless.text


def test_verify_math_is_mathgyms_verifier(served):
    verdict = json.loads(served.call("verify_math", {"answer": "\\frac{1}{2}", "gold": "0.5"}).text)
    assert verdict["correct"] and verdict["status"] == "correct"
    verdict = json.loads(served.call("verify_math", {"answer": "So it is \\boxed{3}.", "gold": "4"}).text)
    assert not verdict["correct"] and verdict["status"] == "wrong" and verdict["extracted"] == "3"


def test_an_env_takes_its_tools_from_mathgyms_server_over_http():
    argv = [sys.executable, "-m", "mathgym", "mcp-serve", "--transport", "http", "--port", "0", "--tools", "run_python,verify_math"]
    with http_server(argv) as url:
        env = gym.make("MCPTools-v0", server=url, tools=["run_python"])
        try:
            obs, info = env.reset(seed=0)  # "What is 85 + 63?"
            assert [t["function"]["name"] for t in info["tools"]] == ["run_python"]
            obs, *_ = env.step('<tool_call>{"name": "run_python", "arguments": {"code": "print(85 + 63)"}}</tool_call>')
            assert obs.startswith("<tool_response>\n148\n</tool_response>")
            _, reward, terminated, _, info = env.step("\\boxed{148}")
            assert (reward, terminated, info["status"]) == (1.0, True, Status.CORRECT)
        finally:
            env.close()


def test_bad_options_are_one_line_errors():
    for args, message in ((["--tools", "rm"], "--tools 'rm': choose among"), (["--tools", "sql_query"], "needs --sql-db")):
        done = subprocess.run([*MATHGYM_STDIO, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
