"""mathgym envs inside TRL's ``GRPOTrainer``: ``rollout_func``, ``reward_funcs`` and ``environment_factory``.

One object per env::

    from trl import GRPOConfig, GRPOTrainer
    from mathgym.integrations import trl as mg

    env = mg.TRLEnv("GuessNumber-v0", max_turns=5)
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=env.dataset(1000),
                          rollout_func=env.rollout_func, reward_funcs=env.reward_funcs)

``rollout_func`` plays whole episodes with mathgym's own rollout collector
(:class:`~mathgym.algos.rollout.RolloutCollector`): token-in/token-out, each turn
extending the previous token sequence, the env's replies appended as chat-template
tokens and masked out of the loss (``env_mask`` 0). Generation goes through the
trainer itself (its vLLM client or colocated engine when ``use_vllm``, else its model),
so the adapter holds no sampling code of its own.

Tool-style envs also have :attr:`TRLEnv.environment_factory` (see
:mod:`mathgym.integrations.trl_tools`), for TRL's own tool-calling loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym

import mathgym  # noqa: F401 - registers the envs
from mathgym.agents.policy import Generation, LLMPolicy, SamplingParams
from mathgym.algos.batch import INFRA_STATUSES, Episode
from mathgym.algos.rollout import RolloutCollector, RolloutSettings
from mathgym.errors import ConfigError
from mathgym.install import extra_hint
from mathgym.registry import resolve_env_id

if TYPE_CHECKING:
    from datasets import Dataset

#: Extra fields ``rollout_func`` returns beside TRL's required keys (one value per completion).
EXTRA_FIELDS = ("env_reward", "env_status", "env_turns", "env_correct", "env_task_id")


def _prompt_key(prompt: Any) -> str:
    """A hashable key for a data set prompt (a chat or a plain string)."""
    if isinstance(prompt, str):
        return prompt
    return repr([(m.get("role"), m.get("content")) for m in prompt])


class TRLTrainerBackend:
    """A mathgym generation backend that samples with a TRL ``GRPOTrainer``.

    TRL's ``_generate_single_turn`` is the one place where the trainer generates: with its
    vLLM client (server mode), its colocated vLLM engine, or ``model.generate`` with the
    trainer's generation config. Log-probs come back only from vLLM; elsewhere TRL
    recomputes them itself, and :attr:`has_logprobs` is ``False``.
    """

    def __init__(self, trainer: Any):
        if not hasattr(trainer, "_generate_single_turn"):
            raise ConfigError(
                "this GRPOTrainer has no _generate_single_turn(); mathgym's TRL adapter needs trl>=1.0 "
                f"({extra_hint('trl')})."
            )
        self.trainer = trainer
        self.has_logprobs = bool(getattr(trainer, "use_vllm", False))

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams, generator: Any = None) -> list[Generation]:
        """One completion per token-id prompt (``params`` are the trainer's: ``GRPOConfig`` decides)."""
        completion_ids, logprobs = self.trainer._generate_single_turn([list(p) for p in prompts], None, {}, 1)
        eos = set(self.trainer.eos_token_ids)
        tokenizer = self.trainer.processing_class
        out = []
        for i, tokens in enumerate(completion_ids):
            tokens = [int(t) for t in tokens]
            lps = [float(x) for x in logprobs[i]] if logprobs is not None else [0.0] * len(tokens)
            finish = "stop" if tokens and tokens[-1] in eos else "length"
            out.append(Generation(tokens, lps, tokenizer.decode(tokens, skip_special_tokens=True), finish))
        return out


def trainer_policy(trainer: Any) -> LLMPolicy:
    """An :class:`LLMPolicy` over the trainer's model and tokenizer that generates through the trainer."""
    policy = LLMPolicy(model=trainer.model, tokenizer=trainer.processing_class, device=trainer.accelerator.device)
    policy._backend_impl = TRLTrainerBackend(trainer)
    policy.backend = "trl"
    return policy


def env_reward(
    prompts: Sequence[Any] | None = None,
    completions: Sequence[Any] | None = None,
    *,
    env_reward: Sequence[float] | None = None,
    env_status: Sequence[str] | None = None,
    env_turns: Sequence[int] | None = None,
    env_correct: Sequence[bool] | None = None,
    log_metric: Callable[[str, float], None] | None = None,
    log_extra: Callable[[str, list], None] | None = None,
    **_: Any,
) -> list[float | None]:
    """TRL reward function: the episode return the env gave (from :meth:`TRLEnv.rollout_func`'s fields).

    Infrastructure failures (sandbox or verifier down) return ``None``, which TRL leaves out
    of the advantage instead of counting as a wrong answer. Logs ``rollout/env_turns``,
    ``rollout/correct`` and ``infra/failed_episodes`` as TRL metrics, and each completion's
    status and turn count as columns of TRL's completions table.
    """
    if env_reward is None:
        raise ConfigError(
            "env_reward needs the fields that TRLEnv.rollout_func returns; pass rollout_func=env.rollout_func "
            "to GRPOTrainer together with reward_funcs=env.reward_funcs."
        )
    statuses = [str(s) for s in env_status] if env_status is not None else [""] * len(env_reward)
    infra = [s in INFRA_STATUSES for s in statuses]
    if log_metric is not None and env_reward:
        n = len(env_reward)
        log_metric("infra/failed_episodes", float(sum(infra)))
        if env_turns is not None:
            log_metric("rollout/env_turns", sum(env_turns) / n)
        if env_correct is not None:
            log_metric("rollout/correct", sum(bool(c) for c in env_correct) / n)
    if log_extra is not None:
        log_extra("env_status", statuses)
        if env_turns is not None:
            log_extra("env_turns", [int(t) for t in env_turns])
    return [None if bad else float(r) for r, bad in zip(env_reward, infra)]


def math_reward(
    completions: Sequence[Any],
    *,
    answer: Sequence[Any] | None = None,
    ground_truth: Sequence[Any] | None = None,
    reward_model: Sequence[Any] | None = None,
    solution: Sequence[Any] | None = None,
    **_: Any,
) -> list[float | None]:
    """TRL reward function for a math data set of your own: 1.0 where a completion's final answer
    is the row's reference, graded by mathgym's verifier (math-verify's verdicts, ``"lenient"``).

    Pass it as ``reward_funcs=[math_reward]``: TRL gives it the data set's columns. The
    reference is the row's ``answer``, else ``ground_truth``, else verl's
    ``reward_model["ground_truth"]``, else ``solution`` (TRL's math sets keep the final answer
    there; a worked solution gives its last ``\\boxed{}``), read as every entry point reads a
    gold (bare LaTeX as LaTeX, a list of forms matched by any:
    :func:`~mathgym.rewards.math_gold.gold_forms`). A conversational completion
    is its last message's content. A row without a reference, or whose grading failed in the
    infrastructure, gets ``None``, which TRL leaves out.

    Example:
        >>> math_reward(["... so \\\\boxed{12}", "I think 13"], answer=["12", "12"])
        [1.0, 0.0]
    """
    from mathgym.rewards.math import labels_verifier  # noqa: PLC0415

    references: list[Any] = []
    for row in range(len(completions)):
        found = None
        for column in (answer, ground_truth):
            if column is not None and column[row] not in (None, ""):
                found = column[row]
                break
        if found is None and reward_model is not None and isinstance(reward_model[row], Mapping):
            found = reward_model[row].get("ground_truth")
        if found in (None, "") and solution is not None and isinstance(solution[row], str):
            found = solution[row]  # the verifier reads a worked solution's last \boxed{}
        references.append(None if found in (None, "") else found)
    texts = [_completion_text(c) for c in completions]
    graded = [i for i, ref in enumerate(references) if ref is not None]
    results = labels_verifier().score_batch([texts[i] for i in graded], [references[i] for i in graded])
    rewards: list[float | None] = [None] * len(completions)
    for i, result in zip(graded, results):
        rewards[i] = None if result.status in INFRA_STATUSES else float(result.score)
    return rewards


def code_reward(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **columns: Any) -> list[float | None]:
    """TRL reward function for a code data set of your own: 1.0 where the program in a completion
    passes all of the row's tests, run in mathgym's sandbox as CodeSandbox-v0 runs them.

    Pass it as ``reward_funcs=[code_reward]``: TRL gives it the data set's columns, read in any
    layout CodeSandbox-v0 reads (``test`` + ``entry_point``, ``test_list``, ``input_output``,
    ``tests``, ``verification_info``, ``test_cases``, a KodCode pytest file, verl's
    ``reward_model``), or a ``ground_truth`` column holding APPS's ``inputs`` and ``outputs``
    (:func:`~mathgym.envs.coding.code_tasks.row_task`). A conversational completion is its last
    message's content. A row holding no tests it can read, a task that cannot be judged
    (``unverifiable``) and a sandbox failure get ``None``, which TRL leaves out.

    Raises:
        ConfigError: No row of the batch holds tests (the data set's columns are not a code layout).
    """
    from mathgym.envs.coding.code_tasks import row_task  # noqa: PLC0415
    from mathgym.integrations._labels import grade_programs  # noqa: PLC0415

    count = len(completions)
    per_row = {k: v for k, v in columns.items() if isinstance(v, Sequence) and not isinstance(v, (str, bytes)) and len(v) == count}
    tasks = []
    for i in range(count):
        row = {key: values[i] for key, values in per_row.items()}
        if prompts is not None:
            row.setdefault("prompt", prompts[i])
        tasks.append(row_task(row))
    graded = [i for i, task in enumerate(tasks) if task is not None]
    if count and not graded:
        raise ConfigError(
            f"code_reward found no tests in the batch's columns ({', '.join(sorted(per_row)) or 'none'}): give the data set "
            "a code layout CodeSandbox-v0 reads (e.g. test + entry_point, input_output, test_cases) or a ground_truth of tests"
        )
    rewards: list[float | None] = [None] * count
    verdicts = grade_programs([_completion_text(completions[i]) for i in graded], [tasks[i] for i in graded])
    for i, verdict in zip(graded, verdicts):
        rewards[i] = None if verdict is None or str(verdict.status) in INFRA_STATUSES else float(verdict.reward)
    return rewards


def _completion_text(completion: Any) -> str:
    """A completion as TRL passes it: text, or a conversation (its last message's content)."""
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content") or "")
    return str(completion)


class TRLEnv:
    """A mathgym env as TRL ``GRPOTrainer`` pieces: data set, ``rollout_func``, reward functions.

    Args:
        env_id: Any registered env id.
        max_turns: Cap on turns per episode (``None``: the env's own budget). An episode
            stopped by the cap keeps the reward it earned so far.
        max_episode_tokens: Token budget of a whole episode (prompt, actions, env replies).
        env_kwargs: Constructor options of the env (e.g. ``{"difficulty": 1}``).

    Example:
        >>> from mathgym.integrations.trl import TRLEnv
        >>> env = TRLEnv("GuessNumber-v0", max_turns=5)
        >>> row = env.dataset(2)[0]
        >>> sorted(row), row["prompt"][-1]["role"]
        (['prompt', 'seed', 'task_id'], 'user')
    """

    def __init__(
        self,
        env_id: str,
        *,
        max_turns: int | None = None,
        max_episode_tokens: int = 4096,
        env_kwargs: Mapping[str, Any] | None = None,
    ):
        if max_turns is not None and (not isinstance(max_turns, int) or max_turns < 1):
            raise ConfigError(f"max_turns={max_turns!r} must be a positive integer or None.")
        self.env_id = resolve_env_id(env_id)
        self.env_kwargs = dict(env_kwargs or {})
        self.max_turns = max_turns
        self.max_episode_tokens = int(max_episode_tokens)
        self._seeds_by_prompt: dict[str, list[int]] = {}
        self._cursor: dict[str, itertools.count] = {}
        self._collectors: dict[int, RolloutCollector] = {}
        #: Pass as ``GRPOTrainer(reward_funcs=...)``: logged by TRL as ``rewards/env_reward``.
        self.reward_funcs: list[Callable[..., list[float | None]]] = [env_reward]

    def dataset(self, n: int, *, start_seed: int = 0) -> Dataset:
        """``n`` tasks as a TRL data set: ``prompt`` (the env's chat), ``seed`` and ``task_id``.

        Task ``i`` is the env's ``reset(seed=start_seed + i)``; ``rollout_func`` and the
        environment factory reset their envs with the same seeds, so the prompt the model
        sees and the task the env judges always agree.
        """
        from datasets import Dataset

        if not isinstance(n, int) or n < 1:
            raise ConfigError(f"dataset(n={n!r}): n must be a positive integer.")
        env = gym.make(self.env_id, **self.env_kwargs)
        rows = []
        try:
            for seed in range(start_seed, start_seed + n):
                _, info = env.reset(seed=seed)
                messages = [{"role": m["role"], "content": m["content"]} for m in info["messages"]]
                rows.append({"prompt": messages, "seed": seed, "task_id": str(info["task_id"])})
                self._seeds_by_prompt.setdefault(_prompt_key(messages), []).append(seed)
        finally:
            env.close()
        return Dataset.from_list(rows)

    # -- rollout_func -----------------------------------------------------------------

    def rollout_func(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        """TRL's ``rollout_func``: play one episode per prompt and return its tokens and outcome.

        Returns ``prompt_ids``, ``completion_ids`` (actions and env replies, in order),
        ``logprobs`` (vLLM's sampling log-probs, 0 on env tokens; ``None`` when TRL
        generates with its model and recomputes them), ``env_mask`` (1 on the model's
        tokens, 0 on the env's), and :data:`EXTRA_FIELDS`, which TRL hands to the reward
        functions.
        """
        seeds = self._seeds_for(prompts, int(getattr(trainer, "num_generations", 1) or 1))
        collector = self._collector(len(prompts), trainer)
        episodes = collector.collect_episodes(seeds)
        return episodes_to_trl(episodes, has_logprobs=bool(getattr(trainer, "use_vllm", False)))

    def _seeds_for(self, prompts: Sequence[Any], group_size: int) -> list[int]:
        """The env seed of each prompt: rows of one GRPO group (equal consecutive prompts,
        at most ``group_size``) share a seed; prompts several seeds share (a game whose
        secret is not in the prompt) take those seeds in turn."""
        seeds: list[int] = []
        run = 0
        for i, prompt in enumerate(prompts):
            key = _prompt_key(prompt)
            if key not in self._seeds_by_prompt:
                raise ConfigError(
                    f"rollout_func got a prompt that is not from TRLEnv({self.env_id!r}).dataset(); build the "
                    "train_dataset with env.dataset(n) so each prompt maps to the env task it came from."
                )
            same_group = i > 0 and run < group_size and _prompt_key(prompts[i - 1]) == key
            if same_group:
                seeds.append(seeds[-1])
                run += 1
                continue
            choices = self._seeds_by_prompt[key]
            cursor = self._cursor.setdefault(key, itertools.count())
            seeds.append(choices[next(cursor) % len(choices)])
            run = 1
        return seeds

    def _collector(self, num_rows: int, trainer: Any) -> RolloutCollector:
        """A rollout collector of ``num_rows`` envs that generates through ``trainer`` (cached per size)."""
        policy = trainer_policy(trainer)
        collector = self._collectors.get(num_rows)
        if collector is None:
            sampling = SamplingParams(
                temperature=float(getattr(trainer, "temperature", 1.0)),
                top_p=float(getattr(trainer, "top_p", 1.0)),
                max_new_tokens=int(getattr(trainer, "max_completion_length", 256) or 256),
            )
            settings = RolloutSettings(
                group_size=1, sampling=sampling, max_episode_tokens=self.max_episode_tokens, max_turns=self.max_turns
            )
            collector = RolloutCollector(self.env_id, self.env_kwargs, policy, num_rows, settings)
            self._collectors[num_rows] = collector
        collector.policy = policy
        return collector

    # -- environment_factory ---------------------------------------------------------

    @property
    def environment_factory(self) -> Callable[[], Any]:
        """A zero-argument factory for TRL's ``environment_factory=`` (tool-style envs only).

        Raises:
            ConfigError: The env has no tool interface (see :mod:`mathgym.integrations.trl_tools`).
        """
        from mathgym.integrations.trl_tools import tool_environment_factory

        return tool_environment_factory(self.env_id, self.env_kwargs)

    def close(self) -> None:
        """Close the envs of the cached rollout collectors."""
        for collector in self._collectors.values():
            collector.close()
        self._collectors.clear()


def episodes_to_trl(episodes: Sequence[Episode], has_logprobs: bool) -> dict[str, list]:
    """mathgym episodes -> the dict TRL's ``rollout_func`` returns (see :meth:`TRLEnv.rollout_func`)."""
    out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", *EXTRA_FIELDS)}
    for ep in episodes:
        start = next((t for t, s in enumerate(ep.step_index) if s >= 0), len(ep.token_ids))
        out["prompt_ids"].append(ep.token_ids[:start])
        out["completion_ids"].append(ep.token_ids[start:])
        out["logprobs"].append(ep.logprobs[start:])
        out["env_mask"].append(ep.action_mask[start:])
        out["env_reward"].append(ep.reward)
        out["env_status"].append(str(ep.status))
        out["env_turns"].append(len(ep.step_rewards))
        out["env_correct"].append(bool(ep.correct))
        out["env_task_id"].append(ep.task_id)
    if not has_logprobs:
        out["logprobs"] = None  # type: ignore[assignment]  # TRL computes them with its model
    return out
