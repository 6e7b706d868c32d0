"""Whether a forward pass draws dropout: a pass that does is not a function of its inputs alone,
so the passes that run a row once for several (:func:`~mathgym.agents.forward.forward_pass`'s
repeated rows, the fast path of :mod:`mathgym.agents.fast`) step aside for it."""

from __future__ import annotations

from typing import Any

import torch


def has_dropout(module: torch.nn.Module) -> bool:
    """Whether a train-mode forward pass of ``module`` draws dropout: a dropout module with ``p > 0``
    (LoRA's included), or a config rate (``attention_dropout``, ``resid_pdrop``...) above 0."""
    if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in module.modules()):
        return True
    config = getattr(module, "config", None)
    rates = (getattr(config, name, None) for name in dir(config) if "dropout" in name or name.endswith("pdrop")) if config else ()
    return any(isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0 for rate in rates)


def draws_dropout(*modules: Any) -> bool:
    """Whether a forward pass of ``modules`` as they are now draws dropout (one in train mode
    :func:`has_dropout`); entries that are not modules (``None``, a plain function) draw none."""
    return any(isinstance(m, torch.nn.Module) and m.training and has_dropout(m) for m in modules)
