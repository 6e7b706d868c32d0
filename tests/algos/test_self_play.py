"""Self-play (mathgym/algos/self_play.py): every seat's episode token-faithful and rewarded with its own
reward, GRPO groups by deal and seat, the opponent pool of earlier snapshots, determinism by seed.

TicTacToe-v0 with the untrained tiny model: a lone digit in a reply is a move, so its 32-token replies
play games of several moves (and forfeit some), enough to see both seats' sequences grow turn by turn.
"""

from __future__ import annotations

import json

import pytest
import torch

from mathgym.agents.tiny import tiny_model_path
from mathgym.algos.configs import GRPOConfig
from mathgym.algos.grpo import GRPOTrainer
from mathgym.algos.self_play import game_options, pool_opponent_draw, self_play_task_seeds
from mathgym.errors import ConfigError


def self_play_config(tmp_path, name: str, **overrides) -> GRPOConfig:
    options = dict(
        env="TicTacToe-v0", model=str(tiny_model_path()), warm_start_steps=0, self_play=True, num_tasks=2, group_size=4,
        steps=2, max_new_tokens=32, max_episode_tokens=1024, eval_tasks=0, progress=False, dynamic_sampling=False,
        run_dir=str(tmp_path / name), save_every=0, log_samples=0,
    )
    return GRPOConfig(**{**options, **overrides})


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    trainer = GRPOTrainer(self_play_config(tmp_path_factory.mktemp("self-play"), "run"))
    yield trainer
    trainer.close()


def test_each_seat_is_its_own_token_faithful_episode_with_its_own_reward(trainer):
    source = trainer.source
    games = source.play(0, self_play_task_seeds(0, 0, 2), [])
    assert len(games) == 2 * 4
    chat = trainer.policy.chat
    both_moved = 0
    for game in games:
        outcome = game.env.outcome
        for p, seat in enumerate(game.seats):
            episode = seat.episode
            if not seat.moves:
                assert not episode.token_ids  # the game ended before this seat's turn: nothing to train
                continue
            # one action span per move, numbered by the seat's own moves; everything else masked out
            steps = [s for s, m in zip(episode.step_index, episode.action_mask) if m]
            assert sorted(set(steps)) == list(range(seat.moves)) == list(range(len(episode.completions)))
            assert len(episode.step_rewards) == seat.moves
            assert episode.step_rewards[:-1] == [0.0] * (seat.moves - 1)
            assert episode.step_rewards[-1] == outcome.rewards[p]  # the seat's own final reward
            assert episode.correct == (outcome.winner == p)
            # the sequence starts with the seat's first prompt, rendered once...
            first = episode.messages[: 2 if episode.messages[0]["role"] == "system" else 1]
            prompt = chat.prompt_ids(first)
            assert episode.token_ids[: len(prompt)] == prompt
            # ...and the other seat's moves arrive as env tokens, not in the loss
            if seat.moves > 1:
                env_tokens = [t for t, m in zip(episode.token_ids[len(prompt):], episode.action_mask[len(prompt):]) if not m]
                assert "opponent" in chat.decode(env_tokens).lower()
        if all(seat.moves for seat in game.seats):
            both_moved += 1
            assert sum(outcome.rewards) == 0.0  # zero-sum: one seat's win is the other's loss
    assert both_moved >= 2, "the fixture no longer plays games in which both seats move"


def test_the_batch_groups_a_deals_games_by_seat_and_trains_through_the_one_step(trainer):
    batch, stats = trainer.source.make_batch(0)
    assert stats["rollout/games"] == 8.0 and stats["rollout/pool_games"] == 0.0
    groups: dict[int, set[str]] = {}
    for gid, task in zip(batch.group_ids.tolist(), batch.task_ids):
        groups.setdefault(gid, set()).add(task)
    # a group is one deal played from one seat: one task id each (the seat is in it), at most G episodes
    assert all(len(tasks) == 1 for tasks in groups.values())
    assert sorted(groups) == list(range(len(groups)))
    assert {t.rsplit("-", 1)[1] for ts in groups.values() for t in ts} <= {"seat0", "seat1"}
    assert torch.bincount(batch.group_ids).max() <= 4
    assert batch.sampled.all() and (batch.action_mask.sum(-1) > 0).all()
    assert set(batch.rewards.tolist()) <= {-1.0, 0.0, 1.0}
    result = trainer.learn(batch)
    assert any(k.startswith("loss/") for k in result.stats)
    assert result.mismatch["rollout/logprob_diff_max"] < 1e-3  # what each seat sampled is what the learner scores


