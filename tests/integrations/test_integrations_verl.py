"""verl's own agent-loop classes driving mathgym envs (skipped where verl is not installed).

verl 0.9.1 pins ``transformers<5.11``, so it cannot share CI's main environment; CI runs
this file in a second environment (see ``.ci/run``). The one stand-in is the LLM server:
verl's ``server_manager`` is a vLLM/SGLang HTTP client, replaced here by a local manager
with the same ``generate`` signature that samples with the tiny Hugging Face model.
"""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest

pytest.importorskip("verl.experimental.agent_loop.agent_loop", reason="verl is not installed (pip install 'mathgym[verl]' in its own environment)")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, DictConfigWrap, _agent_loop_registry  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

import mathgym  # noqa: E402,F401
from mathgym.integrations import verl as mg  # noqa: E402
from mathgym.rewards.math import MathVerifier  # noqa: E402

STEP_REWARDS: list[float] = []


class LocalServerManager:
    """verl's ``server_manager.generate`` contract, answered by mathgym's LLMPolicy on CPU."""

    def __init__(self, policy):
        self.policy = policy
        self.calls = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        from mathgym.agents.policy import SamplingParams

        self.calls += 1
        params = SamplingParams(temperature=sampling_params.get("temperature", 1.0), max_new_tokens=12)
        gen = self.policy.generate([prompt_ids], params)[0]
        return TokenOutput(token_ids=gen.token_ids, log_probs=gen.logprobs, stop_reason="completed")


class RecordingWrapper(gym.Wrapper):
    def step(self, action):
        out = super().step(action)
        STEP_REWARDS.append(float(out[1]))
        return out


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    from mathgym.agents.policy import LLMPolicy

    from mathgym.agents.tiny import build_tiny_model

    path = tmp_path_factory.mktemp("verl") / "m"  # tests.trainkit's small model (verl ships a top-level `tests`)
    model, tokenizer = build_tiny_model(hidden_size=32, num_layers=2)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return LLMPolicy.from_pretrained(str(path), device="cpu")


def make_loop(policy):
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 1024, "response_length": 512}}, "data": {}})
    cls = mg.MathgymAgentLoop
    return cls(trainer_config=DictConfigWrap(config), server_manager=LocalServerManager(policy), tokenizer=policy.tokenizer,
               processor=None, dataset_cls=None, data_config=DictConfigWrap(config.data))


def test_registered_as_mathgym():
    assert mg.MathgymAgentLoop.__name__ == "MathgymAgentLoop"  # looked up as verl's `_target_` does: built, registered
    assert _agent_loop_registry["mathgym"] == {"_target_": "mathgym.integrations.verl.MathgymAgentLoop"}


@pytest.mark.parametrize(("env_id", "env_kwargs"), [("MathReason-v0", {}), ("GuessNumber-v0", {"low": 1, "high": 3, "max_turns": 3})])
def test_agent_loop_plays_an_episode_with_verls_token_builder(policy, env_id, env_kwargs):
    rec_id = f"mathgym-tests/VerlRecorded{env_id}"
    if rec_id not in gym.registry:
        gym.register(rec_id, entry_point=lambda **kw: RecordingWrapper(gym.make(env_id, **kw)))
    async def play(row):
        loop = make_loop(policy)  # built inside the running event loop, as verl's worker does
        return await loop.run({"temperature": 1.0}, raw_prompt=row["prompt"], extra_info=row["extra_info"])

    for row in mg.verl_rows(rec_id, 4, env_kwargs=env_kwargs):
        STEP_REWARDS.clear()
        out = asyncio.run(play(row))
        assert isinstance(out, AgentLoopOutput)
        assert out.reward_score == pytest.approx(sum(STEP_REWARDS)), "reward_score is the env's return"
        turns = out.extra_fields["env_turns"]
        assert out.num_turns == 2 * turns and turns == len(STEP_REWARDS)
        assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
        assert out.prompt_ids == policy.chat.prompt_ids(row["prompt"])
        assert (0 in out.response_mask) == (turns > 1), "env replies are masked out, actions are not"
        if turns > 1:
            env_text = policy.tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if m == 0])
            assert "guesses left" in env_text
        assert out.as_dict()["rm_scores"].sum().item() == pytest.approx(out.reward_score)


@pytest.mark.skipif("answer_extraction" not in MathVerifier.__dataclass_fields__, reason="needs MathVerifier(answer_extraction=...)")
def test_compute_score_is_verls_reward_function_signature():
    assert mg.compute_score("openai/gsm8k", "so the answer is \\boxed{42}", "42") == 1.0
    assert mg.compute_score("openai/gsm8k", "The answer: 41", "42", extra_info={"split": "test"}) == 0.0
    assert mg.compute_score("openai/gsm8k", "Answer $42$", "42") == 1.0  # lenient: an unmarked final answer counts


class ScriptedServerManager:
    """A server that answers "1", "2", "3", ... in turn (with EOS): GuessNumber over 1..3 is always won."""

    def __init__(self, tokenizer):
        self.tokenizer, self.turn = tokenizer, 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        self.turn += 1
        ids = self.tokenizer(str(self.turn), add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def test_won_episode_reward_and_turns(policy):
    async def play(row):
        loop = make_loop(policy)
        loop.server_manager = ScriptedServerManager(policy.tokenizer)
        return await loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"])

    for row in mg.verl_rows("GuessNumber-v0", 3, env_kwargs={"low": 1, "high": 3, "max_turns": 3}):
        secret = gym.make("GuessNumber-v0", low=1, high=3, max_turns=3).unwrapped
        secret.reset(seed=row["extra_info"]["seed"])
        out = asyncio.run(play(row))
        turns = secret.task.metadata["secret"]
        assert out.reward_score == 1.0 and out.extra_fields["env_turns"] == turns and out.num_turns == 2 * turns
        assert out.extra_fields["env_status"] == "correct"
        assert sum(out.response_mask) == 2 * turns  # each action: one digit and EOS; env replies masked
        assert out.response_logprobs.count(-0.5) == 2 * turns
