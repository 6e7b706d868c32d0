"""``mathgym train`` and ``mathgym eval`` (needs the ``train`` extra).

    mathgym train [--env ID] [--algo grpo] [--model ID_OR_PATH] [--config run.yaml] [--key value ...]
    mathgym train --resume RUN_DIR
    mathgym eval --env ID --model PATH [--k 8] [--tasks 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from mathgym.config import build_config, config_help, model_generation_defaults, split_overrides
from mathgym.errors import ConfigError, MathgymError


def _train_parser(config_cls: type | None, algo: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mathgym train",
        description="Train a language model with RL on any registered env. Every option below can also be set in "
        "a YAML file (--config) as `name: value`.",
    )
    parser.add_argument("--algo", default=algo, help="algorithm (grpo, sft, and any registered one)")
    parser.add_argument("--config", help="YAML file of options")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    if config_cls is not None:
        for name, text in config_help(config_cls).items():
            default = next(f for f in dataclasses.fields(config_cls) if f.name == name)
            shown = default.default if default.default is not dataclasses.MISSING else default.default_factory()
            parser.add_argument(f"--{name.replace('_', '-')}", metavar="VALUE", help=f"{text} [default: {shown}]")
    return parser


def run_train(argv: Sequence[str]) -> int:
    from mathgym.algos.registry import ALGORITHMS, get_algorithm

    head = argparse.ArgumentParser(add_help=False)
    head.add_argument("--algo")
    head.add_argument("--config")
    head.add_argument("--resume")
    head.add_argument("-h", "--help", action="store_true")
    known, rest = head.parse_known_args(list(argv))
    saved: dict = {}
    if known.resume:
        config_path = Path(known.resume) / "config.yaml"
        if not config_path.is_file():
            raise ConfigError(f"--resume {known.resume}: no config.yaml there; is it a run directory?")
        saved = yaml.safe_load(config_path.read_text()) or {}
    file_algo = None
    if known.config and Path(known.config).is_file():
        file_algo = (yaml.safe_load(Path(known.config).read_text()) or {}).get("algo")
    algo = known.algo or saved.get("algo") or file_algo or "grpo"
    trainer_cls, config_cls = get_algorithm(algo)
    if known.help:
        _train_parser(config_cls, algo).print_help()
        print("\nalgorithms: " + ", ".join(f"{k} ({v.description})" for k, v in sorted(ALGORITHMS.items())))
        return 0
    overrides = split_overrides(rest)
    if known.resume:
        saved.pop("algo", None)
        config = build_config(config_cls, None, {**saved, **overrides, "run_dir": known.resume})
    else:
        config = build_config(config_cls, known.config, overrides)
        budgets = model_generation_defaults(config.model, set(overrides) | _yaml_keys(known.config))
        if budgets:  # the model's mathgym.json: the budgets it was trained and evaluated with
            config = build_config(config_cls, known.config, {**budgets, **overrides})
    trainer = trainer_cls(config)
    say = print if trainer.dist.is_main else (lambda *_: None)  # one voice under data-parallel training
    if known.resume:
        if not trainer.resume():
            say(f"mathgym: no checkpoint in {known.resume}; starting from step 0")
        else:
            say(f"mathgym: resumed {known.resume} at step {trainer.step}")
    result = trainer.train()
    say(result.summary(config.env))
    return 0


def _yaml_keys(path: str | None) -> set[str]:
    """Option names a YAML config file sets."""
    if not path or not Path(path).is_file():
        return set()
    return {str(k).replace("-", "_") for k in (yaml.safe_load(Path(path).read_text()) or {})}


def run_eval(argv: Sequence[str]) -> int:
    from mathgym.agents.policy import LLMPolicy
    from mathgym.algos.evaluate import evaluate_policy
    from mathgym.algos.trainer import pretrained_path
    from mathgym.config import TINY_MODEL, TrainConfig, read_model_settings, resolved_env_kwargs

    defaults = TrainConfig()
    parser = argparse.ArgumentParser(prog="mathgym eval", description="Evaluate a model on an env: pass@1 and pass@k on a fixed seed set.")
    parser.add_argument("--env", default=defaults.env, help="environment id")
    parser.add_argument("--model", default=TINY_MODEL, help="hub id, local path or run's final/ directory ('tiny': warm-started tiny model)")
    parser.add_argument("--env-kwargs", default=None, help="YAML mapping of env options (the test split is added when the env has one)")
    parser.add_argument("--tasks", type=int, default=200, help="number of tasks (seeds --seed .. --seed+tasks-1)")
    parser.add_argument("--seed", type=int, default=defaults.eval_seed, help="first task seed")
    parser.add_argument("--k", type=int, default=1, help="samples per task for pass@k (1: greedy pass@1)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature when k > 1")
    parser.add_argument(
        "--max-new-tokens", type=int, default=None,
        help=f"longest completion per turn [default: the model's mathgym.json, else {defaults.max_new_tokens}]",
    )
    parser.add_argument("--device", default="auto", help="'auto', 'cpu' or 'cuda'")
    args = parser.parse_args(list(argv))
    if args.tasks < 1 or args.k < 1:
        raise ConfigError("--tasks and --k must be at least 1.")
    path = pretrained_path(TrainConfig(env=args.env, model=args.model))
    # The model's mathgym.json: the env options and budgets it was trained and evaluated with.
    saved = read_model_settings(path)
    same_env = saved.get("env") == args.env
    eval_env_kwargs = {**defaults.eval_env_kwargs, **(saved.get("eval_env_kwargs", {}) if same_env else {})}
    user_kwargs = yaml.safe_load(args.env_kwargs) if args.env_kwargs else {}
    config = TrainConfig(env=args.env, model=path, env_kwargs=user_kwargs, eval_env_kwargs=eval_env_kwargs)
    env_kwargs = resolved_env_kwargs(config, evaluation=True)
    generation = {**defaults.to_dict(), **(saved.get("generation", {}) if same_env else {})}
    max_new_tokens = args.max_new_tokens or int(generation["max_new_tokens"])
    policy = LLMPolicy.from_pretrained(path, device=args.device)
    result = evaluate_policy(
        policy, args.env, env_kwargs, num_tasks=args.tasks, seed=args.seed, k=args.k, temperature=args.temperature,
        max_new_tokens=max_new_tokens, max_episode_tokens=int(generation["max_episode_tokens"]),
        max_turns=int(generation["max_turns"]) or None,
    )
    print(f"{args.env} ({args.tasks} tasks from seed {args.seed}): pass@1 = {result.pass_at_1:.1%}", end="")
    print(f", pass@{args.k} = {result.pass_at_k:.1%}" if args.k > 1 else " (greedy)")
    print("statuses: " + ", ".join(f"{k}={v}" for k, v in sorted(result.statuses.items())))
    return 0


def _quiet_transformers() -> None:
    """Hide transformers' per-load progress bars and advisory warnings in CLI output."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def main(name: str, argv: Sequence[str]) -> int:
    """Entry point used by ``mathgym.cli`` for ``train`` and ``eval``."""
    _quiet_transformers()
    try:
        return run_train(argv) if name == "train" else run_eval(argv)
    except MathgymError as err:
        print(f"mathgym {name}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
