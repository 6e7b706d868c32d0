"""Dynamic sampling (DAPO): the group filter and the refill on hand-made rewards, then real runs
of the tiny model: counts logged, no flat group trained on, same seed same batch, exact resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from mathgym.algos.batch import Episode
from mathgym.algos.dynamic_sampling import extra_task_seeds, keep_group, select_groups


def group(rewards: list[float], correct: list[bool] | None = None, task: str = "t") -> list[Episode]:
    correct = correct or [r >= 1.0 for r in rewards]
    return [Episode("env", task, 0, step_rewards=[r], correct=c) for r, c in zip(rewards, correct)]


def test_keep_group_drops_groups_whose_rewards_agree():
    assert keep_group([1.0, 0.0, 0.0], [True, False, False])
    assert not keep_group([1.0, 1.0, 1.0], [True, True, True])
    assert not keep_group([0.0, 0.0], [False, False])
    assert not keep_group([0.3, 0.3, 0.3], [False, False, False])
    assert keep_group([0.3, 0.2], [False, False])  # partial rewards that differ: a signal, pass rate 0
    assert not keep_group([1.0], [True])  # one sample has no group baseline


def test_keep_group_pass_rate_band():
    rewards, correct = [1.0, 1.0, 1.0, 0.0], [True, True, True, False]  # pass rate 0.75
    assert keep_group(rewards, correct, (0.25, 0.75))
    assert not keep_group(rewards, correct, (0.25, 0.5))
    assert not keep_group([0.3, 0.2], [False, False], (0.1, 1.0))


def test_select_groups_refills_from_further_rounds_in_order():
    rounds = {
        0: [group([1, 1], task="a"), group([1, 0], task="b"), group([0, 0], task="c")],
        1: [group([0, 0], task="d"), group([0, 1], task="e"), group([1, 0], task="f")],
        2: [group([1, 0], task="never")],
    }
    asked = []

    def collect(r):
        asked.append(r)
        return rounds[r]

    chosen, stats = select_groups(collect, 3, max_extra_rounds=3)
    assert asked == [0, 1]  # stops once enough groups are kept
    assert [g[0].task_id for g in chosen] == ["b", "e", "f"]
    assert [e.group_id for g in chosen for e in g] == [0, 0, 1, 1, 2, 2]
    assert stats == {"rollout/filtered_groups": 3.0, "rollout/extra_rounds": 1.0}


def test_select_groups_stops_at_the_bound_and_tops_up_with_dropped_groups():
    rounds = {0: [group([1, 1], task="a"), group([0, 1], task="b")], 1: [group([0, 0], task="c"), group([0, 0], task="d")]}
    chosen, stats = select_groups(rounds.__getitem__, 2, max_extra_rounds=1)
    assert [g[0].task_id for g in chosen] == ["b", "a"]  # the kept group, then the first dropped one
    assert stats == {"rollout/filtered_groups": 3.0, "rollout/extra_rounds": 1.0}
    chosen, stats = select_groups(rounds.__getitem__, 2, max_extra_rounds=0)
    assert [g[0].task_id for g in chosen] == ["b", "a"] and stats["rollout/extra_rounds"] == 0.0


def test_extra_task_seeds_are_a_function_of_seed_step_and_round():
    a = extra_task_seeds(0, 5, 1, 4)
    assert a == extra_task_seeds(0, 5, 1, 4) and len(set(a)) == 4
    assert a != extra_task_seeds(0, 5, 2, 4) and a != extra_task_seeds(0, 6, 1, 4) and a != extra_task_seeds(1, 5, 1, 4)


# -- real runs ------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")

from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.core import Judgement, Task, TextEnv  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

COIN_ID = "mathgym-tests/CoinFlip-v0"


class CoinFlipEnv(TextEnv):
    """One turn; reward 1 when the reply's first character has an even code point: the random test
    model scores about half its samples, so some groups are flat and most are not."""

    def __init__(self, render_mode: str | None = None):
        super().__init__(max_turns=1, max_length=64, system_prompt="", render_mode=render_mode)

    def _sample_task(self, options):
        return Task(f"coin-{int(self.np_random.integers(100))}", "Say anything.", "")

    def _judge(self, action: str) -> Judgement:
        win = bool(action) and ord(action[0]) % 2 == 0
        return Judgement(float(win), Status.CORRECT if win else Status.WRONG, True, correct=win)


def register_coin_env() -> str:
    import gymnasium as gym

    if COIN_ID not in gym.registry:
        gym.register(COIN_ID, entry_point=CoinFlipEnv)
    return COIN_ID


GUESS = dict(num_tasks=2, group_size=2, max_new_tokens=3, eval_tasks=0, progress=False)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    return build_small_model(tmp_path_factory.mktemp("ds-model"))


class Recorder(GRPOTrainer):
    """Keeps the batches it trained on: its batch source's, as they come (in the sampling thread under overlap)."""

    def build_source(self):
        source = super().build_source()
        make = source.make_batch

        def recording(step):
            batch, stats = make(step)
            self.batches = [*getattr(self, "batches", []), batch]
            return batch, stats

        source.make_batch = recording
        return source


