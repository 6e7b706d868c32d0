"""Verifiers-v0 against the real verifiers (≥ 0.4, ``verifiers.v1``): a verifiers taskset and env as a
mathgym text env. The envs played are written for the tests on verifiers' own base classes
(tests/verifiers_fixture.py: single-turn sums with a ``@vf.reward`` rubric; tests/verifiers_fixture_game.py:
a multi-turn guessing game whose ``vf.Env.run`` is the user). verifiers' shipped tasksets need the network
(TextArena's download NLTK data; OpenEnv's and NeMo-Gym's start servers), so none of them runs here.

verifiers pins ``mcp==2.0.0`` and ``openai<3``: CI runs this file in the verifiers venv layered over the
main one (.ci/run); where verifiers is not importable, only the install message is tested.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the ids
from mathgym.errors import ConfigError
from mathgym.registry import catalogue_entry

TESTS = Path(__file__).resolve().parents[1]
SUMS = "tests.verifiers_fixture:SumTaskset"


def test_without_verifiers_the_message_says_how_to_install_it():
    code = (
        "import sys; sys.modules['verifiers'] = None; sys.modules['verifiers.v1'] = None\n"
        "import gymnasium as gym, mathgym\n"
        "try:\n    gym.make('Verifiers-v0', env='any-taskset')\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=TESTS.parent).stdout
    assert out.startswith("ConfigError Verifiers-v0 needs verifiers>=0.4: pip install") and "[verifiers]" in out


def test_the_id_is_in_the_catalogue_with_its_facts():
    entry = catalogue_entry("Verifiers-v0")
    assert entry is not None and entry.facts is not None
    assert (entry.facts.extra, entry.facts.turns) == ("verifiers", "multi")


try:
    import verifiers.v1 as vf
except ImportError:  # the main venv: the tests below run in the verifiers venv (.ci/run)
    vf = None
needs_verifiers = pytest.mark.skipif(vf is None, reason="verifiers>=0.4 is an optional extra (mathgym[verifiers]), in its own venv")


@pytest.fixture
def tests_on_path(monkeypatch):
    """tests/ on sys.path: the fixtures import as top-level packages, as verifiers' loader wants an id."""
    monkeypatch.syspath_prepend(str(TESTS))


def make(env, **kwargs):
    return gym.make("Verifiers-v0", env=env, **kwargs)


@needs_verifiers
def test_the_taskset_id_goes_through_verifiers_own_loader(tests_on_path):
    from verifiers.v1.utils.loaders import load_environment, resolve_env_config

    env = make("verifiers-fixture", taskset_kwargs={"num_tasks": 3})
    own = load_environment(resolve_env_config({"taskset": {"id": "verifiers-fixture", "num_tasks": 3}}))
    tasks = list(own.taskset)
    assert len(env.unwrapped.tasks) == 3
    for i, task in enumerate(tasks):
        obs, info = env.reset(options={"task_index": i})
        assert obs == task.data.prompt and info["task_id"] == task.data.id
        assert info["messages"] == [{"role": "system", "content": task.data.system_prompt}, {"role": "user", "content": task.data.prompt}]
        assert "answer" not in info


@needs_verifiers
@pytest.mark.parametrize("given", ["path", "class", "object"])
def test_a_taskset_given_as_a_path_a_class_or_an_object_plays_the_same(given):
    from tests.verifiers_fixture import SumConfig, SumTaskset

    env = make({"path": SUMS, "class": SumTaskset, "object": SumTaskset(SumConfig())}[given])
    obs, info = env.reset(options={"task_index": 4})
    assert (obs, info["task_id"]) == ("What is 4 + 9? End with the number.", "sum-4")
    _, reward, terminated, truncated, info = env.step("So it is 13")
    assert (reward, terminated, truncated, info["status"], info["correct"], info["answer"]) == (1.0, True, False, "correct", True, "13")
    assert info["reward_breakdown"] == {"exact": 1.0} and info["verifiers_metrics"] == {"reply_chars": 11.0}


