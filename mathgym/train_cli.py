"""``mathgym train`` and ``mathgym eval`` (training needs the ``train`` extra).

    mathgym train [--env ID] [--algo grpo] [--model ID_OR_PATH] [--config run.yaml] [--key value ...]
    mathgym train --resume RUN_DIR
    mathgym eval --model PATH [--env ID] [--k 8] [--tasks 200] [--select majority|orm|prm-min|... --prm DIR]
    mathgym eval --model PATH --env MathStep-v0 --search beam --prm DIR [--beam-width 4 --expansions 4]
    mathgym label-steps --model PATH [--env ID] --k 8 --tasks 100 --out labels.jsonl

Options are parsed and checked (env id, env options, model path) before torch and
transformers are imported, so ``--help`` and every option error answer at once, and a
run that cannot start leaves no run directory behind.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mathgym.agents.settings import model_generation_defaults
from mathgym.agents.tiny import TINY_MODEL
from mathgym.errors import ConfigError, DatasetError, MathgymError
from mathgym.install import extra_hint
from mathgym.options import (
    build_config,
    config_help,
    parse_env_kwargs,
    read_yaml_mapping,
    split_overrides,
    unknown_option_message,
)
from mathgym.registry import check_env_kwargs

RESUME_HINT = "mathgym train --resume {run_dir}"


def _train_parser(config_cls: type | None, algo: str) -> argparse.ArgumentParser:
    from mathgym.algos.registry import ALGORITHMS

    parser = argparse.ArgumentParser(
        prog="mathgym train",
        description="Train a language model with RL on any registered env. Every option below can also be set in "
        'a YAML file (--config) as `name: value`. Training needs the train extra: ' + extra_hint("train") + ".",
        epilog="Ctrl-C stops a run and prints the command that resumes it from its last checkpoint.",
    )
    algos = ", ".join(sorted(ALGORITHMS))
    parser.add_argument("--algo", default=algo, help=f"algorithm: {algos} (options below are {algo}'s) [default: grpo]")
    parser.add_argument("--config", help="YAML file of options")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    parser.add_argument("-o", "--option", metavar="KEY=VALUE", action="append", help=OPTION_HELP)
    if config_cls is not None:
        for name, text in config_help(config_cls).items():
            default = next(f for f in dataclasses.fields(config_cls) if f.name == name)
            shown = default.default if default.default is not dataclasses.MISSING else default.default_factory()
            parser.add_argument(f"--{name.replace('_', '-')}", metavar="VALUE", help=f"{text} [default: {shown}]")
    return parser


def _head_arguments(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    head = argparse.ArgumentParser(add_help=False)
    head.add_argument("--algo")
    head.add_argument("--config")
    head.add_argument("--resume")
    head.add_argument("-o", "--option", action="append", default=[])
    head.add_argument("-h", "--help", action="store_true")
    return head.parse_known_args(list(argv))


TEMPLATE_KWARGS_HELP = ("YAML mapping of variables for the model's chat template, e.g. '{enable_thinking: false}' "
                        "(Qwen3) [default: those saved with the model in its mathgym.json]")
OPTION_HELP = "one env option (repeatable), as `mathgym check` and `mathgym play` take it: merged over --env-kwargs"


def _template_kwargs(text: str | None) -> dict[str, Any]:
    """``--chat-template-kwargs``: its YAML mapping (``{}`` when not given)."""
    from mathgym.algos.configs import TrainConfig
    from mathgym.options import parse_value

    return dict(parse_value(TrainConfig, "chat_template_kwargs", text)) if text is not None else {}


def _with_options(env_kwargs: Any, options: Sequence[str]) -> dict[str, Any]:
    """``env_kwargs`` (a mapping or its YAML text; ``None``: none) with the ``-o KEY=VALUE`` options over it."""
    from mathgym.algos.configs import TrainConfig
    from mathgym.options import parse_value

    base = parse_value(TrainConfig, "env_kwargs", env_kwargs) if env_kwargs is not None else {}
    return {**base, **parse_env_kwargs(options)}


def _saved_run_config(run_dir: str) -> dict[str, Any]:
    config_path = Path(run_dir) / "config.yaml"
    if not config_path.is_file():
        what = "does not exist" if not Path(run_dir).exists() else "has no config.yaml"
        raise ConfigError(f"--resume {run_dir}: {what}; give a run directory written by `mathgym train` (runs/<algo>-<env>-<time>).")
    return read_yaml_mapping(config_path)


def run_train(argv: Sequence[str]) -> int:
    from mathgym.algos.registry import ALGORITHMS, get_config_class

    known, rest = _head_arguments(argv)
    saved = _saved_run_config(known.resume) if known.resume else {}
    file_values = read_yaml_mapping(known.config) if known.config else {}
    algo = known.algo or saved.get("algo") or file_values.get("algo") or "grpo"
    config_cls = get_config_class(str(algo))
    if known.help:
        _train_parser(config_cls, algo).print_help()
        print("\nalgorithms: " + ", ".join(f"{k} ({v.description})" for k, v in sorted(ALGORITHMS.items())))
        return 0
    overrides = split_overrides(rest)
    if known.option:  # over --env-kwargs, else over the config file's or the resumed run's
        base = overrides.get("env_kwargs", file_values.get("env_kwargs", saved.get("env_kwargs")))
        overrides["env_kwargs"] = _with_options(base, known.option)
    if known.resume:
        saved.pop("algo", None)
        config = build_config(config_cls, None, {**saved, **overrides, "run_dir": known.resume})
    else:
        config = build_config(config_cls, known.config, overrides)
        budgets = model_generation_defaults(config.model, set(overrides) | _yaml_keys(known.config))
        if budgets:  # the model's mathgym.json: the budgets it was trained and evaluated with
            config = build_config(config_cls, known.config, {**budgets, **overrides})
    check_run_dir(config.run_dir, resuming=bool(known.resume))
    if known.resume and (done := finished_run_message(known.resume, config.steps)):
        print(done)  # nothing to do: the run's files stay as they are
        return 0
    check_run_inputs(config)
    trainer_cls = load_trainer(algo)  # torch and transformers load here, once the options are known good
    check_model_loads(config.model)
    from mathgym.algos.warm_start import prepare_model

    trainer = trainer_cls(config, model_path=prepare_model(config))  # the tiny model's warm start comes first
    say = print if trainer.dist.is_main else (lambda *_: None)  # one voice under data-parallel training
    if known.resume:
        if not trainer.resume():
            say(f"mathgym: no checkpoint in {known.resume}; starting from step 0")
        elif trainer.step < config.steps:
            say(f"mathgym: resumed {known.resume} at step {trainer.step}; it stops at step {config.steps}")
        else:  # stopped after its last step, before its final evaluation and final/
            say(f"mathgym: resumed {known.resume} at step {trainer.step}, its last step; the final evaluation and final/ are left")
    try:
        result = trainer.train()
    except KeyboardInterrupt:
        print(interrupted_message(trainer), file=sys.stderr)
        try:
            trainer.close()  # the collector's envs and workers
        except Exception:  # noqa: BLE001 - already stopping; the message above is what matters
            pass
        return 130
    say(result.summary(config.env))
    return 0


def check_run_dir(run_dir: str, resuming: bool) -> None:
    """Refuse at once, before the training stack loads, a run directory the run may not use: one a live
    process trains in, or, for a new run, one that holds an earlier run (the trainer checks both again
    when it takes the directory). ``""``: the default directory, made new."""
    from mathgym.algos.run_dir import check_new_run_dir, check_not_in_use

    if not run_dir:
        return
    check_not_in_use(run_dir)
    if not resuming:
        check_new_run_dir(run_dir)


def finished_run_message(run_dir: str, steps: int) -> str | None:
    """What ``--resume`` of a finished run says (``None`` when ``steps`` asks for more than it trained,
    or the run stopped before writing ``final/``)."""
    from mathgym.algos.checkpoint import checkpoint_step, latest_checkpoint

    last = latest_checkpoint(run_dir)
    if last is None or not (Path(run_dir) / "final").is_dir() or checkpoint_step(last) != steps:
        return None
    return (
        f"mathgym: {run_dir} is finished: it trained its {steps} steps and saved {Path(run_dir) / 'final'}; nothing to do. "
        f"To train it further, raise --steps: {RESUME_HINT.format(run_dir=run_dir)} --steps N (N > {steps})"
    )


def _yaml_keys(path: str | None) -> set[str]:
    """Option names a YAML config file sets."""
    if not path:
        return set()
    return {str(k).replace("-", "_") for k in read_yaml_mapping(path)}


def load_trainer(algo: str) -> type:
    """The trainer class of ``algo`` (imports the training stack)."""
    from mathgym.algos.registry import get_algorithm

    _quiet_transformers()
    return get_algorithm(algo)[0]


def interrupted_message(trainer: Any) -> str:
    """What Ctrl-C during training says: where the last checkpoint is and how to go on."""
    from mathgym.algos.checkpoint import latest_checkpoint

    run_dir = trainer.run_dir
    last = latest_checkpoint(run_dir) if Path(run_dir).is_dir() else None
    saved = f"last checkpoint: {last}" if last is not None else "no checkpoint saved yet (see --save-every)"
    return f"\nmathgym train: interrupted at step {trainer.step}; {saved}.\nResume with: {RESUME_HINT.format(run_dir=run_dir)}"


def check_run_inputs(config: Any) -> None:
    """Check what the run will load before anything heavy starts: the env id, its options, the model."""
    import mathgym
    from mathgym.algos.configs import resolved_env_kwargs

    # Validate only: the id is kept as given ("module:Env-v0" stays importable in config.yaml and on resume).
    check_env_kwargs(mathgym.resolve_env_id(config.env), config.env_kwargs)
    try:
        resolved_env_kwargs(config, evaluation=True)
    except ConfigError as error:
        raise ConfigError(f"--eval-env-kwargs {dict(config.eval_env_kwargs)}: {error}") from None
    check_model_source(config.model)


@contextlib.contextmanager
def model_load_errors(model: str) -> Iterator[None]:
    """Turn what transformers raises for a model that cannot be loaded (``OSError``: a hub id that
    does not exist; ``ValueError``: a directory that is not a model) into one :class:`ConfigError` line."""
    try:
        yield
    except (OSError, ValueError) as err:
        if model == TINY_MODEL or isinstance(err, MathgymError):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"--model {model}: could not be loaded: {first}") from None


def check_model_loads(model: str) -> None:
    """Read ``model``'s config with transformers (a small file) so that a model that cannot be
    loaded is one message before the run starts. Adapter directories (LoRA ``final/``) are read
    by peft when the policy loads."""
    if model == TINY_MODEL or (Path(model).expanduser() / "adapter_config.json").is_file():
        return
    from transformers import AutoConfig

    with model_load_errors(model):
        AutoConfig.from_pretrained(str(Path(model).expanduser()) if Path(model).expanduser().exists() else model)


def check_model_source(model: str) -> None:
    """Raise :class:`ConfigError` when ``model`` is neither the tiny model, a model directory,
    nor a hub id that can be loaded (in the local cache when the hub is out of reach)."""
    if model == TINY_MODEL:
        return
    path = Path(model).expanduser()
    if path.exists():
        if path.is_dir() and not any((path / name).is_file() for name in ("config.json", "adapter_config.json")):
            raise ConfigError(
                f"--model {model}: the directory holds no config.json (nor adapter_config.json); give a model "
                "directory (e.g. a run's final/)."
            )
        return
    if model.startswith(("/", ".", "~")) or model.count("/") != 1 or "\\" in model:
        raise ConfigError(
            f"--model {model}: no such directory, and not a hub id (ORG/NAME). Give a local model directory "
            "(e.g. runs/<run>/final), a hub id such as Qwen/Qwen2.5-0.5B-Instruct, or 'tiny'."
        )
    from mathgym.envs.math.data import hub_offline

    if _in_hub_cache(model) or not hub_offline():
        return
    raise ConfigError(
        f"--model {model}: the Hugging Face hub cannot be reached (offline) and the model is not in the local cache. "
        "Download it once while online, or give a local model directory."
    )


def _in_hub_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return False
    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def _eval_parser() -> argparse.ArgumentParser:
    from mathgym.algos.configs import TrainConfig

    defaults = TrainConfig()
    parser = argparse.ArgumentParser(
        prog="mathgym eval",
        description="Evaluate a model on an env: pass@1 and pass@k on a fixed seed set (needs the train extra: " + extra_hint("train") + ").",
    )
    parser.add_argument(
        "--env", default=None,
        help=f"environment id [default: the env the model was trained on (its mathgym.json), else {defaults.env}]",
    )
    parser.add_argument(
        "--model", default=TINY_MODEL,
        help=f"hub id, local path or run's final/ directory ('tiny': warm-started tiny model) [default: {TINY_MODEL}]",
    )
    parser.add_argument("--env-kwargs", default=None, help="YAML mapping of env options (the test split is added when the env has one)")
    parser.add_argument("-o", "--option", metavar="KEY=VALUE", action="append", default=[], help=OPTION_HELP)
    parser.add_argument("--chat-template-kwargs", default=None, help=TEMPLATE_KWARGS_HELP)
    parser.add_argument("--tasks", type=int, default=200, help="number of tasks (seeds --seed .. --seed+tasks-1) [default: 200]")
    parser.add_argument("--seed", type=int, default=defaults.eval_seed, help=f"first task seed [default: {defaults.eval_seed}]")
    parser.add_argument("--k", type=int, default=1, help="samples per task for pass@k (1: greedy pass@1) [default: 1]")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature when k > 1 [default: 1.0]")
    parser.add_argument(
        "--max-new-tokens", type=int, default=None,
        help=f"longest completion per turn [default: the model's mathgym.json, else {defaults.max_new_tokens}]",
    )
    parser.add_argument("--device", default="auto", help="'auto', 'cpu' or 'cuda' [default: auto]")
    parser.add_argument("--progress", default="true", choices=("true", "false"), help="show a progress bar [default: true]")
    from mathgym.algos.selection import SELECT_RULES

    parser.add_argument(
        "--select", default=None, choices=SELECT_RULES,
        help="with --k > 1, also report the accuracy of the sample this rule picks: majority (most frequent answer), "
        "orm (needs --orm), prm-min/prm-last/prm-mean/prm-product (best PRM score, step scores aggregated so; needs --prm), "
        "prm-vote (answers weighted by PRM scores). maj@k is always reported when --k > 1",
    )
    parser.add_argument("--prm", default=None, metavar="DIR", help="process reward model: a directory (`mathgym train --algo prm`'s final/) or a hub id")
    parser.add_argument("--orm", default=None, metavar="DIR", help="outcome reward model (scores the whole solution as one step)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="let --prm/--orm run their repo's own model code (Qwen2.5-Math-PRM's ...ForProcessRewardModel)")
    parser.add_argument("--search", default="sample", choices=("sample", "beam"),
                        help="sample: k samples per task; beam: PRM-guided step-level beam search (needs --prm) [default: sample]")
    parser.add_argument("--beam-width", type=int, default=4, help="beam search: prefixes kept at each step [default: 4]")
    parser.add_argument("--expansions", type=int, default=4, help="beam search: next steps proposed per prefix [default: 4]")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="beam search: most steps [default: the env's turn budget, or 16 lines on a single-turn env]")
    parser.add_argument("--aggregate", default="min", choices=("min", "last", "mean", "product"),
                        help="beam search: how a prefix's step scores make its score [default: min]")
    parser.add_argument("--out", default=None, metavar="FILE", help="also write the results as JSON (e.g. eval.json)")
    return parser


def parse_command_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``parser``'s arguments, where an unknown option is one :class:`ConfigError` naming the options it most
    likely meant, as ``mathgym train`` says it (argparse would print its usage and ``unrecognized arguments``)."""
    args, unknown = parser.parse_known_args(list(argv))
    if not unknown:
        return args
    first = next((arg for arg in unknown if arg.startswith("-")), unknown[0])
    if not first.startswith("-"):
        raise ConfigError(f"Unexpected argument {first!r}; options look like --key value.")
    names = [option[2:] for action in parser._actions for option in action.option_strings if option.startswith("--")]
    name = first.lstrip("-").partition("=")[0]
    raise ConfigError(unknown_option_message(name.replace("-", "_"), [n.replace("-", "_") for n in names]))


