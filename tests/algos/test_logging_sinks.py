"""TensorBoard and W&B sinks: a short run writes both, and a resumed run continues them."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("torch")
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402

pytestmark = pytest.mark.torch
TINY = dict(warm_start_steps=0, num_tasks=2, group_size=2, max_new_tokens=8, eval_tasks=0, progress=False, threads=1)


def _scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_gets_every_step_and_a_resume_does_not_duplicate_them(tmp_path):
    pytest.importorskip("tensorboard")
    run_dir = tmp_path / "run"
    GRPOTrainer(GRPOConfig(**TINY, steps=2, save_every=1, run_dir=str(run_dir), log_tensorboard=True)).train()
    first = _scalars(run_dir)
    assert [step for step, _ in first["rollout/reward"]] == [1, 2]
    # As if killed after step 2 was logged but before its checkpoint: the latest checkpoint is step 1.
    shutil.rmtree(run_dir / "checkpoints" / "step-000002")
    (run_dir / "checkpoints" / "latest").write_text("step-000001\n")
    resumed = GRPOTrainer(GRPOConfig(**TINY, steps=3, save_every=1, run_dir=str(run_dir), log_tensorboard=True))
    assert resumed.resume() and resumed.step == 1
    resumed.train()
    steps = [step for step, _ in _scalars(run_dir)["rollout/reward"]]
    assert steps == [1, 2, 3], steps


def test_wandb_offline_run_is_written_and_reused_on_resume(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    GRPOTrainer(GRPOConfig(**TINY, steps=1, save_every=1, run_dir=str(run_dir), log_wandb=True)).train()
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and runs[0].name.endswith(run_id)
    assert (runs[0] / f"run-{run_id}.wandb").stat().st_size > 0
    resumed = GRPOTrainer(GRPOConfig(**TINY, steps=2, save_every=1, run_dir=str(run_dir), log_wandb=True))
    assert resumed.resume() and resumed.step == 1  # a real resume, from the step-1 checkpoint
    resumed.train()
    assert (run_dir / "wandb_run_id").read_text().strip() == run_id
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert runs and all(path.name.endswith(run_id) for path in runs), runs  # the same W&B run continued
