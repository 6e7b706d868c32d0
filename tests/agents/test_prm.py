"""Process reward models: each form scored as its own logits say, the aggregation rules and the
evaluation measures against hand numbers, a PRM trained, saved, loaded and scored, and MathStep-v0
paying a PRM directory as its process reward."""

from __future__ import annotations

import json
import math
import pickle

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")

import mathgym  # noqa: E402,F401
from mathgym.agents.prm_model import load_prm  # noqa: E402
from mathgym.algos.prm_eval import (  # noqa: E402
    LabelledSolution,
    evaluate_prm,
    first_error_accuracy,
    first_error_step,
    load_labelled_steps,
    step_auc,
)
from mathgym.errors import ConfigError, DatasetError  # noqa: E402
from mathgym.rewards.base import Status  # noqa: E402
from mathgym.rewards.prm import PRM_SETTINGS_FILE, PRMError, PRMProcessReward, PRMTimeout, aggregate  # noqa: E402
from tests.chat_fixtures import cached_chat_model  # noqa: E402
from tests.trainkit import record_calls  # noqa: E402
from tests.trainkit import write_step_labels as _labelled  # noqa: E402

PROBLEM = "What is 12 + 30?"
STEPS = ["12 + 30 = 42.", "So the sum is 42.", "The answer is \\boxed{42}."]


def _save(model, tokenizer, path, settings=None):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    if settings is not None:
        (path / PRM_SETTINGS_FILE).write_text(json.dumps(settings))
    return path


@pytest.fixture(scope="module")
def step_tag_dir(tmp_path_factory):
    """A random 2-layer Qwen2 causal LM without a settings file: read as Math-Shepherd's step_tag form."""
    return cached_chat_model(tmp_path_factory, "chatml")


