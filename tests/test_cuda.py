"""The CUDA paths: generation, bf16 training of every algorithm, a CUDA run resumed on the CPU.

Skipped without a CUDA GPU (CI has none); run them on a GPU machine with
``python -m pytest -n0 tests/test_cuda.py``. Each check reads the device and dtype of the
weights it trained, so a run that silently fell back to the CPU fails.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy, SamplingParams  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.algos.registry import get_algorithm  # noqa: E402
from tests.chat_fixtures import cached_chat_model  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env, write_step_labels  # noqa: E402

pytestmark = [
    pytest.mark.torch,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

SMALL = dict(steps=2, num_tasks=2, group_size=3, max_new_tokens=6, eval_tasks=2, save_every=0, log_samples=0,
             progress=False, warm_start_steps=0, learning_rate=1e-2, seed=5)
BF16 = dict(device="cuda", dtype="bfloat16")
PROMPTS = ["What is 2 + 3?", "What is 17 + 25?", "Compute 6 * 7.", "What is 100 - 58?"]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def _prompts(policy):
    return [policy.chat.prompt_ids([{"role": "user", "content": text}]) for text in PROMPTS]


def _weights(module):
    return {(p.device.type, p.dtype) for p in module.parameters()}


def _finite_losses(run_dir):
    records = [r for r in read_metrics(run_dir) if any(k.startswith("loss/") for k in r)]
    assert records, "no loss was logged"
    for record in records:
        for key, value in record.items():
            if key.startswith("loss/") and isinstance(value, float):
                assert math.isfinite(value), (key, record)
    return records


def _trainer(algo, run_dir, **options):
    trainer_cls, config_cls = get_algorithm(algo)
    return trainer_cls(config_cls(**{**SMALL, **BF16, **options, "run_dir": str(run_dir)}))


def _guess():
    """A multi-turn env whose rewards vary within a group at once: a gradient from the first step."""
    return dict(env=register_guess_env(), env_kwargs={"high": 2, "max_turns": 2})


def _changed(before, model):
    return sum(not torch.equal(before[k].to(v.device), v) for k, v in model.state_dict().items() if k in before)


def test_greedy_generation_on_cuda_in_fp32_equals_the_cpu(model_path):
    cpu = LLMPolicy.from_pretrained(str(model_path), device="cpu", dtype="float32")
    gpu = LLMPolicy.from_pretrained(str(model_path), device="cuda", dtype="float32")
    assert _weights(gpu.model) == {("cuda", torch.float32)}
    params = SamplingParams(temperature=0, max_new_tokens=16)
    for backend in ("native", "hf"):
        cpu.set_backend(backend)
        gpu.set_backend(backend)
        on_cpu, on_gpu = cpu.generate(_prompts(cpu), params), gpu.generate(_prompts(gpu), params)
        for a, b in zip(on_cpu, on_gpu):
            assert a.token_ids == b.token_ids, backend
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3), backend


def test_multi_turn_episodes_on_cuda_in_fp32_equal_the_cpu(model_path):
    """The collector on CUDA: each next turn runs only its new tokens (the turn cache's key/value
    rows live on the GPU), greedy, and the episodes are the CPU's."""
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings

    settings = RolloutSettings(group_size=2, sampling=SamplingParams(temperature=0, max_new_tokens=6))
    episodes = {}
    for device in ("cpu", "cuda"):
        policy = LLMPolicy.from_pretrained(str(model_path), device=device, dtype="float32")
        collector = RolloutCollector(register_guess_env(), {"high": 1000, "max_turns": 4}, policy, num_tasks=3,
                                     settings=settings)
        try:
            episodes[device] = collector.collect_episodes([1, 2, 3], sampling_seed=7)
        finally:
            collector.close()
    assert max(len(e.step_rewards) for e in episodes["cuda"]) > 1
    for a, b in zip(episodes["cpu"], episodes["cuda"]):
        assert a.token_ids == b.token_ids and a.step_rewards == b.step_rewards and a.status == b.status
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)


def test_bf16_sampler_and_learner_log_probs_agree_on_cuda(model_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cuda", dtype="bfloat16")
    assert _weights(policy.model) == {("cuda", torch.bfloat16)}
    prompts = _prompts(policy)
    generations = policy.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=16),
                                  torch.Generator().manual_seed(0))
    rows = [list(p) + list(g.token_ids) for p, g in zip(prompts, generations)]
    width = max(map(len, rows))
    ids = torch.tensor([r + [policy.pad_token_id] * (width - len(r)) for r in rows], device="cuda")
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device="cuda")
    with torch.no_grad():
        learner, _ = policy.token_logprobs(ids, mask)
    assert learner.dtype == torch.float32 and learner.device.type == "cuda"
    diffs = []
    for i, (p, g) in enumerate(zip(prompts, generations)):
        got = learner[i, len(p):len(p) + len(g.token_ids)].cpu()
        diffs.append((got - torch.tensor(g.logprobs)).abs())
    diffs = torch.cat(diffs)
    # bf16 weights: both sides round the same weights, but kernels differ (cached decode vs one full pass)
    assert float(diffs.mean()) < 0.05 and float(diffs.max()) < 0.5, (float(diffs.mean()), float(diffs.max()))


