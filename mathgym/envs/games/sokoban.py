"""Sokoban-v0: push every box onto a target in a text grid (multi-turn).

Levels are generated procedurally from the seed and kept only when a breadth-first
solver proves them solvable, so every episode can be won; the solver's moves are the
expert action.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mathgym.core import Judgement, Task, TextEnv
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking
from mathgym.spaces import DEFAULT_MAX_LENGTH

Pos = tuple[int, int]
MOVES: dict[str, Pos] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_ALIASES = {"u": "up", "d": "down", "l": "left", "r": "right", "north": "up", "south": "down", "west": "left", "east": "right"}
_WORD = re.compile(r"[a-z]+")
DEFAULT_SYSTEM_PROMPT = "Play Sokoban. Answer with moves: up, down, left or right (several per turn allowed)."
LEGEND = "Legend: # wall, @ you, $ box, . target, * box on target, + you on target."


@dataclass(frozen=True)
class Level:
    """A Sokoban level: walls, targets, and the start positions of the player and boxes."""

    height: int
    width: int
    walls: frozenset[Pos]
    targets: frozenset[Pos]
    player: Pos
    boxes: frozenset[Pos]

    def render(self, player: Pos, boxes: frozenset[Pos]) -> str:
        """The grid in the usual XSB notation (see :data:`LEGEND`)."""
        rows = []
        for r in range(self.height):
            row = []
            for c in range(self.width):
                p = (r, c)
                if p in self.walls:
                    row.append("#")
                elif p == player:
                    row.append("+" if p in self.targets else "@")
                elif p in boxes:
                    row.append("*" if p in self.targets else "$")
                else:
                    row.append("." if p in self.targets else " ")
            rows.append("".join(row))
        return "\n".join(rows)


def apply_move(level: Level, player: Pos, boxes: frozenset[Pos], move: str) -> tuple[Pos, frozenset[Pos], bool]:
    """One move: returns the new player, boxes, and whether anything moved (False when blocked)."""
    dr, dc = MOVES[move]
    step = (player[0] + dr, player[1] + dc)
    if step in level.walls:
        return player, boxes, False
    if step in boxes:
        beyond = (step[0] + dr, step[1] + dc)
        if beyond in level.walls or beyond in boxes:
            return player, boxes, False
        boxes = (boxes - {step}) | {beyond}
    return step, boxes, True


def solve(level: Level, player: Pos | None = None, boxes: frozenset[Pos] | None = None, max_states: int = 200_000) -> list[str] | None:
    """Shortest move sequence solving ``level`` from the given state (breadth-first), or ``None``."""
    start = (level.player if player is None else player, level.boxes if boxes is None else boxes)
    if start[1] <= level.targets:
        return []
    parents: dict[tuple[Pos, frozenset[Pos]], tuple[Any, str] | None] = {start: None}
    queue = deque([start])
    while queue and len(parents) < max_states:
        state = queue.popleft()
        for move in MOVES:
            nxt = apply_move(level, state[0], state[1], move)
            key = (nxt[0], nxt[1])
            if not nxt[2] or key in parents or _dead(level, nxt[1]):
                continue
            parents[key] = (state, move)
            if nxt[1] <= level.targets:
                path = []
                while parents[key] is not None:
                    key, move = parents[key]
                    path.append(move)
                return path[::-1]
            queue.append(key)
    return None


def _dead(level: Level, boxes: frozenset[Pos]) -> bool:
    """A box pushed into a corner off a target can never move again."""
    for r, c in boxes - level.targets:
        vertical = (r - 1, c) in level.walls or (r + 1, c) in level.walls
        horizontal = (r, c - 1) in level.walls or (r, c + 1) in level.walls
        if vertical and horizontal:
            return True
    return False


def generate_level(rng: np.random.Generator, size: int, num_boxes: int, min_moves: int = 4) -> tuple[Level, list[str]]:
    """A random room with inner walls, boxes and targets, redrawn until the solver solves it."""
    while True:
        walls = {(r, c) for r in range(size) for c in range(size) if r in (0, size - 1) or c in (0, size - 1)}
        inner = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
        for k in rng.choice(len(inner), size=int(rng.integers(0, max(1, len(inner) // 6) + 1)), replace=False):
            walls.add(inner[int(k)])
        free = [p for p in inner if p not in walls]
        if len(free) < 2 * num_boxes + 1:
            continue
        picks = [free[int(k)] for k in rng.choice(len(free), size=2 * num_boxes + 1, replace=False)]
        level = Level(size, size, frozenset(walls), frozenset(picks[1 : num_boxes + 1]), picks[0], frozenset(picks[num_boxes + 1 :]))
        if _dead(level, level.boxes):
            continue
        moves = solve(level)
        if moves is not None and len(moves) >= min_moves:
            return level, moves


def parse_moves(action: str) -> list[str]:
    """The moves named in an action's answer (after a reasoning model's thinking: moves tried out
    while thinking are not played), in order (``up``/``u``/``north`` ...); unknown words are skipped."""
    moves = []
    answer = answer_after_thinking(action) or ""  # thinking never closed: no moves
    for word in _WORD.findall(answer.lower()[-4000:]):
        word = _ALIASES.get(word, word)
        if word in MOVES:
            moves.append(word)
    return moves


class SokobanEnv(TextEnv):
    """Push every box onto a target; each turn the agent gives one or more moves.

    Reward 1 when all boxes are on targets (terminated); the episode also terminates,
    with reward 0, when a box is pushed into a corner off a target (unsolvable), and is
    truncated after ``max_turns`` turns. Text without any move is a ``format_error``
    observation; a move into a wall leaves the grid unchanged.

    Args:
        size: Side of the square room, walls included (5 to 9).
        num_boxes: Boxes (and targets), 1 to 3.
        max_turns: Turns allowed.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        size: int = 6,
        num_boxes: int = 1,
        max_turns: int = 30,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        if not isinstance(size, int) or not 5 <= size <= 9:
            raise ConfigError(f"size={size!r} is not allowed; choose an integer from 5 to 9.")
        if not isinstance(num_boxes, int) or not 1 <= num_boxes <= 3:
            raise ConfigError(f"num_boxes={num_boxes!r} is not allowed; choose 1, 2 or 3.")
        self.size, self.num_boxes = size, num_boxes
        self._player: Pos = (0, 0)
        self._boxes: frozenset[Pos] = frozenset()

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        if "task_index" in options:
            raise ConfigError("Sokoban-v0 generates levels by seed; options['task_index'] is not supported.")
        level, moves = generate_level(self.np_random, self.size, self.num_boxes)
        self._player, self._boxes = level.player, level.boxes
        grid = level.render(level.player, level.boxes)
        prompt = (
            f"Push every box ($) onto a target (.).\n{LEGEND}\n\n{grid}\n\n"
            "Answer with moves: up, down, left, right (one or more, separated by spaces)."
        )
        digest = hashlib.sha1(grid.encode()).hexdigest()[:12]
        return Task(f"sokoban-{self.size}-{self.num_boxes}-{digest}", prompt, " ".join(moves), {"level": level})

    def _judge(self, action: str) -> Judgement:
        level: Level = self.task.metadata["level"]
        moves = parse_moves(action)
        if not moves:
            return Judgement(0.0, Status.FORMAT_ERROR, False, f"No move found. Answer with up, down, left or right.\n\n{self._grid()}")
        blocked = 0
        for move in moves:
            self._player, self._boxes, moved = apply_move(level, self._player, self._boxes, move)
            blocked += not moved
            if self._boxes <= level.targets:
                return Judgement(1.0, Status.CORRECT, True, correct=True, reward_breakdown={"solved": 1.0}, info={"moves_applied": moves})
            if _dead(level, self._boxes):
                note = "A box is stuck in a corner off a target: the level can no longer be solved."
                return Judgement(0.0, Status.WRONG, True, note, {"solved": 0.0}, info={"moves_applied": moves, "feedback": note})
        note = f"{len(moves)} move(s), {blocked} blocked by a wall or box." if blocked else f"{len(moves)} move(s)."
        placed = len(self._boxes & level.targets)
        text = f"{note} Boxes on targets: {placed}/{len(level.targets)}.\n\n{self._grid()}"
        return Judgement(0.0, Status.IN_PROGRESS, False, text, {"solved": 0.0}, info={"moves_applied": moves})

    def _final_judgement(self, last: Judgement) -> Judgement:
        return Judgement(0.0, Status.WRONG, False, "", {"solved": 0.0}, False, last.info)

    def _grid(self) -> str:
        return self.task.metadata["level"].render(self._player, self._boxes)

    def expert_action(self) -> str:
        """The breadth-first solver's moves from the current state (all of them, one turn)."""
        moves = solve(self.task.metadata["level"], self._player, self._boxes)
        return " ".join(moves) if moves else "up"