def load_scorer(path: str | None, flag: str, device: str = "auto", trust_remote_code: bool = False) -> Any:
    """The reward model at ``path`` (``--prm``/``--orm``: a directory or a hub id), loaded by mathgym's
    ``load_prm``; ``None`` without a path."""
    if path is None:
        return None
    local = Path(path).expanduser()  # a path that is not here was refused by check_selection_args: else a hub id
    load_prm = prm_loader()
    if load_prm is None:
        raise ConfigError(f"{flag} {path}: this mathgym has no process reward models (no load_prm to read it with).")
    return load_prm(str(local) if local.exists() else path, device=device, trust_remote_code=trust_remote_code)


def prm_loader() -> Any:
    """mathgym's ``load_prm`` (the model lives with the agents; older layouts had it in ``mathgym.rewards.prm``), or ``None``."""
    import importlib

    for module in ("mathgym.agents.prm_model", "mathgym.rewards.prm"):
        try:
            return getattr(importlib.import_module(module), "load_prm")
        except ModuleNotFoundError as err:
            if err.name != module:  # the module is there but needs something missing: say so
                raise
        except AttributeError:
            continue
    return None


def check_selection_args(args: argparse.Namespace) -> None:
    """One message for a selection or search option that cannot work, before any model loads."""
    if args.select is not None and args.k < 2 and args.search == "sample":
        raise ConfigError(f"--select {args.select} picks one of several samples: give --k 2 or more.")
    if args.select is not None and args.select.startswith("prm") and args.prm is None:
        raise ConfigError(f"--select {args.select} needs a process reward model: --prm DIR.")
    if args.select == "orm" and args.orm is None:
        raise ConfigError("--select orm needs an outcome reward model: --orm DIR.")
    if args.search == "beam":
        if args.prm is None:
            raise ConfigError("--search beam is guided by a process reward model: --prm DIR.")
        if args.beam_width < 1 or args.expansions < 1 or (args.max_steps is not None and args.max_steps < 1):
            raise ConfigError("--beam-width, --expansions and --max-steps must be at least 1.")
    for flag, value in (("--prm", args.prm), ("--orm", args.orm)):
        # A hub id is "owner/name"; a value written as a path must exist here.
        if value is None or Path(value).expanduser().exists():
            continue
        if value.startswith(("/", ".", "~")):
            raise ConfigError(f"{flag} {value}: no such directory.")
        if value.count("/") != 1:
            raise ConfigError(f"{flag} {value}: no such directory (nor a hub id, owner/name); give a reward model trained "
                              "with `mathgym train --algo prm`, or a PRM's hub id.")


