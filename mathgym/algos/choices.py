"""The choices of the algorithms' options, each a ``Literal`` defined once (no torch).

The configs (:mod:`mathgym.algos.configs`) declare their fields with these types, and the
pure functions that implement a choice are rows of a table keyed by the same values
(``AGGREGATIONS``, ``KL_ESTIMATORS``, ``POLICY_LOSSES``, ``ADVANTAGE_ESTIMATORS``...). A value
is validated once, where a config is built (:func:`mathgym.options.build_config`); adding a
variant is adding a value here and a row to its table.

Where the rows of a table read different options, what each row reads is declared here too
(``*_INPUTS``: ``{choice: names}``, the names of the config's fields): the dispatcher hands a row
those alone (:func:`mathgym.options.select`), and a config that sets an option its chosen row
does not read is told so (:func:`mathgym.options.warn_unused_options`), without torch.
"""

from __future__ import annotations

from typing import Literal

from mathgym.agents.choices import ReferenceKind

# -- the run ------------------------------------------------------------------------------------

#: Learning-rate schedule after warmup (:data:`mathgym.algos.update.LR_SCHEDULES`).
LRSchedule = Literal["constant", "linear", "cosine"]

#: gymnasium vector env mode of the local executor.
VectorizationMode = Literal["sync", "async"]

#: Where env steps and their rewards run (:data:`mathgym.algos.executors.EXECUTORS`).
Executor = Literal["local", "ray"]

#: Which tasks a step plays (:mod:`mathgym.algos.curriculum`): the task sequence as it comes, tasks
#: whose recent pass rate is in a band, or a generator level moved by the pass rate.
Curriculum = Literal["none", "pass_rate_band", "level"]

#: The GRPO groups of a self-play batch (:mod:`mathgym.algos.self_play`): the games of one deal played
#: from one seat (``seat``), or both seats of the deal's games together (``game``).
SelfPlayGroups = Literal["seat", "game"]

# -- policy-gradient algorithms (GRPO, PPO) ---------------------------------------------------------

#: How per-token losses become a scalar (:data:`mathgym.algos.losses.AGGREGATIONS`).
LossAggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]

#: The aggregations PPO offers (Dr. GRPO's constant length is GRPO's).
PPOLossAggregation = Literal["token_mean", "sequence_mean"]

#: The policy's surrogate loss (:data:`mathgym.algos.losses.POLICY_LOSSES`).
PolicyLoss = Literal["clip", "dual_clip", "gspo", "cispo"]

#: What each policy loss reads besides the token log-ratio and the advantages: its options and, for
#: gspo, the loss ``mask`` (its ratio is a mean over each sequence's tokens).
POLICY_LOSS_INPUTS: dict[str, tuple[str, ...]] = {
    "clip": ("eps_low", "eps_high"),
    "dual_clip": ("eps_low", "eps_high", "dual_clip_c"),
    "gspo": ("mask", "eps_low", "eps_high"),
    "cispo": ("eps_low", "eps_high"),
}

#: Per-token estimator of KL(policy || reference) (:data:`mathgym.algos.losses.KL_ESTIMATORS`).
KLEstimator = Literal["k1", "k2", "k3"]

#: KL to the reference as a per-token reward penalty, or as a loss term.
KLMode = Literal["reward", "loss"]

#: Importance weights between learner and sampler (:data:`mathgym.algos.mismatch.MISMATCH_CORRECTIONS`).
MismatchCorrection = Literal["none", "tis", "token_mask", "seq_tis", "seq_mask"]

#: Advantages of whole episodes (:data:`mathgym.algos.advantages.ADVANTAGE_ESTIMATORS`).
EpisodeAdvantageEstimator = Literal["grpo", "rloo", "reinforce++", "reinforce++-baseline"]

#: Advantages of each turn of a multi-turn episode (:data:`mathgym.algos.advantages.TURN_ADVANTAGE_ESTIMATORS`).
TurnAdvantageEstimator = Literal["gigpo", "step_reinforce"]

#: Advantages without a value function: per episode or per turn.
AdvantageEstimator = Literal[EpisodeAdvantageEstimator, TurnAdvantageEstimator]

#: The options each advantage estimator reads besides the rewards, groups (and turns); the
#: reinforce++ rows and step_reinforce normalise over the batch whatever ``scale_rewards`` says.
ADVANTAGE_INPUTS: dict[str, tuple[str, ...]] = {
    "grpo": ("scale_rewards",),
    "rloo": ("scale_rewards",),
    "reinforce++": (),
    "reinforce++-baseline": (),
    "gigpo": ("gamma", "omega", "scale_rewards"),
    "step_reinforce": ("gamma",),
}

#: What divides GRPO's centred rewards (:data:`mathgym.algos.advantages.REWARD_SCALES`).
ScaleRewards = Literal["group", "batch", "none"]

#: GAE over tokens or over env steps (:data:`mathgym.algos.gae.GAE_LEVELS`).
AdvantageLevel = Literal["token", "turn"]

# -- preference optimisation (DPO) ----------------------------------------------------------------

#: DPO-family loss of the implicit reward margin (:data:`mathgym.algos.dpo_losses.PREFERENCE_LOSSES`).
DPOLossType = Literal["sigmoid", "ipo", "hinge", "robust"]

#: The options each preference loss reads besides the margin and ``beta``.
PREFERENCE_LOSS_INPUTS: dict[str, tuple[str, ...]] = {
    "sigmoid": ("label_smoothing",), "ipo": (), "hinge": (), "robust": ("label_smoothing",),
}

#: A sequence's log-prob: sum over its completion tokens, or their mean.
LogprobReduction = Literal["sum", "mean"]

#: DPO's reference: a model (:data:`~mathgym.agents.choices.ReferenceKind`) or the pairs file's own values.
DPOReference = Literal[ReferenceKind, "precomputed"]

# -- distillation ------------------------------------------------------------------------------

#: ``D(teacher || student)`` of knowledge distillation (:data:`mathgym.algos.distill_losses.DIVERGENCES`).
Divergence = Literal["forward_kl", "reverse_kl", "jsd", "skew_forward_kl", "skew_reverse_kl"]

#: The options each divergence reads besides the two distributions.
DIVERGENCE_INPUTS: dict[str, tuple[str, ...]] = {
    "forward_kl": (), "reverse_kl": (), "jsd": ("jsd_beta",), "skew_forward_kl": ("skew_lambda",),
    "skew_reverse_kl": ("skew_lambda",),
}

#: Per-token estimator of the reverse KL ``KL(student || teacher)`` of on-policy distillation, at the sampled token:
#: ``k1 = log p_s - log p_t``, ``k3 = r - 1 - log r`` with ``r = p_t / p_s`` (:data:`mathgym.algos.losses.KL_ESTIMATORS`).
TeacherKLEstimator = Literal["k1", "k3"]