@pytest.fixture(scope="module")
def step_head_dir(step_tag_dir, tmp_path_factory):
    """A random Llama token classifier with two labels and a separator token (Qwen2.5-Math-PRM's form)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForTokenClassification

    tokenizer = AutoTokenizer.from_pretrained(step_tag_dir)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<extra_0>"]})
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_labels=2, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(4)
    return _save(LlamaForTokenClassification(config), tokenizer, tmp_path_factory.mktemp("prm") / "head")


def _hand_logits(path, ids, causal=True):
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    cls = AutoModelForCausalLM if causal else AutoModelForTokenClassification
    model = cls.from_pretrained(path).eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


def test_a_causal_lm_is_scored_at_each_step_tag_by_good_against_bad(step_tag_dir):
    prm = load_prm(step_tag_dir, device="cpu")
    assert prm.settings.form == "step_tag" and prm.settings.step_tag == "ки"
    tok = prm.tokenizer
    text = f"{PROBLEM} {STEPS[0]} ки\n{STEPS[1]} ки\n{STEPS[2]} ки"
    ids = tok(text)["input_ids"]
    logits = _hand_logits(step_tag_dir, ids)
    good, bad = tok.encode("+", add_special_tokens=False)[0], tok.encode("-", add_special_tokens=False)[0]
    expected, start = [], 0
    for _ in STEPS:  # the token holding the end of each tag: the last token of the text up to it
        end = text.index("ки", start) + 2
        prefix = tok(text[:end])["input_ids"]
        assert ids[: len(prefix)] == prefix
        pair = torch.softmax(logits[len(prefix) - 1, [good, bad]], dim=-1)
        expected.append(float(pair[0]))
        start = end
    got = prm.score_steps([PROBLEM, PROBLEM], [STEPS, STEPS[:2]])
    assert got[0] == pytest.approx(expected, abs=1e-5)
    assert got[1] == pytest.approx(expected[:2], abs=1e-5)  # a prefix scores as in the whole solution
    assert len(set(round(x, 6) for x in expected)) == 3  # the random model tells the steps apart
    # a step that writes the tag itself adds no step: only the tags mathgym wrote are read
    assert len(prm.score_steps([PROBLEM], [["12 ки + 30 ки = 42", "done"]])[0]) == 2


def test_a_token_classifier_is_scored_at_each_separator(step_head_dir):
    prm = load_prm(step_head_dir, device="cpu")
    assert prm.settings.form == "step_head"
    tok = prm.tokenizer
    sep = tok.convert_tokens_to_ids("<extra_0>")
    ids = tok(PROBLEM + "\n" + "".join(s + "<extra_0>" for s in STEPS))["input_ids"]
    logits = _hand_logits(step_head_dir, ids, causal=False)
    expected = [float(torch.softmax(logits[i], -1)[1]) for i, t in enumerate(ids) if t == sep]
    assert len(expected) == 3
    assert prm.score_steps([PROBLEM], [STEPS])[0] == pytest.approx(expected, abs=1e-5)

    templated = load_prm(step_head_dir, device="cpu", chat_template=True, system_prompt="Reason.")
    messages = [{"role": "system", "content": "Reason."}, {"role": "user", "content": PROBLEM},
                {"role": "assistant", "content": "".join(s + "<extra_0>" for s in STEPS)}]
    ids = tok.apply_chat_template(messages, tokenize=False)
    ids = tok(ids, add_special_tokens=False)["input_ids"]
    logits = _hand_logits(step_head_dir, ids, causal=False)
    expected = [float(torch.softmax(logits[i], -1)[1]) for i, t in enumerate(ids) if t == sep]
    assert templated.score_steps([PROBLEM], [STEPS])[0] == pytest.approx(expected, abs=1e-5)


def test_the_settings_file_decides_the_form_and_its_tokens(step_tag_dir, tmp_path):
    import shutil

    path = tmp_path / "custom"
    shutil.copytree(step_tag_dir, path)
    (path / PRM_SETTINGS_FILE).write_text(json.dumps({"form": "step_tag", "step_tag": "#", "good_token": "1", "bad_token": "0"}))
    prm = load_prm(path, device="cpu")
    assert (prm.settings.step_tag, prm.good_id) == ("#", prm.tokenizer.encode("1", add_special_tokens=False)[0])
    (path / PRM_SETTINGS_FILE).write_text(json.dumps({"form": "step_head", "colour": 1}))
    with pytest.raises(ConfigError, match="unknown key.*colour"):
        load_prm(path, device="cpu")
    with pytest.raises(ConfigError, match="load_prm options over .*: 'max_length' must be an integer, not '40'"):
        load_prm(step_tag_dir, device="cpu", max_length="40")
    with pytest.raises(ConfigError, match="good_token='\\+\\+ good' is .* tokens"):
        load_prm(step_tag_dir, device="cpu", good_token="++ good")



@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"form": "step_tag",', "is not valid JSON"),
        ('["step_tag"]', "must hold a JSON object"),
        ('{"form": "step_thing"}', "form='step_thing' is not a PRM form; choose one of step_tag, step_head"),
        ('{"rule": "min"}', "'form' is missing"),
        ('{"form": "step_head", "correct_label": "1"}', "'correct_label' must be an integer, not '1'"),
        ('{"form": "step_tag", "good_token": 1}', "'good_token' must be a string, not 1"),
        ('{"form": "step_head", "chat_template": "yes"}', "'chat_template' must be true or false, not 'yes'"),
        ('{"form": "step_tag", "max_length": true}', "'max_length' must be an integer, not True"),
    ],
)
def test_a_bad_settings_file_is_a_config_error_naming_it_before_any_model_loads(step_tag_dir, tmp_path, content, problem):
    import re
    import shutil

    path = tmp_path / "prm"
    shutil.copytree(step_tag_dir, path)
    (path / "config.json").unlink()  # nothing of the model loads: the settings file is read and checked first
    (path / PRM_SETTINGS_FILE).write_text(content)
    with pytest.raises(ConfigError, match=re.escape(str(path / PRM_SETTINGS_FILE)) + ".*" + re.escape(problem)):
        load_prm(path, device="cpu")

def test_a_long_solution_keeps_its_newest_steps_and_a_deadline_is_an_error_not_a_score(step_tag_dir):
    prm = load_prm(step_tag_dir, device="cpu", max_length=40)
    steps = [f"step {i}: {i} + {i} = {2 * i}." for i in range(12)]
    scores = prm.score_steps([PROBLEM], [steps])[0]
    assert math.isnan(scores[0]) and math.isfinite(scores[-1])
    full = load_prm(step_tag_dir, device="cpu").score_steps([PROBLEM], [steps])[0]
    assert len(scores) == len(full) == 12
    slow = load_prm(step_tag_dir, device="cpu", batch_size=1, timeout_s=1e-9)
    with pytest.raises(PRMTimeout):
        slow.score_steps([PROBLEM, PROBLEM], [STEPS, STEPS])


def test_aggregation_rules_against_hand_numbers():
    scores = [0.9, 0.5, 0.8]
    assert aggregate(scores, "min") == 0.5
    assert aggregate(scores, "last") == 0.8
    assert aggregate(scores, "mean") == pytest.approx(2.2 / 3)
    assert aggregate(scores, "product") == pytest.approx(0.36)
    assert aggregate([math.nan, 0.3], "min") == 0.3  # a step cut off by the window is left out
    with pytest.raises(ConfigError, match="rule='max'"):
        aggregate(scores, "max")
    with pytest.raises(ValueError):
        aggregate([], "last")


def test_step_auc_and_first_error_accuracy_against_hand_numbers():
    # positives 0.8, 0.6, 0.3; negatives 0.6, 0.2: pairs won 1 + 1, 0.5 + 1, 1 + 0 -> 4.5 / 6
    assert step_auc([0.8, 0.6, 0.3, 0.6, 0.2], [1, 1, 1, 0, 0]) == pytest.approx(0.75)
    assert step_auc([0.1, 0.9], [1.0, 0.0]) == 0.0
    assert step_auc([0.3, 0.7], [0.2, 0.9]) == 1.0  # soft labels: 0.5 or more is right
    assert math.isnan(step_auc([0.3, 0.7], [1, 1]))
    assert first_error_step([0.9, 0.49, 0.1]) == 1 and first_error_step([0.5, 0.6]) == -1
    got = first_error_accuracy([1, -1, 0, 2], [1, 2, -1, -1])
    assert got == {"error_accuracy": 0.5, "correct_accuracy": 0.0, "f1": 0.0, "accuracy": 0.25}


def test_labelled_steps_are_checked_line_by_line(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text(json.dumps({"problem": "p", "steps": ["a", "b"], "labels": [1, 0.25]}) + "\n")
    assert load_labelled_steps(path) == [LabelledSolution("p", ("a", "b"), (1.0, 0.25))]
    path.write_text(json.dumps({"problem": "p", "steps": ["a", "b"], "labels": [1]}) + "\n")
    with pytest.raises(DatasetError, match="steps.jsonl:1: 'labels' must be a list with one label per step"):
        load_labelled_steps(path)
    path.write_text(json.dumps({"problem": "p", "steps": ["a"], "labels": [2]}) + "\n")
    with pytest.raises(DatasetError, match="label 2 is not a number in"):
        load_labelled_steps(path)


def test_public_labelled_sets_are_read_as_they_ship(tmp_path):
    """Training and evaluation read ProcessBench's first-error index, RLHFlow's +/- turns and
    Math-Shepherd's tags directly, mixed in one file, with no conversion step."""
    rows = [
        {"id": "gsm8k-0", "generator": "x", "problem": "p1", "steps": ["a", "b", "c"], "final_answer_correct": False, "label": 1},
        {"id": "gsm8k-1", "problem": "p2", "steps": ["a", "b"], "final_answer_correct": True, "label": -1},
        {"conversations": [{"role": "user", "content": "What is 1+2? Step 1: 1+2=4"}, {"role": "assistant", "content": "-"},
                           {"role": "user", "content": "Step 2: The answer is: 4"}, {"role": "assistant", "content": "-"}]},
        {"input": "What is 2+2? Step 1: 2+2=4 ки\nStep 2: The answer is: 4 ки", "label": "What is 2+2? Step 1: 2+2=4 +\nStep 2: The answer is: 4 +"},
    ]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(rows))
    assert load_labelled_steps(path) == [
        LabelledSolution("p1", ("a", "b", "c"), (1.0, 0.0, 0.0)),
        LabelledSolution("p2", ("a", "b"), (1.0, 1.0)),
        LabelledSolution("What is 1+2?", ("Step 1: 1+2=4", "Step 2: The answer is: 4"), (0.0, 0.0)),
        LabelledSolution("What is 2+2?", ("Step 1: 2+2=4", "Step 2: The answer is: 4"), (1.0, 1.0)),
    ]
    assert [first_error_step(list(r.labels)) for r in load_labelled_steps(path)[:2]] == [1, -1]  # ProcessBench's own label back
    path.write_text(json.dumps({"problem": "p", "steps": ["a"], "label": 3}) + "\n")
    with pytest.raises(DatasetError, match="mixed.json:1: 'label' 3 is not the index of a step"):
        load_labelled_steps(path)
    path.write_text(json.dumps({"prompt": "p"}) + "\n")
    with pytest.raises(DatasetError, match="unknown step-label format"):
        load_labelled_steps(path)


