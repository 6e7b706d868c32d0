"""DPO trainer: CLI smoke runs (offline file, online pairs), precomputed reference, pairing from batches."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from mathgym import train_cli  # noqa: E402
from mathgym.agents.policy import LLMPolicy  # noqa: E402
from mathgym.algos.dpo import DPOConfig, DPOTrainer  # noqa: E402
from mathgym.algos.preferences import (  # noqa: E402
    annotate_reference_logprobs,
    best_worst_indices,
    expert_vs_corrupted_pairs,
    load_preference_jsonl,
    pairs_batch,
    save_preference_jsonl,
)
from mathgym.errors import ConfigError  # noqa: E402
from tests.trainkit import build_small_model, register_guess_env  # noqa: E402

ENV_KWARGS = {"difficulty": 0, "system_prompt": ""}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def pref_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prefs") / "train.jsonl"
    save_preference_jsonl(expert_vs_corrupted_pairs("MathReason-v0", ENV_KWARGS, 8, seed=1), path)
    return path


def records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_expert_vs_corrupted_pairs_are_scored_by_the_env():
    pairs = expert_vs_corrupted_pairs("MathReason-v0", {**ENV_KWARGS, "split": "test"}, 5, seed=3)
    assert len(pairs) == 5
    for pair in pairs:
        assert pair.chosen_reward == 1.0 and pair.rejected_reward == 0.0
        assert pair.chosen != pair.rejected and "\\boxed{" in pair.rejected
        assert pair.prompt[-1]["role"] == "user"


def test_cli_smoke_offline_with_held_out_pairs(model_path, pref_file, tmp_path):
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--algo", "dpo", "--model", str(model_path), "--preference-file", str(pref_file), "--eval-preference-file",
        str(pref_file), "--steps", "2", "--pairs-per-step", "4", "--eval-tasks", "0", "--progress", "false",
        "--run-dir", str(run), "--loss-type", "ipo", "--logprob-reduction", "mean",
    ])
    assert code == 0
    first, last = records(run)
    assert first["loss/pairs"] == 4 and first["loss/accuracy"] == 0.0  # policy == reference at step 1
    assert first["loss/dpo"] == pytest.approx((0 - 1 / (2 * 0.1)) ** 2)  # IPO at h = 0: (1 / (2 beta))^2
    for key in ("loss/chosen_reward", "loss/rejected_reward", "loss/margin", "loss/chosen_logp", "loss/rejected_logp"):
        assert key in last
    assert "eval/preference_accuracy" in last and not any(k.startswith("rollout/") for k in last)


def test_cli_smoke_online_multi_turn(model_path, tmp_path):
    env_id = register_guess_env()
    run = tmp_path / "run"
    code = train_cli.main("train", [
        "--algo", "dpo", "--env", env_id, "--env-kwargs", "{high: 3, max_turns: 2}", "--model", str(model_path),
        "--steps", "2", "--num-tasks", "3", "--group-size", "3", "--max-new-tokens", "4", "--eval-tasks", "0",
        "--progress", "false", "--run-dir", str(run), "--loss-type", "hinge",
    ])
    assert code == 0
    recs = records(run)
    assert [r["step"] for r in recs] == [1, 2]
    for rec in recs:
        assert 0 <= rec["loss/pairs"] <= 3 and "rollout/reward" in rec  # at most one pair per task
        if rec["rollout/reward"] == 0.0:  # rewards are 0/1: a group with no success has no best-vs-worst gap
            assert rec["loss/pairs"] == 0
    # seeded: at step 2 one group has a success, so a pair forms and the loss is trained on it
    assert sum(r["loss/pairs"] for r in recs) >= 1, recs


def test_precomputed_reference_matches_the_model_reference(model_path, pref_file, tmp_path):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    annotated = tmp_path / "annotated.jsonl"
    save_preference_jsonl(annotate_reference_logprobs(policy, load_preference_jsonl(pref_file)), annotated)
    common = dict(model=str(model_path), preference_file=str(annotated), steps=1, pairs_per_step=4, eval_tasks=0,
                  progress=False, seed=5)
    precomputed = DPOTrainer(DPOConfig(**common, reference="precomputed", run_dir=str(tmp_path / "a")))
    assert precomputed.algorithm.reference is None
    copy_ref = DPOTrainer(DPOConfig(**common, reference="copy", run_dir=str(tmp_path / "b")))
    batch = precomputed.source.make_batch(0)[0]
    rows = torch.arange(len(batch))
    assert torch.allclose(precomputed.algorithm.reference_logps(batch, rows), copy_ref.algorithm.reference_logps(batch, rows), atol=1e-4)
    stats = precomputed.update(batch)
    assert stats["loss/dpo"] == pytest.approx(math.log(2), abs=1e-4)  # policy == reference: -log sigmoid(0)
    with pytest.raises(ConfigError, match="ref_chosen_logp"):
        DPOTrainer(DPOConfig(**{**common, "preference_file": str(pref_file)}, reference="precomputed", run_dir=str(tmp_path / "c")))


def test_pairs_batch_groups_and_best_worst_recover_the_pairs(model_path, pref_file):
    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    pairs = load_preference_jsonl(pref_file)
    batch = pairs_batch(policy.chat, pairs, [2, 0, 5])
    chosen, rejected = best_worst_indices(batch.rewards, batch.group_ids)
    assert chosen.tolist() == [2, 0, 4] and rejected.tolist() == [3, 1, 5]  # groups in sorted order: 0, 2, 5
    assert batch.completions[0] == [pairs[2].chosen] and batch.completions[1] == [pairs[2].rejected]
    # The action mask covers exactly the completion and its EOS.
    assert int(batch.action_mask[0].sum()) == len(policy.chat.encode(pairs[2].chosen)) + 1


def test_best_worst_indices_skip_ties_and_infra_failures():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.2])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    valid = torch.tensor([True, True, True, True, True, False, True])
    chosen, rejected = best_worst_indices(rewards, groups, valid)
    assert chosen.tolist() == [0, 4] and rejected.tolist() == [1, 6]
    assert best_worst_indices(rewards, groups, valid, min_gap=0.9)[0].tolist() == [0]


@pytest.mark.parametrize("override, field", [({"beta": -1}, "beta"), ({"loss_type": "kto"}, "loss_type"),
                                             ({"reference": "precomputed"}, "precomputed"), ({"pairs_per_step": 0}, "pairs_per_step")])
def test_bad_options(override, field):
    from mathgym.options import build_config

    with pytest.raises(ConfigError, match=field):
        build_config(DPOConfig, overrides=override)


def test_expert_vs_sampled_pairs_use_the_models_own_mistakes(model_path):
    from mathgym.algos.preferences import expert_vs_sampled_pairs

    policy = LLMPolicy.from_pretrained(str(model_path), device="cpu")
    pairs = expert_vs_sampled_pairs(policy, "MathReason-v0", ENV_KWARGS, 3, seed=0, max_new_tokens=6, batch_size=4)
    assert len(pairs) == 3
    for pair in pairs:
        assert pair.chosen_reward == 1.0 and pair.rejected_reward < 1.0 and pair.chosen.endswith("}")
