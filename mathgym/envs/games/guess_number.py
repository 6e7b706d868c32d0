"""GuessNumber-v0: find a secret integer with higher/lower feedback (multi-turn)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

from mathgym.core import Judgement, Task, TextEnv
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking, last_boxed
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Play the guessing game. Answer each turn with one integer."
#: A number as written: digits, an optional decimal part, an optional exponent.
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_INTEGER = re.compile(r"[-+]?\d{1,18}")


def parse_guess(action: str) -> int | str | None:
    """The guess in an action: the last number in the last ``\\boxed{}``, else in the text.

    Returns the integer, the number as written when it is not an integer (``"50.5"``,
    ``"1e2"``: never read as 5 or 2), or ``None`` when there is no number.

    Example:
        >>> parse_guess("I guess 37."), parse_guess("50.5"), parse_guess("no idea")
        (37, '50.5', None)
    """
    answer = answer_after_thinking(action) or ""  # a guess tried out while thinking is not one
    boxed = last_boxed(answer)
    found = _NUMBER.findall(boxed if boxed is not None else answer[-2000:])
    if not found:
        return None
    return int(found[-1]) if _INTEGER.fullmatch(found[-1]) else found[-1]


class GuessNumberEnv(TextEnv):
    """Guess a secret integer; after each guess the env says "higher" or "lower".

    Reward 1 when the secret is found (terminated), 0 otherwise; the episode is truncated
    when ``max_turns`` guesses are spent. A binary search needs at most
    ``ceil(log2(high - low + 2))`` guesses, which is the default budget.

    An answer that is not an integer from ``low`` to ``high`` (no number, ``50.5``, ``1e2``,
    ``150``) has ``status="format_error"`` and *does* use up a guess (the feedback says so):
    every turn counts, so the budget bounds the episode whatever the model writes.

    Args:
        low: Smallest possible secret.
        high: Largest possible secret.
        max_turns: Guesses allowed (default: exactly what a binary search needs).
        system_prompt: System message; ``""`` for none.
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self,
        low: int = 1,
        high: int = 100,
        max_turns: int | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        max_length: int = DEFAULT_MAX_LENGTH,
        render_mode: str | None = None,
    ):
        if not isinstance(low, int) or not isinstance(high, int) or low >= high:
            raise ConfigError(f"low={low!r}, high={high!r}: need two integers with low < high.")
        budget = math.ceil(math.log2(high - low + 2)) if max_turns is None else max_turns
        super().__init__(max_turns=budget, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        self.low, self.high = low, high
        self._bounds = (low, high)

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        secret = options.get("secret", options.get("task_index"))
        if secret is None:
            secret = int(self.np_random.integers(self.low, self.high + 1))
        if not isinstance(secret, int) or not self.low <= secret <= self.high:
            raise ConfigError(f"options secret={secret!r} must be an integer from {self.low} to {self.high}.")
        self._bounds = (self.low, self.high)
        prompt = (
            f"I am thinking of an integer from {self.low} to {self.high}. Guess it in at most "
            f"{self.max_turns} guesses; after each guess I say whether the number is higher or lower.\n"
            "Answer with one integer."
        )
        digest = hashlib.sha1(f"{self.low}:{self.high}:{secret}".encode()).hexdigest()[:12]  # the id must not spell the secret
        return Task(f"guess-{self.low}-{self.high}-{digest}", prompt, str(secret), {"secret": secret})

    def _judge(self, action: str) -> Judgement:
        guess, secret = parse_guess(action), self.task.metadata["secret"]
        left = self.max_turns - self.turn
        if not isinstance(guess, int) or not self.low <= guess <= self.high:
            what = "no number" if guess is None else (f"{guess} is not an integer" if isinstance(guess, str) else f"{guess} is out of range")
            return Judgement(
                0.0, Status.FORMAT_ERROR, False,
                f"That guess does not count ({what}): answer with one integer from {self.low} to {self.high}. "
                f"It used up a guess ({left} guesses left).",
            )
        if guess == secret:
            return Judgement(1.0, Status.CORRECT, True, correct=True, reward_breakdown={"found": 1.0}, info={"guess": guess})
        low, high = self._bounds
        if guess < secret:
            self._bounds = (max(low, guess + 1), high)
            hint = f"{guess} is too low: the number is higher."
        else:
            self._bounds = (low, min(high, guess - 1))
            hint = f"{guess} is too high: the number is lower."
        return Judgement(0.0, Status.IN_PROGRESS, False, f"{hint} ({left} guesses left)", {"found": 0.0}, info={"guess": guess})

    def _final_judgement(self, last: Judgement) -> Judgement:
        return Judgement(0.0, Status.WRONG, False, "", {"found": 0.0}, False, last.info)

    def expert_action(self) -> str:
        """The binary-search guess: the middle of the interval the feedback still allows."""
        low, high = self._bounds
        return str((low + high) // 2)
