"""A PRM directory as MathStep-v0's process reward, scored for a whole vector step at once: one call of
the model's scorer per step, in padded passes of at most its ``batch_size`` rows, and the same rewards,
to float tolerance, as each env scoring its own steps alone (one pass per env and turn)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mathgym  # noqa: F401
from mathgym.agents.prm_model import PRM
from mathgym.envs.ahead import score_step_ahead
from mathgym.rewards.prm import PRMSettings, write_prm_settings

ENVS = 12  # more than load_prm's default batch_size of 8: the rows of a step go through in two passes
STEPS = ["First I add 12 and 30.", "That gives 42 in all", "Then I check it once more, digit by digit.",
         "Carry the one.", "So 4 tens and 2 ones."]


@pytest.fixture(scope="module")
def prm_dir(tmp_path_factory):
    """A random 2-layer token classifier over the tiny model's character tokenizer, with a separator."""
    from transformers import LlamaConfig, LlamaForTokenClassification

    from mathgym.agents.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, num_labels=2, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(7)
    path = tmp_path_factory.mktemp("prm") / "head"
    LlamaForTokenClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    write_prm_settings(path, PRMSettings(form="step_head", rule="min"))
    return path


def _play(envs, ahead: bool, turns: int = 3) -> list[list[float]]:
    """Every env steps its own action (of different lengths, so rows are padded) for ``turns`` turns."""
    envs.reset(seed=list(range(ENVS)))
    rewards = []
    for turn in range(turns):
        actions = [" ".join(STEPS[(turn + i + k) % len(STEPS)] for k in range(1 + i % 3)) for i in range(ENVS)]
        if ahead:
            assert score_step_ahead(envs, actions, range(ENVS)) == ENVS
        _, reward, _, _, infos = envs.step(np.array(actions, dtype=object))
        assert all(status != "error" for status in infos["status"])
        rewards.append(reward.tolist())
    return rewards


def test_a_vector_step_is_one_call_of_the_prm_with_the_scores_of_each_env_alone(prm_dir, monkeypatch):
    calls: list[int] = []
    passes: list[int] = []
    score_steps, forward = PRM.score_steps, PRM.step_probabilities

    def called(self, problems, steps):
        calls.append(len(problems))
        return score_steps(self, problems, steps)

    def counted(self, inputs):
        passes.append(len(inputs))
        return forward(self, inputs)

    monkeypatch.setattr(PRM, "score_steps", called)
    monkeypatch.setattr(PRM, "step_probabilities", counted)
    envs = gym.make_vec("MathStep-v0", num_envs=ENVS, vectorization_mode="sync", process_reward=str(prm_dir))
    batch_size = envs.envs[0].unwrapped.process_reward.prm.batch_size
    alone = _play(envs, ahead=False)
    assert calls == passes == [1] * (3 * ENVS)
    calls.clear()
    passes.clear()
    together = _play(envs, ahead=True)
    assert calls == [ENVS] * 3  # every env's steps of a vector step in one call
    assert passes == [batch_size, ENVS - batch_size] * 3  # padded passes of at most batch_size rows
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)
    assert len({round(r, 6) for turn in alone for r in turn}) > ENVS  # the random PRM tells the steps apart
    envs.close()
