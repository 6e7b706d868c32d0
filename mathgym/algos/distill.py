"""Off-policy knowledge distillation (``mathgym train --algo distill``): a student learns from a teacher.

The teacher writes the responses: it samples them on the prompts of any env (as a rollout, so
multi-turn envs work and their replies stay out of the loss), or on the prompts of a JSONL file;
rows of the file that already hold a response are used as they are. The student then minimises,
over the response tokens,

    (1 - w) * CE + w * D(teacher || student)

where CE is the student's negative log-likelihood of the response tokens and D one of the
divergences of :mod:`mathgym.algos.distill_losses` over the teacher's top-k tokens and the
rest of its mass. The teacher runs without gradient, once per batch, on the device of the student.

Teacher and student must share a vocabulary (checked when the trainer starts:
:func:`check_shared_vocabulary`). Every sequence is rendered with the student's chat template,
the one it will be prompted with; the teacher reads the same tokens.

JSONL rows (one object per line):

- ``{"prompt": "..."}`` or ``{"messages": [... ending with a user message]}``: the teacher samples
  ``group_size`` responses each time the row comes up;
- ``{"prompt": "...", "completion": "..."}`` (or ``"response"``), or ``{"messages": [... ending with an
  assistant message]}``: every assistant message is a target, as in SFT.

The other layouts SFT reads work too, with or without their answers (ShareGPT, Alpaca, a
question and its answer: :func:`~mathgym.algos.sft.read_chats`); a JSON list file as well.

    mathgym train --algo distill --teacher runs/grpo-MathReason-v0-.../final --model ./small-student
    mathgym train --algo distill --teacher Qwen/Qwen2.5-1.5B-Instruct --model Qwen/Qwen2.5-0.5B-Instruct --data prompts.jsonl
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from mathgym.agents.forward import logprobs_from_logits, shift_right
from mathgym.agents.policy import LLMPolicy, SamplingParams
from mathgym.agents.tiny import TINY_MODEL
from mathgym.algos.algorithm import Algorithm, RunParts
from mathgym.algos.batch import Episode, RolloutBatch
from mathgym.algos.configs import DistillConfig, TrainConfig
from mathgym.algos.distill_losses import TeacherTopK, distillation_loss, teacher_top_k, token_divergence
from mathgym.algos.sft import Chat, encode_demonstration, read_chats
from mathgym.algos.sources import BatchSource, RolloutSource
from mathgym.algos.trainer import Trainer
from mathgym.algos.update import OptimizerStep, Plan, micro_batches
from mathgym.errors import ConfigError

__all__ = ["Distill", "DistillConfig", "DistillRows", "DistillTrainer", "check_shared_vocabulary", "load_distill_rows", "load_teacher", "shared_vocab_width"]


def check_shared_vocabulary(teacher: Any, student: Any, teacher_name: str = "teacher", student_name: str = "student") -> None:
    """Raise :class:`ConfigError` unless the two tokenizers map the same strings to the same ids."""
    t, s = teacher.get_vocab(), student.get_vocab()
    if t == s:
        return
    only_teacher, only_student = sorted(set(t) - set(s)), sorted(set(s) - set(t))
    moved = sorted(tok for tok in set(t) & set(s) if t[tok] != s[tok])
    parts = [f"{len(t)} vs {len(s)} tokens"]
    for tokens, where in ((only_teacher, "only in the teacher's"), (only_student, "only in the student's"), (moved, "with other ids")):
        if tokens:
            parts.append(f"{len(tokens)} {where} (e.g. {tokens[0]!r})")
    raise ConfigError(
        f"teacher {teacher_name} and student {student_name} do not share a vocabulary ({'; '.join(parts)}). Distillation "
        "compares their next-token distributions token id by token id, so both need the same tokenizer: pick a teacher "
        "and a student of one model family (e.g. Qwen/Qwen2.5-1.5B-Instruct -> Qwen/Qwen2.5-0.5B-Instruct)."
    )


def _output_width(policy: LLMPolicy) -> int:
    return int(policy.model.get_output_embeddings().weight.shape[0])


def shared_vocab_width(teacher: LLMPolicy, student: LLMPolicy) -> int:
    """The logits' width both models are compared over: the ids they share (a model may pad its output
    layer past its vocabulary); :class:`ConfigError` when an output layer is narrower than the vocabulary."""
    width = min(_output_width(teacher), _output_width(student))
    if width < len(student.tokenizer):
        raise ConfigError(
            f"the teacher's or the student's output layer has fewer rows than the {len(student.tokenizer)} "
            "tokens of their vocabulary."
        )
    return width


def load_teacher(name: str, config: TrainConfig, student: LLMPolicy, device: str | None = None) -> LLMPolicy:
    """The frozen teacher ``name`` (a hub id, a local path, or ``tiny``: the tiny model's warm start on
    ``config.env``) on ``device`` (default: the student's), reading the student's tokens;
    :class:`ConfigError` when it cannot be loaded or does not share the student's vocabulary."""
    path = name
    if path == TINY_MODEL:
        from mathgym.algos.warm_start import prepare_model

        path = prepare_model(dataclasses.replace(config, model=TINY_MODEL))
    try:
        teacher = LLMPolicy.from_pretrained(path, device=device or str(student.device), dtype=config.dtype)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"--teacher {name}: could not be loaded: {first}") from None
    check_shared_vocabulary(teacher.tokenizer, student.tokenizer, name, config.model)
    teacher.tokenizer = student.tokenizer  # the student's chat template renders every prompt
    teacher.model.requires_grad_(False)
    teacher.model.eval()
    return teacher


