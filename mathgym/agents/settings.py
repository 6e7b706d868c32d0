"""A model directory's own settings: ``mathgym.json`` beside the weights (no torch).

A model carries the conventions it was trained with, so that ``eval`` and ``train --model DIR``
prompt it the same way: the env options (``env_kwargs``, e.g. an empty system prompt), the env
it was trained on (``env``), the options of its evaluation (``eval_env_kwargs``) and its
generation budgets (``generation``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from mathgym.errors import ConfigError
from mathgym.registry import env_accepts, env_options, unknown_option

#: The file beside a model's weights that holds the env options it was trained with.
MODEL_SETTINGS_FILE = "mathgym.json"

#: Env options that shape the prompt itself: they travel with a model to any env that takes them.
PROMPT_KEYS = ("system_prompt",)

#: The generation budgets a model's ``mathgym.json`` may hold.
GENERATION_KEYS = ("max_new_tokens", "max_episode_tokens", "max_turns")


def read_model_settings(model: str | Path) -> dict[str, Any]:
    """The ``mathgym.json`` of a model directory (``{}`` for a hub id or a directory without one).

    Keys: ``env_kwargs`` (the env options the model was trained with), and optionally ``env``
    (the env it was trained on), ``eval_env_kwargs``, ``generation`` (``max_new_tokens``,
    ``max_episode_tokens``, ``max_turns`` of its evaluation) and ``chat_template_kwargs`` (the
    variables its chat template was rendered with, read by :meth:`ChatFormat.from_pretrained
    <mathgym.agents.chat_format.ChatFormat.from_pretrained>`, so by ``LLMPolicy.from_pretrained`` too).
    """
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
    return {k: v for k, v in saved.items() if k in GENERATION_KEYS and k not in explicit}


def run_env_kwargs(
    env_id: str, model_dir: str | Path, env_kwargs: Mapping[str, Any], eval_env_kwargs: Mapping[str, Any] | None = None,
    optional: Collection[str] = (),
) -> dict[str, Any]:
    """The env options a run uses: those saved with the model (``model_dir``'s ``mathgym.json``),
    then ``env_kwargs``, and for an evaluation ``eval_env_kwargs`` on top.

    An evaluation key the env does not take is dropped when it is ``optional`` (a default meant
    for the envs that have it, such as ``split``); any other raises :class:`ConfigError` naming
    the env's options, so that a misspelt key is not silently ignored.
    """
    kwargs = model_env_kwargs(env_id, read_model_settings(model_dir))
    kwargs.update(env_kwargs)
    if eval_env_kwargs is not None:
        taken = {k: v for k, v in eval_env_kwargs.items() if env_accepts(env_id, k, kwargs)}
        unknown = sorted(str(k) for k in eval_env_kwargs if k not in taken and k not in optional)
        if unknown:
            raise unknown_option(env_id, unknown[0], env_options(env_id, kwargs) or [], "an evaluation option, eval_env_kwargs")
        kwargs.update(taken)
    return kwargs
