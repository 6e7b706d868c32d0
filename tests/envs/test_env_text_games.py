"""The multi-turn text games: experts win every level, parsers read what models write, errors never end a game."""

from __future__ import annotations

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.envs.games import game2048, hangman, hanoi, mastermind, minesweeper, wordle
from mathgym.envs.games.base import TAIL_CHARS
from mathgym.envs.games.words import answer_words, dictionary
from mathgym.errors import ConfigError

GAMES = ("Wordle-v0", "Mastermind-v0", "Minesweeper-v0", "Game2048-v0", "Hanoi-v0", "Hangman-v0")
#: Seeds per level for the expert check: the slow levels of 2048 (hundreds of moves) and
#: Mastermind (thousands of codes weighed per guess) get fewer; every level of every game is
#: covered. The worst cases over every task of a level are in docs/envs.md.
SAMPLE = {"Game2048-v0": (4, 3, 1, 1, 1), "Mastermind-v0": (6, 6, 6, 2, 2)}
DEFAULT_SAMPLE = 6
LEVELS = {"Wordle-v0": 5, "Mastermind-v0": 5, "Minesweeper-v0": 5, "Game2048-v0": 5, "Hanoi-v0": 5, "Hangman-v0": 5}


def play(env, seed: int, policy=None):
    env.reset(seed=seed)
    policy = policy or (lambda e: e.unwrapped.expert_action())
    while True:
        _, reward, terminated, truncated, info = env.step(policy(env))
        if terminated or truncated:
            return reward, terminated, info


@pytest.mark.parametrize("env_id", GAMES)
def test_the_expert_wins_a_sample_of_every_level(env_id):
    for level in range(LEVELS[env_id]):
        env = gym.make(env_id, difficulty=level)
        seeds = SAMPLE.get(env_id, (DEFAULT_SAMPLE,) * LEVELS[env_id])[level]
        for seed in range(seeds):
            reward, terminated, info = play(env, 1000 * level + seed)
            assert reward == 1.0 and terminated and info["correct"] and info["status"] == "correct", (
                env_id,
                level,
                seed,
                info,
            )
    with pytest.raises(ConfigError, match="difficulty"):
        gym.make(env_id, difficulty=LEVELS[env_id])


@pytest.mark.parametrize("env_id", GAMES)
def test_format_errors_use_a_turn_but_only_the_budget_ends_the_game(env_id):
    env = gym.make(env_id, difficulty=0)
    obs, info = env.reset(seed=0)
    assert "answer" not in info and info["task_id"]
    for turn in range(1, env.unwrapped.max_turns + 1):
        obs, reward, terminated, truncated, info = env.step("Hmm, tricky one!")
        assert not terminated and reward == 0.0 and info["turn"] == turn
        if truncated:
            break
        assert info["status"] == "format_error" and "turns left" in obs
    assert truncated and info["status"] == "wrong" and info["answer"]


@pytest.mark.parametrize("env_id", GAMES)
def test_same_seed_same_game_and_the_render_shows_the_board(env_id):
    first, second = gym.make(env_id, difficulty=2, render_mode="ansi"), gym.make(env_id, difficulty=2)
    assert first.reset(seed=5) == second.reset(seed=5)
    for _ in range(2):
        action = first.unwrapped.expert_action()
        step = first.step(action)
        assert step[:4] == second.step(action)[:4]
        if step[2] or step[3]:
            break
    text = first.render()
    assert "[board]" in text and "\x1b[" in text and "[assistant]" in text


def test_wordle_feedback_follows_the_repeated_letter_rule():
    assert wordle.feedback("allee", "apple") == "GY__G"
    assert wordle.feedback("speed", "abide") == "__Y_Y"  # one e in the secret: one mark, the first
    assert wordle.feedback("eerie", "abide") == "___YG"  # the only e is matched in place: no Y for the others
    assert wordle.feedback("crane", "crane") == "GGGGG"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("I guess CRANE", "crane"),
        ("crane", "crane"),
        ("My next guess: **Slate**.", "slate"),
        ("Let me think... \\boxed{stare}", "stare"),
        ("C R A N E", "crane"),
        ("c-r-a-n-e", "crane"),
        ("Which word? I think 'house' would work", "house"),
        ("no idea", None),
    ],
)
def test_wordle_reads_guesses_as_models_write_them(text, expected):
    assert wordle.parse_guess(text, 5, dictionary(5)) == expected