def load_distill_rows(path: str | Path) -> list[Chat]:
    """Read prompt and prompt+response rows (see the module docstring) in any layout
    :func:`~mathgym.algos.sft.read_chats` reads; a chat ending with an assistant message has its
    responses, any other is a prompt for the teacher."""
    return [chat for _, chat in read_chats(path, "distillation data", prompts=True)]


class DistillRows(BatchSource):
    """Distillation's batches from JSONL rows: ``num_tasks`` rows a step (this rank's share), each a
    response as given or ``group_size`` samples of the teacher, in the student's chat format."""

    def __init__(self, rows: list[Chat], config: DistillConfig, dist: Any, policy: LLMPolicy, teacher: LLMPolicy,
                 generator: torch.Generator):
        super().__init__()
        self.rows, self.config, self.dist, self.policy, self.teacher, self.generator = rows, config, dist, policy, teacher, generator
        self.order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(config.seed)).tolist()

    def make_batch(self, step: int) -> tuple[RolloutBatch, dict[str, float]]:
        """The JSONL rows of ``step``."""
        n = self.config.num_tasks
        picks = self.dist.shard([self.order[(step * n + i) % len(self.order)] for i in range(n)])  # this rank's rows
        return RolloutBatch.from_episodes(self.row_episodes(picks), self.policy.pad_token_id), {}

    def row_episodes(self, picks: Sequence[int]) -> list[Episode]:
        """Episodes of JSONL rows: responses as given, or ``group_size`` samples of the teacher per prompt."""
        episodes = []
        for group, i in enumerate(picks):
            chat = self.rows[i]
            if chat[-1]["role"] == "assistant":
                ep = encode_demonstration(self.policy.chat, chat, "jsonl", group)
                ep.task_id, ep.status = f"row-{i}", "given"
                episodes.append(ep)
                continue
            prompt = self.policy.chat.prompt_ids(chat)
            room = max(1, min(self.config.max_new_tokens, self.config.max_episode_tokens - len(prompt)))
            params = SamplingParams(self.config.temperature, self.config.top_p, room)
            for gen in self.teacher.generate([prompt] * self.config.group_size, params, self.generator):
                ep = Episode("jsonl", f"row-{i}", group, messages=list(chat), status="teacher_sample")
                ep.extend(prompt)
                ep.extend(gen.token_ids, action_step=0, logprobs=gen.logprobs)
                ep.completions.append(self.policy.chat.action_text(gen.token_ids))
                ep.truncated_tokens = gen.finish_reason == "length"
                episodes.append(ep)
        return episodes


