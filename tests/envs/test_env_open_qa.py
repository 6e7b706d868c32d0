"""OpenQA-v0: open-ended questions graded by an LLM judge (the fixture judge over real HTTP on 127.0.0.1)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import mathgym  # noqa: F401
from mathgym.cli import main
from mathgym.envs.writing.open_qa import OPEN_QA_SAMPLE, load_open_qa
from mathgym.errors import ConfigError, DatasetError
from mathgym.rewards import Status
from tests.judge_server import fixture_judge_url


def _env(**kwargs):
    return gym.make("OpenQA-v0", judge_url=fixture_judge_url(), judge_model="fixture-judge", **kwargs)


def test_the_built_in_questions():
    tasks = load_open_qa(OPEN_QA_SAMPLE)
    assert len(tasks) == 50 and len({t.task_id for t in tasks}) == 50
    assert all(t.prompt.endswith("?") or t.prompt.endswith(".") for t in tasks)


def test_the_reference_answer_scores_1_and_a_wrong_one_is_graded_by_the_judge():
    env = _env()
    obs, info = env.reset(seed=0)
    reference = env.unwrapped.expert_action()
    assert obs == env.unwrapped.task.prompt and info["messages"][0]["role"] == "system"
    _, reward, terminated, _, info = env.step(f"In short: {reference}")
    assert (reward, terminated, info["status"], info["correct"]) == (1.0, True, Status.CORRECT, True)
    assert info["reward_breakdown"] == {"judge": 1.0} and info["judge"] == {"judge_score": 10.0}
    env.reset(seed=0)
    _, reward, _, _, info = env.step("I am not sure, maybe forty-two.")
    assert (reward, info["status"], info["correct"]) == (pytest.approx(0.2), Status.PARTIAL, False)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("   ")
    assert (reward, info["status"]) == (0.0, Status.UNPARSEABLE)


def test_a_failed_judge_is_an_infra_status_not_a_wrong_answer():
    env = gym.make("OpenQA-v0", judge_url="http://127.0.0.1:9/v1", judge_model="x", judge_options={"max_retries": 0})
    env.reset(seed=1)
    _, reward, terminated, _, info = env.step(env.unwrapped.expert_action())
    assert info["status"] is Status.ERROR and info["status"].is_infra_failure
    assert (reward, terminated, info["correct"]) == (0.0, True, False)
    assert "failed" in info["judge"]["reason"]


def test_options_and_data_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="judge_url=http"):
        gym.make("OpenQA-v0")
    with pytest.raises(ConfigError, match="score_batch"):
        gym.make("OpenQA-v0", judge=object())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q?"}) + "\n")
    with pytest.raises(DatasetError, match="reference"):
        _env(dataset=str(bad))
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"question": "What is the capital of Italy?", "reference": "Rome"}) + "\n")
    env = _env(dataset=str(good))
    env.reset(seed=0, options={"task_index": 0})
    assert env.step("Rome, on the Tiber.")[1] == 1.0


def test_qa_data_in_triviaqa_and_natural_questions_layouts(tmp_path):
    from mathgym.envs.writing.open_qa import load_open_qa

    path = tmp_path / "qa.jsonl"
    rows = [{"question": "Which planet is red?", "answer": {"value": "Mars", "aliases": ["Mars", "the Red Planet"]}},
            {"question": "Capital of France?", "answers": ["Paris", "City of Paris"]},
            {"question": "2 + 2?", "answer": 4}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [t.answer for t in load_open_qa(path)] == ["Mars (also accepted: the Red Planet)", "Paris (also accepted: City of Paris)", "4"]
    path.write_text(json.dumps({"question": "q?", "answers": []}) + "\n")
    with pytest.raises(DatasetError, match="'answer' / 'answers'"):
        load_open_qa(path)


def test_qa_data_in_squad_popqa_musique_flashrag_and_verl_layouts(tmp_path):
    from mathgym.envs.writing.open_qa import load_open_qa

    rows = [
        {"id": "squad-1", "context": "Oxygen was found by Scheele.", "question": "Who found oxygen?",
         "answers": {"text": ["Scheele", "Carl Scheele"], "answer_start": [19, 13]}},
        {"question": "What is George Rankin's occupation?", "possible_answers": json.dumps(["politician", "political leader"])},
        {"question": "Who wrote it?", "answer": "Tolstoy", "answer_aliases": ["Leo Tolstoy"]},
        {"question": "Where is the Eiffel Tower?", "golden_answers": ["Paris"]},
        {"prompt": [{"role": "user", "content": "Who painted the Mona Lisa?"}], "reward_model": {"ground_truth": {"target": ["Leonardo da Vinci", "Leonardo"]}}},
    ]
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(rows))
    tasks = load_open_qa(path)
    assert [t.answer for t in tasks] == [
        "Scheele (also accepted: Carl Scheele)", "politician (also accepted: political leader)", "Tolstoy (also accepted: Leo Tolstoy)",
        "Paris", "Leonardo da Vinci (also accepted: Leonardo)",
    ]
    assert tasks[0].prompt == "Oxygen was found by Scheele.\n\nWho found oxygen?" and tasks[4].prompt == "Who painted the Mona Lisa?"


def test_mathgym_check_passes_with_a_judge(capsys):
    url = fixture_judge_url()
    assert main(["check", "OpenQA-v0", "-o", f"judge_url={url}", "-o", "judge_model=fixture-judge"]) == 0
    assert " 0 failed" in capsys.readouterr().out
