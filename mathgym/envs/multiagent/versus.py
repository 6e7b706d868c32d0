"""VersusEnv: a two-player game as a single-agent text env, against a fixed opponent.

The agent plays one seat of a :class:`~mathgym.envs.multiagent.base.MultiAgentTextEnv`; the
opponent's moves are made inside ``reset`` and ``step``, so the agent sees its own chat only
(the game's messages for its seat: never what the game hides from it). The env keeps the whole
text-env contract (it is a :class:`~mathgym.core.TextEnv`): ``check_env``, ``mathgym check``.

The opponent is one of:

* ``"expert"`` — the game's ``expert_action``; with ``opponent_randomness=p`` it plays a random
  legal move instead with probability ``p`` (a weaker expert), drawn from the env's ``np_random``;
* ``"random"`` — a uniformly random legal move (from ``np_random``);
* any callable ``(messages) -> str``: it gets its seat's chat and answers as a policy would (a
  model: :func:`mathgym.agents.opponent.policy_opponent` wraps an ``LLMPolicy`` or a saved
  checkpoint). Its illegal moves forfeit the game, as the agent's do.

Statuses: ``in_progress`` during the game; at the end ``correct`` (the agent won), ``partial``
(no winner, a positive reward: a fair deal), ``wrong`` (lost, a draw, no deal); an illegal move of
the agent's is ``format_error`` and ends the game as a loss; an over-long reply is ``too_long``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.multiagent.base import MoveStatus, MultiAgentTextEnv, MultiStep, Outcome, pick_uniform
from mathgym.envs.multiagent.registry import make_multiagent
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.spaces import DEFAULT_MAX_LENGTH


class ChatOpponent(Protocol):
    """An opponent that answers a chat: ``(messages) -> reply``, the way a chat model is prompted."""

    def __call__(self, messages: list[dict[str, str]]) -> str: ...


Seat = int | Literal["alternate"]
#: Deals tried before ``reset`` gives up when the opponent ends the game before the agent's first
#: move (a random mover forfeiting a TextArena game); each redeal draws from ``np_random``.
REDEALS = 10


class VersusEnv(TextEnv):
    """A two-player game as a single-agent env: the agent plays one seat, a fixed opponent the other.

    Args:
        game: Id of the multi-agent env (:func:`~mathgym.envs.multiagent.registry.make_multiagent`).
        opponent: ``"expert"``, ``"random"``, or a callable ``(messages) -> str``.
        seat: The agent's seat (0 moves first), or ``"alternate"``: ``seed % 2`` when ``reset``
            gets a seed, else the seat after the previous episode's.
        opponent_randomness: Chance that the expert opponent plays a random legal move instead.
        game_options: Options of the game (e.g. ``{"piles": 4}`` for Nim).
        system_prompt: The game's system message (``None``: the game's own; ``""``: none).
        max_length: Longest observation/action in characters (the opponent's replies too).
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        game: str = "TicTacToe-v0",
        opponent: str | ChatOpponent = "expert",
        seat: Seat = "alternate",
        opponent_randomness: float = 0.0,
        game_options: Mapping[str, Any] | None = None,
        system_prompt: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        self.game_id = game
        options = {**dict(game_options or {}), "max_length": max_length}
        if system_prompt is not None:
            options["system_prompt"] = system_prompt
        self.game: MultiAgentTextEnv = make_multiagent(game, **options)
        if self.game.num_players != 2:
            raise ConfigError(f"{game} has {self.game.num_players} players; VersusEnv plays two-player games.")
        self.opponent = _checked_opponent(opponent, self.game, game)
        if seat not in (0, 1, "alternate") or isinstance(seat, bool):
            raise ConfigError(f"seat={seat!r} is not allowed; choose 0, 1 or 'alternate'.")
        if isinstance(opponent_randomness, bool) or not isinstance(opponent_randomness, (int, float)) or not 0 <= opponent_randomness <= 1:
            raise ConfigError(f"opponent_randomness={opponent_randomness!r} is not allowed; choose a number from 0 to 1.")
        super().__init__(max_turns=self.game.max_turns, max_length=max_length, system_prompt=self.game.system_prompt, render_mode=render_mode)
        self.seat_option = seat
        self.opponent_randomness = float(opponent_randomness)
        self.seat = 0 if seat == "alternate" else seat
        self._seed: int | None = None
        self._episodes = 0
        self._bind_expert()

    # -- the episode -----------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._seed = seed
        observation, info = super().reset(seed=seed, options=options)
        return observation, {**info, "seat": self.seat}

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        self.seat = self._next_seat()
        self._episodes += 1
        for _ in range(REDEALS):
            self.game.reset(seed=int(self.np_random.integers(2**31)), options=dict(options))
            last = self._opponent_moves()
            if not self.game.finished:
                break
        else:  # the opponent ended every deal before the agent's first move (a random mover's forfeits)
            raise ConfigError(f"{self.game_id} ended {REDEALS} times before seat {self.seat} moved: {last.info['outcome'].reason}")
        prompt = self.game.observe(self.seat)
        return Task(f"{self.game.task_id}-seat{self.seat}", prompt, "", {})

    def _next_seat(self) -> int:
        if self.seat_option != "alternate":
            return int(self.seat_option)
        if self._seed is not None:
            return self._seed % 2
        return self.seat if self._episodes == 0 else 1 - self.seat

    def _judge(self, action: str) -> Judgement:
        step = self.game.step(action)
        info = {"move": step.info.get("move"), "seat": self.seat}
        if step.info["move_status"] is not MoveStatus.LEGAL:
            if not self.game.finished:  # the game's rules let the agent try again (TextArena's error allowance)
                return Judgement(0.0, Status.FORMAT_ERROR, False, self.game.observe(self.seat), {"outcome": 0.0}, info=info)
            return self._end(step, Status.FORMAT_ERROR, info)
        if not self.game.finished:
            last = self._opponent_moves()
            if last is not None:
                info["opponent_move"] = last.info.get("move")
                step = last
        if self.game.finished:
            return self._end(step, None, info)
        return Judgement(0.0, Status.IN_PROGRESS, False, self.game.observe(self.seat), {"outcome": 0.0}, info=info)

    def _opponent_moves(self) -> MultiStep | None:
        """Play the opponent until it is the agent's turn; the last step, or ``None`` when it did not move."""
        last = None
        while not self.game.finished and self.game.current_player != self.seat:
            last = self.game.step(self._opponent_action())
        return last

    def _opponent_action(self) -> str:
        if callable(self.opponent):
            return self.opponent(self.game.messages(self.game.current_player))
        if self.opponent == "random" or self.np_random.random() < self.opponent_randomness:
            return pick_uniform(self.game.legal_moves(), self.np_random)
        return self.game.expert_action(rng=self.np_random)  # type: ignore[attr-defined]

    def _end(self, step: MultiStep, status: Status | None, info: dict[str, Any]) -> Judgement:
        outcome: Outcome = step.info["outcome"]
        reward = outcome.rewards[self.seat]
        won = outcome.winner == self.seat
        if status is None:
            status = Status.CORRECT if won else Status.PARTIAL if outcome.winner is None and reward > 0 else Status.WRONG
        if step.truncated and not step.terminated:
            status = Status.WRONG  # the opponent ran out of moves: the game stops, a draw
        info = {**info, "outcome": outcome.reason, "winner": outcome.winner}
        self._task = Task(self.task.task_id, self.task.prompt, f"{outcome.reason}; {self.game.hidden_state()}")
        return Judgement(reward, status, True, "", {"outcome": reward}, won, info)

    def _final_judgement(self, last: Judgement) -> Judgement:
        self._task = Task(self.task.task_id, self.task.prompt, f"out of moves; {self.game.hidden_state()}")
        return Judgement(0.0, Status.WRONG, False, "", {"outcome": 0.0}, False, last.info)

    # -- helpers ---------------------------------------------------------------------------

    def _expert_action(self) -> str:
        """The game's expert move for the agent's seat (its randomness from the game's ``np_random``)."""
        return self.game.expert_action()  # type: ignore[attr-defined]

    def legal_moves(self) -> list[str]:
        """The agent's legal moves now."""
        return self.game.legal_moves()

    # A game without an expert gives its versus env no ``expert_action`` (callers test hasattr).
    def _bind_expert(self) -> None:
        if hasattr(self.game, "expert_action"):
            self.expert_action = self._expert_action

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("expert_action", None)  # bound to this env: __setstate__ binds the copy's own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._bind_expert()

def _checked_opponent(opponent: Any, game: MultiAgentTextEnv, game_id: str) -> str | Callable[..., str]:
    if callable(opponent):
        return opponent
    if opponent not in ("expert", "random"):
        raise ConfigError(f"opponent={opponent!r} is not allowed; choose 'expert', 'random' or a callable (messages) -> str.")
    if opponent == "expert" and not hasattr(game, "expert_action"):
        raise ConfigError(f"{game_id} has no expert; choose opponent='random' or a callable (messages) -> str.")
    return opponent
