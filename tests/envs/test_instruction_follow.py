"""InstructionFollow-v0: each checker against hand-written positives and negatives; the env's reward and expert."""

from __future__ import annotations

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.envs.writing import instruction_checks as c
from mathgym.envs.writing.instruction_constraints import FAMILIES, FORBIDDEN, KEYWORDS
from mathgym.envs.writing.instruction_follow import SENTENCES
from mathgym.errors import ConfigError

# (checker, kwargs, response, expected): the tricky ones name what they catch.
CASES = [
    (c.word_count, {"relation": "at least", "n": 3}, "one two three", True),
    (c.word_count, {"relation": "at least", "n": 3}, "one, two!", False),
    (c.word_count, {"relation": "at most", "n": 3}, "don't over-think it", True),  # inner ' and - join a word
    (c.word_count, {"relation": "at most", "n": 2}, "--- *** ...", True),  # punctuation is not a word
    (c.sentence_count, {"relation": "at least", "n": 2}, "First one. Second one!", True),
    (
        c.sentence_count,
        {"relation": "at most", "n": 1},
        "Pi is 3.14 exactly.",
        True,
    ),  # a decimal point is no sentence end
    (c.sentence_count, {"relation": "at least", "n": 2}, "Wait... what", True),  # an unterminated last piece counts
    (c.sentence_count, {"relation": "at least", "n": 2}, "Only one?!", False),
    (c.paragraph_count, {"n": 2}, "First.\n\nSecond.", True),
    (c.paragraph_count, {"n": 2}, "First.\nStill first.", False),
    (c.paragraph_count, {"n": 2}, "First.\n  \t\n\n\nSecond.\n\n", True),  # blank lines with spaces still separate
    (c.includes_keywords, {"keywords": ("river", "echo")}, "An ECHO over the River.", True),
    (c.includes_keywords, {"keywords": ("river", "echo")}, "Rivers echo.", False),  # whole words only
    (c.forbids_words, {"forbidden": ("very", "just")}, "Everything adjusts.", True),  # inside other words is fine
    (c.forbids_words, {"forbidden": ("very", "just")}, "It is Very nice.", False),
    (c.keyword_frequency, {"keyword": "echo", "relation": "at least", "n": 2}, "echo Echo echoes", True),
    (c.keyword_frequency, {"keyword": "echo", "relation": "at least", "n": 3}, "echo Echo echoes", False),
    (c.letter_frequency, {"letter": "z", "relation": "at most", "n": 1}, "Zebra", True),
    (c.letter_frequency, {"letter": "z", "relation": "at most", "n": 1}, "Zebra zoo", False),
    (c.letter_frequency, {"letter": "e", "relation": "at least", "n": 3}, "EeE", True),
    (c.is_json, {}, '{"a": [1, 2]}', True),
    (c.is_json, {}, '```json\n{"a": 1}\n```', True),
    (c.is_json, {}, '"just a string"', False),  # a bare JSON string is not a structure
    (c.is_json, {}, "{'a': 1}", False),
    (c.is_json, {}, "[" * 100_000, False),  # deep nesting: no crash
    (c.bullet_count, {"n": 2}, "* one\n* two", True),
    (c.bullet_count, {"n": 2}, "- one\n- two\n---", True),  # a horizontal rule is no bullet
    (c.bullet_count, {"n": 2}, "* one\n* two\n* three", False),
    (c.bullet_count, {"n": 1}, "**bold** start", False),
    (c.has_title, {}, "<<A Title>>\nText", True),
    (c.has_title, {}, "<<  >> text", False),
    (c.highlighted_count, {"n": 2}, "*one* and *two*", True),
    (c.highlighted_count, {"n": 1}, "**bold** only", False),  # bold is not a highlight
    (c.highlighted_count, {"n": 1}, "2 * 3 * 4", False),  # multiplication signs around spaces
    (c.section_count, {"marker": "SECTION", "n": 2}, "SECTION 1\nA.\nSECTION 2\nB.", True),
    (c.section_count, {"marker": "SECTION", "n": 2}, "SECTION 1\nA.\nSECTION 3\nB.", False),
    (c.section_count, {"marker": "SECTION", "n": 2}, "SECTION 1\nSECTION 2\nB.", False),  # an empty section
    (c.all_lowercase, {}, "all small, 123.", True),
    (c.all_lowercase, {}, "Not all small", False),
    (c.all_lowercase, {}, "123", False),  # no letters at all
    (c.all_uppercase, {}, "ALL CAPS!", True),
    (c.all_uppercase, {}, "ALL CAPs", False),
    (c.capital_words, {"relation": "at least", "n": 2}, "NOTE THIS well", True),
    (
        c.capital_words,
        {"relation": "at most", "n": 0},
        "I am here. A cat.",
        True,
    ),  # single capitals are not capital words
    (c.capital_words, {"relation": "at most", "n": 0}, "USA", False),
    (c.ends_with, {"phrase": "That is all."}, "Text. that is all.  \n", True),
    (c.ends_with, {"phrase": "That is all."}, "That is all. More.", False),
    (c.starts_with, {"phrase": "Let me begin."}, "  Let me begin. Here.", True),
    (c.starts_with, {"phrase": "Let me begin."}, "So, let me begin.", False),
    (c.has_postscript, {}, "Body.\n\nP.S. bye", True),
    (c.has_postscript, {}, "Body.\n\np.s. bye", True),
    (c.has_postscript, {}, "Body with PS. inside", False),
    (c.no_commas, {}, "No commas here.", True),
    (c.no_commas, {}, "One， full-width", False),
    (c.wrapped_in_quotes, {}, '"Quoted text."', True),
    (c.wrapped_in_quotes, {}, '"Quoted" then not', False),
    (c.wrapped_in_quotes, {}, '""', False),
    (c.placeholder_count, {"n": 2}, "At [name] on [date].", True),
    (c.placeholder_count, {"n": 1}, "Empty [ ] brackets", False),
    (c.two_responses, {}, "First answer.\n******\nSecond answer.", True),
    (c.two_responses, {}, "Same.\n******\nSame.", False),
    (c.two_responses, {}, "A.\n******\nB.\n******\nC.", False),
    (c.repeats_request, {"request": "Write a poem."}, "write a poem.\n\nRoses are red.", True),
    (c.repeats_request, {"request": "Write a poem."}, "Write a poem.", False),  # nothing after the repeat
    (c.first_word_of_paragraph, {"n": 2, "nth": 2, "word": "today"}, "Intro.\n\nToday, we go.", True),
    (c.first_word_of_paragraph, {"n": 2, "nth": 2, "word": "today"}, "Intro.\n\nTodays go.", False),
    (c.constrained_answer, {}, "Thinking. My answer is no.", True),
    (c.constrained_answer, {}, "my answer is no", False),
]


