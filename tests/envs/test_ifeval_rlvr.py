"""InstructionFollow-v0 on open-instruct's instruction-following data: RLVR-IFeval's ``func_name``
constraints checked as open-instruct defines them (examples written here, the published regular
expressions as oracles on random strings), and the ``instruction_id`` layout read with IFEval's checks."""

from __future__ import annotations

import json
import random
import re

import gymnasium as gym
import pytest

import mathgym  # noqa: F401 - registers the envs
from mathgym.envs.writing.ifeval_data import load_ifeval
from mathgym.envs.writing.ifeval_rlvr import RLVR_CHECKS, RLVR_UNCHECKED, count_rlvr_sentences
from mathgym.errors import DatasetError

#: function name -> (arguments, a response that follows it, one that does not); the pairs pick the
#: places where open-instruct's test differs from IFEval's.
CASES = {
    "verify_keywords": ({"keyword_list": ["river", "Lamp"]}, "the LAMP by the riverbank", "the river alone"),
    "verify_keyword_frequency": ({"word": "cat", "N": 2}, "Cat, cat; caterpillar", "cat cat cat"),  # exactly N, whole tokens
    "validate_forbidden_words": ({"forbidden_words": ["car"]}, "a bus ride", "a warm scarf"),  # substrings count
    "verify_letter_frequency": ({"letter": "z", "N": 2}, "Zig zag zoo", "zig zag zoo"),  # case counts, exactly N
    "verify_paragraph_count": ({"N": 2}, "First.\n  * * *  \nSecond.", "First.\n* * *\n* * *\nSecond."),
    "validate_word_constraint": ({"N": 10, "quantifier": "around"}, " ".join(["w"] * 11), " ".join(["w"] * 12)),
    "verify_sentence_constraint": ({"N": 2, "quantifier": "at most"}, "Dr. Who came. Mr. Smith left.", "One. Two. Three. Four."),
    "validate_paragraphs": ({"N": 2, "first_word": "Then", "i": 2}, "First.\n\n  Then second.", "First.\n\nthen second."),
    "verify_postscript": ({"postscript_marker": "P.S."}, "Hi.\nP.S. bye", "Hi.\nP.S."),
    "validate_placeholders": ({"N": 2}, "[name] at [] ", "[name] at [\naddress]"),
    "verify_bullet_points": ({"N": 2}, "* one\n  ** two", "* one\n* two\n- three"),
    "validate_title": ({}, "<<>> a title", "<< no\n>> title"),
    "validate_choice": ({"options": "('My answer is yes.', 'My answer is no.')"}, "My answer is no.", "Maybe."),
    "validate_highlighted_sections": ({"N": 2}, "*a* and ** here", "*a* and *\n*"),
    "validate_sections": ({"N": 2, "section_splitter": "Section"}, "SECTION 1 a section 2 b", "Section 1 a Section b"),
    "validate_json_format": ({}, ' {"a": [1, 2]}\n', '```json\n{"a": 1}\n```'),  # no code fence allowed
    "validate_repeat_prompt": ({"original_prompt": "Write a poem."}, "Write a poem. Roses", "write a poem. Roses"),
    "validate_two_responses": ({}, "one******two", "one******two******three"),
    "validate_uppercase": ({}, "ALL CAPS, 42!", "ALL CAPs"),
    "validate_lowercase": ({}, "all lower, 42!", "all Lower"),
    "validate_frequency_capital_words": ({"N": 2, "quantifier": "at least"}, "NOTE THIS", "NOTe THIS"),
    "validate_end": ({"end_phrase": "Any questions?"}, "Done. Any questions?  ", 'Done. Any questions?"'),
    "validate_quotation": ({}, ' "quoted" ', '"quoted'),
    "validate_no_commas": ({}, "no comma here", "a, b"),
    "validate_response_language": ({"language": "fr"}, "  Le fleuve coule vers la mer.", "The river runs to the sea."),
}


