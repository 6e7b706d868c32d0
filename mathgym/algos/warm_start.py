"""The step before a trainer exists: the model a run starts from.

``--model tiny`` (the default) is the embedded character-level model after ``warm_start_steps``
SFT steps on the env's own expert demonstrations (:func:`tiny_warm_start`, cached on disk), so
that RL starts from a model that knows the answer format. :func:`prepare_model` makes it, then
the trainer loads it like any model directory::

    config = GRPOConfig()                                   # model="tiny"
    trainer = GRPOTrainer(config, model_path=prepare_model(config))
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from mathgym.agents.settings import MODEL_SETTINGS_FILE, write_model_settings
from mathgym.agents.tiny import TINY_MODEL, TINY_MODEL_VERSION, cache_dir, tiny_model_path
from mathgym.algos.configs import SFTConfig, TrainConfig, resolved_env_kwargs
from mathgym.algos.distributed import Distributed
from mathgym.algos.sft import Chat, SFTTrainer, env_demonstrations
from mathgym.algos.trainer import readable_as_umask_allows


def prepare_model(config: TrainConfig) -> str:
    """``config.model`` as a loadable path or hub id; ``'tiny'`` makes (or finds in the cache) the
    tiny model's SFT warm start on ``config.env``, whose ``mathgym.json`` carries its prompt settings.

    Under data-parallel training rank 0 builds the warm start alone; the other ranks then read it.
    """
    if config.model != TINY_MODEL:
        return config.model
    dist = Distributed.from_environment(config.device)
    with dist.main_first():
        kwargs = resolved_env_kwargs(config, model_dir=tiny_model_path())
        return str(tiny_warm_start(config.env, kwargs, steps=config.warm_start_steps, seed=0, progress=config.progress))


#: What a warm start may cost, in padded demonstration tokens: steps x 64 rows x the longest
#: demonstration's tokens L (a batch is padded to its longest) x (1 + L / 600), the growth of
#: attention's share. Measured on one core: 0.24 s a step on MathReason-v0's level 0 (L = 28),
#: 3.4 s on Hanoi-v0's (L = 323), 22 s on Hangman-v0's (L = 1130), which this cost follows within
#: 20%. The budget is about 290 s on one core, three minutes on two; the default run
#: (800 steps on MathReason-v0) costs 1.5 million, inside it.
WARM_START_TOKEN_BUDGET = 2_700_000
#: The sequence length at which attention costs as much as the rest of the tiny model (fitted).
_ATTENTION_LENGTH = 600
#: Seconds a warm start takes per million of that cost on a 2-core CPU (torch on both cores), for
#: the time ``mathgym train`` announces. Measured on the project's 2-core VM: 107 s per million on
#: one core (the fit above; 102 s again on 2026-11-25: the CPU time of one torch thread, 3.26 s a
#: step over 4 steps on Hanoi-v0's level 0), and the whole budget in three minutes on two cores
#: (a speed-up of 1.6): 180 s / 2.7 million. The default run's warm start (1.5 million) then
#: takes about 100 s.
WARM_START_SECONDS_PER_MILLION_2_CORES = 67.0
#: Older ``.tmp-*`` directories in the warm-start cache whose owner cannot be checked are stale.
STALE_AFTER_S = 3600


def warm_start_step_cost(longest: int) -> float:
    """The cost of one warm-start step (64 rows padded to ``longest`` tokens; see :data:`WARM_START_TOKEN_BUDGET`)."""
    return 64 * longest * (1 + longest / _ATTENTION_LENGTH)


def longest_demonstration(env_id: str, env_kwargs: Mapping[str, Any], count_tokens: Callable[[Chat], int], seed: int = 0) -> int:
    """The longest of 16 of the env's expert demonstrations, in ``count_tokens`` (it stands for a batch's)."""
    probe = env_demonstrations(env_id, env_kwargs, 16, seed)
    return max(max(count_tokens(chat) for chat in probe), 1)


def affordable_warm_start_steps(
    env_id: str, env_kwargs: Mapping[str, Any], steps: int, count_tokens: Callable[[Chat], int], seed: int = 0
) -> int:
    """``steps``, or fewer when they would cost more than :data:`WARM_START_TOKEN_BUDGET`
    (the longest of 16 of the env's expert demonstrations, in ``count_tokens``, stands for a batch's)."""
    return affordable_steps(steps, longest_demonstration(env_id, env_kwargs, count_tokens, seed))


def affordable_steps(steps: int, longest: int) -> int:
    """``steps``, or fewer when steps on demonstrations of up to ``longest`` tokens would exceed the budget."""
    return max(1, min(steps, int(WARM_START_TOKEN_BUDGET // warm_start_step_cost(longest))))


def expected_warm_start_s(steps: int, longest: int) -> float:
    """Seconds ``steps`` warm-start steps on demonstrations of up to ``longest`` tokens take on a
    2-core CPU (:data:`WARM_START_SECONDS_PER_MILLION_2_CORES`)."""
    return steps * warm_start_step_cost(longest) * WARM_START_SECONDS_PER_MILLION_2_CORES / 1e6


def duration_text(seconds: float) -> str:
    """``'about 3 min'``, ``'under a minute'``."""
    return "under a minute" if seconds < 45 else f"about {max(1, round(seconds / 60))} min"


def remove_stale_temporaries(directory: Path, now: float | None = None) -> list[Path]:
    """Remove the ``.tmp-*`` directories a warm start left in ``directory`` when it was interrupted
    (killed before it could clean up): those whose owning process on this host is gone, and those
    older than :data:`STALE_AFTER_S` whose owner cannot be checked (another host, no owner file).
    A warm start still being written by a running process is kept. Returns what was removed."""
    now = time.time() if now is None else now
    removed = []
    for tmp in directory.glob(".tmp-*"):
        if tmp.is_dir() and not _owner_alive(tmp, now):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


def _owner_alive(tmp: Path, now: float) -> bool:
    try:
        host, pid = (tmp / _OWNER_FILE).read_text().split()
        if host == socket.gethostname():
            os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
            return True
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    except (OSError, ValueError):
        pass
    try:
        return now - tmp.stat().st_mtime < STALE_AFTER_S
    except OSError:  # removed meanwhile
        return True


_OWNER_FILE = "owner"


def chat_token_counter(model_path: str | Path) -> Callable[[Chat], int]:
    """Tokens of a chat rendered with the chat template of the model at ``model_path``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    return lambda chat: len(tokenizer(tokenizer.apply_chat_template(chat, tokenize=False), add_special_tokens=False).input_ids)


