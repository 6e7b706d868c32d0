"""Mastermind-v0: break a secret code of digits from right-place / wrong-place counts (multi-turn)."""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mathgym.core import Judgement, Task
from mathgym.envs.games.base import GameEnv, level_settings, move_text, paint
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Play Mastermind. Answer each turn with one code guess."
#: Difficulty levels: code length, number of digits (colours), guesses. The expert (minimax)
#: breaks every code of each level within its guesses (tested on a sample; the worst case over
#: all codes is in docs/envs.md).
LEVELS: tuple[Mapping[str, Any], ...] = (
    {"code_length": 3, "num_colors": 4, "max_turns": 6},
    {"code_length": 4, "num_colors": 6, "max_turns": 8},
    {"code_length": 4, "num_colors": 6, "max_turns": 6},
    {"code_length": 4, "num_colors": 8, "max_turns": 8},
    {"code_length": 5, "num_colors": 8, "max_turns": 9},
)
_DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: "١٢٣٤" is no code
#: What may stand between the digits of one code written out one by one ("1 2 3 4", "[1, 2, 3, 4]").
_SEPARATORS = re.compile(r"[\s,;|/()\[\]\-]{1,4}")
#: Above this many codes, the expert picks among the codes still possible only.
_FULL_SEARCH_LIMIT = 4096
#: The minimax opening of the levels' games, computed once (up to a second each) and kept here;
#: a test checks them against the computation.
KNOWN_OPENINGS = {(3, 4): "123", (4, 6): "1122", (4, 8): "1234"}
#: How many of the codes still possible the expert weighs, above that limit.
_SAMPLE_GUESSES = 400


def score_guess(guess: str, secret: str) -> tuple[int, int]:
    """(right digit in the right place, right digit in the wrong place) of ``guess`` against ``secret``.

    Example:
        >>> score_guess("1122", "1213")
        (1, 2)
    """
    exact = sum(g == s for g, s in zip(guess, secret))
    common = sum(min(guess.count(d), secret.count(d)) for d in set(guess))
    return exact, common - exact


def parse_code(action: str, length: int) -> str | None:
    """The last code of ``length`` digits in the move text: ``1234``, ``1 2 3 4``, ``[1, 2, 3, 4]``,
    ``1-2-3-4``; ``None`` when there is none. Digits are not checked against the colours here.

    Example:
        >>> parse_code("My guess is 1 2 3 4.", 4), parse_code("I try \\\\boxed{5611}", 4)
        ('1234', '5611')
    """
    text = move_text(action)
    found: str | None = None
    run: list[str] = []
    last_end = -1
    for match in _DIGITS.finditer(text):
        token = match.group()
        if len(token) == 1:
            adjacent = bool(run) and _SEPARATORS.fullmatch(text, last_end, match.start()) is not None
            run = run + [token] if adjacent else [token]
        else:
            run = []
        last_end = match.end()
        if len(token) == length:
            found = token
        elif len(run) == length:
            found = "".join(run)
    return found


@functools.lru_cache(maxsize=8)
def all_codes(length: int, colors: int) -> tuple[str, ...]:
    """Every code, in increasing order."""
    return tuple("".join(p) for p in itertools.product("123456789"[:colors], repeat=length))


@functools.lru_cache(maxsize=8)
def _code_arrays(length: int, colors: int) -> tuple[np.ndarray, np.ndarray]:
    digits = np.array([[int(c) for c in code] for code in all_codes(length, colors)], dtype=np.int8)
    counts = np.stack([(digits == d).sum(axis=1) for d in range(1, colors + 1)], axis=1).astype(np.int8)
    return digits, counts


def _worst_class(guesses: np.ndarray, candidates: np.ndarray, length: int, colors: int) -> np.ndarray:
    """For each guess (code index), the size of its largest feedback class over ``candidates``."""
    digits, counts = _code_arrays(length, colors)
    g, c = digits[guesses], digits[candidates]
    exact = (g[:, None, :] == c[None, :, :]).sum(axis=2)
    common = np.minimum(counts[guesses][:, None, :], counts[candidates][None, :, :]).sum(axis=2)
    classes = (length + 1) ** 2
    ids = exact * (length + 1) + (common - exact) + classes * np.arange(len(guesses))[:, None]
    return np.bincount(ids.ravel(), minlength=classes * len(guesses)).reshape(len(guesses), classes).max(axis=1)


