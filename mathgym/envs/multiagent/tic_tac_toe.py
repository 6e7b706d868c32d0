"""TicTacToe-v0: three in a row on a 3x3 board (two players; a perfect minimax expert)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mathgym.envs.games.base import move_text
from mathgym.envs.multiagent.base import GameStart, Move, MultiAgentTextEnv, Outcome
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Play tic-tac-toe. Answer each turn with the number (1-9) of a free cell."
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MARKS = "XO"
_CELL = re.compile(r"(?<!\d)[1-9](?!\d)")


def parse_cell(action: str) -> int | None:
    """The last lone digit 1-9 of the reply's move text, as a cell index 0-8.

    Example:
        >>> parse_cell("The centre is free: \\\\boxed{5}")
        4
    """
    found = _CELL.findall(move_text(action))
    return int(found[-1]) - 1 if found else None


def winner_of(board: str) -> str | None:
    """``"X"`` or ``"O"`` when that mark has three in a row (board: 9 characters of ``X``, ``O``, ``.``)."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


@functools.lru_cache(maxsize=None)
def move_values(board: str, mark: str) -> tuple[tuple[int, float], ...]:
    """``(cell, value)`` of each free cell for ``mark`` to move, under perfect play after it: 10 an
    immediate win, 0 a draw; each ply later shrinks the value by 0.9, so a faster win and a slower
    loss rank higher."""
    other = "O" if mark == "X" else "X"
    values = []
    for cell in (i for i, ch in enumerate(board) if ch == "."):
        after = board[:cell] + mark + board[cell + 1 :]
        if winner_of(after):
            values.append((cell, 10.0))
        elif "." not in after:
            values.append((cell, 0.0))
        else:
            values.append((cell, -0.9 * max(v for _, v in move_values(after, other))))
    return tuple(values)


def show(board: str) -> str:
    """The board with free cells numbered."""
    cells = [ch if ch != "." else str(i + 1) for i, ch in enumerate(board)]
    return "\n".join(" " + " | ".join(cells[r * 3 : r * 3 + 3]) for r in range(3))


class TicTacToeEnv(MultiAgentTextEnv):
    """Tic-tac-toe: player 0 is X and moves first; three in a row wins, a full board is a draw.

    A move is a free cell's number (1-9); anything else (no number, a taken cell) forfeits.

    Args:
        system_prompt: System message; ``""`` for none.
        max_length: Longest move in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    default_system_prompt = DEFAULT_SYSTEM_PROMPT

    def __init__(self, system_prompt: str | None = None, max_length: int = DEFAULT_MAX_LENGTH, render_mode: str | None = None):
        super().__init__(max_turns=5, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        self._board = "." * 9

    def _new_game(self, options: Mapping[str, Any]) -> GameStart:
        self._board = "." * 9
        prompts = tuple(
            f"Tic-tac-toe on a 3x3 board. You are player {seat} and play {MARKS[seat]}; "
            f"{'you move first' if seat == 0 else 'X moves first'}. Three of your marks in a row, column or "
            f"diagonal win.\n\n{show(self._board)}\n\nAnswer with the number of a free cell."
            for seat in range(2)
        )
        return GameStart("tictactoe", prompts, 0)

    def _play(self, player: int, action: str) -> Move:
        cell = parse_cell(action)
        if cell is None or self._board[cell] != ".":
            return Move(False, {player: "No free cell found."}, info={"move": None if cell is None else cell + 1})
        self._board = self._board[:cell] + MARKS[player] + self._board[cell + 1 :]
        info = {"move": cell + 1}
        if winner_of(self._board):
            rewards = (1.0, -1.0) if player == 0 else (-1.0, 1.0)
            return Move(True, outcome=Outcome(rewards, player, f"{MARKS[player]} has three in a row"), info=info)
        if "." not in self._board:
            return Move(True, outcome=Outcome((0.0, 0.0), None, "the board is full: a draw"), info=info)
        news = {1 - player: f"Your opponent played {cell + 1}.\n\n{show(self._board)}\n\nYour move."}
        return Move(True, news, next_player=1 - player, info=info)

    def legal_moves(self) -> list[str]:
        return [str(i + 1) for i, ch in enumerate(self._board) if ch == "."]

    def hidden_state(self) -> str:
        return show(self._board)

    def expert_action(self, rng: np.random.Generator | None = None) -> str:
        """A best move by minimax (the fastest win, else a draw, else the slowest loss); ties drawn from ``rng``."""
        rng = self.np_random if rng is None else rng
        values = move_values(self._board, MARKS[self._current])
        best = max(v for _, v in values)
        cells = [c for c, v in values if v == best]
        return str(cells[int(rng.integers(len(cells)))] + 1)
