"""Wordle-v0: find a secret English word from per-letter feedback (multi-turn).

After each guess every letter is marked ``G`` (right letter, right place), ``Y`` (in the word,
elsewhere) or ``_`` (not in the word, or not as many times), with Wordle's rule for repeated
letters. Words come from SCOWL (:mod:`mathgym.envs.games.words`, licence in
``mathgym/samples/LICENSE-scowl.txt``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mathgym.core import Judgement, Task
from mathgym.envs.games.base import WORD, GameEnv, level_settings, move_text, paint
from mathgym.envs.games.words import answer_words, dictionary
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Play Wordle. Answer each turn with one guess: a single English word."
LEGEND = "G = right letter, right place; Y = in the word, elsewhere; _ = not in the word."
#: Difficulty levels: word length, guesses, and whether the secret may be a less common word.
LEVELS: tuple[Mapping[str, Any], ...] = (
    {"word_length": 4, "max_turns": 8, "common_only": True},
    {"word_length": 5, "max_turns": 7, "common_only": True},
    {"word_length": 5, "max_turns": 6, "common_only": True},
    {"word_length": 6, "max_turns": 6, "common_only": True},
    {"word_length": 5, "max_turns": 6, "common_only": False},
)
#: Words a reply uses around its guess ("I guess CRANE", "my answer: crane"): never the guess itself.
_FILLER = frozenset(
    [
        "guess",
        "guesses",
        "guessing",
        "answer",
        "answers",
        "final",
        "word",
        "words",
        "think",
        "maybe",
        "perhaps",
        "next",
        "turn",
        "try",
        "will",
        "would",
        "could",
        "should",
        "pick",
        "choose",
        "going",
        "letter",
        "letters",
        "their",
        "there",
        "these",
        "those",
        "which",
        "about",
    ]
)


def feedback(guess: str, secret: str) -> str:
    """Wordle's marks for ``guess`` against ``secret``: ``G``, ``Y`` or ``_`` per letter.

    A repeated letter is marked ``Y`` only as many times as the secret has it unmatched.

    Example:
        >>> feedback("allee", "apple")
        'GY__G'
    """
    marks = ["G" if g == s else "_" for g, s in zip(guess, secret)]
    spare: dict[str, int] = {}
    for g, s in zip(guess, secret):
        if g != s:
            spare[s] = spare.get(s, 0) + 1
    for i, g in enumerate(guess):
        if marks[i] == "_" and spare.get(g, 0) > 0:
            marks[i] = "Y"
            spare[g] -= 1
    return "".join(marks)


def parse_guess(action: str, length: int, valid: frozenset[str]) -> str | None:
    """The guessed word: the last word of ``length`` letters in the move text, preferring one
    written in capitals or a listed word that is not a filler ("guess", "think"); letters
    spelt out one by one (``C R A N E``, ``c-r-a-n-e``) count as a word. ``None`` if there is none.

    Example:
        >>> parse_guess("I guess CRANE.", 5, frozenset({"crane", "guess"}))
        'crane'
    """
    tokens = WORD.findall(move_text(action))
    words = [t for t in tokens if len(t) == length]
    run: list[str] = []
    for token in tokens:  # letters written one at a time
        run = run + [token] if len(token) == 1 else []
        if len(run) >= length:
            words.append("".join(run[-length:]))
    if not words:
        return None
    for prefer in (
        lambda w: w.isupper() and w.lower() in valid,
        lambda w: w.lower() in valid and w.lower() not in _FILLER,
        lambda w: w.lower() in valid,
    ):
        found = [w for w in words if prefer(w)]
        if found:
            return found[-1].lower()
    return words[-1].lower()


def _codes(words: Sequence[str]) -> np.ndarray:
    return np.array([[ord(c) - 97 for c in w] for w in words], dtype=np.int8).reshape(len(words), -1)


def pattern_ids(guess: str, answers: np.ndarray) -> np.ndarray:
    """The feedback of ``guess`` against every row of ``answers`` (letter codes), as base-3 integers."""
    g = np.array([ord(c) - 97 for c in guess], dtype=np.int8)
    green = answers == g
    marks = green.astype(np.int32) * 2
    spare = {int(c): ((answers == c) & ~green).sum(axis=1) for c in set(g.tolist())}
    for i, c in enumerate(g.tolist()):
        yellow = ~green[:, i] & (spare[c] > 0)
        marks[:, i] += yellow
        spare[c] = spare[c] - yellow
    return marks @ (3 ** np.arange(len(guess) - 1, -1, -1))


def best_guess(candidates: Sequence[str], probes: Sequence[str] = ()) -> str:
    """The guess that leaves the fewest candidates on average (smallest sum of squared
    feedback-class sizes) among ``candidates`` and ``probes``; a candidate wins ties (it may be
    the secret)."""
    if len(candidates) <= 2:
        return candidates[0]
    codes = _codes(candidates)
    best, best_cost = candidates[0], None
    for rank, word in enumerate([*candidates, *probes]):
        counts = np.bincount(pattern_ids(word, codes))
        cost = 2 * int((counts.astype(np.int64) ** 2).sum()) + (rank >= len(candidates))
        if best_cost is None or cost < best_cost:
            best, best_cost = word, cost
    return best


def probe_words(candidates: Sequence[str], valid: Sequence[str], count: int = 40) -> list[str]:
    """Words (any listed word) that test the most letters on which ``candidates`` differ: a
    guess outside the candidates splits a family such as ``hatch, latch, match, patch`` at once."""
    if len(candidates) <= 2:
        return []
    freq = np.zeros(26, dtype=np.int64)
    for word in candidates:
        for c in set(word):
            freq[ord(c) - 97] += 1
    split = np.minimum(freq, len(candidates) - freq)  # letters present in some candidates but not all
    scored = sorted(valid, key=lambda w: -int(sum(split[ord(c) - 97] for c in set(w))))
    return scored[:count]


#: :func:`best_guess` over each level's whole pool, computed once (seconds each) and kept here;
#: a test checks the smallest against the computation.
KNOWN_OPENINGS = {(4, True): "tale", (5, True): "raise", (6, True): "salter", (5, False): "raise"}


@functools.lru_cache(maxsize=16)
def opening_guess(length: int, common_only: bool) -> str:
    """The expert's first guess for a pool of secrets (from :data:`KNOWN_OPENINGS`, else computed once per process)."""
    known = KNOWN_OPENINGS.get((length, common_only))
    return known if known is not None else best_guess(answer_words(length, common_only))


