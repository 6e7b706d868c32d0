"""The step before a trainer exists: the model a run starts from.

``--model tiny`` (the default) is the embedded character-level model after at most
``warm_start_steps`` SFT steps on the env's own expert demonstrations, planned to fit
``warm_start_budget`` seconds (:func:`warm_start_plan`; :func:`tiny_warm_start`, cached on disk),
so that RL starts from a model that knows the answer format. :func:`prepare_model` makes it, then
the trainer loads it like any model directory::

    config = GRPOConfig()                                   # model="tiny"
    trainer = GRPOTrainer(config, model_path=prepare_model(config))
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from mathgym.agents.settings import MODEL_SETTINGS_FILE, write_model_settings
from mathgym.agents.tiny import TINY_MODEL, TINY_MODEL_VERSION, cache_dir, tiny_model_path
from mathgym.algos.configs import SFTConfig, TrainConfig, resolved_env_kwargs
from mathgym.algos.distributed import Distributed
from mathgym.algos.sft import Chat, Demonstrations, NoDemonstrations, SFTTrainer, env_demonstrations
from mathgym.algos.trainer import readable_as_umask_allows
from mathgym.errors import ConfigError
from mathgym.registry import reward_only_options


def prepare_model(config: TrainConfig) -> str:
    """``config.model`` as a loadable path or hub id; ``'tiny'`` makes (or finds in the cache) the
    tiny model's SFT warm start on ``config.env``, whose ``mathgym.json`` carries its prompt settings.

    Under data-parallel training rank 0 builds the warm start alone; the other ranks then read it.
    The evaluation's options (``eval_env_kwargs``) are checked first: a wrong one is refused before
    the warm start's minutes, not after them.
    """
    if config.model != TINY_MODEL:
        return config.model
    dist = Distributed.from_environment(config.device)
    with dist.main_first():
        kwargs = resolved_env_kwargs(config, model_dir=tiny_model_path())
        if config.eval_env_kwargs and (config.eval_tasks or config.eval_every):
            check_eval_options(config)
        return str(tiny_warm_start(
            config.env, kwargs, steps=config.warm_start_steps, seed=0, progress=config.progress,
            budget_s=config.warm_start_budget,
        ))


def check_eval_options(config: TrainConfig) -> None:
    """Raise :class:`ConfigError` naming ``--eval-env-kwargs`` when the env refuses the evaluation's options."""
    gym.make(config.env, **resolved_env_kwargs(config, model_dir=tiny_model_path())).close()  # the run's own: named as they are
    try:
        gym.make(config.env, **resolved_env_kwargs(config, evaluation=True, model_dir=tiny_model_path())).close()
    except ConfigError as error:
        raise ConfigError(f"--eval-env-kwargs {dict(config.eval_env_kwargs)}: {error}") from error


