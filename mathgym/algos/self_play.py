"""Self-play: the policy plays every seat of a two-player game, each seat's tokens trained with its own reward.

:class:`SelfPlaySource` is a batch source (:mod:`mathgym.algos.sources`) over the game itself
(:func:`~mathgym.envs.multiagent.registry.make_multiagent`, the multi-agent contract), not over its
single-agent ``gym.make`` version against the expert. A step plays ``group_size`` games of each of
``num_tasks`` deals (``reset(seed=s)`` deals the same game ``group_size`` times) and returns one
:class:`~mathgym.algos.batch.Episode` per seat per game, collated into the collector's own
:class:`~mathgym.algos.batch.RolloutBatch`, so GRPO (or any rollout algorithm) trains on it unchanged
through the one :meth:`~mathgym.algos.trainer.Trainer.train_step`.

A seat's episode is token-faithful as a single-agent one is (:mod:`mathgym.algos.rollout`): its first
prompt is its chat rendered once (:meth:`~mathgym.agents.chat_format.ChatFormat.prompt_ids`); each
later turn appends, after the seat's own action tokens, the tokens the chat template puts after an
assistant turn and before the next (:meth:`~mathgym.agents.chat_format.ChatFormat.env_turn_ids`),
holding what the game told the seat since its last move (the other seat's move: env tokens, out of
the loss). Only the seat's own moves are action tokens. Its reward is the seat's final reward, on its
last move (``step_rewards`` are 0 before); a seat that never moved (the game ended first) has no
tokens to train and no episode.

Groups (``self_play_groups``): ``seat`` (default) puts the ``G`` games of one deal played from one
seat in a group, so GRPO's advantage of a seat's episode is its reward minus the mean of that seat's
rewards over the deal's ``G`` games, divided by their std (``scale_rewards``): a per-seat baseline,
so the side the deal favours is not rewarded for being dealt it. ``game`` puts both seats of the
``G`` games in one group of ``2G``: in a zero-sum game whose games all end decisively the mean is 0
and the advantage is the reward over the group's std (the winner's moves up, the loser's down).

The opponent pool (``self_play_pool > 0``): every ``self_play_pool_every`` steps the weights are
saved under the run directory (``self_play_pool/step-NNNNNN``, a model directory); the last
``self_play_pool`` snapshots saved up to this step form the pool. Each game is, with probability
``self_play_pool_prob``, played against a pool snapshot drawn uniformly (loaded as a
:class:`~mathgym.agents.opponent.PolicyOpponent`, sampled like the policy): the policy then plays
seat ``g % 2`` of the deal's game ``g`` and only that seat enters the batch. Which games, which
snapshot and every sample are drawn from streams keyed by ``(seed, step, deal, game, seat, turn)``:
the same seed replays the same batch, and a resumed run finds the snapshots it saved on disk.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from mathgym.agents.chat_format import ChatFormat
from mathgym.agents.opponent import PolicyOpponent
from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.configs import TrainConfig
from mathgym.algos.distributed import Distributed
from mathgym.algos.dynamic_sampling import Group, extra_task_seeds, select_groups
from mathgym.algos.rollout import sample_stream_seed
from mathgym.algos.sources import BatchSource
from mathgym.envs.multiagent.base import MoveStatus, MultiAgentTextEnv
from mathgym.envs.multiagent.registry import make_multiagent, multiagent_spec
from mathgym.errors import ConfigError, UnknownEnvError

__all__ = ["OpponentPool", "SelfPlaySource", "game_options", "pool_opponent_draw", "self_play_task_seeds"]

_MASK = 2**64 - 1
#: The options of a versus env (``gym.make(id)``) that are not the game's own.
_VERSUS_ONLY = ("game", "opponent", "seat", "opponent_randomness", "game_options", "render_mode")


def self_play_task_seeds(seed: int, step: int, num_tasks: int) -> list[int]:
    """The deals of ``step``: the seeds a rollout run's tasks have (a pure function of seed and step)."""
    base = seed * 1_000_003 + step * num_tasks
    return [base + i for i in range(num_tasks)]


