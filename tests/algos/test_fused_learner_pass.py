"""GRPO with one pass over a batch takes the learner's log-probs from its loss's forward pass instead
of a separate pass: the same update, the same mismatch metric on the rows trained on."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import logprob_mismatch  # noqa: E402
from tests.algos.test_update_loop import episodes_batch  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def trainer_on(model_path, run_dir, **options) -> GRPOTrainer:
    config = GRPOConfig(
        model=str(model_path), num_tasks=4, group_size=2, max_new_tokens=6, learning_rate=1e-3, eval_tasks=0,
        progress=False, log_samples=0, run_dir=str(run_dir), **options,
    )
    return GRPOTrainer(config)


def step_on(trainer: GRPOTrainer, separate: bool) -> tuple[dict[str, float], list[torch.Tensor], list[int]]:
    """One train_step on a fixed batch whose first sample is off the learner; returns the metrics, the
    parameters after it, and the rows each learner pass scored."""
    batch = episodes_batch(trainer.policy)
    batch.sampler_logprobs[0, batch.action_mask[0].bool()] -= 0.25
    batch.rewards[2:4] = 1.0  # group 1 scores the same: its rows carry no gradient
    trainer.source.sample = lambda step: (batch, {"perf/rollout_s": 0.0})
    if separate:
        trainer.algorithm.learner_pass_needed = lambda batch: True
    passes: list[int] = []
    score = trainer.score_learner
    trainer.score_learner = lambda b: passes.append(int(len(trainer.algorithm.learner_rows(b)))) or score(b)
    metrics = trainer.train_step()
    return metrics, [p.detach().clone() for p in trainer.loop.params()], passes


def test_the_fused_update_equals_the_separate_pass_and_measures_the_trained_rows(model_path, tmp_path):
    fused, params_fused, passes_fused = step_on(trainer_on(model_path, tmp_path / "fused"), separate=False)
    separate, params_separate, passes_separate = step_on(trainer_on(model_path, tmp_path / "separate"), separate=True)
    assert passes_fused == [] and passes_separate == [8]
    assert fused["loss/trained_sequences"] == separate["loss/trained_sequences"] == 0.75
    for a, b in zip(params_fused, params_separate):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    assert fused["loss/grad_norm"] == pytest.approx(separate["loss/grad_norm"], abs=1e-6)
    # The separate pass's metric restricted to the rows trained on (groups 0, 2, 3) is the fused one.
    trainer = trainer_on(model_path, tmp_path / "measure")
    batch = episodes_batch(trainer.policy)
    batch.sampler_logprobs[0, batch.action_mask[0].bool()] -= 0.25
    trained = logprob_mismatch(trainer.score_learner(batch).select([0, 1, 4, 5, 6, 7]))
    assert fused["rollout/logprob_diff_max"] == pytest.approx(trained["rollout/logprob_diff_max"], abs=1e-6)
    assert fused["rollout/logprob_diff_mean"] == pytest.approx(trained["rollout/logprob_diff_mean"], abs=1e-6)
    assert fused["rollout/logprob_diff_max"] == pytest.approx(0.25, abs=1e-5)


@pytest.fixture(scope="module")
def one_trainer(model_path, tmp_path_factory):
    return trainer_on(model_path, tmp_path_factory.mktemp("run"))


@pytest.mark.parametrize("options", [
    dict(num_iterations=2), dict(beta=0.1, kl_mode="reward"), dict(mismatch_correction="tis"), dict(off_policy_steps=1),
])
def test_what_reads_the_learner_before_the_update_keeps_the_separate_pass(one_trainer, options):
    batch, config = episodes_batch(one_trainer.policy), one_trainer.algorithm.config
    assert not one_trainer.algorithm.learner_pass_needed(batch)
    one_trainer.algorithm.config = dataclasses.replace(config, **options)  # the algorithm reads its own, built once
    try:
        assert one_trainer.algorithm.learner_pass_needed(batch)
    finally:
        one_trainer.algorithm.config = config


def test_active_dropout_keeps_the_separate_pass(one_trainer):
    batch, model_config = episodes_batch(one_trainer.policy), one_trainer.policy.model.config
    assert not one_trainer.algorithm.learner_pass_needed(batch)
    model_config.attention_dropout = 0.1
    try:
        assert one_trainer.algorithm.learner_pass_needed(batch)
    finally:
        model_config.attention_dropout = 0.0


def test_a_batch_with_nothing_to_train_still_measures_the_mismatch(model_path, tmp_path):
    """Every group's rewards agree: no loss pass runs, so the metric gets a learner pass of its own."""
    trainer = trainer_on(model_path, tmp_path / "flat")
    batch = episodes_batch(trainer.policy)
    batch.sampler_logprobs[0, batch.action_mask[0].bool()] -= 0.25
    batch.rewards[:] = 1.0
    trainer.source.sample = lambda step: (batch, {"perf/rollout_s": 0.0})
    metrics = trainer.train_step()
    assert metrics["loss/trained_sequences"] == 0.0
    assert metrics["rollout/logprob_diff_max"] == pytest.approx(0.25, abs=1e-4)