#: The default of ``--warm-start-budget`` (:class:`TrainConfig`'s ``warm_start_budget``): seconds the
#: warm start's SFT steps may take, estimated for a 2-core CPU (:func:`expected_warm_start_s`). With
#: the tiny model's build, the expert's demonstrations (at most :data:`DEMONSTRATION_SHARE` of it
#: more) and the trainer's setup, the first RL step of ``mathgym train --env ID`` comes within three
#: minutes on every env. The default run (800 steps of batch 64 on MathReason-v0, about 100 s) fits
#: inside it.
WARM_START_BUDGET_S: float = TrainConfig.warm_start_budget
#: The warm start's batch while the budget allows :data:`MIN_WARM_START_STEPS` steps of it.
WARM_START_BATCH = 64
#: Where batches of 64 would leave fewer optimizer steps than this, the batch shrinks (down to
#: :data:`MIN_WARM_START_BATCH`): a short warm start learns more from many small steps than from a few big ones.
MIN_WARM_START_STEPS = 100
MIN_WARM_START_BATCH = 8
#: Making the expert's demonstrations may take this share of the budget on top of it (timed on the
#: 16 demonstrations that measure their length); a slow expert (one that runs a sandbox) gives fewer.
DEMONSTRATION_SHARE = 0.2
#: The sequence length at which attention costs as much as the rest of the tiny model (fitted).
_ATTENTION_LENGTH = 600
#: Seconds per million of cost (rows x tokens x (1 + tokens / 600)) on a 2-core CPU, torch on both
#: cores. Measured on the project's 2-core VM: 107 s per million on one core (SFT steps of batch 64
#: timed on MathReason-v0's level 0 at 28 tokens, 0.24 s a step; Hanoi-v0's at 323, 3.4 s;
#: Hangman-v0's at 1130, 22 s; the cost follows them within 20%), and a speed-up of 1.6 on two cores.
WARM_START_SECONDS_PER_MILLION_2_CORES = 67.0
#: The warm start's learning rate: constant after 20 warmup steps. Where the constant rate leaves the
#: model depends on its last steps: on MathReason-v0, 800 steps ended at 87.8% and 76.8% train-split
#: accuracy in two orders of the same demonstrations. A rate decayed linearly to zero ends higher and
#: steadier (94.5% and 98.2%; record ``warm_start_tune``, ``benchmarks/warm_start_tune.py``) but
#: leaves a model that GRPO's default steps then lower: from 400 decayed steps the learning check's
#: 25 GRPO steps went from 58.5% to 24.5% held-out, where from 400 constant ones they go from 45.5%
#: to 57.0%. The constant rate stays until GRPO's defaults suit both.
WARM_START_LR = 3e-3
#: The longest demonstration the warm start trains on: each is trained whole, as a rollout will
#: read it. The tiny model's config names 512 positions, but its rotary position encoding computes
#: every position alike (its rollouts on SQLQuery-v0 already read 800-token prompts), so the rows grow
#: to fit the demonstrations up to this length. A longer one is left out, never cut: cut at its start
#: it loses the task (SQLQuery-v0's schema: all 1,306 of its demonstrations were cut to 512 tokens, the
#: answer kept and the tables it names gone), cut at its end it loses its answer.
WARM_START_MAX_TOKENS = 4096
#: The length the warm start cut its demonstrations to before it fitted them (the tiny model's
#: ``max_position_embeddings``): a plan past it names its length in its cache key, so a warm start
#: trained on cut demonstrations is never reused for one trained on whole ones.
_CUT_BEFORE_FIT = 512
#: Older ``.tmp-*`` directories in the warm-start cache whose owner cannot be checked are stale.
STALE_AFTER_S = 3600


def warm_start_row_cost(tokens: int) -> float:
    """The cost of one demonstration row padded to ``tokens`` (see :data:`WARM_START_SECONDS_PER_MILLION_2_CORES`)."""
    return tokens * (1 + tokens / _ATTENTION_LENGTH)


def expected_warm_start_s(steps: int, longest: int, batch_size: int = WARM_START_BATCH) -> float:
    """Seconds ``steps`` SFT steps of ``batch_size`` rows padded to ``longest`` tokens take on a 2-core CPU.

    Example:
        >>> round(expected_warm_start_s(400, 28), 1)  # the default run: MathReason-v0's level 0
        50.3
    """
    return steps * batch_size * warm_start_row_cost(longest) * WARM_START_SECONDS_PER_MILLION_2_CORES / 1e6


@dataclass(frozen=True)
class WarmStartPlan:
    """What a warm start runs: ``steps`` SFT steps of ``batch_size`` demonstrations, each trained
    whole; those longer than ``max_tokens`` are left out. ``longest`` is the longest demonstration measured."""

    steps: int
    batch_size: int
    max_tokens: int
    longest: int

    @property
    def row_tokens(self) -> int:
        """The tokens a row is padded to: the longest demonstration, at most ``max_tokens``."""
        return min(self.longest, self.max_tokens)

    @property
    def truncates(self) -> bool:
        """Whether some measured demonstrations are longer than ``max_tokens`` (and are left out)."""
        return self.longest > self.max_tokens

    @property
    def estimated_s(self) -> float:
        """Seconds its SFT steps take on a 2-core CPU (:func:`expected_warm_start_s`)."""
        return expected_warm_start_s(self.steps, self.row_tokens, self.batch_size)


