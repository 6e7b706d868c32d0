"""TextArena's single-player games by id, as mathgym text envs (optional extra ``mathgym[textarena]``).

``TextArena/<id>`` (e.g. ``TextArena/Sudoku-v0-easy``) is TextArena's game ``<id>``, unwrapped (its
``-raw`` form: mathgym builds the chat itself). The ids are registered from the list shipped here
(:data:`TEXTARENA_SINGLE_PLAYER_GAMES`: every id of TextArena 0.7.4 whose state is its
``SinglePlayerState``, less :data:`SKIPPED`), so ``import mathgym`` never imports textarena; a test
checks the list against the installed package. Any other single-player id works through
``TextArenaSingleEnv(game=ID)``.

- The chat: TextArena's messages (the rules, then its replies to each move) as user messages, the
  model's replies as assistant messages. The move is read from the answer after a reasoning model's
  thinking (its last :data:`~mathgym.envs.games.base.TAIL_CHARS` characters; thinking never closed:
  no move).
- TextArena's rules stay: an invalid move gets TextArena's message and one more try (status
  ``format_error``, reward 0, the episode goes on); a second invalid move in a row ends the game
  (status ``format_error``, with TextArena's reward for it: its -1 is 0, a few games give the
  progress made). Never an exception.
- Reward from TextArena's outcome for the player (its ``rewards[0]``): a win (1) is reward 1, status
  ``correct``; a share of the puzzle done (0 < r < 1, TextArena's progress at its own turn limit) is
  reward r, ``partial``; 0 or below (a loss; TextArena's -1 for a forfeit) is reward 0, ``wrong``
  (``format_error`` when invalid moves forfeited it). TextArena's own value is in
  ``info["textarena_reward"]``. Running out of mathgym's ``max_turns`` first: truncated, reward 0, ``wrong``.
- TextArena draws from Python's global ``random``; each env keeps a generator state of its own and
  swaps it in around every call into TextArena (as :mod:`mathgym.envs.multiagent.textarena_games`),
  so the same seed replays the same game and the caller's ``random`` is left alone. What TextArena
  prints while generating a puzzle is kept off stdout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import random
from collections.abc import Iterator, Mapping
from typing import Any

from mathgym.catalogue import EnvFacts
from mathgym.core import Judgement, Task, TextEnv
from mathgym.envs.games.base import TAIL_CHARS
from mathgym.envs.multiagent.textarena_games import PREFIX, _make_raw
from mathgym.errors import ConfigError
from mathgym.rewards.base import Status
from mathgym.rewards.extract import answer_after_thinking
from mathgym.spaces import DEFAULT_MAX_LENGTH

#: TextArena 0.7.4's single-player games (``SinglePlayerState``) that run offline on Python 3.10+.
TEXTARENA_SINGLE_PLAYER_GAMES: tuple[str, ...] = (
    "2048-v0-ultra-easy", "2048-v0-mega-easy", "2048-v0-super-easy", "2048-v0-very-easy", "2048-v0-easy", "2048-v0",
    "2048-v0-hard", "2048-v0-very-hard", "2048-v0-extreme", "2048-v0-3x3", "2048-v0-5x5", "2048-v0-6x6", "2048-v0-8x8",
    "2048-v0-10x10", "Bandit-v0", "Bandit-v0-hard", "Blackjack-v0", "Blackjack-v0-long", "Countdown-v0", "Crosswords-v0",
    "Crosswords-v0-hardcore", "Cryptarithm-v0", "FifteenPuzzle-v0", "FrozenLake-v0", "FrozenLake-v0-random",
    "FrozenLake-v0-hardcore", "GuessTheNumber-v0", "GuessTheNumber-v0-hardcore", "LightsOut-v0", "LogicPuzzle-v0",
    "LogicPuzzle-v0-hard", "Mastermind-v0", "Mastermind-v0-hard", "Mastermind-v0-extreme", "Minesweeper-v0",
    "Minesweeper-v0-small", "Minesweeper-v0-medium", "Minesweeper-v0-hard", "PegJump-v0", "RushHour-v0", "Secretary-v0",
    "Secretary-v0-long", "Set-v0", "Slitherlink-v0", "Sokoban-v0", "Sokoban-v0-medium", "Sudoku-v0-very-easy",
    "Sudoku-v0-easy", "Sudoku-v0", "Sudoku-v0-medium", "Sudoku-v0-hard", "ThreeCardMonte-v0", "TowerOfHanoi-v0",
    "TowerOfHanoi-v0-medium", "TowerOfHanoi-v0-hard", "TowerOfHanoi-v0-hardcore", "TowerOfHanoi-v0-extreme",
)
#: TextArena 0.7.4's single-player ids left out, and why.
SKIPPED: dict[str, str] = {
    **{g: "an LLM jury through OpenRouter (network, API key)" for g in ("GuessWho-v0", "TwentyQuestions-v0", "TwentyQuestions-v0-hardcore")},
    **{g: "nltk's 'words' corpus, downloaded at first use (network)" for g in (
        "Hangman-v0", "Hangman-v0-hardcore", "WordLadder-v0", "WordLadder-v0-medium", "WordLadder-v0-hard", "Wordle-v0",
        "Wordle-v0-hardcore", "Wordle-v0-long", "Wordle-v0-long-hardcore", "WordSearch-v0", "WordSearch-v0-hardcore")},
    "Klondike-v0": "its module does not parse (a syntax error in TextArena 0.7.4)",
    "UltimateTexasHoldem-v0": "an f-string only Python 3.12 parses",
}
FACTS = EnvFacts("games", "multi", licence="TextArena's games (MIT)", extra="textarena")


class TextArenaSingleEnv(TextEnv):
    """One of TextArena's single-player games, in mathgym's text-env contract.

    Args:
        game: TextArena's id (e.g. ``"Sudoku-v0-easy"``).
        game_options: Options of TextArena's env over its registered ones (e.g. ``{"max_turns": 50}``).
        max_turns: Replies (invalid ones included) before the episode is truncated, a bound over
            TextArena's own turn limit (some games, 2048, have none).
        system_prompt: System message (default: none; TextArena's prompt is the first user message).
        max_length: Longest observation/action in characters.
        render_mode: ``None`` or ``"ansi"``.

    Example:
        >>> import gymnasium as gym, mathgym
        >>> env = gym.make("TextArena/TowerOfHanoi-v0")
    """

    catalogue_facts = FACTS

    def __init__(
        self, game: str = "TowerOfHanoi-v0", game_options: Mapping[str, Any] | None = None, max_turns: int = 400,
        system_prompt: str | None = None, max_length: int = DEFAULT_MAX_LENGTH, render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        self.game = game
        self.game_options = dict(game_options or {})
        self._random_state = random.Random(0).getstate()
        self._env = self._new_raw(seed=0)  # builds once here, so a bad id or a multi-player game fails at make

    @contextlib.contextmanager
    def _inside_textarena(self) -> Iterator[None]:
        """Python's global ``random`` holds this env's state, and stdout is set aside, for the duration."""
        outside = random.getstate()
        random.setstate(self._random_state)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        finally:
            self._random_state = random.getstate()
            random.setstate(outside)

    def _new_raw(self, seed: int) -> Any:
        """A new TextArena env (some keep state across resets), reset with ``seed``."""
        self._random_state = random.Random(seed).getstate()  # some games draw before TextArena seeds random
        with self._inside_textarena():
            env = _make_raw(self.game, self.game_options)
            try:
                env.reset(num_players=1, seed=seed)
            except AssertionError as err:  # TextArena's states assert their number of players
                raise ConfigError(f"TextArena's {self.game} is not a single-player game ({err}).") from None
        from textarena.state import SinglePlayerState  # noqa: PLC0415 - optional dependency, there by now

        if not isinstance(env.state, SinglePlayerState):
            raise ConfigError(f"TextArena's {self.game} is not a single-player game (its state is {type(env.state).__name__}).")
        return env

    def _sample_task(self, options: Mapping[str, Any]) -> Task:
        seed = int(self.np_random.integers(2**31))
        self._env = self._new_raw(seed)
        return Task(f"textarena-{self.game}-{seed}", self._collect_news(), "", {"seed": seed})

    def _collect_news(self) -> str:
        """What TextArena told the player since the last call (its own moves left out: they are in the chat)."""
        from textarena.core import ObservationType  # noqa: PLC0415

        lines = [str(message) for sender, message, kind in self._env.state.observations[0]
                 if not (sender == 0 and kind == ObservationType.PLAYER_ACTION)]
        self._env.state.observations[0] = []
        return "\n".join(lines) or "(no reply)"

    def _judge(self, action: str) -> Judgement:
        answer = answer_after_thinking(action)
        move = "" if answer is None else answer[-TAIL_CHARS:]
        state = self._env.state
        errors_before = getattr(state, "error_count", 0)
        with self._inside_textarena():
            done, _ = self._env.step(move)
        news = self._collect_news()
        invalid = bool(state.game_info[0].get("invalid_move")) or getattr(state, "error_count", 0) > errors_before
        info: dict[str, Any] = {"move": move.strip()[-200:], "feedback": news[-2000:]}
        if not done:
            status = Status.FORMAT_ERROR if invalid else Status.IN_PROGRESS
            return Judgement(0.0, status, False, news, {"textarena": 0.0}, info=info)
        return self._outcome(invalid, info)

    def _outcome(self, invalid: bool, info: dict[str, Any]) -> Judgement:
        """The end of TextArena's game: its reward for the player, mapped as the module says."""
        raw = (self._env.state.rewards or {}).get(0, 0.0)
        # Countdown-v0 passes set_invalid_move its arguments swapped: a message where the reward goes.
        raw = float(raw) if isinstance(raw, (int, float)) and math.isfinite(raw) else 0.0
        reason = str(self._env.state.game_info[0].get("reason") or "the game ended")
        self._task = dataclasses.replace(self.task, answer=reason)  # no gold move: TextArena's verdict
        reward = min(max(raw, 0.0), 1.0)
        if invalid:
            status = Status.FORMAT_ERROR
        else:
            status = Status.CORRECT if reward >= 1.0 else Status.PARTIAL if reward > 0 else Status.WRONG
        return Judgement(reward, status, True, "", {"textarena": reward}, correct=status is Status.CORRECT,
                         info={**info, "textarena_reward": raw, "reason": reason})

    def _final_judgement(self, last: Judgement) -> Judgement:
        return Judgement(0.0, Status.WRONG, False, "", {"textarena": 0.0}, False, last.info)

    def hidden_state(self) -> str:
        """TextArena's game state (the hidden parts included), for debugging."""
        return str(self._env.state.game_state)[:10000]


def register_textarena_single_player_envs() -> None:
    """Register ``TextArena/<id>`` for every game of :data:`TEXTARENA_SINGLE_PLAYER_GAMES` (no import of textarena)."""
    from mathgym.registry import register_env  # noqa: PLC0415

    for game in TEXTARENA_SINGLE_PLAYER_GAMES:
        register_env(PREFIX + game, "mathgym.envs.interop.textarena_single:TextArenaSingleEnv",
                     f"TextArena's single-player {game} (needs mathgym[textarena]).",
                     order_enforce=False, kwargs={"game": game}, facts=FACTS)
