"""Registration of mathgym's environments with gymnasium, plugins, and the catalogue."""

from __future__ import annotations

import importlib
import inspect
import warnings
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import gymnasium as gym

from mathgym.errors import UnknownEnvError

PLUGIN_GROUP = "mathgym.envs"


@dataclass(frozen=True)
class EnvInfo:
    """A catalogue entry: the id, a one-line description and where it came from."""

    env_id: str
    description: str
    source: str  # "mathgym" or the plugin's distribution / entry-point name


_CATALOGUE: dict[str, EnvInfo] = {}
_plugins_loaded = False


def register_env(env_id: str, entry_point: str, description: str | None = None, *, source: str = "mathgym", **kwargs: Any) -> None:
    """Register an env with gymnasium and list it in :func:`list_envs`.

    Plugins call this from the function their ``mathgym.envs`` entry point names.

    Args:
        env_id: Gymnasium id, e.g. ``"MyTask-v0"``.
        entry_point: ``"package.module:EnvClass"``.
        description: One line for ``mathgym envs`` (default: the class docstring's first line).
        source: Who provides it (set automatically for plugins).
        **kwargs: Passed to :func:`gymnasium.register` (``kwargs``, ``max_episode_steps``...).
    """
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, disable_env_checker=True, **kwargs)
    _CATALOGUE[env_id] = EnvInfo(env_id, description or "", source)


def describe(env_id: str) -> str:
    """The one-line description of a registered env (loads its class if needed)."""
    info = _CATALOGUE.get(env_id)
    if info is not None and info.description:
        return info.description
    spec = gym.spec(env_id)
    entry = spec.entry_point
    try:
        if isinstance(entry, str):
            module, _, name = entry.partition(":")
            entry = getattr(importlib.import_module(module), name)
        doc = inspect.getdoc(entry) or ""
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
            warnings.warn(f"mathgym: plugin {ep.name!r} ({ep.value}) failed to load: {err!r}", RuntimeWarning, stacklevel=2)
            continue
        source = ep.dist.name if ep.dist is not None else ep.name
        for env_id in sorted((set(gym.registry) | set(_CATALOGUE)) - before):
            info = _CATALOGUE.get(env_id)
            _CATALOGUE[env_id] = EnvInfo(env_id, info.description if info else "", source)
            added.append(env_id)
    return added


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
