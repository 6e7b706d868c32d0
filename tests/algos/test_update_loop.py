"""The update loop every algorithm shares: micro-batches × accumulation make the same update, the
learning-rate schedule advances once per batch, statistics and the learner pass are the loop's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mathgym.agents.policy import LLMPolicy  # noqa: E402
from mathgym.algos.batch import Episode, RolloutBatch  # noqa: E402
from mathgym.algos.dpo import DPOConfig, DPOTrainer  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.ppo import PPOConfig, PPOTrainer  # noqa: E402
from mathgym.algos.sft import SFTConfig, SFTTrainer  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

# algorithm -> (trainer, config, options that make the update take several optimizer steps and use every part)
ALGORITHMS = {
    "grpo": (GRPOTrainer, GRPOConfig, dict(num_iterations=2, beta=0.1, loss_aggregation="sequence_mean")),
    "ppo": (PPOTrainer, PPOConfig, dict(ppo_epochs=2, num_minibatches=2, kl_coef=0.1, kl_mode="loss", entropy_coef=0.01)),
    "dpo": (DPOTrainer, DPOConfig, dict(epochs_per_batch=2, beta=0.5)),
    "sft": (SFTTrainer, SFTConfig, dict(data="{demos}", batch_size=8)),
}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    path = tmp_path_factory.mktemp("demos") / "demos.jsonl"
    path.write_text("".join(f'{{"prompt": "{i} + {i}?", "completion": "{2 * i}"}}\n' for i in range(8)))
    return path


def episodes_batch(policy: LLMPolicy, sampled: bool = True) -> RolloutBatch:
    """8 episodes of different lengths in 4 groups of 2, two turns each, rewards that differ within groups."""
    gen = torch.Generator().manual_seed(0)
    episodes = []
    for i in range(8):
        ep = Episode("test", f"t{i // 2}", i // 2, sampled=sampled)
        ep.extend(torch.randint(10, 90, (3 + (i // 2) % 3,), generator=gen).tolist())
        for turn in range(2):
            action = torch.randint(10, 90, (2 + (i * 5 + turn) % 4,), generator=gen).tolist()
            ep.extend(action, action_step=turn, logprobs=[-1.0] * len(action))
            if turn == 0:
                ep.extend([12, 13])  # the env's reply between the turns
        ep.step_rewards = [0.1 * (i % 2), float(i % 2 == 0)]
        episodes.append(ep)
    batch = RolloutBatch.from_episodes(episodes, policy.pad_token_id)
    with torch.no_grad():
        batch.sampler_logprobs = policy.token_logprobs(batch.input_ids, batch.attention_mask)[0] * batch.action_mask
    return batch


def make(algo: str, model_path, run_dir, demos, **overrides):
    trainer_cls, config_cls, options = ALGORITHMS[algo]
    options = {k: (v.format(demos=demos) if isinstance(v, str) else v) for k, v in options.items()}
    config = config_cls(
        model=str(model_path), num_tasks=4, group_size=2, max_new_tokens=6, learning_rate=1e-3, eval_tasks=0,
        progress=False, run_dir=str(run_dir), **{**options, **overrides},
    )
    return trainer_cls(config)


class GradientRecorder:
    """Wraps a trainer's optimizer step (its update loop's) to keep the gradients it steps with."""

    def __init__(self, trainer):
        self.grads: list[list[torch.Tensor]] = []
        step = trainer.loop.optimizer_step

        def recording_step() -> float:
            self.grads.append([p.grad.detach().clone() for p in trainer.loop.params()])
            return step()

        trainer.loop.optimizer_step = recording_step


def batch_for(trainer) -> RolloutBatch:
    if isinstance(trainer, SFTTrainer):
        return trainer.source.make_batch(0)[0]
    return episodes_batch(trainer.policy)


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_micro_batches_times_accumulation_give_the_same_update(algo, model_path, demos, tmp_path):
    """The batch in one pass, or in 4 micro-batches accumulated: the same gradient at every optimizer
    step, and the same parameters (within 1e-5) after two updates."""
    params, grads = {}, {}
    for accum in (1, 4):
        trainer = make(algo, model_path, tmp_path / f"accum{accum}", demos, grad_accum_steps=accum)
        recorder = GradientRecorder(trainer)
        before = [p.detach().clone() for p in trainer.loop.params()]
        for _ in range(2):
            stats = trainer.update(batch_for(trainer))
        params[accum], grads[accum] = [p.detach().clone() for p in trainer.loop.params()], recorder.grads
        assert stats["loss/updates"] >= 1 and stats["loss/grad_norm"] > 0
        assert any(not torch.equal(a, b) for a, b in zip(before, params[accum]))  # it trained
    assert len(grads[1]) == len(grads[4]) >= 2
    for step_whole, step_accumulated in zip(grads[1], grads[4]):
        for whole, accumulated in zip(step_whole, step_accumulated):
            # a micro-batch runs at its own longest row's width: other matmul shapes, other float rounding
            torch.testing.assert_close(accumulated, whole, atol=5e-6, rtol=1e-4)
    for whole, accumulated in zip(params[1], params[4]):
        # two Adam steps of the same gradients summed in another order: float32 rounding, a few ulps of lr
        torch.testing.assert_close(accumulated, whole, atol=1e-5, rtol=0)


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_the_learning_rate_schedule_advances_once_per_batch(algo, model_path, demos, tmp_path):
    """However many optimizer steps an algorithm takes on a batch (GRPO's iterations, PPO's epochs of
    minibatches, DPO's epochs), the schedule is one step per batch: a linear decay over 4 steps."""
    trainer = make(algo, model_path, tmp_path / "run", demos, steps=4, lr_schedule="linear")
    stats = trainer.update(batch_for(trainer))
    assert trainer.loop.scheduler.last_epoch == 1
    assert trainer.loop.scheduler.get_last_lr()[0] == pytest.approx(1e-3 * (1 - 1 / 4))
    assert stats["loss/updates"] >= 2 or algo == "sft"


def test_a_batch_without_pairs_takes_no_optimizer_step_but_keeps_the_schedule(model_path, demos, tmp_path):
    trainer = make("dpo", model_path, tmp_path / "run", demos, steps=4, lr_schedule="linear")
    batch = episodes_batch(trainer.policy)
    batch.rewards = torch.zeros_like(batch.rewards)  # nothing to prefer
    before = [p.detach().clone() for p in trainer.loop.params()]
    stats = trainer.update(batch)
    assert stats["loss/pairs"] == 0 and stats["loss/updates"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.loop.params()))
    assert trainer.loop.scheduler.last_epoch == 1


