"""The bound on an action fits what reasoning models write, and a run says when it does not.

A reasoning model thinks for 10k-40k tokens before its answer. Every env accepts a 32k-token
answer (131,072 characters) by default and grades it, as it grades the short one; a vector
env's shared memory for observations costs what they hold, not the bound; and a run whose
``max_new_tokens`` can pass an env's bound says so at its start.
"""

from __future__ import annotations

import json
import os

import gymnasium as gym
import pytest
from gymnasium.vector.utils import shared_memory

import mathgym  # noqa: F401  (registers the envs)
from mathgym.algos.answer_bounds import answer_bound_warnings, check_answer_bounds
from mathgym.rewards.base import Status
from mathgym.spaces import DEFAULT_MAX_LENGTH, UnicodeText
from tests.envs_under_test import contract_env_ids, contract_kwargs

#: A 32k-token answer at 4 characters a token.
THIRTY_TWO_K_TOKENS = 131_072
THINKING = "Let me check this step by step: restate the problem, try a case, verify it twice. "


def _chain_of_thought(answer: str, length: int) -> str:
    """``answer`` after a chain of thought, ``length`` characters in all."""
    room = length - len(answer) - len("<think>\n\n</think>\n\n")
    return "<think>\n" + (THINKING * (room // len(THINKING) + 1))[:room] + "\n</think>\n\n" + answer


@pytest.mark.parametrize("env_id", contract_env_ids())
def test_every_env_accepts_a_32k_token_answer_by_default(env_id):
    env = gym.make(env_id, **contract_kwargs(env_id))
    assert DEFAULT_MAX_LENGTH >= THIRTY_TWO_K_TOKENS
    assert env.unwrapped.max_length >= THIRTY_TWO_K_TOKENS
    assert env.action_space.contains("x" * THIRTY_TWO_K_TOKENS)
    assert all(bound >= THIRTY_TWO_K_TOKENS for bound in env.unwrapped.answer_bounds().values())
    env.close()


@pytest.mark.parametrize("env_id", ["MathReason-v0", "CodeSandbox-v0", "Countdown-v0", "ReasoningGym-v0"])
def test_a_correct_answer_after_a_long_chain_of_thought_is_graded_correct(env_id):
    env = gym.make(env_id, **contract_kwargs(env_id))
    env.reset(seed=0)
    answer = env.unwrapped.expert_action()
    _, short_reward, *_, short = env.step(answer)
    env.reset(seed=0)
    action = _chain_of_thought(answer, THIRTY_TWO_K_TOKENS)
    _, reward, terminated, _, info = env.step(action)
    assert len(action) == THIRTY_TWO_K_TOKENS
    assert (info["status"], reward, terminated) == (short["status"], short_reward, True) == (Status.CORRECT, 1.0, True)
    env.close()


def test_a_symbolic_answer_after_a_long_chain_of_thought_reaches_math_verify(tmp_path):
    """The env's verifier reads every answer the env accepts: past its own 100,000-character
    cap, a symbolic answer math-verify must check was ``unparseable``."""
    data = tmp_path / "symbolic.jsonl"
    data.write_text(json.dumps({"question": "Write x times y.", "answer": "x y"}) + "\n")
    env = gym.make("MathReason-v0", dataset=str(data), max_length=200_000)
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step(_chain_of_thought("so \\boxed{y x}", 150_000))
    assert (info["status"], reward) == (Status.CORRECT, 1.0), info.get("reason")


@pytest.mark.parametrize("extraction", ["strict", "lenient"])
def test_the_verifier_alone_grades_a_32k_token_answer(extraction):
    """``MathVerifier`` outside an env (a TRL reward, a user's script) reads what an env accepts:
    its own cap was 100,000 characters, and a symbolic answer past it was ``unparseable``."""
    from mathgym.rewards import MathVerifier

    completion = _chain_of_thought("so \\boxed{\\frac{\\sqrt{2}}{2} y x}", THIRTY_TWO_K_TOKENS)
    result = MathVerifier(answer_extraction=extraction).score(completion, "x y \\sin(\\pi/4)")
    assert (result.status, result.score) == (Status.CORRECT, 1.0), result.details.get("reason")


def test_a_multi_task_mixture_names_each_envs_bound():
    env = gym.make("MultiTask-v0", envs=["MathReason-v0", "Wordle-v0"], env_kwargs={"Wordle-v0": {"max_length": 5000}})
    assert env.unwrapped.answer_bounds() == {
        ("env_kwargs", "MathReason-v0", "max_length"): DEFAULT_MAX_LENGTH,
        ("env_kwargs", "Wordle-v0", "max_length"): 5000,
    }


# -- a vector env's shared memory costs what the observations hold ------------------------


def _resident_kib() -> int:
    with open(f"/proc/{os.getpid()}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the resident size from /proc")
def test_async_shared_memory_for_128_envs_costs_what_the_observations_hold():
    space = UnicodeText(DEFAULT_MAX_LENGTH)
    before = _resident_kib()
    memory = shared_memory.create_shared_memory(space, n=128)
    grown_mib = (_resident_kib() - before) / 1024
    # Sized for the bound, 128 x 131,073 x 4 bytes = 64 MiB were committed at once (zeroed).
    assert grown_mib < 8, f"the buffer of 128 observations made the process {grown_mib:.0f} MiB larger"
    longest = ("é中𝄞" * DEFAULT_MAX_LENGTH)[:DEFAULT_MAX_LENGTH]
    for index, text in ((3, longest), (0, "What is 2 + 2?"), (127, "")):
        shared_memory.write_to_shared_memory(space, index, text, memory)
    batch = shared_memory.read_from_shared_memory(space, memory, n=128)
    assert (batch[3], batch[0], batch[127]) == (longest, "What is 2 + 2?", "")


def test_async_and_sync_vector_envs_agree_at_the_new_bound():
    kwargs = {"envs": ["MathReason-v0", "Wordle-v0"]}
    action = _chain_of_thought("crane \\boxed{1} é中𝄞", THIRTY_TWO_K_TOKENS)
    results = {}
    for mode in ("sync", "async"):
        envs = gym.make_vec("MultiTask-v0", num_envs=4, vectorization_mode=mode, **kwargs)
        first, _ = envs.reset(seed=[0, 1, 2, 3])
        second, rewards, _, _, infos = envs.step([action] * 4)
        results[mode] = (tuple(first), tuple(second), tuple(rewards), tuple(infos["status"]))
        envs.close()
    assert results["async"] == results["sync"]
    assert Status.TOO_LONG not in results["sync"][3]  # the action was read, and the envs' replies came back exact


# -- a run says at its start when max_new_tokens can pass a bound ---------------------------


def test_a_completion_longer_than_the_bound_is_named_with_the_option_that_raises_it():
    env = gym.make("MathReason-v0", max_length=1000)
    assert answer_bound_warnings(env, "MathReason-v0", 250) == []  # 1,000 characters: fits
    (line,) = answer_bound_warnings(env, "MathReason-v0", 251)
    assert "MathReason-v0" in line and "max_length=1000" in line and "max_new_tokens=251" in line
    assert "-o max_length=1024" in line  # 1,004 characters, rounded up
    mixture = gym.make("MultiTask-v0", envs=["MathReason-v0", "Wordle-v0"], env_kwargs={"Wordle-v0": {"max_length": 5000}})
    (line,) = answer_bound_warnings(mixture, "MultiTask-v0", 2000)
    assert "MultiTask-v0's Wordle-v0" in line and "{env_kwargs: {Wordle-v0: {max_length: 8192}}}" in line


class _PlainTextEnv(gym.Env):
    """A gymnasium env that is no mathgym TextEnv (a plugin's, a remote one): its action space says its bound."""

    action_space = gym.spaces.Text(300)
    observation_space = gym.spaces.Text(300)


def test_an_env_of_another_kind_is_checked_against_its_action_space():
    (line,) = answer_bound_warnings(_PlainTextEnv(), "Plugin-v0", 100)
    assert line.startswith("Plugin-v0 refuses an answer over the action space's max_length=300 characters")
    assert answer_bound_warnings(_PlainTextEnv(), "Plugin-v0", 75) == []


def test_the_default_bound_holds_a_32k_token_run_and_warns_past_it(capsys):
    assert check_answer_bounds("MathReason-v0", {}, 32_768) == []
    lines = check_answer_bounds("MathReason-v0", {}, 40_960)  # Qwen3's longest thinking
    assert len(lines) == 1 and capsys.readouterr().out == f"mathgym: warning: {lines[0]}\n"


def test_mathgym_train_says_so_at_the_start_of_the_run(tmp_path, capsys):
    pytest.importorskip("torch")
    from mathgym import train_cli
    from tests.trainkit import build_small_model

    model = build_small_model(tmp_path / "model")
    code = train_cli.main("train", [
        "--model", str(model), "--steps", "1", "--num-tasks", "1", "--group-size", "2", "--max-new-tokens", "8",
        "--eval-tasks", "0", "--progress", "false", "--run-dir", str(tmp_path / "run"), "-o", "max_length=16",
    ])
    assert code == 0
    out = capsys.readouterr().out
    assert "mathgym: warning: MathReason-v0 refuses an answer over max_length=16 characters" in out
    assert "-o max_length=1024" in out


def test_a_reply_that_quotes_a_long_step_fits_an_async_vector_envs_observations():
    """MathStep-v0's reply quotes the steps so far: past the bound, the worker of an async
    vector env could not write it to shared memory (and raised)."""
    envs = gym.make_vec("MathStep-v0", num_envs=2, vectorization_mode="async", max_length=1000)
    envs.reset(seed=[0, 1])
    step = "Step: " + "3 + 4 = 7. " * 86  # 952 characters, no final answer yet
    observations, _, terminated, _, _ = envs.step([step, step])
    envs.close()
    assert not terminated.any()
    assert all(len(obs) <= 1000 and "characters cut" in obs and obs.endswith("in \\boxed{}.") for obs in observations)
