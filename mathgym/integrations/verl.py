"""mathgym envs inside verl: data rows, an agent loop registered as ``mathgym``, a custom reward function.

Data (needs no verl; write the rows to Parquet with pandas)::

    pd.DataFrame(verl_rows("GuessNumber-v0", 10_000)).to_parquet("train.parquet")

Agent loop (multi-turn, any env)::

    # agent_loop.yaml, passed as actor_rollout_ref.rollout.agent.agent_loop_config_path
    - name: mathgym
      _target_: mathgym.integrations.verl.MathgymAgentLoop

Each data row names its env in ``extra_info`` (``env_id``, ``env_kwargs`` as JSON text,
``seed``) and sets ``agent_name: mathgym``; :func:`verl_rows` writes such rows. The loop
resets the env with the row's seed, generates through verl's server manager, steps the env
with the decoded text, and appends the env's reply with verl's own Continuous Token builder
(the same token bookkeeping verl's tool agent uses), so response tokens stay exactly what
the server generated. The episode's return is ``reward_score``. verl is imported when
``MathgymAgentLoop`` is first looked up (as verl does, through the ``_target_`` above).

Reward function (single-turn math, verl's ``custom_reward_function``)::

    custom_reward_function.path=$(python -c "import mathgym.integrations.verl as m; print(m.__file__)")
    custom_reward_function.name=compute_score
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mathgym  # noqa: F401 - registers the envs
from mathgym.integrations._prompts import env_prompts
from mathgym.integrations._labels import label_scores
from mathgym.integrations._verl_names import AGENT_NAME


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any] | None = None
) -> float:
    """verl's custom reward function: 1.0 when ``solution_str``'s final answer equals ``ground_truth``,
    or, for a ground truth that holds a program's tests (verl's code rows: APPS's ``inputs`` and
    ``outputs``, as PRIME's Eurus-2, Skywork-OR1 and DeepCoder write them), when the program in
    ``solution_str`` passes all of them in mathgym's sandbox.

    Answers are graded by mathgym's :class:`~mathgym.rewards.math.MathVerifier` in ``"lenient"``
    mode (it scores other people's prompts, whose answer format it does not control), reading the
    ground truth as MathReason-v0 reads a data set's: bare LaTeX as LaTeX (``x \\geq 5``), and
    a list of forms (Skywork-OR1's ``'["3", "3.0"]'``) matched by any. What a row is follows from
    its ground truth, never from ``data_source``. An infrastructure failure (the verifier
    crashed, the sandbox could not run) scores 0.0 and is not retried.
    """
    return label_scores([str(solution_str)], [ground_truth])[0]


def verl_rows(
    env_id: str, n: int, *, env_kwargs: Mapping[str, Any] | None = None, start_seed: int = 0
) -> list[dict[str, Any]]:
    """``n`` rows of verl's RLHF data format for ``env_id`` (write them to parquet with pandas).

    Each row: ``data_source`` (``mathgym/<env_id>``), ``prompt`` (the env's chat),
    ``agent_name`` (``mathgym``), ``reward_model`` (style ``env``; the ground truth is left
    empty: the env judges), ``extra_info`` (``env_id``, ``env_kwargs`` as JSON text, ``seed``).
    The options are JSON text so that any options, none included, make a valid Parquet column.

    Raises:
        UnknownEnvError: ``env_id`` is not registered (the message suggests close ids).
        ConfigError: ``env_kwargs`` names an option the env does not take.
    """
    kwargs, prompts = env_prompts(env_id, n, env_kwargs, start_seed)
    return [
        {
            "data_source": f"mathgym/{env_id}",
            "prompt": messages,
            "agent_name": AGENT_NAME,
            "reward_model": {"style": "env", "ground_truth": ""},
            "extra_info": {"env_id": env_id, "env_kwargs": json.dumps(kwargs, sort_keys=True), "seed": seed},
        }
        for seed, messages in prompts
    ]


def __getattr__(name: str) -> Any:
    """``MathgymAgentLoop``, verl's agent-loop class, built (and registered with verl) on first use."""
    if name == "MathgymAgentLoop":
        from mathgym.integrations._verl_loop import MathgymAgentLoop

        return MathgymAgentLoop
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
