"""KuhnPoker-v0: one hand of Kuhn poker, a three-card game of imperfect information (two players).

Each player antes one chip and gets one card of Jack < Queen < King; it sees only its own.
Player 0 checks or bets one chip; then player 1 checks or bets (after a check) or calls or
folds (after a bet); after check-bet, player 0 calls or folds. At a showdown the higher card
takes the pot. Rewards are the chips won or lost (±1 or ±2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mathgym.envs.games.base import move_text
from mathgym.envs.multiagent.base import GameStart, Move, MultiAgentTextEnv, Outcome
from mathgym.errors import ConfigError
from mathgym.spaces import DEFAULT_MAX_LENGTH

DEFAULT_SYSTEM_PROMPT = "Play Kuhn poker. Answer each turn with one word: check, bet, call or fold."
CARDS = ("Jack", "Queen", "King")
_WORD = re.compile(r"(?i)\b(check|bet|call|fold)\b")
#: The legal actions after each betting history (c: check, b: bet).
LEGAL = {"": ("check", "bet"), "c": ("check", "bet"), "b": ("call", "fold"), "cb": ("call", "fold")}
#: How often the expert bluffs a Jack as first player (any value in [0, 1/3] is an equilibrium).
ALPHA = 1 / 6


def parse_action(action: str) -> str | None:
    """The last of check / bet / call / fold in the reply's move text, lowercase.

    Example:
        >>> parse_action("I hold the King, so I bet.")
        'bet'
    """
    found = _WORD.findall(move_text(action))
    return found[-1].lower() if found else None


def expert_probability(card: int, history: str) -> tuple[str, float]:
    """The expert's (equilibrium) aggressive action after ``history`` and the chance it takes it."""
    if history == "":
        return "bet", (ALPHA, 0.0, 3 * ALPHA)[card]
    if history == "c":
        return "bet", (1 / 3, 0.0, 1.0)[card]
    if history == "b":
        return "call", (0.0, 1 / 3, 1.0)[card]
    return "call", (0.0, ALPHA + 1 / 3, 1.0)[card]


class KuhnPokerEnv(MultiAgentTextEnv):
    """Kuhn poker, one hand: three cards, one card each, a single round of betting (imperfect information).

    A player's chat never holds the other's card; ``info["answer"]`` reveals both at the end. A
    reply without check / bet / call / fold, or one not allowed now, forfeits the hand (-1).
    ``reset(options={"cards": (c0, c1)})`` deals given cards (0 Jack, 1 Queen, 2 King).

    Args:
        system_prompt: System message; ``""`` for none.
        max_length: Longest move in characters.
        render_mode: ``None`` or ``"ansi"``.
    """

    default_system_prompt = DEFAULT_SYSTEM_PROMPT

    def __init__(self, system_prompt: str | None = None, max_length: int = DEFAULT_MAX_LENGTH, render_mode: str | None = None):
        super().__init__(max_turns=2, max_length=max_length, system_prompt=system_prompt, render_mode=render_mode)
        self._cards = (0, 1)
        self._history = ""

    def _new_game(self, options: Mapping[str, Any]) -> GameStart:
        cards = options.get("cards")
        if cards is None:
            cards = tuple(int(c) for c in self.np_random.permutation(3)[:2])
        elif not (isinstance(cards, (tuple, list)) and len(cards) == 2 and set(cards) <= {0, 1, 2} and cards[0] != cards[1]):
            raise ConfigError(f"options['cards']={cards!r} is not a deal; give two different cards from 0 (Jack), 1 (Queen), 2 (King).")
        self._cards, self._history = (int(cards[0]), int(cards[1])), ""
        rules = (
            "Kuhn poker, one hand. The deck has three cards: Jack < Queen < King. Each player antes 1 chip and "
            "gets one card, seen only by its holder. Player 0 checks or bets 1 chip. After a check, player 1 checks "
            "(showdown) or bets; after a bet, the other player calls (showdown) or folds (the bettor takes the pot). "
            "At the showdown the higher card takes the pot.\n\n"
        )
        prompts = (
            f"{rules}You are player 0. Your card: {CARDS[self._cards[0]]}.\n\nYou act first: check or bet?",
            f"{rules}You are player 1. Your card: {CARDS[self._cards[1]]}.",
        )
        return GameStart(f"kuhn-{self._cards[0]}{self._cards[1]}", prompts, 0)

    def _play(self, player: int, action: str) -> Move:
        word = parse_action(action)
        legal = LEGAL[self._history]
        if word not in legal:
            return Move(False, {player: f"Answer {' or '.join(legal)}."}, info={"move": word})
        self._history += word[0]
        info = {"move": word}
        outcome = self._settle()
        if outcome is not None:
            return Move(True, outcome=outcome, info=info)
        after = " or ".join(LEGAL[self._history])
        return Move(True, {1 - player: f"Your opponent chose to {word}. Your move: {after}?"}, next_player=1 - player, info=info)

    def _settle(self) -> Outcome | None:
        """The hand's outcome once the betting is over (``None`` before)."""
        history = self._history
        if history.endswith("f"):  # the other player folded to a bet: the bettor takes the ante
            folder = 1 if history == "bf" else 0
            return Outcome(tuple(-1.0 if p == folder else 1.0 for p in range(2)), 1 - folder, f"player {folder} folded")
        if history in ("cc", "bc", "cbc"):
            stake = 1.0 if history == "cc" else 2.0
            high = 0 if self._cards[0] > self._cards[1] else 1
            rewards = (stake, -stake) if high == 0 else (-stake, stake)
            return Outcome(rewards, high, f"showdown: {CARDS[self._cards[high]]} beats {CARDS[self._cards[1 - high]]}")
        return None

    def legal_moves(self) -> list[str]:
        return list(LEGAL[self._history])

    def hidden_state(self) -> str:
        return f"player 0 held the {CARDS[self._cards[0]]}, player 1 the {CARDS[self._cards[1]]}"

    def expert_action(self, rng: np.random.Generator | None = None) -> str:
        """The equilibrium strategy (bluffing Jacks, slow-playing Kings), its mixing drawn from ``rng``."""
        rng = self.np_random if rng is None else rng
        aggressive, chance = expert_probability(self._cards[self._current], self._history)
        passive = "check" if aggressive == "bet" else "fold"
        return aggressive if rng.random() < chance else passive
