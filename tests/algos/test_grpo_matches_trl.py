"""mathgym's GRPO update equals TRL's on the same batch.

mathgym's trainer samples a batch and takes its step; TRL's ``GRPOTrainer`` computes its own loss
(``_compute_loss``, the function its training step calls) on the same prompts, completions and
advantages, from the same weights, and takes a step with the optimizer TRL builds. The gradient
norms and the two updates must agree to float rounding, for each loss aggregation under TRL's
name for it, over a few steps (so the optimizers' moments agree too).

The advantages handed to TRL follow the formula TRL applies to its rewards (centred per group,
divided by the group's or the batch's unbiased std plus 1e-4, or not divided): TRL computes them
while it generates, a path this test does not run.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from mathgym.algos.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from tests.trainkit import build_small_model  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import grpo_vs_trl  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
G, TASKS, MAX_NEW = 4, 4, 8


def _trl_trainer(path, model, loss_type: str, scale_rewards: str, lr: float, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer as TRLTrainer

    from mathgym.agents.policy import load_tokenizer

    # The benchmark's own TRL settings (benchmarks/grpo_vs_trl.py), with this test's sizes and loss.
    config = grpo_vs_trl.trl_config(str(tmp_path / "trl"), batch=TASKS * G, group_size=G, max_new_tokens=MAX_NEW, learning_rate=lr,
                                    steps=3, loss_type=loss_type, scale_rewards=scale_rewards)
    rows = [{"prompt": [{"role": "user", "content": "What is 1 + 1?"}]}] * (TASKS * G)
    if not callable(getattr(TRLTrainer, "_compute_loss", None)):  # a private function of TRL 1.16's: say so if it moved
        pytest.skip(f"trl {__import__('trl').__version__} has no GRPOTrainer._compute_loss to compare with")
    trainer = TRLTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions), args=config,
                         train_dataset=Dataset.from_list(rows), processing_class=load_tokenizer(str(path)))
    trainer.create_optimizer_and_scheduler(num_training_steps=3)
    trainer.current_gradient_accumulation_steps = 1  # what TRL's training loop sets before it calls the loss
    return trainer


def _trl_inputs(batch, rewards, scale_rewards: str, pad: int) -> dict:
    """TRL's loss inputs for mathgym's batch: left-padded prompts, right-padded completions."""
    prompts, completions = [], []
    for ids, mask in zip(batch.input_ids.tolist(), batch.action_mask.tolist()):
        first, last = mask.index(1), len(mask) - mask[::-1].index(1)
        prompts.append(ids[:first])
        completions.append(ids[first:last])
    width_p, width_c = max(map(len, prompts)), max(map(len, completions))
    grouped = rewards.view(-1, G)
    centred = rewards - grouped.mean(1).repeat_interleave(G)
    std = {"group": grouped.std(1).repeat_interleave(G), "batch": rewards.std().expand_as(rewards)}.get(scale_rewards)
    completion_mask = torch.tensor([[1] * len(c) + [0] * (width_c - len(c)) for c in completions])
    return {
        "prompt_ids": torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts]),
        "prompt_mask": torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) for p in prompts]),
        "completion_ids": torch.tensor([c + [pad] * (width_c - len(c)) for c in completions]),
        "completion_mask": completion_mask,
        "advantages": centred if std is None else centred / (std + 1e-4),
        "num_items_in_batch": completion_mask.sum().float(),
        "old_per_token_logps": None,
    }


@pytest.mark.parametrize(("aggregation", "loss_type", "scale_rewards"), [
    ("token_mean", "dapo", "group"), ("sequence_mean", "grpo", "batch"), ("dr_grpo", "dr_grpo", "none"),
])
def test_the_update_equals_trls_on_the_same_batch(tmp_path, aggregation, loss_type, scale_rewards):
    from transformers import AutoModelForCausalLM

    path = build_small_model(tmp_path / "model")
    config = GRPOConfig(
        model=str(path), env="MathReason-v0", env_kwargs={"difficulty": 0}, steps=3, num_tasks=TASKS, group_size=G,
        max_new_tokens=MAX_NEW, learning_rate=3e-3, lr_schedule="constant", eps_low=0.2, eps_high=0.28, beta=0.0,
        loss_aggregation=aggregation, scale_rewards=scale_rewards, dynamic_sampling=False, eval_tasks=0, save_every=0,
        progress=False, run_dir=str(tmp_path / "run"), seed=3, warm_start_steps=0,
    )
    ours = GRPOTrainer(config)
    theirs_model = AutoModelForCausalLM.from_pretrained(path)
    theirs_model.load_state_dict(ours.policy.model.state_dict())
    theirs = _trl_trainer(path, theirs_model, loss_type, scale_rewards, config.learning_rate, tmp_path)
    draws = torch.Generator().manual_seed(0)
    for step in range(3):
        batch = ours.rollouts().batch
        # An untrained model earns no reward: give the batch rewards with some spread in every group.
        batch.rewards = torch.randint(0, 3, (len(batch.rewards),), generator=draws).float() / 2
        batch.rewards[::G] = 1.0 - batch.rewards[1::G]
        inputs = _trl_inputs(copy.deepcopy(batch), batch.rewards.clone(), scale_rewards, ours.policy.pad_token_id)
        before = {k: v.clone() for k, v in ours.policy.model.state_dict().items()}
        stats = ours.learn(batch).stats
        theirs.model.train()
        theirs.optimizer.zero_grad()
        theirs._compute_loss(theirs.model, inputs).backward()
        their_norm = float(torch.nn.utils.clip_grad_norm_(theirs.model.parameters(), config.max_grad_norm))
        theirs.optimizer.step()
        # Adam's step hardly depends on the gradient's scale: the norms check that the losses agree in size too.
        assert stats["loss/grad_norm"] == pytest.approx(their_norm, rel=1e-4)
        ours_after, theirs_after = ours.policy.model.state_dict(), theirs.model.state_dict()
        moved = sum(float((ours_after[k] - before[k]).norm() ** 2) for k in before) ** 0.5
        apart = sum(float((ours_after[k] - theirs_after[k]).norm() ** 2) for k in before) ** 0.5
        assert moved > 1e-3, "the step moved the weights"
        assert apart < 1e-3 * moved, f"step {step}: the updates differ by {apart / moved:.1e} of their size"
        theirs.model.load_state_dict(ours_after)  # the next step starts both from the same weights
        ours.step += 1
