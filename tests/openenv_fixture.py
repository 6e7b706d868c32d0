"""A small OpenEnv environment written for the tests, on OpenEnv's own base classes.

``GuessEnvironment``: find a secret integer from 1 to 20 (drawn from ``reset``'s seed) from
higher/lower feedback, 6 guesses at most; reward 1.0 for the right guess. Its action is one text
field (``message``), as a chat env's is. ``DigitEnvironment`` takes a typed (non-text) action, an
integer ``guess``, for the tests of ``to_action=``. ``python tests/openenv_fixture.py PORT`` serves
``GuessEnvironment`` with OpenEnv's own ``create_app`` on 127.0.0.1.
"""

from __future__ import annotations

import random
import sys
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

MAX_GUESSES = 6


class GuessAction(Action):
    message: str = Field(..., description="The guess, as text")


class GuessObservation(Observation):
    feedback: str = Field(default="", description="What the env says")
    guesses_left: int = Field(default=MAX_GUESSES)


class GuessEnvironment(Environment):
    """Guess a secret integer from 1 to 20 in at most 6 tries."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, high: int = 20):
        super().__init__()
        self.high = high
        self._secret = 1
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs) -> GuessObservation:
        self._secret = random.Random(seed).randint(1, self.high)
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return GuessObservation(feedback=f"Guess my number from 1 to {self.high}. Reply with the number only.")

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs) -> GuessObservation:
        self._state.step_count += 1
        left = MAX_GUESSES - self._state.step_count
        try:
            guess = int(action.message.strip())
        except ValueError:
            return GuessObservation(feedback="That is not a number.", guesses_left=left, done=left <= 0, reward=0.0)
        if guess == self._secret:
            return GuessObservation(feedback="Correct!", guesses_left=left, done=True, reward=1.0)
        hint = "higher" if guess < self._secret else "lower"
        return GuessObservation(feedback=f"{guess} is wrong: go {hint}.", guesses_left=left, done=left <= 0, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


class DigitAction(Action):
    guess: int = Field(..., ge=0, le=9)


class DigitEnvironment(Environment):
    """Name a secret digit (one guess); its action is an integer, not text."""

    def __init__(self):
        super().__init__()
        self._secret = 0

    def reset(self, seed: int | None = None, **kwargs) -> GuessObservation:
        self._secret = random.Random(seed).randint(0, 9)
        return GuessObservation(feedback="Name my digit.")

    def step(self, action: DigitAction, **kwargs) -> GuessObservation:
        right = action.guess == self._secret
        return GuessObservation(feedback="yes" if right else "no", done=True, reward=1.0 if right else 0.0)

    @property
    def state(self) -> State:
        return State()


def digit_action(text: str) -> dict:
    """``to_action`` for DigitEnvironment: the last digit of the text (``ValueError`` without one)."""
    digits = [c for c in text if c.isdigit()]
    if not digits:
        raise ValueError("no digit in the reply")
    return {"guess": int(digits[-1])}


def secret_of(seed: int, high: int = 20) -> int:
    """GuessEnvironment's secret for ``seed``."""
    return random.Random(seed).randint(1, high)


class BrokenEnvironment(GuessEnvironment):
    """GuessEnvironment whose ``step`` fails (an env bug, not the model's doing)."""

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs) -> GuessObservation:
        raise RuntimeError("the env's own bug")


if __name__ == "__main__":
    import uvicorn
    from openenv.core.env_server.http_server import create_app

    app = create_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=8)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
