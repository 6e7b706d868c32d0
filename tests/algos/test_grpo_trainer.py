"""GRPO trainer: gradient-accumulation invariance, reference model, config validation."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy, LoraSettings  # noqa: E402
from mathgym.algos.batch import Episode, RolloutBatch  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.options import build_config  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def _batch(policy: LLMPolicy, n: int = 8, seed: int = 0) -> RolloutBatch:
    """Random episodes of different lengths, 2 groups of 4, with sampling log-probs."""
    gen = torch.Generator().manual_seed(seed)
    episodes = []
    for i in range(n):
        prompt = torch.randint(10, 90, (3 + i % 3,), generator=gen).tolist()
        action = torch.randint(10, 90, (2 + (i * 5) % 7,), generator=gen).tolist()
        ep = Episode("test", f"t{i // 4}", i // 4)
        ep.extend(prompt)
        ep.extend(action, action_step=0, logprobs=[0.0] * len(action))
        ep.step_rewards = [float(i % 3 == 0)]
        ep.truncated_tokens = i == 5
        episodes.append(ep)
    batch = RolloutBatch.from_episodes(episodes, policy.pad_token_id)
    with torch.no_grad():
        logprobs, _ = policy.token_logprobs(batch.input_ids, batch.attention_mask)
    batch.sampler_logprobs = (logprobs - 0.05 * torch.rand(logprobs.shape, generator=gen)) * batch.action_mask
    return batch


class _GradRecorder:
    """A GRPO trainer whose update loop keeps the gradients it steps with (``grads``) and whose
    algorithm the lengths of the rows of each micro-batch (``seen``)."""

    def __init__(self, config, run_dir, policy):
        self.trainer = GRPOTrainer(config, run_dir=run_dir, policy=policy)
        self.grads, self.seen = [], []
        loop, algorithm = self.trainer.loop, self.trainer.algorithm
        step, loss = loop.optimizer_step, algorithm.loss

        def optimizer_step() -> float:
            self.grads = [p.grad.detach().clone() for p in policy.trainable_parameters()]
            return step()

        def recording_loss(batch, items, optimizer_step):
            self.seen.append(batch.attention_mask[items].sum(-1).tolist())
            return loss(batch, items, optimizer_step)

        loop.optimizer_step, algorithm.loss = optimizer_step, recording_loss

    def __getattr__(self, name):
        return getattr(self.trainer, name)


def _one_update(model_path, run_dir, **options) -> tuple[list, list, list]:
    """GRPO's update of :func:`_batch` (two iterations, a KL term): the last step's gradients, the
    parameters after it, and each micro-batch's row lengths."""
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    config = GRPOConfig(model=str(model_path), num_tasks=2, group_size=4, num_iterations=2, beta=0.1, eval_tasks=0,
                        progress=False, **options)
    trainer = _GradRecorder(config, run_dir=run_dir, policy=policy)
    trainer.update(_batch(policy))
    return trainer.grads, [p.detach().clone() for p in policy.trainable_parameters()], trainer.seen


def _assert_same_update(a, b) -> None:
    assert any(g.abs().sum() > 0 for g in a[0])
    for x, y in zip(a[0], b[0]):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-7)
    for x, y in zip(a[1], b[1]):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "dr_grpo"])
