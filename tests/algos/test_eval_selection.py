"""``mathgym eval`` with a selection rule or beam search: the rules on real episodes, and end to end on a small model."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from mathgym import train_cli  # noqa: E402
from mathgym.algos.batch import Episode  # noqa: E402
from mathgym.algos.evaluate import Selector, episode_steps, evaluate_beam_search  # noqa: E402
from mathgym.algos.selection import ProcessRewardScorer, math_equal  # noqa: E402
from mathgym.envs.math.math_step import arithmetic_consistency  # noqa: E402
from mathgym.errors import ConfigError  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

PROMPT = [{"role": "user", "content": "What is 2 + 2?"}]


def _episode(text: str, correct: bool) -> Episode:
    return Episode("MathReason-v0", "t", 0, completions=[text], correct=correct,
                   messages=[*PROMPT, {"role": "assistant", "content": text}])


def test_rules_pick_among_real_episodes():
    # Majority says 5 (two of three); the arithmetic check scores "2 + 2 = 4" 1 and "2 + 2 = 5" 0.
    group = [_episode("2 + 2 = 5\nso \\boxed{5}", False), _episode("Then 2 + 2 = 4, \\boxed{4}", True),
             _episode("2 + 2 = 5 so \\boxed{5.0}", False)]
    scorer = ProcessRewardScorer(arithmetic_consistency)
    assert Selector("prm-min", scorer).choose(group, math_equal()) == (0, 1)
    assert Selector("prm-vote", scorer).choose(group, math_equal()) == (0, 1)
    assert Selector("majority").choose(group, math_equal()) == (0, 0)


def test_steps_are_lines_of_one_answer_or_the_actions_of_a_step_level_episode():
    assert episode_steps(_episode("a\n\n b \nc. d; e", True)) == ["a", "b", "c.", "d;", "e"]
    chat = [*PROMPT, {"role": "assistant", "content": "a\nb"}, {"role": "user", "content": "next"},
            {"role": "assistant", "content": "c"}]
    assert episode_steps(Episode("MathStep-v0", "t", 0, completions=["a\nb", "c"], messages=chat)) == ["a\nb", "c"]


@pytest.mark.parametrize("argv, message", [
    (["--k", "4", "--select", "prm-min"], "--prm DIR"),
    (["--k", "4", "--select", "orm"], "--orm DIR"),
    (["--select", "majority"], "--k 2 or more"),
    (["--search", "beam"], "--prm DIR"),
    (["--search", "beam", "--prm", "x", "--beam-width", "0"], "at least 1"),
])
def test_selection_options_that_cannot_work_are_one_message(argv, message):
    with pytest.raises(ConfigError, match=message):
        train_cli.check_selection_args(train_cli._eval_parser().parse_args(argv))


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


def test_eval_reports_maj_at_k_and_writes_it(model_path, tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = ["--model", str(model_path), "--tasks", "2", "--k", "3", "--select", "majority", "--progress", "false",
            "--max-new-tokens", "6", "--out", str(out)]
    assert train_cli.main("eval", argv) == 0
    assert "maj@3 = " in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert {"pass@1", "pass@3", "maj@3"} <= set(record) and 0.0 <= record["maj@3"] <= record["pass@3"]
    assert "majority@3" not in record  # majority's pick is maj@k, reported once


def test_beam_search_runs_on_a_step_level_env(model_path):
    from mathgym.agents.policy import LLMPolicy

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    result = evaluate_beam_search(policy, "MathStep-v0", {}, ProcessRewardScorer(arithmetic_consistency), num_tasks=2,
                                  beam_width=2, expansions=2, max_steps=2, max_new_tokens=6)
    assert sum(result.statuses.values()) == 2 and result.select == "beam" and 0.0 <= result.selected <= 1.0


@pytest.mark.parametrize("env_id", ["MathReason-v0", "MathStep-v0"])
def test_label_steps_command_writes_a_row_per_solution(model_path, tmp_path, capsys, env_id):
    out = tmp_path / "labels.jsonl"
    argv = ["--model", str(model_path), "--env", env_id, "--tasks", "2", "--k", "2", "--max-new-tokens", "8",
            "--progress", "false", "--out", str(out)]
    assert train_cli.main("label-steps", argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert f"{len(rows)} solutions" in capsys.readouterr().out
    for row in rows:
        assert len(row["steps"]) == len(row["labels"]) >= 1 and all(0.0 <= x <= 1.0 for x in row["labels"])
        assert row["answer"] and "What is" in row["problem"]


def test_label_steps_samples_several_solutions_per_problem(model_path, tmp_path):
    out = tmp_path / "labels.jsonl"
    argv = ["--model", str(model_path), "--tasks", "2", "--samples", "3", "--k", "1", "--max-new-tokens", "8",
            "--temperature", "1.5", "--progress", "false", "--out", str(out)]
    assert train_cli.main("label-steps", argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    per_problem = {}
    for row in rows:
        per_problem.setdefault(row["problem"], []).append(tuple(row["steps"]))
    assert len(per_problem) == 2 and len(rows) > 2  # a random tiny model at temperature 1.5 rarely repeats itself
    assert all(len(set(s)) == len(s) <= 3 for s in per_problem.values())  # distinct solutions, at most --samples
    assert train_cli.main("label-steps", [*argv[:4], "--samples", "0", *argv[6:]]) == 2


def test_label_steps_skips_the_problems_of_an_excluded_file(model_path, tmp_path, capsys):
    first, second = tmp_path / "held.jsonl", tmp_path / "rest.jsonl"
    argv = ["--model", str(model_path), "--k", "1", "--max-new-tokens", "8", "--progress", "false"]
    assert train_cli.main("label-steps", [*argv, "--tasks", "2", "--out", str(first)]) == 0
    held = {json.loads(line)["problem"] for line in first.read_text().splitlines()}
    capsys.readouterr()
    assert train_cli.main("label-steps", [*argv, "--tasks", "4", "--exclude-problems", str(first), "--out", str(second)]) == 0
    rows = [json.loads(line) for line in second.read_text().splitlines()]
    assert rows and not held & {row["problem"] for row in rows}  # seeds 2 and 3 only
    assert f"2 of the 4 problems are in {first}: skipped" in capsys.readouterr().out
    assert train_cli.main("label-steps", [*argv, "--tasks", "2", "--exclude-problems", str(first), "--out", str(second)]) == 2
    assert "nothing to label" in capsys.readouterr().err and rows == [json.loads(x) for x in second.read_text().splitlines()]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert train_cli.main("label-steps", [*argv, "--exclude-problems", str(bad), "--out", str(second)]) == 2
    assert f"{bad}:1" in capsys.readouterr().err


def test_label_steps_uses_the_env_options_saved_with_the_model(model_path, tmp_path):
    import shutil

    from mathgym.agents.settings import write_model_settings

    model = shutil.copytree(model_path, tmp_path / "model")
    write_model_settings(model, {"env": "MathReason-v0", "env_kwargs": {"difficulty": 3}})
    out = tmp_path / "labels.jsonl"
    argv = ["--model", str(model), "--tasks", "1", "--k", "1", "--max-new-tokens", "4", "--progress", "false", "--out", str(out)]
    assert train_cli.main("label-steps", argv) == 0
    assert json.loads(out.read_text())["task_id"].startswith("gen-L3-")


def test_label_steps_converts_the_public_formats(tmp_path, capsys):
    source = tmp_path / "shepherd.jsonl"
    source.write_text(json.dumps({"input": "Q? Step 1: a ки\nStep 2: b ки", "label": "Q? Step 1: a +\nStep 2: b -"}) + "\n")
    out = tmp_path / "rows.jsonl"
    assert train_cli.main("label-steps", ["--convert", str(source), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["labels"] == [1.0, 0.0]
    source.write_text("{}\n")
    assert train_cli.main("label-steps", ["--convert", str(source), "--out", str(out)]) == 2
    assert "shepherd.jsonl:1" in capsys.readouterr().err


def test_a_scorer_path_that_does_not_exist_is_refused_before_any_model_loads(capsys):
    from mathgym import train_cli

    code = train_cli.main("eval", ["--model", "tiny", "--k", "2", "--select", "prm-min", "--prm", "/no/such/prm-dir"])
    assert code != 0
    assert "--prm /no/such/prm-dir: no such directory." in capsys.readouterr().err


def test_a_scorer_hub_id_goes_to_the_hub_and_an_unreachable_one_is_a_clear_error(capsys, monkeypatch):
    from mathgym import train_cli

    import huggingface_hub.constants

    # As if this machine had no hub: the id is looked up and not found. (huggingface_hub reads
    # HF_HUB_OFFLINE once, at import; without it the lookup waits out network retries.)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    code = train_cli.main("eval", ["--model", "tiny", "--k", "2", "--select", "prm-min", "--prm", "nobody/no-such-prm",
                                   "--tasks", "1", "--progress", "false"])
    err = capsys.readouterr().err
    assert code == 2 and "PRM nobody/no-such-prm: could not be loaded" in err
    assert train_cli.main("eval", ["--model", "tiny", "--k", "2", "--select", "prm-min", "--prm", "a/b/c"]) == 2
    assert "no such directory (nor a hub id" in capsys.readouterr().err


def test_a_scorer_directory_that_is_not_a_model_is_a_clear_error(capsys, tmp_path):
    from mathgym import train_cli

    (tmp_path / "notes.txt").write_text("not a model")
    code = train_cli.main("eval", ["--model", "tiny", "--k", "2", "--select", "prm-min", "--prm", str(tmp_path),
                                   "--tasks", "1", "--progress", "false"])
    assert code == 2 and f"PRM {tmp_path}: could not be loaded" in capsys.readouterr().err
