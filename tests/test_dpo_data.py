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
