"""The vLLM backend's weight sync, checked on CPU without vLLM: the names and values it pushes
(real models, real peft adapters) and when it pushes. vLLM itself is not installed here, so the
engine is stood in for by a function that records what its ``load_weights`` would receive; this
checks the mapping and the bookkeeping only, not vLLM."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.backends import WeightSync, vllm_weights  # noqa: E402
from mathgym.agents.policy import LLMPolicy, LoraSettings  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def test_full_model_weights_keep_their_checkpoint_names(model_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    pushed = dict(vllm_weights(policy.model))
    assert pushed.keys() == policy.model.state_dict().keys()
    assert "model.layers.0.self_attn.q_proj.weight" in pushed


def test_lora_weights_are_merged_under_the_base_names(model_path):
    torch.manual_seed(0)
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu", lora=LoraSettings(r=4, target_modules=("q_proj", "v_proj")))
    with torch.no_grad():  # a trained adapter: B is no longer zero
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    base_names = set(LLMPolicy.from_pretrained(str(model_path), device="cpu").model.state_dict())
    pushed = dict(vllm_weights(policy.model))
    assert set(pushed) == base_names  # no peft prefixes, no lora_ factors, no base_layer
    merged = copy.deepcopy(policy.model).merge_and_unload().state_dict()
    for name, value in pushed.items():
        assert torch.allclose(value, merged[name], atol=1e-6), name
    q = "model.layers.0.self_attn.q_proj.weight"
    unmerged = policy.model.get_base_model().get_submodule("model.layers.0.self_attn.q_proj").base_layer.weight
    assert not torch.allclose(pushed[q], unmerged)  # the adapter is in the pushed weight...
    assert not any(getattr(m, "merged", False) for m in policy.model.modules())  # ...and the policy was not modified


def test_weights_are_pushed_after_each_optimizer_step_and_on_resume(model_path, tmp_path):
    config = GRPOConfig(
        model=str(model_path), env=register_guess_env(), env_kwargs={"high": 2, "max_turns": 1}, steps=1, num_tasks=2,
        group_size=2, max_new_tokens=4, eval_tasks=0, save_every=0, progress=False, run_dir=str(tmp_path / "run"), lora_r=4,
    )
    trainer = GRPOTrainer(config)
    pushes: list[dict[str, torch.Tensor]] = []
    sync = WeightSync(trainer.policy, lambda weights: pushes.append({k: v.clone() for k, v in weights}))
    assert sync() and not sync()  # the first call pushes; nothing changed since
    batch = trainer.source.make_batch(0)[0]
    assert not sync()  # sampling changes nothing
    logprobs, _ = trainer.policy.token_logprobs(batch.input_ids, batch.attention_mask)
    trainer.loop.backward(-(logprobs * batch.action_mask).sum())
    trainer.loop.optimizer_step()
    trainer.step = 1
    trainer.save()
    assert sync() and len(pushes) == 2
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(pushes[0][q], pushes[1][q])  # the trained adapter, merged
    resumed = GRPOTrainer(config)
    sync = WeightSync(resumed.policy, lambda weights: pushes.append({k: v.clone() for k, v in weights}))
    sync()
    assert resumed.resume() and sync()  # loading a checkpoint changes the weights: pushed again
    assert torch.equal(pushes[-1][q], pushes[1][q])