def test_grpo_trains_in_bf16_on_cuda_and_resumes_on_the_cpu(model_path, tmp_path):
    run = tmp_path / "run"
    trainer = _trainer("grpo", run, model=str(model_path), save_every=1, beta=0.1, **_guess())
    assert _weights(trainer.policy.model) == {("cuda", torch.bfloat16)}
    before = {k: v.detach().clone() for k, v in trainer.policy.model.state_dict().items()}
    trainer.train()
    records = _finite_losses(run)
    assert len(records) == 2 and _changed(before, trainer.policy.model) > 0
    assert "rollout/logprob_diff_mean" in records[-1] and records[-1]["rollout/logprob_diff_mean"] < 0.1
    resumed = _trainer("grpo", run, model=str(model_path), save_every=1, beta=0.1, **_guess(), steps=3, device="cpu")
    assert resumed.resume() and resumed.step == 2
    assert _weights(resumed.policy.model) == {("cpu", torch.bfloat16)}  # the dtype is the run's; the device may change
    assert {c.name: c.verdict for c in resumed.resume_changes}["device"] != "refused"
    resumed.train()
    assert [r["step"] for r in _finite_losses(run)] == [1, 2, 3]


def test_grpo_with_lora_overlap_and_mismatch_correction_on_cuda(model_path, tmp_path):
    trainer = _trainer("grpo", tmp_path / "run", model=str(model_path), lora_r=4, off_policy_steps=1,
                       mismatch_correction="tis", steps=3, **_guess())
    trainer.train()
    assert {d for d, _ in _weights(trainer.policy.model)} == {"cuda"}
    assert len(_finite_losses(tmp_path / "run")) == 3


def test_ppo_with_a_value_head_on_cuda(model_path, tmp_path):
    trainer = _trainer("ppo", tmp_path / "run", model=str(model_path), **_guess())
    assert {d for d, _ in _weights(trainer.algorithm.value_model)} == {"cuda"}
    trainer.train()
    assert "loss/value" in _finite_losses(tmp_path / "run")[-1]


def test_online_dpo_and_sft_on_cuda(model_path, tmp_path):
    dpo = _trainer("dpo", tmp_path / "dpo", model=str(model_path), **_guess())
    assert _weights(dpo.policy.model) == {("cuda", torch.bfloat16)}
    dpo.train()
    _finite_losses(tmp_path / "dpo")
    sft = _trainer("sft", tmp_path / "sft", model=str(model_path), batch_size=8, num_demonstrations=32)
    before = {k: v.detach().clone() for k, v in sft.policy.model.state_dict().items()}
    sft.train()
    assert _changed(before, sft.policy.model) > 0 and _finite_losses(tmp_path / "sft")


def test_distillation_with_the_teacher_on_cuda(model_path, tmp_path):
    trainer = _trainer("distill", tmp_path / "off", model=str(model_path), teacher=str(model_path), top_k=8)
    assert _weights(trainer.algorithm.teacher.model) == {("cuda", torch.bfloat16)}
    trainer.train()
    assert "loss/divergence" in _finite_losses(tmp_path / "off")[-1]
    onpolicy = _trainer("onpolicy-distill", tmp_path / "on", model=str(model_path), teacher=str(model_path))
    onpolicy.train()
    _finite_losses(tmp_path / "on")


def test_a_prm_trained_on_cuda_scores_as_it_does_on_the_cpu(tmp_path_factory, tmp_path):
    from mathgym.agents.prm_model import load_prm

    base = cached_chat_model(tmp_path_factory, "chatml")
    data = write_step_labels(tmp_path / "train.jsonl", range(12))
    trainer = _trainer("prm", tmp_path / "run", model=str(base), data=str(data), batch_size=4, steps=3,
                       learning_rate=1e-3, dtype="float32", eval_tasks=0)
    result = trainer.train()
    _finite_losses(tmp_path / "run")
    problem, steps = "What is 12 + 30?", ["12 + 30 = 42.", "So the answer is \\boxed{42}."]
    on_gpu = load_prm(str(result.final_model), device="cuda", dtype="float32").score_steps([problem], [steps])[0]
    on_cpu = load_prm(str(result.final_model), device="cpu", dtype="float32").score_steps([problem], [steps])[0]
    assert on_gpu == pytest.approx(on_cpu, abs=1e-4)
    bf16 = load_prm(str(result.final_model), device="cuda", dtype="bfloat16").score_steps([problem], [steps])[0]
    assert bf16 == pytest.approx(on_cpu, abs=0.05)


def test_a_reward_model_trains_online_on_cuda(tmp_path_factory, tmp_path):
    model = str(cached_chat_model(tmp_path_factory, "chatml"))
    trainer = _trainer("rm", tmp_path / "run", model=model, steps=1, warmup_steps=0, eval_tasks=0)
    assert {d for d, _ in _weights(trainer.algorithm.rm.model)} == {"cuda"}
    trainer.train()
    assert "loss/pairs" in read_metrics(tmp_path / "run")[-1]
