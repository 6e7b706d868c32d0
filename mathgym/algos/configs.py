"""The configs of the training runs: :class:`TrainConfig` (what every algorithm shares) and each
algorithm's options on top of it. No torch: ``mathgym train --help`` and option errors stay fast.

Each field is declared with :func:`~mathgym.options.option` (default + one help line: the
``--help`` and the docs); a field with a set of choices is typed by a ``Literal`` of
:mod:`mathgym.algos.choices` (or :mod:`mathgym.agents.choices`), checked once when the config is
built. Each trainer module re-exports its config (``from mathgym.algos.grpo import GRPOConfig``
keeps working); :mod:`mathgym.algos.registry` points ``--algo NAME`` here for the options and
loads the trainer (and torch) only when training starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathgym.agents.choices import Backend, DType, ValueModelKind
from mathgym.agents.settings import run_env_kwargs
from mathgym.agents.tiny import TINY_MODEL
from mathgym.algos.choices import (
    ADVANTAGE_INPUTS,
    DIVERGENCE_INPUTS,
    POLICY_LOSS_INPUTS,
    PREFERENCE_LOSS_INPUTS,
    AdvantageEstimator,
    AdvantageLevel,
    Curriculum,
    DPOLossType,
    DPOReference,
    Divergence,
    Executor,
    KLEstimator,
    KLMode,
    LogprobReduction,
    MismatchCorrection,
    LossAggregation,
    LRSchedule,
    PolicyLoss,
    PPOLossAggregation,
    ReferenceKind,
    ScaleRewards,
    SelfPlayGroups,
    TeacherKLEstimator,
    VectorizationMode,
)
from mathgym.errors import ConfigError
from mathgym.options import check_options, defaults_of, option, override_defaults, warn_unused_options
from mathgym.rewards.prm import AggregationRule, PRMForm


#: What the rows of each variant table read, by the option that chooses the row: an option set for
#: a row that does not read it is pointed out (:func:`~mathgym.options.warn_unused_options`).
VARIANT_INPUTS = {
    "policy_loss": POLICY_LOSS_INPUTS, "advantage": ADVANTAGE_INPUTS, "loss_type": PREFERENCE_LOSS_INPUTS,
    "divergence": DIVERGENCE_INPUTS,
}

#: The evaluation's options by default: the held-out split, on every env that has one (an env
#: without the option is evaluated without it). A key given beyond these must be one the env takes.
DEFAULT_EVAL_ENV_KWARGS: dict[str, Any] = {"split": "test"}


@dataclass
class TrainConfig:
    """Options every trainer shares (rollouts, model, optimisation, logging)."""

    env: str = option("MathReason-v0", "environment id to train on (any registered env)")
    env_kwargs: dict = option(
        help="env constructor options (YAML mapping), over those saved with the model in its mathgym.json",
        factory=dict,
    )
    eval_env_kwargs: dict = option(
        help="options merged over env_kwargs for evaluation (the held-out split); the default's keys are dropped where the env lacks them, any other unknown key is refused",
        factory=lambda: dict(DEFAULT_EVAL_ENV_KWARGS),
    )
    model: str = option(TINY_MODEL, "hub id or local path of a causal LM; 'tiny' = embedded model + SFT warm start")
    chat_template_kwargs: dict = option(
        help="variables passed to the model's chat template at every rendering (YAML mapping), e.g. {enable_thinking: false} "
        "for Qwen3, {reasoning_effort: low} for gpt-oss; over those saved with the model in its mathgym.json",
        factory=dict,
    )
    warm_start_steps: int = option(800, "SFT steps of the tiny model's warm start (0: none; ignored for other models)", at_least=0)
    warm_start_budget: float = option(
        110.0, "seconds the tiny model's warm start may take on a 2-core CPU (estimated); warm_start_steps stays the upper bound",
        above=0,
    )
    seed: int = option(0, "seed of tasks, sampling and initialisation")
    steps: int = option(60, "optimizer steps (one batch of rollouts each)", at_least=1)
    learning_rate: float = option(1e-4, "AdamW learning rate", above=0)
    lr_schedule: LRSchedule = option("constant", "learning-rate schedule after warmup; linear decays to zero at the last step")
    warmup_steps: int = option(0, "linear learning-rate warmup steps", at_least=0)
    weight_decay: float = option(0.0, "AdamW weight decay")
    fused_optimizer: bool = option(
        True, "torch's fused AdamW where every trained tensor is on one CPU or CUDA device (one kernel for all; "
        "it rounds differently from the per-tensor loop)"
    )
    max_grad_norm: float = option(1.0, "gradient clipping norm (0: off)")
    grad_accum_steps: int = option(1, "micro-batches per optimizer step (splits the batch, same update)", at_least=1)
    micro_batch_tokens: int = option(
        16384, "most padded tokens (rows x longest row) per forward/backward micro-batch: rows of like length go together "
        "(same update, less compute on padding; 0: no limit)", at_least=0,
    )
    num_tasks: int = option(16, "tasks (prompts) per batch", at_least=1)
    group_size: int = option(8, "samples per task (G)", at_least=1)
    temperature: float = option(1.0, "sampling temperature of rollouts", at_least=0)
    top_p: float = option(1.0, "nucleus sampling mass of rollouts", above=0, at_most=1)
    max_new_tokens: int = option(32, "longest completion per turn, in tokens", at_least=1)
    max_episode_tokens: int = option(1024, "token budget of a whole episode (prompt + every turn)", at_least=1)
    max_turns: int = option(0, "collector cap on turns per episode (0: the env's own budget)", at_least=0)
    agent: str = option(
        "", "module:function of an agent program run per task against the policy's OpenAI-compatible endpoint "
        "(its calls become the episodes, its answer is graded by the env; docs/agent-endpoint.md); empty: the env's own loop",
    )
    backend: Backend = option("native", "generation backend")
    off_policy_steps: int = option(
        0,
        "0: each step samples its rollouts, then updates; 1: step t+1's rollouts are sampled (in a background "
        "thread, on a copy of the weights of step t) while step t updates, so each batch is one update stale "
        "(rollout/staleness); pair with mismatch_correction to reweight it",
        at_least=0, at_most=1,
    )
    dynamic_sampling: bool = option(
        False,
        "DAPO dynamic sampling: drop groups whose rewards all agree (or whose pass rate is outside "
        "[keep_pass_rate_min, keep_pass_rate_max]) and refill the batch from further tasks",
    )
    max_extra_rounds: int = option(3, "dynamic sampling: extra generation rounds of num_tasks tasks at most per step", at_least=0)
    keep_pass_rate_min: float = option(0.0, "dynamic sampling: lowest pass rate of a group kept", at_least=0, at_most=1)
    keep_pass_rate_max: float = option(1.0, "dynamic sampling: highest pass rate of a group kept", at_least=0, at_most=1)
    curriculum: Curriculum = option(
        "none",
        "which tasks a step plays: none = the task sequence; pass_rate_band = replay tasks whose recent pass rate is in "
        "[curriculum_band_min, curriculum_band_max], hold back the others; level = move the generator level "
        "(curriculum_level_option) up/down as the pass rate leaves the band",
    )
    curriculum_band_min: float = option(0.2, "curriculum: lowest recent pass rate of the band", at_least=0, at_most=1)
    curriculum_band_max: float = option(0.8, "curriculum: highest recent pass rate of the band", at_least=0, at_most=1)
    curriculum_ema: float = option(0.5, "curriculum: weight of the newest pass rate in its moving average", at_least=0, at_most=1)
    curriculum_revisit: float = option(
        0.1, "pass_rate_band: probability per step that a held-back task is played again", at_least=0, at_most=1
    )
    curriculum_replay: float = option(
        0.5, "pass_rate_band: largest fraction of a batch given to remembered tasks", at_least=0, at_most=1
    )
    curriculum_level_option: str = option("difficulty", "level: the env option that sets the generator level")
    curriculum_max_level: int = option(4, "level: the highest level (levels run from 0)", at_least=0)
    self_play: bool = option(
        False, "two-player games: the policy plays every seat of the game (make_multiagent(env)), each seat's tokens "
        "trained with its own reward; evaluation stays against the env's fixed opponent (docs/two-player.md)",
    )
    self_play_groups: SelfPlayGroups = option(
        "seat", "self_play: GRPO groups of a deal's games by seat (a per-seat baseline) or both seats together"
    )
    self_play_pool: int = option(
        0, "self_play: earlier snapshots of the policy kept as opponents (0: none, the policy against itself only)", at_least=0
    )
    self_play_pool_every: int = option(10, "self_play: steps between snapshots saved to the pool", at_least=1)
    self_play_pool_prob: float = option(
        0.5, "self_play: chance that a game's other seat is played by a snapshot drawn from the pool", at_least=0, at_most=1
    )
    vectorization_mode: VectorizationMode = option("sync", "gymnasium vector env mode (executor local)")
    executor: Executor = option(
        "local",
        "where env steps and their rewards run: 'local' (gym.make_vec in this process) or 'ray' (Ray actors; "
        "joins the cluster at RAY_ADDRESS, else starts a local one; same results; needs mathgym[ray])",
    )
    ray_actors: int = option(0, "executor ray: env-host actors (0: one per CPU of the Ray cluster)", at_least=0)
    lora_r: int = option(0, "LoRA rank (0: full fine-tuning)", at_least=0)
    lora_alpha: int = option(16, "LoRA alpha")
    lora_target_modules: str = option("all-linear", "LoRA target modules: 'all-linear' or comma-separated names")
    device: str = option("auto", "'auto' (CUDA if available, else CPU), 'cpu', 'cuda', 'cuda:1', ...")
    dtype: DType = option(
        "auto",
        "'auto': bf16 on a CUDA GPU that has it, else fp32; bfloat16: bf16 weights; "
        "float16: fp32 weights, fp16 autocast and a gradient scaler",
    )
    gradient_checkpointing: bool = option(False, "recompute activations in the backward pass: less memory, more compute")
    threads: int = option(0, "torch CPU threads (0: torch's default)", at_least=0)
    run_dir: str = option("", "run directory (default runs/<algo>-<env>-<time>)")
    save_every: int = option(20, "checkpoint every N steps (0: only at the end)", at_least=0)
    eval_every: int = option(0, "evaluate every N steps (0: only before and after)", at_least=0)
    eval_tasks: int = option(200, "held-out tasks of the before/after evaluation (0: skip)", at_least=0)
    log_samples: int = option(4, "episodes per step written to samples.jsonl (0: none)", at_least=0)
    eval_seed: int = option(10_000, "first seed of the fixed evaluation task set")
    eval_samples: int = option(1, "samples per eval task (k of pass@k; 1 = greedy pass@1)", at_least=1)
    log_tensorboard: bool = option(False, "also log to TensorBoard (when installed)")
    log_wandb: bool = option(False, "also log to Weights & Biases (when installed)")
    progress: bool = option(True, "show a progress bar")

    def validate(self) -> None:
        """Raise :class:`ConfigError` for a field outside its choices or bounds (declared on the field), or
        fields that do not go together; warn about an option the chosen variant does not read."""
        check_options(self)
        warn_unused_options(self, VARIANT_INPUTS)
        from mathgym.agents.policy import template_options  # noqa: PLC0415 - the policy module needs torch

        template_options(self.chat_template_kwargs)
        check_ordered(self, "keep_pass_rate_min", "keep_pass_rate_max")
        check_ordered(self, "curriculum_band_min", "curriculum_band_max")
        if self.off_policy_steps and self.backend == "vllm":
            raise ConfigError(
                "off_policy_steps=1 samples on a copy of the weights in this process: use backend native or hf "
                "(vLLM holds its own copy, synced between steps)."
            )
        if self.self_play and (self.off_policy_steps or self.curriculum != "none"):
            raise ConfigError(
                "self_play plays its own games each step: use it with off_policy_steps=0 and curriculum none."
            )
        if (self.num_tasks * self.group_size) % self.grad_accum_steps:
            raise ConfigError(
                f"grad_accum_steps={self.grad_accum_steps} must divide the batch num_tasks * group_size = "
                f"{self.num_tasks * self.group_size}."
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def resolved_env_kwargs(config: TrainConfig, evaluation: bool = False, model_dir: str | Path | None = None) -> dict[str, Any]:
    """The env options a run uses: those saved with the model (``mathgym.json`` in ``model_dir``,
    default ``config.model``), then ``env_kwargs``, and for evaluation ``eval_env_kwargs`` on top
    (a key of :data:`DEFAULT_EVAL_ENV_KWARGS` dropped where the env does not take it, any other such
    key refused); see :func:`mathgym.agents.settings.run_env_kwargs`."""
    model = config.model if model_dir is None else model_dir
    eval_env_kwargs = config.eval_env_kwargs if evaluation else None
    return run_env_kwargs(config.env, model, config.env_kwargs, eval_env_kwargs, optional=DEFAULT_EVAL_ENV_KWARGS)


#: The largest label-smoothing rate each preference loss can use (robust DPO divides by ``1 - 2 eps``).
MAX_LABEL_SMOOTHING: dict[str, float] = {"sigmoid": 1.0, "ipo": 1.0, "hinge": 1.0, "robust": 0.5}


def check_ordered(config: Any, low: str, high: str) -> None:
    """Raise :class:`ConfigError` unless option ``low`` is at most option ``high`` (the two ends of a range)."""
    if getattr(config, low) > getattr(config, high):
        raise ConfigError(f"{low}={getattr(config, low)!r}, {high}={getattr(config, high)!r}: need {low} <= {high}.")


def check_preference_options(loss_type: str, beta: float, label_smoothing: float) -> None:
    """Raise :class:`ConfigError` for values no preference loss can use (``loss_type`` itself is a
    ``Literal`` choice, checked where the config is built)."""
    if not beta > 0:
        raise ConfigError(f"beta={beta!r} must be > 0.")
    upper = MAX_LABEL_SMOOTHING.get(loss_type, 1.0)
    if not 0.0 <= label_smoothing < upper:
        raise ConfigError(f"label_smoothing={label_smoothing!r} must be in [0, {upper}) for loss_type={loss_type!r}.")


def check_mismatch_correction(config: TrainConfig, mode: str) -> None:
    """Raise :class:`ConfigError` for a correction of greedy rollouts (they have no ratio)."""
    if mode != "none" and config.temperature == 0:
        raise ConfigError(f"mismatch_correction={mode!r} needs sampled rollouts (temperature > 0); greedy ones have no ratio.")


#: The ``mismatch_correction`` help of GRPO and PPO (:data:`~mathgym.algos.mismatch.MISMATCH_CORRECTIONS`).
MISMATCH_HELP = (
    "importance weights rho = pi_learner / pi_sampler on the policy loss: none; tis = min(rho, cap) per token; "
    "token_mask = rho, 0 outside [1/cap, cap]; seq_tis = the sequence's rho truncated at cap; seq_mask = the "
    "sequence's rho, 0 outside [1/cap, cap] (MIS); logged as rollout/is_*"
)


#: The ``policy_loss`` help of GRPO and PPO (the choices of :data:`~mathgym.algos.losses.POLICY_LOSSES`).
POLICY_LOSS_HELP = (
    "policy loss: clip = PPO's clipped surrogate; dual_clip = clip, with a negative advantage's loss at most "
    "dual_clip_c * |A| (Ye et al. 2020); gspo = one ratio per sequence (exp of its tokens' mean log-ratio), "
    "clipped per sequence (GSPO, Zheng et al. 2025; its clip ranges are ~3e-4/4e-4); cispo = the clipped ratio "
    "without gradient times the log-prob's gradient, on every token (CISPO, MiniMax-M1 2025)"
)

#: The ``dual_clip_c`` help of GRPO and PPO.
DUAL_CLIP_HELP = "policy_loss dual_clip: a negative advantage's loss is at most c * |A| (at 1 or below it would cap what clip leaves alone)"


@dataclass
@override_defaults(steps=200, learning_rate=3e-4, lr_schedule="linear", dynamic_sampling=True)
class GRPOConfig(TrainConfig):
    """GRPO options (on top of :class:`TrainConfig`; the defaults of ``steps``, ``learning_rate``,
    ``lr_schedule`` and ``dynamic_sampling`` are GRPO's own, tuned on MathReason-v0's train split: the
    tiny model's warm start lands between 58% and 93% train-split greedy pass@1 across data orders
    (and machines); 200 steps decayed linearly to zero took all five measured starts above 90%, where
    a constant rate left one at 88%; records ``grpo_steps_tune_linear`` and ``grpo_steps_tune_more``,
    docs/training.md)."""

    beta: float = option(0.0, "weight of the KL to the reference model (0: no reference)", at_least=0)
    kl_estimator: KLEstimator = option("k3", "per-token KL estimator of the beta term (Schulman 2020)")
    kl_mode: KLMode = option(
        "loss", "beta's KL as a loss term, or as a reward penalty (beta times the sequence's summed KL, before advantages)"
    )
    entropy_coef: float = option(0.0, "weight of the entropy bonus in the loss (0: none)", at_least=0)
    overlong_buffer: int = option(
        0, "DAPO's soft overlong punishment: tokens before max_new_tokens (at most) over which a reward penalty grows to "
        "overlong_penalty (0: off)", at_least=0,
    )
    overlong_penalty: float = option(1.0, "the overlong penalty at max_new_tokens (with overlong_buffer > 0)", at_least=0)
    eps_low: float = option(0.2, "clip range below 1 of the probability ratio", at_least=0, below=1)
    eps_high: float = option(0.28, "clip range above 1 of the probability ratio (clip-higher)", at_least=0)
    policy_loss: PolicyLoss = option("clip", POLICY_LOSS_HELP)
    dual_clip_c: float = option(3.0, DUAL_CLIP_HELP, above=1)
    advantage: AdvantageEstimator = option(
        "grpo",
        "advantage estimator: grpo = reward minus its group's mean; rloo = minus the mean of the group's other samples "
        "(Ahmadian et al. 2024; the paper: scale_rewards none); reinforce++ = rewards normalised over the batch "
        "(Hu 2025); reinforce++-baseline = minus the group's mean, then divided by the batch's std; per turn: gigpo = "
        "grpo's episode advantage plus omega times the turn's discounted return normalised among the group's turns "
        "that saw the same observation (Feng et al. 2025); step_reinforce = each turn's discounted return, normalised "
        "over the batch's turns (ROLL's step-level REINFORCE)",
    )
    gamma: float = option(
        0.95, "gigpo and step_reinforce: discount of a turn's return-to-go over the later turns", above=0, at_most=1
    )
    omega: float = option(1.0, "gigpo: weight of the step-level (same observation) advantage", at_least=0)
    scale_rewards: ScaleRewards = option(
        "group",
        "grpo, rloo and gigpo: divide centred rewards by the std of the group, the batch, or not at all (gigpo: at "
        "both levels; the reinforce++ estimators and step_reinforce always normalise over the batch)",
    )
    loss_aggregation: LossAggregation = option("token_mean", "how per-token losses are averaged")
    num_iterations: int = option(
        1, "optimizer passes over each batch (the ratio's denominator: the learner's log-probs before them)", at_least=1
    )
    mask_truncated: bool = option(False, "leave completions that hit the token/turn budget out of the loss")
    mismatch_correction: MismatchCorrection = option("none", MISMATCH_HELP)
    mismatch_cap: float = option(2.0, "the cap of mismatch_correction's ratios", above=1)

    def validate(self) -> None:
        super().validate()
        check_mismatch_correction(self, self.mismatch_correction)
        if self.overlong_buffer > self.max_new_tokens:
            raise ConfigError(
                f"overlong_buffer={self.overlong_buffer!r} is not allowed; choose 0 (off) to max_new_tokens={self.max_new_tokens}."
            )


@dataclass
class PPOConfig(TrainConfig):
    """PPO options (on top of :class:`TrainConfig`)."""

    group_size: int = option(4, "samples per task (PPO needs no groups; more samples per prompt help the critic)", at_least=1)
    value_model: ValueModelKind = option("shared", "value head on the policy's trunk, or a separate critic copy")
    advantage_level: AdvantageLevel = option(
        "turn", "GAE over tokens (TPPO) or over env steps, broadcast to their tokens (APPO)"
    )
    gamma: float = option(1.0, "discount factor of GAE", at_least=0, at_most=1)
    lam: float = option(0.95, "lambda of GAE", at_least=0, at_most=1)
    policy_loss: PolicyLoss = option("clip", POLICY_LOSS_HELP)
    dual_clip_c: float = option(3.0, DUAL_CLIP_HELP, above=1)
    eps_low: float = option(0.2, "clip range below 1 of the probability ratio", at_least=0, below=1)
    eps_high: float = option(0.2, "clip range above 1 of the probability ratio", at_least=0)
    value_clip: float = option(0.2, "clip range of the value update around the rollout-time values (0: unclipped)", at_least=0)
    value_coef: float = option(0.5, "weight of the value loss", at_least=0)
    value_learning_rate: float = option(1e-3, "learning rate of the value head (and of the separate critic)", above=0)
    entropy_coef: float = option(0.0, "weight of the entropy bonus", at_least=0)
    kl_coef: float = option(0.0, "weight of the KL to the reference model (0: no reference)", at_least=0)
    kl_mode: KLMode = option("reward", "KL as a per-token reward penalty, or as a loss term")
    kl_estimator: KLEstimator = option("k1", "per-token KL estimator")
    reference: ReferenceKind = option("auto", "reference: frozen copy, or the adapter-disabled model under LoRA")
    whiten_advantages: bool = option(True, "normalise advantages to zero mean and unit variance over the batch")
    ppo_epochs: int = option(2, "passes over each batch of rollouts", at_least=1)
    num_minibatches: int = option(2, "optimizer steps per pass (the batch is split into this many minibatches)", at_least=1)
    target_kl: float = option(0.0, "stop a batch's passes once approx KL(old || new) exceeds it (0: never); logged", at_least=0)
    loss_aggregation: PPOLossAggregation = option("token_mean", "how per-token losses are averaged")
    mask_truncated: bool = option(False, "leave episodes that hit the token/turn budget out of the loss")
    mismatch_correction: MismatchCorrection = option("none", MISMATCH_HELP)
    mismatch_cap: float = option(2.0, "the cap of mismatch_correction's ratios", above=1)

    def validate(self) -> None:
        super().validate()
        check_mismatch_correction(self, self.mismatch_correction)
        if self.num_minibatches * self.grad_accum_steps > self.num_tasks * self.group_size:
            raise ConfigError(
                f"num_minibatches * grad_accum_steps = {self.num_minibatches * self.grad_accum_steps} exceeds the batch "
                f"num_tasks * group_size = {self.num_tasks * self.group_size}."
            )


@dataclass
class DPOConfig(TrainConfig):
    """DPO options (on top of :class:`TrainConfig`)."""

    beta: float = option(0.1, "strength of the implicit KL constraint to the reference", above=0)
    loss_type: DPOLossType = option("sigmoid", "preference loss")
    label_smoothing: float = option(0.0, "sigmoid and robust: assumed label-noise rate (cDPO for sigmoid; robust needs < 0.5)", at_least=0, below=1)
    reference: DPOReference = option(
        "auto", "reference: frozen copy, adapter-disabled model (LoRA), or the ref_*_logp fields of the file"
    )
    preference_file: str = option("", "JSONL of {prompt, chosen, rejected} pairs; empty: online pairs from the env")
    eval_preference_file: str = option("", "held-out pairs: implicit-reward accuracy logged as eval/preference_accuracy")
    pairs_per_step: int = option(32, "pairs per optimizer step (offline)", at_least=1)
    logprob_reduction: LogprobReduction = option("sum", "sequence log-prob: sum over completion tokens, or mean")
    min_reward_gap: float = option(0.0, "online: pair best and worst only if their rewards differ by more than this", at_least=0)
    max_length: int = option(512, "offline: longest prompt + completion in tokens (prompt cut from the left)", at_least=1)
    epochs_per_batch: int = option(1, "optimizer steps on each batch of pairs", at_least=1)

    def validate(self) -> None:
        super().validate()
        check_preference_options(self.loss_type, self.beta, self.label_smoothing)
        if self.reference == "precomputed" and not self.preference_file:
            raise ConfigError("reference='precomputed' needs a preference_file with ref_chosen_logp/ref_rejected_logp.")


@dataclass
class SFTConfig(TrainConfig):
    """SFT options (on top of :class:`TrainConfig`)."""

    data: str = option("", "JSONL demonstrations (plain or chat); empty: the env's expert on train tasks")
    num_demonstrations: int = option(20_000, "demonstrations drawn from the env's expert when data is empty", at_least=1)
    batch_size: int = option(64, "demonstrations per optimizer step", at_least=1)
    max_length: int = option(0, "longest demonstration in tokens: longer ones keep their last tokens (0: no limit)", at_least=0)


@dataclass
class DistillConfig(TrainConfig):
    """Off-policy distillation options (on top of :class:`TrainConfig`); see :mod:`mathgym.algos.distill`."""

    teacher: str = option(
        "", "teacher model: hub id, local path, or 'tiny' (the tiny model's warm start on env); same vocabulary as --model"
    )
    data: str = option(
        "", "JSONL of prompts (the teacher samples the responses) and/or prompt+response pairs; empty: prompts of env"
    )
    divergence: Divergence = option("forward_kl", "D(teacher || student) over the teacher's top-k and the rest bucket")
    distill_weight: float = option(
        0.5, "w of (1 - w) CE + w D: 0 = SFT on the responses, 1 = the divergence alone", at_least=0, at_most=1
    )
    top_k: int = option(
        64, "teacher tokens kept per position, the rest of its mass one bucket (0: the whole vocabulary)", at_least=0
    )
    teacher_temperature: float = option(1.0, "the teacher's logits are divided by it in the divergence", above=0)
    student_temperature: float = option(1.0, "the student's logits are divided by it in the divergence", above=0)
    jsd_beta: float = option(0.5, "divergence jsd: weight of the teacher in the mixture", above=0, below=1)
    skew_lambda: float = option(
        0.1, "divergence skew_forward_kl and skew_reverse_kl: share of the compared side mixed into the other", at_least=0, below=1
    )
    num_tasks: int = option(32, "prompts (env tasks or JSONL rows) per optimizer step", at_least=1)
    group_size: int = option(1, "responses the teacher samples per prompt", at_least=1)

    def validate(self) -> None:
        super().validate()
        if not self.teacher:
            raise ConfigError("teacher is empty; give the teacher model: --teacher PATH (a hub id, a local path or 'tiny').")


@dataclass
class RMConfig(TrainConfig):
    """Reward-model options (on top of :class:`TrainConfig`); see :mod:`mathgym.algos.reward_model`.

    The reward model is a one-label sequence classifier initialised from ``rm_init`` (default: ``model``,
    whose causal-LM head is replaced by a fresh score head); ``model`` is the policy that samples the
    online pairs, and its tokenizer's chat template renders them.
    """

    rm_init: str = option("", "reward model to start from: a classifier dir, or a causal LM (fresh score head); empty: --model")
    preference_file: str = option("", "JSONL of {prompt, chosen, rejected, margin?} pairs; empty: online pairs from the env")
    eval_preference_file: str = option("", "held-out pairs: pairwise accuracy logged as eval/pairwise_accuracy")
    eval_pairs_every: int = option(0, "steps between evaluations on eval_preference_file (0: at the end only)", at_least=0)
    eval_tasks: int = option(
        0, "held-out env tasks of the policy's before/after evaluation (the policy is not trained: 0 skips it)", at_least=0
    )
    pairs_per_step: int = option(32, "pairs per optimizer step (offline)", at_least=1)
    min_reward_gap: float = option(0.0, "online: pair best and worst only if their rewards differ by more than this", at_least=0)
    reward_gap_margin: float = option(0.0, "online: margin = this x (chosen reward - rejected reward)", at_least=0)
    max_length: int = option(512, "longest prompt + response in tokens (prompt cut from the left)", at_least=2)
    epochs_per_batch: int = option(1, "optimizer steps on each batch of pairs", at_least=1)


@dataclass
class PRMConfig(TrainConfig):
    """Process reward model training options (on top of :class:`TrainConfig`); see :mod:`mathgym.algos.prm`."""

    data: str = option("", "JSONL of labelled solutions: {'problem', 'steps': [...], 'labels': [...]} (labels in [0, 1]), or Math-Shepherd, PRM800K, ProcessBench, RLHFlow rows")
    eval_data: str = option("", "held-out labelled solutions: step AUC and first-error accuracy before and after (empty: none)")
    batch_size: int = option(16, "labelled solutions per optimizer step", at_least=1)
    form: PRMForm = option(
        "step_tag", "step_tag: the causal LM scores good_token against bad_token after each step_tag; step_head: a new "
        "two-label token-classification head on the model scores each separator (Qwen2.5-Math-PRM's form)"
    )
    separator: str = option("<extra_0>", "step_head: the text written after each step (added as one special token if it is not one)")
    step_tag: str = option("ки", "text written after each step; the token there predicts good_token or bad_token")
    good_token: str = option("+", "the token meaning 'this step is right' (one token of the vocabulary)")
    bad_token: str = option("-", "the token meaning 'this step is wrong' (one token of the vocabulary)")
    max_length: int = option(1024, "longest input in tokens (the oldest tokens are cut first)", at_least=8)
    rule: AggregationRule = option("last", "the aggregation a process reward built from the saved PRM uses by default")
    warm_start_steps: int = option(0, "SFT steps of the tiny model's warm start (a PRM starts from the plain model)", at_least=0)
    eval_tasks: int = option(0, "held-out env tasks of a policy evaluation (a PRM is measured on eval_data instead)", at_least=0)

    def validate(self) -> None:
        super().validate()
        if not self.data:
            raise ConfigError("data is empty; give the labelled solutions: --data FILE (JSONL rows {problem, steps, labels}).")
        if self.eval_tasks or self.eval_every:
            raise ConfigError(
                f"eval_tasks={self.eval_tasks!r}, eval_every={self.eval_every!r}: a PRM is not a policy to play env tasks; "
                "measure it on held-out labelled steps with --eval-data FILE (and leave eval_tasks and eval_every at 0)."
            )


@dataclass
# GRPO's tuned defaults do not carry over: the teacher's signal needs no reward spread in a group.
@override_defaults(**defaults_of(TrainConfig, "steps", "learning_rate", "dynamic_sampling"))
class OnPolicyDistillConfig(GRPOConfig):
    """On-policy distillation options (on top of :class:`GRPOConfig`); see :mod:`mathgym.algos.onpolicy_distill`."""

    teacher: str = option(
        "", "teacher model: hub id, local path, or 'tiny' (the tiny model's warm start on env); same vocabulary as --model"
    )
    teacher_device: str = option("auto", "where the teacher runs (no gradient): 'auto' = the student's device, 'cpu', 'cuda:1', ...")
    teacher_url: str = option(
        "", "API root of a vLLM (OpenAI-compatible completions) server that serves the teacher, e.g. "
        "http://127.0.0.1:8000/v1; --teacher is then the served model's name (empty: the server's only model)"
    )
    teacher_api_key_env: str = option("OPENAI_API_KEY", "environment variable holding the teacher server's API key (if any)")
    teacher_timeout_s: float = option(300.0, "seconds one request to the teacher server may take (then retried twice)", above=0)
    teacher_concurrency: int = option(8, "requests to the teacher server in flight at once", at_least=1)
    kl_coef: float = option(
        1.0, "weight of the per-token reverse KL to the teacher in the advantage (reward -kl_coef * KL)", at_least=0
    )
    teacher_kl_estimator: TeacherKLEstimator = option(
        "k1", "per-token estimate of KL(student || teacher) at the sampled token: k1 = log p_s - log p_t; "
        "k3 = r - 1 - log r with r = p_t / p_s (never negative)"
    )
    env_reward_coef: float = option(
        0.0, "weight of the env reward's group-relative advantage (0: the teacher's signal alone)", at_least=0
    )

    def validate(self) -> None:
        super().validate()
        if not self.teacher and not self.teacher_url:
            raise ConfigError(
                "teacher is empty; give the teacher model: --teacher PATH (a hub id, a local path or 'tiny'), "
                "or a server that serves it: --teacher-url URL."
            )
        if self.teacher_url and (self.temperature or 1.0) != 1.0:
            raise ConfigError(
                f"temperature={self.temperature!r} with a teacher server: the server's log-probs are at temperature 1, "
                "so the student's must be too; sample at --temperature 1, or run the teacher in-process (--teacher PATH)."
            )
        if self.kl_coef == 0 and self.env_reward_coef == 0:
            raise ConfigError("kl_coef and env_reward_coef are both 0: nothing to learn from; set at least one > 0.")