@needs_verifiers
def test_the_reward_is_the_rubric_on_the_episodes_trace():
    env = make(SUMS)
    env.reset(options={"task_index": 1})
    _, reward, _, _, info = env.step("it is 5")
    assert (reward, info["status"], info["correct"]) == (0.0, "wrong", False)
    assert info["verifiers_rewards"] == {"exact": 0.0} and info["stop_condition"] == "agent_completed"


@needs_verifiers
def test_the_same_seed_picks_the_same_task():
    first, second = make(SUMS), make(SUMS)
    for seed in (0, 3, 99):
        assert first.reset(seed=seed)[1]["task_id"] == second.reset(seed=seed)[1]["task_id"]
    with pytest.raises(ConfigError, match="task_index"):
        first.reset(options={"task_index": 5})


@needs_verifiers
def test_the_env_s_turns_are_the_observations_and_its_reward_comes_at_the_end(tests_on_path):
    env = make("verifiers-fixture-game", max_turns=8)
    obs, info = env.reset(options={"task_index": 0})  # the secret is 4
    assert obs == "Guess my number from 1 to 20. Reply with one number." and info["max_turns"] == 8
    seen = [env.step(guess)[:4] for guess in ("10", "two", "2")]
    assert seen == [("lower", 0.0, False, False), ("That is not a number. Guess again.", 0.0, False, False), ("higher", 0.0, False, False)]
    _, reward, terminated, truncated, info = env.step(" 4\n")
    assert (reward, terminated, truncated, info["status"]) == (1.0, True, False, "correct")
    # The env's own reward (solved) and the task's rubric (efficiency, weight 0) are both on the trace.
    assert info["verifiers_rewards"] == {"solved": 1.0, "efficiency": 0.25}
    assert [m["role"] for m in info["messages"]] == ["user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant"]


