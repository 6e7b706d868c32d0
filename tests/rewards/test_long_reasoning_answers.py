"""A reasoning model's answer is graded on its answer, not refused and not mixed with its thinking.

A reasoning model writes a chain of thought in ``<think>...</think>`` (10k-40k tokens) and then
its answer. Every scorer on a grading path reads what the env accepts (131,072 characters by
default) and grades the answer after the thinking: the LLM judge (OpenQA-v0), the code reward
and the code envs, the instruction-following checks. A reply whose thinking never closed gave
no answer and earns nothing, however good its thinking.
"""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

import mathgym  # noqa: F401  (registers the envs)
from mathgym.rewards.base import Status
from mathgym.rewards.code import CodeTestsReward, extract_code
from mathgym.rewards.extract import answer_after_thinking
from mathgym.rewards.judge import JudgeInput, LLMJudge
from mathgym.rewards.sandbox import TestCase
from mathgym.spaces import DEFAULT_MAX_LENGTH
from tests.rewards.test_rewards_judge import server  # noqa: F401  (the fixture judge served on 127.0.0.1)

THINKING = "Let me check this step by step: restate the problem, try a case, verify it twice. "


def _chain_of_thought(answer: str, length: int = DEFAULT_MAX_LENGTH, thinking: str = THINKING) -> str:
    """``answer`` after a chain of thought of ``thinking`` repeated, ``length`` characters in all."""
    room = length - len(answer) - len("<think>\n\n</think>\n\n")
    return "<think>\n" + (thinking * (room // len(thinking) + 1))[:room] + "\n</think>\n\n" + answer


def test_the_answer_is_what_follows_the_thinking():
    assert answer_after_thinking("<think>\nmaybe 3\n</think>\n\nIt is 4.") == "It is 4."
    assert answer_after_thinking("maybe 3\n</think>\n\nIt is 4.") == "It is 4."  # R1: the prompt opened the block
    assert answer_after_thinking("<think>a</think>b</think>  It is 4.") == "It is 4."  # the last close ends it
    assert answer_after_thinking("It is 4, <think> is a tag.") == "It is 4, <think> is a tag."  # no block: all of it
    assert answer_after_thinking("  <think>\nmaybe 3, so") is None  # thinking that never closed: no answer
    assert answer_after_thinking("<think>a</think>\n<think>b") is None  # a second block never closed
    assert answer_after_thinking("<think>a</think>") == ""


# -- OpenQA-v0 and LLMJudge: the answer is judged, never refused within the env's bound ----------


def _open_qa(server) -> gym.Env:  # noqa: F811
    env = gym.make("OpenQA-v0", judge_url=server.base_url, judge_model="fixture-judge", judge_options={"timeout_s": 10.0})
    env.reset(options={"task_index": 0})
    return env


def _judged_response(request: dict) -> str:
    system, user = request["messages"][0]["content"], request["messages"][1]["content"]
    nonce = re.search(r"<response-([0-9a-f]+)>", system).group(1)
    return user.split(f"<response-{nonce}>\n", 1)[1].rsplit(f"\n</response-{nonce}>", 1)[0]


def test_open_qa_judges_the_answer_after_a_32k_token_chain_of_thought(server):  # noqa: F811
    env = _open_qa(server)
    answer = env.unwrapped.expert_action()
    action = _chain_of_thought(answer)
    assert len(action) == DEFAULT_MAX_LENGTH == env.unwrapped.max_length
    _, reward, terminated, _, info = env.step(action)
    assert (info["status"], reward, terminated) == (Status.CORRECT, 1.0, True)  # was too_long: max_response_chars=20,000
    assert _judged_response(server.requests[-1]) == answer  # the judge read the answer, not the thinking


def test_open_qa_does_not_credit_a_right_answer_left_in_the_thinking(server):  # noqa: F811
    env = _open_qa(server)
    thought = f"<think>\nIt could be {env.unwrapped.expert_action()}, but I doubt it.\n</think>\n\nI do not know."
    _, reward, _, _, info = env.step(thought)
    assert (info["status"], reward) == (Status.PARTIAL, 0.2)  # the fixture judge's grade of an answer without the reference
    assert "<think>" not in _judged_response(server.requests[-1])


def test_thinking_that_never_closed_is_no_answer_and_asks_no_judge(server):  # noqa: F811
    env = _open_qa(server)
    _, reward, _, _, info = env.step("<think>\nIt is " + env.unwrapped.expert_action() + ", I think, and")
    assert (info["status"], reward, server.requests) == (Status.UNPARSEABLE, 0.0, [])
    judge = LLMJudge(server.base_url, "fixture-judge", timeout_s=10.0)
    assert judge.score("<think>\nParis, and", JudgeInput("Capital of France?", "Paris")).status is Status.UNPARSEABLE
    assert server.requests == []


def test_a_long_answer_is_judged_on_its_start_and_end_within_a_bounded_prompt(server):  # noqa: F811
    judge = LLMJudge(server.base_url, "fixture-judge", timeout_s=10.0)
    answer = "Here is everything I know about France. " * 3000 + "So the capital is Paris."  # 120,024 characters, no thinking
    result = judge.score(answer, JudgeInput("What is the capital of France?", reference="Paris"))
    assert (result.status, result.score) == (Status.CORRECT, 1.0)  # was too_long: score 0
    shown = _judged_response(server.requests[-1])
    nonce = re.search(r"<response-([0-9a-f]+)>", server.requests[-1]["messages"][0]["content"]).group(1)
    assert len(shown) < judge.max_response_chars + 100 and shown.endswith("So the capital is Paris.")
    assert f"[cut-{nonce}: {len(answer) - judge.max_response_chars:,} characters of the response left out here]" in shown
    assert f"[cut-{nonce}: ...]" in server.requests[-1]["messages"][0]["content"]  # the judge is told what the line means


def test_a_judge_that_quotes_a_long_answer_before_its_verdict_still_gives_one(server):  # noqa: F811
    """What the judge is shown of an answer at the env's bound, quoted whole before the verdict: the
    verdict is past the 20,000 characters of reply once read, an ``error`` the policy chose."""
    server.script.extend(["quote"])
    judge = LLMJudge(server.base_url, "fixture-judge", timeout_s=10.0)
    answer = _chain_of_thought("Lyon, I believe. " * 7000)
    result = judge.score(answer, JudgeInput("What is the capital of France?", reference="Paris"))
    assert (result.status, result.score) == (Status.PARTIAL, 0.2), result.details.get("reason")
    assert len(result.details["reply"]) == 2000  # it did quote: the reply's start is kept


def test_a_vector_step_of_open_qa_sends_the_answers_only(server):  # noqa: F811
    envs = gym.make_vec("OpenQA-v0", num_envs=2, vectorization_mode="sync", judge_url=server.base_url,
                        judge_model="fixture-judge", judge_options={"timeout_s": 10.0})
    envs.reset(options={"task_index": 0})
    answer = envs.envs[0].unwrapped.expert_action()
    _, rewards, _, _, infos = envs.step([_chain_of_thought(answer), _chain_of_thought("I am not sure.")])
    envs.close()
    assert list(rewards) == [1.0, 0.2] and list(infos["status"]) == [Status.CORRECT, Status.PARTIAL]
    assert sorted(_judged_response(r) for r in server.requests) == sorted([answer, "I am not sure."])


# -- code: the answer's program runs, within the env's bound ----------------------------------

SQUARE = "```python\ndef square(x):\n    return x * x\n```"
DRAFT = "```python\ndef square(x):\n    return x + x\n```"
SQUARE_TESTS = [TestCase("t", "assert", "assert square(3) == 9 and square(4) == 16")]


def test_the_code_reward_grades_code_after_a_32k_token_chain_of_thought():
    reward = CodeTestsReward()
    assert reward.max_completion_chars >= DEFAULT_MAX_LENGTH
    result = reward.score(_chain_of_thought(SQUARE, thinking=THINKING + DRAFT + "\n"), SQUARE_TESTS)
    assert (result.status, result.score) == (Status.CORRECT, 1.0)  # was too_long past 100,000 characters


def test_code_drafted_in_the_thinking_is_never_run():
    assert extract_code(f"<think>\n{SQUARE}\n</think>\n\n{DRAFT}", "square") == "def square(x):\n    return x + x\n"
    assert extract_code(f"<think>\n{SQUARE}\n</think>\n\nI could not finish.", "square") == "I could not finish.\n"
    assert extract_code(f"<think>\n{SQUARE}\nand now", "square") == ""  # thinking never closed: no code
    result = CodeTestsReward().score(f"<think>\n{SQUARE}\n", SQUARE_TESTS)
    assert (result.status, result.score) == (Status.UNPARSEABLE, 0.0)


@pytest.mark.parametrize("env_id", ["CodeSandbox-v0", "CodeRepair-v0"])
def test_a_code_env_grades_the_answer_not_the_drafts(env_id):
    env = gym.make(env_id)
    env.reset(seed=0)
    right = env.unwrapped.expert_action()
    other = "```python\ndef unrelated():\n    return 0\n```"
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"<think>\n{right}\n</think>\n\n{other}")
    assert reward == 0.0 and info.get("attempt_status", info["status"]) is Status.WRONG  # was correct: the draft ran
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"<think>\n{right}\n")
    assert reward == 0.0 and info.get("attempt_status", info["status"]) is Status.UNPARSEABLE
    env.close()


