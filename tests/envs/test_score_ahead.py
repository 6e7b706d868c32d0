"""A vector env's step scored in one batch (mathgym.envs.ahead): the same rewards, statuses and
infos as each env scoring alone; one call of the scorer per step; a request the env does not
make in the end (a wrapper changed the action, a repeated step) changes nothing; a failing
batch leaves each env to meet the error itself."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import mathgym  # noqa: F401
from mathgym.envs.ahead import batch_key, score_step_ahead
from mathgym.rewards.base import Status
from mathgym.rewards.prm import PRMError, PRMProcessReward
from tests.trainkit import record_calls

STEPS = ["First I add 12 and 30.", "That gives 42 in all.", "Then I check it once more."]


class _Counting:
    """A step scorer whose scores depend on the text alone; it records the size of every call."""

    def __init__(self, fail_batches: bool = False):
        self.calls: list[int] = []
        self.fail_batches = fail_batches

    def score_steps(self, problems, steps):
        self.calls.append(len(problems))
        if self.fail_batches and len(problems) > 1:
            raise PRMError("the batch ran out of memory")
        return [[(sum(map(ord, s)) % 97) / 97 for s in solution] for solution in steps]


def _vector(scorer, num_envs=4, **kwargs):
    reward = PRMProcessReward(scorer, "min")
    return gym.make_vec("MathStep-v0", num_envs=num_envs, vectorization_mode="sync", process_reward=reward, **kwargs)


def _play(envs, turns, ahead: bool):
    """Step every env with its own action for ``turns`` turns; the rewards, statuses and process infos."""
    envs.reset(seed=[3, 3, 8, 9][: envs.num_envs])
    seen = []
    for turn in range(turns):
        actions = [STEPS[(turn + i) % len(STEPS)] + " " * i for i in range(envs.num_envs)]
        if ahead:
            assert score_step_ahead(envs, actions, range(envs.num_envs)) == envs.num_envs
        _, rewards, _, _, infos = envs.step(np.array(actions, dtype=object))
        seen.append((rewards.tolist(), list(infos["status"]), list(infos["reward_breakdown"])))
    return seen


def test_a_step_scored_ahead_is_the_step_scored_alone_in_one_call_of_the_model():
    alone, together = _Counting(), _Counting()
    expected = _play(_vector(alone), 3, ahead=False)
    assert alone.calls == [1] * 12
    assert _play(_vector(together), 3, ahead=True) == expected
    assert together.calls == [4, 4, 4]  # one batch per step, no call of its own after it


def test_a_request_the_env_does_not_make_in_the_end_changes_nothing():
    scorer = _Counting()
    envs = _vector(scorer, num_envs=2)
    envs.reset(seed=[1, 2])
    score_step_ahead(envs, [STEPS[0], STEPS[1]], [0, 1])
    # a wrapper (here: the caller) changed env 0's action: it scores its own; env 1 takes the batch's
    _, rewards, _, _, infos = envs.step(np.array([STEPS[2], STEPS[1]], dtype=object))
    assert scorer.calls == [2, 1]
    alone = _vector(_Counting(), num_envs=2)
    alone.reset(seed=[1, 2])
    _, expected, _, _, _ = alone.step(np.array([STEPS[2], STEPS[1]], dtype=object))
    assert rewards.tolist() == expected.tolist()
    # results are kept for one step only: the next step of env 1 scores again
    envs.step(np.array([STEPS[0], STEPS[0]], dtype=object))
    assert scorer.calls == [2, 1, 1, 1]
    # a repeated step is not paid, whatever was scored ahead for it
    score_step_ahead(envs, [STEPS[0], STEPS[1]], [0, 1])
    _, rewards, _, _, infos = envs.step(np.array([STEPS[0], STEPS[1]], dtype=object))
    assert rewards[0] == 0.0 and infos["process_zeroed"][0] == "the step repeats an earlier one"


def test_a_failing_batch_leaves_each_env_to_meet_the_error_as_an_infrastructure_status():
    scorer = _Counting(fail_batches=True)
    envs = _vector(scorer, num_envs=3)
    envs.reset(seed=[1, 2, 3])
    assert score_step_ahead(envs, STEPS, [0, 1, 2]) == 0
    _, rewards, _, _, infos = envs.step(np.array(STEPS, dtype=object))
    assert scorer.calls == [3, 1, 1, 1]  # the batch failed; each env then scored alone (and succeeded)
    assert list(infos["status"]) == [Status.IN_PROGRESS] * 3

    class _Broken(_Counting):
        def score_steps(self, problems, steps):
            raise PRMError("CUDA out of memory")

    envs = _vector(_Broken(), num_envs=2)
    envs.reset(seed=[1, 2])
    score_step_ahead(envs, STEPS[:2], [0, 1])
    _, rewards, _, _, infos = envs.step(np.array(STEPS[:2], dtype=object))
    assert rewards.tolist() == [0.0, 0.0] and list(infos["status"]) == [Status.ERROR, Status.ERROR]
    assert all("CUDA out of memory" in e for e in infos["process_reward_error"])


def test_a_step_no_score_can_be_read_of_is_the_error_it_is_alone():
    class _Unseen(_Counting):
        def score_steps(self, problems, steps):
            super().score_steps(problems, steps)
            return [[float("nan")] * len(s) for s in steps]

    envs = _vector(_Unseen(), num_envs=2)
    envs.reset(seed=[1, 2])
    assert score_step_ahead(envs, STEPS[:2], [0, 1]) == 2
    _, rewards, _, _, infos = envs.step(np.array(STEPS[:2], dtype=object))
    assert list(infos["status"]) == [Status.ERROR, Status.ERROR] and "no finite step score" in infos["process_reward_error"][0]


def test_only_scorers_of_one_model_and_rule_share_a_batch_and_other_vector_envs_are_left_alone():
    prm = _Counting()
    assert batch_key(PRMProcessReward(prm, "min")) == batch_key(PRMProcessReward(prm, "min"))
    assert batch_key(PRMProcessReward(prm, "min")) != batch_key(PRMProcessReward(prm, "last"))
    assert batch_key(PRMProcessReward(_Counting(), "min")) != batch_key(PRMProcessReward(prm, "min"))
    envs = gym.make_vec("MathStep-v0", num_envs=2, vectorization_mode="sync")  # no process reward: nothing to batch
    envs.reset(seed=[1, 2])
    assert score_step_ahead(envs, STEPS[:2], [0, 1]) == 0
    assert score_step_ahead(object(), ["a"], [0]) == 0  # not a synchronous vector env: nothing


def test_math_answers_of_a_step_are_verified_in_one_batch_with_the_verdicts_of_one_by_one(monkeypatch):
    from mathgym.rewards.math import MathVerifier

    batches = record_calls(monkeypatch, MathVerifier, "score_batch")
    assert batch_key(MathVerifier()) == batch_key(MathVerifier()) != batch_key(MathVerifier(answer_extraction="lenient"))
    actions = ["85 + 63 = 148, so \\boxed{148}", "\\boxed{\\frac{1}{2}}", "no answer", "\\boxed{x^2 + \\sqrt{2}}"]

    def play(ahead: bool, env_id: str):
        envs = gym.make_vec(env_id, num_envs=4, vectorization_mode="sync")
        envs.reset(seed=[0, 1, 2, 3])
        batches.clear()
        scored = score_step_ahead(envs, actions, range(4)) if ahead else 0
        _, rewards, _, _, infos = envs.step(np.array(actions, dtype=object))
        return scored, list(batches), rewards.tolist(), list(infos["status"]), list(infos["extracted_answer"])

    together, alone = play(True, "MathReason-v0"), play(False, "MathReason-v0")
    assert together[:2] == (4, [4]) and alone[:2] == (0, [])  # verified ahead, and never again one by one
    assert together[2:] == alone[2:] and alone[2][0] == 1.0 and alone[3][2] == Status.UNPARSEABLE
    together, alone = play(True, "MathStep-v0"), play(False, "MathStep-v0")  # only the final answers are verified
    assert together[:2] == (3, [3]) and together[2:] == alone[2:]


@pytest.mark.parametrize("action", [123, "x" * 101])
def test_an_action_the_env_refuses_asks_nothing_ahead(action):
    env = gym.make("MathStep-v0", process_reward=PRMProcessReward(_Counting(), "min"), max_length=100)
    assert env.unwrapped.requests_ahead(action) == []  # before reset
    env.reset(seed=0)
    assert env.unwrapped.requests_ahead(action) == []
    assert len(env.unwrapped.requests_ahead(STEPS[0])) == 1


def test_code_envs_grade_a_step_s_programs_side_by_side_with_the_verdicts_of_one_by_one(monkeypatch):
    import mathgym.envs.coding.code as code

    graded = record_calls(monkeypatch, code, "grade", lambda args: args[1])

    def play(ahead: bool):
        envs = gym.make_vec("CodeSandbox-v0", num_envs=4, vectorization_mode="sync", level=0)
        envs.reset(seed=[1, 1, 2, 3])
        experts = envs.call("expert_action")
        actions = [experts[0], "```python\ndef nothing():\n    return 1\n```", experts[2], ""]
        scored = score_step_ahead(envs, actions, range(4)) if ahead else 0
        _, rewards, _, _, infos = envs.step(np.array(actions, dtype=object))
        envs.close()
        return scored, rewards.tolist(), list(infos["status"]), list(infos["passed"])

    graded.clear()
    scored, *together = play(True)
    assert scored == 4 and len(graded) == 4  # graded ahead, and not again by the envs' own steps
    graded.clear()
    _, *alone = play(False)
    assert len(graded) == 4 and together == alone
    rewards, statuses, _ = alone
    assert rewards == [1.0, 0.0, 1.0, 0.0] and statuses[0] == Status.CORRECT and statuses[3] == Status.UNPARSEABLE


def test_a_step_s_answers_go_to_the_llm_judge_in_one_batch_and_come_back_as_alone(monkeypatch):
    from mathgym.rewards.judge import LLMJudge
    from tests.judge_server import fixture_judge_url

    def play(ahead: bool):
        envs = gym.make_vec("OpenQA-v0", num_envs=4, vectorization_mode="sync", judge_url=fixture_judge_url(),
                            judge_model="fixture-judge", judge_options={"cache_size": 0})
        envs.reset(seed=[0, 0, 1, 2])
        experts = envs.call("expert_action")
        actions = [f"In short: {experts[0]}", "I am not sure, maybe forty-two.", experts[2], "  "]
        batches.clear()
        if ahead:
            assert score_step_ahead(envs, actions, range(4)) == 3  # the blank answer asks the judge nothing
        _, rewards, _, _, infos = envs.step(np.array(actions, dtype=object))
        return list(batches), rewards.tolist(), list(infos["status"]), list(infos["judge"])

    batches = record_calls(monkeypatch, LLMJudge, "score_batch")
    together, alone = play(True), play(False)
    assert together[0] == [3] and alone[0] == [1, 1, 1]  # each env's judge is its own, one endpoint: one batch
    assert together[1:] == alone[1:] and alone[1][0] == 1.0 and alone[2][3] == Status.UNPARSEABLE


def test_math_tool_runs_a_step_s_code_side_by_side_with_the_outputs_of_one_by_one(monkeypatch):
    from mathgym.rewards.sandbox import CodeSandbox

    runs = record_calls(monkeypatch, CodeSandbox, "run", lambda args: args[0])
    actions = ["<python>print(6 * 7)</python>", "<python>print(sum(range(5)))</python>", "So \\boxed{3}.",
               "<python>print(1/0)</python>", "<python>def (:</python>"]

    def play(ahead: bool):
        envs = gym.make_vec("MathTool-v0", num_envs=5, vectorization_mode="sync")
        envs.reset(seed=[1, 2, 3, 4, 5])
        runs.clear()
        scored = score_step_ahead(envs, actions, range(5)) if ahead else 0
        obs, rewards, _, _, infos = envs.step(np.array(actions, dtype=object))
        envs.close()
        return scored, len(runs), list(obs), rewards.tolist(), list(infos["status"])

    together, alone = play(True), play(False)
    assert together[:2] == (3, 3) and alone[:2] == (0, 3)  # an answer and a syntax error run nothing
    assert together[2:] == alone[2:]
    assert "42" in alone[2][0] and "ZeroDivisionError" in alone[2][3]


def test_a_ray_actor_scores_the_steps_it_holds_in_one_batch():
    pytest.importorskip("ray")
    from mathgym.integrations.ray import _EnvHost

    scorer = _Counting()
    host = _EnvHost()  # the actor's class, here in this process
    slots = [("v", i) for i in range(3)]
    host.make(slots, gym.spec("MathStep-v0"), {"process_reward": PRMProcessReward(scorer, "min")})
    host.run([(slot, "reset", (i, None)) for i, slot in enumerate(slots)])
    out = host.run([(slot, "step", STEPS[i]) for i, slot in enumerate(slots)])
    assert scorer.calls == [3] and [o[4]["status"] for o in out] == [Status.IN_PROGRESS] * 3


def test_a_reward_model_wrapper_scores_a_step_s_final_actions_in_one_batch():
    from mathgym.envs.wrappers import RewardModelBonus
    from mathgym.rewards.base import RewardResult

    class _LengthModel:
        def __init__(self):
            self.batches: list[int] = []

        def score_batch(self, completions, references):
            self.batches.append(len(completions))
            return [RewardResult(len(c) / 100, Status.CORRECT) for c in completions]

    def play(ahead: bool, env_id: str, turns: int, **wrapper):
        model = _LengthModel()
        envs = gym.vector.SyncVectorEnv([lambda: RewardModelBonus(gym.make(env_id), model, coef=0.5, **wrapper)] * 3)
        envs.reset(seed=[1, 2, 3])
        seen = []
        for turn in range(turns):
            actions = [f"I guess {turn * 10 + i}" for i in range(3)]
            scored = score_step_ahead(envs, actions, range(3)) if ahead else 0
            _, rewards, _, _, infos = envs.step(np.array(actions, dtype=object))
            seen.append((scored, rewards.tolist(), list(infos["rm_status"]) if "rm_status" in infos else None))
        return model.batches, seen

    batches, together = play(True, "MathReason-v0", 1)
    assert batches == [3] and together[0][0] == 6  # the reward model's 3 and the verifier's 3
    batches, alone = play(False, "MathReason-v0", 1)
    assert batches == [1, 1, 1] and [s[1:] for s in alone] == [s[1:] for s in together]
    # final-only on a multi-turn env: nothing is asked ahead before the last turn; every step, all
    batches, together = play(True, "GuessNumber-v0", 2)
    assert batches == [] and [s[0] for s in together] == [0, 0]
    batches, together = play(True, "GuessNumber-v0", 2, when="every_step")
    assert batches == [3, 3] and [s[0] for s in together] == [3, 3]
    assert play(False, "GuessNumber-v0", 2, when="every_step")[1] == [(0, *s[1:]) for s in together]


def test_repo_repair_runs_a_step_s_commands_and_submissions_side_by_side_as_one_by_one(monkeypatch):
    from mathgym.rewards.sandbox import CodeSandbox

    jobs = record_calls(monkeypatch, CodeSandbox, "run_with_lines", lambda args: "command")
    graded = record_calls(monkeypatch, CodeSandbox, "run_tests", lambda args: "grade")
    actions = ["<test/>", "<run>python -c 'print(6 * 7)'</run>", "<submit/>", "<read path=README.md/>", "<run>  </run>"]

    def play(ahead: bool):
        envs = gym.make_vec("RepoRepair-v0", num_envs=5, vectorization_mode="sync")
        envs.reset(seed=[1, 2, 3, 4, 5])
        jobs.clear(), graded.clear()
        scored = score_step_ahead(envs, actions, range(5)) if ahead else 0
        obs, rewards, terminated, _, infos = envs.step(np.array(actions, dtype=object))
        envs.close()
        return scored, len(jobs), len(graded), list(obs), rewards.tolist(), terminated.tolist(), list(infos["status"])

    together, alone = play(True), play(False)
    assert together[:3] == (3, 2, 1) and alone[:3] == (0, 2, 1)  # each job run once; a read and an empty run run nothing
    assert together[3:] == alone[3:]
    assert "42" in alone[3][1] and alone[5][2] is True


def test_an_env_whose_requests_cannot_be_read_ahead_steps_as_it_would_alone():
    envs = _vector(_Counting(), num_envs=2)
    envs.reset(seed=[1, 2])
    inner = envs.envs[0].unwrapped

    def broken(action):
        raise RuntimeError("a plugin's bug")

    inner._requests_ahead = broken
    assert score_step_ahead(envs, STEPS[:2], [0, 1]) == 0  # one request left: nothing to batch, nothing raised
    _, rewards, _, _, infos = envs.step(np.array(STEPS[:2], dtype=object))
    assert list(infos["status"]) == [Status.IN_PROGRESS] * 2 and all(r > 0 for r in rewards)