def run(model_path: Path, run_dir: Path, **options) -> Recorder:
    config = GRPOConfig(**{**dict(env=register_coin_env(), **GUESS), "model": str(model_path), "run_dir": str(run_dir), **options})
    trainer = Recorder(config)
    trainer.train()
    return trainer


def flat_groups(batch) -> int:
    return sum(len(set(batch.rewards[batch.group_ids == g].tolist())) == 1 for g in batch.group_ids.unique())


def test_dynamic_sampling_trains_on_no_flat_group_and_logs_its_counts(model_path, tmp_path):
    trainer = run(model_path, tmp_path / "a", steps=2, seed=3, dynamic_sampling=True, max_extra_rounds=6)
    rows = [r for r in read_metrics(tmp_path / "a") if "rollout/filtered_groups" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert sum(r["rollout/filtered_groups"] for r in rows) > 0 and sum(r["rollout/extra_rounds"] for r in rows) > 0
    for batch in trainer.batches:
        assert len(batch) == 2 * 2 and flat_groups(batch) == 0
    # the same seed gives the same batches
    again = run(model_path, tmp_path / "b", steps=2, seed=3, dynamic_sampling=True, max_extra_rounds=6)
    for x, y in zip(trainer.batches, again.batches):
        assert torch.equal(x.input_ids, y.input_ids) and torch.equal(x.rewards, y.rewards)
    # without it, the same seed trains on flat groups
    plain = run(model_path, tmp_path / "c", steps=2, seed=3, dynamic_sampling=False)
    assert sum(flat_groups(b) for b in plain.batches) > 0
    assert "rollout/filtered_groups" not in read_metrics(tmp_path / "c")[-1]


def test_dynamic_sampling_on_math_reason_stops_at_the_round_bound(model_path, tmp_path):
    # The untrained model solves nothing: every group is flat, each step runs its 1 + 2 rounds and is topped up.
    config = GRPOConfig(
        model=str(model_path), run_dir=str(tmp_path), steps=2, num_tasks=2, group_size=2, max_new_tokens=4, eval_tasks=0,
        progress=False, dynamic_sampling=True, max_extra_rounds=2,
    )
    trainer = Recorder(config)
    trainer.train()
    rows = [r for r in read_metrics(tmp_path) if "rollout/filtered_groups" in r]
    assert [(r["rollout/filtered_groups"], r["rollout/extra_rounds"]) for r in rows] == [(6.0, 2.0), (6.0, 2.0)]
    assert all(len(b) == 4 for b in trainer.batches)


def test_dynamic_sampling_resumes_exactly(model_path, tmp_path):
    from tests.algos.test_train_resume import assert_same_metrics, kill_at

    options = dict(steps=4, save_every=2, seed=3, dynamic_sampling=True, max_extra_rounds=4, learning_rate=5e-3)
    full = run(model_path, tmp_path / "full", **options)
    assert sum(r.get("rollout/extra_rounds", 0) for r in read_metrics(tmp_path / "full")[2:]) > 0  # refills after the checkpoint
    config = GRPOConfig(**{**dict(env=register_coin_env(), **GUESS), "model": str(model_path), "run_dir": str(tmp_path / "r"), **options})
    kill_at(Recorder(config), 3)
    resumed = Recorder(config)
    assert resumed.resume() and resumed.step == 2
    resumed.train()
    assert_same_metrics(tmp_path / "full", tmp_path / "r")
    for x, y in zip(full.batches[2:], resumed.batches):
        assert torch.equal(x.input_ids, y.input_ids)
