"""Game2048-v0: slide and merge tiles until one reaches the target (multi-turn).

Tile spawns come from the env's seeded generator (``reset(seed=...)``): after each move that
changes the board, a 2 (probability 0.9) or a 4 appears on an empty cell drawn uniformly, so
one seed and one sequence of moves always give the same game.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mathgym.core import Judgement, Task
from mathgym.envs.games.base import GameEnv, level_settings, move_text, paint
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

Board = tuple[tuple[int, ...], ...]
DEFAULT_SYSTEM_PROMPT = "Play 2048. Answer each turn with one move: up, down, left or right."
MOVES = ("up", "down", "left", "right")
_ALIASES = {
    "u": "up",
    "d": "down",
    "l": "left",
    "r": "right",
    "north": "up",
    "south": "down",
    "west": "left",
    "east": "right",
}
_ARROWS = {"↑": "up", "↓": "down", "←": "left", "→": "right"}
_MOVE_WORD = re.compile(r"[A-Za-z]+|[↑↓←→]")
LEVELS: tuple[Mapping[str, Any], ...] = (
    {"size": 3, "target": 16, "max_turns": 30},
    {"size": 3, "target": 32, "max_turns": 60},
    {"size": 4, "target": 128, "max_turns": 200},
    {"size": 4, "target": 256, "max_turns": 400},
    {"size": 4, "target": 512, "max_turns": 700},
)


def parse_move(action: str) -> str | None:
    """The last move in the move text: ``up``/``down``/``left``/``right`` in any case, ``u``/``d``/
    ``l``/``r``, ``north``..., or an arrow ``↑↓←→``; ``None`` when there is none.

    Example:
        >>> parse_move("I'll swipe LEFT."), parse_move("\\\\boxed{↑}")
        ('left', 'up')
    """
    found = None
    for token in _MOVE_WORD.findall(move_text(action)):
        word = _ARROWS.get(token) or _ALIASES.get(token.lower(), token.lower())
        if word in MOVES:
            found = word
    return found


def _slide_row(row: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """Slide one row to the left, merging equal neighbours once: (new row, points gained)."""
    tiles = [t for t in row if t]
    out: list[int] = []
    gained, i = 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(2 * tiles[i])
            gained += 2 * tiles[i]
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return tuple(out + [0] * (len(row) - len(out))), gained


@functools.lru_cache(maxsize=1 << 18)
def slide(board: Board, move: str) -> tuple[Board, int]:
    """The board after ``move`` (before the new tile), and the points of the merges."""
    rows = board if move in ("left", "right") else tuple(zip(*board))
    reverse = move in ("right", "down")
    moved, gained = [], 0
    for row in rows:
        new, points = _slide_row(row[::-1] if reverse else row)
        moved.append(new[::-1] if reverse else new)
        gained += points
    out = tuple(moved) if move in ("left", "right") else tuple(zip(*moved))
    return tuple(tuple(r) for r in out), gained


def spawn(board: Board, rng: np.random.Generator) -> Board:
    """``board`` with a 2 (p=0.9) or a 4 on a uniformly drawn empty cell (two draws from ``rng``)."""
    empty = [(r, c) for r, row in enumerate(board) for c, v in enumerate(row) if v == 0]
    pick, four = int(rng.integers(len(empty))), rng.random() < 0.1
    r, c = empty[pick]
    grid = [list(row) for row in board]
    grid[r][c] = 4 if four else 2
    return tuple(tuple(row) for row in grid)


def can_move(board: Board) -> bool:
    """Whether some move changes the board."""
    return any(slide(board, move)[0] != board for move in MOVES)


@functools.lru_cache(maxsize=1 << 18)
def heuristic(board: Board) -> float:
    """How promising a board is: empty cells, monotone rows and columns, the largest tile in a corner."""
    n = len(board)
    empty = sum(v == 0 for row in board for v in row)
    logs = [[int(v).bit_length() for v in row] for row in board]
    mono = 0.0
    for lines in (logs, [list(col) for col in zip(*logs)]):
        for line in lines:
            up = sum(max(0, line[i + 1] - line[i]) for i in range(n - 1))
            down = sum(max(0, line[i] - line[i + 1]) for i in range(n - 1))
            mono -= min(up, down)
    top = max(max(row) for row in logs)
    corner = top if top in (logs[0][0], logs[0][-1], logs[-1][0], logs[-1][-1]) else 0
    return 2.7 * empty + 1.0 * mono + 1.5 * corner + 0.1 * sum(sum(row) for row in logs)


@functools.lru_cache(maxsize=1 << 16)
def best_move(board: Board) -> str:
    """Expectimax of depth two (move, every possible new tile, best next move) over :func:`heuristic`."""
    best, best_value = None, -float("inf")
    for move in MOVES:
        after, gained = slide(board, move)
        if after == board:
            continue
        empty = [(r, c) for r, row in enumerate(after) for c, v in enumerate(row) if v == 0]
        total = 0.0
        for r, c in empty:
            for tile, p in ((2, 0.9), (4, 0.1)):
                grid = [list(row) for row in after]
                grid[r][c] = tile
                child = tuple(tuple(row) for row in grid)
                replies = [slide(child, m)[0] for m in MOVES]
                values = [heuristic(b) for b in replies if b != child]
                total += p * (max(values) if values else -1000.0)
        value = total / max(1, len(empty)) + gained * 0.01
        if value > best_value:
            best, best_value = move, value
    return best or "up"


class Game2048Env(GameEnv):
    """Slide the tiles of a 2048 board (up/down/left/right) until one reaches ``target``.

    Reward 1 when a tile reaches the target (terminated); the game also ends with 0 when no
    move is possible (terminated), and is truncated with 0 when the turns run out. A reply
    without a move, or a move that changes nothing, is a ``format_error`` observation (the turn
    is used, the game goes on). ``info["score"]`` is the classic score (sum of merges).

    Args:
        difficulty: Level 0-4 (see :data:`LEVELS`).
        size: Side of the board (3-5), over the level's.
        target: Tile that wins (a power of two, 8-4096), over the level's.
        max_turns: Moves allowed, over the level's.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    win_key = "reached_target"

    def __init__(
        self,
        difficulty: int = 1,
        size: int | None = None,
        target: int | None = None,
        max_turns: int | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        settings = level_settings(LEVELS, difficulty, size=size, target=target, max_turns=max_turns)
        super().__init__(
            max_turns=settings["max_turns"], max_length=max_length, system_prompt=system_prompt, render_mode=render_mode
        )
        self.size, self.target = settings["size"], settings["target"]
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not 3 <= self.size <= 5:
            raise ConfigError(f"size={self.size!r} is not allowed; choose an integer from 3 to 5.")
        if not isinstance(self.target, int) or not 8 <= self.target <= 4096 or self.target & (self.target - 1):
            raise ConfigError(f"target={self.target!r} is not allowed; choose a power of two from 8 to 4096.")
        self.difficulty = difficulty
        self._board: Board = ()
        self._score = 0

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        if "task_index" in options:
            raise ConfigError("Game2048-v0 draws games by seed; options['task_index'] is not supported.")
        board: Board = tuple((0,) * self.size for _ in range(self.size))
        self._board, self._score = spawn(spawn(board, self.np_random), self.np_random), 0
        prompt = (
            f"2048 on a {self.size}x{self.size} board: each move slides every tile as far as it goes; two equal tiles "
            f"that meet merge into their sum. After each move a 2 or 4 appears. Reach a {self.target} tile.\n\n"
            f"{self.board()}\n\nAnswer with one move: up, down, left or right."
        )
        state = hashlib.sha1(repr((self._board, self.np_random.bit_generator.state["state"])).encode()).hexdigest()[:12]
        return Task(f"2048-{self.size}-{self.target}-{state}", prompt, f"a {self.target} tile", {})

    def _judge(self, action: str) -> Judgement:
        move = parse_move(action)
        if move is None:
            return self.format_error("No move found.", "Answer with up, down, left or right.")
        after, gained = slide(self._board, move)
        if after == self._board:
            return self.format_error(
                f"Moving {move} changes nothing.", "Choose a direction that moves a tile.", move=move
            )
        self._board, self._score = spawn(after, self.np_random), self._score + gained
        top = max(max(row) for row in self._board)
        info = {"move": move, "score": self._score, "max_tile": top}
        if top >= self.target:
            return self.won(**info)
        if not can_move(self._board):
            return self.lost(f"No move is possible. Game over.\n\n{self.board()}", **info)
        return self.progress(f"Moved {move}. Score {self._score}.\n\n{self.board()}", **info)

    def board(self, colour: bool = False) -> str:
        width = max(len(str(self.target)), 2)
        lines = []
        for row in self._board:
            cells = [f"{(v or '.'):>{width}}" for v in row]
            if colour:
                cells = [
                    paint(cell, "yellow" if v >= self.target // 4 else "bold") if v else cell
                    for cell, v in zip(cells, row)
                ]
            lines.append(" ".join(cells))
        return "\n".join(lines)

    def expert_action(self) -> str:
        """The depth-two expectimax move (see :func:`best_move`)."""
        return best_move(self._board)