def test_every_function_follows_open_instructs_definition():
    assert set(CASES) == set(RLVR_CHECKS) and not RLVR_UNCHECKED & set(RLVR_CHECKS)
    for name, (arguments, follows, breaks) in CASES.items():
        assert RLVR_CHECKS[name](follows, **arguments), (name, follows)
        assert not RLVR_CHECKS[name](breaks, **arguments), (name, breaks)
    # "around" is within a tenth of N, but never less than 1 (round(0.3) would be 0)
    around = RLVR_CHECKS["validate_frequency_capital_words"]
    assert around("A B", N=3, quantifier="around") and not around("A", N=3, quantifier="around")
    assert not around("A B", N=3, quantifier="about")  # an unknown quantifier fails, as in open-instruct


def test_counts_written_without_regex_retries_equal_the_published_patterns():
    """Sentences, placeholders, highlights and titles are counted in one pass: the same as
    open-instruct's regular expressions on random strings, and at once on 200,000 characters."""
    patterns = {
        "sentences": lambda v: len(re.split(r"(?<!\w\.\w.)(?<![A-Z][a-z]\.)(?<=\.|\?|!)\s", v)),
        "placeholders": lambda v: len(re.findall(r"\[(.*?)\]", v)),
        "highlights": lambda v: len(re.findall(r"\*(.*?)\*", v)),
        "title": lambda v: len(re.findall(r"<<(.*?)>>", v)) > 0,
    }
    rng = random.Random(0)
    alphabet = ["a", "B", "é", "1", "_", ".", "?", "!", " ", "\n", "\t", "\u00a0", "[", "]", "*", "<", ">", "Dr", "e.g"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert count_rlvr_sentences(text) == patterns["sentences"](text), repr(text)
        n = patterns["placeholders"](text)
        assert RLVR_CHECKS["validate_placeholders"](text, N=n) and not RLVR_CHECKS["validate_placeholders"](text, N=n + 1), repr(text)
        n = patterns["highlights"](text.strip())
        assert RLVR_CHECKS["validate_highlighted_sections"](text, N=n), repr(text)
        assert not RLVR_CHECKS["validate_highlighted_sections"](text, N=n + 1), repr(text)
        assert RLVR_CHECKS["validate_title"](text) == patterns["title"](text.strip()), repr(text)
    for chunk in ("[", "<<", "*", ". ", "a.b. ", "\n"):
        text = chunk * 200_000
        for name, (arguments, _, _) in CASES.items():
            RLVR_CHECKS[name](text, **arguments)


def _gt(func_name, **arguments):
    """An RLVR-IFeval ground truth: every argument slot present, unused ones null."""
    slots = dict.fromkeys(("N", "quantifier", "end_phrase", "keyword_list", "word", "forbidden_words", "letter", "i",
                           "first_word", "postscript_marker", "options", "section_splitter", "original_prompt"))
    return json.dumps({"func_name": func_name, **slots, **arguments})


def test_rlvr_ifeval_and_instruction_id_rows_load_and_grade_in_the_env(tmp_path):
    rows = [
        {"messages": [{"role": "user", "content": "Describe a lake. Your entire response should be in lowercase."}],
         "ground_truth": _gt("validate_lowercase"), "dataset": "ifeval", "constraint_type": "Change Cases", "constraint": "lowercase"},
        {"messages": [{"role": "user", "content": "Name a river. Answer with at most 5 words."}],
         "ground_truth": _gt("validate_word_constraint", N=5, quantifier="at most")},
        {"messages": [{"role": "user", "content": "Answer with a word."}], "ground_truth": json.dumps({"func_name": "validate_new_check"})},  # no check here
        # open-instruct's newer layout: IFEval's ids in the str() of a list, kwargs null where the instruction has none
        {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Title it; no commas."}],
         "ground_truth": str([{"instruction_id": ["detectable_format:title", "punctuation:no_comma"], "kwargs": [None, None]}])},
        {"prompt": "Mention the word 'owl' twice.", "reward_model": {"ground_truth": _gt("verify_keyword_frequency", word="owl", N=2)}},
        # the list's entry itself JSON text
        {"prompt": "No commas.", "ground_truth": str([json.dumps({"instruction_id": ["punctuation:no_comma"], "kwargs": [{}]})])},
        {"messages": [{"role": "user", "content": "Answer in French."}], "ground_truth": _gt("validate_response_language", language="fr")},
    ]
    path = tmp_path / "rlvr.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.warns(UserWarning, match=r"validate_new_check; 1 use"):
        records = load_ifeval(path)
    assert [r.instructions[0][0] for r in records] == ["validate_lowercase", "validate_word_constraint", "detectable_format:title",
                                                       "verify_keyword_frequency", "punctuation:no_comma", "validate_response_language"]
    assert records[2].prompt == "Title it; no commas."
    with pytest.warns(UserWarning):
        env = gym.make("InstructionFollow-v0", dataset=str(path))
    replies = [
        (0, "the lake is still and cold.\n", 1.0), (0, "The lake is still.", 0.0),
        (1, "  the long nile  ", 1.0), (1, "it is the long nile river", 0.0),
        (2, "<<Owls>> at night", 1.0), (2, "<<Owls>>, at night", 0.0),  # "no commas" holds for "I don't know.": failing it takes back the title
        (3, "An owl met an OWL.", 1.0), (3, "An owl met owls.", 0.0),
        # graded as open-instruct grades: the answer after a reasoning model's thinking, without <answer> tags
        (0, "<think>The Lake needs Care.</think>\n<answer>the lake is calm.</answer>", 1.0),
        (2, "<think>no, commas</think><<Owls>> at night", 1.0),
        (2, "<think>Thinking at length, but no answer after it.</think>", 0.0),  # no word answered: nothing met for free
        (5, "Le lac est calme et froid ce matin.", 1.0), (5, "The lake is calm and cold this morning.", 0.0),
    ]
    for index, reply, reward in replies:
        obs, _ = env.reset(options={"task_index": index})
        assert obs.startswith(records[index].prompt[:10])
        assert env.step(reply)[1] == pytest.approx(reward), (index, reply)


def test_malformed_ground_truths_name_their_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    for row, message in [
        ({"messages": [{"role": "user", "content": "x"}]}, "needs IFEval's prompt and instruction_id_list, or a ground_truth"),
        ({"prompt": "x", "ground_truth": "{not json"}, "neither JSON nor a Python literal"),
        ({"prompt": "x", "ground_truth": json.dumps({"answer": 1})}, "neither a func_name"),
        ({"prompt": "x", "ground_truth": _gt("verify_letter_frequency", letter="ab", N=1)}, "do not fit it"),
        ({"prompt": "x", "ground_truth": _gt("validate_end", end_phrase="ok", N=3)}, "do not fit it"),
        ({"messages": [{"role": "assistant", "content": "x"}], "ground_truth": _gt("validate_no_commas")}, "needs a prompt"),
    ]:
        path.write_text(json.dumps(row) + "\n")
        with pytest.raises(DatasetError, match=f"bad.jsonl:1: .*{message}"):
            load_ifeval(path)


def test_a_row_whose_arguments_do_not_fit_is_left_out_with_a_warning(tmp_path):
    """One such row in a large training set costs that row, not the load."""
    path = tmp_path / "mixed.jsonl"
    rows = [{"prompt": "x", "ground_truth": _gt("validate_end", end_phrase="ok", N=3)},  # N is no argument of validate_end
            {"prompt": "Answer in French.", "ground_truth": json.dumps({"func_name": "validate_response_language"})},  # no language
            {"prompt": "No commas.", "ground_truth": _gt("validate_no_commas")}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.warns(UserWarning, match=r"2 record\(s\) left out whose arguments do not fit .*mixed.jsonl:1: the kwargs of validate_end"):
        (record,) = load_ifeval(path)
    assert record.prompt == "No commas."
