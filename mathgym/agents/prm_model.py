"""Process reward models: load one from a directory or the hub, score the steps of solutions in batches.

Two forms (:data:`~mathgym.rewards.prm.PRMForm`), told apart by the directory's
``mathgym_prm.json`` or else its ``config.json`` (never by the model's name):

- ``step_tag`` (Math-Shepherd, and the PRMs ``mathgym train --algo prm`` writes): a causal LM
  reads ``problem step_1 TAG\\nstep_2 TAG\\n...``; a step's score is
  ``P(good) / (P(good) + P(bad))`` of the token after its tag.
- ``step_head`` (Qwen2.5-Math-PRM): a model with two labels per token reads the steps joined by
  a separator token (optionally inside the chat template); a step's score is the softmax of the
  "correct" label at its separator.

    prm = load_prm("peiyi9979/math-shepherd-mistral-7b-prm")           # step_tag, from config.json
    prm.score_steps(["What is 2 + 3?"], [["2 + 3 = 5.", "The answer is 5."]])   # [[p1, p2]]

Only the positions mathgym wrote are read: a step that contains the tag or the separator as text
adds no step. Scoring is bounded: each input holds at most ``max_length`` tokens (the oldest cut
first), rows go through the model ``batch_size`` at a time, and a call that passes ``timeout_s``
raises :class:`~mathgym.rewards.prm.PRMTimeout` before its next micro-batch. Any failure of the
model raises :class:`~mathgym.rewards.prm.PRMError`; it never becomes a score.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from mathgym.agents.chat import apply_template
from mathgym.agents.choices import DType
from mathgym.agents.policy import pick_device, pick_dtype
from mathgym.errors import ConfigError
from mathgym.rewards.prm import (
    PRM_SETTINGS_FILE,
    AggregationRule,
    PRMError,
    PRMSettings,
    PRMTimeout,
    aggregate,
    read_prm_settings,
)

__all__ = ["PRM", "StepInputs", "aggregate", "detect_settings", "encode_steps", "load_prm", "step_tag_margins"]


class StepInputs(NamedTuple):
    """One solution as the PRM reads it: token ids and, per step, the position whose logits score
    it (``-1``: the step fell out of the ``max_length`` window)."""

    input_ids: list[int]
    positions: list[int]


def _render(tokenizer: Any, settings: PRMSettings, problem: str, steps: Sequence[str]) -> tuple[str, list[int]]:
    """The text of a solution and the character offset where each step's marker ends."""
    marker = f" {settings.step_tag}" if settings.form == "step_tag" else settings.separator
    joiner = "\n" if settings.form == "step_tag" else ""
    body, ends = "", []
    for step in steps:
        body += (joiner if body else "") + step.strip() + marker
        ends.append(len(body))
    if settings.form == "step_head" and settings.chat_template:
        messages = [
            {"role": "system", "content": settings.system_prompt},
            {"role": "user", "content": problem},
            {"role": "assistant", "content": body},
        ]
        text = apply_template(tokenizer, messages, tokenize=False)
        start = text.rfind(body)
        if start < 0:
            raise PRMError("the chat template does not write the assistant's steps verbatim; set chat_template=false")
        return text, [start + e for e in ends]
    prefix = problem.strip() + (" " if settings.form == "step_tag" else "\n")
    return prefix + body, [len(prefix) + e for e in ends]


