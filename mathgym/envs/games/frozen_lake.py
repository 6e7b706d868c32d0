"""FrozenLakeText-v0: a text front end over gymnasium's own ``FrozenLake-v1`` (multi-turn).

The dynamics, map generator and rewards are gymnasium's; this module only turns the
state into text and the agent's words into gymnasium's discrete actions.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from mathgym.core import Judgement, Task, TextEnv
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking
from mathgym.spaces import DEFAULT_MAX_LENGTH

#: gymnasium's action numbering for FrozenLake.
ACTIONS = {"left": 0, "down": 1, "right": 2, "up": 3}
_ALIASES = {"l": "left", "d": "down", "r": "right", "u": "up", "west": "left", "south": "down", "east": "right", "north": "up"}
_WORD = re.compile(r"[a-z]+")
DEFAULT_SYSTEM_PROMPT = "Cross the frozen lake. Answer each turn with one move: left, down, right or up."
LEGEND = "Legend: S start, F frozen (safe), H hole, G goal, P you."


def parse_move(action: str) -> str | None:
    """The last move word in the action's answer (after a reasoning model's thinking)
    (``left``/``l``/``west`` ...), or ``None``."""
    found = None
    answer = answer_after_thinking(action) or ""  # thinking never closed: no move
    for word in _WORD.findall(answer.lower()[-2000:]):
        word = _ALIASES.get(word, word)
        if word in ACTIONS:
            found = word
    return found


def shortest_path(desc: Sequence[str], start: int) -> list[str] | None:
    """Moves from cell ``start`` to the goal avoiding holes (breadth-first), or ``None``."""
    rows, cols = len(desc), len(desc[0])
    parents: dict[int, tuple[int, str] | None] = {start: None}
    queue = deque([start])
    steps = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
    while queue:
        cell = queue.popleft()
        r, c = divmod(cell, cols)
        if desc[r][c] == "G":
            path = []
            while parents[cell] is not None:
                cell, move = parents[cell]
                path.append(move)
            return path[::-1]
        for move, (dr, dc) in steps.items():
            nr, nc = r + dr, c + dc
            nxt = nr * cols + nc
            if 0 <= nr < rows and 0 <= nc < cols and desc[nr][nc] != "H" and nxt not in parents:
                parents[nxt] = (cell, move)
                queue.append(nxt)
    return None


class FrozenLakeEnv(TextEnv):
    """Walk from S to G on a frozen lake without falling into a hole (gymnasium's FrozenLake).

    Each turn the agent names one move; the observation is the map with its position.
    Reward 1 on reaching the goal; falling into a hole ends the episode with 0
    (terminated); ``max_turns`` moves without either truncates it. Text without a move is a
    ``format_error`` observation and does not move.

    Args:
        size: Side of the random map (a new valid map per episode, from the seed).
        map_name: ``"4x4"`` or ``"8x8"`` for gymnasium's fixed maps instead of random ones.
        is_slippery: gymnasium's slippery ice (moves go sideways with probability 2/3).
        hole_probability: Chance that a cell of a random map is a hole.
        max_turns: Moves allowed.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        size: int = 4,
        map_name: str | None = None,
        is_slippery: bool = False,
        hole_probability: float = 0.2,
        max_turns: int = 20,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        if map_name not in (None, "4x4", "8x8"):
            raise ConfigError(f"map_name={map_name!r} is not allowed; choose None (random maps), '4x4' or '8x8'.")
        if not isinstance(size, int) or not 3 <= size <= 12:
            raise ConfigError(f"size={size!r} is not allowed; choose an integer from 3 to 12.")
        if not 0.0 <= hole_probability < 0.6:
            raise ConfigError(f"hole_probability={hole_probability!r} must be in [0, 0.6).")
        self.size, self.map_name, self.is_slippery, self.hole_probability = size, map_name, bool(is_slippery), float(hole_probability)
        self._lake: Any = None
        self._position = 0

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        if "task_index" in options:
            raise ConfigError("FrozenLakeText-v0 draws maps by seed; options['task_index'] is not supported.")
        seed = int(self.np_random.integers(2**31 - 1))
        if self.map_name is None:
            desc = generate_random_map(size=self.size, p=1.0 - self.hole_probability, seed=seed)
            self._lake = gym.make("FrozenLake-v1", desc=desc, is_slippery=self.is_slippery).unwrapped
        else:
            self._lake = gym.make("FrozenLake-v1", map_name=self.map_name, is_slippery=self.is_slippery).unwrapped
            desc = ["".join(ch.decode() for ch in row) for row in self._lake.desc]
        self._position, _ = self._lake.reset(seed=seed)
        self._position = int(self._position)
        path = shortest_path(desc, self._position) or []
        prompt = f"Reach the goal G without stepping into a hole H.\n{LEGEND}\n\n{self._grid(desc)}\n\nAnswer with one move: left, down, right or up."
        slip = "slippery" if self.is_slippery else "firm"
        return Task(f"frozenlake-{slip}-{'-'.join(desc)}", prompt, " ".join(path), {"desc": tuple(desc)})

    def _grid(self, desc: Sequence[str] | None = None) -> str:
        desc = desc or self.task.metadata["desc"]
        cols = len(desc[0])
        rows = [list(row) for row in desc]
        r, c = divmod(self._position, cols)
        rows[r][c] = "P"
        return "\n".join("".join(row) for row in rows)

    def _judge(self, action: str) -> Judgement:
        move = parse_move(action)
        if move is None:
            return Judgement(0.0, Status.FORMAT_ERROR, False, f"No move found. Answer with left, down, right or up.\n\n{self._grid()}")
        position, reward, terminated, _, _ = self._lake.step(ACTIONS[move])
        self._position = int(position)
        info = {"move": move, "position": self._position}
        if terminated and reward > 0:
            return Judgement(float(reward), Status.CORRECT, True, correct=True, reward_breakdown={"goal": float(reward)}, info=info)
        if terminated:
            return Judgement(0.0, Status.WRONG, True, "You fell into a hole.", {"goal": 0.0}, info=info)
        return Judgement(0.0, Status.IN_PROGRESS, False, f"You moved {move}.\n\n{self._grid()}", {"goal": 0.0}, info=info)

    def _final_judgement(self, last: Judgement) -> Judgement:
        return Judgement(0.0, Status.WRONG, False, "", {"goal": 0.0}, False, last.info)

    def expert_action(self) -> str:
        """The first move of a shortest hole-free path to the goal (optimal on firm ice)."""
        path = shortest_path(self.task.metadata["desc"], self._position)
        return path[0] if path else "down"