def test_both_seats_in_one_group_under_self_play_groups_game(tmp_path):
    trainer = GRPOTrainer(self_play_config(tmp_path, "game", self_play_groups="game"))
    try:
        batch, _ = trainer.source.make_batch(0)
    finally:
        trainer.close()
    for gid in batch.group_ids.unique().tolist():
        tasks = {batch.task_ids[i].rsplit("-", 1)[0] for i in torch.nonzero(batch.group_ids == gid).flatten().tolist()}
        assert len(tasks) == 1  # one deal
    assert len(batch.group_ids.unique()) == 2  # two deals, both seats together


def test_the_pool_plays_earlier_snapshots_and_the_same_seed_replays_the_batch(tmp_path):
    config = self_play_config(tmp_path, "pool", self_play_pool=2, self_play_pool_every=1, self_play_pool_prob=1.0)
    trainer = GRPOTrainer(config)
    try:
        first, stats = trainer.source.make_batch(0)
        assert (tmp_path / "pool" / "self_play_pool" / "step-000000" / "config.json").exists()
        assert stats["rollout/pool_size"] == 1.0 and stats["rollout/pool_games"] == 1.0
        # the policy plays one seat of each game (seat g % 2 of game g): only its episodes are trained
        assert len(first) <= 8
        seats = [t.rsplit("-", 1)[1] for t in first.task_ids]
        assert seats.count("seat0") <= 4 and seats.count("seat1") <= 4
        trainer.learn(first)
        _, stats = trainer.source.make_batch(1)
        assert stats["rollout/pool_size"] == 2.0  # the starting weights and step 1's
        assert "rollout/pool_win_rate" in stats
    finally:
        trainer.close()
    again = GRPOTrainer(self_play_config(tmp_path, "again", self_play_pool=2, self_play_pool_every=1, self_play_pool_prob=1.0))
    try:
        replay, _ = again.source.make_batch(0)
    finally:
        again.close()
    assert torch.equal(replay.input_ids, first.input_ids) and torch.equal(replay.rewards, first.rewards)
    other = GRPOTrainer(self_play_config(tmp_path, "other", seed=1))
    try:
        different = other.source.make_batch(0)[0]
    finally:
        other.close()
    assert different.input_ids.shape != first.input_ids.shape or not torch.equal(different.input_ids, first.input_ids)


def test_a_short_self_play_run_logs_the_games_and_evaluates_against_the_expert(tmp_path):
    trainer = GRPOTrainer(self_play_config(tmp_path, "run", eval_tasks=4, steps=2))
    result = trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "rollout/first_seat_win_rate" in r]
    assert [r["step"] for r in trained] == [1, 2]
    assert result.eval_after is not None and 0.0 <= result.eval_after.pass_at_1 <= 1.0  # win rate vs the expert


def test_pool_draws_and_refusals():
    draws = [pool_opponent_draw(0, 5, 11, g, 3, 0.5) for g in range(200)]
    assert draws == [pool_opponent_draw(0, 5, 11, g, 3, 0.5) for g in range(200)]
    assert 40 < sum(d is None for d in draws) < 160 and {d for d in draws if d is not None} == {0, 1, 2}
    assert game_options("Nim-v0", {"game_options": {"piles": 2}, "opponent_randomness": 0.3}) == ("Nim-v0", {"piles": 2})
    with pytest.raises(ConfigError, match="two-player game"):
        game_options("MathReason-v0", {})
    with pytest.raises(ConfigError, match="self_play"):
        GRPOConfig(env="Nim-v0", self_play=True, off_policy_steps=1).validate()
