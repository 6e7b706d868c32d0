"""Transformers key/value caches, whatever their version: the keyword a forward takes one by, where
a forward returns it, and its key/value tensors (to gather rows of, or copy out).

The sampling loop (:class:`~mathgym.agents.backends.NativeBackend`) and the fast path
(:mod:`mathgym.agents.fast`) both hand caches to models and read them back through these.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch


@functools.lru_cache(maxsize=32)
def _cache_keyword_of(model_class: type) -> str:
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def with_cache(model: Any, cache: Any) -> dict[str, Any]:
    """The forward keyword that hands ``model`` its KV cache: ``cache=`` where its forward takes
    that name (transformers 5.2x renamed ``past_key_values``, which then warns), else
    ``past_key_values=``. A peft wrapper is looked through to its base model."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return {_cache_keyword_of(type(base)): cache}


def returned_cache(output: Any) -> Any:
    """The KV cache a forward returned, under either of its names."""
    return output["cache"] if "cache" in output else output.past_key_values


def cache_tensors(cache: Any) -> list[tuple[Any, str]] | None:
    """(holder, attribute) of every key/value tensor of a transformers cache, or ``None`` if unknown."""
    layers = getattr(cache, "layers", None)
    if layers is not None and all(hasattr(layer, "keys") and hasattr(layer, "values") for layer in layers):
        return [(layer, name) for layer in layers for name in ("keys", "values")]
    return None


def gather_cache(cache: Any, index: torch.Tensor) -> bool:
    """Replace every cached key/value tensor by its rows ``index`` (autograd flows through);
    ``False`` when the cache layout is not one this code knows (nothing changed then)."""
    tensors = cache_tensors(cache)
    if tensors is None:
        return False
    for holder, name in tensors:
        setattr(holder, name, getattr(holder, name).index_select(0, index))
    return True