def test_batch_8_accum_1_equals_batch_1_accum_8(model_path, tmp_path, aggregation):
    runs = {accum: _one_update(model_path, tmp_path / f"run{accum}", grad_accum_steps=accum, loss_aggregation=aggregation,
                               mask_truncated=True) for accum in (1, 8)}
    assert runs[8][2] and all(len(lengths) == 1 for lengths in runs[8][2])  # micro-batches of one row
    _assert_same_update(runs[1], runs[8])


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "dr_grpo"])
def test_micro_batches_of_like_lengths_give_the_same_update(model_path, tmp_path, aggregation):
    runs = {limit: _one_update(model_path, tmp_path / f"run{limit}", micro_batch_tokens=limit, loss_aggregation=aggregation)
            for limit in (0, 24)}
    whole, cut = runs[0][2], runs[24][2]
    assert len(whole) == 2 and len(whole[0]) == 8  # one micro-batch per optimizer step without a limit
    assert len(cut) > 2 * 2  # several per step with one
    for lengths in cut:
        assert lengths == sorted(lengths) and (len(lengths) == 1 or len(lengths) * max(lengths) <= 24)
    assert sorted(n for lengths in cut[: len(cut) // 2] for n in lengths) == sorted(whole[0])  # every row, once a step
    _assert_same_update(runs[0], runs[24])


def test_reference_is_frozen_copy_without_lora_and_disabled_adapter_with_lora(model_path, tmp_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    trainer = GRPOTrainer(GRPOConfig(model=str(model_path), beta=0.1, eval_tasks=0, progress=False), tmp_path / "a", policy)
    batch = _batch(policy)
    before = trainer.algorithm.reference_logprobs(batch)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.01)
    assert torch.allclose(trainer.algorithm.reference_logprobs(batch), before)  # the reference did not move
    assert not torch.allclose(policy.token_logprobs(batch.input_ids, batch.attention_mask)[0], before)

    lora_policy = LLMPolicy.from_pretrained(str(model_path), device="cpu", lora=LoraSettings(r=4, alpha=8))
    lora_trainer = GRPOTrainer(GRPOConfig(model=str(model_path), beta=0.1, lora_r=4, eval_tasks=0, progress=False), tmp_path / "b", lora_policy)
    assert lora_trainer.algorithm.reference.kind == "adapter" and lora_trainer.algorithm.reference.model is None  # no second copy
    base = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    with torch.no_grad():
        for name, p in lora_policy.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.05)  # make the adapter matter
    ref = lora_trainer.algorithm.reference_logprobs(batch)
    expected = base.token_logprobs(batch.input_ids, batch.attention_mask)[0]
    assert torch.allclose(ref, expected, atol=1e-5)
    assert not torch.allclose(lora_policy.token_logprobs(batch.input_ids, batch.attention_mask)[0], expected, atol=1e-3)
    assert {n for n, p in lora_policy.model.named_parameters() if p.requires_grad} and all(
        "lora_" in n for n, p in lora_policy.model.named_parameters() if p.requires_grad
    )


def test_update_moves_probability_towards_rewarded_completions(model_path, tmp_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    config = GRPOConfig(model=str(model_path), num_tasks=2, group_size=4, learning_rate=1e-2, eval_tasks=0, progress=False)
    trainer = GRPOTrainer(config, tmp_path / "run", policy)
    batch = _batch(policy)
    batch.sampler_logprobs = policy.token_logprobs(batch.input_ids, batch.attention_mask)[0].detach() * batch.action_mask
    before = (batch.sampler_logprobs * batch.action_mask).sum(-1)
    for _ in range(3):
        stats = trainer.update(batch)
    after = (policy.token_logprobs(batch.input_ids, batch.attention_mask)[0].detach() * batch.action_mask).sum(-1)
    rewarded = batch.rewards > 0
    assert (after - before)[rewarded].mean() > (after - before)[~rewarded].mean()
    assert {"loss/policy", "loss/kl", "loss/clip_fraction", "loss/entropy", "loss/grad_norm"} <= stats.keys()


@pytest.mark.parametrize(
    "override, message",
    [
        ({"loss_aggregation": "mean"}, "loss_aggregation='mean' is not allowed; choose one of 'token_mean'"),
        ({"scale_rewards": "std"}, "scale_rewards='std'"),
        ({"num_iterations": "0"}, "num_iterations"),
        ({"grad_accum_steps": "3"}, "grad_accum_steps=3 must divide"),
        ({"beta": "-1"}, "beta=-1.0"),
        ({"stepz": "3"}, "Unknown option --stepz. Did you mean --steps"),
        ({"steps": "many"}, "steps='many' is not a valid int"),
    ],
)
def test_invalid_options_name_the_field_and_allowed_values(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_config(GRPOConfig, overrides=override)


def _shared_prompt_batch(policy: LLMPolicy) -> RolloutBatch:
    """3 groups of 4 sharing a prompt each: rewards mixed, all 1, all 0 (the last two carry no signal)."""
    gen = torch.Generator().manual_seed(3)
    rewards = [[1.0, 0.0, 0.0, 1.0], [1.0] * 4, [0.0] * 4]
    episodes = []
    for g in range(3):
        prompt = torch.randint(10, 90, (6 + g,), generator=gen).tolist()
        for i in range(4):
            action = torch.randint(10, 90, (3 + (i * 3 + g) % 5,), generator=gen).tolist()
            ep = Episode("test", f"t{g}", g)
            ep.extend(prompt)
            ep.extend(action, action_step=0, logprobs=[0.0] * len(action))
            ep.step_rewards = [rewards[g][i]]
            episodes.append(ep)
    batch = RolloutBatch.from_episodes(episodes, policy.pad_token_id)
    with torch.no_grad():
        batch.sampler_logprobs = policy.token_logprobs(batch.input_ids, batch.attention_mask)[0] * batch.action_mask
    return batch


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "dr_grpo"])
def test_skipping_flat_groups_and_sharing_prompts_leave_the_gradient_unchanged(model_path, tmp_path, aggregation):
    from mathgym.algos.advantages import group_normalized_advantages
    from mathgym.algos.grpo import grpo_loss
    from mathgym.algos.losses import batch_normalizer

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    config = GRPOConfig(model=str(model_path), num_tasks=3, group_size=4, loss_aggregation=aggregation, eval_tasks=0,
                        progress=False, max_new_tokens=8)
    trainer = _GradRecorder(config, run_dir=tmp_path / "run", policy=policy)
    batch = _shared_prompt_batch(policy)
    # The plain computation: every sequence, one forward pass each, no prompt sharing.
    reference = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    reference.model.train()
    logprobs, _ = reference.token_logprobs(batch.input_ids, batch.attention_mask)
    mask = batch.loss_mask(False)
    loss, _ = grpo_loss(logprobs, logprobs.detach(), group_normalized_advantages(batch.rewards, batch.group_ids), mask,
                        eps_low=config.eps_low, eps_high=config.eps_high, aggregation=aggregation,
                        norm=batch_normalizer(mask, config.max_new_tokens))
    loss.backward()
    expected = [p.grad for p in reference.trainable_parameters()]
    stats = trainer.update(batch)
    assert stats["loss/trained_sequences"] == pytest.approx(4 / 12)  # the two flat groups were left out
    for got, want in zip(trainer.grads, expected):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-7)


