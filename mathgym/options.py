"""Options as dataclasses: the machinery every config of mathgym uses (no torch, no mathgym layer above errors).

A config is a dataclass whose fields are declared with :func:`option` (default + one help
line: the ``--help`` text and the docs; for a number, its allowed range as a :class:`Bounds`).
:func:`build_config` builds one from defaults, a YAML file and ``--key value`` overrides, and
validates it: a value outside a ``Literal`` field's choices or a number outside its bounds raises
:class:`~mathgym.errors.ConfigError` naming the field, the value and what is allowed
(:func:`check_options`). Variants chosen by such a field dispatch through a table
(``{choice: function}``) with :func:`pick`, so adding a variant is adding a row and a ``Literal``
value; what each row reads is declared beside it (``{choice: (option, ...)}``), so the row is
called with those alone (:func:`select`) and an option set for a row that ignores it is pointed
out (:func:`warn_unused_options`). A subclass changes inherited defaults with :func:`override_defaults`.

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
    >>> @dataclass
    ... class Bounded:
    ...     rate: float = option(0.5, "a rate", at_least=0, below=1)
    >>> config_help(Bounded)["rate"]
    'a rate (in [0, 1))'
    >>> build_config(Bounded, overrides={"rate": "1"})
    Traceback (most recent call last):
    ...
    mathgym.errors.ConfigError: rate=1.0 is not allowed; choose a value in [0, 1).
"""

from __future__ import annotations

import ast
import dataclasses
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

import yaml

from mathgym.errors import ConfigError, require_option

T = TypeVar("T")


class Bounds(NamedTuple):
    """The allowed range of a number option: ``low`` / ``high`` (``None``: unbounded), each
    included unless its ``*_open`` flag is set."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        """Whether ``value`` is in the range."""
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False  # written so that NaN is outside every range
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def pair(self, integer: bool) -> tuple[Any, Any] | None:
        """The two values of a closed range of two integers (``(0, 1)``), else ``None``."""
        closed = self.low is not None and self.high is not None and not (self.low_open or self.high_open)
        return (self.low, self.high) if integer and closed and self.high - self.low == 1 else None  # type: ignore[operator]

    def describe(self, integer: bool = False) -> str:
        """The range as the help shows it: ``>= 1``, ``> 0``, ``in (0, 1]``, ``0 or 1`` (``integer``: of an int option).

        Example:
            >>> Bounds(0, 1, high_open=True).describe(), Bounds(low=0, low_open=True).describe(), Bounds(0, 1).describe(True)
            ('in [0, 1)', '> 0', '0 or 1')
        """
        if (pair := self.pair(integer)) is not None:
            return f"{pair[0]} or {pair[1]}"
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return f"{'<' if self.high_open else '<='} {self.high}"

    def requirement(self, integer: bool = False) -> str:
        """What an error says a value outside the range must be: ``it must be at least 1``,
        ``choose a value in (0, 1]``, ``choose 0 or 1``."""
        if (pair := self.pair(integer)) is not None:
            return f"choose {pair[0]} or {pair[1]}"
        if self.low is not None and self.high is not None:
            return f"choose a value {self.describe()}"
        if self.low is not None and not self.low_open:
            return f"it must be at least {self.low}"
        if self.high is not None and not self.high_open:
            return f"it must be at most {self.high}"
        return f"it must be {self.describe()}"


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    factory: Any = None,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
) -> Any:
    """A config field with its help text (``factory`` for mutable defaults) and, for a number, its
    allowed range: ``at_least`` / ``above`` a lower bound (included / not), ``at_most`` / ``below``
    an upper one. The range is checked where the config is built (:func:`check_bounds`) and shown
    in the help (:func:`config_help`)."""
    metadata: dict[str, Any] = {"help": help}
    if at_least is not None and above is not None or at_most is not None and below is not None:
        raise TypeError("option(): give at most one of at_least / above and one of at_most / below")
    if any(b is not None for b in (at_least, above, at_most, below)):
        low, high = (above if at_least is None else at_least), (below if at_most is None else at_most)
        metadata["bounds"] = Bounds(low, high, low_open=above is not None, high_open=below is not None)
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def field_default(f: dataclasses.Field) -> Any:
    """The default value of dataclass field ``f`` (a fresh one for a ``default_factory``)."""
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def override_defaults(**defaults: Any) -> Callable[[type], type]:
    """Class decorator, under ``@dataclass``: redeclare inherited fields with new ``defaults``,
    keeping their type, help and bounds (declared once, on the base class).

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Base:
        ...     steps: int = option(3, "optimizer steps", at_least=1)
        >>> @dataclass
        ... @override_defaults(steps=10)
        ... class Longer(Base):
        ...     pass
        >>> Longer().steps, config_help(Longer)["steps"]
        (10, 'optimizer steps (>= 1)')
    """

    def apply(cls: type) -> type:
        inherited = {f.name: f for base in reversed(cls.__mro__[1:]) if dataclasses.is_dataclass(base) for f in dataclasses.fields(base)}
        hints = {name: hint for base in reversed(cls.__mro__[1:]) for name, hint in vars(base).get("__annotations__", {}).items()}
        annotations = cls.__dict__.get("__annotations__", {})
        for name, value in defaults.items():
            if name not in inherited:
                raise TypeError(f"override_defaults: {cls.__name__} inherits no option {name!r}")
            annotations[name] = hints[name]
            setattr(cls, name, field(default=value, metadata=inherited[name].metadata))
        cls.__annotations__ = annotations
        return cls

    return apply


def defaults_of(cls: type, *names: str) -> dict[str, Any]:
    """The defaults of options ``names`` of dataclass ``cls`` (to restore a base's defaults with
    :func:`override_defaults`)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return {name: field_default(fields[name]) for name in names}


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


