"""Preference data: JSONL (plain and chat), best-vs-worst online pairs."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from mathgym.algos.preferences import (  # noqa: E402
    PreferencePair,
    best_worst_pair,
    load_preference_jsonl,
    save_preference_jsonl,
)
from mathgym.errors import DatasetError  # noqa: E402


def write(tmp_path, rows):
    path = tmp_path / "prefs.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_plain_and_chat_rows(tmp_path):
    chat_prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    path = write(tmp_path, [
        {"prompt": "Q: 1+1?", "chosen": "2", "rejected": "3"},
        "",
        {"prompt": chat_prompt, "chosen": [{"role": "assistant", "content": "4"}],
         "rejected": [{"role": "assistant", "content": "5"}], "ref_chosen_logp": -1.5, "ref_rejected_logp": -2.0},
    ])
    plain, chat = load_preference_jsonl(path)
    assert plain == PreferencePair("Q: 1+1?", "2", "3")
    assert chat.prompt == tuple(chat_prompt) and (chat.chosen, chat.rejected) == ("4", "5")
    assert (chat.ref_chosen_logp, chat.ref_rejected_logp) == (-1.5, -2.0)
    out = tmp_path / "copy.jsonl"
    save_preference_jsonl([plain, chat], out)
    assert load_preference_jsonl(out) == [plain, chat]


@pytest.mark.parametrize(
    "row, match",
    [
        ('{"prompt": "x", "chosen": "y"', "not valid JSON"),
        ({"prompt": "x", "chosen": "y"}, "rejected"),
        ({"prompt": 3, "chosen": "y", "rejected": "z"}, "prompt"),
        ({"prompt": "x", "chosen": [{"role": "user", "content": "y"}], "rejected": "z"}, "chosen"),
    ],
)
def test_bad_rows_name_the_line_and_field(tmp_path, row, match):
    with pytest.raises(DatasetError, match=match):
        load_preference_jsonl(write(tmp_path, [{"prompt": "ok", "chosen": "a", "rejected": "b"}, row]))


def test_implicit_prompts_and_other_prompt_names(tmp_path):
    """Anthropic's HH-RLHF (two texts, no prompt), TRL's implicit-prompt chats (UltraFeedback's and
    Skywork's whole exchanges) and an ``instruction`` column, in a JSON list."""
    user = [{"role": "user", "content": "2+2?"}]
    rows = [
        {"chosen": "\n\nHuman: What is 2+2?\n\nAssistant: It is 4.", "rejected": "\n\nHuman: What is 2+2?\n\nAssistant: It is 5."},
        {"chosen": [*user, {"role": "assistant", "content": "4"}], "rejected": [*user, {"role": "assistant", "content": "5"}]},
        {"prompt": "2+2?", "chosen": [*user, {"role": "assistant", "content": "4"}], "rejected": [*user, {"role": "assistant", "content": "5"}],
         "score_chosen": 9.0, "score_rejected": 2.0},
        {"instruction": "Say hi.", "chosen": "Hi!", "rejected": "No."},
    ]
    path = tmp_path / "prefs.json"
    path.write_text(json.dumps(rows))
    hh, chats, ultra, argilla = load_preference_jsonl(path)
    assert (hh.prompt, hh.chosen, hh.rejected) == ("\n\nHuman: What is 2+2?\n\nAssistant: It is ", "4.", "5.")
    assert (chats.prompt, chats.chosen, chats.rejected) == (tuple(user), "4", "5")
    assert (ultra.prompt, ultra.chosen, ultra.rejected) == ("2+2?", "4", "5")
    assert argilla == PreferencePair("Say hi.", "Hi!", "No.")
    for chosen, rejected, match in (("same", "same", "the same text"), ("abc", "xyz", "no shared prompt"),
                                    ([{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "b"}], "share no user message")):
        with pytest.raises(DatasetError, match=match):
            load_preference_jsonl(write(tmp_path, [{"chosen": chosen, "rejected": rejected}]))


def test_content_given_as_parts_is_read_as_text(tmp_path):
    """OpenAI's content parts (``[{"type": "text", "text": ...}]``) in prompts, completions and
    implicit-prompt chats are their text, not the list's repr; an image part is an error."""
    def parts(text):
        return [{"type": "text", "text": text}]

    user = [{"role": "user", "content": parts("2+2?")}]
    rows = [
        {"prompt": user, "chosen": [{"role": "assistant", "content": parts("4")}], "rejected": [{"role": "assistant", "content": parts("5")}]},
        {"chosen": [*user, {"role": "assistant", "content": parts("4")}], "rejected": [*user, {"role": "assistant", "content": "5"}]},
    ]
    explicit, implicit = load_preference_jsonl(write(tmp_path, rows))
    for pair in (explicit, implicit):
        assert (pair.prompt, pair.chosen, pair.rejected) == (({"role": "user", "content": "2+2?"},), "4", "5")
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "cat.png"}}]}]
    with pytest.raises(DatasetError, match="a message holds a 'image_url' part; only text parts are read"):
        load_preference_jsonl(write(tmp_path, [{"prompt": image, "chosen": "a cat", "rejected": "a dog"}]))


def test_missing_or_empty_file(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_preference_jsonl(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no pairs"):
        load_preference_jsonl(tmp_path / "empty.jsonl")


def test_best_worst_pair():
    pair = best_worst_pair("p", ["a", "b", "c", "d"], [0.5, 1.0, 0.0, 1.0])
    assert (pair.chosen, pair.rejected, pair.chosen_reward, pair.rejected_reward) == ("b", "c", 1.0, 0.0)
    assert best_worst_pair("p", ["a", "b"], [1.0, 1.0]) is None  # no signal
    assert best_worst_pair("p", ["a", "a"], [1.0, 0.0]) is None  # same text
    assert best_worst_pair("p", ["a", "b"], [0.2, 0.0], min_gap=0.5) is None
    assert best_worst_pair("p", ["a"], [1.0]) is None
