"""Precision and devices: the device/dtype choice, bf16 and fp16 training on CPU, gradient checkpointing."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy, LoraSettings, Precision, pick_device, pick_precision  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402

CUDA = torch.device("cuda")
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def grpo(model_path, run_dir, **options) -> GRPOTrainer:
    defaults = dict(
        model=str(model_path), env=register_guess_env(), env_kwargs={"high": 2, "max_turns": 2}, steps=2, num_tasks=2,
        group_size=3, max_new_tokens=6, learning_rate=1e-2, beta=0.1, eval_tasks=0, save_every=0, progress=False,
        run_dir=str(run_dir), seed=5,
    )
    config = GRPOConfig(**{**defaults, **options})
    return GRPOTrainer(config)


def test_device_choice_without_a_gpu():
    assert pick_device("auto", cuda_available=True) == CUDA
    assert pick_device("auto", cuda_available=False) == CPU
    assert pick_device("cuda:1", cuda_available=True) == torch.device("cuda:1")
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        pick_device("cuda", cuda_available=False)
    with pytest.raises(ConfigError, match="not a torch device"):
        pick_device("gpu please", cuda_available=True)


def test_dtype_choice_without_a_gpu():
    assert pick_precision("auto", CUDA, bf16_supported=True) == Precision(torch.bfloat16)
    assert pick_precision("auto", CUDA, bf16_supported=False) == Precision(torch.float32)  # e.g. a T4: fp32 unless asked
    assert pick_precision("auto", CPU) == Precision(torch.float32)
    assert pick_precision("bfloat16", CPU) == Precision(torch.bfloat16)
    assert pick_precision("float16", CUDA) == Precision(torch.float32, torch.float16)  # fp32 master weights
    with pytest.raises(ConfigError, match="dtype='half'"):
        pick_precision("half", CPU)


def changed_weights(before: dict[str, torch.Tensor], model) -> int:
    return sum(not torch.equal(before[k], v) for k, v in model.state_dict().items() if k in before)


def test_bf16_grpo_steps_on_cpu(model_path, tmp_path):
    trainer = grpo(model_path, tmp_path / "run", dtype="bfloat16")
    params = trainer.policy.trainable_parameters()
    assert {p.dtype for p in params} == {torch.bfloat16}
    before = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    batch = trainer.source.make_batch(0)[0]
    assert batch.sampler_logprobs.dtype == torch.float32  # the sampler's log-softmax runs in fp32
    logprobs, _ = trainer.policy.token_logprobs(batch.input_ids, batch.attention_mask)
    assert logprobs.dtype == torch.float32
    trainer.train()
    records = [r for r in read_metrics(tmp_path / "run") if "loss/policy" in r]
    assert len(records) == 2
    for record in records:
        for key in ("loss/policy", "loss/kl", "loss/grad_norm"):
            assert torch.isfinite(torch.tensor(record[key])), (key, record)
    assert changed_weights(before, trainer.policy.model) > 0


def test_fp16_autocast_with_grad_scaler_on_cpu(model_path, tmp_path):
    trainer = grpo(model_path, tmp_path / "run", dtype="float16", lora_r=4, save_every=1, steps=1, max_new_tokens=4)
    assert trainer.loop.scaler.is_enabled() and trainer.policy.autocast_dtype == torch.float16
    assert {p.dtype for p in trainer.policy.trainable_parameters()} == {torch.float32}  # master weights
    with trainer.policy.autocast():
        logits = trainer.policy.model(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert logits.dtype == torch.float16
    before = {k: v.clone() for k, v in trainer.policy.model.state_dict().items()}
    trainer.train()
    records = [r for r in read_metrics(tmp_path / "run") if "loss/policy" in r]
    assert all("optim/grad_scale" in r for r in records) and torch.isfinite(torch.tensor(records[-1]["loss/policy"]))
    assert changed_weights(before, trainer.policy.model) > 0
    state = torch.load(tmp_path / "run" / "checkpoints" / "step-000001" / "state.pt", weights_only=False)
    assert state["scaler"]["scale"] == trainer.loop.scaler.get_scale()  # the scale is checkpointed and restored
    resumed = grpo(model_path, tmp_path / "run", dtype="float16", lora_r=4, save_every=1, steps=1, max_new_tokens=4)
    resumed.loop.scaler = torch.amp.GradScaler("cpu", init_scale=8.0)  # a different scale, that resume() must overwrite
    assert resumed.resume() and resumed.loop.scaler.get_scale() == trainer.loop.scaler.get_scale()


def count_layer_forwards(policy: LLMPolicy) -> int:
    """Forward calls of the first attention block during one training forward + backward (non-reentrant
    checkpointing stops recomputing once it has what the backward needs: the attention comes first)."""
    calls = []
    layer = next(m for n, m in policy.model.named_modules() if n.endswith("layers.0.self_attn"))
    handle = layer.register_forward_hook(lambda *args: calls.append(1))
    try:
        policy.model.train()
        ids = torch.tensor([[1, 5, 6, 7, 8, 2]])
        logprobs, _ = policy.token_logprobs(ids, torch.ones_like(ids))
        logprobs.sum().backward()
    finally:
        handle.remove()
    return len(calls)


@pytest.mark.parametrize("lora_r", [0, 4])
def test_gradient_checkpointing_recomputes_and_gives_the_same_gradients(model_path, lora_r):
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)  # the same LoRA initialisation
        policy = LLMPolicy.from_pretrained(
            str(model_path), lora=LoraSettings(r=lora_r), device="cpu", gradient_checkpointing=checkpointing
        )
        assert count_layer_forwards(policy) == (2 if checkpointing else 1)  # recomputed in the backward pass
        grads.append({n: p.grad.clone() for n, p in policy.model.named_parameters() if p.requires_grad})
        with torch.no_grad():  # generation still uses its KV cache in eval mode
            assert policy.model.training is True
            policy.model.eval()
            out = policy.model(input_ids=torch.tensor([[1, 5]]), use_cache=True)
            assert out.past_key_values is not None
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-6), name


def test_gradient_checkpointing_option_trains_like_without(model_path, tmp_path):
    runs = [grpo(model_path, tmp_path / f"gc-{flag}", gradient_checkpointing=flag, lora_r=4, steps=1) for flag in (False, True)]
    for trainer in runs:
        trainer.train()
    a, b = (read_metrics(tmp_path / f"gc-{flag}") for flag in (False, True))
    for ra, rb in zip(a, b):
        for key in ("loss/policy", "loss/kl", "rollout/reward"):
            if key in ra:
                assert ra[key] == pytest.approx(rb[key], rel=1e-4, abs=1e-6), key
    assert not runs[0].policy.model.get_base_model().get_submodule("model.layers.0").gradient_checkpointing
    assert runs[1].policy.model.get_base_model().get_submodule("model.layers.0").gradient_checkpointing


@pytest.mark.parametrize("saved_fused", [True, False])
def test_a_resumed_run_steps_with_the_optimizer_its_options_ask_for(model_path, tmp_path, saved_fused):
    # load_state_dict brings back the saved run's fused flag; the resumed run's fused_optimizer wins
    # (with a warning), under fp16's gradient scaler too.
    # a constant rate: under GRPO's decaying default the longer resumed run would warn of its schedule too
    options = dict(dtype="float16", lora_r=4, save_every=1, max_new_tokens=4, lr_schedule="constant")
    grpo(model_path, tmp_path / "run", steps=1, fused_optimizer=saved_fused, **options).train()
    resumed = grpo(model_path, tmp_path / "run", steps=2, fused_optimizer=not saved_fused, **options)
    assert resumed.resume()
    assert [c.name for c in resumed.resume_changes if c.verdict == "warning"] == ["fused_optimizer"]
    assert bool(resumed.loop.optimizer.param_groups[0]["fused"]) is (not saved_fused)
    resumed.train()
    records = [r for r in read_metrics(tmp_path / "run") if "loss/policy" in r]
    assert len(records) == 2 and torch.isfinite(torch.tensor(records[-1]["loss/policy"]))
