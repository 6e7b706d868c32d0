"""What the multi-turn text games share: difficulty levels, the move text, format errors, rendering.

Every game reads moves the same way (:func:`move_text`): in the answer after a reasoning model's
thinking, the last ``\\boxed{}`` when there is one, else the last :data:`TAIL_CHARS` characters,
so parsing is linear in the action and a megabyte of text costs milliseconds. A reply without a valid move is a
``format_error`` observation that uses up a turn but never ends the game by itself: only the
turn budget does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from mathgym.core import Judgement, TextEnv
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking, last_boxed

#: How much of the end of a reply is searched for a move when it has no ``\boxed{}``.
TAIL_CHARS = 2000
#: Words: runs of ASCII letters (other scripts and symbols separate them).
WORD = re.compile(r"[A-Za-z]+")

_ANSI = {
    "green": "\x1b[30;42m",
    "yellow": "\x1b[30;43m",
    "grey": "\x1b[37;100m",
    "red": "\x1b[1;31m",
    "bold": "\x1b[1m",
}
_ANSI_RESET = "\x1b[0m"


def move_text(action: str) -> str:
    """The part of a reply that holds the move: in its answer (after its thinking, where it has
    some), the last ``\\boxed{}``'s contents, else the answer's tail. Moves tried out while
    thinking are not played; a reply whose thinking never closed holds no move (``""``).

    Example:
        >>> move_text("I think... \\\\boxed{crane}"), move_text("<think>slate? no</think>crane")
        ('crane', 'crane')
    """
    answer = answer_after_thinking(action)
    if answer is None:
        return ""
    boxed = last_boxed(answer[-4 * TAIL_CHARS :])
    return boxed if boxed is not None else answer[-TAIL_CHARS:]


def paint(text: str, colour: str) -> str:
    """``text`` in an ANSI colour (``green``, ``yellow``, ``grey``, ``red``, ``bold``), for ``render()``."""
    return f"{_ANSI[colour]}{text}{_ANSI_RESET}"


def level_settings(levels: tuple[Mapping[str, Any], ...], difficulty: int, **overrides: Any) -> dict[str, Any]:
    """The settings of difficulty ``difficulty``, with every override that is not ``None`` on top.

    Raises:
        ConfigError: ``difficulty`` is not a level index.
    """
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not 0 <= difficulty < len(levels):
        raise ConfigError(f"difficulty={difficulty!r} is not allowed; choose an integer from 0 to {len(levels) - 1}.")
    settings = dict(levels[difficulty])
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return settings


class GameEnv(TextEnv):
    """Base class of the text games: a board, moves, and a win that ends the episode.

    A subclass implements ``_sample_task`` and ``_judge`` (as any :class:`TextEnv`),
    :meth:`board` (the state as text; with ``colour=True`` for a terminal), and
    ``expert_action``. ``render()`` (``render_mode="ansi"``) is the transcript followed by
    the board in colour.
    """

    #: Name of the reward component (``reward_breakdown`` key) of winning.
    win_key: ClassVar[str] = "solved"

    def board(self, colour: bool = False) -> str:
        """The game's state as text (ANSI colours when ``colour``)."""
        raise NotImplementedError

    def render(self) -> str | None:
        transcript = super().render()
        if transcript is None or self._task is None:
            return transcript
        return f"{transcript}\n[board]\n{self.board(colour=True)}\n"

    def turns_left(self) -> int:
        """Turns left in the budget after the current one."""
        return self.max_turns - self.turn

    def format_error(self, why: str, hint: str, **info: Any) -> Judgement:
        """A reply without a valid move: says why and how to answer; uses the turn, does not end the game."""
        text = f"{why} {hint} ({self.turns_left()} turns left)\n\n{self.board()}"
        return Judgement(0.0, Status.FORMAT_ERROR, False, text, {self.win_key: 0.0}, info={"feedback": why, **info})

    def progress(self, text: str, **info: Any) -> Judgement:
        """A move that was made and did not end the game."""
        return Judgement(0.0, Status.IN_PROGRESS, False, text, {self.win_key: 0.0}, info=info)

    def won(self, **info: Any) -> Judgement:
        """The game is won: reward 1, terminated."""
        return Judgement(1.0, Status.CORRECT, True, correct=True, reward_breakdown={self.win_key: 1.0}, info=info)

    def lost(self, why: str, **info: Any) -> Judgement:
        """The game is lost for good (a mine, no lives left, no move left): reward 0, terminated."""
        return Judgement(0.0, Status.WRONG, True, why, {self.win_key: 0.0}, info={"feedback": why, **info})

    def _final_judgement(self, last: Judgement) -> Judgement:
        return Judgement(0.0, Status.WRONG, False, "", {self.win_key: 0.0}, False, last.info)
