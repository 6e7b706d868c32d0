"""Process reward models (PRMs) as seen by an env: aggregation rules, the settings a PRM directory
carries, and :class:`PRMProcessReward`, the ``(problem, steps) -> float`` callable MathStep-v0 takes.

No torch here: the model itself is :mod:`mathgym.agents.prm_model` (:func:`load_prm`), loaded
only when a PRM is asked for by path (:func:`process_reward_from_path`), so ``import mathgym``
and ``gym.make`` stay torch-free::

    env = gym.make("MathStep-v0", process_reward="runs/prm-.../final")      # a PRM directory
    prm = load_prm("runs/prm-.../final")                                    # or build the callable yourself
    env = gym.make("MathStep-v0", process_reward=PRMProcessReward(prm, rule="min"))

A PRM scores every step of a solution with the probability that the step is correct. A
failure of the model (an exception, a batch past its deadline) is never a score: the scorer
raises :class:`PRMError`, and MathStep-v0 records it as ``process_reward_error`` with the
infrastructure status ``error``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, get_origin, get_type_hints

from mathgym.errors import ConfigError, MathgymError

#: How a solution's step scores become one number (OpenR's ``prm_min`` / ``prm_last``, and two more).
AggregationRule = Literal["min", "last", "mean", "product"]
#: How a PRM turns a step into a score (see :class:`PRMSettings`).
PRMForm = Literal["step_tag", "step_head"]

#: The file beside a PRM's weights that says how to score with it (:class:`PRMSettings` as JSON).
PRM_SETTINGS_FILE = "mathgym_prm.json"


class PRMError(MathgymError, RuntimeError):
    """The process reward model could not score a batch (it crashed, or its input could not be built)."""


class PRMTimeout(PRMError, TimeoutError):
    """Scoring a batch ran past its deadline."""


def aggregate(scores: Sequence[float], rule: AggregationRule) -> float:
    """One number for a solution from its step scores.

    ``min``: the weakest step (OpenR's ``prm_min``); ``last``: the last step (``prm_last``);
    ``mean``: the average; ``product``: the probability that every step is right, if they were
    independent. Scores that are not finite (a step the scorer could not see: it fell out of the
    model's window) are left out; :class:`ValueError` when none is left.

    Example:
        >>> aggregate([0.9, 0.5, 0.8], "min"), aggregate([0.9, 0.5, 0.8], "last")
        (0.5, 0.8)
        >>> round(aggregate([0.9, 0.5, 0.8], "product"), 3)
        0.36
    """
    if rule not in get_args(AggregationRule):
        raise ConfigError(f"rule={rule!r} is not an aggregation rule; choose one of {', '.join(get_args(AggregationRule))}.")
    seen = [float(s) for s in scores if math.isfinite(float(s))]
    if not seen:
        raise ValueError("no finite step score to aggregate")
    if rule == "min":
        return min(seen)
    if rule == "last":
        return seen[-1]
    if rule == "mean":
        return sum(seen) / len(seen)
    return math.prod(seen)


@dataclass(frozen=True)
class PRMSettings:
    """How a PRM directory is scored; written as :data:`PRM_SETTINGS_FILE` beside its weights.

    Without that file the form comes from the model's ``config.json`` (its architecture, never its
    name): a ``...ForCausalLM`` is read as ``step_tag`` with Math-Shepherd's tag and tokens, a
    ``...ForTokenClassification`` as ``step_head``, a remote-code ``...ForProcessRewardModel`` (Qwen2.5-Math-PRM)
    as ``step_head`` with ``chat_template`` on.

    Attributes:
        form: ``step_tag``: a causal LM; each step ends with ``step_tag``, and its score is
            ``P(good) / (P(good) + P(bad))`` of the next token there (Math-Shepherd).
            ``step_head``: a model with two labels per token; steps are joined by ``separator``
            and the score is the softmax of label ``correct_label`` at each separator (Qwen2.5-Math-PRM).
        step_tag: The text written after each step (``step_tag``).
        good_token: The token meaning "this step is right" (``step_tag``); one token of the vocabulary.
        bad_token: The token meaning "this step is wrong" (``step_tag``).
        separator: The text written after each step (``step_head``), usually a special token.
        correct_label: The label index meaning "right" (``step_head``).
        chat_template: ``step_head``: render ``system_prompt``, the problem (user) and the joined
            steps (assistant) with the tokenizer's chat template (as Qwen2.5-Math-PRM was trained).
        system_prompt: The system message when ``chat_template`` is on.
        rule: The aggregation a process reward built from this directory uses (:func:`aggregate`).
        max_length: Longest input in tokens; a longer one keeps its last ``max_length`` tokens
            (the newest step is always scored; steps cut off score ``nan``).
    """

    form: PRMForm
    step_tag: str = "ки"
    good_token: str = "+"
    bad_token: str = "-"
    separator: str = "<extra_0>"
    correct_label: int = 1
    chat_template: bool = False
    system_prompt: str = "Please reason step by step, and put your final answer within \\boxed{}."
    rule: AggregationRule = "last"
    max_length: int = 4096

    def __post_init__(self) -> None:
        if self.form not in get_args(PRMForm):
            raise ConfigError(f"form={self.form!r} is not a PRM form; choose one of {', '.join(get_args(PRMForm))}.")
        if self.rule not in get_args(AggregationRule):
            raise ConfigError(f"rule={self.rule!r} is not an aggregation rule; choose one of {', '.join(get_args(AggregationRule))}.")
        if not self.step_tag.strip() or not self.separator:
            raise ConfigError("step_tag and separator must be non-empty text.")
        if self.good_token == self.bad_token:
            raise ConfigError(f"good_token and bad_token are both {self.good_token!r}; they must differ.")
        if not isinstance(self.correct_label, int) or self.correct_label < 0:
            raise ConfigError(f"correct_label={self.correct_label!r} must be a label index (0 or more).")
        if not isinstance(self.max_length, int) or self.max_length < 8:
            raise ConfigError(f"max_length={self.max_length!r} must be an integer of at least 8 tokens.")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = PRM_SETTINGS_FILE) -> PRMSettings:
        """Settings from a mapping (the JSON file's object); every error names ``where`` and the key.

        Unknown keys, a missing ``form`` and a value of the wrong JSON type (``"1"`` for an integer,
        ``"yes"`` for ``true``) are errors, like the checks of the values themselves.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}.")
        if "form" not in data:
            raise ConfigError(f"{where}: 'form' is missing; choose one of {', '.join(get_args(PRMForm))}.")
        for key, value in data.items():
            expected = _FIELD_TYPES[key]
            if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
                raise ConfigError(f"{where}: {key!r} must be {_TYPE_NAMES[expected]}, not {value!r}.")
        try:
            return cls(**dict(data))
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None

    def to_dict(self) -> dict[str, Any]:
        """The fields that apply to this form (what :data:`PRM_SETTINGS_FILE` holds)."""
        other = _STEP_HEAD_FIELDS if self.form == "step_tag" else _STEP_TAG_FIELDS
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in other}


