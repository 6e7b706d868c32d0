"""NeMoGym-v0 against the real nemo-gym (0.4.0): resources servers it ships (mcqa, example_multi_step,
example_session_state_mgmt) and one written for the tests on its base classes (tests/nemo_gym_fixture.py),
each served on 127.0.0.1 by an interpreter with nemo-gym (tests/nemo_gym_servers.py: skipped, saying
why, without one). The messages without a server or without nemo-gym are checked everywhere; the contract
checks run on nemo-gym's mcqa server in tests/test_contract.py."""

from __future__ import annotations

import importlib.util
import json
import pickle
import re
import sys

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the ids
from mathgym.errors import ConfigError, DatasetError
from tests.nemo_gym_servers import FIXTURE, REPO, served

TESTS = str(REPO / "tests")


def call(tool: str, /, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': tool, 'arguments': arguments})}</tool_call>"


def echo_rows() -> list[dict]:
    tools = [{"type": "function", "strict": False, "name": "sleep", "parameters": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
             {"type": "function", "strict": False, "name": "greet", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}}]
    ask = {"input": [{"role": "developer", "content": "Answer in one word."},
                     {"role": "user", "content": [{"type": "input_text", "text": "Say ok."}]}], "tools": tools}
    return [{"responses_create_params": ask, "expected": "ok"},
            {"responses_create_params": {"input": "Say ok."}, "expected": "ok", "broken": True}]


def echo_env(**kwargs):
    server = served(FIXTURE, json.dumps({"greeting": "hello"}))
    return gym.make("NeMoGym-v0", server_url=server.url, dataset=echo_rows(), **kwargs)


# -- without a server ---------------------------------------------------------------------------

def test_without_a_server_the_message_says_what_to_give():
    with pytest.raises(ConfigError, match="server_url= or resources_server=.*nemo-gym"):
        gym.make("NeMoGym-v0", dataset=echo_rows())


def test_an_interpreter_without_nemo_gym_says_what_to_install():
    # This venv's Python has no nemo-gym (mathgym's is 3.11, too old for it): the launcher says so.
    if importlib.util.find_spec("nemo_gym") is not None:
        pytest.skip("this interpreter has nemo-gym")
    with pytest.raises(ConfigError, match=r"nemo-gym is not importable.*Python >= 3\.12"):
        gym.make("NeMoGym-v0", resources_server="mcqa", python=sys.executable)


def test_a_row_without_responses_create_params_is_refused():
    with pytest.raises(DatasetError, match="responses_create_params"):
        gym.make("NeMoGym-v0", server_url="http://127.0.0.1:9", dataset=[{"question": "2 + 2?"}])


# -- nemo-gym's own servers ---------------------------------------------------------------------

def test_mcqa_single_turn_is_verified_by_the_server():
    server = served("mcqa")
    env = gym.make("NeMoGym-v0", server_url=server.url, dataset=server.dataset)
    obs, info = env.reset(options={"task_index": 0})
    gold = env.unwrapped.rows[0]["expected_answer"]
    assert "cystic fibrosis" in obs and info["messages"][-1] == {"role": "user", "content": obs}
    assert info["tools"] == [] and "answer" not in info
    obs, reward, terminated, truncated, info = env.step(f"<think>PCR finds it.</think>The answer is \\boxed{{{gold}}}")
    assert (reward, terminated, truncated, info["status"], info["correct"], info["answer"]) == (1.0, True, False, "correct", True, gold)
    assert info["verify"]["extracted_answer"] == gold
    env.reset(options={"task_index": 0})
    wrong = "A" if gold != "A" else "C"
    assert env.step(f"\\boxed{{{wrong}}}")[1:4] + (env.unwrapped.turn,) == (0.0, True, False, 1)
    env.reset(options={"task_index": 0})
    assert env.step("no letter at all")[4]["status"] == "wrong"


def test_multi_step_tools_run_at_the_server_and_the_last_call_is_verified():
    server = served("example_multi_step")
    env = gym.make("NeMoGym-v0", server_url=server.url, dataset=server.dataset, max_turns=4)
    obs, info = env.reset(options={"task_index": 0})
    row = env.unwrapped.rows[0]
    assert [t["function"]["name"] for t in info["tools"]] == ["get_synonym_value", "extract_synonym_values"]
    assert "<tool_call>" in obs and "get_synonym_value" in obs
    lookups = "".join(call("get_synonym_value", synonym=s) for s in row["expected_synonyms"])
    obs, reward, terminated, truncated, info = env.step("Looking them up. " + lookups)
    values = [json.loads(body)["synonym_value"] for body in re.findall(r"<tool_response>\n(.*?)\n</tool_response>", obs)]
    assert values == row["expected_synonym_values"] and (terminated, truncated, info["status"]) == (False, False, "in_progress")
    # An undeclared tool (the server's own /verify among them) and a broken call are not run: the model's error.
    obs, _, _, _, info = env.step(call("verify") + "<tool_call>{not json</tool_call>")
    assert "Unknown tool 'verify'" in obs and "Invalid tool call" in obs and info["status"] == "format_error"
    env.step(call("extract_synonym_values", synonym_values=values))
    obs, reward, terminated, truncated, info = env.step("Done.")
    assert (reward, terminated, info["status"], info["verify"]["accuracy"]) == (1.0, True, "correct", True)


def test_out_of_turns_the_episode_is_verified_as_it_stands():
    server = served("example_multi_step")
    env = gym.make("NeMoGym-v0", server_url=server.url, dataset=server.dataset, max_turns=1)
    env.reset(options={"task_index": 0})
    row = env.unwrapped.rows[0]
    _, reward, terminated, truncated, info = env.step(call("extract_synonym_values", synonym_values=row["expected_synonym_values"]))
    assert (reward, terminated, truncated, info["status"]) == (1.0, False, True, "correct")


def test_the_session_keeps_the_rollouts_state_and_a_pickled_copy_replays_into_its_own():
    server = served("example_session_state_mgmt")
    env = gym.make("NeMoGym-v0", server_url=server.url, dataset=server.dataset)
    env.reset(options={"task_index": 0})
    row = env.unwrapped.rows[0]  # "add 1 then add 2 then get the count", from initial_count 3: 6
    env.step(call("increment_counter", count=1))
    clone = pickle.loads(pickle.dumps(env))
    for twin in (env, clone):
        obs = twin.step(call("increment_counter", count=2) + call("get_counter_value"))[0]
        assert '"count":6' in obs.replace(" ", "")
        assert twin.step("It is 6.")[1:3] == (1.0, True) and row["expected_count"] == 6
    env.reset(options={"task_index": 0})  # a new rollout starts from the row's count again
    assert '"count":3' in env.step(call("get_counter_value"))[0].replace(" ", "")


# -- the fixture server: what is sent, whose failure is whose -------------------------------------

def test_the_response_sent_to_verify_carries_reasoning_calls_and_the_final_message():
    env = echo_env()
    obs, info = env.reset(options={"task_index": 0})
    assert info["messages"][0] == {"role": "system", "content": "Answer in one word."}
    obs = env.step(call("greet", name="Ada"))[0]
    assert "hello, Ada" in obs  # server_config= reached the server's config
    _, reward, _, _, info = env.step("<think>easy</think>\nok")
    assert (reward, info["status"]) == (1.0, "correct")
    assert info["verify"]["output_types"] == ["function_call", "function_call_output", "reasoning", "message"]
    assert info["verify"]["last_text"] == "ok"


def test_a_verifier_failing_on_this_reply_only_is_the_models_on_every_reply_the_servers():
    env = echo_env()
    env.reset(options={"task_index": 0})
    _, reward, terminated, _, info = env.step("CRASH")
    assert (reward, terminated, info["status"]) == (0.0, True, "wrong") and "500" in info["error"]
    env.reset(options={"task_index": 1})  # the row's verifier fails on any reply: infrastructure
    assert env.step("ok")[4]["status"] == "error"


def test_a_slow_tool_is_the_models_timeout():
    env = echo_env(timeout_s=1.0)
    env.reset(options={"task_index": 0})
    obs, _, terminated, _, info = env.step(call("sleep", seconds=3))
    assert "ran past 1 s" in obs and not terminated and info["status"] == "in_progress"


def test_the_docs_example_runs_and_a_gone_server_is_an_error():
    # docs/envs-in.md's example: nemo-gym's mcqa server started by the env, its shipped task set.
    env = gym.make("NeMoGym-v0", resources_server="mcqa", python=served("mcqa").python)
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step("PCR detects the mutation: \\boxed{B}")
    assert (reward, info["status"], info["verify"]["extracted_answer"]) == (1.0, "correct", "B")
    env.reset(options={"task_index": 0})
    process = env.unwrapped._launched.process
    process.kill()
    process.wait()
    _, reward, terminated, _, info = env.step("\\boxed{B}")
    assert (reward, terminated, info["status"]) == (0.0, True, "error") and "cannot be reached" in info["error"]
    env.close()
    assert env.unwrapped._launched is None