class _Fixed:
    """A scorer with set answers (the evaluation arithmetic, apart from any model)."""

    def __init__(self, table):
        self.table = table

    def score_steps(self, problems, steps):
        return [list(self.table[p]) for p in problems]


def test_evaluate_prm_measures_the_scores_it_gets():
    rows = [LabelledSolution("a", ("x", "y"), (1, 0)), LabelledSolution("b", ("x", "y"), (1, 1))]
    result = evaluate_prm(_Fixed({"a": [0.9, 0.2], "b": [0.8, 0.4]}), rows)
    assert result.step_auc == pytest.approx(1.0) and result.num_steps == 4
    assert (result.error_accuracy, result.correct_accuracy, result.first_error_accuracy) == (1.0, 0.0, 0.5)
    assert result.num_pairs == 0 and result.pairwise_accuracy != result.pairwise_accuracy  # no problem has both


def test_pairwise_accuracy_compares_solutions_of_one_problem_only():
    # problem "p": right solutions r1 (lowest 0.6), r2 (0.3); wrong w1 (0.4). Problem "q" has no right one.
    rows = [LabelledSolution("p", ("a", "b"), (1, 1)), LabelledSolution("p", ("c",), (1,)),
            LabelledSolution("p", ("d", "e"), (1, 0)), LabelledSolution("q", ("f",), (0,))]
    table = [[0.9, 0.6], [0.3], [0.4, 0.45], [0.99]]
    result = evaluate_prm(_ByRow(table), rows)
    assert (result.pairwise_accuracy, result.num_pairs) == (0.5, 2)  # r1 > w1, r2 < w1
    assert evaluate_prm(_ByRow([[0.9, 0.6], [0.4], [0.4, 0.45], [0.0]]), rows).pairwise_accuracy == 0.75  # a tie: half
    # a nan (a step outside the PRM's window) is left out of the lowest score
    assert evaluate_prm(_ByRow([[0.9, float("nan")], [0.5], [0.4, 0.45], [0.0]]), rows).pairwise_accuracy == 1.0


