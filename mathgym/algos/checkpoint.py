"""Atomic, resumable checkpoints.

Layout: ``RUN_DIR/checkpoints/step-000050/state.pt`` (+ ``RUN_DIR/checkpoints/latest``,
a text file naming the newest one). A checkpoint is written into a temporary
directory and renamed into place, so a run killed mid-write never leaves a broken one.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU, CUDA) global RNG states."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state`` atomically as the checkpoint of ``step``; keep the newest ``keep``."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"step-{step:06d}"
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    torch.save(state, tmp / "state.pt")
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    latest_tmp = root / ".latest.tmp"
    latest_tmp.write_text(target.name)
    os.replace(latest_tmp, root / "latest")
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint directory of a run, or ``None``."""
    pointer = Path(run_dir) / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if (path / "state.pt").is_file() else None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint's state (tensors on CPU)."""
    return torch.load(Path(path) / "state.pt", map_location="cpu", weights_only=False)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable parameters of ``model`` (the adapter under LoRA, everything otherwise)."""
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items() if k in names}