def pool_opponent_draw(seed: int, step: int, task_seed: int, game: int, pool_size: int, prob: float) -> int | None:
    """Which pool snapshot plays game ``game`` of deal ``task_seed`` at ``step`` (``None``: the policy itself).

    Example:
        >>> pool_opponent_draw(0, 3, 7, 1, 0, 1.0) is None         # an empty pool: self-play
        True
        >>> pool_opponent_draw(0, 3, 7, 1, 2, 1.0) in (0, 1)
        True
    """
    if pool_size == 0 or prob <= 0:
        return None
    rng = np.random.default_rng(np.random.SeedSequence([seed & _MASK, step, task_seed & _MASK, game, 0x5E1F]))
    draw, index = rng.random(), int(rng.integers(pool_size))
    return index if draw < prob else None


def game_options(env_id: str, env_kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The multi-agent game behind ``env_id`` and its options, from the versus env's ``env_kwargs``
    (``game_options`` and the shared ``system_prompt``, ``max_length``).

    Raises:
        ConfigError: ``env_id`` is no two-player game.
    """
    game = env_kwargs.get("game")
    if game is None:
        with contextlib.suppress(gym.error.Error):
            game = gym.spec(env_id).kwargs.get("game")
    game = game or env_id
    try:
        multiagent_spec(game)
    except UnknownEnvError:
        raise ConfigError(
            f"self_play plays a two-player game (make_multiagent): {env_id!r} is none; choose Nim-v0, TicTacToe-v0, "
            "KuhnPoker-v0, Negotiation-v0 or a TextArena/ game (docs/two-player.md)."
        ) from None
    options = dict(env_kwargs.get("game_options") or {})
    options.update({k: v for k, v in env_kwargs.items() if k not in _VERSUS_ONLY})
    return game, options


class OpponentPool:
    """Earlier snapshots of the run's policy, saved as model directories under ``directory()``.

    Args:
        directory: Where the snapshots go (a callable: the run directory is fixed after the source is built).
        size: Snapshots in the pool (the last ones saved up to the step).
        every: Steps between snapshots (step 0's is the starting weights).
        device: Where a snapshot plays.
    """

    def __init__(self, directory: Callable[[], Path], size: int, every: int, device: str):
        self.directory, self.size, self.every, self.device = directory, size, every, device
        self._loaded: dict[Path, PolicyOpponent] = {}

    def path(self, step: int) -> Path:
        return self.directory() / f"step-{step:06d}"

    def snapshot(self, step: int, policy: LLMPolicy) -> None:
        """Save ``policy`` as step ``step``'s snapshot when one is due and not yet on disk (a resumed run's)."""
        path = self.path(step)
        if self.size == 0 or step % self.every or path.exists():
            return
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        policy.save_pretrained(tmp)
        tmp.rename(path)  # atomic: a snapshot on disk is whole

    def members(self, step: int) -> list[Path]:
        """The pool at ``step``: the last ``size`` snapshots due at or before it, oldest first."""
        due = [self.path(s) for s in range(0, step + 1, self.every)]
        members = [p for p in due if p.exists()][-self.size:] if self.size else []
        for stale in set(self._loaded) - set(members):
            del self._loaded[stale]
        return members

    def policy(self, path: Path) -> LLMPolicy:
        """The snapshot at ``path``, loaded once (:class:`PolicyOpponent`)."""
        if path not in self._loaded:
            self._loaded[path] = PolicyOpponent(path, device=self.device)
        return self._loaded[path].policy


@dataclass
class Seat:
    """One seat of one game, as its player sees it: its episode and its chat before its last action."""

    episode: Episode
    chat: ChatFormat
    messages: list[dict[str, Any]] = field(default_factory=list)
    moves: int = 0
    forfeit: str = ""  # the seat's own illegal or over-long move ended the game


@dataclass
class Game:
    """A game being played: the env, who plays each seat (``None``: the policy; else a pool snapshot)."""

    env: MultiAgentTextEnv
    deal: int  # index of the deal in the round
    task_seed: int
    index: int  # game of the deal (0..G-1)
    players: tuple[Path | None, ...]
    seats: list[Seat]
    over: bool = False
    cut: bool = False  # the token or turn budget ended it: no winner, rewards 0


class SelfPlaySource(BatchSource):
    """Games of the policy against itself (and a pool of its earlier snapshots); see the module docstring.

    Args:
        config: The run's configuration (``self_play_*`` options, ``num_tasks`` deals of ``group_size`` games).
        dist: Refused above one process.
        policy: The policy in every seat.
        env_kwargs: The versus env's options; the game's are taken from them (:func:`game_options`).
        pool_dir: Where the opponent pool's snapshots go (the run directory's ``self_play_pool``).
    """

    def __init__(self, config: TrainConfig, dist: Distributed, policy: LLMPolicy, env_kwargs: dict[str, Any],
                 pool_dir: Callable[[], Path]):
        super().__init__()
        if dist.world_size > 1:
            raise ConfigError("self_play runs in one process; launch it without accelerate/torchrun.")
        self.config, self.policy = config, policy
        self.game_id, self.game_options = game_options(config.env, env_kwargs)
        self.pool = OpponentPool(pool_dir, config.self_play_pool, config.self_play_pool_every, str(policy.device))
        self.sampling = SamplingParams(config.temperature, config.top_p, config.max_new_tokens)

    def make_batch(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        cfg = self.config
        self.pool.snapshot(step, self.policy)
        pool = self.pool.members(step)
        played: list[Game] = []

        def rounds(round_: int) -> list[Group]:
            seeds = self_play_task_seeds(cfg.seed, step, cfg.num_tasks) if round_ == 0 else extra_task_seeds(cfg.seed, step, round_, cfg.num_tasks)
            games = self.play(step, seeds, pool)
            played.extend(games)
            return seat_groups(games, cfg.self_play_groups)

        if cfg.dynamic_sampling:  # groups whose rewards all agree make way for those of further deals
            per_deal = 2 if cfg.self_play_groups == "seat" else 1
            band = (cfg.keep_pass_rate_min, cfg.keep_pass_rate_max)
            groups, stats = select_groups(rounds, cfg.num_tasks * per_deal, cfg.max_extra_rounds, band)
        else:
            groups, stats = rounds(0), {}
            for gid, group in enumerate(groups):
                for episode in group:
                    episode.group_id = gid
        episodes = [e for group in groups for e in group]
        return RolloutBatch.from_episodes(episodes, self.policy.pad_token_id), {**stats, **game_metrics(played, len(pool))}

    def play(self, step: int, task_seeds: Sequence[int], pool: Sequence[Path]) -> list[Game]:
        """Play ``group_size`` games of each deal of ``task_seeds``, every seat to its end."""
        cfg = self.config
        games = []
        for deal, seed in enumerate(task_seeds):
            for g in range(cfg.group_size):
                env = make_multiagent(self.game_id, **self.game_options)
                env.reset(seed=int(seed))
                drawn = pool_opponent_draw(cfg.seed, step, int(seed), g, len(pool), cfg.self_play_pool_prob)
                players = tuple(None if drawn is None or p == g % env.num_players else pool[drawn] for p in range(env.num_players))
                seats = [Seat(Episode(cfg.env, f"{env.task_id}-seat{p}", 0, sampled=True), self.chat_of(players[p]))
                         for p in range(env.num_players)]
                games.append(Game(env, deal, int(seed), g, players, seats))
        sampling_seed = cfg.seed * 1_000_003 + step
        with contextlib.ExitStack() as scopes:
            for player in {None, *(p for game in games for p in game.players)}:
                scopes.enter_context(self.policy_of(player).reusing_turns())
            while any(not game.over for game in games):
                self.play_turn(games, sampling_seed)
        for game in games:
            settle(game)
        return games

    def chat_of(self, player: Path | None) -> ChatFormat:
        return self.policy_of(player).chat

    def policy_of(self, player: Path | None) -> LLMPolicy:
        return self.policy if player is None else self.pool.policy(player)

    def play_turn(self, games: list[Game], sampling_seed: int) -> None:
        """One move of every game not over: its seat's prompt extended, the moves of each player sampled in one call."""
        cfg = self.config
        by_player: dict[Path | None, list[tuple[Game, Seat, int]]] = {}
        for game in games:
            if game.over:
                continue
            seat = game.seats[game.env.current_player]
            room = self.extend_prompt(game, seat)
            if room <= 0 or (cfg.max_turns and seat.moves >= cfg.max_turns):
                game.over = game.cut = True
                seat.episode.truncated_tokens |= room <= 0
                seat.episode.truncated_turns |= room > 0
                continue
            by_player.setdefault(game.players[game.env.current_player], []).append((game, seat, room))
        for player, moves in by_player.items():
            policy = self.policy_of(player)
            longest = max(1, min(self.sampling.max_new_tokens, max(room for _, _, room in moves)))
            params = SamplingParams(self.sampling.temperature, self.sampling.top_p, longest, self.sampling.stop)
            seeds = [sample_stream_seed(sampling_seed, game.task_seed, game.index * len(game.seats) + game.env.current_player, seat.moves)
                     for game, seat, _ in moves]
            generations = policy.generate([seat.episode.token_ids for _, seat, _ in moves], params, seeds=seeds)
            for (game, seat, room), generation in zip(moves, generations):
                self.move(game, seat, generation, room)

    def extend_prompt(self, game: Game, seat: Seat) -> int:
        """Append the seat's prompt (its first turn) or the env turn since its last move; the tokens left to act in."""
        episode, env = seat.episode, game.env
        player = env.current_player
        if not seat.moves:
            seat.messages = env.messages(player)
            episode.extend(seat.chat.prompt_ids(seat.messages))
        else:
            news = env.observe(player)
            reply = seat.chat.env_turn_ids(seat.messages, news, episode.token_ids[-1] if episode.token_ids else None)
            if len(episode.token_ids) + len(reply) >= self.config.max_episode_tokens:
                return 0
            seat.messages = [*seat.messages, {"role": "assistant", "content": episode.completions[-1]}, {"role": "user", "content": news}]
            episode.extend(reply)
        episode.observations.append(env.observe(player))
        return self.config.max_episode_tokens - len(episode.token_ids)

    def move(self, game: Game, seat: Seat, generation: Any, room: int) -> None:
        """Play the seat's sampled move: its tokens into its episode (action tokens), the game stepped."""
        tokens, logprobs = generation.token_ids[:room], generation.logprobs[:room]
        text = seat.chat.action_text(tokens)
        episode = seat.episode
        episode.extend(tokens, action_step=seat.moves, logprobs=logprobs)
        episode.completions.append(text)
        episode.truncated_tokens |= generation.finish_reason == "length" or len(tokens) < len(generation.token_ids)
        episode.step_rewards.append(0.0)
        seat.moves += 1
        step = game.env.step(text)
        status = step.info["move_status"]
        if status != MoveStatus.LEGAL and (step.terminated or step.truncated):
            seat.forfeit = "too_long" if status == MoveStatus.TOO_LONG else "format_error"
        if step.terminated or step.truncated:
            game.over = True
            episode.truncated_turns |= step.truncated