@needs_verifiers
def test_the_turn_budget_truncates_and_the_run_is_scored_as_it_stands(tests_on_path):
    env = make("verifiers-fixture-game", max_turns=2)
    env.reset(options={"task_index": 0})
    assert env.step("1")[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step("2")
    assert (reward, terminated, truncated, info["status"], info["stop_condition"]) == (0.0, False, True, "wrong", "max_turns")


@needs_verifiers
def test_a_scorer_the_reply_breaks_is_the_reply_s_fault_not_infrastructure():
    env = make(SUMS, taskset_kwargs={"scorer_fails": "on_word"})
    for reply in ("CRASH", "CRASH 1", "the answer is CRASH"):
        env.reset(options={"task_index": 0})
        _, reward, terminated, _, info = env.step(reply)
        assert (reward, terminated, info["status"]) == (0.0, True, "wrong")
        assert "the scorer broke" in info["verifier_error"]


@needs_verifiers
def test_a_scorer_that_fails_on_the_reference_answer_too_is_infrastructure():
    env = make(SUMS, taskset_kwargs={"scorer_fails": "always"})
    for reply in ("1", "the answer is 1", ""):
        env.reset(options={"task_index": 0})
        _, reward, terminated, _, info = env.step(reply)
        assert (reward, terminated, info["status"]) == (0.0, True, "error")
        assert "reference answer too" in info["error"]


@needs_verifiers
def test_without_a_reference_answer_a_failing_scorer_is_never_infrastructure(tests_on_path, monkeypatch):
    import verifiers_fixture_game as game

    async def broken(self, trace):
        raise RuntimeError("the rubric broke")

    monkeypatch.setattr(game.GuessTask, "efficiency", vf.reward(weight=0.0)(broken))
    env = make("verifiers-fixture-game")
    env.reset(options={"task_index": 0})
    _, reward, terminated, _, info = env.step("4")
    assert (reward, terminated, info["status"]) == (0.0, True, "wrong")


@needs_verifiers
def test_a_scorer_past_its_time_is_a_timeout_when_the_reference_answer_scores(monkeypatch):
    import asyncio

    import tests.verifiers_fixture as sums

    original = sums.SumTask.exact

    async def slow_on_word(self, trace):
        if "HANG" in trace.last_reply:
            await asyncio.sleep(30)
        return await original(self, trace)

    monkeypatch.setattr(sums.SumTask, "exact", vf.reward(weight=1.0)(slow_on_word))
    env = make(SUMS, timeout_s=1.0)
    env.reset(options={"task_index": 0})
    _, reward, terminated, _, info = env.step("HANG")
    assert (reward, terminated, info["status"]) == (0.0, True, "timeout")
    env.reset(options={"task_index": 0})
    assert env.step("1")[4]["status"] == "correct"  # the loop is free again
    env.close()


@needs_verifiers
def test_a_copy_replays_the_episode_and_answers_the_same(tests_on_path):
    env = make("verifiers-fixture-game", max_turns=6)
    env.reset(options={"task_index": 1})  # the secret is 11
    env.step("5")
    env.step("15")
    clone = pickle.loads(pickle.dumps(env))
    assert env.step("11")[:4] == clone.step("11")[:4] == ("", 1.0, True, False)


@needs_verifiers
def test_gymnasium_check_env_and_mathgym_check_pass(tests_on_path):
    from mathgym.checks import run_checks

    from gymnasium.utils.env_checker import check_env

    for env_id_kwargs in ({"env": SUMS}, {"env": "verifiers-fixture-game", "max_turns": 4}):
        env = make(**env_id_kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=True)
        results = run_checks("Verifiers-v0", env_id_kwargs)
        assert [r.name for r in results if not r.passed] == [], results


@needs_verifiers
def test_what_it_cannot_play_is_refused_with_a_reason(tests_on_path):
    with pytest.raises(ConfigError, match="needs env="):
        gym.make("Verifiers-v0")
    with pytest.raises(ConfigError, match="seats 2 agents"):
        make("verifiers-fixture", env_kwargs={"id": "user-sim"})
    with pytest.raises(ConfigError, match="verifiers could not load it"):
        make("no-such-verifiers-taskset")
    with pytest.raises(ConfigError, match="neither a verifiers Env nor a Taskset"):
        make("tests.verifiers_fixture:SumData")


@needs_verifiers
def test_the_docs_example_runs(tmp_path):
    """docs/envs-in.md's Verifiers-v0 example (marked notest(tested) there: the main venv has no verifiers)."""
    page = (TESTS.parent / "docs" / "envs-in.md").read_text()
    marker = page.index("notest(tested): tests/envs/test_env_verifiers.py::test_the_docs_example_runs")
    code = page[page.index("```python\n", marker) + len("```python\n"):]
    code = code[: code.index("\n```")]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "What is the capital of Japan? -> 1.0 correct"


@needs_verifiers
def test_a_prompt_of_several_messages_is_the_chat_prompt():
    class Data(vf.TaskData):
        answer: str

    class FewShot(vf.Task[Data]):
        @vf.reward(weight=1.0)
        async def exact(self, trace: vf.Trace) -> float:
            return float(trace.last_reply == self.data.answer)

    class Shots(vf.Taskset[FewShot, vf.TasksetConfig]):
        def load(self):
            prompt = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}, {"role": "user", "content": "3 + 3?"}]
            yield FewShot(Data(prompt=[vf.UserMessage(**prompt[0]), vf.AssistantMessage(**prompt[1]), vf.UserMessage(**prompt[2])],
                               system_prompt="Numbers only.", answer="6"), self.config.task)

    env = make(Shots(vf.TasksetConfig()))
    obs, info = env.reset(seed=0)
    assert obs == "2 + 2?\n\n4\n\n3 + 3?"
    assert info["messages"] == [{"role": "system", "content": "Numbers only."}, {"role": "user", "content": "2 + 2?"},
                                {"role": "assistant", "content": "4"}, {"role": "user", "content": "3 + 3?"}]
    assert env.step("6")[4]["status"] == "correct"