def test_the_learner_pass_fills_the_batch_once_and_the_mismatch_reads_it(model_path, demos, tmp_path):
    """The learner's log-probs before the update are computed once, in eval mode, for the sampled rows;
    the mismatch metric is |sampler - learner| on them, with no forward pass of its own."""
    from mathgym.algos.metrics import logprob_mismatch

    trainer = make("grpo", model_path, tmp_path / "run", demos, num_iterations=1, beta=0.0)
    batch = episodes_batch(trainer.policy)
    batch.sampled[-2:] = False  # e.g. demonstrations mixed in: not the sampler's
    calls = []
    forward = trainer.policy.forward
    trainer.policy.forward = lambda *a, **k: calls.append(len(a[0])) or forward(*a, **k)
    trainer.policy.model.train()
    batch = trainer.score_learner(batch)
    assert calls == [6] and trainer.policy.model.training  # one pass over the 6 sampled rows; mode restored
    assert torch.equal(batch.learner_logprobs[-2:], torch.zeros_like(batch.learner_logprobs[-2:]))
    trainer.policy.forward = forward
    with torch.no_grad():
        expected = trainer.policy.token_logprobs(batch.input_ids[:6], batch.attention_mask[:6])[0]
    actions = batch.action_mask[:6].bool()
    torch.testing.assert_close(batch.learner_logprobs[:6][actions], expected[actions], atol=1e-6, rtol=0)
    batch.sampler_logprobs[0, batch.action_mask[0].bool()] -= 0.25  # the sampler was off on row 0
    metrics = logprob_mismatch(batch)
    assert calls == [6]  # the metric ran no forward pass
    assert metrics["rollout/logprob_diff_max"] == pytest.approx(0.25, abs=1e-5)


def test_concat_refills_a_batch_with_more_rows(model_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    batch = episodes_batch(policy)
    narrow, wide = batch.select([0, 1]), batch.select([6, 7])
    narrow = RolloutBatch(**{**vars(narrow), **{k: getattr(narrow, k)[:, :5] for k in
                                                 ("input_ids", "attention_mask", "action_mask", "sampler_logprobs", "step_index")}})
    narrow.learner_logprobs = torch.ones(2, 5)  # filled in one part only: left out of the whole
    whole = RolloutBatch.concat([narrow, wide], policy.pad_token_id)
    assert len(whole) == 4 and whole.input_ids.shape[1] == wide.input_ids.shape[1] and whole.learner_logprobs is None
    assert whole.task_ids == narrow.task_ids + wide.task_ids
    assert whole.input_ids[0, 5:].eq(policy.pad_token_id).all() and whole.step_index[0, 5:].eq(-1).all()
    assert torch.equal(whole.input_ids[2:], wide.input_ids) and torch.equal(whole.rewards[2:], wide.rewards)