def test_wordle_known_opening_is_the_computed_one():
    assert wordle.best_guess(answer_words(4)) == wordle.KNOWN_OPENINGS[4, True]


def test_wordle_word_not_in_the_list_is_a_format_error_and_the_list_is_clean():
    env = gym.make("Wordle-v0", difficulty=2)
    env.reset(seed=1)
    obs, _, terminated, _, info = env.step("xqzvw")
    assert info["status"] == "format_error" and "not in the word list" in obs and not terminated
    pool = answer_words(5)
    assert len(pool) > 2000 and all(w.isalpha() and w.islower() and len(w) == 5 for w in pool)
    assert "cats" not in answer_words(4) and "cat" not in dictionary(4)  # plurals are left out of secrets


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1234", "1234"),
        ("My guess is 1 2 3 4.", "1234"),
        ("[1, 1, 2, 2]", "1122"),
        ("Guess 2: 3456", "3456"),
        ("\\boxed{5 6 1 1}", "5611"),
        ("1-2-3-4", "1234"),
        ("I try 12345", None),
        ("pass", None),
        ("١٢٣٤", None),
    ],
)
def test_mastermind_reads_codes(text, expected):
    assert mastermind.parse_code(text, 4) == expected


def test_mastermind_scoring_and_minimax_within_five_on_the_classic_game():
    assert mastermind.score_guess("1122", "1213") == (1, 2)
    assert mastermind.score_guess("6666", "1234") == (0, 0)
    assert mastermind.expert_guess(4, 6, ()) == "1122"  # Knuth's opening
    for (length, colors), opening in list(mastermind.KNOWN_OPENINGS.items()):
        if colors**length <= 1296:
            mastermind.KNOWN_OPENINGS.pop((length, colors))
            try:
                assert mastermind.expert_guess.__wrapped__(length, colors, ()) == opening
            finally:
                mastermind.KNOWN_OPENINGS[length, colors] = opening
    env = gym.make("Mastermind-v0", difficulty=2)
    env.reset(seed=0)
    _, _, _, _, info = env.step("1 2 3 9")
    assert info["status"] == "format_error"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("reveal B3", ("reveal", (2, 1))),
        ("I'll open b3.", ("reveal", (2, 1))),
        ("3B", ("reveal", (2, 1))),
        ("(3, 2)", ("reveal", (2, 1))),
        ("row 3, column 2", ("reveal", (2, 1))),
        ("r3c2", ("reveal", (2, 1))),
        ("column 2 row 3", ("reveal", (2, 1))),
        ("flag A1", ("flag", (0, 0))),
        ("Mark C4 as a mine", ("flag", (3, 2))),
        ("unflag A1", ("unflag", (0, 0))),
        ("A1 is safe, so B2", ("reveal", (1, 1))),
        ("nothing", None),
    ],
)
def test_minesweeper_reads_cells_in_several_notations(text, expected):
    assert minesweeper.parse_command(text) == expected


def test_minesweeper_starts_opened_and_a_mine_ends_the_game():
    env = gym.make("Minesweeper-v0", difficulty=1)
    obs, _ = env.reset(seed=2)
    assert "." in obs.split("\n\n")[1] and "*" not in obs  # the opening is made; no mine shown
    r, c = min(env.unwrapped.task.metadata["mines"])
    _, reward, terminated, _, info = env.step(f"reveal {minesweeper.column_name(c)}{r + 1}")
    assert terminated and reward == 0.0 and info["status"] == "wrong"


