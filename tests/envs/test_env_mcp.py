"""MCPTools-v0 against real MCP server processes: the fixture server (a third party's, written with
the ``mcp`` package only) over stdio and streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import pickle
import signal
import time

import gymnasium as gym
import pytest

pytest.importorskip("mcp", reason="MCP tools need the mcp package: pip install '.[mcp]'")

import mathgym  # noqa: E402,F401 - registers the envs
from mathgym.envs.tools.mcp_client import MCPConnection  # noqa: E402
from mathgym.errors import ConfigError, ToolServerError  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402

from tests.mcp_servers import FIXTURE_STDIO, fixture_http  # noqa: E402

ADD = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'

#: One call of ``add(2, 3)`` in every tool-call format mathgym reads.
ADD_IN_EVERY_FORMAT = {
    "hermes": ADD,
    "qwen3-coder": "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n3\n</parameter>\n</function>\n</tool_call>",
    "mistral": '[TOOL_CALLS][{"name": "add", "arguments": {"a": 2, "b": 3}}]',
    "mistral-args": '[TOOL_CALLS]add[ARGS]{"a": 2, "b": 3}',
    "gpt-oss": '<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": 2, "b": 3}<|call|>',
    "llama3": '<|python_tag|>{"name": "add", "parameters": {"a": 2, "b": 3}}',
    "reasoning": "<think>\nI should add them.\n</think>\n\n" + ADD,
}


@pytest.fixture(scope="module")
def env():
    env = gym.make("MCPTools-v0", server=FIXTURE_STDIO, call_timeout_s=3.0, result_chars=500, max_turns=20, max_tool_calls=30)
    yield env
    env.close()


def test_the_servers_tools_go_to_info_in_the_openai_function_schema(env):
    obs, info = env.reset(seed=0)
    by_name = {tool["function"]["name"]: tool for tool in info["tools"]}
    assert set(by_name) == {"add", "fail", "sleep", "shout"}
    add = by_name["add"]
    assert add["type"] == "function" and add["function"]["description"] == "Add two integers."
    assert add["function"]["parameters"]["required"] == ["a", "b"]
    assert "Tools: add, fail, sleep, shout" in obs and "answer" not in info


@pytest.mark.parametrize("form", list(ADD_IN_EVERY_FORMAT))
def test_a_call_in_every_format_reaches_the_server(env, form):
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(ADD_IN_EVERY_FORMAT[form])
    assert obs.startswith("<tool_response>\n5\n</tool_response>"), obs
    assert (info["status"], info["tool_statuses"], reward, terminated) == (Status.IN_PROGRESS, ["ok"], 0.0, False)


def test_a_call_while_thinking_is_not_run(env):
    env.reset(seed=0)
    obs, _, _, _, info = env.step("<think>\n" + ADD + "\nno, wait.</think>\nHmm.")
    assert "5" not in obs and info["status"] is Status.FORMAT_ERROR


def test_the_tools_error_is_shown_to_the_model_and_is_its_own(env):
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step('<tool_call>{"name": "fail", "arguments": {"why": "no reason"}}</tool_call>')
    assert "Error:" in obs and "refused: no reason" in obs
    assert info["status"] is Status.IN_PROGRESS and not info["status"].is_infra_failure and not terminated
    obs, *_ , info = env.step('<tool_call>{"name": "add", "arguments": {"a": "two"}}</tool_call>')  # the server refuses the arguments
    assert info["tool_statuses"] == ["error"] and "Error:" in obs and not info["status"].is_infra_failure


def test_calls_that_do_not_run_are_format_errors_and_say_why(env):
    env.reset(seed=0)
    obs, _, _, _, info = env.step('<tool_call>{"name": "rm", "arguments": {}}</tool_call><tool_call>{{</tool_call>')
    assert info["status"] is Status.FORMAT_ERROR and info["tool_statuses"] == ["not_run", "not_run"]
    assert "unknown tool 'rm'; the tools are add, fail, sleep, shout" in obs and "not valid JSON" in obs


def test_a_result_is_bounded_and_cleaned_like_every_observation(env):
    env.reset(seed=0)
    obs, *_ = env.step('<tool_call>{"name": "shout", "arguments": {"count": 200000}}</tool_call>')
    body = obs.split("<tool_response>\n")[1].split("\n</tool_response>")[0]
    assert len(body) <= 500 and "characters cut" in body
    assert body.startswith("␛[2J␛]0;owned␇AAA") and body.endswith("␀\ufffd\u202eEND")
    assert "\x1b" not in obs and "\x00" not in obs and "\x07" not in obs


def test_a_slow_tool_times_out_as_the_models_failure_and_the_server_goes_on(env):
    env.reset(seed=0)
    started = time.monotonic()
    obs, _, terminated, _, info = env.step('<tool_call>{"name": "sleep", "arguments": {"seconds": 30}}</tool_call>')
    assert time.monotonic() - started < 15
    assert info["tool_statuses"] == ["timeout"] and "timed out after 3 s" in obs
    assert info["status"] is Status.IN_PROGRESS and not terminated
    obs, *_ = env.step(ADD)
    assert obs.startswith("<tool_response>\n5\n")


def test_the_answer_ends_the_episode_and_a_boxed_inside_a_call_is_not_one(env):
    obs, _ = env.reset(seed=0)  # "What is 85 + 63?"
    _, _, terminated, _, info = env.step('<tool_call>{"name": "add", "arguments": {"a": 85, "b": 63, "note": "\\\\boxed{148}"}}</tool_call>')
    assert not terminated and "extracted_answer" not in info
    _, reward, terminated, _, info = env.step("So the answer is \\boxed{148}.")
    assert (reward, terminated, info["correct"], info["status"]) == (1.0, True, True, Status.CORRECT)


def test_the_tool_budget_is_kept():
    env = gym.make("MCPTools-v0", server=FIXTURE_STDIO, max_tool_calls=1, max_turns=4)
    env.reset(seed=0)
    try:
        obs, *_, info = env.step(ADD + ADD)
        assert info["tool_statuses"] == ["ok", "not_run"] and "budget (1 calls) is spent" in obs
    finally:
        env.close()


def test_a_pickled_env_opens_its_own_session_and_goes_on(env):
    env.reset(seed=0)
    env.step(ADD)
    copy = pickle.loads(pickle.dumps(env.unwrapped))
    assert copy._connection is None
    obs, *_ = copy.step(ADD)
    assert obs.startswith("<tool_response>\n5\n")
    copy.close()


def test_a_server_that_dies_is_an_infrastructure_status_and_the_next_episode_starts_a_new_one(tmp_path):
    pid_file = tmp_path / "pid"
    env = gym.make("MCPTools-v0", server=[*FIXTURE_STDIO, "--pid-file", str(pid_file)], call_timeout_s=5.0)
    try:
        env.reset(seed=0)
        first = int(pid_file.read_text())
        os.kill(first, signal.SIGKILL)
        time.sleep(0.5)
        obs, reward, terminated, truncated, info = env.step(ADD)
        assert info["status"] is Status.ERROR and info["status"].is_infra_failure
        assert (reward, terminated, info["correct"]) == (0.0, True, False)
        assert "MCP server is unavailable" in info["feedback"]
        env.reset(seed=1)
        assert int(pid_file.read_text()) != first
        obs, *_, info = env.step(ADD)
        assert obs.startswith("<tool_response>\n5\n") and info["status"] is Status.IN_PROGRESS
    finally:
        env.close()


def test_a_server_that_cannot_start_is_a_clear_error_at_reset():
    env = gym.make("MCPTools-v0", server=["python3", "-c", "import sys; sys.exit('no such server here')"], connect_timeout_s=20)
    with pytest.raises(ToolServerError, match=r"(?s)could not be started or reached: .*Its stderr ends with:\nno such server here"):
        env.reset(seed=0)
    with pytest.raises(ConfigError, match="needs server="):
        gym.make("MCPTools-v0")


def test_an_allow_list_of_tools_is_checked_and_kept():
    env = gym.make("MCPTools-v0", server=FIXTURE_STDIO, tools=["add"])
    try:
        _, info = env.reset(seed=0)
        assert [t["function"]["name"] for t in info["tools"]] == ["add"]
        obs, *_ = env.step('<tool_call>{"name": "fail", "arguments": {"why": "x"}}</tool_call>')
        assert "unknown tool 'fail'; the tools are add" in obs
    finally:
        env.close()
    env = gym.make("MCPTools-v0", server=FIXTURE_STDIO, tools=["add", "nope"])
    with pytest.raises(ConfigError, match=r"does not list \['nope'\]"):
        env.reset(seed=0)
    env.close()


def test_streamable_http_with_an_async_vector_env_a_session_per_process():
    with fixture_http() as url:
        envs = gym.make_vec("MCPTools-v0", 2, vectorization_mode="async", server=url)
        try:
            obs, infos = envs.reset(seed=[0, 1])
            assert [t["function"]["name"] for t in infos["tools"][0]] == ["add", "fail", "sleep", "shout"]
            obs, rewards, terminated, truncated, infos = envs.step([ADD, '[TOOL_CALLS]add[ARGS]{"a": 40, "b": 2}'])
            assert obs[0].startswith("<tool_response>\n5\n") and obs[1].startswith("<tool_response>\n42\n")
        finally:
            envs.close()


def test_the_connection_closes_its_server_and_its_thread():
    connection = MCPConnection(FIXTURE_STDIO)
    assert connection.call("add", {"a": 1, "b": 1}).text == "2"
    connection.close()
    assert not connection._thread.is_alive() and not connection.alive
    assert connection.call("add", {"a": 1, "b": 1}).unavailable


def test_the_docs_server_gives_the_docs_env_its_tools(tmp_path):
    import subprocess
    import sys

    from tests.test_docs_snippets import REPO, python_blocks

    blocks = [b for b in python_blocks(REPO / "docs" / "mcp.md") if b.notest and "test_the_docs_server_gives" in b.notest[1]]
    server, env_block = blocks
    assert server.code.startswith("# my_tools.py")
    (tmp_path / "my_tools.py").write_text(server.code)
    done = subprocess.run([sys.executable, "-c", env_block.code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
