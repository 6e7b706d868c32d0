"""The multi-agent text-env contract: turns, an observation and a chat per player, a reward per player.

A :class:`MultiAgentTextEnv` is the text-env contract (DESIGN.md) for games of several players
who take turns. It is not a ``gymnasium.Env`` (gymnasium's ``Env`` has one agent); wrap it in
:class:`~mathgym.envs.multiagent.versus.VersusEnv` for one, against a fixed opponent.

What a caller sees (a self-play collector drives every seat this way)::

    observations, info = env.reset(seed=0)         # {current player: its first user message}
    while True:
        player = env.current_player                # whose turn it is
        chat = env.messages(player)                # that player's chat prompt (system + user ... user)
        step = env.step(policy(chat))              # MultiStep: observations, rewards, terminated, truncated, info
        if step.terminated or step.truncated:
            break
    step.rewards, step.info["outcome"]             # a reward per player; who won, and why

- Each player has its own chat: the system prompt, then user messages (what the game told that
  player since its last move: the rules and its private information first, then the other
  players' moves) and its own moves as assistant messages. A player's chat never holds what
  the game hides from it (the other player's card, the other side's values).
- ``step(action)`` plays the current player's move. A ``str`` is never an error: a move the
  game cannot read or that breaks its rules is an ``illegal_move`` (:class:`MoveStatus`) and the
  mover forfeits (:meth:`MultiAgentTextEnv.forfeit`: it loses, reward -1); a move over
  ``max_length`` characters is refused unread (``too_long``) with the same consequence.
  Non-``str`` actions and calls out of order raise :mod:`mathgym.errors` errors.
- Rewards are 0 until the end, then the :class:`Outcome`'s (win +1 / loss -1 / draw 0 in the
  zero-sum games, chips in poker, the value of a deal in a negotiation).
- A game ends by its own rules (``terminated``); ``truncated`` only when the player to move has
  used up ``max_turns`` moves (a draw, rewards 0). Never both.
- Everything random comes from ``self.np_random`` (seeded by ``reset``): same seed, same game.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import numpy as np
from gymnasium.utils import seeding

from mathgym.core import copy_messages
from mathgym.errors import ConfigError, EpisodeFinishedError, InvalidActionError, ResetNeededError, require_option
from mathgym.spaces import DEFAULT_MAX_LENGTH
from mathgym.untrusted import clean_text


class MoveStatus(enum.StrEnum):
    """What the game made of one move (``info["move_status"]``).

    * ``legal`` — the move was played.
    * ``illegal_move`` — no move could be read, or the move breaks the rules: the mover forfeits.
    * ``too_long`` — the reply is longer than ``max_length``: refused unread, the mover forfeits.
    """

    LEGAL = "legal"
    ILLEGAL_MOVE = "illegal_move"
    TOO_LONG = "too_long"


@dataclass(frozen=True)
class Outcome:
    """How a game ended.

    Attributes:
        rewards: Each player's reward, by seat.
        winner: The seat that won, or ``None`` (a draw, no deal, a game cut short).
        reason: One line saying why it ended.
    """

    rewards: tuple[float, ...]
    winner: int | None
    reason: str


@dataclass(frozen=True)
class GameStart:
    """What a game's ``_new_game`` returns.

    Attributes:
        task_id: Stable id of the deal (same seed, same id).
        prompts: Each player's first user message (rules and its private information), by seat.
        first_player: The seat that moves first.
    """

    task_id: str
    prompts: tuple[str, ...]
    first_player: int = 0


@dataclass(frozen=True)
class Move:
    """What a game's ``_play`` makes of one move.

    Attributes:
        legal: Whether the move was read and allowed (``False``: the mover forfeits, unless ``retry``).
        news: What to tell each player (seat → text) about the move; the mover's own entry
            may hold a confirmation. A player reads its news at its next turn.
        next_player: Who moves next (ignored when the game is over).
        outcome: Set when the move ends the game.
        info: Extra keys for the step's ``info`` (e.g. the parsed ``move``).
        retry: An illegal move that the game's own rules let the mover try again (TextArena's
            error allowance): the same player moves next, nobody forfeits.
    """

    legal: bool
    news: Mapping[int, str] = field(default_factory=dict)
    next_player: int = 0
    outcome: Outcome | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    retry: bool = False


class MultiStep(NamedTuple):
    """What :meth:`MultiAgentTextEnv.step` returns (unpacks like gymnasium's 5-tuple).

    Attributes:
        observations: The player to move next → its new user message (empty at the end).
        rewards: Each player's reward for this step, by seat.
        terminated: The game ended by its rules.
        truncated: The move budget ran out.
        info: ``player`` (who moved), ``move_status``, ``current_player``, ``turn``, ``task_id``,
            ``messages`` (the chat of the player to move, as a single-agent env's); at the end ``outcome`` (an :class:`Outcome`), ``winner`` and ``answer`` (what was hidden).
    """

    observations: dict[int, str]
    rewards: tuple[float, ...]
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class MultiAgentTextEnv:
    """Base class of turn-based text games for several players.

    A subclass implements :meth:`_new_game` (deal a game from ``self.np_random``), :meth:`_play`
    (one move of the current player), :meth:`legal_moves`, :meth:`hidden_state` and, where it
    has one, ``expert_action(rng=None)`` (a good move for the current player).

    Args:
        max_turns: Moves each player may make before the episode is truncated.
        max_length: Longest move (and observation) in characters.
        system_prompt: The system message of every player's chat (``""`` for none).
        render_mode: ``None`` or ``"ansi"``.
    """

    num_players: ClassVar[int] = 2
    default_system_prompt: ClassVar[str | None] = None
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    def __init__(
        self, *, max_turns: int = 50, max_length: int = DEFAULT_MAX_LENGTH, system_prompt: str | None = None,
        render_mode: str | None = None,
    ):
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"max_turns={max_turns!r} is not allowed; choose an integer of at least 1.")
        require_option("render_mode", render_mode, (None, "ansi"))
        self.max_turns = max_turns
        self.max_length = int(max_length)
        self.system_prompt = self.default_system_prompt if system_prompt is None else system_prompt
        self.render_mode = render_mode
        self.np_random, _ = seeding.np_random(None)
        self._start: GameStart | None = None
        self._current = 0
        self._outcome: Outcome | None = None
        self._finished = False
        self._truncated = False
        self._turn = 0
        self._moves_made: list[int] = []
        self._chats: list[list[dict[str, str]]] = []
        self._pending: list[list[str]] = []

    # -- what a subclass provides -------------------------------------------------------

    def _new_game(self, options: Mapping[str, Any]) -> GameStart:
        """Deal a new game from ``self.np_random`` (or ``options``)."""
        raise NotImplementedError

    def _play(self, player: int, action: str) -> Move:
        """Play ``player``'s reply ``action`` (a ``str`` within ``max_length``)."""
        raise NotImplementedError

    def legal_moves(self) -> list[str]:
        """Every legal move of the current player, as text the game reads."""
        raise NotImplementedError

    def hidden_state(self) -> str:
        """What the game hid from the players (cards, values), revealed in ``info["answer"]`` at the end."""
        return ""

    def forfeit(self, player: int, why: str) -> Outcome:
        """The outcome when ``player`` forfeits (an illegal or over-long move): it loses (-1),
        the others win (+1; in a two-player game the other is the winner)."""
        rewards = tuple(-1.0 if p == player else 1.0 for p in range(self.num_players))
        winner = 1 - player if self.num_players == 2 else None
        return Outcome(rewards, winner, f"player {player} forfeits: {why}")

    # -- the contract --------------------------------------------------------------------

    @property
    def current_player(self) -> int:
        """The seat whose move it is; raises :class:`ResetNeededError` before ``reset()``."""
        self._require_started()
        return self._current

    @property
    def outcome(self) -> Outcome | None:
        """How the game ended (``None`` while it goes on)."""
        return self._outcome

    @property
    def finished(self) -> bool:
        """Whether the episode has ended (terminated or truncated)."""
        return self._finished

    @property
    def turn(self) -> int:
        """Moves played in this episode, every player's together."""
        return self._turn

    @property
    def task_id(self) -> str:
        """The current deal's id."""
        return self._require_started().task_id

    def messages(self, player: int) -> list[dict[str, str]]:
        """``player``'s chat so far (a copy): at its turn, the prompt to answer."""
        self._require_started()
        self._check_player(player)
        return copy_messages(self._chats[player])

    def observe(self, player: int) -> str:
        """``player``'s latest user message (at its turn: what it must answer now)."""
        users = [m["content"] for m in self.messages(player) if m["role"] == "user"]
        return users[-1] if users else ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[int, str], dict[str, Any]]:
        """Deal a new game; returns ``({first player: its first user message}, info)``."""
        if seed is not None:
            self.np_random, _ = seeding.np_random(seed)
        start = self._new_game(dict(options or {}))
        if len(start.prompts) != self.num_players:
            raise ValueError(f"{type(self).__name__}._new_game gave {len(start.prompts)} prompts for {self.num_players} players")
        self._start, self._current, self._outcome = start, start.first_player, None
        self._finished = self._truncated = False
        self._turn = 0
        self._moves_made = [0] * self.num_players
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        self._chats = [list(system) for _ in range(self.num_players)]
        self._pending = [[clean_text(prompt)] for prompt in start.prompts]
        self._deliver(self._current)
        return {self._current: self.observe(self._current)}, self._info()

    def step(self, action: str) -> MultiStep:
        """Play the current player's move ``action``."""
        self._require_started()
        if self._finished:
            raise EpisodeFinishedError(f"{type(self).__name__}: the game has ended; call reset() to start a new one.")
        if not isinstance(action, str):
            raise InvalidActionError(f"{type(self).__name__}.step() takes the player's text as a str, got {type(action).__name__}.")
        player = self._current
        self._chats[player].append({"role": "assistant", "content": action})
        self._turn += 1
        self._moves_made[player] += 1
        if len(action) > self.max_length:
            status = MoveStatus.TOO_LONG
            move = Move(False, outcome=self.forfeit(player, f"a reply of {len(action)} characters (max_length={self.max_length})"))
        else:
            move = self._play(player, action)
            status = MoveStatus.LEGAL if move.legal else MoveStatus.ILLEGAL_MOVE
            if not move.legal and move.outcome is None and not move.retry:
                move = Move(False, move.news, outcome=self.forfeit(player, "an illegal move"), info=move.info)
        for seat, text in move.news.items():
            if text:
                self._pending[seat].append(clean_text(text))
        self._outcome = move.outcome
        if move.outcome is None:
            self._current = move.next_player
            if self._moves_made[self._current] >= self.max_turns:
                self._truncated = True
                self._outcome = Outcome((0.0,) * self.num_players, None, f"player {self._current} has no moves left (max_turns={self.max_turns})")
        self._finished = self._outcome is not None
        rewards = self._outcome.rewards if self._finished else (0.0,) * self.num_players
        observations: dict[int, str] = {}
        if not self._finished:
            self._deliver(self._current)
            observations[self._current] = self.observe(self._current)
        info = {**self._info(), "player": player, "move_status": status, **move.info}
        terminated = self._finished and not self._truncated
        return MultiStep(observations, tuple(float(r) for r in rewards), terminated, self._truncated, info)

    def render(self) -> str | None:
        """Every player's chat, then the outcome (``render_mode="ansi"``)."""
        if self.render_mode != "ansi" or self._start is None:
            return None
        parts = []
        for seat, chat in enumerate(self._chats):
            parts += [f"[player {seat}: {m['role']}]\n{m['content']}" for m in chat if m["role"] != "system"]
        if self._outcome is not None:
            parts.append(f"[outcome]\n{self._outcome.reason} (rewards {list(self._outcome.rewards)})\n{self.hidden_state()}")
        return "\n\n".join(parts) + "\n"

    # -- bookkeeping ----------------------------------------------------------------------

    def _require_started(self) -> GameStart:
        if self._start is None:
            raise ResetNeededError(f"{type(self).__name__}: call reset() before step().")
        return self._start

    def _check_player(self, player: int) -> None:
        if isinstance(player, bool) or not isinstance(player, (int, np.integer)) or not 0 <= player < self.num_players:
            raise ConfigError(f"player={player!r} is not a seat of this game; choose an integer from 0 to {self.num_players - 1}.")

    def _deliver(self, player: int) -> None:
        """Hand ``player`` its news since its last move as one user message."""
        if self._pending[player]:
            self._chats[player].append({"role": "user", "content": "\n\n".join(self._pending[player])})
            self._pending[player] = []

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "task_id": self.task_id, "turn": self._turn, "max_turns": self.max_turns,
            "current_player": None if self._finished else self._current,
        }
        if not self._finished:
            info["messages"] = copy_messages(self._chats[self._current])  # the prompt of the player to move
        if self._outcome is not None:
            info.update(outcome=self._outcome, winner=self._outcome.winner, answer=self.hidden_state())
        return info


def pick_uniform(moves: Sequence[str], rng: np.random.Generator) -> str:
    """One of ``moves``, drawn uniformly from ``rng``."""
    return moves[int(rng.integers(len(moves)))]