def check_bounds(config: Any) -> None:
    """Raise :class:`ConfigError` for a number field of dataclass ``config`` outside its :class:`Bounds`,
    naming the field, the value and the allowed range."""
    for f in dataclasses.fields(config):
        bounds, value = f.metadata.get("bounds"), getattr(config, f.name)
        if bounds is not None and not bounds.contains(value):
            requirement = bounds.requirement(field_type(type(config), f.name) is int)
            raise ConfigError(f"{f.name}={value!r} is not allowed; {requirement}.")


def check_options(config: Any) -> None:
    """Every check a field declares: its ``Literal`` choices and its bounds."""
    check_literals(config)
    check_bounds(config)


#: ``{choice: names of what the row reads}``: the inputs of a table of variants, beside the table.
VariantInputs = Mapping[str, Sequence[str]]


def select(inputs: VariantInputs, choice: str, available: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of row ``choice``: the entries of ``available`` that ``inputs[choice]`` names.

    Example:
        >>> select({"plain": (), "capped": ("cap",)}, "capped", {"cap": 3.0, "eps": 0.2})
        {'cap': 3.0}
    """
    return {name: available[name] for name in inputs[choice]}


class UnusedOptionWarning(UserWarning):
    """An option is set to a value that the chosen variant does not read (it has no effect)."""


_UNUSED_WARNED: set[str] = set()  # each such warning once per process (a run validates its config more than once)


def unused_options(config: Any, variants: Mapping[str, VariantInputs]) -> list[str]:
    """One line per option of ``config`` set away from its default that the chosen row does not read,
    though another row of the same choice does (``dual_clip_c`` with ``policy_loss=clip``).

    Args:
        config: A dataclass config.
        variants: ``{choice field: {choice: options the row reads}}``; a choice field ``config``
            lacks is skipped.
    """
    fields = {f.name: f for f in dataclasses.fields(config)}
    lines = []
    for choice_field, inputs in variants.items():
        if choice_field not in fields:
            continue
        choice = getattr(config, choice_field)
        for name in dict.fromkeys(n for row in inputs.values() for n in row):
            if name not in fields or name in inputs.get(choice, ()) or getattr(config, name) == field_default(fields[name]):
                continue
            readers = ", ".join(c for c, row in inputs.items() if name in row)
            lines.append(f"{name}={getattr(config, name)!r} has no effect with {choice_field}={choice!r} (read by {choice_field} {readers}).")
    return lines


def warn_unused_options(config: Any, variants: Mapping[str, VariantInputs]) -> None:
    """Warn (:class:`UnusedOptionWarning`) about each option :func:`unused_options` finds: one line
    each, ``mathgym: UnusedOptionWarning: ...`` (the option's value is the culprit, not a line of code)."""
    for line in unused_options(config, variants):
        if line not in _UNUSED_WARNED:
            _UNUSED_WARNED.add(line)
            warnings.warn_explicit(line, UnusedOptionWarning, "mathgym", 0, module="mathgym.options")


def field_type(cls: type, name: str) -> Any:
    """The resolved annotation of field ``name`` of dataclass ``cls``."""
    return typing.get_type_hints(cls)[name]


def check_literal(name: str, value: Any, annotation: Any) -> None:
    """Raise :class:`ConfigError` if ``annotation`` is a ``Literal`` and ``value`` is not in it."""
    if typing.get_origin(annotation) is Literal:
        require_option(name, value, typing.get_args(annotation))


def config_help(cls: type) -> dict[str, str]:
    """Field name → help text (with the allowed values of a ``Literal`` field, the range of a bounded one)."""
    out = {}
    for f in dataclasses.fields(cls):
        text = f.metadata.get("help", "")
        annotation = field_type(cls, f.name)
        if typing.get_origin(annotation) is Literal:
            text += f" (one of: {', '.join(map(str, typing.get_args(annotation)))})"
        if "bounds" in f.metadata:
            text += f" ({f.metadata['bounds'].describe(annotation is int)})"
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
    """Defaults ← YAML file ← overrides; validated (the class's ``validate()``, else
    :func:`check_options`). Keys may use ``-`` or ``_``; see the module's example."""
    values: dict[str, Any] = {}
    if yaml_path is not None:
        loaded = read_yaml_mapping(yaml_path)
        values.update({str(k).replace("-", "_"): v for k, v in loaded.items()})
    values.update({str(k).replace("-", "_"): v for k, v in (overrides or {}).items()})
    values.pop("algo", None)
    parsed = {k: parse_value(cls, k, v) for k, v in values.items()}
    config = cls(**parsed)
    validate = getattr(config, "validate", None)
    validate() if validate is not None else check_options(config)
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