def encode_steps(tokenizer: Any, settings: PRMSettings, problem: str, steps: Sequence[str]) -> StepInputs:
    """Tokens of ``problem`` and ``steps`` in ``settings``' form, and the position scoring each step.

    A step is scored at the last token holding a piece of its tag's (or separator's) last character; the text is
    tokenized whole, as the model was trained, and the positions come from the tokenizer's offsets
    (a fast tokenizer is needed).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError("a PRM needs a fast tokenizer (one that reports character offsets).")
    text, ends = _render(tokenizer, settings, problem, steps)
    special = settings.form == "step_head" and settings.chat_template  # the template wrote its own BOS, if any
    enc = tokenizer(text, add_special_tokens=not special, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), enc["offset_mapping"]
    positions, token = [], 0
    for end in ends:  # the last token starting before the marker's end (a character may take several byte tokens)
        while token + 1 < len(offsets) and offsets[token + 1][0] < end:
            token += 1
        position = token
        while position > 0 and offsets[position][1] <= offsets[position][0]:  # back over an added EOS (no text)
            position -= 1
        if not offsets or offsets[position][1] < end:
            raise PRMError("a step marker has no token of its own in this tokenizer's output")
        positions.append(position)
    cut = max(0, len(ids) - settings.max_length)
    return StepInputs(ids[cut:], [p - cut if p >= cut else -1 for p in positions])


def step_tag_margins(logits: torch.Tensor, good_id: int, bad_id: int) -> torch.Tensor:
    """``(B, T)`` ``logit(good) - logit(bad)``: its sigmoid is ``P(good) / (P(good) + P(bad))``.

    Example:
        >>> step_tag_margins(torch.tensor([[[0.0, 2.0, -1.0]]]), good_id=1, bad_id=2)
        tensor([[3.]])
    """
    return logits[..., good_id].float() - logits[..., bad_id].float()


def _token_id(tokenizer: Any, token: str, name: str) -> int:
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        raise ConfigError(f"{name}={token!r} is {len(ids)} tokens in this tokenizer; a PRM's {name} must be one token.")
    return int(ids[0])


class PRM:
    """A loaded process reward model (see the module docstring); build it with :func:`load_prm`.

    Args:
        model: The model: a causal LM (``step_tag``) or a two-label token model (``step_head``).
        tokenizer: Its fast tokenizer.
        settings: How to score with it.
        batch_size: Rows per forward pass.
        timeout_s: Deadline of one :meth:`score_steps` call (0: none).
        source: ``(path, options)`` it was loaded from (lets a process reward pickle as its path).
    """

    def __init__(
        self, model: Any, tokenizer: Any, settings: PRMSettings, batch_size: int = 8, timeout_s: float = 60.0,
        source: tuple[str, dict[str, Any]] | None = None,
    ):
        if batch_size < 1 or timeout_s < 0:
            raise ConfigError(f"batch_size={batch_size!r} must be >= 1 and timeout_s={timeout_s!r} >= 0.")
        self.model, self.tokenizer, self.settings = model, tokenizer, settings
        self.batch_size, self.timeout_s, self.source = batch_size, timeout_s, source
        if settings.form == "step_tag":
            self.good_id = _token_id(tokenizer, settings.good_token, "good_token")
            self.bad_id = _token_id(tokenizer, settings.bad_token, "bad_token")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def score_steps(self, problems: Sequence[str], steps: Sequence[Sequence[str]]) -> list[list[float]]:
        """Each step's probability of being correct, per solution (``nan``: cut off by ``max_length``).

        Raises:
            PRMTimeout: the call passed ``timeout_s`` (checked before each micro-batch).
            PRMError: the model or the tokenizer failed.
        """
        if len(problems) != len(steps):
            raise ValueError(f"{len(problems)} problems but {len(steps)} step lists")
        deadline = time.monotonic() + self.timeout_s if self.timeout_s else math.inf
        try:
            inputs = [encode_steps(self.tokenizer, self.settings, p, list(s)) for p, s in zip(problems, steps)]
        except PRMError:
            raise
        except Exception as err:  # a tokenizer or template failure is the scorer's, not the policy's
            raise PRMError(f"could not encode the steps: {err!r}"[:300]) from err
        out: list[list[float]] = [[] for _ in inputs]
        rows = [i for i, x in enumerate(inputs) if x.positions]
        for start in range(0, len(rows), self.batch_size):
            if time.monotonic() > deadline:
                raise PRMTimeout(f"scoring {len(rows)} solutions passed its deadline of {self.timeout_s:g}s")
            chunk = rows[start : start + self.batch_size]
            try:
                probs = self.step_probabilities([inputs[i] for i in chunk])
            except Exception as err:
                raise PRMError(f"the PRM failed on a batch: {err!r}"[:300]) from err
            for i, row in zip(chunk, probs):
                out[i] = row
        return out

    @torch.no_grad()
    def step_probabilities(self, inputs: Sequence[StepInputs]) -> list[list[float]]:
        """One forward pass over ``inputs`` (right-padded); the score at each step position."""
        width = max(len(x.input_ids) for x in inputs)
        ids = torch.full((len(inputs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(inputs), width), dtype=torch.long)
        for r, x in enumerate(inputs):
            ids[r, : len(x.input_ids)] = torch.tensor(x.input_ids)
            mask[r, : len(x.input_ids)] = 1
        self.model.eval()
        output = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))
        logits = output.logits if hasattr(output, "logits") else output[0]  # (B, T, V) or (B, T, 2)
        if self.settings.form == "step_tag":
            probs = torch.sigmoid(step_tag_margins(logits, self.good_id, self.bad_id))
        else:
            probs = torch.softmax(logits.float(), dim=-1)[..., self.settings.correct_label]
        probs = probs.cpu()
        return [[float(probs[r, p]) if p >= 0 else math.nan for p in x.positions] for r, x in enumerate(inputs)]


def _settings_object(source: str) -> dict[str, Any] | None:
    """The ``mathgym_prm.json`` of a directory or hub repo (``None`` without one)."""
    if Path(source).is_dir():
        return read_prm_settings(source)
    try:
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(source, PRM_SETTINGS_FILE)
    except Exception:  # not in the repo (or offline): config.json decides
        return None
    return read_prm_settings(Path(path).parent)


def _form_of_architecture(source: str, config: Any) -> dict[str, Any]:
    """The settings a PRM without a settings file gets from its ``config.json``'s architectures."""
    archs = list(getattr(config, "architectures", None) or [])
    if any(a.endswith("ForProcessRewardModel") for a in archs):  # Qwen2.5-Math-PRM: trained on chat-rendered input
        return {"form": "step_head", "chat_template": True}
    if any(a.endswith("ForTokenClassification") for a in archs):
        return {"form": "step_head"}
    if any(a.endswith("ForCausalLM") for a in archs):
        return {"form": "step_tag"}
    raise ConfigError(
        f"{source}: cannot tell the PRM form from its architectures {archs or '(none)'}; add a {PRM_SETTINGS_FILE} "
        "with 'form': 'step_tag' or 'step_head'."
    )