_STEP_TAG_FIELDS = ("step_tag", "good_token", "bad_token")
# The JSON type of each field (a Literal's, that of its values); bool is told apart from int.
_FIELD_TYPES: dict[str, type] = {
    name: type(get_args(hint)[0]) if get_origin(hint) is Literal else hint
    for name, hint in get_type_hints(PRMSettings).items()
}
_TYPE_NAMES = {str: "a string", int: "an integer", bool: "true or false"}
_STEP_HEAD_FIELDS = ("separator", "correct_label", "chat_template", "system_prompt")


def read_prm_settings(directory: str | Path) -> dict[str, Any] | None:
    """The raw :data:`PRM_SETTINGS_FILE` object of a local directory (``None`` when it has none)."""
    path = Path(directory) / PRM_SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path} is not valid JSON ({err}); fix or delete it.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object.")
    return data


def write_prm_settings(directory: str | Path, settings: PRMSettings) -> Path:
    path = Path(directory) / PRM_SETTINGS_FILE
    path.write_text(json.dumps(settings.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return path


class StepScorer(Protocol):
    """What :class:`PRMProcessReward` needs of a PRM (:class:`mathgym.agents.prm_model.PRM` is one)."""

    def score_steps(self, problems: Sequence[str], steps: Sequence[Sequence[str]]) -> list[list[float]]: ...


class PRMProcessReward:
    """A PRM as MathStep-v0's process reward: ``(problem, steps) -> aggregate(step scores, rule)``.

    MathStep-v0 pays it on every step, on top of the verified outcome reward of the last one and
    under the env's process cap (its default). ``gym.make("MathStep-v0", process_only=True)`` lets
    the PRM alone pay: see the reward-hacking warning in ``docs/process-rewards.md``.

    Args:
        prm: Any object with ``score_steps`` (:func:`mathgym.agents.prm_model.load_prm`).
        rule: How the steps so far become the reward (``last``: the newest step's score).

    Errors of the PRM propagate (:class:`PRMError`): MathStep-v0 turns them into the status
    ``error`` and ``info["process_reward_error"]``, never into a reward.
    """

    def __init__(self, prm: StepScorer, rule: AggregationRule = "last"):
        if rule not in get_args(AggregationRule):
            raise ConfigError(f"rule={rule!r} is not an aggregation rule; choose one of {', '.join(get_args(AggregationRule))}.")
        self.prm, self.rule = prm, rule

    def __call__(self, problem: str, steps: Sequence[str]) -> float:
        scores = self.prm.score_steps([problem], [list(steps)])[0]
        return aggregate(scores, self.rule)

    def batch_key(self) -> tuple[int, str]:
        """Process rewards over the same loaded model and rule score each other's requests."""
        return id(self.prm), self.rule

    def score_ahead(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[float | ValueError]:
        """Many ``(problem, steps)`` in one batch of the model (:mod:`mathgym.envs.ahead`): what
        :meth:`__call__` gives each, or the ``ValueError`` it would raise (no step score seen)."""
        batch = self.prm.score_steps([problem for problem, _ in requests], [list(steps) for _, steps in requests])
        results: list[float | ValueError] = []
        for scores in batch:
            try:
                results.append(aggregate(scores, self.rule))
            except ValueError as err:
                results.append(err)
        return results

    def __reduce__(self) -> tuple[Any, ...]:
        """A PRM loaded from a directory travels as that directory (vector envs in subprocesses load
        their own copy); any other scorer is pickled as it is."""
        source = getattr(self.prm, "source", None)
        if source is not None:
            path, options = source
            return (functools.partial(process_reward_from_path, **options), (path, self.rule))
        return (PRMProcessReward, (self.prm, self.rule))


#: Where :func:`process_reward_from_path` finds the model side (an import string: the env layer
#: names no module of the agents layer, which needs torch).
PRM_LOADER = "mathgym.agents.prm_model:load_prm"


def process_reward_from_path(path: str | Path, rule: AggregationRule | None = None, **options: Any) -> PRMProcessReward:
    """Load the PRM at ``path`` (a directory or hub id) as a process reward; needs ``mathgym[train]``.

    A process loads each ``(path, options)`` once: every env made with the same string shares the model.

    ``rule`` defaults to the directory's settings' ``rule`` (``last`` without one); ``options``
    go to :func:`~mathgym.agents.prm_model.load_prm` (``device``, ``batch_size``, ``timeout_s``...).
    """
    key = (str(path), json.dumps(options, sort_keys=True, default=str))
    prm = _LOADED.get(key)
    if prm is None:
        module, _, name = PRM_LOADER.partition(":")
        try:
            load_prm = getattr(importlib.import_module(module), name)
        except ImportError as err:
            raise ConfigError(f"a PRM process reward needs the training stack ({err}); pip install 'mathgym[train]'.") from None
        prm = _LOADED[key] = load_prm(path, **options)
    return PRMProcessReward(prm, rule or prm.settings.rule)


#: The PRMs loaded by path in this process: the envs of a vector env share one copy of the model.
_LOADED: dict[tuple[str, str], Any] = {}