class Distill(Algorithm):
    """Off-policy distillation's plan (the teacher's top-k, once per batch) and loss (see the module docstring)."""

    name = "distill"
    config: DistillConfig

    def __init__(self, parts: RunParts):
        super().__init__(parts)
        self.teacher = load_teacher(self.config.teacher, self.config, self.policy)  # frozen, on the student's device
        self.vocab_width = shared_vocab_width(self.teacher, self.policy)

    def learner_rows(self, batch: RolloutBatch) -> torch.Tensor:
        """None: the responses are the teacher's, so a sampler/learner mismatch would measure the two models."""
        return torch.zeros(0, dtype=torch.long)

    # -- the update ------------------------------------------------------------------------------------

    def student_logits(self, batch: RolloutBatch) -> torch.Tensor:
        """``(B, T, V)`` logits of the student (with the caller's gradient mode), cut to the shared ids."""
        with self.policy.autocast():
            logits = self.policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False).logits
        return logits[..., : self.vocab_width]

    @torch.no_grad()
    def teacher_targets(self, batch: RolloutBatch) -> TeacherTopK:
        """The teacher's top-k at each position of ``batch`` (``(B, T - 1, k)``; position ``t`` predicts token ``t + 1``)."""
        cfg, parts = self.config, []
        for idx in micro_batches(torch.arange(len(batch)), cfg.grad_accum_steps):
            mb = batch.select(idx)
            with self.teacher.autocast():
                logits = self.teacher.model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False).logits
            parts.append(teacher_top_k(logits[:, :-1, : self.vocab_width], cfg.top_k, cfg.teacher_temperature))
        return TeacherTopK(*(torch.cat(column) for column in zip(*parts)))

    def token_divergences(self, logits: torch.Tensor, teacher: TeacherTopK) -> torch.Tensor:
        """``(B, T)`` divergence of the distribution that predicts each token (position 0: 0)."""
        cfg = self.config
        d = token_divergence(teacher, logits[:, :-1], cfg.divergence, cfg.student_temperature, cfg.jsd_beta, cfg.skew_lambda)
        return shift_right(d)

    def plan(self, batch: RolloutBatch) -> Plan:
        """One optimizer step over the batch; the teacher's top-k computed once, normalised by the batch's
        tokens (every rank's under data-parallel training, so that the ranks' gradients add up to the whole batch's)."""
        tokens = max(self.dist.sum(float(batch.loss_mask().sum())), 1.0)
        return Plan([OptimizerStep(torch.arange(len(batch)), (self.teacher_targets(batch), tokens))])

    def loss(self, batch: RolloutBatch, items: torch.Tensor, step: OptimizerStep) -> tuple[torch.Tensor, dict[str, float]]:
        """``(1 - w) CE + w D`` of the micro-batch's response tokens, as their share of the step's tokens."""
        teacher, tokens = step.context
        mb = batch.select(items)
        mask = mb.loss_mask()
        logits = self.student_logits(mb)
        logprobs, _ = logprobs_from_logits(logits, mb.input_ids, entropy_grad=False)
        divergence = self.token_divergences(logits, teacher.select(items))
        loss, stats = distillation_loss(logprobs, divergence, mask, self.config.distill_weight)
        share = float(mask.sum()) / tokens
        return loss * share, {
            "loss/distill": float(loss.detach()) * share,
            "loss/ce": float(stats.cross_entropy) * share,
            "loss/divergence": float(stats.divergence) * share,
        }

    @torch.no_grad()
    def divergence_on(self, batch: RolloutBatch) -> float:
        """Token mean of ``D(teacher || student)`` over the response tokens of ``batch`` (e.g. held-out prompts)."""
        batch = batch.to(self.policy.device)
        was_training = self.policy.model.training
        self.policy.model.eval()
        try:
            divergence = self.token_divergences(self.student_logits(batch), self.teacher_targets(batch))
        finally:
            self.policy.model.train(was_training)
        mask = batch.loss_mask()
        return float((divergence * mask).sum() / mask.sum().clamp(min=1.0))


class DistillTrainer(Trainer):
    """Off-policy distillation in the shared step (see :class:`DistillConfig` and the module docstring):
    the teacher's rollouts on the env or :class:`DistillRows`, then :class:`Distill`."""

    algo_name = "distill"
    algorithm_class = Distill
    progress_metric = "loss/divergence"
    config: DistillConfig
    data_parallel = True  # each rank distils its share of the prompts; the loss is normalised by every rank's tokens
    summed_stats = ("loss/distill", "loss/ce", "loss/divergence")

    def build_source(self) -> BatchSource:
        """The teacher writes the responses: its rollouts on the env's tasks, or the JSONL rows."""
        cfg, teacher = self.config, self.algorithm.teacher
        if cfg.data:
            return DistillRows(load_distill_rows(cfg.data), cfg, self.dist, self.policy, teacher, self.generator)
        return RolloutSource(cfg, self.dist, teacher, self.env_kwargs, ahead=bool(cfg.off_policy_steps))