def warm_start_plan(longest: int, budget_s: float, max_steps: int, max_tokens: int) -> WarmStartPlan:
    """The warm start that fits ``budget_s`` seconds on a 2-core CPU, for demonstrations of up to
    ``longest`` tokens, rows of at most ``max_tokens`` (longer demonstrations are left out):
    ``max_steps`` steps of :data:`WARM_START_BATCH` when they fit; else batches of
    64 while that leaves :data:`MIN_WARM_START_STEPS` steps; else smaller batches (down to
    :data:`MIN_WARM_START_BATCH`) for more steps. Its estimate exceeds the budget only when a single
    step of the smallest batch does.

    Example:
        >>> warm_start_plan(28, 100.0, 400, 512)  # MathReason-v0's level 0: 400 steps of 64, about 50 s
        WarmStartPlan(steps=400, batch_size=64, max_tokens=512, longest=28)
        >>> warm_start_plan(836, 100.0, 400, WARM_START_MAX_TOKENS)  # SQLQuery-v0: rows of 836 tokens, 0.13 s each
        WarmStartPlan(steps=93, batch_size=8, max_tokens=4096, longest=836)
    """
    if max_steps < 1:
        raise ValueError(f"max_steps={max_steps!r} must be at least 1.")
    tokens = max(1, min(longest, max_tokens))
    rows = int(budget_s * 1e6 / (warm_start_row_cost(tokens) * WARM_START_SECONDS_PER_MILLION_2_CORES))
    batch = WARM_START_BATCH
    if rows < min(max_steps, MIN_WARM_START_STEPS) * WARM_START_BATCH:
        batch = max(MIN_WARM_START_BATCH, min(WARM_START_BATCH, rows // min(max_steps, MIN_WARM_START_STEPS)))
    steps = max(1, min(max_steps, rows // batch))
    return WarmStartPlan(steps, batch, max_tokens, longest)


def demonstrations_to_make(plan: WarmStartPlan, budget_s: float, seconds_each: float) -> int:
    """How many distinct demonstrations the warm start makes: one per row it trains on, at most 4096,
    and no more than the expert makes in :data:`DEMONSTRATION_SHARE` of the budget (at least a batch)."""
    wanted = min(4096, plan.steps * plan.batch_size)
    affordable = int(DEMONSTRATION_SHARE * budget_s / seconds_each) if seconds_each > 0 else wanted
    return max(min(wanted, affordable), min(wanted, plan.batch_size))


def longest_demonstration(env_id: str, env_kwargs: Mapping[str, Any], count_tokens: Callable[[Chat], int], seed: int = 0) -> int:
    """The longest of 16 of the env's expert demonstrations, in ``count_tokens`` (it stands for a batch's)."""
    return measure_demonstrations(env_id, env_kwargs, count_tokens, seed)[0]


def measure_demonstrations(
    env_id: str, env_kwargs: Mapping[str, Any], count_tokens: Callable[[Chat], int], seed: int = 0
) -> tuple[int, float]:
    """The longest of 16 of the env's expert demonstrations in ``count_tokens``, and the seconds the
    expert took for each (env construction included)."""
    start = time.perf_counter()
    probe = env_demonstrations(env_id, env_kwargs, 16, seed)
    seconds_each = (time.perf_counter() - start) / len(probe)
    return max(max(count_tokens(chat) for chat in probe), 1), seconds_each


def affordable_warm_start_steps(
    env_id: str, env_kwargs: Mapping[str, Any], steps: int, count_tokens: Callable[[Chat], int], seed: int = 0,
    budget_s: float = WARM_START_BUDGET_S,
) -> int:
    """The SFT steps of the warm start :func:`tiny_warm_start` makes of at most ``steps`` (its plan's steps)."""
    longest = longest_demonstration(env_id, env_kwargs, count_tokens, seed)
    return warm_start_plan(longest, budget_s, steps, WARM_START_MAX_TOKENS).steps


def tiny_max_positions(seed: int = 0) -> int:
    """The tiny model's ``max_position_embeddings`` (512): the length its config names, not a bound on
    what it reads (see :data:`WARM_START_MAX_TOKENS`)."""
    config = json.loads((tiny_model_path(seed) / "config.json").read_text())
    return int(config["max_position_embeddings"])


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
    """Tokens of a chat rendered whole by the chat format of the model at ``model_path``."""
    from mathgym.agents.chat_format import ChatFormat

    chat_format = ChatFormat.from_pretrained(model_path)
    return lambda chat: len(chat_format.encode(chat_format.render(chat, add_generation_prompt=False)))


def tiny_warm_start(
    env_id: str, env_kwargs: Mapping[str, Any], steps: int, seed: int = 0, progress: bool = True,
    budget_s: float = WARM_START_BUDGET_S,
) -> Path:
    """The embedded tiny model after at most ``steps`` SFT steps on ``env_id``'s expert demonstrations.

    The steps, batch and demonstrations fit ``budget_s`` seconds on a 2-core CPU
    (:func:`warm_start_plan`, from the longest of 16 demonstrations). Every demonstration is trained
    whole: the rows grow to the longest, up to :data:`WARM_START_MAX_TOKENS`; a longer one is left out
    (never cut), and the log and the warm start's ``warm_start.json`` say how many.
    Cached under ``cache_dir()/warm_start/<hash of the plan>``: a second run reuses it.
    ``steps == 0`` returns the untrained model. ``progress`` shows the SFT steps as a bar on stderr.
    """
    base = tiny_model_path(seed)
    if steps == 0:
        return base
    # The probe takes every option, so that a bad one is refused now, not after the warm start (a process
    # reward model it loads is loaded once a process: the run's envs reuse it).
    probe = gym.make(env_id, **dict(env_kwargs))
    has_expert = hasattr(probe.unwrapped, "expert_action")
    probe.close()
    env_kwargs = demonstration_kwargs(env_id, env_kwargs)
    if not has_expert:
        print(f"mathgym: {env_id} has no expert_action(); the tiny model starts untrained (no warm start)")
        return base
    try:
        longest, seconds_each = measure_demonstrations(env_id, env_kwargs, chat_token_counter(base), seed)
    except NoDemonstrations:
        print(f"mathgym: {env_id}'s expert has no action for its tasks (no reference solutions in its data); "
              "the tiny model starts untrained (no warm start)")
        return base
    plan = warm_start_plan(longest, budget_s, steps, WARM_START_MAX_TOKENS)
    if plan.steps < steps:
        print(f"mathgym: {env_id}'s demonstrations are long ({longest} tokens): the warm start takes {plan.steps} of the "
              f"{steps} SFT steps, batch {plan.batch_size} (--warm-start-budget {budget_s:g} s)")
    if plan.truncates:
        print(f"mathgym: warning: {env_id}'s demonstrations reach {longest} tokens: those longer than {plan.max_tokens} are "
              "left out of the warm start (never cut)")
    elif longest > tiny_max_positions(seed):
        print(f"mathgym: {env_id}'s demonstrations reach {longest} tokens, past the {tiny_max_positions(seed)} positions the "
              "tiny model's config names: the warm start trains them whole, as the rollouts will read them")
    target = cache_dir() / "warm_start" / f"{env_id}-sft{plan.steps}-{warm_start_key(env_id, env_kwargs, plan, seed)}"
    model_settings = {"env": env_id, "env_kwargs": dict(env_kwargs)}
    if cached(target, model_settings):
        return target
    # One builder per warm start: a second run (another terminal, another process) waits for the
    # first one's result instead of training the same model beside it on the same cores.
    with build_lock(target) as waited:
        if waited and cached(target, model_settings):
            print(f"mathgym: another process built the warm start in {target}; using it")
            return target
        demos = demonstrations_to_make(plan, budget_s, seconds_each)
        print(f"mathgym: warm start of the tiny model ({plan.steps} SFT steps on {env_id}): "
              f"{duration_text(plan.estimated_s + demos * seconds_each)} on a 2-core CPU, once: it is cached in {target}")
        try:
            return _train_warm_start(env_id, env_kwargs, plan, demos, seed, progress, target, model_settings)
        except NoDemonstrations as err:
            print(f"mathgym: {err}; the tiny model starts untrained (no warm start)")
            return base


def demonstration_kwargs(env_id: str, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` without the options ``env_id`` declares reward-only: its expert's demonstrations
    are the same without them, so the warm start neither pays for them (a process reward model
    scoring every demonstration) nor makes a second cached model because of them."""
    dropped = reward_only_options(env_id)
    return {name: value for name, value in env_kwargs.items() if name not in dropped}


def cached(target: Path, model_settings: dict[str, Any]) -> bool:
    """Whether the warm start ``target`` is in the cache (its settings file written if an older version left it out)."""
    if not (target / "config.json").is_file():
        return False
    if not (target / MODEL_SETTINGS_FILE).is_file():  # cached by a version that did not write it
        write_model_settings(target, model_settings)
    return True


@contextlib.contextmanager
def build_lock(target: Path) -> Iterator[bool]:
    """Hold the build lock of the warm start ``target`` (an advisory ``flock`` on a file beside it,
    released when the process ends, however it ends); yields whether another process held it first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except OSError:
            print(f"mathgym: another process is building the warm start in {target}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
            waited = True
        try:
            yield waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def warm_start_key(env_id: str, env_kwargs: Mapping[str, Any], plan: WarmStartPlan, seed: int = 0) -> str:
    """The cache key of a warm start: a hash of the tiny model's version, the env and its options,
    the seed and the plan (steps, batch, longest tokens kept), so a budget that changes the plan
    makes another warm start, and one that leaves it as it is reuses the cached one.

    The number of distinct demonstrations is named when it is below 4096 and follows from the plan
    (a row each); a slow expert's fewer (timed, so it varies by machine) are not part of the key.
    A plan whose demonstrations pass 512 tokens names its length: such warm starts trained on cut
    demonstrations before :data:`WARM_START_MAX_TOKENS`, and are not reused.
    ``recipe`` names how the steps train (2: :data:`WARM_START_LR`, constant), so a warm start
    cached by an older recipe is made again.
    """
    settings = {"v": TINY_MODEL_VERSION, "env": env_id, "kwargs": dict(env_kwargs), "steps": plan.steps, "seed": seed, "recipe": 2}
    # Full-batch warm starts whose demonstrations fit the model train exactly as before the budget
    # named batch and length: they keep their cache (the default run's included).
    if plan.batch_size != WARM_START_BATCH or plan.truncates or plan.longest > _CUT_BEFORE_FIT:
        settings.update(batch=plan.batch_size, max_tokens=plan.max_tokens)
    if plan.steps * plan.batch_size < 4096:
        settings["demos"] = plan.steps * plan.batch_size
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def warm_start_config(
    env_id: str, env_kwargs: Mapping[str, Any], plan: WarmStartPlan, demos: int, seed: int, run_dir: str | Path
) -> SFTConfig:
    """The SFT options of the warm start ``plan`` (:data:`WARM_START_LR` after 20 warmup steps): what
    :func:`tiny_warm_start` trains, and what a study of the recipe varies (``benchmarks/warm_start_tune.py``)."""
    return SFTConfig(
        env=env_id, env_kwargs=dict(env_kwargs), model=str(tiny_model_path(seed)), steps=plan.steps, learning_rate=WARM_START_LR,
        # max_length 0: nothing is cut; the warm start leaves out what is too long (leave_out_long_demonstrations).
        warmup_steps=20, seed=seed, batch_size=plan.batch_size, num_demonstrations=demos, max_length=0,
        eval_tasks=0, save_every=0, progress=False, run_dir=str(run_dir), lr_schedule="constant",
        # The recipe (its cache key) was fixed with the per-tensor AdamW, and the tiny model's short SFT is
        # sensitive to rounding: the fused kernel's left the 400-step warm start at a tenth of its accuracy.
        fused_optimizer=False,
    )


def _train_warm_start(
    env_id: str, env_kwargs: Mapping[str, Any], plan: WarmStartPlan, demos: int, seed: int, progress: bool,
    target: Path, model_settings: dict[str, Any],
) -> Path:
    """Run the plan's SFT steps into a temporary directory, then move it to ``target`` (see :func:`tiny_warm_start`)."""
    from tqdm.auto import tqdm

    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    (tmp / _OWNER_FILE).write_text(f"{socket.gethostname()} {os.getpid()}\n")
    config = warm_start_config(env_id, env_kwargs, plan, demos, seed, tmp / "run")
    try:
        trainer = SFTTrainer(config)
        fit = leave_out_long_demonstrations(env_id, trainer.source, plan.max_tokens)
        bar = tqdm(range(plan.steps), desc=f"warm start: SFT of the tiny model on {env_id}", unit="step", disable=not progress, leave=False)
        for step in bar:
            bar.set_postfix(loss=f"{trainer.update(trainer.source.make_batch(step)[0])['loss/sft']:.3f}")
        bar.close()
        trainer.policy.save_pretrained(tmp)
        write_model_settings(tmp, model_settings)
        (tmp / WARM_START_RECORD).write_text(json.dumps({**dataclasses.asdict(fit), "steps": plan.steps,
                                                          "batch_size": plan.batch_size}, indent=2) + "\n")
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


#: The file in a warm start's directory that says what it trained on (:class:`DemonstrationFit`, its steps and batch).
WARM_START_RECORD = "warm_start.json"


@dataclass(frozen=True)
class DemonstrationFit:
    """How a warm start's demonstrations fit its rows: ``trained`` of them whole (none is ever cut),
    ``left_out`` longer than ``max_tokens``; ``longest`` is the longest made, in tokens."""

    trained: int
    left_out: int
    longest: int
    max_tokens: int


def leave_out_long_demonstrations(env_id: str, source: Demonstrations, max_tokens: int) -> DemonstrationFit:
    """Keep the demonstrations of an SFT run's ``source`` of at most ``max_tokens`` tokens, whole; say
    how many longer ones were left out (a warning on stdout).

    Raises:
        NoDemonstrations: Every demonstration is longer than ``max_tokens``.
    """
    lengths = [len(ep.token_ids) for ep in source.demos]
    kept = [ep for ep, n in zip(source.demos, lengths) if n <= max_tokens]
    fit = DemonstrationFit(len(kept), len(lengths) - len(kept), max(lengths), max_tokens)
    if not kept:
        raise NoDemonstrations(f"all {len(lengths)} of {env_id}'s demonstrations are longer than {max_tokens} tokens")
    if fit.left_out:
        print(f"mathgym: warning: {fit.left_out} of {len(lengths)} of {env_id}'s demonstrations are longer than {max_tokens} "
              f"tokens (up to {fit.longest}): the warm start leaves them out rather than train on them cut")
        source.use_demonstrations(kept)
    return fit
