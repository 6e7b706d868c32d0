"""Options as dataclasses: the machinery every config of mathgym uses (no torch, no mathgym layer above errors).

A config is a dataclass whose fields are declared with :func:`option` (default + one help
line: the ``--help`` text and the docs). :func:`build_config` builds one from defaults, a
YAML file and ``--key value`` overrides, and validates it: a value outside a ``Literal``
field's choices raises :class:`~mathgym.errors.ConfigError` naming the field and the allowed
values. Variants chosen by such a field dispatch through a table (``{choice: function}``)
with :func:`pick`, so adding a variant is adding a row and a ``Literal`` value.

Example:
    >>> from dataclasses import dataclass
    >>> from typing import Literal
    >>> @dataclass
    ... class Demo:
    ...     steps: int = option(3, "optimizer steps")
    ...     mode: Literal["fast", "slow"] = option("fast", "how to run")
    >>> build_config(Demo, overrides={"steps": "5"}).steps
    5
    >>> config_help(Demo)["mode"]
    'how to run (one of: fast, slow)'
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from mathgym.errors import ConfigError, require_option

T = TypeVar("T")


def option(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = None) -> Any:
    """A config field with its help text (``factory`` for mutable defaults)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})


def pick(table: Mapping[str, T], name: str, value: str) -> T:
    """``table[value]``, or :class:`~mathgym.errors.ConfigError` naming option ``name`` and the table's keys.

    The tables of variants (loss aggregations, KL estimators, schedules...) are looked up through it,
    so that a pure function called with an unknown variant says what is allowed.

    Example:
        >>> pick({"sum": sum, "max": max}, "reduction", "max")([1, 3])
        3
    """
    require_option(name, value, tuple(table))
    return table[value]


def check_mapping_keys(name: str, value: Mapping[Any, Any]) -> None:
    """Reject a key such as ``difficulty:99``: YAML read ``{difficulty:99}`` (no space) as one key."""
    for key, item in value.items():
        if item is None and isinstance(key, str) and ":" in key:
            k, _, v = key.partition(":")
            raise ConfigError(
                f"{name}: the key {key!r} looks like KEY:VALUE; YAML needs a space after the colon: "
                f"{{{k}: {v}}}."
            )


def check_literals(config: Any) -> None:
    """Raise :class:`ConfigError` for a ``Literal`` field of dataclass ``config`` outside its choices."""
    for f in dataclasses.fields(config):
        check_literal(f.name, getattr(config, f.name), field_type(type(config), f.name))


def field_type(cls: type, name: str) -> Any:
    """The resolved annotation of field ``name`` of dataclass ``cls``."""
    return typing.get_type_hints(cls)[name]


def check_literal(name: str, value: Any, annotation: Any) -> None:
    """Raise :class:`ConfigError` if ``annotation`` is a ``Literal`` and ``value`` is not in it."""
    if typing.get_origin(annotation) is Literal:
        require_option(name, value, typing.get_args(annotation))


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
        raise ConfigError(unknown_option_message(name, names))
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


def unknown_option_message(name: str, names: Sequence[str]) -> str:
    """What an unknown ``--name`` says, with the options of ``names`` it most likely meant.

    Example:
        >>> unknown_option_message("taks", ["tasks", "seed"])
        'Unknown option --taks. Did you mean --tasks? See --help for the options.'
    """
    close = suggest_names(name, names)
    hint = f" Did you mean {' or '.join('--' + c.replace('_', '-') for c in close)}?" if close else ""
    return f"Unknown option --{name.replace('_', '-')}.{hint} See --help for the options."


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
    """Defaults ← YAML file ← overrides; validated (the class's ``validate()``, else its ``Literal``
    fields). Keys may use ``-`` or ``_``; see the module's example."""
    values: dict[str, Any] = {}
    if yaml_path is not None:
        loaded = read_yaml_mapping(yaml_path)
        values.update({str(k).replace("-", "_"): v for k, v in loaded.items()})
    values.update({str(k).replace("-", "_"): v for k, v in (overrides or {}).items()})
    values.pop("algo", None)
    parsed = {k: parse_value(cls, k, v) for k, v in values.items()}
    config = cls(**parsed)
    validate = getattr(config, "validate", None)
    validate() if validate is not None else check_literals(config)
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


def parse_env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """``-o KEY=VALUE`` env options: ``["difficulty=2", "dataset=x.jsonl"]`` → ``{"difficulty": 2, "dataset": "x.jsonl"}``.

    A value is a Python literal where it reads as one, else the text itself.
    """
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-o {pair!r}: an env option looks like KEY=VALUE (e.g. -o difficulty=2).")
        try:
            kwargs[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            kwargs[key] = raw
    return kwargs