# -- instruction following: the constraints bind the answer -----------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_instruction_follow_checks_the_answer_after_a_32k_token_chain_of_thought(seed):
    env = gym.make("InstructionFollow-v0", difficulty=4)
    env.reset(seed=seed)
    action = _chain_of_thought(env.unwrapped.expert_action())
    _, reward, _, _, info = env.step(action)
    assert (info["status"], reward) == (Status.CORRECT, 1.0), info["constraints"]


def test_a_json_answer_after_thinking_is_json():
    env = gym.make("InstructionFollow-v0", families=["json_format"], num_constraints=1)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(_chain_of_thought(env.unwrapped.expert_action(), 5000))
    assert (info["status"], reward) == (Status.CORRECT, 1.0)  # was wrong: the thinking is not JSON


def test_an_answer_after_long_leading_white_space_is_read():
    """The emptiness check read the first 100,000 characters only: a reply past them was ``unparseable``."""
    env = gym.make("InstructionFollow-v0", families=["word_count"], num_constraints=1)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(" " * 110_000 + env.unwrapped.expert_action())
    assert (info["status"], reward) == (Status.CORRECT, 1.0)


def test_instruction_follow_thinking_that_never_closed_meets_no_constraint():
    env = gym.make("InstructionFollow-v0", difficulty=2)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("<think>\n" + env.unwrapped.expert_action())
    assert (info["status"], reward) == (Status.UNPARSEABLE, 0.0)
    assert not any(c["met"] for c in info["constraints"])


