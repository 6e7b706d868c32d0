"""MathReason-v0: generator, data loaders, and scoring of real GSM8K solutions."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import numpy as np
import pytest

import mathgym  # noqa: F401
from mathgym.envs.math.data import gsm8k_final_answer, load_jsonl
from mathgym.envs.math.problems import MAX_LEVEL, generate
from mathgym.errors import ConfigError, DatasetError
from mathgym.rewards import MathVerifier


def _gsm8k_action(solution: str) -> str:
    return re.sub(r"####\s*(.+)\s*$", lambda m: f"\\boxed{{{m.group(1).strip()}}}", solution.strip())


def test_gsm8k_reference_solutions_score_correct(gsm8k_path):
    env = gym.make("MathReason-v0", dataset=str(gsm8k_path))
    rows = [json.loads(line) for line in gsm8k_path.read_text().splitlines()[:200]]
    wrong = []
    for index, row in enumerate(rows):
        obs, info = env.reset(options={"task_index": index})
        assert row["question"] in obs and "\\boxed{}" in obs
        _, reward, terminated, truncated, info = env.step(_gsm8k_action(row["answer"]))
        if reward != 1.0 or info["status"] != "correct":
            wrong.append((index, info["extracted_answer"], info["answer"]))
        assert terminated and not truncated
    assert not wrong, wrong[:5]


def test_shuffled_gsm8k_solutions_score_wrong(gsm8k_path):
    env = gym.make("MathReason-v0", dataset=str(gsm8k_path))
    rows = [json.loads(line) for line in gsm8k_path.read_text().splitlines()[:200]]
    rng = np.random.default_rng(0)
    checked = 0
    for index in range(len(rows)):
        other = int(rng.integers(len(rows)))
        if gsm8k_final_answer(rows[other]["answer"]) == gsm8k_final_answer(rows[index]["answer"]):
            continue
        env.reset(options={"task_index": index})
        _, reward, _, _, info = env.step(_gsm8k_action(rows[other]["answer"]))
        assert reward == 0.0 and info["status"] == "wrong", (index, other)
        checked += 1
    assert checked > 0.9 * len(rows)


def test_generator_is_deterministic_and_splits_are_disjoint():
    for level in range(MAX_LEVEL + 1):
        a = [generate(np.random.default_rng(5), level).question for _ in range(3)]
        b = [generate(np.random.default_rng(5), level).question for _ in range(3)]
        assert a == b
    rng = np.random.default_rng(0)
    train = {generate(rng, 0, "train").question for _ in range(3000)}
    test = {generate(rng, 0, "test").question for _ in range(1000)}
    assert train and test and not train & test


@pytest.mark.parametrize("level", range(MAX_LEVEL + 1))
def test_worked_solutions_are_scored_correct(level):
    env = gym.make("MathReason-v0", difficulty=level)
    for seed in range(25):
        env.reset(seed=seed)
        solution = env.unwrapped.expert_action()
        _, reward, _, _, info = env.step(solution)
        assert reward == 1.0, (solution, info["answer"])


def test_same_seed_same_task_and_answer_hidden():
    env = gym.make("MathReason-v0", difficulty=3)
    (obs_a, info_a), (obs_b, info_b) = env.reset(seed=11), env.reset(seed=11)
    assert obs_a == obs_b and info_a == info_b
    assert [m["role"] for m in info_a["messages"]] == ["system", "user"]
    assert info_a["messages"][1]["content"] == obs_a
    assert "answer" not in info_a


def test_options_are_validated():
    with pytest.raises(ConfigError, match="difficulty"):
        gym.make("MathReason-v0", difficulty=9)
    with pytest.raises(ConfigError, match="split"):
        gym.make("MathReason-v0", split="validation")
    env = gym.make("MathReason-v0")
    env.reset()
    with pytest.raises(ConfigError, match="task_index"):
        env.reset(options={"task_index": 3})


def test_system_prompt_and_max_length_options():
    env = gym.make("MathReason-v0", system_prompt="", max_length=500)
    _, info = env.reset(seed=0)
    assert [m["role"] for m in info["messages"]] == ["user"]
    assert env.observation_space.max_length == 500


def test_math_format_and_column_mapping(tmp_path):
    math_file = tmp_path / "math.jsonl"
    math_file.write_text(
        json.dumps({"problem": "Half of one?", "solution": "It is $\\boxed{\\frac{1}{2}}$."}) + "\n"
        + json.dumps({"problem": "Two squared?", "solution": "...", "answer": "4"}) + "\n"
    )
    env = gym.make("MathReason-v0", dataset=str(math_file))
    env.reset(options={"task_index": 0})
    assert env.step("so \\boxed{0.5}")[1] == 1.0
    env.reset(options={"task_index": 1})
    assert env.step("\\boxed{4}")[1] == 1.0
    custom = tmp_path / "custom.jsonl"
    custom.write_text(json.dumps({"q": "1+1?", "a": "2"}) + "\n")
    records = load_jsonl(custom, columns={"question": "q", "answer": "a"})
    assert records[0].question == "1+1?" and records[0].answer == "2"


def test_bad_data_files_raise_clear_errors(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        gym.make("MathReason-v0", dataset=str(tmp_path / "missing.jsonl"))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "x"\n')
    with pytest.raises(DatasetError, match="broken.jsonl:1"):
        load_jsonl(broken)
    no_answer = tmp_path / "no_answer.jsonl"
    no_answer.write_text(json.dumps({"question": "x", "solution": "none"}) + "\n")
    with pytest.raises(DatasetError, match="no answer"):
        load_jsonl(no_answer)


def test_hf_dataset_loader_maps_columns(tmp_path):
    # A local `datasets` data set (no network): the same path a hub id would take.
    datasets = pytest.importorskip("datasets")
    path = tmp_path / "ds"
    datasets.Dataset.from_dict({"q": ["3+4?"], "a": ["7"]}).save_to_disk(str(path))
    env = gym.make("MathReason-v0", dataset=f"hf:{path}", columns={"question": "q", "answer": "a"})
    obs, _ = env.reset(options={"task_index": 0})
    assert obs.startswith("3+4?")
    assert env.step("\\boxed{7}")[1] == 1.0


def test_unparseable_text_scores_zero_with_status():
    env = gym.make("MathReason-v0")
    env.reset(seed=0)
    _, reward, _, _, info = env.step("I am not sure.")
    assert reward == 0.0 and info["status"] == "unparseable"


def test_answer_extraction_modes():
    strict, lenient = gym.make("MathReason-v0"), gym.make("MathReason-v0", answer_extraction="lenient")
    for env in (strict, lenient):
        env.reset(seed=0)
    gold = strict.unwrapped.task.answer
    assert lenient.unwrapped.task.answer == gold
    _, reward, _, _, info = strict.step(f"Answer ${gold}$")  # unmarked: a format strict mode refuses
    assert reward == 0.0 and info["status"] == "unparseable"
    _, reward, _, _, info = lenient.step(f"Answer ${gold}$")  # math-verify reads it
    assert reward == 1.0 and info["status"] == "correct"
    assert strict.unwrapped.verifier.answer_extraction == "strict"
    with pytest.raises(ConfigError, match="'strict', 'lenient'"):
        gym.make("MathReason-v0", answer_extraction="loose")
    with pytest.raises(ConfigError, match="conflicts"):
        gym.make("MathReason-v0", answer_extraction="lenient", verifier=MathVerifier())
    assert gym.make("MathReason-v0", verifier=MathVerifier(answer_extraction="lenient")).unwrapped.verifier.answer_extraction == "lenient"


def test_rows_in_other_peoples_layouts(tmp_path):
    """Capitalised names (AIME sets), numeric answers, TRL's conversational prompts and verl's
    nested ground truth load; a cell that is not text says which column."""
    from mathgym.envs.math.data import record_from_row
    from mathgym.errors import DatasetError

    assert record_from_row({"Problem": "1+1?", "Answer": 2}) == record_from_row({"problem": "1+1?", "answer": "2"})
    assert record_from_row({"question": "x?", "Answer": 0.5, "Solution": "so"}).answer == "0.5"
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    verl = {"prompt": chat, "reward_model": {"ground_truth": "4", "style": "rule"}, "data_source": "x"}
    record = record_from_row(verl, {"question": "prompt", "answer": "reward_model.ground_truth"})
    assert (record.question, record.answer) == ("2+2?", "4")
    parted = [{"role": "user", "content": [{"type": "text", "text": "2+"}, {"type": "text", "text": "2?"}]}]  # OpenAI's content parts
    assert record_from_row({**verl, "prompt": parted}, {"question": "prompt", "answer": "reward_model.ground_truth"}).question == "2+2?"
    with pytest.raises(DatasetError, match="columns option"):
        record_from_row({"query": "q", "target": "1"})
    with pytest.raises(DatasetError, match=r"no answer for 'q'.*columns=\{'question': 'prompt', 'answer': 'solution'\}"):
        record_from_row({"prompt": "q", "target": "1"})
    with pytest.raises(DatasetError, match="'reward_model.truth'"):
        record_from_row(verl, {"question": "prompt", "answer": "reward_model.truth"})
    with pytest.raises(DatasetError, match="column 'answer' holds a dict"):
        record_from_row({"question": "q", "answer": {"value": 1}})
    # verl's layout needs no mapping: DAPO-Math-17k and DeepScaleR as verl rows, Skywork-OR1's listed forms
    assert record_from_row(verl) == record
    listed = json.dumps(["\\frac{1}{2}", "0.5"])
    listed_record = record_from_row({**verl, "reward_model": {"ground_truth": listed}})
    assert (listed_record.answer, listed_record.alternatives) == ("\\frac{1}{2}", ("0.5",))
    assert record_from_row({**verl, "reward_model": {"ground_truth": ["3", "", "3.0"]}}).alternatives == ("3.0",)
    mapped = record_from_row({**verl, "reward_model": {"ground_truth": listed}}, {"question": "prompt", "answer": "reward_model.ground_truth"})
    assert mapped == listed_record
    assert record_from_row({**verl, "reward_model": {"ground_truth": "[0, 1]"}}).answer == "[0, 1]"  # an interval stays one
    assert record_from_row({"problem": "p", "final_answer": 3, "solution": "long"}).answer == "3"
    assert record_from_row({"Question": "p", "ground_truth": "x+1"}).answer == "x+1"
    sharegpt = [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "3+3?"}]
    assert record_from_row({"conversations": sharegpt, "answer": "6"}, {"question": "conversations", "answer": "answer"}).question == "3+3?"
    path = tmp_path / "verl.jsonl"
    path.write_text(json.dumps(verl) + "\n")
    env = gym.make("MathReason-v0", dataset=str(path))
    obs, _ = env.reset(seed=0)
    assert "2+2?" in obs and env.step("\\boxed{4}")[1] == 1.0
    env = gym.make("MathReason-v0", dataset=str(path), columns={"question": "prompt", "answer": "reward_model.ground_truth"})
    obs, _ = env.reset(seed=0)
    assert "2+2?" in obs and env.step("\\boxed{4}")[1] == 1.0


def test_an_answer_listed_in_several_forms_is_matched_by_any(tmp_path):
    # forms that are not equal as numbers (an exact value and its rounding), so only the list makes both count
    rows = [{"prompt": "A third of one?", "reward_model": {"ground_truth": json.dumps(["\\frac{1}{3}", "0.333"])}}]
    path = tmp_path / "forms.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    replies = {"\\boxed{\\frac{1}{3}}": 1.0, "\\boxed{0.333}": 1.0, "\\boxed{1/3}": 1.0, "\\boxed{0.33}": 0.0}
    env = gym.make("MathReason-v0", dataset=str(path))
    for reply, reward in replies.items():
        env.reset(seed=0)
        assert env.step(reply)[1] == reward, reply
    # a vector env's step scores every form ahead in one batch and reaches the same verdicts
    envs = gym.make_vec("MathReason-v0", num_envs=4, vectorization_mode="sync", dataset=str(path))
    envs.reset(seed=0)
    _, rewards, *_ = envs.step(list(replies))
    assert rewards.tolist() == list(replies.values())
    envs.close()


def test_verls_reward_function_reads_other_peoples_ground_truths_as_the_env_does():
    from mathgym.integrations import verl as mg  # needs no verl

    # bare LaTeX is LaTeX (math-verify alone reads "2x" as 2 and "x \geq 5" as 5)
    assert mg.compute_score("x", "so \\boxed{2x}", "2x") == 1.0
    assert mg.compute_score("x", "so \\boxed{x \\geq 5}", "x \\geq 5") == 1.0
    assert mg.compute_score("x", "so \\boxed{5}", "x \\geq 5") == 0.0
    # Skywork-OR1's list of forms, as JSON text or as a list column: any form matches
    listed = json.dumps(["\\frac{1}{3}", "0.333"])
    assert mg.compute_score("x", "so \\boxed{0.333}", listed) == 1.0
    assert mg.compute_score("x", "so \\boxed{0.333}", ["\\frac{1}{3}", "0.333"]) == 1.0
    assert mg.compute_score("x", "so \\boxed{0.25}", listed) == 0.0
    assert mg.compute_score("x", "so \\boxed{[0,1]}", "[0, 1]") == 1.0  # an interval is one answer


def test_other_math_sets_layouts_load_as_they_are(tmp_path):
    """Open-Reasoner-Zero's pairs of turns (a JSON list file, or one pair a line), OlympiadBench's
    lists of answers and solutions (all answers asked for where it says so), AIME's capitalised
    columns and AMC's numeric answers."""
    from mathgym.envs.math.data import load_jsonl, record_from_row

    pairs = [[{"from": "human", "value": f"What is {i} + 1?"}, {"from": "assistant", "ground_truth": {"value": str(i + 1)}}] for i in range(3)]
    (tmp_path / "orz.json").write_text(json.dumps(pairs, indent=1))
    (tmp_path / "orz.jsonl").write_text("".join(json.dumps(pair) + "\n" for pair in pairs))
    (tmp_path / "one.json").write_text(json.dumps(pairs[2]))
    expected = [("What is 0 + 1?", "1"), ("What is 1 + 1?", "2"), ("What is 2 + 1?", "3")]
    for name in ("orz.json", "orz.jsonl"):
        assert [(r.question, r.answer) for r in load_jsonl(tmp_path / name)] == expected
    assert [(r.question, r.answer) for r in load_jsonl(tmp_path / "one.json")] == expected[2:]
    env = gym.make("MathReason-v0", dataset=str(tmp_path / "orz.json"), split="all")
    obs, _ = env.reset(seed=0)
    answer = next(a for q, a in expected if q in obs)
    assert env.step(f"\\boxed{{{answer}}}")[1] == 1.0
    olympiad = {"question": "Half of one?", "final_answer": ["$\\frac{1}{2}$"], "solution": ["First: $\\frac{1}{2}$.", "Second."],
                "is_multiple_answer": False}
    record = record_from_row(olympiad)
    assert (record.answer, record.solution) == ("$\\frac{1}{2}$", "First: $\\frac{1}{2}$.")
    both = record_from_row({**olympiad, "final_answer": ["$2$", "$3$"], "is_multiple_answer": True})
    assert (both.answer, both.alternatives) == ("$2$, $3$", ())
    assert record_from_row({"ID": "2024-I-1", "Problem": "p", "Answer": 204}).answer == "204"
    assert record_from_row({"problem": "p", "answer": 3.0, "url": "u"}).answer == "3.0"


