"""Training configuration: dataclasses whose field docs are the ``--help`` and the docs.

Each field is declared with :func:`option` (default + one help line). A config is built
from defaults, then a YAML file, then ``--key value`` overrides (:func:`build_config`),
and validated: a bad value raises :class:`~mathgym.errors.ConfigError` naming the field
and the allowed values. Algorithm configs subclass :class:`TrainConfig`
(``GRPOConfig`` in :mod:`mathgym.algos.grpo`, ...).

This module does not import torch.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from mathgym.errors import ConfigError

TINY_MODEL = "tiny"


def option(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = None) -> Any:
    """A config field with its help text (``factory`` for mutable defaults)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class TrainConfig:
    """Options every trainer shares (rollouts, model, optimisation, logging)."""

    env: str = option("MathReason-v0", "environment id to train on (any registered env)")
    env_kwargs: dict = option(
        help="env constructor options (YAML mapping); with the tiny model, system_prompt defaults to '' (short prompt)",
        factory=dict,
    )
    eval_env_kwargs: dict = option(
        help="options merged over env_kwargs for evaluation (the held-out split); keys the env lacks are dropped",
        factory=lambda: {"split": "test"},
    )
    model: str = option(TINY_MODEL, "hub id or local path of a causal LM; 'tiny' = embedded model + SFT warm start")
    warm_start_steps: int = option(400, "SFT steps of the tiny model's warm start (0: none; ignored for other models)")
    seed: int = option(0, "seed of tasks, sampling and initialisation")
    steps: int = option(60, "optimizer steps (one batch of rollouts each)")
    learning_rate: float = option(1e-4, "AdamW learning rate")
    lr_schedule: Literal["constant", "linear", "cosine"] = option("constant", "learning-rate schedule after warmup")
    warmup_steps: int = option(0, "linear learning-rate warmup steps")
    weight_decay: float = option(0.0, "AdamW weight decay")
    max_grad_norm: float = option(1.0, "gradient clipping norm (0: off)")
    grad_accum_steps: int = option(1, "micro-batches per optimizer step (splits the batch, same update)")
    num_tasks: int = option(16, "tasks (prompts) per batch")
    group_size: int = option(8, "samples per task (G)")
    temperature: float = option(1.0, "sampling temperature of rollouts")
    top_p: float = option(1.0, "nucleus sampling mass of rollouts")
    max_new_tokens: int = option(32, "longest completion per turn, in tokens")
    max_episode_tokens: int = option(1024, "token budget of a whole episode (prompt + every turn)")
    max_turns: int = option(0, "collector cap on turns per episode (0: the env's own budget)")
    backend: Literal["native", "hf", "vllm"] = option("native", "generation backend")
    vectorization_mode: Literal["sync", "async"] = option("sync", "gymnasium vector env mode")
    lora_r: int = option(0, "LoRA rank (0: full fine-tuning)")
    lora_alpha: int = option(16, "LoRA alpha")
    lora_target_modules: str = option("all-linear", "LoRA target modules: 'all-linear' or comma-separated names")
    device: str = option("auto", "'auto' (CUDA if available, else CPU), 'cpu', 'cuda', 'cuda:1', ...")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = option(
        "auto",
        "'auto': bf16 on a CUDA GPU that has it, else fp32; bfloat16: bf16 weights; "
        "float16: fp32 weights, fp16 autocast and a gradient scaler",
    )
    gradient_checkpointing: bool = option(False, "recompute activations in the backward pass: less memory, more compute")
    threads: int = option(0, "torch CPU threads (0: torch's default)")
    run_dir: str = option("", "run directory (default runs/<algo>-<env>-<time>)")
    save_every: int = option(20, "checkpoint every N steps (0: only at the end)")
    eval_every: int = option(0, "evaluate every N steps (0: only before and after)")
    eval_tasks: int = option(200, "held-out tasks of the before/after evaluation (0: skip)")
    eval_seed: int = option(10_000, "first seed of the fixed evaluation task set")
    eval_samples: int = option(1, "samples per eval task (k of pass@k; 1 = greedy pass@1)")
    log_tensorboard: bool = option(False, "also log to TensorBoard (when installed)")
    log_wandb: bool = option(False, "also log to Weights & Biases (when installed)")
    progress: bool = option(True, "show a progress bar")

    def validate(self) -> None:
        """Raise :class:`ConfigError` for a field outside its allowed values or range."""
        for f in dataclasses.fields(self):
            check_literal(f.name, getattr(self, f.name), field_type(type(self), f.name))
        positive = ("steps", "num_tasks", "group_size", "max_new_tokens", "max_episode_tokens", "grad_accum_steps", "eval_samples")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; it must be at least 1.")
        for name in ("warm_start_steps", "warmup_steps", "save_every", "eval_every", "eval_tasks", "lora_r", "max_turns", "threads"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; it must be 0 or more.")
        if self.learning_rate <= 0:
            raise ConfigError(f"learning_rate={self.learning_rate!r} is not allowed; it must be > 0.")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p={self.top_p!r} is not allowed; choose a value in (0, 1].")
        if self.temperature < 0:
            raise ConfigError(f"temperature={self.temperature!r} is not allowed; it must be >= 0.")
        if (self.num_tasks * self.group_size) % self.grad_accum_steps:
            raise ConfigError(
                f"grad_accum_steps={self.grad_accum_steps} must divide the batch num_tasks * group_size = "
                f"{self.num_tasks * self.group_size}."
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def env_accepts(env_id: str, name: str) -> bool:
    """Whether env ``env_id``'s constructor takes a keyword ``name``."""
    import inspect

    import gymnasium as gym

    import mathgym  # noqa: F401  (registers the envs)

    entry = gym.spec(env_id).entry_point
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(__import__(module, fromlist=[attr]), attr)
    # A class whose __init__ passes **kwargs on is followed up its MRO to the __init__ that names them.
    inits = [k.__dict__["__init__"] for k in entry.__mro__ if "__init__" in k.__dict__] if isinstance(entry, type) else [entry]
    for init in inits:
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            return False
        if name in params:
            return True
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return False
    return not isinstance(entry, type)  # a factory taking **kwargs: assume it does


def resolved_env_kwargs(config: TrainConfig, evaluation: bool = False) -> dict[str, Any]:
    """The env options a run uses: ``env_kwargs`` (+ the tiny model's empty system prompt),
    and for evaluation ``eval_env_kwargs`` on top (keys the env does not take dropped)."""
    kwargs = dict(config.env_kwargs)
    if config.model == TINY_MODEL and "system_prompt" not in kwargs and env_accepts(config.env, "system_prompt"):
        kwargs["system_prompt"] = ""
    if evaluation:
        kwargs.update({k: v for k, v in config.eval_env_kwargs.items() if env_accepts(config.env, k)})
    return kwargs


def field_type(cls: type, name: str) -> Any:
    """The resolved annotation of field ``name`` of dataclass ``cls``."""
    return typing.get_type_hints(cls)[name]


def check_literal(name: str, value: Any, annotation: Any) -> None:
    """Raise :class:`ConfigError` if ``annotation`` is a ``Literal`` and ``value`` is not in it."""
    if typing.get_origin(annotation) is Literal:
        allowed = typing.get_args(annotation)
        if value not in allowed:
            raise ConfigError(f"{name}={value!r} is not allowed; choose one of {', '.join(map(repr, allowed))}.")


def config_help(cls: type) -> dict[str, str]:
    """Field name → help text (with allowed values for ``Literal`` fields)."""
    out = {}
    for f in dataclasses.fields(cls):
        text = f.metadata.get("help", "")
        annotation = field_type(cls, f.name)
        if typing.get_origin(annotation) is Literal:
            text += f" (one of: {', '.join(map(str, typing.get_args(annotation)))})"
        out[f.name] = text
    return out


def parse_value(cls: type, name: str, raw: Any) -> Any:
    """Convert ``raw`` (a string from the command line, or a YAML value) to field ``name``'s type."""
    names = {f.name for f in dataclasses.fields(cls)}
    if name not in names:
        import difflib

        close = difflib.get_close_matches(name, names, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ConfigError(f"Unknown option {name!r} for {cls.__name__}.{hint}")
    annotation = field_type(cls, name)
    origin = typing.get_origin(annotation)
    if isinstance(raw, BareFlag) and annotation is not bool:
        raise ConfigError(f"Option --{name.replace('_', '-')} needs a value.")
    if origin is Literal:
        literal = raw if isinstance(raw, str) and any(isinstance(a, str) for a in typing.get_args(annotation)) else raw
        check_literal(name, literal, annotation)
        return literal
    value = yaml.safe_load(raw) if isinstance(raw, str) else raw
    try:
        if annotation is bool:
            if not isinstance(value, bool):
                raise ValueError
            return value
        if annotation is int:
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError
            return int(float(value))
        if annotation is float:
            return float(value)
        if annotation is str:
            return raw if isinstance(raw, str) else str(value)
        if annotation is dict or origin is dict:
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise ValueError
            return dict(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={raw!r} is not a valid {getattr(annotation, '__name__', annotation)}.") from None
    return value


def build_config(cls: type, yaml_path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Any:
    """Defaults ← YAML file ← overrides; validated. Keys may use ``-`` or ``_``.

    Example:
        >>> cfg = build_config(TrainConfig, overrides={"steps": "3"})
        >>> cfg.steps
        3
    """
    values: dict[str, Any] = {}
    if yaml_path is not None:
        try:
            loaded = yaml.safe_load(Path(yaml_path).read_text()) or {}
        except OSError as err:
            raise ConfigError(f"Cannot read config file {yaml_path}: {err}") from None
        if not isinstance(loaded, Mapping):
            raise ConfigError(f"Config file {yaml_path} must hold a YAML mapping of option: value.")
        values.update({str(k).replace("-", "_"): v for k, v in loaded.items()})
    values.update({str(k).replace("-", "_"): v for k, v in (overrides or {}).items()})
    values.pop("algo", None)
    parsed = {k: parse_value(cls, k, v) for k, v in values.items()}
    config = cls(**parsed)
    config.validate()
    return config


def save_config(config: Any, path: str | Path, extra: Mapping[str, Any] | None = None) -> None:
    """Write ``config`` (plus ``extra`` keys such as ``algo``) as YAML."""
    data = {**(extra or {}), **dataclasses.asdict(config)}
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False))


class BareFlag(str):
    """The value of a command-line option given without one (``--log-wandb``): ``true`` for booleans."""


def split_overrides(argv: Sequence[str]) -> dict[str, str]:
    """``["--steps", "3", "--lr-schedule=cosine", "--log-wandb"]`` →
    ``{"steps": "3", "lr_schedule": "cosine", "log_wandb": "true"}``.

    A bare ``--key`` (followed by another option or by nothing) means ``true``: the way to
    switch on a boolean option; any other option then reports that it needs a value.
    """
    out: dict[str, str] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ConfigError(f"Unexpected argument {arg!r}; options look like --key value.")
        key, sep, value = arg[2:].partition("=")
        if not sep:
            following = args[i + 1] if i + 1 < len(args) else None
            if following is None or following.startswith("--"):
                value = BareFlag("true")
            else:
                value = following
                i += 1
        out[key.replace("-", "_")] = value
        i += 1
    return out
