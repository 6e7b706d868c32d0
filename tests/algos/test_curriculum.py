"""Curricula: the band sampler and the level mover on hand-made pass rates, then real runs of the
tiny model: replayed tasks, levels that move, and exact resume of the curriculum's state."""

from __future__ import annotations

import pytest

from mathgym.algos.curriculum import LevelCurriculum, PassRateBand, ema, next_level


def test_ema_and_next_level_by_hand():
    assert ema(None, 0.25, 0.5) == 0.25
    assert ema(0.25, 1.0, 0.5) == 0.625
    assert ema(0.8, 0.0, 0.25) == pytest.approx(0.6)
    assert next_level(2, 0.81, (0.2, 0.8), 4) == 3
    assert next_level(2, 0.8, (0.2, 0.8), 4) == 2  # bounds are in the band
    assert next_level(2, 0.19, (0.2, 0.8), 4) == 1
    assert next_level(0, 0.0, (0.2, 0.8), 4) == 0 and next_level(4, 1.0, (0.2, 0.8), 4) == 4


def test_band_replays_tasks_in_the_band_and_holds_back_the_others():
    band = PassRateBand(band=(0.2, 0.8), weight=0.5, revisit=0.0, replay=0.5, seed=0)
    band.observe(0, [(10, "easy", 1.0), (11, "mid", 0.5), (12, "hard", 0.0), (13, "mid2", 0.25)])
    band.observe(1, [(11, "mid", 0.5)])  # mid played later than mid2
    fresh = [100, 101, 102, 103]
    assert band.draw(2, fresh) == [13, 11, 100, 101]  # least recently played first, half the batch at most
    band.replay = 0.25
    assert band.draw(2, fresh) == [13, 100, 101, 102]
    # a task's pass rate is a moving average over its visits: "easy" falls into the band after a failure
    band.observe(2, [(99, "easy", 0.0)])
    assert band.tasks["easy"].pass_rate == 0.5 and band.tasks["easy"].seed == 10 and band.tasks["easy"].last_step == 2
    band.replay = 1.0
    assert band.draw(3, fresh) == [13, 11, 10, 100]


def test_band_revisits_held_back_tasks_with_its_probability():
    band = PassRateBand(band=(0.2, 0.8), revisit=1.0, replay=1.0, seed=0)
    band.observe(0, [(10, "easy", 1.0), (12, "hard", 0.0)])
    assert band.draw(1, [100, 101, 102]) == [10, 12, 100]
    band.revisit = 0.0
    assert band.draw(1, [100, 101, 102]) == [100, 101, 102]
    band.revisit = 0.5
    draws = [tuple(band.draw(step, [100, 101, 102])) for step in range(40)]
    assert draws == [tuple(band.draw(step, [100, 101, 102])) for step in range(40)]  # a function of (seed, step)
    assert 10 < sum(10 in d for d in draws) < 30


def test_band_and_level_state_round_trip():
    band = PassRateBand(seed=3)
    band.observe(0, [(10, "a", 0.5), (11, "b", 1.0)])
    copy = PassRateBand(seed=3)
    copy.load_state_dict(band.state_dict())
    assert copy.tasks == band.tasks and copy.draw(5, [1, 2, 3, 4]) == band.draw(5, [1, 2, 3, 4])
    level = LevelCurriculum(level=1, top=4, band=(0.2, 0.8), weight=0.5)
    level.observe(0, [(0, "x", 1.0), (1, "y", 0.5)])  # average 0.75: stays
    assert (level.level, level.average) == (1, 0.75)
    level.observe(1, [(0, "x", 1.0)])  # 0.875 > 0.8: one up, the average restarts
    assert (level.level, level.average) == (2, None)
    other = LevelCurriculum()
    other.load_state_dict(level.state_dict())
    assert (other.level, other.average) == (2, None)


# -- real runs ------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")

from mathgym.algos.checkpoint import load_checkpoint  # noqa: E402
from mathgym.algos.grpo import GRPOConfig  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from tests.algos.test_dynamic_sampling import GUESS, Recorder, model_path, register_coin_env  # noqa: E402, F401


def test_pass_rate_band_run_replays_tasks_and_resumes_exactly(model_path, tmp_path):
    from tests.algos.test_train_resume import assert_same_metrics, kill_at

    options = dict(
        env=register_coin_env(), **{**GUESS, "num_tasks": 4}, model=str(model_path), steps=4, save_every=2, seed=3,
        learning_rate=5e-3, curriculum="pass_rate_band", curriculum_band_min=0.5, curriculum_band_max=0.5, curriculum_revisit=0.5,
        dynamic_sampling=False,  # the curriculum alone draws the batches
    )
    full = Recorder(GRPOConfig(**options, run_dir=str(tmp_path / "full")))
    full.train()
    rows = read_metrics(tmp_path / "full")
    assert sum(r["curriculum/replayed_tasks"] for r in rows[1:]) > 0
    earlier = set(full.batches[0].task_ids)
    assert earlier & set(full.batches[1].task_ids)  # a task of step 1 played again at step 2

    killed = Recorder(GRPOConfig(**options, run_dir=str(tmp_path / "r")))
    kill_at(killed, 3)
    resumed = Recorder(GRPOConfig(**options, run_dir=str(tmp_path / "r")))
    assert resumed.resume() and resumed.source.curriculum.tasks
    resumed.train()
    assert_same_metrics(tmp_path / "full", tmp_path / "r")
    for x, y in zip(full.batches[2:], resumed.batches):
        assert x.task_ids == y.task_ids and torch.equal(x.input_ids, y.input_ids)
    # the restored pass rates matter: without them step 3 would draw other tasks
    saved, blank = PassRateBand(band=(0.5, 0.5), revisit=0.5, seed=3), PassRateBand(band=(0.5, 0.5), revisit=0.5, seed=3)
    saved.load_state_dict(load_checkpoint(tmp_path / "r" / "checkpoints" / "step-000002")["curriculum"])
    assert saved.draw(2, resumed.source.task_seeds(2)) != blank.draw(2, resumed.source.task_seeds(2))


def test_level_curriculum_moves_the_generator_level_down_when_nothing_is_solved(model_path, tmp_path):
    config = GRPOConfig(
        model=str(model_path), run_dir=str(tmp_path), steps=3, num_tasks=1, group_size=2, max_new_tokens=2, eval_tasks=0,
        progress=False, save_every=0, env_kwargs={"difficulty": 2}, curriculum="level", curriculum_ema=1.0,
        dynamic_sampling=False,  # one round a step: the level moves once a step
    )
    trainer = Recorder(config)
    trainer.train()
    assert [r["curriculum/level"] for r in read_metrics(tmp_path)] == [2.0, 1.0, 0.0]
    assert [b.task_ids[0][:6] for b in trainer.batches] == ["gen-L2", "gen-L1", "gen-L0"]  # the tasks of each level
    assert trainer.eval_env_kwargs["difficulty"] == 2  # evaluation keeps the configured level
