"""Atomic, resumable checkpoints.

Layout: ``RUN_DIR/checkpoints/step-000050/state.pt`` (+ ``RUN_DIR/checkpoints/latest``,
a text file naming the newest one). A checkpoint is written (and flushed to disk) into a
temporary directory and renamed into place, so a run killed mid-write never leaves a broken
one; the next save removes what such a run left behind.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from mathgym.errors import ConfigError


def rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU, CUDA) global RNG states."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state`` atomically as the checkpoint of ``step``; keep the newest ``keep``. A Ctrl-C
    that comes while it writes is raised once the checkpoint is whole (:func:`interrupt_deferred`)."""
    with interrupt_deferred():
        return _save_checkpoint(Path(run_dir) / "checkpoints", step, state, keep)


def _save_checkpoint(root: Path, step: int, state: dict[str, Any], keep: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-*"):  # left by a run killed while writing
        shutil.rmtree(stale, ignore_errors=True)
    target = root / f"step-{step:06d}"
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o777 & ~mask)  # mkdtemp makes it 0700; a checkpoint follows the umask like every other file
    with open(tmp / "state.pt", "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    latest_tmp = root / ".latest.tmp"
    latest_tmp.write_text(target.name)
    os.replace(latest_tmp, root / "latest")
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


@contextlib.contextmanager
def interrupt_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) that comes inside the block until the block is done, then raise it as
    :class:`KeyboardInterrupt`: raised inside ``torch.save`` it left a broken archive and a
    ``RuntimeError`` instead of the interrupt. Where Python's own handler is not the one set (another
    handler, or a thread other than the main one, which cannot set handlers) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint directory of a run, or ``None``."""
    pointer = Path(run_dir) / "checkpoints" / "latest"
    if not pointer.is_file():
        return None
    path = pointer.parent / pointer.read_text().strip()
    return path if (path / "state.pt").is_file() else None


def checkpoint_step(path: str | Path) -> int:
    """The step of checkpoint directory ``path`` (``step-000050`` -> 50)."""
    return int(Path(path).name.removeprefix("step-"))


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint's state (tensors on CPU)."""
    return torch.load(Path(path) / "state.pt", map_location="cpu", weights_only=False)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trainable parameters of ``model`` (the adapter under LoRA, everything otherwise)."""
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items() if k in names}


# -- what may change when a run is resumed ------------------------------------------------------

# Options that only steer the run (how long, when to save/evaluate, what to show): free to change.
FREE_ON_RESUME = frozenset(
    # executor/ray_actors: where env steps run never changes results (tests/algos/test_ray_executor.py);
    # log_samples: how many episodes samples.jsonl keeps; eval_pairs_every (--algo rm): when the
    # held-out pairs are scored (in eval mode, without gradient: no random draw, no update);
    # teacher_api_key_env/teacher_timeout_s/teacher_concurrency: how a teacher server is asked, not what it answers.
    {"steps", "save_every", "eval_every", "progress", "log_tensorboard", "log_wandb", "run_dir", "executor", "ray_actors",
     "log_samples", "eval_pairs_every", "teacher_api_key_env", "teacher_timeout_s", "teacher_concurrency"}
)
# Options that change how the same update is computed or measured, not what it is: accepted with a warning.
WARN_ON_RESUME = {
    "device": "the same update on other hardware; later steps may differ from an uninterrupted run in the last bits",
    "teacher_device": "the same teacher on other hardware; later steps may differ from an uninterrupted run in the last bits",
    "teacher_url": "the teacher from another server (it must serve the same model); later steps may differ in the last bits",
    "backend": "the same sampling distribution from another engine; samples differ from an uninterrupted run",
    "grad_accum_steps": "the same update in other micro-batches; later steps may differ in the last bits",
    "micro_batch_tokens": "the same update in other micro-batches; later steps may differ in the last bits",
    "threads": "the same update summed in another order; later steps may differ in the last bits",
    "gradient_checkpointing": "the same update with less memory; later steps may differ in the last bits",
    "fused_optimizer": "the same AdamW update in one kernel or per tensor; later steps may differ in the last bits",
    "vectorization_mode": "the same rollouts in another gymnasium vector mode",
    "eval_tasks": "the final accuracy is then measured on other tasks than the accuracy before training",
    "eval_seed": "the final accuracy is then measured on other tasks than the accuracy before training",
    "eval_samples": "the final pass@k is then not comparable with the one before training",
    "eval_env_kwargs": "the final accuracy is then measured on other tasks than the accuracy before training",
    "eval_preference_file": "the held-out pair accuracy is then measured on other pairs than before the resume",
    "eval_data": "the held-out step metrics are then measured on other solutions than before training",
}
# Options added after runs were already being saved, with the value that does what a run saved
# without them did: a resumed run that keeps this value continues it exactly.
EARLIER_BEHAVIOUR = {
    "micro_batch_tokens": 0,
    "fused_optimizer": False,
    "chat_template_kwargs": {},
    "self_play": False,
    "self_play_groups": "seat",
    "self_play_pool": 0,
    "self_play_pool_every": 10,
    "self_play_pool_prob": 0.5,
}


Verdict = Literal["allowed", "warning", "refused"]


@dataclass(frozen=True)
class OptionChange:
    """One option whose value differs from the checkpoint's configuration."""

    name: str
    old: Any
    new: Any
    verdict: Verdict
    note: str = ""

    def __str__(self) -> str:
        text = f"{self.name} {self.old!r} -> {self.new!r}"
        return f"{text} ({self.note})" if self.note else text