def test_parquet_files_load_as_verl_and_the_hub_ship_them(tmp_path):
    """verl's rows (a chat prompt, reward_model.ground_truth) in Parquet, as verl trains on them;
    the code env, the demonstrations and a broken file go through the same reader."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mathgym.algos.sft import load_demonstrations
    from mathgym.envs.math.data import load_jsonl

    rows = [{"data_source": "x", "prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
             "reward_model": {"style": "rule", "ground_truth": str(2 * i)}} for i in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    assert [(r.question, r.answer) for r in load_jsonl(tmp_path / "train.parquet")] == [(f"What is {i} + {i}?", str(2 * i)) for i in range(4)]
    env = gym.make("MathReason-v0", dataset=str(tmp_path / "train.parquet"), split="all")
    obs, _ = env.reset(seed=0)
    i = next(i for i in range(4) if f"What is {i} + {i}?" in obs)
    assert env.step(f"\\boxed{{{2 * i}}}")[1] == 1.0
    code = [{"question": "Add the two numbers.", "input_output": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})}]
    pq.write_table(pa.Table.from_pylist(code), tmp_path / "code.parquet")
    env = gym.make("CodeSandbox-v0", dataset=str(tmp_path / "code.parquet"))
    env.reset(options={"task_index": 0})
    assert env.step("```python\nprint(sum(map(int, input().split())))\n```")[1] == 1.0
    pq.write_table(pa.Table.from_pylist([{"query": "2+2?", "response": "4"}]), tmp_path / "sft.parquet")
    assert load_demonstrations(tmp_path / "sft.parquet") == [[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]]
    (tmp_path / "broken.parquet").write_text("not parquet")
    with pytest.raises(DatasetError, match="broken.parquet: not a readable Parquet file"):
        load_jsonl(tmp_path / "broken.parquet")


def test_a_folder_or_pattern_of_shards_is_one_data_set(tmp_path):
    """A hub snapshot's shards (data/train-0000N-of-0000M.parquet) read as one data set, from the
    folder or from a glob pattern that picks a split; a folder holding two splits (a test.jsonl
    beside them), an empty folder or a pattern matching nothing is a clear error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mathgym.envs.math.data import load_jsonl

    data = tmp_path / "snapshot" / "data"
    data.mkdir(parents=True)
    for shard in range(2):
        rows = [{"problem": f"What is {shard}{i} + 0?", "answer": f"{shard}{i}"} for i in range(3)]
        pq.write_table(pa.Table.from_pylist(rows), data / f"train-0000{shard}-of-00002.parquet")
    (data / "test.jsonl").write_text(json.dumps({"problem": "What is 9 + 0?", "answer": "9"}) + "\n")
    (data / "README.md").write_text("not data")
    with pytest.raises(DatasetError, match=r"folder .*snapshot' holds the splits test \(data/test.jsonl\), train \(data/train-00000.*"
                                           r"e.g. with a pattern such as '.*snapshot/data/test\*'"):
        load_jsonl(tmp_path / "snapshot")  # train and test read as one would train on the test set
    assert [r.answer for r in load_jsonl(data / "train-*.parquet")] == ["00", "01", "02", "10", "11", "12"]  # in name order
    (data / "test.jsonl").rename(tmp_path / "test.jsonl")
    assert [r.answer for r in load_jsonl(tmp_path / "snapshot")] == ["00", "01", "02", "10", "11", "12"]  # one split: the folder is it
    (tmp_path / "test.jsonl").rename(data / "test.jsonl")
    env = gym.make("MathReason-v0", dataset=str(data / "test*"), split="all")
    env.reset(seed=0)
    assert env.step("\\boxed{9}")[1] == 1.0
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="folder .*empty' holds no .jsonl, .json, .parquet file"):
        load_jsonl(tmp_path / "empty")
    with pytest.raises(DatasetError, match=r"pattern .*nothing-\*\.jsonl' matches no file"):
        load_jsonl(tmp_path / "nothing-*.jsonl")
    saved = tmp_path / "saved"  # datasets' save_to_disk: its JSON files are metadata, not rows
    saved.mkdir()
    (saved / "dataset_info.json").write_text("{}")
    (saved / "data-00000-of-00001.arrow").write_bytes(b"")
    with pytest.raises(DatasetError, match="saved with datasets' save_to_disk .*hf:"):
        load_jsonl(saved)
    with pytest.raises(DatasetError, match="neither 'builtin', 'humaneval' nor a data file, folder or pattern"):
        gym.make("CodeSandbox-v0", dataset=str(tmp_path / "missing.jsonl"))


def test_a_malformed_row_or_column_mapping_is_a_data_set_error():
    from mathgym.envs.math.data import record_from_row

    with pytest.raises(DatasetError, match="a row is a JSON object, not list"):
        record_from_row([1, 2])
    with pytest.raises(DatasetError, match="column names are strings"):
        record_from_row({"q": "1+1?", "a": "2"}, {"question": "q", "answer": 7})
