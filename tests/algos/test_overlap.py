"""One-step off-policy overlap (``off_policy_steps=1``): each batch after the first is sampled by the
weights before the previous update (staleness 1, logged and corrected), the same seed gives the same
run, and a checkpoint holds the batch sampled ahead so that a resumed run continues exactly, with
dynamic sampling's refill and the curriculum's pass rates on too."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.algos.test_dynamic_sampling import GUESS, Recorder, register_coin_env  # noqa: E402
from tests.algos.test_train_resume import COMMON, Killed, assert_same_metrics, assert_same_run, kill_at  # noqa: E402

# The multi-turn test env of the resume tests, 3 samples a task, the batch ahead on.
OVERLAP = dict(COMMON, group_size=3, off_policy_steps=1, threads=1)
# Dynamic sampling and the pass-rate-band curriculum on a coin-flip env (about half the samples score).
TOOLBOX = dict(
    env="", **{**GUESS, "num_tasks": 4}, steps=4, save_every=2, seed=3, learning_rate=5e-3, dynamic_sampling=True,
    max_extra_rounds=3, curriculum="pass_rate_band", curriculum_band_min=0.5, curriculum_band_max=0.5, curriculum_revisit=0.5,
    threads=1,
)


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """The trainer sets torch's thread count (halved under overlap); leave the session's as it was."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    from tests.trainkit import build_dropout_model

    return build_dropout_model(tmp_path_factory.mktemp("dropout-model"))


def overlap_trainer(model_path: Path, run_dir: Path, **overrides) -> Recorder:
    return Recorder(GRPOConfig(**{**OVERLAP, **overrides}, model=str(model_path), run_dir=str(run_dir)))


def test_each_batch_after_the_first_is_sampled_by_the_weights_before_the_last_update(model_path, tmp_path):
    from mathgym.agents.policy import LLMPolicy

    coin = dict(env=register_coin_env(), env_kwargs={}, num_tasks=4, group_size=4, learning_rate=1e-2, steps=3, save_every=0)
    trainer = overlap_trainer(model_path, tmp_path, **coin, mismatch_correction="tis")
    trainer.train()
    rows = read_metrics(tmp_path)
    assert [r["rollout/staleness"] for r in rows] == [0.0, 1.0, 1.0]
    # step 1's batch: its sampler log-probs are those of the initial weights, not of the learner after step 1
    initial = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    initial.model.eval()
    batch = trainer.batches[1]
    with torch.no_grad():
        logprobs = initial.forward(batch.input_ids, batch.attention_mask).logprobs
    tokens = batch.action_mask.bool()
    assert torch.allclose(logprobs[tokens], batch.sampler_logprobs[tokens], atol=1e-5)
    assert rows[0]["rollout/logprob_diff_max"] < 1e-5  # the first batch: sampled by the learner's own weights
    assert all(r["rollout/logprob_diff_max"] > 1e-3 for r in rows[1:])  # the stale ones: one update apart
    assert rows[0]["rollout/is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert all(abs(r["rollout/is_weight_mean"] - 1.0) > 1e-4 for r in rows[1:])  # the correction reweights them
    # without overlap every batch is the learner's own
    plain = GRPOTrainer(GRPOConfig(**{**OVERLAP, **coin, "off_policy_steps": 0}, model=str(model_path), run_dir=str(tmp_path / "plain")))
    plain.train()
    assert all(r["rollout/logprob_diff_max"] < 1e-5 and "rollout/staleness" not in r for r in read_metrics(tmp_path / "plain"))


def test_overlap_stop_and_resume_equals_an_uninterrupted_run(model_path, tmp_path):
    full = overlap_trainer(model_path, tmp_path / "full")
    full.train()
    killed = overlap_trainer(model_path, tmp_path / "run")
    kill_at(killed, 3)
    killed.close()
    resumed = overlap_trainer(model_path, tmp_path / "run")
    assert resumed.resume() and resumed.step == 2
    assert resumed.source.ahead._pending_step == 2  # the batch sampled during step 2's update, from the checkpoint
    resumed.train()
    assert not hasattr(resumed, "batches") or len(resumed.batches) == 1  # only step 3's batch was sampled again
    assert_same_run(tmp_path / "full", full, tmp_path / "run", resumed)
    assert [r["rollout/staleness"] for r in read_metrics(tmp_path / "run")] == [0.0, 1.0, 1.0, 1.0]


def test_a_resumed_run_without_the_batch_ahead_differs(model_path, tmp_path):
    """The check above can fail: dropping the checkpoint's batch ahead changes the run."""
    full = overlap_trainer(model_path, tmp_path / "full")
    full.train()
    killed = overlap_trainer(model_path, tmp_path / "run")
    kill_at(killed, 3)
    killed.close()
    resumed = overlap_trainer(model_path, tmp_path / "run")
    original = resumed.load_state_dict
    resumed.load_state_dict = lambda state: original({**state, "rollouts_ahead": None})
    assert resumed.resume()
    resumed.train()
    with pytest.raises(AssertionError):
        assert_same_run(tmp_path / "full", full, tmp_path / "run", resumed)


@pytest.mark.parametrize("off_policy_steps", [0, 1])
def test_refill_curriculum_and_batch_ahead_resume_exactly(off_policy_steps, model_path, tmp_path):
    options = dict(TOOLBOX, env=register_coin_env(), off_policy_steps=off_policy_steps, model=str(model_path))
    full = Recorder(GRPOConfig(**options, run_dir=str(tmp_path / "full")))
    full.train()
    rows = read_metrics(tmp_path / "full")
    assert sum(r["rollout/extra_rounds"] for r in rows[2:]) > 0  # refills after the checkpoint
    assert sum(r["curriculum/replayed_tasks"] for r in rows[2:]) > 0  # and replays of remembered tasks
    killed = Recorder(GRPOConfig(**options, run_dir=str(tmp_path / "r")))
    kill_at(killed, 3)
    killed.close()
    resumed = Recorder(GRPOConfig(**options, run_dir=str(tmp_path / "r")))
    assert resumed.resume() and resumed.source.curriculum.tasks
    resumed.train()
    assert_same_metrics(tmp_path / "full", tmp_path / "r")
    for x, y in zip(full.batches[4 - len(resumed.batches):], resumed.batches):
        assert x.task_ids == y.task_ids and torch.equal(x.input_ids, y.input_ids)


def test_off_policy_steps_is_checked(model_path, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="off_policy_steps=2 is not allowed; choose 0 or 1"):
        GRPOConfig(off_policy_steps=2).validate()
    with pytest.raises(ConfigError, match="backend native or hf"):
        GRPOConfig(off_policy_steps=1, backend="vllm").validate()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="runs in one process only"):
        GRPOTrainer(GRPOConfig(**{**OVERLAP, "dynamic_sampling": True}, model=str(model_path), run_dir=str(tmp_path)))


def test_an_error_in_the_sampling_thread_reaches_the_training_loop(model_path, tmp_path):
    class Failing(Recorder):
        def build_source(self):
            source = super().build_source()
            make = source.make_batch

            def failing(step):
                if step == 2:
                    raise Killed
                return make(step)

            source.make_batch = failing
            return source

    trainer = Failing(GRPOConfig(**{**OVERLAP, "save_every": 0}, model=str(model_path), run_dir=str(tmp_path)))
    with pytest.raises(Killed):
        trainer.train()
    assert trainer.step == 2
    trainer.close()