def test_an_ifeval_prompt_is_checked_on_the_answer(tmp_path):
    data = tmp_path / "ifeval.jsonl"
    rows = [{"key": 1, "prompt": "Describe the sea in lowercase.", "instruction_id_list": ["change_case:english_lowercase"],
             "kwargs": [{}]}]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    env = gym.make("InstructionFollow-v0", dataset=str(data))
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step("<think>\nThe User wants LOWERCASE only.\n</think>\n\nthe sea is wide and blue.")
    assert (info["status"], reward) == (Status.CORRECT, 1.0)  # was wrong: the thinking's capitals counted
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step("<think>\nthe sea is wide and blue.")
    assert (info["status"], reward) == (Status.UNPARSEABLE, 0.0)


# -- games: the move played is the answer's, not one tried out while thinking ------------------

#: (env id, a move tried out while thinking, the answer's move; ``None``: the env's expert move).
THOUGHT_MOVES = [
    ("Wordle-v0", "\\boxed{slate}", "crane"),
    ("Hangman-v0", "\\boxed{z}", "e"),
    ("Game2048-v0", "\\boxed{left}", "up"),
    ("GuessNumber-v0", "\\boxed{99}", "50"),
    ("Sokoban-v0", "left left left up up", None),
    ("FrozenLakeText-v0", "up", None),
    ("Hanoi-v0", "A -> B, B -> C, C -> A", None),
]


@pytest.mark.parametrize("env_id, tried, move", THOUGHT_MOVES, ids=[row[0] for row in THOUGHT_MOVES])
def test_a_game_plays_the_answers_move_after_thinking(env_id, tried, move):
    env = gym.make(env_id)
    env.reset(seed=0)
    move = move if move is not None else env.unwrapped.expert_action()
    obs, reward, _, _, info = env.step(move)
    env.reset(seed=0)
    thought_obs, thought_reward, _, _, thought_info = env.step(_chain_of_thought(move, 20_000, f"Maybe {tried}? "))
    assert (thought_obs, thought_reward, thought_info["status"]) == (obs, reward, info["status"])
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"<think>\nI will play {move}")  # thinking never closed: no move
    assert (reward, info["status"]) == (0.0, Status.FORMAT_ERROR)
    env.close()


# -- single-turn answers in a format: a try in the thinking is not the answer ------------------


@pytest.mark.parametrize("env_id", ["Countdown-v0", "ReasoningGym-v0"])
def test_an_answer_tried_out_while_thinking_is_not_the_answer(env_id):
    from tests.envs_under_test import contract_kwargs

    env = gym.make(env_id, **contract_kwargs(env_id))
    env.reset(seed=0)
    right = env.unwrapped.expert_action()
    _, reward, _, _, info = env.step(f"<think>\n{right}\n</think>\n\nI could not find it.")
    assert (reward, info["status"]) == (0.0, Status.UNPARSEABLE)  # was correct: the thinking's try was graded
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"<think>\n{right}\nso that is it, I")
    assert (reward, info["status"]) == (0.0, Status.UNPARSEABLE)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(_chain_of_thought(right))
    assert (reward, info["status"]) == (1.0, Status.CORRECT)
    env.close()


def test_sql_query_reads_the_reply_after_the_thinking():
    env = gym.make("SQLQuery-v0")
    env.reset(seed=0)
    right = env.unwrapped.expert_action()
    _, reward, terminated, _, info = env.step(f"<think>\n{right}\n</think>\n\nI am not sure yet.")
    assert (reward, terminated) == (0.0, False) and info["status"] is not Status.CORRECT  # was correct: the thinking's answer
    env.reset(seed=0)
    _, reward, _, _, info = env.step(_chain_of_thought(right))
    assert (reward, info["status"]) == (1.0, Status.CORRECT)
    env.close()
