"""RewardModel (a one-label sequence classifier) as a reward worker, a TRL reward function and an env bonus."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("torch")

import mathgym  # noqa: E402,F401
from mathgym.agents.reward_model import RewardModel  # noqa: E402
from mathgym.envs.wrappers import RewardModelBonus  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from mathgym.rewards import Status  # noqa: E402
from mathgym.rewards.judge import LLMJudge  # noqa: E402
from tests.chat_fixtures import cached_chat_model  # noqa: E402

PROMPTS = ["What is 2 + 3?", "What is 10 - 4?", "What is 7 * 6? Give the final answer in \\boxed{}."]
RESPONSES = ["5", "the answer is \\boxed{6}", "Let me compute 7 * 6 = 42 so the answer is \\boxed{42}."]


@pytest.fixture(scope="module")
def rm(tmp_path_factory):
    # a causal chat checkpoint loads with a fresh one-label head, as a reward model starts its training
    return RewardModel.from_pretrained(str(cached_chat_model(tmp_path_factory, "chatml")), device="cpu", batch_size=3)


def test_scores_are_the_same_batched_or_alone_and_through_the_chat_template(rm):
    together = rm.score_pairs(PROMPTS, RESPONSES)
    alone = [rm.score_pairs([p], [r])[0] for p, r in zip(PROMPTS, RESPONSES)]
    assert together == pytest.approx(alone, abs=1e-5)
    assert len(set(round(s, 6) for s in together)) == 3  # the response matters
    text = rm.tokenizer.decode(rm.encode(PROMPTS[0], RESPONSES[0]))
    assert "<|im_start|>user\nWhat is 2 + 3?<|im_end|>" in text and "<|im_start|>assistant\n5<|im_end|>" in text


def test_trl_reward_function_signature_with_text_and_conversations(rm):
    plain = rm(prompts=PROMPTS, completions=RESPONSES, answer=["5", "6", "42"])  # dataset columns come as keywords
    chats = rm(
        prompts=[[{"role": "user", "content": p}] for p in PROMPTS],
        completions=[[{"role": "assistant", "content": r}] for r in RESPONSES],
    )
    assert isinstance(plain, list) and all(isinstance(x, float) for x in plain)
    assert chats == pytest.approx(plain, abs=1e-5)
    with pytest.raises(ConfigError, match="2 prompts but 3"):
        rm(prompts=PROMPTS[:2], completions=RESPONSES)


def test_reward_worker_interface(rm):
    results = rm.score_batch([RESPONSES[0], None], [PROMPTS[0], {"prompt": PROMPTS[1]}])
    assert results[0].score == pytest.approx(rm.score_pairs([PROMPTS[0]], [RESPONSES[0]])[0], abs=1e-6)
    assert results[1].status is Status.UNPARSEABLE


def test_bonus_wrapper_adds_coef_times_score_on_math_reason(rm):
    env = RewardModelBonus(gym.make("MathReason-v0"), rm, coef=0.5)
    obs, _ = env.reset(seed=3)
    answer = env.unwrapped.task.answer
    action = f"so the answer is \\boxed{{{answer}}}"
    _, reward, terminated, _, info = env.step(action)
    score = rm.score_pairs([obs], [action])[0]
    assert terminated and info["rm_score"] == pytest.approx(score, abs=1e-5)
    assert info["reward_breakdown"]["rm"] == pytest.approx(0.5 * score, abs=1e-5)
    assert reward == pytest.approx(1.0 + 0.5 * score, abs=1e-5)
    assert info["status"] == "correct"


def test_bonus_from_a_failed_worker_adds_nothing():
    dead = LLMJudge("http://127.0.0.1:9/v1", "none", max_retries=0, timeout_s=0.5)
    env = RewardModelBonus(gym.make("MathReason-v0"), dead, coef=2.0)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("\\boxed{0}")
    assert info["rm_status"] == "error" and info["reward_breakdown"]["rm"] == 0.0
    assert reward == 0.0 and info["reward_breakdown"] == {"correctness": 0.0, "rm": 0.0}
    with pytest.raises(ConfigError, match="score_batch"):
        RewardModelBonus(gym.make("MathReason-v0"), object())