def eval_env(env: str | None, model: str, trained_on: str | None) -> tuple[str, str | None]:
    """The env ``mathgym eval`` runs on, and a line saying why when that is not plain from ``--env``.

    ``env`` is ``--env`` (``None`` when not given); ``trained_on`` the env named in the model's
    ``mathgym.json`` (``None``: a hub id or a directory without one, or the tiny model).
    """
    from mathgym.algos.configs import TrainConfig

    if env is None and trained_on is not None:
        return trained_on, f"mathgym eval: {model} was trained on {trained_on}; evaluating on it (--env to choose another)"
    if env is None:
        default = TrainConfig().env
        why = "the tiny model is warm-started on it" if model == TINY_MODEL else "no mathgym.json names the env it was trained on"
        return default, f"mathgym eval: evaluating on {default}, the default ({why}; --env to choose another)"
    if trained_on is not None and trained_on != env:
        return env, f"mathgym eval: note: {model} was trained on {trained_on}, not {env}; evaluating it on {env} as asked"
    return env, None


def run_eval(argv: Sequence[str]) -> int:
    from mathgym.agents.settings import read_model_settings
    from mathgym.algos.configs import TrainConfig, resolved_env_kwargs

    args = parse_command_args(_eval_parser(), argv)
    if args.tasks < 1 or args.k < 1:
        raise ConfigError(f"--tasks {args.tasks} --k {args.k}: both must be at least 1.")
    check_selection_args(args)
    user_kwargs = _with_options(args.env_kwargs, args.option)
    progress = args.progress == "true"
    env, note = eval_env(args.env, args.model, read_model_settings(Path(args.model).expanduser()).get("env"))
    config = TrainConfig(env=env, model=args.model, env_kwargs=user_kwargs, progress=progress)
    check_run_inputs(config)
    if note:
        print(note)
    _quiet_transformers()
    from mathgym.agents.policy import LLMPolicy
    from mathgym.algos.evaluate import Selector, evaluate_beam_search, evaluate_policy
    from mathgym.algos.warm_start import prepare_model

    # the reward models first: one that cannot load says so before the policy's warm start
    prm = load_scorer(args.prm, "--prm", args.device, args.trust_remote_code)
    orm = load_scorer(args.orm, "--orm", args.device, args.trust_remote_code)
    defaults = TrainConfig()
    path = prepare_model(config)
    # The model's mathgym.json: the env options and budgets it was trained and evaluated with.
    saved = read_model_settings(path)
    same_env = saved.get("env") == config.env
    eval_env_kwargs = {**defaults.eval_env_kwargs, **(saved.get("eval_env_kwargs", {}) if same_env else {})}
    config = TrainConfig(env=config.env, model=path, env_kwargs=user_kwargs, eval_env_kwargs=eval_env_kwargs)
    env_kwargs = resolved_env_kwargs(config, evaluation=True)
    generation = {**defaults.to_dict(), **(saved.get("generation", {}) if same_env else {})}
    max_new_tokens = args.max_new_tokens or int(generation["max_new_tokens"])
    with model_load_errors(args.model):
        policy = LLMPolicy.from_pretrained(path, device=args.device, chat_template_kwargs=_template_kwargs(args.chat_template_kwargs))
    if args.search == "beam":
        result = evaluate_beam_search(
            policy, config.env, env_kwargs, prm, num_tasks=args.tasks, seed=args.seed, beam_width=args.beam_width,
            expansions=args.expansions, max_steps=args.max_steps, aggregation=args.aggregate,
            temperature=args.temperature, max_new_tokens=max_new_tokens, progress=progress,
        )
    else:
        selector = Selector(args.select, prm, orm) if args.select else None
        result = evaluate_policy(
            policy, config.env, env_kwargs, num_tasks=args.tasks, seed=args.seed, k=args.k, temperature=args.temperature,
            max_new_tokens=max_new_tokens, max_episode_tokens=int(generation["max_episode_tokens"]),
            max_turns=int(generation["max_turns"]) or None, progress=progress, selector=selector,
        )
    print(eval_summary(config.env, args, result))
    print("statuses: " + ", ".join(f"{k}={v}" for k, v in sorted(result.statuses.items())))
    if args.out:
        record = {"env": config.env, "model": args.model, "tasks": args.tasks, "seed": args.seed, **result.as_metrics("")}
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    return 0