def test_a_batch_without_signal_still_steps_the_optimizer_like_zero_gradients(model_path, tmp_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    trainer = _GradRecorder(GRPOConfig(model=str(model_path), num_tasks=3, group_size=4, eval_tasks=0, progress=False),
                            run_dir=tmp_path / "run", policy=policy)
    batch = _shared_prompt_batch(policy)
    batch.rewards = torch.zeros_like(batch.rewards)
    stats = trainer.update(batch)
    assert stats["loss/trained_sequences"] == 0 and "loss/entropy" not in stats
    assert all(torch.count_nonzero(g) == 0 for g in trainer.grads)


def test_mismatch_correction_weights_each_tokens_policy_loss(model_path, tmp_path):
    """token_mask with a tight cap: the trainer's gradient is grpo_loss's with the weights of
    learner vs sampler log-probs (masked tokens at 0), and differs from the uncorrected one."""
    from mathgym.algos.advantages import group_normalized_advantages
    from mathgym.algos.grpo import grpo_loss
    from mathgym.algos.losses import batch_normalizer
    from mathgym.algos.mismatch import mismatch_weights

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    config = GRPOConfig(model=str(model_path), num_tasks=3, group_size=4, eval_tasks=0, progress=False, max_new_tokens=8,
                        mismatch_correction="token_mask", mismatch_cap=1.1)
    trainer = _GradRecorder(config, run_dir=tmp_path / "run", policy=policy)
    batch = _shared_prompt_batch(policy)
    batch.sampled = torch.ones(len(batch), dtype=torch.bool)
    noise = 0.1 * torch.randn(batch.sampler_logprobs.shape, generator=torch.Generator().manual_seed(1))
    batch.sampler_logprobs = (batch.sampler_logprobs + noise) * batch.action_mask  # a sampler off by ~10%
    reference = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    mask = batch.loss_mask(False)
    with torch.no_grad():
        reference.model.eval()
        learner = reference.token_logprobs(batch.input_ids, batch.attention_mask)[0]
    weights = mismatch_weights(learner, batch.sampler_logprobs, mask, "token_mask", 1.1)
    assert 0 < weights.stats["rollout/is_capped_fraction"] < 1
    reference.model.train()
    grads = {}
    for name, w in (("corrected", weights.weights), ("plain", None)):
        logprobs, _ = reference.token_logprobs(batch.input_ids, batch.attention_mask)
        loss, _ = grpo_loss(logprobs, logprobs.detach(), group_normalized_advantages(batch.rewards, batch.group_ids), mask,
                            eps_low=config.eps_low, eps_high=config.eps_high, norm=batch_normalizer(mask, 8), weights=w)
        loss.backward()
        grads[name] = [p.grad.clone() for p in reference.trainable_parameters()]
        reference.model.zero_grad()
    stats = trainer.update(batch)
    assert stats["rollout/is_capped_fraction"] == pytest.approx(weights.stats["rollout/is_capped_fraction"])
    for got, want in zip(trainer.grads, grads["corrected"]):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-7)
    assert not all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(trainer.grads, grads["plain"]))


