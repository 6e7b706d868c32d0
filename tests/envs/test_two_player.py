"""Two-player envs (issue 50.3): the multi-agent contract, the versus wrapper, the games' experts,
hidden information, and TextArena's games through the real ``textarena`` package."""

from __future__ import annotations

import random
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import mathgym
from mathgym.envs.multiagent import MoveStatus, list_multiagent_envs, make_multiagent
from mathgym.envs.multiagent.textarena_games import TEXTARENA_TWO_PLAYER_GAMES
from mathgym.errors import ConfigError, EpisodeFinishedError, InvalidActionError, ResetNeededError, UnknownEnvError
from mathgym.rewards.base import Status

GAMES = ("Nim-v0", "TicTacToe-v0", "KuhnPoker-v0", "Negotiation-v0")


def play(game, movers, seed):
    """Play one game of ``game`` with ``movers[seat](game, rng)`` choosing each move; the last step."""
    rng = np.random.default_rng(seed)
    game.reset(seed=seed)
    while True:
        step = game.step(movers[game.current_player](game, rng))
        if step.terminated or step.truncated:
            return step


def expert(game, rng):
    return game.expert_action(rng=rng)


def random_mover(game, rng):
    moves = game.legal_moves()
    return moves[int(rng.integers(len(moves)))]


# -- registration ---------------------------------------------------------------------------------


def test_every_game_is_in_both_registries():
    for env_id in GAMES + tuple("TextArena/" + g for g in TEXTARENA_TWO_PLAYER_GAMES):
        assert env_id in mathgym.list_envs() and env_id in list_multiagent_envs()
    with pytest.raises(UnknownEnvError, match="TicTacToe-v0"):
        make_multiagent("TicTacToeo-v0")


@pytest.mark.parametrize("options", [{"seat": 1, "opponent": "random"}, {"seat": 0, "opponent_randomness": 0.5}])
@pytest.mark.parametrize("env_id", GAMES)
def test_versus_variants_pass_gymnasium_check_env(env_id, options):
    check_env(gym.make(env_id, **options).unwrapped, skip_render_check=True)


# -- the multi-agent contract ---------------------------------------------------------------------


