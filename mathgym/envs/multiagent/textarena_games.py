"""TextArena's two-player games in mathgym's multi-agent contract (optional extra ``mathgym[textarena]``).

``TextArena/<id>`` (e.g. ``TextArena/TicTacToe-v0``) is TextArena's game ``<id>``, unwrapped (its
``-raw`` form: mathgym builds each player's chat itself): ``make_multiagent`` gives the game,
``gym.make`` the single-agent env against a random legal mover (or ``opponent=`` a callable).
The ids are registered from the list shipped here (:data:`TEXTARENA_TWO_PLAYER_GAMES`), so
``import mathgym`` never imports textarena; a test checks the list against the installed package.
Any other TextArena two-player id works through ``TextArenaGame(game=ID)``.

- Each player's chat: TextArena's messages to that player (``[GAME] ...``, ``[Player 1] ...``),
  its own moves as assistant messages. The game reads the answer after a reasoning model's
  thinking (its last :data:`~mathgym.envs.games.base.TAIL_CHARS` characters; thinking never
  closed: no move); the other player sees the move as TextArena shows it.
- TextArena's rules stay: an invalid move gets its message and one more try (``illegal_move``, the
  same player moves again), a second forfeits (TextArena's -1 / +1).
- TextArena draws from Python's global ``random`` (seeded by ``reset``); each game keeps a
  generator state of its own and swaps it in around every call, so games do not disturb each
  other or the caller, and the same seed replays the same game.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Iterator, Mapping
from typing import Any

from mathgym.envs.games.base import TAIL_CHARS
from mathgym.envs.multiagent.base import GameStart, Move, MultiAgentTextEnv, Outcome
from mathgym.errors import ConfigError
from mathgym.install import extra_hint
from mathgym.rewards.extract import answer_after_thinking
from mathgym.spaces import DEFAULT_MAX_LENGTH

PREFIX = "TextArena/"
#: TextArena 0.7.4's two-player games that run offline on Python 3.10+ (without an LLM jury, nltk
#: downloads, or f-strings only Python 3.12 parses).
TEXTARENA_TWO_PLAYER_GAMES: tuple[str, ...] = (
    "Alquerque-v0", "Battleship-v0", "Breakthrough-v0", "Briscola-v0", "Chopsticks-v0", "ColonelBlotto-v0",
    "ConnectFour-v0", "Crusade-v0", "GameOfPureStrategy-v0", "GermanWhist-v0", "Golf-v0", "HighSociety-v0",
    "IndianPoker-v0", "IteratedMatchingPennies-v0", "IteratedPrisonersDilemma-v0", "IteratedRockPaperScissors-v0",
    "IteratedTwoThirdsAverage-v0", "IteratedUltimatumGame-v0", "KuhnPoker-v0", "LinesOfAction-v0", "MemoryGame-v0",
    "Nim-v0", "Othello-v0", "PigDice-v0", "QuantumTicTacToe-v0", "SimpleBlindAuction-v0", "SimpleNegotiation-v0",
    "SimpleTak-v0", "SpiteAndMalice-v0", "Stratego-v0", "Tak-v0", "TicTacToe-v0", "TruthAndDeception-v0",
    "TwoDollar-v0", "UltimateTicTacToe-v0", "WildTicTacToe-v0",
)
INSTALL_HINT = f"TextArena's games need textarena: {extra_hint('textarena')}"
#: A bracketed move as TextArena games list them (``'[4]'``, ``[check]``, ``[col 3]``).
_BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")
_SENDER = re.compile(r"\[(GAME|Player \d+)\]")


def _textarena() -> Any:
    try:
        import textarena  # noqa: PLC0415 - optional dependency
    except ImportError as err:
        raise ConfigError(f"{INSTALL_HINT} ({err})") from None
    return textarena


def _make_raw(game: str, options: Mapping[str, Any]) -> Any:
    """TextArena's env ``game`` without its wrappers (its registered options, ``options`` on top)."""
    _textarena()
    from textarena.envs.registration import ENV_REGISTRY  # noqa: PLC0415

    if game not in ENV_REGISTRY:
        import difflib  # noqa: PLC0415

        close = difflib.get_close_matches(game, list(ENV_REGISTRY), n=3)
        raise ConfigError(f"TextArena has no game {game!r}." + (f" Did you mean: {', '.join(close)}?" if close else ""))
    spec = ENV_REGISTRY[game]
    entry = spec.entry_point
    if isinstance(entry, str):
        from mathgym.registry import load_entry_point  # noqa: PLC0415

        entry = load_entry_point(entry)
    return entry(**{**spec.kwargs, **dict(options)})