@pytest.mark.parametrize(
    "checker,kwargs,text,expected", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]
)
def test_checker(checker, kwargs, text, expected):
    assert checker(text, **kwargs) is expected


def test_every_family_has_hand_written_cases_both_ways():
    covered = {(checker, expected) for checker, _, _, expected in CASES}
    for name, family in FAMILIES.items():
        assert (family.checker, True) in covered and (family.checker, False) in covered, name


def test_the_expert_meets_every_constraint_at_every_level_and_rewards_are_shares():
    for level in range(5):
        env = gym.make("InstructionFollow-v0", difficulty=level)
        for seed in range(30):
            obs, info = env.reset(seed=seed)
            assert obs.count("\n") >= (level > 0) and "answer" not in info
            _, reward, terminated, _, info = env.step(env.unwrapped.expert_action())
            assert reward == 1.0 and terminated and info["status"] == "correct", (level, seed, obs)
            assert len(info["reward_breakdown"]) == level + 1


def test_partial_credit_and_breakdown_per_constraint():
    env = gym.make("InstructionFollow-v0", num_constraints=2, families=["include_keywords", "end_phrase"])
    env.reset(seed=0)
    end = next(c for c in env.unwrapped.task.metadata["constraints"] if c.kind == "end_phrase").options["phrase"]
    _, reward, _, _, info = env.step(f"Mostly fine text. {end}")
    assert reward == 0.5 and info["status"] == "partial"
    assert info["reward_breakdown"] == {"include_keywords": 0.0, "end_phrase": 1.0}
    env.reset(seed=0)
    _, reward, _, _, info = env.step("Mostly fine text.")
    assert reward == 0.0 and info["status"] == "wrong"


def test_what_a_reply_ignoring_the_request_meets_earns_nothing():
    """Lowercase only holds for "i don't know.": it must hold, but meeting it earns nothing, and
    failing it takes back the end phrase met (issue 48)."""
    env = gym.make("InstructionFollow-v0", num_constraints=2, families=["lowercase", "end_phrase"])
    env.reset(seed=0)
    end = next(c for c in env.unwrapped.task.metadata["constraints"] if c.kind == "end_phrase").options["phrase"]
    for reply, reward_wanted in [("mostly fine text.", 0.0), (f"Mostly Fine text. {end}", 0.0), (f"mostly fine text. {end.lower()}", 1.0)]:
        env.reset(seed=0)
        _, reward, _, _, info = env.step(reply)
        assert reward == reward_wanted, (reply, info)
    assert info["reward_breakdown"] == {"lowercase": 1.0, "end_phrase": 1.0}
    for empty in ("", "  ,,, ...\n\n"):  # meets "at most N words" and "lowercase"-free rules for nothing: earns nothing
        env.reset(seed=0)
        _, reward, _, _, info = env.step(empty)
        assert reward == 0.0 and info["status"] == "unparseable" and set(info["reward_breakdown"].values()) == {0.0}


def test_no_prompt_is_met_by_a_reply_ignoring_the_request():
    """A prompt of prohibitions only ("do not use the words ...", "at most 40 words") would pay
    "I don't know." in full: such draws are left out, and families that hold nothing else are refused."""
    env = gym.make("InstructionFollow-v0", families=["forbidden_words", "word_count", "capital_words", "lowercase"], num_constraints=1)
    for seed in range(20):
        env.reset(seed=seed)
        assert env.step("I don't know.")[1] == 0.0 and env.unwrapped.task.metadata["constraints"][0].kind in ("word_count", "capital_words")
        env.reset(seed=seed)
        assert env.step(env.unwrapped.expert_action())[1] == 1.0
    with pytest.raises(ConfigError, match="ignoring the request"):
        gym.make("InstructionFollow-v0", families=["forbidden_words"], num_constraints=1).reset(seed=0)


def test_word_pools_do_not_collide_and_bad_options_are_clear():
    template_words = {w.strip(".{}").lower() for s in SENTENCES for w in s.split()}
    assert not set(FORBIDDEN) & (template_words | set(KEYWORDS))
    with pytest.raises(ConfigError, match="families"):
        gym.make("InstructionFollow-v0", families=["no_such_family"])
    with pytest.raises(ConfigError, match="difficulty"):
        gym.make("InstructionFollow-v0", difficulty=9)