class _ByRow:
    def __init__(self, table):
        self.table, self.at = table, 0

    def score_steps(self, problems, steps):
        out = self.table[self.at : self.at + len(problems)]
        self.at += len(problems)
        return [list(x) for x in out]


def test_a_prm_directory_is_mathstep_s_process_reward(step_tag_dir):
    env = gym.make("MathStep-v0", process_reward=str(step_tag_dir))
    env.reset(seed=0)
    _, reward, _, _, info = env.step("First I add the two numbers.")
    expected = load_prm(step_tag_dir, device="cpu").score_steps([env.unwrapped.task.metadata["question"]],
                                                                  [["First I add the two numbers."]])[0][0]
    # the default weight, process_cap * outcome_weight / max_steps: the step's probability, scaled, never capped
    assert reward == pytest.approx(expected * 0.5 / 8, abs=1e-6) and info["status"] == Status.IN_PROGRESS
    reward_fn = env.unwrapped.process_reward
    assert isinstance(reward_fn, PRMProcessReward) and reward_fn.rule == "last"
    again = pickle.loads(pickle.dumps(reward_fn))  # a subprocess vector env loads its own copy from the path
    assert again("p", ["a step"]) == pytest.approx(reward_fn("p", ["a step"]), abs=1e-6)
    env.close()


class _Broken:
    def score_steps(self, problems, steps):
        raise PRMError("CUDA out of memory")


