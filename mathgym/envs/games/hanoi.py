"""Hanoi-v0: stack every disk on one peg, never a larger disk on a smaller one (multi-turn).

The classic start (every disk on A, goal C) or, by default, a random legal position drawn by
seed (each disk on a random peg, a random goal peg): the recursive solver is optimal from any
position and gives the expert's moves.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Literal

from mathgym.core import Judgement, Task
from mathgym.envs.games.base import GameEnv, level_settings, move_text, paint
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

Pegs = tuple[tuple[int, ...], ...]
PEGS = "ABC"
DEFAULT_SYSTEM_PROMPT = "Solve the Tower of Hanoi. Answer with moves such as A->C."
#: Difficulty levels: the number of disks (the optimal solution has 2**disks - 1 moves).
LEVELS: tuple[Mapping[str, Any], ...] = tuple({"disks": n} for n in (2, 3, 4, 5, 6))
_PEG = r"(?:(?:peg|rod|tower|pole|stack)\s{0,3})?"
#: "from A to C" (letters in any case, or peg numbers 1-3), "A -> C", "A to C" (capitals), "(A, C)", "AC".
_MOVE = re.compile(
    rf"(?i:from\s{{1,3}}{_PEG}([abc123])\s{{1,3}}to\s{{1,3}}{_PEG}([abc123]))(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9])([A-Ca-c1-3])\s{0,3}(?:->|-->|=>|→|⟶|➜)\s{0,3}([A-Ca-c1-3])(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9])([A-C])\s{0,3}(?:\bto\b|-|,)\s{0,3}([A-C])(?![A-Za-z0-9])"
    r"|\(\s{0,3}([A-Ca-c1-3])\s{0,3},\s{0,3}([A-Ca-c1-3])\s{0,3}\)"
    r"|(?<![A-Za-z0-9])([A-C])([A-C])(?![A-Za-z0-9])"
)


def parse_moves(action: str) -> list[tuple[int, int]]:
    """Every move in the move text, in order, as (from peg, to peg) with pegs 0-2.

    Pegs are ``A``/``B``/``C`` or ``1``/``2``/``3`` (numbers only next to "from ... to" or an
    arrow, so "disk 1" is not a peg). A move from a peg to itself is dropped.

    Example:
        >>> parse_moves("Move disk 1 from A to C, then A -> B.")
        [(0, 2), (0, 1)]
    """
    moves = []
    for match in _MOVE.finditer(move_text(action)):
        source, target = (g for g in match.groups() if g is not None)
        a, b = (_peg_index(source), _peg_index(target))
        if a != b:
            moves.append((a, b))
    return moves


def _peg_index(name: str) -> int:
    return int(name) - 1 if name.isdigit() else PEGS.index(name.upper())


def optimal_moves(pegs: Pegs, target: int = 2) -> list[tuple[int, int]]:
    """The shortest move sequence that stacks every disk on ``target`` from any legal position.

    The largest disk not yet in place must go straight to ``target``, so everything smaller
    first goes to the third peg; this recursion is optimal from every position.
    """
    where = {disk: peg for peg, stack in enumerate(pegs) for disk in stack}
    moves: list[tuple[int, int]] = []

    def place(disk: int, goal: int) -> None:  # move disks 1..disk onto goal
        if disk == 0:
            return
        if where[disk] == goal:
            place(disk - 1, goal)
            return
        spare = 3 - where[disk] - goal
        place(disk - 1, spare)
        moves.append((where[disk], goal))
        where[disk] = goal
        place(disk - 1, goal)

    place(len(where), target)
    return moves


class HanoiEnv(GameEnv):
    """Stack every disk on the goal peg, one disk at a time, never onto a smaller disk.

    A turn may hold several moves (applied in order, up to the first illegal one). Reward 1 when
    every disk is on the goal peg (terminated); truncated with 0 when the turns run out. A reply without a
    move, or with an illegal move (from an empty peg, onto a smaller disk), is a ``format_error``
    observation: legal moves before it are kept, the turn is used, the game goes on.
    ``info["moves_used"]`` and ``info["optimal_moves"]`` (from the start) tell how close to optimal.

    Args:
        difficulty: Level 0-4: 2 to 6 disks.
        disks: Number of disks (1-10), over the level's.
        start: ``"random"`` (a legal position and goal peg drawn by seed) or ``"tower"`` (all on A, goal C).
        max_turns: Turns allowed (default: ``2**disks - 1`` plus twice the disks).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        difficulty: int = 1,
        disks: int | None = None,
        start: Literal["random", "tower"] = "random",
        max_turns: int | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        settings = level_settings(LEVELS, difficulty, disks=disks)
        self.disks = settings["disks"]
        if isinstance(self.disks, bool) or not isinstance(self.disks, int) or not 1 <= self.disks <= 10:
            raise ConfigError(f"disks={self.disks!r} is not allowed; choose an integer from 1 to 10.")
        budget = 2**self.disks - 1 + 2 * self.disks if max_turns is None else max_turns
        super().__init__(max_turns=budget, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        if start not in ("random", "tower"):
            raise ConfigError(f"start={start!r} is not allowed; choose 'random' or 'tower'.")
        self.difficulty, self.start = difficulty, start
        self._pegs: list[list[int]] = [[], [], []]
        self._goal = 2
        self._moves_used = 0
        self._optimal = 0

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        if "task_index" in options:
            raise ConfigError("Hanoi-v0 draws positions by seed; options['task_index'] is not supported.")
        self._pegs, self._goal = [list(range(self.disks, 0, -1)), [], []], 2
        while self.start == "random":
            self._pegs = [[], [], []]
            for disk in range(self.disks, 0, -1):
                self._pegs[int(self.np_random.integers(3))].append(disk)
            self._goal = int(self.np_random.integers(3))
            if len(self._pegs[self._goal]) < self.disks:
                break
        self._moves_used = 0
        solution = optimal_moves(self._state(), self._goal)
        self._optimal = len(solution)
        goal = PEGS[self._goal]
        prompt = (
            f"Tower of Hanoi: move all {self.disks} disks onto peg {goal}. Move one top disk at a time; "
            "never put a disk on a smaller one. Disks are numbered by size (1 is the smallest); each peg is "
            f"listed bottom to top.\n\n{self.board()}\n\nAnswer with moves such as {PEGS[(self._goal + 1) % 3]}->{goal} (one or more)."
        )
        digest = hashlib.sha1(f"{self._state()}->{goal}".encode()).hexdigest()[:12]
        return Task(f"hanoi-{self.disks}-{digest}", prompt, " ".join(f"{PEGS[a]}->{PEGS[b]}" for a, b in solution), {})

    def _state(self) -> Pegs:
        return tuple(tuple(stack) for stack in self._pegs)

    def _judge(self, action: str) -> Judgement:
        moves = parse_moves(action)
        hint = "Answer with moves such as A->C (from peg, to peg)."
        if not moves:
            return self.format_error("No move found.", hint)
        done = []
        for a, b in moves:
            name = f"{PEGS[a]}->{PEGS[b]}"
            if not self._pegs[a]:
                why = f"{name} is illegal: peg {PEGS[a]} is empty."
            elif self._pegs[b] and self._pegs[b][-1] < self._pegs[a][-1]:
                why = f"{name} is illegal: disk {self._pegs[a][-1]} cannot go on disk {self._pegs[b][-1]}."
            else:
                self._pegs[b].append(self._pegs[a].pop())
                self._moves_used += 1
                done.append(name)
                if len(self._pegs[self._goal]) == self.disks:
                    return self.won(**self._info(done))
                continue
            kept = f" ({len(done)} move(s) before it were made.)" if done else ""
            return self.format_error(why + kept, hint, **self._info(done))
        return self.progress(f"Moved {' '.join(done)}.\n\n{self.board()}", **self._info(done))

    def _info(self, done: list[str]) -> dict[str, Any]:
        return {"moves_applied": done, "moves_used": self._moves_used, "optimal_moves": self._optimal}

    def board(self, colour: bool = False) -> str:
        lines = []
        for name, stack in zip(PEGS, self._pegs):
            disks = " ".join(paint(str(d), "bold") if colour else str(d) for d in stack)
            lines.append(f"{name}: {disks}".rstrip())
        return "\n".join(lines)

    def expert_action(self) -> str:
        """The next move of the optimal solution from the current position."""
        moves = optimal_moves(self._state(), self._goal)
        a, b = moves[0] if moves else (0, self._goal)
        return f"{PEGS[a]}->{PEGS[b]}"