@functools.lru_cache(maxsize=100_000)
def expert_guess(length: int, colors: int, history: tuple[tuple[str, tuple[int, int]], ...]) -> str:
    """Knuth's minimax: the guess whose worst feedback leaves the fewest possible codes (a
    possible code wins ties, then the lowest). Guesses range over every code when there are at
    most 4,096, else over an even sample of 400 of the codes still possible (after an opening
    of digit pairs, ``11223``). Memoised per history."""
    codes = all_codes(length, colors)
    if not history and (length, colors) in KNOWN_OPENINGS:
        return KNOWN_OPENINGS[length, colors]
    if not history and len(codes) > _FULL_SEARCH_LIMIT:  # Knuth's style of opening: pairs of digits (11223...)
        return "".join(str(1 + i // 2) for i in range(length))
    candidates = np.array(
        [i for i, code in enumerate(codes) if all(score_guess(g, code) == f for g, f in history)], dtype=np.int64
    )
    if len(candidates) == 0:
        return codes[0]
    if len(candidates) <= 2:
        return codes[int(candidates[0])]
    if len(codes) <= _FULL_SEARCH_LIMIT:
        pool = np.arange(len(codes))
    else:  # an even sample of the codes still possible: bounded work per guess
        pool = candidates[
            np.unique(np.linspace(0, len(candidates) - 1, min(len(candidates), _SAMPLE_GUESSES)).astype(np.int64))
        ]
    best, best_key = 0, None
    for start in range(0, len(pool), 512):  # chunks bound the (guesses x candidates x length) arrays
        chunk = pool[start : start + 512]
        worst = _worst_class(chunk, candidates, length, colors)
        possible = np.isin(chunk, candidates)
        for i in np.flatnonzero(worst == worst.min()):
            key = (int(worst[i]), not possible[i], int(chunk[i]))
            if best_key is None or key < best_key:
                best, best_key = int(chunk[i]), key
    return codes[best]


class MastermindEnv(GameEnv):
    """Find a secret code of digits; after each guess the env says how many digits are in the
    right place and how many are right but in the wrong place.

    Reward 1 when the code is found (terminated); truncated with 0 when the guesses run out. A
    reply without a code of the right length, or with a digit outside the colours, is a
    ``format_error`` observation that uses up a guess; the game goes on.

    Args:
        difficulty: Level 0-4 (see :data:`LEVELS`).
        code_length: Digits in the code (2-6), over the level's.
        num_colors: Digits 1..num_colors may appear (2-9), over the level's.
        max_turns: Guesses allowed, over the level's.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    win_key = "cracked"

    def __init__(
        self,
        difficulty: int = 1,
        code_length: int | None = None,
        num_colors: int | None = None,
        max_turns: int | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        settings = level_settings(
            LEVELS, difficulty, code_length=code_length, num_colors=num_colors, max_turns=max_turns
        )
        super().__init__(
            max_turns=settings["max_turns"], max_length=max_length, system_prompt=system_prompt, render_mode=render_mode
        )
        self.code_length, self.num_colors = settings["code_length"], settings["num_colors"]
        if not isinstance(self.code_length, int) or not 2 <= self.code_length <= 6:
            raise ConfigError(f"code_length={self.code_length!r} is not allowed; choose an integer from 2 to 6.")
        if not isinstance(self.num_colors, int) or not 2 <= self.num_colors <= 9:
            raise ConfigError(f"num_colors={self.num_colors!r} is not allowed; choose an integer from 2 to 9.")
        self.difficulty = difficulty
        self._history: list[tuple[str, tuple[int, int]]] = []

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        n, k = self.code_length, self.num_colors
        index = options.get("task_index")
        if index is None:
            index = int(self.np_random.integers(k**n))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < k**n:
            raise ConfigError(f"options['task_index']={index!r} is out of range; there are {k**n} codes.")
        secret = "".join(str(1 + (index // k**p) % k) for p in reversed(range(n)))
        self._history = []
        prompt = (
            f"Find my secret code: {n} digits, each from 1 to {k} (digits may repeat). You have {self.max_turns} guesses.\n"
            "After each guess I say how many digits are right and in the right place, and how many are "
            "right but in the wrong place.\n"
            f"Answer with {n} digits, e.g. {''.join(str(1 + i % k) for i in range(n))}."
        )
        digest = hashlib.sha1(f"mastermind:{n}:{k}:{secret}".encode()).hexdigest()[:12]
        return Task(f"mastermind-{n}x{k}-{digest}", prompt, secret, {"secret": secret})

    def _judge(self, action: str) -> Judgement:
        n, k = self.code_length, self.num_colors
        hint = f"Answer with {n} digits, each from 1 to {k}."
        code = parse_code(action, n)
        if code is None:
            return self.format_error(f"No {n}-digit code found.", hint)
        if any(not 1 <= int(d) <= k for d in code):
            return self.format_error(f"{code} uses a digit outside 1-{k}.", hint, guess=code)
        exact, near = score_guess(code, self.task.metadata["secret"])
        self._history.append((code, (exact, near)))
        if exact == n:
            return self.won(guess=code)
        return self.progress(f"{self.board()}\n({self.turns_left()} guesses left)", guess=code, feedback=[exact, near])

    def board(self, colour: bool = False) -> str:
        if not self._history:
            return "(no guesses yet)"
        lines = []
        for code, (exact, near) in self._history:
            shown = paint(code, "bold") if colour else code
            lines.append(f"{shown}: {exact} right place, {near} wrong place")
        return "\n".join(lines)

    def expert_action(self) -> str:
        """Knuth's minimax guess (see :func:`expert_guess`)."""
        return expert_guess(self.code_length, self.num_colors, tuple(self._history))
