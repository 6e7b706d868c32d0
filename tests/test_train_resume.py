"""Checkpoints: kill a run mid-way, resume it, and get the same metrics step for step."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.checkpoint import latest_checkpoint  # noqa: E402
from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

TIMING = ("perf/",)


class Killed(Exception):
    pass


class _KilledAt(GRPOTrainer):
    kill_at = -1

    def train_step(self):
        if self.step == self.kill_at:
            raise Killed
        return super().train_step()


def _config(model_path, run_dir):
    return GRPOConfig(
        model=str(model_path), env_kwargs={"system_prompt": ""}, steps=5, num_tasks=2, group_size=3,
        max_new_tokens=8, learning_rate=5e-3, lr_schedule="linear", save_every=2, eval_tasks=4, progress=False,
        run_dir=str(run_dir), seed=3,
    )


def _comparable(records):
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in records]


def test_kill_and_resume_gives_the_same_metrics(tmp_path):
    model_path = build_small_model(tmp_path / "model")
    full = GRPOTrainer(_config(model_path, tmp_path / "full")).train()

    killed = _KilledAt(_config(model_path, tmp_path / "killed"))
    killed.kill_at = 3
    with pytest.raises(Killed):
        killed.train()
    assert latest_checkpoint(tmp_path / "killed").name == "step-000002"
    assert max(r["step"] for r in read_metrics(tmp_path / "killed")) == 3  # logged past the checkpoint

    resumed = GRPOTrainer(_config(model_path, tmp_path / "killed"))
    assert resumed.resume() and resumed.step == 2
    result = resumed.train()

    a, b = _comparable(read_metrics(tmp_path / "full")), _comparable(read_metrics(tmp_path / "killed"))
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        for key in ra:
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-6), (ra["step"], key)
    assert result.eval_after.pass_at_1 == full.eval_after.pass_at_1
    for name in ("config.yaml", "metrics.jsonl", "reward_curve.png", "eval.json", "final/config.json"):
        assert (tmp_path / "killed" / name).exists(), name
    assert json.loads((tmp_path / "killed" / "eval.json").read_text())["before"]["num_tasks"] == 4


def test_checkpoint_is_written_atomically(tmp_path):
    model_path = build_small_model(tmp_path / "model")
    trainer = GRPOTrainer(_config(model_path, tmp_path / "run"))
    trainer.step = 7
    path = trainer.save()
    assert path.name == "step-000007" and (path / "state.pt").is_file()
    assert not [p for p in (tmp_path / "run" / "checkpoints").iterdir() if p.name.startswith(".tmp")]
    state = torch.load(path / "state.pt", weights_only=False)
    assert {"model", "optimizer", "scheduler", "generator", "rng", "step"} <= state.keys()