class TextArenaGame(MultiAgentTextEnv):
    """One of TextArena's two-player games, in mathgym's multi-agent contract.

    Args:
        game: TextArena's id (e.g. ``"TicTacToe-v0"``).
        game_options: Options of TextArena's env over its registered ones.
        max_turns: Moves (tries included) each player may make before the episode is truncated.
        system_prompt: System message of each chat (default: none; TextArena's prompt is the first user message).
        max_length: Longest move in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    def __init__(
        self, game: str = "TicTacToe-v0", game_options: Mapping[str, Any] | None = None, max_turns: int = 200,
        system_prompt: str | None = None, max_length: int = DEFAULT_MAX_LENGTH, render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        self.game = game
        self.game_options = dict(game_options or {})
        self._env = _make_raw(game, self.game_options)
        self._random_state = random.Random(0).getstate()
        try:
            with self._own_random():
                self._env.reset(num_players=2, seed=0)
        except AssertionError as err:  # TextArena's states assert their number of players
            raise ConfigError(f"TextArena's {game} is not a two-player game ({err}).") from None

    @contextlib.contextmanager
    def _own_random(self) -> Iterator[None]:
        """Python's global ``random`` holds this game's state for the duration (TextArena draws from it)."""
        outside = random.getstate()
        random.setstate(self._random_state)
        try:
            yield
        finally:
            self._random_state = random.getstate()
            random.setstate(outside)

    def _new_game(self, options: Mapping[str, Any]) -> GameStart:
        seed = int(self.np_random.integers(2**31))
        self._random_state = random.Random(seed).getstate()  # some games draw before TextArena seeds random
        self._env = _make_raw(self.game, self.game_options)  # a new one: some keep state across resets (a deck's order)
        with self._own_random():
            self._env.reset(num_players=2, seed=seed)
        news = self._collect_news()
        return GameStart(f"textarena-{self.game}-{seed}", (news[0], news[1]), int(self._env.state.current_player_id))

    def _collect_news(self) -> dict[int, str]:
        """What TextArena told each player since the last call (its own moves left out: they are in its chat)."""
        from textarena.core import ObservationType  # noqa: PLC0415

        news = {}
        for player in range(2):
            lines = []
            for sender, message, kind in self._env.state.observations[player]:
                if sender == player and kind == ObservationType.PLAYER_ACTION:
                    continue
                lines.append(message if sender < 0 else f"[Player {sender}] {message}")
            self._env.state.observations[player] = []
            news[player] = "\n".join(lines)
        return news

    def _play(self, player: int, action: str) -> Move:
        answer = answer_after_thinking(action)
        move = "" if answer is None else answer[-TAIL_CHARS:]
        state = self._env.state
        errors_before = getattr(state, "error_count", 0)
        with self._own_random():
            done, _ = self._env.step(move)
        news = self._collect_news()
        invalid = bool(state.game_info[player].get("invalid_move")) or getattr(state, "error_count", 0) > errors_before
        info = {"move": move.strip()[-200:]}
        if done:
            return Move(not invalid, news, outcome=self._final_outcome(), info=info)
        return Move(not invalid, news, next_player=int(state.current_player_id), info=info, retry=invalid)

    def _final_outcome(self) -> Outcome:
        rewards = self._env.state.rewards or {}
        values = tuple(float(rewards.get(p, 0.0)) for p in range(2))
        winner = None if values[0] == values[1] else int(values[1] > values[0])
        reasons = {str(info.get("reason", "")) for info in self._env.state.game_info.values()} - {""}
        return Outcome(values, winner, "; ".join(sorted(reasons)) or "the game ended")

    def legal_moves(self) -> list[str]:
        """The bracketed moves the current player's latest message lists (``[4]``, ``[check]``), else those of its whole chat.

        TextArena has no list of legal moves; its games name them in brackets. A move taken from
        an example in the rules may still be invalid (TextArena then asks again).
        """
        chat = [m["content"] for m in self.messages(self._current) if m["role"] == "user"]
        for text in (chat[-1:], chat):
            found = [m for m in _BRACKETED.findall("\n".join(text)) if not _SENDER.fullmatch(m)]
            if found:
                return list(dict.fromkeys(found))
        return [""]

    def hidden_state(self) -> str:
        return str(self._env.state.game_info)


def register_textarena_envs() -> None:
    """Register ``TextArena/<id>`` for every game of :data:`TEXTARENA_TWO_PLAYER_GAMES` (no import of textarena)."""
    from mathgym.envs.multiagent.registry import register_multiagent  # noqa: PLC0415
    from mathgym.registry import register_env  # noqa: PLC0415
    from mathgym.catalogue import EnvFacts  # noqa: PLC0415

    for game in TEXTARENA_TWO_PLAYER_GAMES:
        env_id = PREFIX + game
        description = f"TextArena's two-player {game.removesuffix('-v0')} (vs a random legal mover; needs mathgym[textarena])."
        register_multiagent(env_id, "mathgym.envs.multiagent.textarena_games:TextArenaGame", description, game=game)
        register_env(env_id, "mathgym.envs.multiagent.versus:VersusEnv", description, order_enforce=False,
                     kwargs={"game": env_id, "opponent": "random"},
                     facts=EnvFacts("games", "multi", licence="TextArena's games (MIT)", extra="textarena"))
