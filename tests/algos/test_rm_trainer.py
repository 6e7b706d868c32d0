"""``--algo rm``: the Bradley-Terry loss, online pairs from rollouts, and a short run whose pairwise accuracy rises."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("torch")
import torch  # noqa: E402

from mathgym.algos.batch import Episode, RolloutBatch  # noqa: E402
from mathgym.algos.configs import RMConfig  # noqa: E402
from mathgym.algos.metrics import read_metrics  # noqa: E402
from mathgym.algos.preferences import load_preference_jsonl  # noqa: E402
from mathgym.algos.registry import get_algorithm  # noqa: E402
from mathgym.algos.reward_model import RMTrainer, bradley_terry_loss, online_pairs  # noqa: E402
from mathgym.errors import ConfigError, DatasetError  # noqa: E402
from tests.chat_fixtures import cached_chat_model  # noqa: E402


def test_bradley_terry_loss_by_hand():
    chosen, rejected = torch.tensor([2.0, 0.5], requires_grad=True), torch.tensor([1.0, 1.0])
    loss, stats = bradley_terry_loss(chosen, rejected, torch.tensor([0.0, 0.5]))
    # -log s(1) = 0.31326, -log s(-1) = 1.31326
    assert float(loss.detach()) == pytest.approx((0.31326 + 1.31326) / 2, abs=1e-4)
    assert float(stats.accuracy) == 0.5 and float(stats.reward_margin) == pytest.approx(0.25)
    loss.backward()
    assert (chosen.grad < 0).all()  # raising a chosen score lowers the loss
    no_margin, _ = bradley_terry_loss(chosen.detach(), rejected)
    assert float(no_margin) < float(loss.detach())


def _synthetic_pairs(path, n=16, seed=0):
    """The chosen response holds the right sum, the rejected one a wrong sum."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            f.write(json.dumps({
                "prompt": f"What is {a} + {b}?", "chosen": f"the answer is \\boxed{{{a + b}}}",
                "rejected": f"the answer is \\boxed{{{a + b + rng.randint(1, 9)}}}",
            }) + "\n")
    return path


def test_pairwise_accuracy_rises_and_the_run_resumes(tmp_path, tmp_path_factory):
    assert get_algorithm("rm")[0] is RMTrainer
    pairs = _synthetic_pairs(tmp_path / "pairs.jsonl")
    options = dict(
        model=str(cached_chat_model(tmp_path_factory, "chatml")), preference_file=str(pairs), eval_preference_file=str(pairs),
        pairs_per_step=16, learning_rate=1e-3, warmup_steps=0, device="cpu", progress=False, threads=1,
    )
    first = RMTrainer(RMConfig(steps=3, **options), run_dir=tmp_path / "run")
    assert first.policy is None  # pairs from a file: the policy (--model) only initialises the reward model, never loaded
    before = first.algorithm.evaluate_pairs(first.algorithm.eval_pairs)
    first.train()
    after_first = read_metrics(tmp_path / "run")[-1]
    # resumed from the checkpoint of step 3: the reward model is the trained one, not a fresh head
    # the evaluation interval only says when eval/ is logged: free to change on resume
    second = RMTrainer(RMConfig(steps=8, eval_pairs_every=2, **options), run_dir=tmp_path / "run")
    assert second.resume() and second.step == 3 and second.policy is None
    assert {c.name: c.verdict for c in second.resume_changes} == {"steps": "allowed", "eval_pairs_every": "allowed"}
    resumed = second.algorithm.evaluate_pairs(second.algorithm.eval_pairs)
    assert resumed["eval/reward_margin"] == pytest.approx(after_first["eval/reward_margin"], abs=1e-5)
    second.train()
    records = read_metrics(tmp_path / "run")
    final = records[-1]
    assert final["step"] == 8 and "loss/accuracy" in final
    assert [r["step"] for r in records if "eval/pairwise_accuracy" in r] == [3, 4, 6, 8]
    assert before["eval/pairwise_accuracy"] < 0.6 and final["eval/pairwise_accuracy"] >= 0.8
    assert final["eval/reward_margin"] > before["eval/reward_margin"]
    assert (tmp_path / "run" / "final" / "config.json").is_file()


def test_online_pairs_sample_with_the_policy(tmp_path, tmp_path_factory):
    """Without a preference file the policy is loaded, frozen, and samples the pairs from the env."""
    model = str(cached_chat_model(tmp_path_factory, "chatml"))
    config = RMConfig(
        model=model, env="MathReason-v0", steps=1, num_tasks=2, group_size=2, max_new_tokens=8, warmup_steps=0,
        device="cpu", progress=False, threads=1,
    )
    trainer = RMTrainer(config, run_dir=tmp_path / "run")
    assert trainer.policy is not None and not trainer.policy.trainable_parameters()
    trainer.train()
    assert "loss/pairs" in read_metrics(tmp_path / "run")[-1]


def _episode(group: int, reward: float, answer: str, status: str = "wrong") -> Episode:
    ep = Episode("MathReason-v0", f"t{group}", group, step_rewards=[reward], status=status)
    ep.extend([1, 2, 3])
    ep.extend([4, 5], action_step=0, logprobs=[0.0, 0.0])
    ep.completions.append(answer)
    ep.messages = [{"role": "user", "content": f"What is {group} + 1?"}, {"role": "assistant", "content": answer}]
    return ep


def test_online_pairs_are_best_vs_worst_without_infra_failures(tmp_path_factory):
    from mathgym.agents.reward_model import RewardModel

    rm = RewardModel.from_pretrained(str(cached_chat_model(tmp_path_factory, "chatml")), device="cpu")
    episodes = [
        _episode(0, 0.0, "\\boxed{0}"), _episode(0, 1.0, "\\boxed{1}", "correct"), _episode(0, 0.5, "\\boxed{7}"),
        _episode(1, 1.0, "\\boxed{2}", "correct"), _episode(1, 1.0, "\\boxed{2}!", "correct"),  # no gap: no pair
        _episode(2, 1.0, "\\boxed{3}", "correct"), _episode(2, 0.0, "\\boxed{9}", "error"),  # an infra failure is never paired
    ]
    pairs, stats = online_pairs(rm, RolloutBatch.from_episodes(episodes, pad_token_id=0), gap_margin=2.0)
    assert len(pairs) == 1 and stats["loss/pairs"] == 1.0 and stats["loss/groups_without_pair"] == pytest.approx(2 / 3)
    assert pairs[0].chosen == rm.encode([{"role": "user", "content": "What is 0 + 1?"}], [{"role": "assistant", "content": "\\boxed{1}"}])
    assert pairs[0].rejected == rm.encode([{"role": "user", "content": "What is 0 + 1?"}], [{"role": "assistant", "content": "\\boxed{0}"}])
    assert pairs[0].margin == 2.0


def test_margins_and_options_are_checked(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b", "margin": 1.5}) + "\n")
    assert load_preference_jsonl(path)[0].margin == 1.5
    path.write_text(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b", "margin": "big"}) + "\n")
    with pytest.raises(DatasetError, match="margin"):
        load_preference_jsonl(path)
    with pytest.raises(ConfigError, match="pairs_per_step"):
        RMConfig(pairs_per_step=0).validate()
