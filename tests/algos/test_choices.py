"""One vocabulary: every choice of an option is a ``Literal`` defined once (torch-free), every table of
variants has exactly its rows, and the configs' fields use those types; the new rows' numbers by hand."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from mathgym.agents import choices as agent_choices
from mathgym.algos import choices
from mathgym.algos.configs import DistillConfig, DPOConfig, GRPOConfig, PPOConfig, SFTConfig, TrainConfig
from mathgym.errors import ConfigError
from mathgym.options import build_config, field_type, pick


def _tables() -> list[tuple[str, dict, typing.Any]]:
    """(name, table, the Literal whose values are its rows): imported here, as they need torch."""
    pytest.importorskip("torch")
    from mathgym.agents.backends import BACKENDS
    from mathgym.agents.policy import PRECISIONS
    from mathgym.algos.advantages import ADVANTAGE_ESTIMATORS, REWARD_SCALES, TURN_ADVANTAGE_ESTIMATORS
    from mathgym.algos.distill_losses import DIVERGENCES
    from mathgym.algos.dpo_losses import PREFERENCE_LOSSES
    from mathgym.algos.executors import EXECUTORS
    from mathgym.algos.gae import GAE_LEVELS
    from mathgym.algos.losses import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES
    from mathgym.algos.mismatch import MISMATCH_CORRECTIONS
    from mathgym.algos.preferences import SEQUENCE_REDUCTIONS
    from mathgym.algos.update import LR_SCHEDULES

    return [
        ("AGGREGATIONS", AGGREGATIONS, choices.LossAggregation),
        ("KL_ESTIMATORS", KL_ESTIMATORS, choices.KLEstimator),
        ("POLICY_LOSSES", POLICY_LOSSES, choices.PolicyLoss),
        ("ADVANTAGE_ESTIMATORS", ADVANTAGE_ESTIMATORS, choices.EpisodeAdvantageEstimator),
        ("TURN_ADVANTAGE_ESTIMATORS", TURN_ADVANTAGE_ESTIMATORS, choices.TurnAdvantageEstimator),
        ("REWARD_SCALES", REWARD_SCALES, choices.ScaleRewards),
        ("MISMATCH_CORRECTIONS", MISMATCH_CORRECTIONS, choices.MismatchCorrection),
        ("GAE_LEVELS", GAE_LEVELS, choices.AdvantageLevel),
        ("PREFERENCE_LOSSES", PREFERENCE_LOSSES, choices.DPOLossType),
        ("DIVERGENCES", DIVERGENCES, choices.Divergence),
        ("SEQUENCE_REDUCTIONS", SEQUENCE_REDUCTIONS, choices.LogprobReduction),
        ("LR_SCHEDULES", LR_SCHEDULES, choices.LRSchedule),
        ("EXECUTORS", EXECUTORS, choices.Executor),
        ("BACKENDS", BACKENDS, agent_choices.Backend),
        ("PRECISIONS", PRECISIONS, agent_choices.DType),
    ]


def test_every_table_has_exactly_the_rows_its_option_allows():
    for name, table, literal in _tables():
        assert list(table) == list(typing.get_args(literal)), name


def test_every_choice_field_of_every_config_is_typed_by_a_shared_literal():
    shared = [v for m in (choices, agent_choices) for v in vars(m).values() if typing.get_origin(v) is typing.Literal]
    for cls in (TrainConfig, GRPOConfig, PPOConfig, DPOConfig, SFTConfig, DistillConfig):
        for f in dataclasses.fields(cls):
            annotation = field_type(cls, f.name)
            if typing.get_origin(annotation) is typing.Literal:
                assert any(annotation is s for s in shared), f"{cls.__name__}.{f.name}: define its Literal in a choices module"


def test_a_choice_is_checked_where_the_config_is_built_and_a_table_lookup_names_the_choices():
    with pytest.raises(ConfigError, match="policy_loss='trpo' is not allowed; choose one of 'clip', 'dual_clip'"):
        build_config(GRPOConfig, overrides={"policy_loss": "trpo"})
    with pytest.raises(ConfigError, match="dual_clip_c=1.0 is not allowed"):
        build_config(PPOConfig, overrides={"dual_clip_c": 1.0})
    with pytest.raises(ConfigError, match="advantage='vtrace' is not allowed; choose one of 'grpo', 'rloo'"):
        build_config(GRPOConfig, overrides={"advantage": "vtrace"})
    assert pick({"a": 1, "b": 2}, "letter", "b") == 2
    with pytest.raises(ConfigError, match="letter='c' is not allowed; choose one of 'a', 'b'"):
        pick({"a": 1, "b": 2}, "letter", "c")


def test_learning_rate_schedules_by_hand():
    pytest.importorskip("torch")
    from mathgym.algos.update import lr_factor

    # 10 steps, 2 of warmup: 0.5, 1.0, then the schedule over the 8 others
    assert [lr_factor(s, 10, 2, "constant") for s in (0, 1, 2, 9)] == [0.5, 1.0, 1.0, 1.0]
    assert [lr_factor(s, 10, 2, "linear") for s in (2, 6, 10)] == pytest.approx([1.0, 0.5, 0.0])
    assert [lr_factor(s, 10, 2, "cosine") for s in (2, 4, 6, 10)] == pytest.approx(
        [1.0, 0.5 * (1 + math.cos(math.pi / 4)), 0.5, 0.0]
    )


def test_importance_weights_scale_each_tokens_policy_loss():
    """Per-token weights (a mismatch correction's) multiply the clipped surrogate, without a gradient of their own."""
    torch = pytest.importorskip("torch")
    from mathgym.algos.losses import clipped_policy_loss

    logp = torch.log(torch.tensor([[1.0, 1.5, 0.5]])).requires_grad_(True)
    weights = torch.tensor([[2.0, 0.5, 1.0]], requires_grad=True)
    adv, mask = torch.tensor([[1.0, 1.0, -1.0]]), torch.ones(1, 3)
    loss, _ = clipped_policy_loss(logp, torch.zeros(1, 3), adv, mask, eps_low=0.2, eps_high=0.2, weights=weights)
    # per token: -1 * 2, -min(1.5, 1.2) * 0.5 = -0.6, -min(-0.5, -0.8) * 1 = 0.8  -> mean over 3 tokens
    assert loss.item() == pytest.approx((-2.0 - 0.6 + 0.8) / 3)
    loss.backward()
    assert weights.grad is None  # detached
    # d/dlogp of -r A w: token 0: -1 * 1 * 2 / 3; token 1 clipped: 0; token 2 clipped (r < 0.8, A < 0): 0
    assert logp.grad.tolist()[0] == pytest.approx([-2 / 3, 0.0, 0.0])


def _input_tables() -> list[tuple[str, dict, dict[str, tuple[str, ...]], set[str]]]:
    """(name, table, what each row reads, the shared inputs passed to every row positionally)."""
    pytest.importorskip("torch")
    from mathgym.algos.advantages import ADVANTAGE_ESTIMATORS, TURN_ADVANTAGE_ESTIMATORS
    from mathgym.algos.distill_losses import DIVERGENCES
    from mathgym.algos.dpo_losses import PREFERENCE_LOSSES
    from mathgym.algos.losses import POLICY_LOSSES

    return [
        ("POLICY_LOSSES", POLICY_LOSSES, choices.POLICY_LOSS_INPUTS, set()),
        ("ADVANTAGE_ESTIMATORS", {**ADVANTAGE_ESTIMATORS, **TURN_ADVANTAGE_ESTIMATORS}, choices.ADVANTAGE_INPUTS, {"eps"}),
        ("PREFERENCE_LOSSES", PREFERENCE_LOSSES, choices.PREFERENCE_LOSS_INPUTS, set()),
        ("DIVERGENCES", DIVERGENCES, choices.DIVERGENCE_INPUTS, set()),
    ]


def test_every_variant_row_takes_exactly_the_inputs_declared_for_it():
    """A row's keyword-only parameters are what its choice's ``*_INPUTS`` row names (``eps``: a constant
    no config sets), so a row never takes an option it ignores and the declaration cannot drift."""
    import inspect

    for name, table, inputs, constants in _input_tables():
        assert list(inputs) == list(table), name
        for choice, row in table.items():
            params = inspect.signature(row).parameters.values()
            keywords = {p.name for p in params if p.kind is p.KEYWORD_ONLY} - constants
            positional_options = {p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD} & set(inputs[choice])
            assert keywords | positional_options == set(inputs[choice]), f"{name}[{choice!r}]"


def test_an_option_the_chosen_variant_does_not_read_is_pointed_out_once():
    from mathgym.options import UnusedOptionWarning, unused_options

    config = GRPOConfig(dual_clip_c=5.5, gamma=0.75)
    assert unused_options(config, _variants()) == [
        "dual_clip_c=5.5 has no effect with policy_loss='clip' (read by policy_loss dual_clip).",
        "gamma=0.75 has no effect with advantage='grpo' (read by advantage gigpo, step_reinforce).",
    ]
    assert unused_options(GRPOConfig(policy_loss="dual_clip", dual_clip_c=5.5, advantage="step_reinforce", gamma=0.75), _variants()) == []
    assert unused_options(GRPOConfig(), _variants()) == []  # defaults are never reported
    assert unused_options(DistillConfig(teacher="t", divergence="jsd", skew_lambda=0.3), _variants()) == [
        "skew_lambda=0.3 has no effect with divergence='jsd' (read by divergence skew_forward_kl, skew_reverse_kl)."
    ]
    with pytest.warns(UnusedOptionWarning, match="dual_clip_c=6.25 has no effect with policy_loss='cispo'") as seen:
        for _ in range(2):  # a run validates its config more than once: one warning
            build_config(GRPOConfig, overrides={"policy_loss": "cispo", "dual_clip_c": "6.25"})
    assert len([w for w in seen if "6.25" in str(w.message)]) == 1


def _variants() -> dict:
    from mathgym.algos.configs import VARIANT_INPUTS

    return VARIANT_INPUTS


@pytest.mark.parametrize(
    "cls, overrides, message",
    [
        (GRPOConfig, {"steps": 0}, "steps=0 is not allowed; it must be at least 1."),
        (GRPOConfig, {"learning_rate": 0}, "learning_rate=0.0 is not allowed; it must be > 0."),
        (GRPOConfig, {"learning_rate": "nan"}, "learning_rate=nan is not allowed; it must be > 0."),
        (GRPOConfig, {"top_p": 1.5}, "top_p=1.5 is not allowed; choose a value in (0, 1]."),
        (GRPOConfig, {"eps_low": 1}, "eps_low=1.0 is not allowed; choose a value in [0, 1)."),
        (GRPOConfig, {"gamma": 0}, "gamma=0.0 is not allowed; choose a value in (0, 1]."),
        (GRPOConfig, {"off_policy_steps": 2}, "off_policy_steps=2 is not allowed; choose 0 or 1."),
        (PPOConfig, {"gamma": 0}, None),  # PPO's discount may be 0, GRPO's may not: bounds are the field's
        (PPOConfig, {"lam": 1.5}, "lam=1.5 is not allowed; choose a value in [0, 1]."),
        (SFTConfig, {"batch_size": 0}, "batch_size=0 is not allowed; it must be at least 1."),
        (DistillConfig, {"teacher": "t", "jsd_beta": 1}, "jsd_beta=1.0 is not allowed; choose a value in (0, 1)."),
        (GRPOConfig, {"keep_pass_rate_min": 0.9, "keep_pass_rate_max": 0.5},
         "keep_pass_rate_min=0.9, keep_pass_rate_max=0.5: need keep_pass_rate_min <= keep_pass_rate_max."),
    ],
)
def test_a_bound_is_declared_on_its_field_and_checked_by_one_function(cls, overrides, message):
    if message is None:
        build_config(cls, overrides=overrides)
        return
    with pytest.raises(ConfigError) as err:
        build_config(cls, overrides=overrides)
    assert str(err.value) == message


def test_the_help_shows_each_fields_bounds():
    from mathgym.options import config_help

    helps = config_help(GRPOConfig)
    assert helps["steps"].endswith("(>= 1)") and helps["learning_rate"].endswith("(> 0)")
    assert helps["top_p"].endswith("(in (0, 1])") and helps["eps_low"].endswith("(in [0, 1))")
    assert helps["off_policy_steps"].endswith("(0 or 1)") and helps["dual_clip_c"].endswith("(> 1)")
    assert "(" not in helps["seed"]  # no bound, nothing added


def test_an_algorithms_defaults_override_the_shared_declaration():
    """``dynamic_sampling`` is declared once (TrainConfig); GRPO turns it on, on-policy distillation back off."""
    from mathgym.algos.configs import OnPolicyDistillConfig

    def spec(cls: type, name: str) -> dataclasses.Field:
        return next(f for f in dataclasses.fields(cls) if f.name == name)

    assert (TrainConfig().dynamic_sampling, GRPOConfig().dynamic_sampling, OnPolicyDistillConfig().dynamic_sampling) == (
        False, True, False,
    )
    assert (GRPOConfig().steps, GRPOConfig().lr_schedule, OnPolicyDistillConfig().steps, OnPolicyDistillConfig().lr_schedule) == (
        200, "linear", 60, "linear",
    )
    for cls in (GRPOConfig, OnPolicyDistillConfig):
        for name in ("dynamic_sampling", "steps", "learning_rate"):
            assert dict(spec(cls, name).metadata) == dict(spec(TrainConfig, name).metadata)  # help and bounds: TrainConfig's


def test_a_field_an_algorithm_redeclares_keeps_the_shared_bounds():
    from mathgym.algos import configs

    shared = {f.name: f.metadata.get("bounds") for f in dataclasses.fields(TrainConfig)}
    for cls in (getattr(configs, n) for n in dir(configs) if n.endswith("Config") and n != "TrainConfig"):
        for f in dataclasses.fields(cls):
            if f.name in shared:
                assert f.metadata.get("bounds") == shared[f.name], f"{cls.__name__}.{f.name}"
