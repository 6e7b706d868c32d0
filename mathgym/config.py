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
        help="env constructor options (YAML mapping), over those saved with the model in its mathgym.json",
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
    vectorization_mode: Literal["sync", "async"] = option("sync", "gymnasium vector env mode (executor local)")
    executor: Literal["local", "ray"] = option(
        "local",
        "where env steps and their rewards run: 'local' (gym.make_vec in this process) or 'ray' (Ray actors; "
        "joins the cluster at RAY_ADDRESS, else starts a local one; same results; needs mathgym[ray])",
    )
    ray_actors: int = option(0, "executor ray: env-host actors (0: one per CPU of the Ray cluster)")
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
    log_samples: int = option(4, "episodes per step written to samples.jsonl (0: none)")
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
        non_negative = (
            "warm_start_steps", "warmup_steps", "save_every", "eval_every", "eval_tasks", "lora_r", "max_turns", "threads",
            "log_samples", "ray_actors",
        )
        for name in non_negative:
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


def _entry_inits(env_id: str) -> tuple[bool, list[Any]]:
    """The callables that receive ``gym.make(env_id, **kwargs)``'s keywords: the entry point,
    or a class's ``__init__`` and, where it passes ``**kwargs`` on, its bases' up the MRO."""
    import gymnasium as gym

    import mathgym  # registers the envs

    entry = gym.spec(mathgym.resolve_env_id(env_id)).entry_point  # also "module:Env-v0" ids
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(__import__(module, fromlist=[attr]), attr)
    if not isinstance(entry, type):
        return False, [entry]
    return True, [k.__dict__["__init__"] for k in entry.__mro__ if "__init__" in k.__dict__ and k is not object]


def env_options(env_id: str) -> list[str] | None:
    """The keyword options env ``env_id``'s constructor takes, or ``None`` when it takes any (``**kwargs``)."""
    import inspect

    names: list[str] = []
    is_class, inits = _entry_inits(env_id)
    for init in inits:
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            return None
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        names += [n for n, p in params.items() if p.kind in kinds and n != "self" and n not in names]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return names
    return names if is_class else None  # a factory taking **kwargs: assume it takes any


def env_accepts(env_id: str, name: str) -> bool:
    """Whether env ``env_id``'s constructor takes a keyword ``name``."""
    options = env_options(env_id)
    return options is None or name in options


def check_env_kwargs(env_id: str, kwargs: Mapping[str, Any], option_name: str = "env_kwargs") -> None:
    """Raise :class:`ConfigError` when ``kwargs`` names an option env ``env_id`` does not take.

    The message names the env's real options and the closest one.
    """
    import difflib

    check_mapping_keys(option_name, kwargs)
    options = env_options(env_id)
    unknown = [k for k in kwargs if options is not None and k not in options]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), options or [], n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"{env_id} has no option {unknown[0]!r}.{hint} Its options: {', '.join(options or [])}."
        )


def check_mapping_keys(name: str, value: Mapping[Any, Any]) -> None:
    """Reject a key such as ``difficulty:99``: YAML read ``{difficulty:99}`` (no space) as one key."""
    for key, item in value.items():
        if item is None and isinstance(key, str) and ":" in key:
            k, _, v = key.partition(":")
            raise ConfigError(
                f"{name}: the key {key!r} looks like KEY:VALUE; YAML needs a space after the colon: "
                f"{{{k}: {v}}}."
            )


#: The file beside a model's weights that holds the env options it was trained with.
MODEL_SETTINGS_FILE = "mathgym.json"

#: Env options that shape the prompt itself: they travel with a model to any env that takes them.
PROMPT_KEYS = ("system_prompt",)


def read_model_settings(model: str | Path) -> dict[str, Any]:
    """The ``mathgym.json`` of a model directory (``{}`` for a hub id or a directory without one).

    Keys: ``env_kwargs`` (the env options the model was trained with), and optionally ``env``
    (the env it was trained on), ``eval_env_kwargs`` and ``generation`` (``max_new_tokens``,
    ``max_episode_tokens``, ``max_turns`` of its evaluation).
    """
    import json

    if not str(model):
        return {}
    path = Path(str(model)) / MODEL_SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path} is not valid JSON ({err}); fix or delete it.") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("env_kwargs", {}), dict):
        raise ConfigError(f"{path} must hold a JSON object whose 'env_kwargs' is an object.")
    return settings


def write_model_settings(path: str | Path, settings: Mapping[str, Any]) -> Path:
    """Write ``settings`` as the ``mathgym.json`` of model directory ``path``."""
    import json

    out = Path(path) / MODEL_SETTINGS_FILE
    out.write_text(json.dumps(dict(settings), indent=2, sort_keys=True, default=str) + "\n")
    return out


