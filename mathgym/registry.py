"""Registration of mathgym's environments with gymnasium, plugins, the catalogue, and what each
env's constructor takes (:func:`env_options`, :func:`check_env_kwargs`)."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

from mathgym.errors import ConfigError, UnknownEnvError
from mathgym.catalogue import EnvFacts
from mathgym.options import check_mapping_keys

PLUGIN_GROUP = "mathgym.envs"


@dataclass(frozen=True)
class EnvInfo:
    """A catalogue entry: the id, a one-line description, where it came from and the facts its
    registration declares (:class:`mathgym.catalogue.EnvFacts`; ``None``: its class's, if any)."""

    env_id: str
    description: str
    source: str  # "mathgym" or the plugin's distribution / entry-point name
    facts: EnvFacts | None = None


_CATALOGUE: dict[str, EnvInfo] = {}
_plugins_loaded = False


def register_env(
    env_id: str, entry_point: str, description: str | None = None, *, source: str = "mathgym", facts: EnvFacts | None = None, **kwargs: Any
) -> None:
    """Register an env with gymnasium and list it in :func:`list_envs`.

    Plugins call this from the function their ``mathgym.envs`` entry point names.

    Args:
        env_id: Gymnasium id, e.g. ``"MyTask-v0"``.
        entry_point: ``"package.module:EnvClass"``.
        description: One line for ``mathgym envs`` (default: the class docstring's first line).
        source: Who provides it (set automatically for plugins).
        facts: Its catalogue facts (domain, turns, levels, tools, licence, extra); default: the
            class's ``catalogue_facts``, if it has one.
        **kwargs: Passed to :func:`gymnasium.register` (``kwargs``, ``max_episode_steps``...).
    """
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, disable_env_checker=True, **kwargs)
    _CATALOGUE[env_id] = EnvInfo(env_id, description or "", source, facts)


def catalogue_entry(env_id: str) -> EnvInfo | None:
    """The catalogue entry of ``env_id`` (``None`` if it is not in the catalogue)."""
    return _CATALOGUE.get(env_id)


def register_alias(old_id: str, new_id: str) -> None:
    """Keep ``old_id`` working as a deprecated name of ``new_id``: ``gym.make(old_id)`` warns
    (``DeprecationWarning``) and makes ``new_id``'s env; the catalogue lists only ``new_id``."""
    if old_id in gym.registry:
        return
    # gymnasium also warns that the old id is "out of date" when its own env shares the name
    # (FrozenLake-v0 vs FrozenLake-v1); the alias' own warning says what to use instead.
    warnings.filterwarnings("ignore", message=rf".*The environment {re.escape(old_id)} is out of date", category=DeprecationWarning)
    new = gym.spec(new_id)
    gym.register(
        id=old_id, entry_point=functools.partial(_make_deprecated, old_id, new_id), disable_env_checker=True,
        order_enforce=new.order_enforce, max_episode_steps=new.max_episode_steps,
    )


def _make_deprecated(old_id: str, new_id: str, **kwargs: Any) -> gym.Env:
    warnings.warn(f"mathgym: env id {old_id!r} is deprecated; use {new_id!r}.", DeprecationWarning, stacklevel=3)
    spec = gym.spec(new_id)
    return load_entry_point(spec.entry_point)(**{**spec.kwargs, **kwargs})


def load_entry_point(entry: Any) -> Any:
    """A registration's entry point as a callable (``"module:Name"`` strings imported)."""
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        return getattr(importlib.import_module(module), name)
    return entry


def describe(env_id: str) -> str:
    """The one-line description of a registered env (loads its class if needed)."""
    info = _CATALOGUE.get(env_id)
    if info is not None and info.description:
        return info.description
    try:
        doc = inspect.getdoc(load_entry_point(gym.spec(env_id).entry_point)) or ""
    except Exception:  # a broken plugin class must not break the catalogue
        doc = ""
    return doc.strip().splitlines()[0] if doc.strip() else "(no description)"


def load_plugins() -> list[str]:
    """Load every ``mathgym.envs`` entry point once; return the ids they added.

    An entry point may name a callable (called with no arguments) or a module
    (imported); either registers envs. A plugin that fails is reported with a
    warning naming it, never an exception.
    """
    global _plugins_loaded
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    added: list[str] = []
    for ep in entry_points(group=PLUGIN_GROUP):
        before = set(gym.registry) | set(_CATALOGUE)
        try:
            target = ep.load()
            if callable(target):
                target()
        except Exception as err:
            _warn_plugin_failed(ep, err)
            continue
        source = ep.dist.name if ep.dist is not None else ep.name
        for env_id in sorted((set(gym.registry) | set(_CATALOGUE)) - before):
            info = _CATALOGUE.get(env_id)
            _CATALOGUE[env_id] = EnvInfo(env_id, info.description if info else "", source, info.facts if info else None)
            added.append(env_id)
    return added