def test_a_failing_prm_is_an_infrastructure_status_never_a_reward():
    env = gym.make("MathStep-v0", process_reward=PRMProcessReward(_Broken(), "min"))
    env.reset(seed=0)
    _, reward, _, _, info = env.step("First I add the two numbers.")
    assert reward == 0.0 and info["status"] == Status.ERROR and "CUDA out of memory" in info["process_reward_error"]
    assert Status(info["status"]).is_infra_failure


def test_prm_training_says_when_held_out_problems_are_also_trained_on(step_tag_dir, tmp_path, capsys):
    from mathgym.algos.prm import PRMConfig, PRMTrainer

    data = _labelled(tmp_path / "train.jsonl", range(6))  # problems (i % 7 + 1) + (i % 5 + 2) of seeds 0..5
    options = dict(model=str(step_tag_dir), data=str(data), steps=1, save_every=0, progress=False, device="cpu")
    PRMTrainer(PRMConfig(eval_data=str(_labelled(tmp_path / "apart.jsonl", [30, 31])), run_dir=str(tmp_path / "a"), **options))
    assert "also in" not in capsys.readouterr().out  # seeds 30, 31: 3 + 2 and 4 + 3, not trained on
    PRMTrainer(PRMConfig(eval_data=str(_labelled(tmp_path / "seen.jsonl", [1, 30])), run_dir=str(tmp_path / "b"), **options))
    assert f"1 of the 2 held-out problems in {tmp_path / 'seen.jsonl'} are also in {data}" in capsys.readouterr().out


def test_prm_training_says_n_a_where_held_out_steps_leave_the_auc_undefined(step_tag_dir, tmp_path, capsys):
    from mathgym.algos.prm import PRMConfig, PRMTrainer

    held_out = _labelled(tmp_path / "right.jsonl", [30, 33])  # seeds divisible by 3: every step right
    config = PRMConfig(model=str(step_tag_dir), data=str(_labelled(tmp_path / "train.jsonl", range(6))), eval_data=str(held_out),
                       steps=1, save_every=0, log_samples=0, progress=False, device="cpu", run_dir=str(tmp_path / "run"))
    PRMTrainer(config).train()
    out = capsys.readouterr().out
    assert "step AUC before -> after: n/a (every held-out step has the same label) -> n/a" in out and "nan" not in out


def test_a_trained_prm_is_saved_loaded_and_scores_held_out_steps_better(step_tag_dir, tmp_path):
    from mathgym.algos.prm import PRMConfig, PRMTrainer

    data, held_out = _labelled(tmp_path / "train.jsonl", range(24)), _labelled(tmp_path / "held.jsonl", range(100, 110))
    config = PRMConfig(
        model=str(step_tag_dir), data=str(data), eval_data=str(held_out), steps=10, batch_size=8, learning_rate=1e-2,
        save_every=0, log_samples=0, progress=False, device="cpu", run_dir=str(tmp_path / "run"),
    )
    result = PRMTrainer(config).train()
    report = json.loads((result.run_dir / "prm_eval.json").read_text())
    assert report["before"]["step_auc"] < 0.8 and report["after"]["step_auc"] > 0.95, report
    assert report["after"]["first_error_accuracy"] > report["before"]["first_error_accuracy"]
    prm = load_prm(result.final_model, device="cpu")  # the saved directory, as a user loads it
    assert prm.settings.form == "step_tag" and json.loads((result.final_model / PRM_SETTINGS_FILE).read_text())["rule"] == "last"
    rows = load_labelled_steps(held_out)
    assert evaluate_prm(prm, rows).step_auc == pytest.approx(report["after"]["step_auc"])
    scores = prm.score_steps([rows[0].problem], [list(rows[0].steps)])[0]
    assert rows[0].labels == (1.0, 0.0, 1.0) and scores[1] < min(scores[0], scores[2])


@pytest.mark.heavy
def test_prm_training_resumes_where_it_stopped(step_tag_dir, tmp_path):
    from mathgym.algos.prm import PRMConfig, PRMTrainer

    data = _labelled(tmp_path / "train.jsonl", range(8))
    options = dict(model=str(step_tag_dir), data=str(data), batch_size=4, save_every=2, log_samples=0, progress=False,
                   device="cpu", run_dir=str(tmp_path / "run"), lora_r=4)
    PRMTrainer(PRMConfig(steps=2, **options)).train()
    again = PRMTrainer(PRMConfig(steps=3, **options))
    assert again.resume() and again.step == 2
    assert load_prm(again.train().final_model, device="cpu").settings.form == "step_tag"  # the LoRA adapter merged in


