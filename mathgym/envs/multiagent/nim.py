"""Nim-v0: take objects from piles in turn; who takes the last object wins (two players)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mathgym.envs.games.base import move_text
from mathgym.envs.multiagent.base import GameStart, Move, MultiAgentTextEnv, Outcome
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Play Nim. Answer each turn with one move: take K from pile P."
_MOVE = re.compile(r"(?i)\btake\s{1,5}(\d{1,3})\s{1,5}from\s{1,5}pile\s{1,5}(\d{1,3})\b")


def parse_take(action: str) -> tuple[int, int] | None:
    """``(pile, count)`` of the last "take K from pile P" in the reply's move text (piles from 1).

    Example:
        >>> parse_take("Nim-sum is 1, so: take 2 from pile 3")
        (3, 2)
    """
    found = _MOVE.findall(move_text(action))
    return (int(found[-1][1]), int(found[-1][0])) if found else None


def nim_board(piles: tuple[int, ...]) -> str:
    """The piles as text, e.g. ``pile 1: ||| (3)``."""
    return "\n".join(f"pile {i + 1}: {'|' * n or '-'} ({n})" for i, n in enumerate(piles))


@functools.lru_cache(maxsize=4096)
def winning_moves(piles: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Every ``(pile, count)`` (piles from 1) that leaves a nim-sum of 0: the moves that win with best play."""
    total = 0
    for n in piles:
        total ^= n
    return tuple((i + 1, n - (n ^ total)) for i, n in enumerate(piles) if total and (n ^ total) < n)


class NimEnv(MultiAgentTextEnv):
    """Nim for two players: in turn, take one or more objects from one pile; who takes the last object wins.

    Illegal moves (no "take K from pile P", an empty pile, more than the pile holds) forfeit.

    Args:
        piles: Number of piles.
        largest: Most objects in a pile (each pile is drawn from 1 to ``largest``).
        max_turns: Moves allowed to each player (default: enough for any game).
        system_prompt: System message; ``""`` for none.
        max_length: Longest move in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    default_system_prompt = DEFAULT_SYSTEM_PROMPT

    def __init__(
        self, piles: int = 3, largest: int = 7, max_turns: int | None = None, system_prompt: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH, render_mode: str | None = None,
    ):
        for name, value, top in (("piles", piles, 6), ("largest", largest, 15)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ConfigError(f"{name}={value!r} is not allowed; choose an integer from 1 to {top}.")
        super().__init__(max_turns=max_turns or piles * largest, max_length=max_length, system_prompt=system_prompt,
                         render_mode=render_mode)
        self.piles, self.largest = piles, largest
        self._heaps: list[int] = []

    def _new_game(self, options: Mapping[str, Any]) -> GameStart:
        self._heaps = [int(n) for n in self.np_random.integers(1, self.largest + 1, size=self.piles)]
        rules = (
            "Nim: two players take turns. On your turn take one or more objects from a single pile. "
            "Whoever takes the last object wins.\n\n"
        )
        prompts = tuple(
            f"{rules}You are player {seat} ({'you move first' if seat == 0 else 'your opponent moves first'}).\n\n"
            f"{nim_board(tuple(self._heaps))}\n\nAnswer with: take K from pile P."
            for seat in range(2)
        )
        return GameStart(f"nim-{'-'.join(map(str, self._heaps))}", prompts, 0)

    def _play(self, player: int, action: str) -> Move:
        parsed = parse_take(action)
        if parsed is None:
            return Move(False, {player: "No move found."})
        pile, count = parsed
        if not 1 <= pile <= len(self._heaps) or not 1 <= count <= self._heaps[pile - 1]:
            return Move(False, {player: f"take {count} from pile {pile} is not allowed."}, info={"move": f"{pile}:{count}"})
        self._heaps[pile - 1] -= count
        board = nim_board(tuple(self._heaps))
        info = {"move": f"{pile}:{count}"}
        if not any(self._heaps):
            outcome = Outcome((1.0, -1.0) if player == 0 else (-1.0, 1.0), player, f"player {player} took the last object")
            return Move(True, outcome=outcome, info=info)
        news = {1 - player: f"Your opponent took {count} from pile {pile}.\n\n{board}\n\nYour move."}
        return Move(True, news, next_player=1 - player, info=info)

    def legal_moves(self) -> list[str]:
        return [f"take {k} from pile {i + 1}" for i, n in enumerate(self._heaps) for k in range(1, n + 1)]

    def hidden_state(self) -> str:
        return f"piles left: {self._heaps}"

    def expert_action(self, rng: np.random.Generator | None = None) -> str:
        """A move to nim-sum 0 when there is one (a winning move), else one object from the largest pile."""
        rng = self.np_random if rng is None else rng
        wins = winning_moves(tuple(self._heaps))
        if wins:
            pile, count = wins[int(rng.integers(len(wins)))]
            return f"take {count} from pile {pile}"
        largest = max(range(len(self._heaps)), key=lambda i: self._heaps[i])
        return f"take 1 from pile {largest + 1}"