def settle(game: Game) -> None:
    """Each seat's final reward on its last move, its status and final chat."""
    outcome = game.env.outcome
    rewards = (0.0,) * len(game.seats) if game.cut or outcome is None else outcome.rewards
    winner = None if game.cut or outcome is None else outcome.winner
    for p, seat in enumerate(game.seats):
        episode = seat.episode
        if episode.step_rewards:
            episode.step_rewards[-1] = float(rewards[p])
        episode.correct = winner == p
        episode.status = seat.forfeit or ("correct" if winner == p else "partial" if winner is None and rewards[p] > 0 else "wrong")
        episode.messages = game.env.messages(p)


def seat_groups(games: Sequence[Game], groups: str) -> list[Group]:
    """The policy's seat episodes of ``games`` in groups: by (deal, seat) or by deal (``groups``); seats
    played by a pool snapshot, and seats that never moved, are left out."""
    keyed: dict[tuple[int, int], Group] = {}
    for game in games:
        for p, seat in enumerate(game.seats):
            if game.players[p] is None and seat.moves:
                keyed.setdefault((game.deal, p if groups == "seat" else 0), []).append(seat.episode)
    return [keyed[key] for key in sorted(keyed)]


def game_metrics(games: Sequence[Game], pool_size: int) -> dict[str, float]:
    """``rollout/...`` of the games played: first seat's win rate in self-play, win rate against the pool, forfeits, length."""
    selfplay = [g for g in games if all(p is None for p in g.players)]
    pooled = [g for g in games if g not in selfplay]
    metrics = {
        "rollout/games": float(len(games)),
        "rollout/pool_size": float(pool_size),
        "rollout/pool_games": len(pooled) / max(len(games), 1),
        "rollout/forfeits": sum(any(s.forfeit for s in g.seats) for g in games) / max(len(games), 1),
        "rollout/cut_games": sum(g.cut for g in games) / max(len(games), 1),
        "rollout/moves_per_game": sum(s.moves for g in games for s in g.seats) / max(len(games), 1),
    }
    if selfplay:
        metrics["rollout/first_seat_win_rate"] = sum(g.seats[0].episode.correct for g in selfplay) / len(selfplay)
    if pooled:
        metrics["rollout/pool_win_rate"] = sum(
            s.episode.correct for g in pooled for p, s in enumerate(g.seats) if g.players[p] is None
        ) / len(pooled)
    return metrics