def test_the_step_loss_against_hand_numbers_and_the_data_option_is_required():
    from mathgym.algos.prm import PRMConfig, step_bce_loss

    # BCE(sigmoid(0), 1) = ln 2; BCE(sigmoid(ln 3) = 0.75, 0) = ln 4; the masked third position does not count
    margins, labels, mask = torch.tensor([[0.0, math.log(3.0), 5.0]]), torch.tensor([[1.0, 0.0, 0.0]]), torch.tensor([[1.0, 1.0, 0.0]])
    loss, stats = step_bce_loss(margins, labels, mask)
    assert float(loss) == pytest.approx(1.5 * math.log(2.0), abs=1e-6) and stats["step_accuracy"] == 0.0
    _, stats = step_bce_loss(torch.tensor([[2.0, -1.0]]), torch.tensor([[0.9, 0.2]]), torch.ones(1, 2))
    assert stats["step_accuracy"] == 1.0
    with pytest.raises(ConfigError, match="data is empty"):
        PRMConfig().validate()
    with pytest.raises(ConfigError, match="not a policy to play env tasks.*--eval-data"):
        PRMConfig(data="x.jsonl", eval_tasks=10).validate()


def test_the_envs_of_a_vector_env_share_one_loaded_prm(step_tag_dir):
    envs = gym.make_vec("MathStep-v0", num_envs=3, vectorization_mode="sync", process_reward=str(step_tag_dir))
    models = {id(env.unwrapped.process_reward.prm) for env in envs.envs}
    assert len(models) == 1
    envs.reset(seed=0)
    _, rewards, _, _, infos = envs.step(["First I add.", "I add the numbers.", "Adding gives the sum."])
    assert all(0.0 < r <= 0.5 for r in rewards) and list(infos["status"]) == ["in_progress"] * 3
    envs.close()


def test_the_step_head_margin_is_the_two_label_cross_entropy():
    from mathgym.algos.prm import step_bce_loss, step_head_margins

    logits = torch.tensor([[[0.3, -1.2], [2.0, 0.5], [0.0, 0.0]]])  # (B=1, T=3, 2)
    labels, mask = torch.tensor([[1.0, 0.25, 0.0]]), torch.tensor([[1.0, 1.0, 0.0]])
    loss, _ = step_bce_loss(step_head_margins(logits), labels, mask)
    # by hand: -(y log softmax[1] + (1 - y) log softmax[0]) at the two masked positions, their mean
    logp = torch.log_softmax(logits[0, :2], dim=-1)
    expected = -(1.0 * logp[0, 1] + 0.25 * logp[1, 1] + 0.75 * logp[1, 0]) / 2
    assert float(loss) == pytest.approx(float(expected), abs=1e-6)
    assert float(step_head_margins(logits, correct_label=0)[0, 0]) == pytest.approx(1.5)