def test_overlong_penalty_and_kl_reward_penalty_shape_the_rewards_before_advantages(model_path, tmp_path):
    from mathgym.algos.advantages import group_normalized_advantages

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    config = GRPOConfig(model=str(model_path), num_tasks=3, group_size=4, eval_tasks=0, progress=False, max_new_tokens=8,
                        overlong_buffer=4, overlong_penalty=1.0, beta=0.1, kl_mode="reward", kl_estimator="k1",
                        entropy_coef=0.01)
    trainer = GRPOTrainer(config, run_dir=tmp_path / "run", policy=policy)
    with torch.no_grad():  # move the policy away from its reference, so that the KL is not 0
        for p in policy.trainable_parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(5)))
    batch = _shared_prompt_batch(policy)
    lengths = batch.action_mask.sum(-1)
    # budget 8, buffer 4: free up to 4 tokens, then -(L - 4) / 4: 5 -> -0.25, 6 -> -0.5, 7 -> -0.75
    penalty = -((lengths - 4) / 4).clamp(min=0)
    reference = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    with torch.no_grad():
        policy.model.eval()
        learner = policy.token_logprobs(batch.input_ids, batch.attention_mask)[0]
        ref = reference.token_logprobs(batch.input_ids, batch.attention_mask)[0]
    kl = ((learner - ref) * batch.action_mask).sum(-1)  # k1 summed over each sequence's tokens
    scored = trainer.score_learner(batch.to("cpu"))
    stats = trainer.loop.optimize(scored, trainer.algorithm.plan(scored))
    expected = group_normalized_advantages(batch.rewards + penalty - 0.1 * kl, batch.group_ids)
    assert scored.advantages.tolist() == pytest.approx(expected.tolist(), abs=1e-4)
    # the KL's share is visible (~0.1 here): the tolerance cannot hide it
    assert (expected - group_normalized_advantages(batch.rewards + penalty, batch.group_ids)).abs().max() > 0.01
    assert stats["loss/overlong_penalty"] == pytest.approx(float(penalty.mean()))
    assert stats["loss/trained_sequences"] == 1.0  # the entropy bonus trains every sequence


