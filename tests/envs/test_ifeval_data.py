"""InstructionFollow-v0 on IFEval's own records: each of its instructions checked as IFEval's
strict evaluation defines it (examples written here), records in the file's and the Hub's layout."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the envs
from mathgym.envs.writing.ifeval_data import APPROXIMATED, CHECKS, load_ifeval
from mathgym.errors import ConfigError, DatasetError

#: instruction id -> (kwargs, a response that follows it, one that does not)
CASES = {
    "keywords:existence": ({"keywords": ["river", "lamp"]}, "The Lamp by the riverbank.", "The river alone."),
    "keywords:frequency": ({"keyword": "cat", "frequency": 2, "relation": "at least"}, "cat and Cat", "one cat"),
    "keywords:forbidden_words": ({"forbidden_words": ["very"]}, "Everything is fine.", "It is Very fine."),
    "keywords:letter_frequency": ({"letter": "z", "let_frequency": 2, "let_relation": "less than"}, "a zoo", "zig zag"),
    "length_constraints:number_words": ({"num_words": 3, "relation": "less than"}, "two words", "three whole words"),
    "length_constraints:number_sentences": ({"num_sentences": 2, "relation": "at least"}, "One. Two.", "Only one."),
    "length_constraints:number_paragraphs": ({"num_paragraphs": 2}, "First part.\n***\nSecond part.", "First.\n\nSecond."),
    "length_constraints:nth_paragraph_first_word": (
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"}, "First.\n\n\"Then, second.", "First.\n\nNext second."),
    "detectable_content:number_placeholders": ({"num_placeholders": 2}, "Dear [name] at [address]", "Dear [name]"),
    "detectable_content:postscript": ({"postscript_marker": "P.S."}, "Hello.\nP.S. see you", "Hello. PS see you"),
    "detectable_format:number_bullet_lists": ({"num_bullets": 2}, "* one\n- two", "* one\n* two\n* three"),
    "detectable_format:constrained_response": ({}, "My answer is maybe.", "My answer is perhaps."),
    "detectable_format:number_highlighted_sections": ({"num_highlights": 2}, "*one* and **two**", "*one* and ** **"),
    "detectable_format:multiple_sections": ({"section_spliter": "Section", "num_sections": 2}, "Section 1\na\nSection 2\nb", "Section 1\nab"),
    "detectable_format:json_format": ({}, '```json\n{"a": 1}\n```', "a: 1"),
    "detectable_format:title": ({}, "<<My Title>>\ntext", "<< >> text"),
    "combination:two_responses": ({}, "first one******second one", "same******same"),
    "combination:repeat_prompt": ({"prompt_to_repeat": "Write a poem."}, "write a poem. Roses...", "Roses..."),
    "startend:end_checker": ({"end_phrase": "Any other questions?"}, "Done. Any other questions?\"", "Any other questions? Done."),
    "startend:quotation": ({}, '"quoted"', 'quoted"'),
    "change_case:capital_word_frequency": ({"capital_frequency": 2, "capital_relation": "at least"}, "NOTE THIS", "Note THIS"),
    "change_case:english_capital": ({}, "THE RIVER RUNS TO THE SEA.", "LE FLEUVE COULE VERS LA MER ET LES NUAGES."),  # English too
    "change_case:english_lowercase": ({}, "all lower.", "Not lower."),
    "punctuation:no_comma": ({}, "no comma here", "a, b"),
    "language:response_language": ({"language": "fr"}, "Le fleuve coule vers la mer.", "The river runs to the sea."),
}


def test_every_check_follows_ifevals_definition():
    assert set(CASES) == set(CHECKS) and APPROXIMATED <= set(CHECKS)
    for name, (kwargs, follows, breaks) in CASES.items():
        assert CHECKS[name](follows, **kwargs), (name, follows)
        assert not CHECKS[name](breaks, **kwargs), (name, breaks)


def _row(key, prompt, names, kwargs):
    return {"key": key, "prompt": prompt, "instruction_id_list": names, "kwargs": kwargs}


def test_records_load_in_the_hubs_layout_and_grade_in_the_env(tmp_path):
    everything = dict.fromkeys(("num_words", "relation", "num_highlights", "language"))  # the Hub's rows hold every kwarg, null when unused
    rows = [
        _row(1000, "Write a short note about rivers. Use no commas and highlight 2 sections.",
             ["punctuation:no_comma", "detectable_format:number_highlighted_sections", "length_constraints:number_words"],
             [dict(everything), {**everything, "num_highlights": 2}, {**everything, "num_words": 5, "relation": "at least"}]),
        _row(1001, "Answer in 100 to 200 words.", ["count:word_count_range"], [{"min_words": 100, "max_words": 200}]),  # IFBench's, no check here
        _row(1002, "Answer in Thai.", ["language:response_language"], [{**everything, "language": "th"}]),
    ]
    path = tmp_path / "ifeval.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.warns(UserWarning, match=r"left out for instructions without a check here \(count:word_count_range; 1 use"):
        record, thai = load_ifeval(path)
    assert thai.check("แม่น้ำไหลลงสู่ทะเลอย่างช้าๆ") == {"language:response_language": True}
    assert thai.check("The river runs slowly to the sea.") == {"language:response_language": False}
    assert record.key == "1000" and record.instructions[2] == ("length_constraints:number_words", (("num_words", 5), ("relation", "at least")))
    with pytest.warns(UserWarning):
        env = gym.make("InstructionFollow-v0", dataset=str(path))
    obs, _ = env.reset(options={"task_index": 0})
    assert obs.startswith("Write a short note about rivers") and env.unwrapped.expert_action() is None
    _, reward, terminated, _, info = env.step("Rivers run *far* and *wide* to the sea")
    assert (reward, terminated, info["status"]) == (1.0, True, "correct"), info
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step("Rivers, lakes and *seas* are wet")
    # "no comma" holds for a reply ignoring the request ("I don't know."): failing it takes back the words
    assert reward == 0.0 and info["status"] == "wrong"
    assert [c["met"] for c in info["constraints"]] == [False, False, True]
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step("Rivers lakes and *seas* are wet")  # 1 of the 2 that "I don't know." fails
    assert reward == pytest.approx(0.5) and info["status"] == "partial"
    assert [c["met"] for c in info["constraints"]] == [True, False, True]
    env.reset(options={"task_index": 0})
    assert env.step("  ")[1] == 0.0  # no word: nothing is followed ("no comma" is not met for free)
    with pytest.raises(ConfigError, match="not an index"):
        env.reset(options={"task_index": 5})


def test_malformed_records_name_their_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    for row, message in [({"prompt": "x"}, "needs IFEval's prompt and instruction_id_list"),
                         (_row(1, "x", ["punctuation:no_comma"], [{}, {}]), "one object per instruction"),
                         (_row(1, "x", ["keywords:frequency"], [{"keyword": "a", "frequency": 1, "relation": "about"}]), "do not fit it"),
                         (_row(1, "x", ["length_constraints:number_words"], [{"num_words": 3}]), "do not fit it")]:
        path.write_text(json.dumps(row) + "\n")
        with pytest.raises(DatasetError, match=f"bad.jsonl:1: .*{message}"):
            load_ifeval(path)


def test_checks_written_without_backtracking_count_as_ifevals_patterns():
    """Placeholders, bullets, titles and postscripts are found without regex backtracking (which is
    quadratic on a line of ``[`` or of blank lines): the same answers as IFEval's patterns on short
    random strings, and at once on 200,000 characters of the worst kind."""
    import random
    import re

    patterns = {  # IFEval's definitions, as regular expressions (fine on short strings)
        "placeholders": lambda v: len(re.findall(r"\[.*?\]", v)),
        "bullets": lambda v: len(re.findall(r"^\s*\*[^\*].*$", v, re.M)) + len(re.findall(r"^\s*-.*$", v, re.M)),
        "title": lambda v: any(t.lstrip("<").rstrip(">").strip() for t in re.findall(r"<<[^\n]+>>", v)),
        "postscript": lambda v: bool(re.findall(r"\s*p\.\s?s\..*$", v.lower(), re.M)),
    }
    ours = {
        "placeholders": lambda v, n: CHECKS["detectable_content:number_placeholders"](v, num_placeholders=n),
        "bullets": lambda v, n: CHECKS["detectable_format:number_bullet_lists"](v, num_bullets=n),
    }
    rng = random.Random(0)
    for _ in range(5000):
        text = "".join(rng.choice(["[", "]", "*", "-", " ", "\n", "\t", "<", ">", "a", "p", ".", "s", "**"]) for _ in range(rng.randint(0, 14)))
        for name in ("placeholders", "bullets"):
            n = patterns[name](text)
            assert ours[name](text, n) and not ours[name](text, n + 1), (name, text)
        assert CHECKS["detectable_format:title"](text) == patterns["title"](text), text
        assert CHECKS["detectable_content:postscript"](text, postscript_marker="P.S.") == patterns["postscript"](text), text
    for chunk in ("[", "\n", " ", "<", "*", "\n\t", "p."):
        text = chunk * 200_000
        for name, (kwargs, _, _) in CASES.items():
            CHECKS[name](text, **kwargs)


def test_loose_evaluation_also_tries_the_response_without_its_first_or_last_line_or_asterisks(tmp_path):
    path = tmp_path / "ifeval.jsonl"
    path.write_text(json.dumps(_row(7, "Wrap your answer in quotes; end with 'Bye.'", ["startend:quotation", "startend:end_checker"],
                                    [{}, {"end_phrase": "Bye."}])) + "\n")
    response = 'Sure, here it is:\n"It rains. Bye."\n*Hope this helps!*'  # a chatty first and last line
    (record,) = load_ifeval(path)
    assert record.check(response) == {"startend:quotation": False, "startend:end_checker": False}
    assert record.check(response, loose=True) == {"startend:quotation": True, "startend:end_checker": True}
    rewards = {}
    for mode in ("strict", "loose"):
        env = gym.make("InstructionFollow-v0", dataset=str(path), ifeval_mode=mode)
        env.reset(options={"task_index": 0})
        rewards[mode] = env.step(response)[1]
    assert rewards == {"strict": 0.0, "loose": 1.0}
    with pytest.raises(ConfigError, match="ifeval_mode"):
        gym.make("InstructionFollow-v0", dataset=str(path), ifeval_mode="lenient")
