"""Negotiation-v0: split a pool of items whose values each player knows only for itself (deal or no deal).

Three kinds of items (books, hats, balls) are to be shared. Each player values each kind
privately, so that the whole pool is worth 10 to each. In turn, a player proposes a split
("propose B H X": what it keeps) or accepts the last proposal. A deal pays each player the value
of its share / 10; no deal within ``rounds`` moves pays both 0.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mathgym.envs.games.base import move_text
from mathgym.envs.multiagent.base import GameStart, Move, MultiAgentTextEnv, Outcome
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Negotiate a split of the items. Answer each turn with 'propose B H X' (what you keep) or 'accept'."
ITEMS = ("books", "hats", "balls")
TOTAL_VALUE = 10
_PROPOSE = re.compile(r"(?i)\bpropose\b[^0-9]{0,20}?(\d{1,2})[^0-9]{1,20}?(\d{1,2})[^0-9]{1,20}?(\d{1,2})")
_ACCEPT = re.compile(r"(?i)\baccept\b")


def parse_offer(action: str) -> tuple[int, int, int] | str | None:
    """The reply's last move: ``(books, hats, balls)`` the proposer keeps, ``"accept"``, or ``None``.

    Example:
        >>> parse_offer("I value hats most: propose 0 2 1"), parse_offer("Fine, I accept.")
        ((0, 2, 1), 'accept')
    """
    text = move_text(action)
    proposals = list(_PROPOSE.finditer(text))
    accepts = list(_ACCEPT.finditer(text))
    last_proposal = proposals[-1] if proposals else None
    last_accept = accepts[-1] if accepts else None
    if last_accept is not None and (last_proposal is None or last_accept.start() > last_proposal.start()):
        return "accept"
    if last_proposal is not None:
        return tuple(int(g) for g in last_proposal.groups())  # type: ignore[return-value]
    return None


def draw_values(counts: tuple[int, ...], rng: np.random.Generator) -> tuple[int, ...]:
    """Values per item for one player, so that the whole pool is worth :data:`TOTAL_VALUE`."""
    while True:
        values = [int(v) for v in rng.integers(0, TOTAL_VALUE + 1, size=len(counts) - 1)]
        rest = TOTAL_VALUE - sum(c * v for c, v in zip(counts, values))
        if rest >= 0 and rest % counts[-1] == 0:
            return (*values, rest // counts[-1])


def describe(share: tuple[int, ...]) -> str:
    return ", ".join(f"{n} {item}" for n, item in zip(share, ITEMS))


class NegotiationEnv(MultiAgentTextEnv):
    """Deal or no deal: split books, hats and balls; each player knows only its own values (imperfect information).

    A reply without a proposal or ``accept``, an impossible split, or ``accept`` with nothing on
    the table forfeits: the mover gets -1, the other 0. ``reset(options={"values": (v0, v1),
    "counts": c})`` sets a deal.

    Args:
        rounds: Moves (both players together) before the talks fail with no deal.
        system_prompt: System message; ``""`` for none.
        max_length: Longest move in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    default_system_prompt = DEFAULT_SYSTEM_PROMPT

    def __init__(self, rounds: int = 6, system_prompt: str | None = None, max_length: int = DEFAULT_MAX_LENGTH,
                 render_mode: str | None = None):
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 2 <= rounds <= 20:
            raise ConfigError(f"rounds={rounds!r} is not allowed; choose an integer from 2 to 20.")
        super().__init__(max_turns=rounds, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        self.rounds = rounds
        self._counts: tuple[int, ...] = (1, 1, 1)
        self._values: tuple[tuple[int, ...], ...] = ((0, 0, 10), (0, 0, 10))
        self._offer: tuple[int, ...] | None = None  # what player 0 would get under the proposal on the table

    def _new_game(self, options: Mapping[str, Any]) -> GameStart:
        self._counts = tuple(options.get("counts") or self._draw_counts())
        if math.gcd(*self._counts) not in (1, 2):  # (3, 3, 3) cannot be worth 10
            raise ConfigError(f"options counts {self._counts} cannot be worth {TOTAL_VALUE}: choose counts without a common factor of 3 or more.")
        values = options.get("values") or (draw_values(self._counts, self.np_random), draw_values(self._counts, self.np_random))
        self._values = tuple(tuple(int(v) for v in vs) for vs in values)
        if any(sum(c * v for c, v in zip(self._counts, vs)) != TOTAL_VALUE for vs in self._values):
            raise ConfigError(f"options values {self._values} do not make the pool {self._counts} worth {TOTAL_VALUE} to each player.")
        self._offer = None
        rules = (
            f"Negotiation. The pool: {describe(self._counts)}. You and your opponent value the items differently and "
            f"each knows only its own values; the whole pool is worth {TOTAL_VALUE} to each of you. Take turns: "
            "propose a split by saying 'propose B H X' (the books, hats and balls you keep; the rest go to the other "
            f"player), or 'accept' the last proposal. Without a deal after {self.rounds} moves in all, nobody gets "
            "anything. A deal pays you the value of what you get.\n\n"
        )
        prompts = tuple(
            f"{rules}You are player {seat}. Your values: "
            + ", ".join(f"{item} {v} each" for item, v in zip(ITEMS, self._values[seat]))
            + ("\n\nYou open: make a proposal." if seat == 0 else "")
            for seat in range(2)
        )
        key = "".join(map(str, self._counts)) + "-" + "".join(f"{v}" for vs in self._values for v in vs)
        return GameStart(f"negotiation-{key}", prompts, 0)

    def _draw_counts(self) -> tuple[int, ...]:
        """1 to 3 of each item, never all three counts a multiple of 3 (no values would add up to 10)."""
        while True:
            counts = tuple(int(n) for n in self.np_random.integers(1, 4, size=3))
            if math.gcd(*counts) in (1, 2):
                return counts

    def _play(self, player: int, action: str) -> Move:
        move = parse_offer(action)
        if move == "accept":
            if self._offer is None:
                return Move(False, {player: "There is no proposal to accept."}, info={"move": "accept"})
            return Move(True, outcome=self._deal(self._offer), info={"move": "accept"})
        if move is None or any(not 0 <= k <= n for k, n in zip(move, self._counts)):
            return Move(False, {player: "No possible proposal or accept found."}, info={"move": None if move is None else list(move)})
        keep = tuple(move)
        other = tuple(n - k for n, k in zip(self._counts, keep))
        self._offer = keep if player == 0 else other
        info = {"move": list(keep)}
        if self._turn >= self.rounds:
            return Move(True, outcome=Outcome((0.0, 0.0), None, f"no deal after {self.rounds} moves"), info=info)
        news = f"Your opponent proposes to keep {describe(keep)}; you would get {describe(other)}. Accept, or propose."
        return Move(True, {1 - player: news}, next_player=1 - player, info=info)

    def _deal(self, share0: tuple[int, ...]) -> Outcome:
        shares = (share0, tuple(n - k for n, k in zip(self._counts, share0)))
        rewards = tuple(sum(k * v for k, v in zip(shares[p], self._values[p])) / TOTAL_VALUE for p in range(2))
        winner = None if rewards[0] == rewards[1] else int(rewards[1] > rewards[0])
        return Outcome(rewards, winner, f"deal: player 0 gets {describe(shares[0])}, player 1 {describe(shares[1])}")

    def forfeit(self, player: int, why: str) -> Outcome:
        """The mover gets -1, the other player 0 (no deal; a negotiation has no winner by default)."""
        return Outcome(tuple(-1.0 if p == player else 0.0 for p in range(2)), None, f"player {player} forfeits: {why}")

    def legal_moves(self) -> list[str]:
        proposals = [f"propose {b} {h} {x}" for b, h, x in itertools.product(*(range(n + 1) for n in self._counts))]
        return proposals + (["accept"] if self._offer is not None else [])

    def hidden_state(self) -> str:
        return "; ".join(f"player {p} valued " + ", ".join(f"{i} {v}" for i, v in zip(ITEMS, self._values[p])) for p in range(2))

    def _my_value(self, share_of_mine: tuple[int, ...]) -> int:
        return sum(k * v for k, v in zip(share_of_mine, self._values[self._current]))

    def expert_action(self, rng: np.random.Generator | None = None) -> str:
        """Accept an offer worth at least what it still hopes for (a bar that falls from 7 to 1 as the
        moves run out); else propose to keep what it values most and give away what it values least,
        worth that bar to it (ties drawn from ``rng``)."""
        rng = self.np_random if rng is None else rng
        left = self.rounds - self._turn  # moves left, this one included
        bar = max(1, min(7, 1 + 2 * (left - 1)))
        if self._offer is not None:
            mine = self._offer if self._current == 0 else tuple(n - k for n, k in zip(self._counts, self._offer))
            if self._my_value(mine) >= bar or left == 1 and self._my_value(mine) > 0:
                return "accept"
        splits = list(itertools.product(*(range(n + 1) for n in self._counts)))
        worth = [self._my_value(s) for s in splits]
        fitting = [s for s, w in zip(splits, worth) if w >= bar] or splits
        least = min(sum(s) for s in fitting)  # give the opponent as many items as the bar allows
        lean = [s for s in fitting if sum(s) == least]
        keep = lean[int(rng.integers(len(lean)))]
        return "propose " + " ".join(map(str, keep))
