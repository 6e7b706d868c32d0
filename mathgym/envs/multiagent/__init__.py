"""Two-player text games: the multi-agent contract, the games, and single-agent versions of them.

- :mod:`~mathgym.envs.multiagent.base`: :class:`MultiAgentTextEnv`, the contract (turns, a chat
  and a reward per player, the outcome).
- :mod:`~mathgym.envs.multiagent.versus`: :class:`VersusEnv`, any two-player game as a
  single-agent ``gymnasium.Env[str, str]`` against a fixed opponent.
- The games (each with an expert): Nim, tic-tac-toe, Kuhn poker, a negotiation; and TextArena's
  two-player games where ``textarena`` is installed (:mod:`~mathgym.envs.multiagent.textarena_games`).

Every game has one id in two registries: ``gym.make(ID)`` is the single-agent env against the
expert (TextArena's: against a random legal mover), ``make_multiagent(ID)`` the game itself.
"""

from __future__ import annotations

from mathgym.envs.multiagent.base import GameStart, Move, MoveStatus, MultiAgentTextEnv, MultiStep, Outcome
from mathgym.envs.multiagent.registry import list_multiagent_envs, make_multiagent, register_multiagent
from mathgym.catalogue import EnvFacts
from mathgym.registry import register_env

#: (id, multi-agent entry point, one-line description) of every built-in two-player game.
TWO_PLAYER_GAMES: tuple[tuple[str, str, str], ...] = (
    ("Nim-v0", "mathgym.envs.multiagent.nim:NimEnv", "Two-player Nim: take from piles in turn, the last object wins (vs the nim-sum expert)."),
    ("TicTacToe-v0", "mathgym.envs.multiagent.tic_tac_toe:TicTacToeEnv", "Two-player tic-tac-toe, seats alternating by seed (vs the minimax expert)."),
    ("KuhnPoker-v0", "mathgym.envs.multiagent.kuhn_poker:KuhnPokerEnv", "Two-player Kuhn poker, one hand, imperfect information; reward: chips (vs the equilibrium expert)."),
    ("Negotiation-v0", "mathgym.envs.multiagent.negotiation:NegotiationEnv", "Two-player deal or no deal: split items with private values (vs the expert negotiator)."),
)
VERSUS_ENTRY_POINT = "mathgym.envs.multiagent.versus:VersusEnv"


def register_two_player_envs() -> None:
    """Register every two-player game twice under one id: the game (:func:`make_multiagent`) and
    the single-agent env against its expert (``gym.make``); TextArena's listed games too (ids only,
    no import of textarena)."""
    from mathgym.envs.multiagent.textarena_games import register_textarena_envs  # noqa: PLC0415

    for env_id, entry_point, description in TWO_PLAYER_GAMES:
        register_multiagent(env_id, entry_point, description)
        register_env(env_id, VERSUS_ENTRY_POINT, description, order_enforce=False, kwargs={"game": env_id}, facts=EnvFacts("games", "multi"))
    register_textarena_envs()


__all__ = [
    "GameStart", "Move", "MoveStatus", "MultiAgentTextEnv", "MultiStep", "Outcome", "list_multiagent_envs",
    "make_multiagent", "register_multiagent", "register_two_player_envs",
]