def resume_changes(saved: Mapping[str, Any], current: Mapping[str, Any], step: int) -> list[OptionChange]:
    """Compare a checkpoint's configuration with the one a run resumes with.

    An option the checkpoint's configuration lacks (it was saved by an older mathgym) is
    compared with the value that does what that run did (:data:`EARLIER_BEHAVIOUR`) where it is
    known, and otherwise reported with a warning unless it is free to change. Options the
    resuming run lacks (a newer mathgym saved the checkpoint) are not compared.

    Args:
        saved: The configuration stored in the checkpoint (``config.to_dict()``).
        current: The configuration of the resuming run.
        step: The checkpoint's step.

    Returns:
        One :class:`OptionChange` per differing option, in the configuration's order.
    """
    changes = []
    for name, new in current.items():
        if name not in saved:
            changes += _absent_from_checkpoint(name, new)
            continue
        if saved[name] == new:
            continue
        old = saved[name]
        if name == "steps" and new < step:
            changes.append(OptionChange(name, old, new, "refused", f"the checkpoint is already at step {step}"))
        elif name == "steps" and current.get("lr_schedule", "constant") != "constant":
            schedule = current["lr_schedule"]
            note = f"the {schedule} learning-rate schedule now spans {new} steps: later learning rates change"
            changes.append(OptionChange(name, old, new, "warning", note))
        elif name in FREE_ON_RESUME:
            changes.append(OptionChange(name, old, new, "allowed"))
        elif name in WARN_ON_RESUME:
            changes.append(OptionChange(name, old, new, "warning", WARN_ON_RESUME[name]))
        else:
            changes.append(OptionChange(name, old, new, "refused"))
    return changes


def _absent_from_checkpoint(name: str, new: Any) -> list[OptionChange]:
    """The change of an option the checkpoint's configuration does not hold (an older mathgym)."""
    if name in FREE_ON_RESUME:
        return []
    if name in EARLIER_BEHAVIOUR:
        old = EARLIER_BEHAVIOUR[name]
        if old == new:
            return []
        note = f"the checkpoint predates this option and ran as {name}={old!r}; pass {old!r} to continue it exactly"
        if name in WARN_ON_RESUME:
            note += f": {WARN_ON_RESUME[name]}"
        return [OptionChange(name, old, new, "warning", note)]
    note = "the checkpoint predates this option; the run goes on with this value, which may not be what the checkpoint's run did"
    return [OptionChange(name, "(absent)", new, "warning", note)]


def check_resume(
    run_dir: str | Path, saved_algo: str | None, algo: str, changes: list[OptionChange], quiet: bool = False
) -> None:
    """Print the changes of a resumed run (unless ``quiet``: ranks other than 0); raise
    :class:`ConfigError` if one is refused."""
    if saved_algo is not None and saved_algo != algo:
        raise ConfigError(f"Cannot resume {run_dir}: it was trained with --algo {saved_algo}, not {algo}.")
    refused = [c for c in changes if c.verdict == "refused"]
    if refused:
        may = ", ".join(sorted(FREE_ON_RESUME | set(WARN_ON_RESUME)))
        raise ConfigError(
            f"Cannot resume {run_dir} with changed training options: {'; '.join(map(str, refused))}. They shape the "
            f"training itself, so the run would not continue the one in the checkpoint. Resume without them, or start "
            f"a new run from the weights (--model {Path(run_dir) / 'final'} once a run has finished). Options that may "
            f"change on resume: {may}."
        )
    for change in [] if quiet else changes:
        kind = "warning: " if change.verdict == "warning" else ""
        print(f"mathgym: resuming {run_dir}: {kind}{change}")