@pytest.mark.parametrize(
    "text,expected",
    [("LEFT", "left"), ("I'll swipe up.", "up"), ("\\boxed{→}", "right"), ("move: d", "down"), ("hmm", None)],
)
def test_2048_reads_moves(text, expected):
    assert game2048.parse_move(text) == expected


def test_2048_slides_merge_once_and_spawns_follow_the_seed():
    assert game2048._slide_row((2, 2, 2, 2)) == ((4, 4, 0, 0), 8)
    assert game2048._slide_row((4, 0, 4, 8)) == ((8, 8, 0, 0), 8)
    board = ((2, 0, 0), (2, 0, 0), (0, 0, 0))
    assert game2048.slide(board, "up")[0] == ((4, 0, 0), (0, 0, 0), (0, 0, 0))
    a, b = gym.make("Game2048-v0", difficulty=0), gym.make("Game2048-v0", difficulty=0)
    a.reset(seed=9), b.reset(seed=9)
    for move in ("left", "up", "right", "down", "left"):
        assert a.step(move)[0] == b.step(move)[0]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("A->C", [(0, 2)]),
        ("Move disk 1 from A to C.", [(0, 2)]),
        ("from peg 1 to peg 3", [(0, 2)]),
        ("A → B, then C->B", [(0, 1), (2, 1)]),
        ("(a, c)", [(0, 2)]),
        ("AC", [(0, 2)]),
        ("1 -> 2", [(0, 1)]),
        ("move a disk", []),
        ("\\boxed{B to C}", [(1, 2)]),
    ],
)
def test_hanoi_reads_moves(text, expected):
    assert hanoi.parse_moves(text) == expected


def test_hanoi_expert_is_optimal_and_illegal_moves_are_refused():
    for disks in range(1, 8):
        assert len(hanoi.optimal_moves(((*range(disks, 0, -1),), (), ()))) == 2**disks - 1
    env = gym.make("Hanoi-v0", difficulty=2, start="tower")
    env.reset(seed=0)
    total = 0
    while True:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        total += 1
        if terminated or truncated:
            break
    assert reward == 1.0 and total == 15 == info["moves_used"] == info["optimal_moves"]
    env.reset(seed=0)
    obs, _, _, _, info = env.step("A->B A->B")  # the second puts disk 2 on disk 1
    assert info["status"] == "format_error" and "cannot go on" in obs and info["moves_applied"] == ["A->B"]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("E", "e"),
        ("I guess the letter E.", "e"),
        ("Is there an 'r'?", "r"),
        ("letter: s", "s"),
        ("I", "i"),
        ("My guess is PLANET", "planet"),
        ("\\boxed{t}", "t"),
        ("???", None),
    ],
)
def test_hangman_reads_letters_and_words(text, expected):
    assert hangman.parse_guess(text, 6) == expected


def test_hangman_lives_repeats_and_whole_words():
    env = gym.make("Hangman-v0", difficulty=3, lives=2)
    env.reset(seed=4)
    secret = env.unwrapped.task.metadata["secret"]
    absent = [ch for ch in "zqxjkvwy" if ch not in secret]
    env.step(absent[0])
    _, _, terminated, _, info = env.step(absent[0])
    assert info["status"] == "format_error" and not terminated and info["turn"] == 2  # a repeat costs no life
    _, reward, terminated, _, info = env.step(absent[1])
    assert terminated and reward == 0.0 and info["status"] == "wrong"
    env.reset(seed=4)
    _, reward, terminated, _, info = env.step(f"The word is {secret.upper()}")
    assert terminated and reward == 1.0


@pytest.mark.parametrize("env_id", GAMES)
def test_parsers_read_only_the_tail_of_a_huge_reply(env_id):
    env = gym.make(env_id, difficulty=0)
    env.reset(seed=0)
    move = env.unwrapped.expert_action()
    _, _, _, _, info = env.step(move + " " + "x" * (TAIL_CHARS + 10))
    assert info["status"] == "format_error"  # the move is outside the searched tail
