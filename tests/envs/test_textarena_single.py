"""TextArena's single-player games by id (issue 51), through the real ``textarena`` package."""

from __future__ import annotations

import pathlib
import random
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import mathgym
from mathgym.catalogue import EnvFacts
from mathgym.envs.multiagent.textarena_games import _BRACKETED
from mathgym.envs.interop.textarena_single import SKIPPED, TEXTARENA_SINGLE_PLAYER_GAMES, TextArenaSingleEnv
from mathgym.errors import ConfigError
from mathgym.registry import catalogue_entry
from mathgym.rewards.base import Status

pytest.importorskip("textarena")


def single_player_ids_of_the_package() -> set[str]:
    """Every id of the installed TextArena whose game module uses its single-player state (no wrapper variants)."""
    import textarena
    from textarena.envs.registration import ENV_REGISTRY

    envs = pathlib.Path(textarena.__file__).parent / "envs"
    single = {p.parent.name for p in envs.glob("*/env.py") if "SinglePlayerState" in p.read_text()}
    return {
        game for game, spec in ENV_REGISTRY.items()
        if not game.endswith(("-raw", "-train")) and isinstance(spec.entry_point, str) and spec.entry_point.split(".")[2] in single
    }


def test_the_list_and_the_skipped_are_the_installed_packages_single_player_games():
    assert set(TEXTARENA_SINGLE_PLAYER_GAMES) | set(SKIPPED) == single_player_ids_of_the_package()
    assert not set(TEXTARENA_SINGLE_PLAYER_GAMES) & set(SKIPPED) and all(SKIPPED.values())


#: Games whose generator takes many seconds a deal (Sokoban-v0-medium about 28 s for the test's
#: resets on 2 cores): run under ``-m heavy`` only, so the default run stays within its 10 minutes.
SLOW_TO_DEAL = {"Sokoban-v0-medium", "Sudoku-v0-hard"}


@pytest.mark.parametrize("game", [pytest.param(g, marks=pytest.mark.heavy) if g in SLOW_TO_DEAL else g
                                  for g in TEXTARENA_SINGLE_PLAYER_GAMES])
def test_every_id_builds_resets_deterministically_and_survives_random_moves(game):
    env_id = "TextArena/" + game
    assert env_id in mathgym.list_envs()
    assert catalogue_entry(env_id).facts == EnvFacts("games", "multi", licence="TextArena's games (MIT)", extra="textarena")
    outside = random.getstate()
    env = gym.make(env_id)
    first, info = env.reset(seed=5)
    again, info_again = env.reset(seed=5)
    assert first == again and first.strip() and info["task_id"] == info_again["task_id"]
    assert info["messages"] == [{"role": "user", "content": first}]
    rng, obs = np.random.default_rng(0), first
    for turn in range(1, 5):
        moves = _BRACKETED.findall(obs) or ["[1]"]
        obs, reward, terminated, truncated, info = env.step("<think>[0]?</think>" + moves[int(rng.integers(len(moves)))])
        assert info["turn"] == turn and info["messages"][-1]["role"] == ("assistant" if terminated else "user")
        assert 0.0 <= reward <= 1.0 and not truncated
        if terminated:
            assert info["status"] in {Status.CORRECT, Status.PARTIAL, Status.WRONG, Status.FORMAT_ERROR} and info["answer"]
            break
        assert info["status"] in {Status.IN_PROGRESS, Status.FORMAT_ERROR} and reward == 0.0 and obs
    assert random.getstate() == outside


@pytest.mark.parametrize("game", ["GuessTheNumber-v0", "TowerOfHanoi-v0", "ThreeCardMonte-v0"])
def test_gymnasium_check_env(game):
    check_env(gym.make("TextArena/" + game).unwrapped, skip_render_check=True)


def test_a_win_is_reward_one_and_correct_the_move_read_after_the_thinking():
    env = gym.make("TextArena/GuessTheNumber-v0")
    env.reset(seed=0)
    target = env.unwrapped._env.state.game_state["game_number"]
    wrong = 1 if target != 1 else 2
    obs, reward, terminated, _, info = env.step(f"<think>maybe [{target}]</think>I guess [{wrong}]")
    assert (reward, terminated, info["status"], info["move"]) == (0.0, False, Status.IN_PROGRESS, f"I guess [{wrong}]")
    assert ("higher" if wrong < target else "lower") in obs
    _, reward, terminated, _, info = env.step(f"[{target}]")
    assert (reward, terminated, info["status"], info["correct"]) == (1.0, True, Status.CORRECT, True)
    assert info["textarena_reward"] == 1.0 and "Congratulations" in info["answer"]


def test_an_invalid_move_gets_one_more_try_then_forfeits_per_textarena():
    env = gym.make("TextArena/Bandit-v0")  # its forfeit is TextArena's -1 (others give the progress made)
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step("no move here")
    assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, Status.FORMAT_ERROR)
    assert "invalid move" in obs
    _, reward, terminated, _, info = env.step("<think>never closed [red]")  # thinking never closed: no move
    assert (reward, terminated, info["status"], info["correct"]) == (0.0, True, Status.FORMAT_ERROR, False)
    assert info["textarena_reward"] == -1.0


def test_countdowns_swapped_arguments_still_end_in_a_number():
    env = gym.make("TextArena/Countdown-v0")
    env.reset(seed=0)
    env.step("nothing")
    _, reward, terminated, _, info = env.step("still nothing")
    assert (reward, terminated, info["status"], info["textarena_reward"]) == (0.0, True, Status.FORMAT_ERROR, 0.0)


def test_too_long_and_the_turn_budget():
    env = gym.make("TextArena/GuessTheNumber-v0", max_length=100)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("x" * 101)
    assert (reward, terminated, info["status"]) == (0.0, True, Status.TOO_LONG)
    env = gym.make("TextArena/FifteenPuzzle-v0", max_turns=2)
    env.reset(seed=0)
    env.step("[up]")
    _, reward, terminated, truncated, info = env.step("[down]")
    assert (reward, terminated, truncated, info["status"]) == (0.0, False, True, Status.WRONG)


def test_not_a_single_player_game_or_no_game_at_all():
    with pytest.raises(ConfigError, match="not a single-player game"):
        TextArenaSingleEnv(game="TicTacToe-v0")
    with pytest.raises(ConfigError, match="Did you mean"):
        TextArenaSingleEnv(game="Sudoku-v9")


def test_a_missing_textarena_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "textarena", None)
    with pytest.raises(ConfigError, match=r"need textarena: pip install .*\[textarena\]"):
        gym.make("TextArena/Sudoku-v0")
