"""Process reward model training (``mathgym train --algo prm --data FILE``): a model learns to
score each step of a solution, in either PRM form (:mod:`mathgym.agents.prm_model`):

- ``--form step_tag`` (the default): the causal LM itself is the PRM. Every step ends with
  ``step_tag``, and the model's logits there, ``good_token`` against ``bad_token``, give the step's
  probability of being right, ``sigmoid(logit(good) - logit(bad))``.
- ``--form step_head`` (Qwen2.5-Math-PRM's form): ``--model`` is loaded as a token classifier with a
  new two-label head (label 1: right); the steps are joined by ``separator`` (added to the tokenizer
  as one special token when it is not one already), and the head's softmax at each separator gives
  the step's probability, ``sigmoid(logit(1) - logit(0))``.

Both train the same thing: binary cross-entropy of that probability against the step's label (hard
0/1 or soft in ``[0, 1]``, e.g. a Monte Carlo estimate), averaged over the steps of the batch
(:func:`step_bce_loss`; for two labels it is the cross-entropy of the head's softmax against
``(1 - label, label)``). Full fine-tuning or LoRA (``--lora-r``; under ``step_head`` the new head
trains in full beside the adapter); runs checkpoint and resume like every trainer.

The run's ``final/`` is a PRM directory: the model (a LoRA adapter merged into it), its tokenizer
and ``mathgym_prm.json``, loadable by :func:`~mathgym.agents.prm_model.load_prm` and usable as
MathStep-v0's ``process_reward``. With ``--eval-data`` the held-out steps are measured before and
after (:mod:`mathgym.algos.prm_eval`: step AUC, first-error accuracy), into ``prm_eval.json``::

    mathgym train --algo prm --data labelled.jsonl --eval-data held_out.jsonl --model Qwen/Qwen2.5-0.5B --lora-r 16
    mathgym train --algo prm --form step_head --data labelled.jsonl --model Qwen/Qwen2.5-Math-1.5B
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from mathgym.agents.policy import LLMPolicy, LoraSettings, apply_lora, load_tokenizer, pick_device, pick_precision
from mathgym.agents.prm_model import PRM, encode_steps, load_prm, step_tag_margins
from mathgym.algos.algorithm import Algorithm, RunParts
from mathgym.algos.configs import PRMConfig
from mathgym.algos.prm_eval import PRMEvalResult, evaluate_prm, load_labelled_steps
from mathgym.algos.sources import BatchSource
from mathgym.algos.trainer import TrainResult, Trainer, pretrained_path
from mathgym.algos.update import OptimizerStep, Plan
from mathgym.rewards.prm import PRMSettings, write_prm_settings

__all__ = [
    "PRMConfig", "PRMTrainer", "ProcessRewardModelling", "StepBatch", "StepLabels", "step_bce_loss", "step_head_margins",
    "token_classifier_policy",
]


def step_head_margins(logits: torch.Tensor, correct_label: int = 1) -> torch.Tensor:
    """``(B, T)`` ``logit(correct) - logit(other)`` of a two-label head's ``(B, T, 2)`` logits.

    Its sigmoid is the head's softmax of ``correct_label``, so :func:`step_bce_loss` of these margins is
    the two-label cross-entropy against ``(1 - label, label)``.

    Example:
        >>> step_head_margins(torch.tensor([[[0.5, 2.0]]]))
        tensor([[1.5000]])
    """
    return logits[..., correct_label].float() - logits[..., 1 - correct_label].float()


def step_bce_loss(margins: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """Binary cross-entropy of ``sigmoid(margins)`` against ``labels`` at the masked positions (their mean).

    Args:
        margins: ``(B, T)`` ``logit(good) - logit(bad)`` (:func:`~mathgym.agents.prm_model.step_tag_margins`).
        labels: ``(B, T)`` each step's label in ``[0, 1]`` at its tag position.
        mask: ``(B, T)`` 1 at the step tag positions.

    Returns:
        The loss and ``step_accuracy`` (the share of steps whose score is on the label's side of 0.5).

    Example:
        >>> loss, _ = step_bce_loss(torch.tensor([[0.0, 1.0986]]), torch.tensor([[1.0, 0.0]]), torch.ones(1, 2))
        >>> round(float(loss), 4)  # (ln 2 + ln 4) / 2
        1.0397
    """
    bce = F.binary_cross_entropy_with_logits(margins.float(), labels.float(), reduction="none")
    count = mask.sum().clamp(min=1.0)
    right = ((margins > 0) == (labels >= 0.5)).float()
    return (bce * mask).sum() / count, {"step_accuracy": float((right * mask).sum() / count)}


#: Why a first-error accuracy is undefined: no held-out solution had steps to judge.
NO_SOLUTIONS = "no held-out solution with steps to judge"


def _shown(value: float, undefined: str = "every held-out step has the same label") -> str:
    """A held-out figure as printed: three decimals, or ``n/a`` and why where it is undefined.

    Example:
        >>> _shown(0.97712), _shown(float("nan"))
        ('0.977', 'n/a (every held-out step has the same label)')
    """
    return f"n/a ({undefined})" if math.isnan(value) else f"{value:.3f}"


class StepBatch(NamedTuple):
    """Labelled solutions as tensors: ``(B, T)`` tokens, attention mask, step positions and labels there."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    step_mask: torch.Tensor
    labels: torch.Tensor

    def select(self, index: torch.Tensor) -> StepBatch:
        return StepBatch(*(t[index] for t in self))

    def to(self, device: torch.device | str) -> StepBatch:
        return StepBatch(*(t.to(device) for t in self))


class StepLabels(BatchSource):
    """A PRM's batches: ``batch_size`` labelled solutions of ``data`` a step, in the order the seed
    draws, encoded as the PRM ``scorer`` reads them (a pure function of the step: resumable)."""

    def __init__(self, config: PRMConfig, scorer: PRM):
        super().__init__()
        self.config, self.pad_id = config, scorer.pad_id
        self.rows, self.problems = [], set()
        for row in load_labelled_steps(config.data):
            inputs = encode_steps(scorer.tokenizer, scorer.settings, row.problem, row.steps)
            kept = [(p, label) for p, label in zip(inputs.positions, row.labels) if p >= 0]  # steps cut off: no label
            self.rows.append((inputs.input_ids, kept))
            self.problems.add(row.problem)
        self.order = torch.randperm(len(self.rows), generator=torch.Generator().manual_seed(config.seed)).tolist()

    def make_batch(self, step: int) -> tuple[StepBatch, dict[str, float]]:
        """Rows ``step * batch_size ...`` of the shuffled data."""
        n = self.config.batch_size
        picks = [self.rows[self.order[(step * n + i) % len(self.order)]] for i in range(n)]
        width = max(len(ids) for ids, _ in picks)
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attention, step_mask, labels = (torch.zeros((n, width)) for _ in range(3))
        for r, (ids, kept) in enumerate(picks):
            input_ids[r, : len(ids)] = torch.tensor(ids)
            attention[r, : len(ids)] = 1.0
            for position, label in kept:
                step_mask[r, position], labels[r, position] = 1.0, label
        return StepBatch(input_ids, attention.long(), step_mask, labels), {}


class ProcessRewardModelling(Algorithm):
    """A PRM's plan (one optimizer step over the batch) and its loss (the steps' BCE); the held-out measure."""

    name = "prm"
    scores_learner = False  # the batch is labelled steps, not the policy's samples
    config: PRMConfig

    def __init__(self, parts: RunParts):
        super().__init__(parts)
        cfg = self.config
        self.settings = PRMSettings(
            cfg.form, step_tag=cfg.step_tag, good_token=cfg.good_token, bad_token=cfg.bad_token, separator=cfg.separator,
            rule=cfg.rule, max_length=cfg.max_length,
        )
        # The live model as a PRM: the same encoding and scoring as the saved directory's (checks the tokens too).
        self.scorer = PRM(self.policy.model, self.policy.tokenizer, self.settings, batch_size=max(cfg.batch_size, 8), timeout_s=0)
        self.held_out = load_labelled_steps(cfg.eval_data) if cfg.eval_data else []
        self.prm_eval_before: PRMEvalResult | None = None

    def plan(self, batch: StepBatch) -> Plan:  # type: ignore[override]
        """One optimizer step over the batch, normalised by its labelled steps."""
        return Plan([OptimizerStep(torch.arange(len(batch.input_ids)), max(float(batch.step_mask.sum()), 1.0))])

    def loss(  # type: ignore[override]
        self, batch: StepBatch, items: torch.Tensor, step: OptimizerStep
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The BCE of the micro-batch's steps, as their share of the step's labelled steps."""
        mb = batch.select(items)
        if self.settings.form == "step_tag":
            logits = self.policy.model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False).logits
            margins = step_tag_margins(logits, self.scorer.good_id, self.scorer.bad_id)  # (B, T) from (B, T, V)
        else:
            logits = self.policy.model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits
            margins = step_head_margins(logits, self.settings.correct_label)  # (B, T) from (B, T, 2)
        loss, stats = step_bce_loss(margins, mb.labels, mb.step_mask)
        share = float(mb.step_mask.sum()) / step.context
        return loss * share, {"loss/prm": float(loss.detach()) * share, "loss/step_accuracy": stats["step_accuracy"] * share}

    def evaluate_prm(self, prm: Any | None = None) -> PRMEvalResult:
        """Step AUC and first-error accuracy on ``eval_data`` (default: the model being trained)."""
        with torch.no_grad(), self.policy.autocast():
            return evaluate_prm(prm or self.scorer, self.held_out, self.scorer.batch_size)

    def extra_state(self) -> dict[str, Any]:
        return {"prm_eval_before": None if self.prm_eval_before is None else asdict(self.prm_eval_before)}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        before = state.get("prm_eval_before")
        self.prm_eval_before = PRMEvalResult(**before) if before else None


class PRMTrainer(Trainer):
    """PRM training in the shared step (see the module docstring and :class:`PRMConfig`): :class:`StepLabels`,
    :class:`ProcessRewardModelling`."""

    algo_name = "prm"
    algorithm_class = ProcessRewardModelling
    progress_metric = "loss/prm"
    config: PRMConfig

    def build_policy(self, model_path: str | Path | None = None) -> LLMPolicy:
        """``step_tag``: the causal LM as every trainer loads it; ``step_head``: a token classifier with a new head."""
        if self.config.form == "step_tag":
            return super().build_policy(model_path)
        with self.dist.main_first():
            path = str(model_path) if model_path is not None else pretrained_path(self.config)
        return token_classifier_policy(path, self.config, self.dist.device(self.config.device))

    def build_source(self) -> StepLabels:
        cfg = self.config
        source = StepLabels(cfg, self.algorithm.scorer)
        held_problems = {row.problem for row in self.algorithm.held_out}
        if shared := held_problems & source.problems:  # small task spaces repeat problems across seeds
            print(f"mathgym: {len(shared)} of the {len(held_problems)} held-out problems in {cfg.eval_data} "
                  f"are also in {cfg.data}: the held-out measures then include what the PRM memorised; leave their "
                  "solutions out of the training data to measure it on unseen problems")
        return source

    def train(self) -> TrainResult:
        """Train; with ``eval_data``, measure the held-out steps before, and the saved PRM after."""
        algorithm = self.algorithm
        self.claim_run_dir()  # before the held-out measure is logged into the directory
        if algorithm.held_out and algorithm.prm_eval_before is None:
            algorithm.prm_eval_before = algorithm.evaluate_prm()
            self.logger.log(self.step, algorithm.prm_eval_before.as_metrics())
            print(f"held-out step AUC before training: {_shown(algorithm.prm_eval_before.step_auc)}")
        result = super().train()
        if algorithm.held_out and result.final_model is not None:
            after = algorithm.evaluate_prm(load_prm(result.final_model, device=str(self.policy.device)))
            before = algorithm.prm_eval_before
            (self.run_dir / "prm_eval.json").write_text(json.dumps({"before": asdict(before), "after": asdict(after)}, indent=2))
            print(f"held-out step AUC before -> after: {_shown(before.step_auc)} -> {_shown(after.step_auc)}; "
                  f"first-error accuracy {_shown(before.first_error_accuracy, NO_SOLUTIONS)} -> {_shown(after.first_error_accuracy, NO_SOLUTIONS)}"
                  + (f"; right-over-wrong on one problem {_shown(before.pairwise_accuracy)} -> {_shown(after.pairwise_accuracy)} "
                     f"({after.num_pairs} pairs)" if after.num_pairs else ""))
        return result

    def save_model(self, path: str | Path) -> Path:
        """Save a PRM directory: the model (LoRA merged in), its tokenizer and ``mathgym_prm.json``."""
        model = self.policy.model
        if self.policy.has_lora:  # the end of training: the adapter is folded into the weights for good
            model = self.policy.model = self.algorithm.scorer.model = model.merge_and_unload()
        model.save_pretrained(str(path))
        self.policy.tokenizer.save_pretrained(str(path))
        write_prm_settings(path, self.algorithm.settings)
        return Path(path)


def token_classifier_policy(path: str, cfg: PRMConfig, device: str) -> LLMPolicy:
    """The model at ``path`` as a two-label token classifier (its head new), holding ``cfg.separator`` as one token.

    Only the trainer's parts of :class:`LLMPolicy` are used (device, precision, LoRA, saving); it does not generate.
    """
    from transformers import AutoModelForTokenClassification

    dev = pick_device(device)
    precision = pick_precision(cfg.dtype, dev)
    tokenizer = load_tokenizer(path)
    model = AutoModelForTokenClassification.from_pretrained(
        path, num_labels=2, id2label={0: "wrong", 1: "right"}, label2id={"wrong": 0, "right": 1}, dtype=precision.weights
    )
    if len(tokenizer.encode(cfg.separator, add_special_tokens=False)) != 1:
        tokenizer.add_special_tokens({"additional_special_tokens": [cfg.separator]}, replace_extra_special_tokens=False)
        model.resize_token_embeddings(len(tokenizer))
    if cfg.lora_r > 0:
        targets = cfg.lora_target_modules
        modules = targets if targets == "all-linear" else tuple(targets.split(","))
        model = apply_lora(model, LoraSettings(r=cfg.lora_r, alpha=cfg.lora_alpha, target_modules=modules), task_type="TOKEN_CLS")
    model.to(dev)
    policy = LLMPolicy(model=model, tokenizer=tokenizer, device=dev, name_or_path=path, autocast_dtype=precision.autocast)
    if cfg.gradient_checkpointing:
        policy.enable_gradient_checkpointing()
    return policy