def test_a_step_head_prm_is_trained_saved_and_loaded_with_the_trainer_s_scores(step_tag_dir, tmp_path):
    from mathgym.algos.prm import PRMConfig, PRMTrainer

    data, held_out = _labelled(tmp_path / "train.jsonl", range(24)), _labelled(tmp_path / "held.jsonl", range(100, 110))
    config = PRMConfig(
        model=str(step_tag_dir), form="step_head", data=str(data), eval_data=str(held_out), steps=10, batch_size=8,
        learning_rate=1e-2, save_every=0, log_samples=0, progress=False, device="cpu", run_dir=str(tmp_path / "run"),
    )
    trainer = PRMTrainer(config)
    assert type(trainer.policy.model).__name__ == "Qwen2ForTokenClassification" and trainer.policy.model.config.num_labels == 2
    assert len(trainer.policy.tokenizer.encode("<extra_0>", add_special_tokens=False)) == 1  # the separator became one token
    result = trainer.train()
    losses = [json.loads(line)["loss/prm"] for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()
              if "loss/prm" in line]
    assert len(losses) == 10 and sum(losses[-3:]) < 0.75 * sum(losses[:3]), losses
    report = json.loads((result.run_dir / "prm_eval.json").read_text())
    assert report["before"]["step_auc"] < 0.8 and report["after"]["step_auc"] > 0.9, report
    assert report["after"]["first_error_accuracy"] > report["before"]["first_error_accuracy"]

    settings = json.loads((result.final_model / PRM_SETTINGS_FILE).read_text())
    assert settings["form"] == "step_head" and settings["separator"] == "<extra_0>" and "good_token" not in settings
    prm = load_prm(result.final_model, device="cpu")  # the saved directory, as a user loads it
    assert prm.settings.form == "step_head" and type(prm.model).__name__ == "Qwen2ForTokenClassification"
    rows = load_labelled_steps(held_out)
    problems, steps = [r.problem for r in rows], [list(r.steps) for r in rows]
    assert prm.score_steps(problems, steps) == [pytest.approx(s, abs=1e-5) for s in trainer.algorithm.scorer.score_steps(problems, steps)]
    assert evaluate_prm(prm, rows).step_auc == pytest.approx(report["after"]["step_auc"])


def test_a_step_head_prm_trains_under_lora_resumes_and_saves_its_head_merged(step_tag_dir, tmp_path):
    from mathgym.algos.prm import PRMConfig, PRMTrainer

    data = _labelled(tmp_path / "train.jsonl", range(8))
    options = dict(model=str(step_tag_dir), form="step_head", data=str(data), batch_size=4, save_every=2, log_samples=0,
                   progress=False, device="cpu", run_dir=str(tmp_path / "run"), lora_r=4, learning_rate=1e-2)
    first = PRMTrainer(PRMConfig(steps=2, **options))
    trained = {n for n, p in first.policy.model.named_parameters() if p.requires_grad}
    assert any("lora_" in n for n in trained) and any(".score." in n for n in trained)  # the new head trains in full
    assert not any("embed_tokens" in n for n in trained)
    first.train()
    again = PRMTrainer(PRMConfig(steps=3, **options))
    assert again.resume() and again.step == 2
    final = again.train().final_model
    assert not (final / "adapter_config.json").exists()  # the adapter merged into the weights
    prm = load_prm(final, device="cpu")
    assert prm.settings.form == "step_head"
    rows = load_labelled_steps(data)
    problems, steps = [r.problem for r in rows], [list(r.steps) for r in rows]
    assert prm.score_steps(problems, steps) == [pytest.approx(s, abs=1e-5) for s in again.algorithm.scorer.score_steps(problems, steps)]


def test_the_collector_scores_a_turn_s_steps_in_one_prm_batch_with_the_rewards_of_one_by_one(step_tag_dir, monkeypatch):
    from mathgym.agents.policy import LLMPolicy, SamplingParams
    from mathgym.agents.prm_model import PRM
    from mathgym.algos.rollout import RolloutCollector, RolloutSettings

    policy = LLMPolicy.from_pretrained(str(step_tag_dir), device="cpu")
    calls = record_calls(monkeypatch, PRM, "score_steps")

    def collect(ahead: bool):
        settings = RolloutSettings(group_size=3, sampling=SamplingParams(max_new_tokens=8), score_ahead=ahead)
        env_kwargs = {"process_reward": str(step_tag_dir), "max_steps": 3}
        collector = RolloutCollector("MathStep-v0", env_kwargs, policy, num_tasks=2, settings=settings)
        try:
            calls.clear()
            return collector.collect_episodes([5, 6], sampling_seed=1), list(calls), collector.scored_ahead
        finally:
            collector.close()

    plain, plain_calls, _ = collect(False)
    together, together_calls, scored = collect(True)
    turns = max(len(e.step_rewards) for e in plain)
    assert turns > 1 and all(n == 1 for n in plain_calls) and len(plain_calls) >= 6
    assert len(together_calls) == turns and scored == sum(together_calls) and max(together_calls) == 6
    assert any(r > 0 for e in plain for r in e.step_rewards)
    for a, b in zip(together, plain):
        assert a.token_ids == b.token_ids and a.status == b.status
        assert a.step_rewards == pytest.approx(b.step_rewards, abs=1e-6)