@pytest.mark.parametrize("env_id", GAMES)
def test_a_game_goes_turn_by_turn_with_a_chat_per_player(env_id):
    game = make_multiagent(env_id)
    observations, info = game.reset(seed=3)
    assert list(observations) == [game.current_player] and info["messages"][-1]["content"] == observations[game.current_player]
    rng, turns = np.random.default_rng(0), 0
    while True:
        player = game.current_player
        chat = game.messages(player)
        assert chat[0]["role"] == "system" and chat[-1]["role"] == "user"
        assert [m["role"] for m in chat[1:]] == ["user", "assistant"] * ((len(chat) - 2) // 2) + ["user"]
        step = game.step(expert(game, rng))
        turns += 1
        assert step.info["player"] == player and step.info["move_status"] is MoveStatus.LEGAL
        if step.terminated:
            break
        assert step.rewards == (0.0, 0.0) and list(step.observations) == [game.current_player]
    assert not step.truncated and step.rewards == step.info["outcome"].rewards and step.info["answer"]
    assert step.info["turn"] == turns and step.observations == {}
    with pytest.raises(EpisodeFinishedError):
        game.step("x")


def test_bad_calls_raise_mathgym_errors_and_strings_never_do():
    game = make_multiagent("Nim-v0")
    with pytest.raises(ResetNeededError):
        game.step("take 1 from pile 1")
    game.reset(seed=0)
    with pytest.raises(InvalidActionError):
        game.step(3)  # type: ignore[arg-type]
    step = game.step("take 99 from pile 1")  # a str: scored, never raised
    assert step.info["move_status"] is MoveStatus.ILLEGAL_MOVE and step.terminated
    assert step.rewards == (-1.0, 1.0) and step.info["winner"] == 1
    game.reset(seed=0)
    step = game.step("x" * (game.max_length + 1))
    assert step.info["move_status"] is MoveStatus.TOO_LONG and step.rewards == (-1.0, 1.0)


def test_a_negotiation_forfeit_costs_the_mover_only():
    game = make_multiagent("Negotiation-v0")
    game.reset(seed=0)
    step = game.step("accept")  # nothing on the table
    assert step.info["move_status"] is MoveStatus.ILLEGAL_MOVE and step.rewards == (-1.0, 0.0) and step.info["winner"] is None


@pytest.mark.parametrize("env_id", GAMES)
def test_same_seed_same_game(env_id):
    movers = (expert, random_mover)
    first, second = make_multiagent(env_id), make_multiagent(env_id)
    for seed in (0, 1, 7):
        a, b = play(first, movers, seed), play(second, movers, seed)
        assert a.rewards == b.rewards and [first.messages(p) for p in (0, 1)] == [second.messages(p) for p in (0, 1)]


# -- the experts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["Nim-v0", "TicTacToe-v0"])
def test_the_expert_beats_a_random_mover_in_most_games(env_id):
    game, wins, losses = make_multiagent(env_id), 0, 0
    for seed in range(100):
        seat = seed % 2
        movers = (expert, random_mover) if seat == 0 else (random_mover, expert)
        winner = play(game, movers, seed).info["winner"]
        wins, losses = wins + (winner == seat), losses + (winner == 1 - seat)
    assert wins > 80
    if env_id == "TicTacToe-v0":
        assert losses == 0  # minimax never loses


def test_the_poker_expert_wins_chips_from_a_random_mover():
    """Poker is not won every hand: the equilibrium wins about 0.1 chip a hand from a random mover."""
    game, chips = make_multiagent("KuhnPoker-v0"), []
    for seed in range(3000):
        seat = seed % 2
        movers = (expert, random_mover) if seat == 0 else (random_mover, expert)
        chips.append(play(game, movers, seed).rewards[seat])
    assert np.mean(chips) > 0.05


def test_the_expert_negotiator_gets_more_than_a_random_one():
    game, expert_value, random_value = make_multiagent("Negotiation-v0"), [], []
    for seed in range(200):
        seat = seed % 2
        movers = (expert, random_mover) if seat == 0 else (random_mover, expert)
        rewards = play(game, movers, seed).rewards
        expert_value.append(rewards[seat])
        random_value.append(rewards[1 - seat])
    assert np.mean(expert_value) > np.mean(random_value) + 0.2


def test_experts_against_each_other_make_deals():
    game = make_multiagent("Negotiation-v0")
    deals = sum(play(game, (expert, expert), seed).info["outcome"].reason.startswith("deal") for seed in range(50))
    assert deals >= 45


# -- hidden information -------------------------------------------------------------------------------


def _chats_by_own_card(actions: list[str]) -> dict[tuple[int, int], list]:
    """(seat, its card) -> that seat's chat, for every deal, the same betting ``actions`` each time."""
    seen: dict[tuple[int, int], list] = {}
    for cards in [(a, b) for a in range(3) for b in range(3) if a != b]:
        game = make_multiagent("KuhnPoker-v0")
        game.reset(seed=0, options={"cards": cards})
        for action in actions:
            if game.finished:
                break
            game.step(action)
        for seat in (0, 1):
            chat = game.messages(seat)
            assert seen.setdefault((seat, cards[seat]), chat) == chat, f"seat {seat}'s chat depends on the other card"
    return seen


@pytest.mark.parametrize("actions", [["check", "bet"], ["bet"], ["check"]])
def test_a_poker_players_chat_never_depends_on_the_other_card(actions):
    seen = _chats_by_own_card(actions)
    assert "Your card: King" in seen[(0, 2)][1]["content"] and "King" not in seen[(1, 0)][1]["content"].split("Your card:")[1]


def test_a_negotiators_chat_never_depends_on_the_other_values():
    chats = []
    for other in ((1, 0, 3), (4, 0, 2), (0, 5, 0)):  # each worth 10 for 1 book, 2 hats, 3 balls
        game = make_multiagent("Negotiation-v0")
        game.reset(seed=0, options={"counts": (1, 2, 3), "values": ((1, 3, 1), other)})
        game.step("propose 1 2 0")
        chats.append(game.messages(1))
        game.step("propose 0 1 3")
        chats.append(game.messages(0))
    assert chats[1] == chats[3] == chats[5]  # player 0's chat, whatever player 1's values
    assert chats[0] != chats[2] != chats[4]  # player 1's own values are in its own chat


def test_the_versus_agent_sees_its_own_seat_only():
    env = gym.make("KuhnPoker-v0", seat=1)
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        mine, theirs = env.unwrapped.game._cards[1], env.unwrapped.game._cards[0]
        names = ("Jack", "Queen", "King")
        assert f"Your card: {names[mine]}" in obs and f"Your card: {names[theirs]}" not in repr(info)
        assert "answer" not in info and "player 0 held" not in repr(info)
        _, _, terminated, _, info = env.step(env.unwrapped.expert_action())
        assert terminated and "player 0 held" in info["answer"]


# -- the versus wrapper ---------------------------------------------------------------------------------


def test_seats_alternate_by_seed_and_the_opponent_moves_first_for_seat_one():
    env = gym.make("TicTacToe-v0")
    for seed in (0, 1, 2, 3):
        obs, info = env.reset(seed=seed)
        assert info["seat"] == seed % 2 and ("Your opponent played" in obs) == (seed % 2 == 1)
    fixed = gym.make("TicTacToe-v0", seat=1)
    assert all(fixed.reset(seed=s)[1]["seat"] == 1 for s in range(4))


def test_a_step_reports_the_agents_move_and_the_opponents_reply():
    env = gym.make("TicTacToe-v0", seat=0)
    env.reset(seed=0)
    obs, _, _, _, info = env.step("\\boxed{1}")
    assert info["move"] == 1 and f"Your opponent played {info['opponent_move']}." in obs and info["opponent_move"] != 1


def test_an_illegal_move_loses_the_game_with_a_format_error():
    env = gym.make("Nim-v0", seat=0)
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("I pass.")
    assert (reward, terminated, truncated, info["status"], info["correct"]) == (-1.0, True, False, Status.FORMAT_ERROR, False)


def test_perfect_play_against_the_expert_draws_tic_tac_toe():
    env = gym.make("TicTacToe-v0", seat=0)
    for seed in range(4):
        env.reset(seed=seed)
        while True:
            _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            if terminated or truncated:
                break
        assert reward == 0.0 and info["status"] == Status.WRONG and info["winner"] is None  # perfect play: a draw


def test_a_callable_opponent_answers_its_own_chat():
    asked = []

    def opponent(messages):
        asked.append(messages)
        return "bet"

    env = gym.make("KuhnPoker-v0", opponent=opponent, seat=0)
    env.reset(seed=0, options={"cards": (0, 2)})
    _, reward, terminated, _, info = env.step("check")
    assert terminated is False and "Your opponent chose to bet" in info["messages"][-1]["content"]
    assert "Your card: King" in asked[0][1]["content"] and "Jack" not in asked[0][1]["content"].split("Your card:")[1]
    _, reward, terminated, _, info = env.step("fold")
    assert terminated and reward == -1.0 and info["status"] == Status.WRONG


def test_an_opponent_that_breaks_the_rules_forfeits():
    env = gym.make("TicTacToe-v0", opponent=lambda messages: "no idea", seat=0)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("5")
    assert (reward, terminated, info["status"], info["correct"]) == (1.0, True, Status.CORRECT, True)


def test_options_are_checked():
    with pytest.raises(ConfigError, match="seat"):
        gym.make("Nim-v0", seat=2)
    with pytest.raises(ConfigError, match="opponent"):
        gym.make("Nim-v0", opponent="strong")
    with pytest.raises(ConfigError, match="has no expert"):
        gym.make("TextArena/TicTacToe-v0", opponent="expert")


# -- TextArena (the real package) ------------------------------------------------------------------------


def test_every_listed_textarena_game_is_a_two_player_game_of_the_installed_package():
    from textarena.envs.registration import ENV_REGISTRY

    for game in TEXTARENA_TWO_PLAYER_GAMES:
        assert game in ENV_REGISTRY
        env = make_multiagent("TextArena/" + game)
        observations, _ = env.reset(seed=1)
        assert env.num_players == 2 and observations[env.current_player].strip()


def test_textarena_tic_tac_toe_through_the_contract_leaves_random_alone():
    outside = random.getstate()
    game = make_multiagent("TextArena/TicTacToe-v0")
    game.reset(seed=0)
    player = game.current_player
    step = game.step("<think>[4]? no</think>I take the corner: [0]")
    assert step.info["move_status"] is MoveStatus.LEGAL and game.current_player == 1 - player
    assert "[Player %d]" % player in game.observe(1 - player) and "[4]? no" not in game.observe(1 - player)
    step = game.step("hmm")  # TextArena's rule: one more try
    assert step.info["move_status"] is MoveStatus.ILLEGAL_MOVE and not step.terminated and game.current_player == 1 - player
    assert "invalid move" in game.observe(1 - player)
    step = game.step("still nothing")
    assert step.terminated and step.rewards[1 - player] == -1.0 and step.info["winner"] == player
    assert random.getstate() == outside


def test_textarena_kuhn_poker_deals_each_player_its_own_card_only():
    for seed in range(5):
        game = make_multiagent("TextArena/KuhnPoker-v0")
        game.reset(seed=seed)
        cards = {p: game._env._rank_to_str(game._env.state.game_state["player_cards"][p]) for p in (0, 1)}
        rng = np.random.default_rng(seed)
        while not game.finished and min(len(game.messages(p)) for p in (0, 1)) < 1:
            game.step(random_mover(game, rng))
        for p in (0, 1):
            said = [line for m in game.messages(p) for line in m["content"].splitlines() if "Your card is" in line]
            assert said[0].endswith(f"'{cards[p]}'") and not said[0].endswith(f"'{cards[1 - p]}'")


def test_textarena_versus_a_callable_opponent():
    env = gym.make("TextArena/TicTacToe-v0", opponent=lambda messages: "[4]" if "'[4]'" in messages[-1]["content"] else "[0]", seat=1)
    obs, info = env.reset(seed=0)
    assert "placed their symbol" in obs and info["seat"] == 1


def test_a_missing_textarena_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "textarena", None)
    with pytest.raises(ConfigError, match=r"need textarena: pip install .*\[textarena\]"):
        gym.make("TextArena/TicTacToe-v0")


@pytest.mark.torch
def test_a_saved_model_plays_as_the_opponent_loaded_on_its_first_move():
    pytest.importorskip("torch")
    from mathgym.agents.opponent import PolicyOpponent
    from mathgym.agents.tiny import tiny_model_path

    opponent = PolicyOpponent(tiny_model_path(), max_new_tokens=6)
    env = gym.make("TicTacToe-v0", opponent=opponent, seat=0)
    env.reset(seed=0)
    assert opponent._policy is None  # the agent moves first: nothing asked, nothing loaded
    _, reward, terminated, _, info = env.step("\\boxed{5}")
    assert opponent._policy is not None and info["move"] == 5
    # The untrained tiny model writes no free cell, and forfeits; or it did write one, and the game goes on.
    assert (terminated, reward, info["status"]) == (True, 1.0, Status.CORRECT) or (not terminated and "opponent_move" in info)