def tiny_warm_start(env_id: str, env_kwargs: Mapping[str, Any], steps: int, seed: int = 0, progress: bool = True) -> Path:
    """The embedded tiny model after ``steps`` SFT steps on ``env_id``'s expert demonstrations.

    Envs whose demonstrations are long take fewer steps (:func:`affordable_warm_start_steps`).
    Cached under ``cache_dir()/warm_start/<hash of the settings>``: a second run reuses it.
    ``steps == 0`` returns the untrained model. ``progress`` shows the SFT steps as a bar on stderr.
    """
    from tqdm.auto import tqdm

    base = tiny_model_path(seed)
    if steps == 0:
        return base
    probe = gym.make(env_id, **dict(env_kwargs))
    has_expert = hasattr(probe.unwrapped, "expert_action")
    probe.close()
    if not has_expert:
        print(f"mathgym: {env_id} has no expert_action(); the tiny model starts untrained (no warm start)")
        return base
    longest = longest_demonstration(env_id, env_kwargs, chat_token_counter(base), seed)
    affordable = affordable_steps(steps, longest)
    if affordable < steps:
        print(f"mathgym: {env_id}'s demonstrations are long: the warm start takes {affordable} of the {steps} SFT steps "
              f"(at most {WARM_START_TOKEN_BUDGET:,} tokens of demonstrations)")
        steps = affordable
    # Demonstrations: 4096, or as many as the steps can use (64 a step) when that is fewer; a short
    # warm start then does not encode thousands it never trains on. The key names the count only
    # when it is not the default, so full warm starts keep their cache.
    demos = min(4096, steps * 64)
    settings = {"v": TINY_MODEL_VERSION, "env": env_id, "kwargs": dict(env_kwargs), "steps": steps, "seed": seed, "recipe": 2}
    if demos != 4096:
        settings["demos"] = demos
    key = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]
    target = cache_dir() / "warm_start" / f"{env_id}-sft{steps}-{key}"
    model_settings = {"env": env_id, "env_kwargs": dict(env_kwargs)}
    if (target / "config.json").is_file():
        if not (target / MODEL_SETTINGS_FILE).is_file():  # cached by a version that did not write it
            write_model_settings(target, model_settings)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    (tmp / _OWNER_FILE).write_text(f"{socket.gethostname()} {os.getpid()}\n")
    print(f"mathgym: warm start of the tiny model ({steps} SFT steps on {env_id}): {duration_text(expected_warm_start_s(steps, longest))} "
          f"on a 2-core CPU, once: it is cached in {target}")
    config = SFTConfig(
        env=env_id, env_kwargs=dict(env_kwargs), model=str(base), steps=steps, learning_rate=3e-3, warmup_steps=20,
        seed=seed, batch_size=64, num_demonstrations=demos, eval_tasks=0, save_every=0, progress=False,
        run_dir=str(tmp / "run"), lr_schedule="constant",
    )
    try:
        trainer = SFTTrainer(config)
        bar = tqdm(range(steps), desc=f"warm start: SFT of the tiny model on {env_id}", unit="step", disable=not progress, leave=False)
        for step in bar:
            bar.set_postfix(loss=f"{trainer.update(trainer.make_batch(step))['loss/sft']:.3f}")
        bar.close()
        trainer.policy.save_pretrained(tmp)
        write_model_settings(tmp, model_settings)
        shutil.rmtree(tmp / "run", ignore_errors=True)
        (tmp / _OWNER_FILE).unlink()
        readable_as_umask_allows(tmp)  # mkdtemp made it 0700, safetensors its file 0600
    except BaseException:  # Ctrl-C or an error: leave no half-written directory in the cache
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target