def _warn_plugin_failed(ep: Any, err: Exception) -> None:
    """Warn that plugin ``ep`` failed, pointing at the plugin's own code (file and line), not at mathgym."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__)
    dist = ep.dist.name if ep.dist is not None else "?"
    if isinstance(err, SyntaxError) and err.filename:
        filename, lineno = err.filename, err.lineno or 0
    else:
        ours = [f for f in frames if "importlib" not in f.filename and f.filename != __file__]
        filename, lineno = (ours[-1].filename, ours[-1].lineno or 0) if ours else (ep.value, 0)
    where = f"{filename}:{lineno}" if lineno else filename
    warnings.warn_explicit(
        f"mathgym: plugin {ep.name!r} ({ep.value}, from {dist}) failed to load and is skipped: "
        f"{type(err).__name__}: {err} (at {where})",
        RuntimeWarning, filename=filename, lineno=lineno, module=ep.value.partition(":")[0],
    )


def list_envs() -> dict[str, str]:
    """Every mathgym env (built in and plugins): id → one-line description.

    Example:
        >>> import mathgym
        >>> "MathReason-v0" in mathgym.list_envs()
        True
    """
    return {env_id: describe(env_id) for env_id in sorted(_CATALOGUE)}


def env_sources() -> dict[str, str]:
    """Env id → who provides it (``"mathgym"`` or the plugin's distribution)."""
    return {env_id: info.source for env_id, info in sorted(_CATALOGUE.items())}


def resolve_env_id(env_id: str) -> str:
    """Return ``env_id`` if gymnasium knows it, else raise :class:`UnknownEnvError` with suggestions."""
    name = env_id.split(":", 1)[1] if ":" in env_id else env_id
    if name in gym.registry:
        return name
    if ":" in env_id:
        importlib.import_module(env_id.split(":", 1)[0])
        if name in gym.registry:
            return name
    raise UnknownEnvError(env_id, list(_CATALOGUE) or list(gym.registry))


# -- what an env's constructor takes ------------------------------------------------------------


def _entry_inits(env_id: str) -> tuple[bool, list[Any]]:
    """The callables that receive ``gym.make(env_id, **kwargs)``'s keywords: the entry point,
    or a class's ``__init__`` and, where it passes ``**kwargs`` on, its bases' up the MRO."""
    entry = load_entry_point(gym.spec(resolve_env_id(env_id)).entry_point)  # also "module:Env-v0" ids
    if not isinstance(entry, type):
        return False, [entry]
    return True, [k.__dict__["__init__"] for k in entry.__mro__ if "__init__" in k.__dict__ and k is not object]


def env_options(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> list[str] | None:
    """The keyword options env ``env_id``'s constructor takes, or ``None`` when it takes any (``**kwargs``).

    An entry point whose options depend on the options it is given answers for itself through an
    ``accepted_options(env_kwargs)`` attribute, asked when ``env_kwargs`` is given (the client of
    ``mathgym serve`` asks its server what the served env takes).
    """
    hook = getattr(load_entry_point(gym.spec(resolve_env_id(env_id)).entry_point), "accepted_options", None)
    if env_kwargs is not None and callable(hook):
        return hook(dict(env_kwargs))
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


def reward_only_options(env_id: str) -> frozenset[str]:
    """The options env ``env_id`` declares to change only how actions are scored, never its tasks,
    observations or expert (:attr:`mathgym.core.TextEnv.reward_only_options`); none where its entry
    point declares none."""
    entry = load_entry_point(gym.spec(resolve_env_id(env_id)).entry_point)
    return frozenset(getattr(entry, "reward_only_options", ()))


def env_accepts(env_id: str, name: str, env_kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether env ``env_id``'s constructor takes a keyword ``name`` (besides ``env_kwargs``, where given)."""
    options = env_options(env_id, env_kwargs)
    return options is None or name in options


def check_env_kwargs(env_id: str, kwargs: Mapping[str, Any], option_name: str = "env_kwargs") -> None:
    """Raise :class:`~mathgym.errors.ConfigError` when ``kwargs`` names an option env ``env_id`` does not take.

    The message names the env's real options and the closest one.
    """
    check_mapping_keys(option_name, kwargs)
    options = env_options(env_id)
    unknown = [k for k in kwargs if options is not None and k not in options]
    if unknown:
        raise unknown_option(env_id, unknown[0], options or [])


def unknown_option(env_id: str, name: Any, options: Sequence[str], what: str = "") -> ConfigError:
    """The error for option ``name`` that env ``env_id`` does not take: its real ``options`` and the
    closest one; ``what`` says which option set it came from (e.g. the evaluation's)."""
    import difflib

    close = difflib.get_close_matches(str(name), options, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"{env_id} has no option {name!r}{f' ({what})' if what else ''}.{hint} Its options: {', '.join(options)}.")