def eval_summary(env: str, args: argparse.Namespace, result: Any) -> str:
    """The line ``mathgym eval`` prints: pass@1, and pass@k, maj@k and the selection's accuracy when asked."""
    distinct = len(getattr(result, "task_ids", ()) or ())
    repeats = f", {distinct} distinct" if 0 < distinct < args.tasks else ""  # a data set smaller than the evaluation
    head = f"{env} ({args.tasks} tasks from seed {args.seed}{repeats}): "
    if result.select == "beam":
        return head + f"beam search ({args.beam_width} wide, {args.expansions} expansions) accuracy = {result.selected:.1%}"
    if args.k == 1:
        return head + f"pass@1 = {result.pass_at_1:.1%} (greedy)"
    parts = [f"pass@1 = {result.pass_at_1:.1%}", f"pass@{args.k} = {result.pass_at_k:.1%}", f"maj@{args.k} = {result.maj_at_k:.1%}"]
    if result.select is not None and result.select != "majority":
        parts.append(f"{result.select}@{args.k} = {result.selected:.1%}")
    return head + ", ".join(parts)


def _label_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mathgym label-steps",
        description="Label the steps of a policy's solutions by Monte-Carlo rollouts (Math-Shepherd): each step gets the "
        "share (soft) of K rollouts from it that reach the right answer, or whether any does (hard). Writes JSONL rows "
        "(problem, steps, labels, answer) for `mathgym train --algo prm`. With --convert, turns Math-Shepherd or PRM800K "
        "JSONL into the same rows instead.",
    )
    parser.add_argument("--env", default="MathReason-v0", help="env with a verifiable answer [default: MathReason-v0]")
    parser.add_argument("--model", default=TINY_MODEL, help=f"the policy: hub id, local path or run's final/ [default: {TINY_MODEL}]")
    parser.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="env constructor option")
    parser.add_argument("--chat-template-kwargs", default=None, help=TEMPLATE_KWARGS_HELP)
    parser.add_argument("--k", type=int, default=8, help="rollouts from each step [default: 8]")
    parser.add_argument("--tasks", type=int, default=100, help="problems (seeds --seed .. --seed+tasks-1) [default: 100]")
    parser.add_argument("--seed", type=int, default=0, help="first task seed [default: 0]")
    parser.add_argument("--samples", type=int, default=1,
                        help="solutions written per problem, each labelled (identical ones once); several give the PRM "
                        "right and wrong solutions of one problem to tell apart, as best-of-N asks of it [default: 1]")
    parser.add_argument("--kind", default="soft", choices=("soft", "hard"), help="label kind [default: soft]")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature [default: 1.0]")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="longest completion [default: the model's mathgym.json, else the training default]")
    parser.add_argument("--exclude-problems", default=None, metavar="FILE",
                        help="labelled-steps JSONL (your held-out labels, say) whose problems are skipped: small task "
                        "spaces repeat problems across seeds, and a PRM measured on problems it was trained on is "
                        "measured on what it memorised; --tasks seeds are still read, fewer are labelled")
    parser.add_argument("--out", required=True, metavar="FILE", help="JSONL file to write")
    parser.add_argument("--convert", default=None, metavar="FILE", help="read this Math-Shepherd / PRM800K / ProcessBench / RLHFlow / mathgym JSONL instead (training and evaluation also read them directly)")
    parser.add_argument("--device", default="auto", help="'auto', 'cpu' or 'cuda' [default: auto]")
    parser.add_argument("--progress", default="true", choices=("true", "false"), help="show a progress bar [default: true]")
    return parser


def run_label_steps(argv: Sequence[str]) -> int:
    """``mathgym label-steps``: Monte-Carlo step labels from a policy, or the public formats converted."""
    import time

    from mathgym.algos.step_labels import read_step_labels, write_rows

    args = parse_command_args(_label_parser(), argv)
    if args.convert:
        if not Path(args.convert).is_file():
            raise ConfigError(f"--convert {args.convert}: no such file.")
        try:
            count = write_rows(read_step_labels(args.convert), args.out)
        except ValueError as err:
            raise ConfigError(f"--convert {err}") from None
        print(f"mathgym label-steps: {count} labelled solutions from {args.convert} written to {args.out}")
        return 0
    if args.tasks < 1 or args.k < 1 or args.samples < 1:
        raise ConfigError(f"--tasks {args.tasks} --k {args.k} --samples {args.samples}: each must be at least 1.")
    excluded: set[str] = set()
    if args.exclude_problems:
        from mathgym.algos.prm_eval import load_labelled_steps

        if not Path(args.exclude_problems).is_file():
            raise ConfigError(f"--exclude-problems {args.exclude_problems}: no such file.")
        try:
            excluded = {row.problem for row in load_labelled_steps(args.exclude_problems)}
        except DatasetError as err:
            raise ConfigError(f"--exclude-problems {err}") from None
    from mathgym.agents.settings import read_model_settings
    from mathgym.algos.configs import TrainConfig, resolved_env_kwargs

    import mathgym

    env = mathgym.resolve_env_id(args.env)
    kwargs = parse_env_kwargs(args.option)
    config = TrainConfig(env=env, model=args.model, env_kwargs=kwargs, progress=args.progress == "true")
    check_run_inputs(config)
    _quiet_transformers()
    from tqdm.auto import tqdm

    from mathgym.agents.policy import LLMPolicy
    from mathgym.algos.step_labels import label_steps
    from mathgym.algos.step_policy import EnvSteps, PolicyStepWriter
    from mathgym.algos.warm_start import prepare_model

    path = prepare_model(config)
    saved = read_model_settings(path)
    generation = {**TrainConfig().to_dict(), **(saved.get("generation", {}) if saved.get("env") == env else {})}
    with model_load_errors(args.model):
        policy = LLMPolicy.from_pretrained(path, device=args.device, chat_template_kwargs=_template_kwargs(args.chat_template_kwargs))
    # the env options the model was trained with (its mathgym.json: e.g. its system prompt), then -o's
    steps = EnvSteps(env, resolved_env_kwargs(TrainConfig(env=env, model=path, env_kwargs=kwargs)))
    writer = PolicyStepWriter(policy, steps, temperature=args.temperature, seed=args.seed,
                              max_new_tokens=args.max_new_tokens or int(generation["max_new_tokens"]))
    bar = tqdm(total=args.tasks, desc=f"labelling steps on {env} (k={args.k})", unit="task", disable=not config.progress, leave=False)
    start = time.perf_counter()
    try:
        tasks = [steps.task(args.seed + i) for i in range(args.tasks)]
        if excluded:
            kept = [task for task in tasks if task.problem not in excluded]
            if not kept:
                raise ConfigError(f"--exclude-problems {args.exclude_problems} holds every problem of seeds {args.seed}.."
                                  f"{args.seed + args.tasks - 1}: nothing to label; raise --tasks or choose another --seed.")
            print(f"mathgym label-steps: {len(tasks) - len(kept)} of the {len(tasks)} problems are in "
                  f"{args.exclude_problems}: skipped")
            tasks = kept
            bar.total = len(tasks)
        rows = label_steps(tasks, writer, steps.check, k=args.k, kind=args.kind, on_task=lambda: bar.update(1),
                           samples=args.samples)
    finally:
        bar.close()
        steps.close()
    count = write_rows(rows, args.out)
    labelled = sum(len(r.steps) for r in rows)
    print(f"mathgym label-steps: {count} solutions, {labelled} steps labelled ({args.kind}, k={args.k}) "
          f"in {time.perf_counter() - start:.1f} s; written to {args.out}")
    return 0


def _quiet_transformers() -> None:
    """Hide transformers' per-load progress bars and advisory warnings in CLI output."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def main(name: str, argv: Sequence[str]) -> int:
    """Entry point used by ``mathgym.cli`` for ``train``, ``eval`` and ``label-steps``."""
    try:
        return {"train": run_train, "eval": run_eval, "label-steps": run_label_steps}[name](argv)
    except MathgymError as err:
        print(f"mathgym {name}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
