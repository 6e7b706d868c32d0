"""Data-parallel training: two real processes (gloo, CPU) make the single-process update,
log and checkpoint once, and resume from their checkpoint through ``accelerate launch -m mathgym``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from mathgym.algos.distributed import Distributed  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests import dp_worker  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LAUNCH_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _launch(args: list[str]) -> subprocess.CompletedProcess:
    """Run a launcher with the repository first on the path and no inherited rank variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S
    )
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done


def _state(run_dir: Path, step: int) -> dict:
    return torch.load(run_dir / "checkpoints" / f"step-{step:06d}" / "state.pt", map_location="cpu", weights_only=False)


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_shards_are_contiguous_and_cover_the_batch():
    seeds = list(range(100, 108))
    shards = [Distributed(rank, 4).shard(seeds) for rank in range(4)]
    assert shards == [[100, 101], [102, 103], [104, 105], [106, 107]]
    assert Distributed().shard(seeds) == seeds
    with pytest.raises(ConfigError, match="multiple of 3"):
        Distributed(0, 3).shard(seeds)


def test_two_processes_make_the_single_process_update_and_resume(tmp_path):
    model = str(build_small_model(tmp_path / "model"))
    one, two = tmp_path / "one", tmp_path / "two"
    threads = torch.get_num_threads()
    try:  # the config asks for 1 thread, as in the launched ranks; leave the session's setting as it was
        dp_worker.whole_batch_trainer_class()(dp_worker.whole_batch_config(model, str(one))).train()
    finally:
        torch.set_num_threads(threads)
    _launch([
        "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
        "tests/dp_worker.py", model, str(two),
    ])

    single, double = _state(one, 1), _state(two, 1)
    assert len(double["ranks"]) == 2 and "ranks" not in single
    for name, weight in single["model"].items():
        torch.testing.assert_close(double["model"][name], weight, atol=1e-5, rtol=0, msg=lambda m: f"{name}: {m}")
    # Adam's first step is nearly scale-free; its first moment is 0.1 × the gradient itself.
    for index, moments in single["optimizer"]["state"].items():
        got = double["optimizer"]["state"][index]["exp_avg"]
        torch.testing.assert_close(got, moments["exp_avg"], atol=1e-8, rtol=1e-4)
    (m1,), (m2,) = _metrics(one), _metrics(two)  # rank 0 alone logs, once per step
    for key in ("loss/grad_norm", "loss/policy", "rollout/reward", "rollout/completion_tokens_max", "loss/advantage_abs"):
        assert m2[key] == pytest.approx(m1[key], rel=1e-4, abs=1e-6), key

    # Resume the two-process run through the CLI: every rank loads the checkpoint, rank 0 writes.
    done = _launch([
        "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
        "-m", "mathgym", "train", "--resume", str(two), "--steps", "2",
    ])
    assert done.stdout.count("mathgym: resumed ") == 1, done.stdout  # said once, by rank 0
    assert [m["step"] for m in _metrics(two)] == [1, 2]
    resumed = _state(two, 2)
    assert resumed["step"] == 2 and len(resumed["ranks"]) == 2
    assert any(not torch.equal(w, double["model"][k]) for k, w in resumed["model"].items()), "step 2 changed nothing"
    assert (two / "final" / "config.json").is_file()


def test_algorithms_without_global_normalisers_refuse_to_run_data_parallel(monkeypatch, tmp_path):
    from mathgym.algos.ppo import PPOConfig, PPOTrainer

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ConfigError, match="ppo does not support data-parallel"):
        PPOTrainer(PPOConfig(model=str(tmp_path / "never-loaded"), run_dir=str(tmp_path / "run"), eval_tasks=0))


class _TwoRanks(Distributed):
    """Rank 0 of two, whose collective returns fixed per-rank values (the combining rules alone)."""

    def __init__(self, per_rank: list):
        super().__init__(0, 2)
        object.__setattr__(self, "per_rank", per_rank)

    def gather_objects(self, obj):
        return self.per_rank


def test_metrics_are_reduced_by_their_kind():
    ranks = _TwoRanks([
        {"rollout/reward": 0.2, "rollout/completion_tokens_max": 5.0, "rollout/status/correct": 0.5, "loss/policy": -0.1,
         "rollout/infra_failures": 1.0, "perf/tokens_per_s": 10.0, "perf/step_s": 2.0, "loss/entropy": 3.0},
        {"rollout/reward": 0.4, "rollout/completion_tokens_max": 7.0, "loss/policy": -0.3,
         "rollout/infra_failures": 2.0, "perf/tokens_per_s": 30.0, "perf/step_s": 1.0},
    ])
    out = ranks.reduce_metrics({}, summed=("loss/policy",))
    assert out == pytest.approx({
        "rollout/reward": 0.3, "rollout/completion_tokens_max": 7.0, "rollout/status/correct": 0.25, "loss/policy": -0.4,
        "rollout/infra_failures": 3.0, "perf/tokens_per_s": 40.0, "perf/step_s": 2.0, "loss/entropy": 3.0,
    })


def test_the_global_normaliser_and_groups_span_the_ranks():
    ranks = _TwoRanks([[3.0, 2.0, 8.0], [5.0, 2.0, 16.0]])
    norm = ranks.normalizer(torch.ones(2, 3), 8)
    assert (norm.num_tokens, norm.num_sequences, norm.max_tokens) == (8.0, 4.0, 16.0)
    ranks = _TwoRanks([([1.0, 0.0], [0, 0]), ([0.5, 0.5], [0, 0])])
    rewards, groups, own = ranks.gather_groups(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]))
    assert rewards.tolist() == [1.0, 0.0, 0.5, 0.5] and groups.tolist() == [0, 0, 1, 1] and own == slice(0, 2)