@functools.lru_cache(maxsize=200_000)
def expert_guess(length: int, common_only: bool, history: tuple[tuple[str, str], ...]) -> str:
    """The expert's next guess given the (guess, feedback) pairs so far (memoised: the expert's
    decisions form one tree per level, so replaying many games costs little)."""
    pool = answer_words(length, common_only)
    if not history:
        return opening_guess(length, common_only)
    candidates = [w for w in pool if all(feedback(g, w) == f for g, f in history)]
    if not candidates:
        return pool[0]
    return best_guess(candidates, probe_words(candidates, _sorted_dictionary(length)))


@functools.lru_cache(maxsize=8)
def _sorted_dictionary(length: int) -> tuple[str, ...]:
    return tuple(sorted(dictionary(length)))


class WordleEnv(GameEnv):
    """Find a secret word in a few guesses from per-letter feedback (G / Y / _).

    Reward 1 when the secret is guessed (terminated); truncated with reward 0 when the guesses
    run out. A reply without a word of the right length, or with a word that is not in the
    dictionary, is a ``format_error`` observation: it uses up a guess, and the game goes on.

    Args:
        difficulty: Level 0-4 (see :data:`LEVELS`): word length, guesses, common or all words.
        word_length: Letters of the secret (4-8), over the level's.
        max_turns: Guesses allowed, over the level's.
        common_only: Secrets only among common words, over the level's.
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    win_key = "found"

    def __init__(
        self,
        difficulty: int = 1,
        word_length: int | None = None,
        max_turns: int | None = None,
        common_only: bool | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        settings = level_settings(
            LEVELS, difficulty, word_length=word_length, max_turns=max_turns, common_only=common_only
        )
        super().__init__(
            max_turns=settings["max_turns"], max_length=max_length, system_prompt=system_prompt, render_mode=render_mode
        )
        self.difficulty = difficulty
        self.word_length, self.common_only = int(settings["word_length"]), bool(settings["common_only"])
        self.valid = dictionary(self.word_length)
        self.pool = answer_words(self.word_length, self.common_only)
        self._history: list[tuple[str, str]] = []

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        index = options.get("task_index")
        if index is None:
            index = int(self.np_random.integers(len(self.pool)))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.pool):
            raise ConfigError(
                f"options['task_index']={index!r} is out of range; this level has {len(self.pool)} secrets."
            )
        secret = self.pool[index]
        self._history = []
        n = self.word_length
        prompt = (
            f"Guess the secret {n}-letter English word in at most {self.max_turns} guesses.\n"
            f"After each guess I mark every letter: {LEGEND}\n"
            f"Answer with one {n}-letter word."
        )
        digest = hashlib.sha1(f"wordle:{secret}".encode()).hexdigest()[:12]
        return Task(f"wordle-{n}-{digest}", prompt, secret, {"secret": secret})

    def _judge(self, action: str) -> Judgement:
        n = self.word_length
        guess = parse_guess(action, n, self.valid)
        if guess is None:
            return self.format_error(f"No {n}-letter word found.", f"Answer with one {n}-letter English word.")
        if guess not in self.valid:
            return self.format_error(
                f"{guess.upper()} is not in the word list.", f"Guess another {n}-letter English word.", guess=guess
            )
        marks = feedback(guess, self.task.metadata["secret"])
        self._history.append((guess, marks))
        if marks == "G" * n:
            return self.won(guess=guess)
        return self.progress(
            f"{self.board()}\n{self._absent()}({self.turns_left()} guesses left)", guess=guess, feedback=marks
        )

    def _absent(self) -> str:
        present = {g for guess, marks in self._history for g, m in zip(guess, marks) if m != "_"}
        absent = sorted({g for guess, _ in self._history for g in guess} - present)
        return f"Not in the word: {' '.join(absent).upper()}\n" if absent else ""

    def board(self, colour: bool = False) -> str:
        if not self._history:
            return "(no guesses yet)"
        if not colour:
            return "\n".join(f"{guess.upper()} {marks}" for guess, marks in self._history)
        shade = {"G": "green", "Y": "yellow", "_": "grey"}
        return "\n".join(
            "".join(paint(f" {g.upper()} ", shade[m]) for g, m in zip(guess, marks)) for guess, marks in self._history
        )

    def expert_action(self) -> str:
        """The guess that leaves the fewest possible secrets on average (among those still possible)."""
        return expert_guess(self.word_length, self.common_only, tuple(self._history)).upper()
