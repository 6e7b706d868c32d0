"""benchmarks/toolbox.py: every row is a run of its own, different from its env's GRPO row.

A default of GRPOConfig can move under a row (dynamic sampling became GRPO's default, and the
"GRPO" and "GRPO + dynamic sampling" rows were then the same run); this catches it without
training anything.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

toolbox = pytest.importorskip("toolbox", reason="benchmarks/toolbox.py needs the train extra")


def _config(variant, args):
    from mathgym.algos.grpo import GRPOConfig

    return asdict(GRPOConfig(**toolbox.variant_options(variant, args, seed=0), run_dir="unused"))


def test_every_variant_changes_something_its_baseline_does_not_set():
    args = toolbox.build_parser().parse_args([])
    baselines = {v.env: _config(v, args) for v in toolbox.VARIANTS if v.name == "GRPO"}
    for variant in toolbox.VARIANTS:
        if variant.name == "GRPO":
            continue
        config = _config(variant, args)
        changed = {k for k in config if config[k] != baselines[variant.env][k]}
        assert changed, f"{variant.name} on {variant.env} is its GRPO row again"
        assert changed <= set(variant.options), (variant.name, changed - set(variant.options))


def test_the_baseline_is_plain_grpo():
    args = toolbox.build_parser().parse_args([])
    for variant in toolbox.VARIANTS:
        if variant.name == "GRPO":
            config = _config(variant, args)
            assert config["dynamic_sampling"] is False and config["policy_loss"] == "clip" and config["advantage"] == "grpo"
            assert config["off_policy_steps"] == 0 and config["curriculum"] == "none"


def test_the_multi_turn_rows_share_their_env_options_with_their_warm_start():
    args = toolbox.build_parser().parse_args(["--guess-high", "30"])
    for variant in toolbox.VARIANTS:
        assert _config(variant, args)["env_kwargs"] == toolbox.env_kwargs(variant.env, args)
    assert toolbox.env_kwargs(toolbox.GUESS, args) == {"high": 30} and toolbox.env_kwargs(toolbox.MATH, args) == {}