def test_adamw_is_fused_on_one_device_and_takes_the_same_steps():
    from mathgym.algos.trainer import adamw

    def params(device="cpu"):
        torch.manual_seed(0)
        return [torch.nn.Parameter(torch.randn(5, 3, device=device)), torch.nn.Parameter(torch.randn(3, device=device))]

    fused_params, plain_params = params(), params()
    fused = adamw(fused_params, 1e-2, 0.1)
    plain = torch.optim.AdamW(plain_params, lr=1e-2, weight_decay=0.1)
    assert fused.defaults["fused"] and not plain.defaults.get("fused")
    for step in range(3):
        for group in (fused_params, plain_params):
            for i, p in enumerate(group):
                p.grad = torch.full_like(p, float(step + i + 1)) * p.detach().sign()
        fused.step()
        plain.step()
    for a, b in zip(fused_params, plain_params):
        assert torch.allclose(a, b, atol=1e-6)
    groups = [{"params": params()}, {"params": params(), "lr": 1e-3}]  # PPO's: policy and value head
    assert adamw(groups, 1e-2, 0.0).defaults["fused"]
    assert not adamw(params("meta"), 1e-2, 0.0).defaults.get("fused")  # a device torch does not fuse on: its default
    assert not adamw(params(), 1e-2, 0.0, fused=False).defaults.get("fused")  # fused_optimizer=False (the warm start)


def test_run_summary_names_the_split_it_was_evaluated_on(tmp_path):
    from mathgym.algos.evaluate import EvalResult
    from mathgym.algos.trainer import TrainResult

    before, after = EvalResult(0.5, 0.5, 1, 10, 0.5), EvalResult(0.7, 0.7, 1, 10, 0.7)
    on = lambda split: TrainResult(tmp_path, 3, 1.0, before, after, None, 0, split).summary("MathReason-v0")  # noqa: E731
    assert "10 held-out MathReason-v0 tasks" in on("test") and "10 held-out MathReason-v0 tasks" in on(None)
    assert "10 train-split MathReason-v0 tasks" in on("train") and "held-out" not in on("train")
    # A data set with no held-out split: the evaluated tasks repeat, and some were trained on.
    repeated = EvalResult(0.7, 0.7, 1, 10, 0.7, task_ids=("a", "b", "c"))
    said = lambda trained: TrainResult(tmp_path, 3, 1.0, before, repeated, None, 0, None, frozenset(trained)).summary("SQLQuery-v0")  # noqa: E731
    assert "10 held-out SQLQuery-v0 tasks, 3 distinct;" in said({"x"})
    assert "10 SQLQuery-v0 tasks, 3 distinct, 2 of them also drawn for training (not held out" in said({"a", "c", "x"})
    assert "held-out" not in said({"a"})


def test_the_accuracy_before_training_names_the_split_it_was_evaluated_on(model_path, tmp_path, capsys):
    common = dict(model=str(model_path), steps=1, num_tasks=2, group_size=2, max_new_tokens=4, eval_tasks=2, save_every=0,
                  progress=False)
    GRPOTrainer(GRPOConfig(**common, eval_env_kwargs={"split": "train"}, run_dir=str(tmp_path / "train"))).train()
    GRPOTrainer(GRPOConfig(**common, run_dir=str(tmp_path / "test"))).train()
    before = [line for line in capsys.readouterr().out.splitlines() if line.startswith("accuracy before training")]
    assert len(before) == 2
    assert "2 train-split tasks" in before[0] and "held-out" not in before[0]
    assert "2 held-out tasks" in before[1]


def test_a_data_set_without_a_held_out_split_is_not_called_held_out(model_path, tmp_path):
    """Trained and evaluated on the same one-problem file: the summary says the evaluated task was a training task."""
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"question": "What is 2 + 3?", "answer": "5"}) + "\n")
    config = GRPOConfig(model=str(model_path), steps=1, num_tasks=2, group_size=2, max_new_tokens=4, eval_tasks=3, save_every=0,
                        progress=False, env_kwargs={"dataset": str(data)}, run_dir=str(tmp_path / "run"))
    result = GRPOTrainer(config).train()
    assert result.eval_after.task_ids and result.trained_task_ids == frozenset(result.eval_after.task_ids)
    summary = result.summary("MathReason-v0")
    assert "3 MathReason-v0 tasks, 1 distinct, 1 of them also drawn for training (not held out" in summary and "held-out" not in summary