def model_env_kwargs(env_id: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The saved env options that apply to ``env_id``: all of them on the env the model was
    trained on (or when the file names no env), only :data:`PROMPT_KEYS` on another env;
    in both cases only options the env's constructor takes."""
    same_env = settings.get("env") in (None, env_id)
    saved = settings.get("env_kwargs", {})
    return {k: v for k, v in saved.items() if (same_env or k in PROMPT_KEYS) and env_accepts(env_id, k)}


def model_generation_defaults(model: str | Path, explicit: set[str] = frozenset()) -> dict[str, Any]:
    """The budgets (``max_new_tokens``, ``max_episode_tokens``, ``max_turns``) saved in ``model``'s
    ``mathgym.json``, less the options in ``explicit`` (set by the user, which win)."""
    saved = read_model_settings(model).get("generation", {})
    return {k: v for k, v in saved.items() if k in ("max_new_tokens", "max_episode_tokens", "max_turns") and k not in explicit}


def resolved_env_kwargs(config: TrainConfig, evaluation: bool = False, model_dir: str | Path | None = None) -> dict[str, Any]:
    """The env options a run uses: those saved with the model (``mathgym.json`` in ``model_dir``,
    default ``config.model``), then ``env_kwargs``, and for evaluation ``eval_env_kwargs`` on top
    (keys the env does not take dropped)."""
    kwargs = model_env_kwargs(config.env, read_model_settings(config.model if model_dir is None else model_dir))
    kwargs.update(config.env_kwargs)
    if evaluation:
        kwargs.update({k: v for k, v in config.eval_env_kwargs.items() if env_accepts(config.env, k)})
    return kwargs


def vector_env_factory(config: TrainConfig) -> Any:
    """The vector-env factory of ``config.executor``: ``None`` for ``local`` (``gym.make_vec``),
    a :class:`mathgym.integrations.ray.RayExecutor` for ``ray`` (the caller closes it)."""
    if config.executor != "ray":
        return None
    try:
        from mathgym.integrations.ray import RayExecutor
    except ImportError as err:
        raise ConfigError(f"executor='ray' needs Ray ({err}); install it with: pip install 'mathgym[ray]'") from None
    return RayExecutor(num_actors=config.ray_actors or None)


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
    names = [f.name for f in dataclasses.fields(cls)]
    if name not in names:
        close = suggest_names(name, names)
        hint = f" Did you mean {' or '.join('--' + c.replace('_', '-') for c in close)}?" if close else ""
        raise ConfigError(f"Unknown option --{name.replace('_', '-')}.{hint} See --help for the options.")
    annotation = field_type(cls, name)
    origin = typing.get_origin(annotation)
    if isinstance(raw, BareFlag) and annotation is not bool:
        raise ConfigError(f"Option --{name.replace('_', '-')} needs a value.")
    if origin is Literal:
        literal = raw if isinstance(raw, str) and any(isinstance(a, str) for a in typing.get_args(annotation)) else raw
        check_literal(name, literal, annotation)
        return literal
    try:
        value = yaml.safe_load(raw) if isinstance(raw, str) else raw
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
            value = dict(value)
    except (TypeError, ValueError, yaml.YAMLError):
        raise ConfigError(f"{name}={raw!r} is not a valid {getattr(annotation, '__name__', annotation)}.") from None
    if isinstance(value, Mapping):
        check_mapping_keys(name, value)
    return value


def suggest_names(name: str, names: Sequence[str], n: int = 2) -> list[str]:
    """The options a misspelt ``name`` most likely meant: abbreviations (``lr`` → ``learning_rate``),
    then prefixes (``learn`` → ``learning_rate``), then close spellings.

    Example:
        >>> suggest_names("lr", ["learning_rate", "lr_schedule", "seed"])
        ['learning_rate', 'lr_schedule']
    """
    import difflib

    def initials(option: str) -> str:
        return "".join(part[:1] for part in option.split("_"))

    key = name.replace("-", "_").lower()
    found = [o for o in names if initials(o) == key]
    found += [o for o in names if o.startswith(key) and o not in found]
    found += [o for o in difflib.get_close_matches(key, names, n=n, cutoff=0.6) if o not in found]
    return found[:n]


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The ``option: value`` mapping of a YAML config file; :class:`ConfigError` when it is
    missing, unreadable, not YAML or not a mapping."""
    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ConfigError(f"Cannot read config file {path}: {err.strerror or err}.") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"Config file {path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"Config file {path} must hold a YAML mapping of option: value (it holds a {type(loaded).__name__}).")
    return dict(loaded)


def build_config(cls: type, yaml_path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Any:
    """Defaults ← YAML file ← overrides; validated. Keys may use ``-`` or ``_``.

    Example:
        >>> cfg = build_config(TrainConfig, overrides={"steps": "3"})
        >>> cfg.steps
        3
    """
    values: dict[str, Any] = {}
    if yaml_path is not None:
        loaded = read_yaml_mapping(yaml_path)
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
