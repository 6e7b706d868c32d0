"""Hangman-v0: find a secret word letter by letter before the wrong guesses run out (multi-turn)."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mathgym.core import Judgement, Task
from mathgym.envs.games.base import WORD, GameEnv, level_settings, move_text, paint
from mathgym.envs.games.words import answer_words
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Play Hangman. Answer each turn with one letter (or the whole word)."
#: Difficulty levels: word lengths and wrong guesses allowed. Some families of words (``buzzing,
#: budding, butting...``) differ in one letter only and cost any player many wrong guesses; each
#: level allows one more than the expert's worst case over all its words (computed over every
#: word), so every word can be found.
LEVELS: tuple[Mapping[str, Any], ...] = (
    {"shortest": 7, "longest": 8, "lives": 12},
    {"shortest": 6, "longest": 8, "lives": 14},
    {"shortest": 5, "longest": 6, "lives": 14},
    {"shortest": 5, "longest": 5, "lives": 13},
    {"shortest": 4, "longest": 4, "lives": 14},
)
_QUOTED = re.compile(r"""["'`‘“]([A-Za-z])["'`’”]""")
_LETTER_WORD = re.compile(r"(?i)\bletter\W{0,3}([A-Za-z])(?![A-Za-z])")


def parse_guess(action: str, length: int) -> str | None:
    """A letter or a whole word: a quoted letter (``'e'``), "letter e", a single letter standing
    alone (the last one; ``I`` and ``a`` only when nothing else is there), else a word of ``length``
    letters (a guess of the whole word). Lowercase, or ``None``.

    Example:
        >>> parse_guess("I guess the letter E.", 6), parse_guess("Is there an 'r'?", 6), parse_guess("PLANET", 6)
        ('e', 'r', 'planet')
    """
    text = move_text(action)
    for pattern in (_QUOTED, _LETTER_WORD):
        found = pattern.findall(text)
        if found:
            return found[-1].lower()
    tokens = WORD.findall(text)
    singles = [t for t in tokens if len(t) == 1]
    plain = [t for t in singles if t not in ("I", "a", "A")]
    if plain or singles:
        return (plain or singles)[-1].lower()
    words = [t for t in tokens if len(t) == length]
    capital = [w for w in words if w.isupper()]
    if capital or words:
        return (capital or words)[-1].lower()
    return None


@functools.lru_cache(maxsize=64)
def _letter_table(words: tuple[str, ...], length: int) -> tuple[np.ndarray, np.ndarray]:
    """The words of ``length`` letters as letter codes ``(N, length)`` and letter presence ``(N, 26)``."""
    chosen = [w for w in words if len(w) == length]
    codes = np.array([[ord(ch) - 97 for ch in w] for w in chosen], dtype=np.int8).reshape(len(chosen), length)
    present = np.zeros((len(chosen), 26), dtype=bool)
    present[np.arange(len(chosen))[:, None], codes] = True
    return codes, present


@functools.lru_cache(maxsize=200_000)
def expert_letter(words: tuple[str, ...], pattern: str, guessed: frozenset[str]) -> str:
    """The untried letter in the most words that still fit (``pattern``: ``_`` for hidden letters;
    ties: the first in the alphabet)."""
    codes, present = _letter_table(words, len(pattern))
    fits = np.ones(len(codes), dtype=bool)
    tried = np.zeros(26, dtype=bool)
    tried[[ord(ch) - 97 for ch in guessed]] = True
    for i, ch in enumerate(pattern):
        fits &= codes[:, i] == ord(ch) - 97 if ch != "_" else ~tried[codes[:, i]]
    counts = present[fits].sum(axis=0) * ~tried
    if counts.max(initial=0) == 0:
        return next(ch for ch in "etaoinshrdlcumwfgypbvkjxqz" if ch not in guessed)
    return chr(97 + int(np.argmax(counts)))


class HangmanEnv(GameEnv):
    """Find the secret word: guess letters (every place a letter appears is shown) or the whole word.

    A wrong letter or a wrong whole word costs a life; the game is lost (terminated, reward 0)
    with no lives left and won (terminated, reward 1) when every letter is shown. A reply
    without a letter or word, or a letter already tried, is a ``format_error`` observation (the
    turn is used, no life is lost); the episode is truncated when the turns run out.

    Args:
        difficulty: Level 0-4 (see :data:`LEVELS`).
        lives: Wrong guesses allowed, over the level's.
        max_turns: Turns allowed (default 30: every letter can be tried).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    win_key = "found"

    def __init__(
        self,
        difficulty: int = 1,
        lives: int | None = None,
        max_turns: int = 30,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        settings = level_settings(LEVELS, difficulty, lives=lives)
        super().__init__(
            max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode
        )
        self.lives = settings["lives"]
        if isinstance(self.lives, bool) or not isinstance(self.lives, int) or not 1 <= self.lives <= 26:
            raise ConfigError(f"lives={self.lives!r} is not allowed; choose an integer from 1 to 26.")
        self.difficulty = difficulty
        self.pool = tuple(w for n in range(settings["shortest"], settings["longest"] + 1) for w in answer_words(n))
        self._guessed: set[str] = set()
        self._wrong = 0

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        index = options.get("task_index")
        if index is None:
            index = int(self.np_random.integers(len(self.pool)))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.pool):
            raise ConfigError(
                f"options['task_index']={index!r} is out of range; this level has {len(self.pool)} words."
            )
        secret = self.pool[index]
        self._guessed, self._wrong = set(), 0
        prompt = (
            f"Hangman: find my secret English word of {len(secret)} letters. Guess one letter per turn (or the whole "
            f"word). You may make {self.lives} wrong guesses.\n\n{self._pattern(secret)}\n\nAnswer with one letter."
        )
        digest = hashlib.sha1(f"hangman:{secret}".encode()).hexdigest()[:12]
        return Task(f"hangman-{len(secret)}-{digest}", prompt, secret, {"secret": secret})

    def _pattern(self, secret: str) -> str:
        return " ".join(ch.upper() if ch in self._guessed else "_" for ch in secret)

    def _judge(self, action: str) -> Judgement:
        secret = self.task.metadata["secret"]
        guess = parse_guess(action, len(secret))
        hint = f"Answer with one letter, or the whole {len(secret)}-letter word."
        if guess is None:
            return self.format_error("No letter found.", hint)
        if len(guess) == 1:
            if guess in self._guessed:
                return self.format_error(f"{guess.upper()} was already tried.", "Try another letter.", guess=guess)
            self._guessed.add(guess)
            hit = guess in secret
        else:
            hit = guess == secret
            if hit:
                self._guessed |= set(secret)
        if not hit:
            self._wrong += 1
        info = {"guess": guess, "hit": hit, "wrong_guesses": self._wrong}
        if set(secret) <= self._guessed:
            return self.won(**info)
        if self._wrong >= self.lives:
            return self.lost(f"No lives left. The word was {secret.upper()}.", **info)
        what = f"Yes, {guess.upper()} is in the word." if hit else f"No {guess.upper()}."
        return self.progress(f"{what}\n\n{self.board()}", **info)

    def board(self, colour: bool = False) -> str:
        secret = self.task.metadata["secret"]
        pattern = self._pattern(secret)
        misses = sorted(ch.upper() for ch in self._guessed if ch not in secret)
        left = self.lives - self._wrong
        lives = paint(str(left), "red" if left <= 2 else "bold") if colour else str(left)
        return f"{pattern}\nMisses: {' '.join(misses) or '-'} | lives left: {lives}"

    def expert_action(self) -> str:
        """The most frequent untried letter among the level's words that fit what is shown."""
        secret = self.task.metadata["secret"]
        pattern = "".join(ch if ch in self._guessed else "_" for ch in secret)
        return expert_letter(self.pool, pattern, frozenset(self._guessed)).upper()
