"""Hostile actions on every registered env, and the parsers of model text at a megabyte.

A policy under RL pressure writes whatever earns reward or breaks the judge. Every env must
refuse an action longer than its ``max_length`` before parsing it (``too_long``), take any
action up to that length (131,072 characters by default: a reasoning model's 32k-token answer)
through its real parser and judge, never raise, and answer with a status of the closed set and
an observation its space holds. Each hostile shape is played at the env's full bound; a step
that hangs fails the test, and what a step costs is measured by
``benchmarks/bench_long_answers.py``, not asserted here. Every parser of model text is linear:
a megabyte of each adversarial shape is scanned in milliseconds.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator

import gymnasium as gym
import pytest

import mathgym
from mathgym.envs.math.math_step import arithmetic_consistency
from mathgym.envs.math.math_tool import parse_tool_call
from mathgym.envs.interop.reasoning_gym_env import extract_tagged_answer
from mathgym.envs.tools.tool_calls import find_tool_calls
from mathgym.rewards.base import Status
from mathgym.rewards.code import CodeTestsReward, extract_code
from mathgym.rewards.extract import boxed_contents, extract_answer
from mathgym.rewards.sandbox import TestCase

from tests.envs_under_test import REASONING_GYM_PREFIX, contract_env_ids, contract_kwargs, needs_layered_venv

MEGABYTE = 1_000_000
#: A parser fed a megabyte (best of three runs, so that a busy machine does not decide).
PARSER_BUDGET_S = 0.1
#: Shapes that hold a complete block every few characters (250,000 code fences in a megabyte):
#: linear, but with a Python object per block; a quadratic scan would take minutes.
MANY_BLOCKS = {"fences_open": 2.0}
#: Parsers that were always linear but scan a megabyte several times over (three answer
#: formats, every brace of an unclosed box): a guard against a quadratic regression.
LINEAR_BEFORE = {"extract_answer": 0.5, "boxed_contents": 0.5, "extract_tagged_answer": 0.5}
#: What a step or parse may take before the test gives up on it (a quadratic scan of a
#: megabyte takes minutes, of an action at the 131,072-character bound tens of seconds): the
#: test fails instead of hanging. Not a budget: a step at the bound takes milliseconds.
HANG_S = 10.0


def _nested_json(n: int) -> str:
    depth = n // 12
    return '{"a": [' * depth + "1" + "]}" * depth


#: Each adversarial shape of model text, as a function of the length wanted.
SHAPES: dict[str, Callable[[int], str]] = {
    "tool_call_opens": lambda n: "<tool_call>" * (n // 11),
    "tool_call_spaces": lambda n: "<tool_call>" + " " * (n - 11),
    "python_tags": lambda n: "<python>" * (n // 8),
    "answer_tags": lambda n: "<answer>" * (n // 8),
    "backticks": lambda n: "`" * n,
    "fence_lines": lambda n: "```py" * (n // 5),
    "fences_open": lambda n: "```\n" * (n // 4),
    "boxed_opens": lambda n: "\\boxed{" * (n // 7),
    "boxed_nested": lambda n: "\\boxed{" * (n // 16) + "1" + "}" * (n // 16),
    "brackets": lambda n: "[" * n,
    "digits": lambda n: "9" * n,
    "spaced_digits": lambda n: "1 + " * (n // 4),
    "lone_surrogates": lambda n: "\ud800\udfff" * (n // 2),
    "ansi_escapes": lambda n: "\x1b[2J\x1b]0;x\x07" * (n // 10),
    "nul_bytes": lambda n: "\x00" * n,
    "nested_json": _nested_json,
    "tool_call_nested_json": lambda n: "<tool_call>" + _nested_json(n - 23) + "</tool_call>",
    "mistral_markers": lambda n: "[TOOL_CALLS][\"" * (n // 14),
    "mistral_unclosed_string": lambda n: "[TOOL_CALLS][\"" + "a[TOOL_CALLS]" * ((n - 14) // 13),
    "python_tag_braces": lambda n: "<|python_tag|>" + "{" * (n - 14),
    "harmony_recipients": lambda n: " to=" * (n // 4 - 3) + "<|message|>",
    "harmony_calls": lambda n: " to=f<|message|>{" * (n // 17),
}

ENV_IDS = contract_env_ids()
#: Each env id with the constructor options of its test run.
ALL_ENV_IDS = [i for i in mathgym.list_envs() if not i.startswith(REASONING_GYM_PREFIX) and not needs_layered_venv(i)]
#: A handful of the ~105 ReasoningGym/<task>-v0 ids in the default run; all under ``-m heavy``.
REASONING_GYM_DEFAULT = [i for i in ENV_IDS if i.startswith(REASONING_GYM_PREFIX)][:3]
REASONING_GYM_ALL = [i for i in mathgym.list_envs() if i.startswith(REASONING_GYM_PREFIX)]


@contextlib.contextmanager
def _deadline(seconds: float, what: str) -> Iterator[None]:
    """Fail (instead of hanging for minutes) when the body runs past ``seconds``."""

    def expire(*_: object) -> None:
        raise TimeoutError(f"{what} still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _make(env_id: str) -> gym.Env:
    return gym.make(env_id, **contract_kwargs(env_id))


def _step_or_fail(env: gym.Env, action: str, what: str) -> tuple:
    with _deadline(HANG_S, what):
        return env.step(action)


def _hostile_episode_checks(env_id: str) -> None:
    env = _make(env_id)
    max_length = env.unwrapped.max_length
    assert max_length < MEGABYTE
    for name, shape in SHAPES.items():
        # Over-long: refused before parsing, ends the episode with reward 0.
        env.reset(seed=0)
        action = shape(MEGABYTE)
        obs, reward, terminated, truncated, info = _step_or_fail(env, action, f"{env_id} {name} 1 MB")
        assert info["status"] is Status.TOO_LONG, (name, info["status"])
        assert (reward, terminated, info["correct"]) == (0.0, True, False), name
        # At the bound: the real parser and judge, a documented status, a reply the space holds.
        env.reset(seed=0)
        action = shape(max_length)
        assert max_length // 2 < len(action) <= max_length, name
        obs, reward, terminated, truncated, info = _step_or_fail(env, action, f"{env_id} {name} {len(action)} chars")
        assert info["status"] in set(Status) and info["status"] is not Status.TOO_LONG, (name, info["status"])
        assert isinstance(reward, float) and env.observation_space.contains(obs), name
    env.close()


#: Envs that refuse, inside their judge, an answer their own bound accepts (to be fixed there).
REFUSED_WITHIN_THE_BOUND: dict[str, str] = {}


@pytest.mark.parametrize("env_id", [
    pytest.param(i, marks=pytest.mark.xfail(strict=True, reason=REFUSED_WITHIN_THE_BOUND[i]))
    if i in REFUSED_WITHIN_THE_BOUND else i
    for i in ALL_ENV_IDS + REASONING_GYM_DEFAULT
])
def test_every_env_survives_hostile_actions(env_id):
    _hostile_episode_checks(env_id)


@pytest.mark.heavy
@pytest.mark.parametrize("env_id", [i for i in REASONING_GYM_ALL if i not in REASONING_GYM_DEFAULT])
def test_every_reasoning_gym_id_survives_hostile_actions(env_id):
    _hostile_episode_checks(env_id)


def test_too_long_on_a_later_turn_ends_the_episode():
    env = gym.make("Wordle-v0")
    env.reset(seed=0)
    _, _, terminated, _, info = env.step("crane")
    assert not terminated
    action = "a" * (env.unwrapped.max_length + 1)
    obs, reward, terminated, truncated, info = env.step(action)
    assert (obs, reward, terminated, truncated, info["status"]) == ("", 0.0, True, False, Status.TOO_LONG)
    assert info["messages"][-1] == {"role": "assistant", "content": action}  # the transcript stays faithful
    assert "max_length" in info["feedback"]


def test_an_action_of_exactly_max_length_is_judged():
    env = gym.make("MathReason-v0", max_length=64)
    env.reset(seed=0)
    _, _, _, _, info = env.step("x" * 64)
    assert info["status"] is not Status.TOO_LONG


def test_too_long_is_a_model_outcome():
    assert Status.TOO_LONG == "too_long" and not Status.TOO_LONG.is_infra_failure


# -- the parsers of model text, fed a megabyte of each shape ----------------------------

PARSERS: dict[str, Callable[[str], object]] = {
    "find_tool_calls": find_tool_calls,
    "parse_tool_call": parse_tool_call,
    "extract_code": extract_code,
    "extract_code_entry_point": lambda text: extract_code(text, "solve"),
    "arithmetic_consistency": lambda text: arithmetic_consistency("", [text]),
    "extract_answer": extract_answer,
    "boxed_contents": boxed_contents,
    "extract_tagged_answer": extract_tagged_answer,
}


@pytest.mark.parametrize("parser", PARSERS)
def test_parsers_are_linear_on_a_megabyte(parser):
    parse = PARSERS[parser]
    slow = []
    for name, shape in SHAPES.items():
        text = shape(MEGABYTE)
        budget = max(MANY_BLOCKS.get(name, PARSER_BUDGET_S), LINEAR_BEFORE.get(parser, PARSER_BUDGET_S))
        best = float("inf")
        for _ in range(3):
            with _deadline(HANG_S, f"{parser} on {name}"):
                start = time.perf_counter()
                parse(text)
                best = min(best, time.perf_counter() - start)
            if best < budget:
                break
        if best >= budget:
            slow.append(f"{name}: {best:.3f} s")
    assert not slow, f"{parser} is slow on a megabyte: {slow}"


def test_linear_block_finders_read_what_the_regexes_read():
    text = 'a<tool_call> {"name": "python", "arguments": {"code": "1"}} </tool_call>b<tool_call>x</tool_call><tool_call>'
    assert [(c.start, c.end, c.name, c.arguments, bool(c.error)) for c in find_tool_calls(text)] == [
        (1, 72, "python", {"code": "1"}, False), (73, 97, "", {}, True),
    ]
    assert parse_tool_call("<python>1</python><python>2</python><python>3") == ("2", "<python>3", "")
    assert extract_code("``` python extra\nx = 1\n```\n```js\ny\n```") == "x = 1\n"
    assert extract_code("text ```python3\nopen fence") == "open fence"
    assert extract_code("```` `\ncode```") == "code"
    assert arithmetic_consistency("", ["12 + 30 = 42, 1.5*2=3 and 7 - 1 = 5"]) == 2 / 3


def test_code_reward_refuses_an_over_long_completion_before_parsing():
    reward = CodeTestsReward(max_completion_chars=1000)
    with _deadline(HANG_S, "CodeTestsReward on 1 MB"):
        result = reward.score("`" * MEGABYTE, [TestCase("t", "assert", "assert f() == 1")])
    assert result.status is Status.TOO_LONG and result.score == 0.0


# -- ReasoningGym-v0: an exception the scorer raises on the answer is the answer's --------

#: Answers that make some reasoning-gym scorers raise (int("[[[["), a float overflow, an int
#: past Python's digit limit), on tasks whose scorer does.
SCORER_BREAKERS = [
    ("prime_factorization", "[[[["),
    ("prime_factorization", "9" * 5000),
    ("prime_factorization", "{" * 3000),
    ("coin_flip", "1e999999"),
    ("boxnet", "1e999999"),
]


@pytest.mark.parametrize(("task", "answer"), SCORER_BREAKERS)
def test_an_answer_the_scorer_raises_on_is_wrong_not_infra(task, answer):
    env = gym.make("ReasoningGym-v0", task=task, size=5)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(f"<answer>{answer}</answer>")
    assert info["status"] is Status.WRONG and reward == 0.0 and terminated, info.get("error")
    assert info["scorer_error"]  # what the scorer raised, for whoever reads the logs
    assert not info["status"].is_infra_failure


@pytest.mark.parametrize("score_timeout", [10.0, None])  # in a forked child, and in this process
def test_a_scorer_that_fails_on_the_reference_too_is_infra(monkeypatch, score_timeout):
    env = gym.make("ReasoningGym-v0", task="basic_arithmetic", size=5, score_timeout=score_timeout)
    env.reset(seed=0)
    dataset = env.unwrapped.dataset

    def broken(answer, entry):
        raise ImportError("a dependency of the scorer is missing")

    monkeypatch.setattr(dataset, "score_answer", broken)
    _, reward, _, _, info = env.step("<answer>42</answer>")
    assert info["status"] is Status.ERROR and reward == 0.0
    assert "reference answer" in info["error"] and "ImportError" in info["scorer_error"]