def _checked_settings(source: str, data: dict[str, Any], overrides: dict[str, Any] | None) -> PRMSettings:
    """``data`` (checked as the settings file's) with ``overrides`` on top (checked as ``load_prm``'s options)."""
    where = f"{Path(source) / PRM_SETTINGS_FILE}"
    settings = PRMSettings.from_dict(data, where=where)
    if overrides:
        settings = PRMSettings.from_dict({**data, **overrides}, where=f"load_prm options over {where}")
    return settings


def detect_settings(source: str, config: Any, overrides: dict[str, Any] | None = None) -> PRMSettings:
    """The settings of the PRM at ``source``: its settings file, else its architecture; ``overrides`` on top."""
    data = _settings_object(source)
    return _checked_settings(source, _form_of_architecture(source, config) if data is None else data, overrides)


def load_prm(
    path_or_hub_id: str | Path, device: str | None = None, *, dtype: DType = "auto", batch_size: int = 8,
    timeout_s: float = 60.0, trust_remote_code: bool = False, **options: Any,
) -> PRM:
    """Load a process reward model (see the module docstring for the forms).

    Args:
        path_or_hub_id: A local directory or a hub id.
        device: ``None``/``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda:1"``...
        dtype: ``auto`` (bf16 on a GPU that has it, else fp32), ``float32``, ``bfloat16``, ``float16``.
        batch_size: Rows per forward pass.
        timeout_s: Deadline of one ``score_steps`` call in seconds (0: none).
        trust_remote_code: Allow the repo's own model code (Qwen2.5-Math-PRM's ``...ForProcessRewardModel``).
        **options: Fields of :class:`~mathgym.rewards.prm.PRMSettings` over the directory's
            (``step_tag``, ``good_token``, ``rule``, ``max_length``...).
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    source = str(path_or_hub_id)
    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(PRMSettings)})
    if unknown:
        raise ConfigError(f"load_prm: unknown option(s) {', '.join(unknown)}.")
    data = _settings_object(source)  # a bad settings file is reported as such, before anything of the model loads
    settings = None if data is None else _checked_settings(source, data, options)
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
        settings = settings or _checked_settings(source, _form_of_architecture(source, config), options)
        torch_device = pick_device(device or "auto")
        kwargs = {"dtype": pick_dtype(dtype, torch_device), "trust_remote_code": trust_remote_code}
        archs = list(getattr(config, "architectures", None) or [])
        if settings.form == "step_tag":
            model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        elif any(a.endswith("ForProcessRewardModel") for a in archs):
            if not trust_remote_code:
                raise ConfigError(f"{source} runs its own model code ({archs[0]}); pass trust_remote_code=True to allow it.")
            model = AutoModel.from_pretrained(source, **kwargs)
        else:
            model = AutoModelForTokenClassification.from_pretrained(source, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:  # OSError: no such hub id; ValueError: a directory that is not a model
        if isinstance(err, ConfigError):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"PRM {source}: could not be loaded: {first}") from None
    if settings.form == "step_head" and getattr(model.config, "num_labels", 2) <= settings.correct_label:
        raise ConfigError(f"{source}: correct_label={settings.correct_label} but the model has {model.config.num_labels} labels.")
    model.to(torch_device).eval()
    loaded = {"device": device, "dtype": dtype, "batch_size": batch_size, "timeout_s": timeout_s,
              "trust_remote_code": trust_remote_code, **options}
    return PRM(model, tokenizer, settings, batch_size, timeout_s, source=(source, loaded))


def score_solutions(prm: PRM, problems: Sequence[str], steps: Sequence[Sequence[str]], rule: AggregationRule) -> list[float]:
    """One number per solution: its step scores aggregated by ``rule`` (for best-of-n selection)."""
    return [aggregate(s, rule) if s else math.nan for s in prm.score_steps(problems, steps)]
