"""An LLM judge that runs a local Hugging Face causal LM instead of calling an endpoint.

:class:`LocalJudge` is :class:`~mathgym.rewards.judge.LLMJudge` with another backend: the same
templates (the response between nonce-tagged delimiters, after the system message that says it is
data to grade), the same ``SCORE-<nonce>: n`` parsing and normalisation to ``[0, 1]``, the same cache, and
the same rule that a reply holding no single valid verdict is :attr:`Status.ERROR
<mathgym.rewards.base.Status.ERROR>` (an infrastructure status, left out of the loss), never a 0.

The chat goes through the model's own chat template (a template with no system role gets the system
text folded into the user turn); the judgements a batch still needs are generated together, left-padded,
``batch_size`` at a time. The response is spliced into the rendered prompt as token ids of its plain
text (:func:`render_with_text`): control tokens it writes (``<|im_end|>``, ``<|im_start|>assistant``)
stay characters, never a turn of the judge's chat, and the verdict is read from the tokens the judge
generated after the prompt. torch and transformers are imported when the model loads, not with this module.

A judge made by :meth:`LocalJudge.from_pretrained` pickles as its settings (where the model is, the
device and dtype, the judging options), not its weights: an env holding it can be stepped in
subprocesses (a gymnasium ``AsyncVectorEnv``, a process executor), and each process loads its own
copy of the model the first time it judges. That costs each process the model's memory and load
time; one shared judge for many processes is a served model (``vllm serve ...``) behind
:class:`~mathgym.rewards.judge.LLMJudge`. A copy starts with an empty cache and counts its own ``stats`` from then on.

Example::

    judge = LocalJudge.from_pretrained("Qwen/Qwen2.5-7B-Instruct", device="cuda")
    judge.score("Paris.", JudgeInput("What is the capital of France?", reference="Paris"))
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from mathgym.agents.chat import apply_template
from mathgym.errors import ConfigError
from mathgym.rewards.base import RewardResult, Status
from mathgym.rewards.judge import JudgeInput, JudgeMode, LLMJudge, judgement_from_reply


def render_chat(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` through ``tokenizer``'s chat template, with the generation prompt.

    A template that refuses a system message gets the system text at the head of the first user
    turn instead (:func:`mathgym.agents.chat.apply_template`).
    """
    ids = apply_template(tokenizer, messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def plain_text_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` read as characters: markup of the tokenizer's special tokens in it
    (``<|im_end|>``) is split into ordinary tokens, never the control token itself."""
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def special_ids(tokenizer: Any) -> set[int]:
    """Ids of the tokenizer's special tokens (its own, and added tokens marked special)."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return set(tokenizer.all_special_ids) | {int(i) for i, token in decoder.items() if getattr(token, "special", False)}


def render_with_text(tokenizer: Any, messages: list[dict[str, str]], placeholder: str, text: str) -> list[int]:
    """Token ids of ``messages`` through the chat template, with ``text`` where ``placeholder`` stands
    (once) in them, as :func:`plain_text_ids`: the template's own markup is tokenized as markup, the
    untrusted text as characters only. The text is spliced between the ids of what the template
    renders around it, so it cannot open or close a turn whatever it writes."""
    rendered = apply_template(tokenizer, messages, add_generation_prompt=True, tokenize=False)
    head, found, tail = rendered.partition(placeholder)
    if not found or placeholder in tail:
        raise ConfigError("LocalJudge: the chat template changed the response's place in the prompt; it cannot be spliced in.")
    return _markup_ids(tokenizer, head) + plain_text_ids(tokenizer, text) + _markup_ids(tokenizer, tail)


def _markup_ids(tokenizer: Any, rendered: str) -> list[int]:
    return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


def _check_plain_text(tokenizer: Any) -> None:
    """A tokenizer that would read a response's ``<|im_end|>`` as the control token cannot judge:
    the response could then end the judge's turn and write its own."""
    specials = special_ids(tokenizer)
    probe = "".join(tokenizer.convert_ids_to_tokens(sorted(specials)))
    if specials & set(plain_text_ids(tokenizer, probe)):
        raise ConfigError(
            f"LocalJudge: the tokenizer {type(tokenizer).__name__} reads special-token markup inside text as the tokens "
            "themselves (split_special_tokens is not honoured), so a response could write the judge's turns; use a fast tokenizer."
        )


def load_judge_model(name_or_path: str, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a causal LM to judge with, in eval mode on ``device``."""
    from transformers import AutoModelForCausalLM

    from mathgym.agents.policy import load_tokenizer, pick_device, pick_precision

    dev = pick_device(device)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=pick_precision(dtype, dev).weights).to(dev).eval()
    return model, load_tokenizer(name_or_path)


class LocalJudge(LLMJudge):
    """A reward worker that grades responses with a local causal LM (see the module docstring).

    Args:
        model: A loaded ``AutoModelForCausalLM`` (in eval mode on its device).
        tokenizer: Its tokenizer (with a chat template).
        mode, rubric, max_response_chars, cache_size, name: As in :class:`~mathgym.rewards.judge.LLMJudge`.
        batch_size: Judgements generated together.
        max_new_tokens: The longest judge reply, in tokens.
        temperature: 0 decodes greedily (the default: a judgement that does not change between calls).
        max_prompt_tokens: A judge prompt longer than this is not generated: ``too_long``, score 0.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        mode: JudgeMode = "reference",
        rubric: str = "",
        batch_size: int = 8,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        max_prompt_tokens: int = 8192,
        max_response_chars: int = 20_000,
        cache_size: int = 100_000,
        name: str = "judge",
    ):
        if mode not in ("reference", "rubric"):
            raise ConfigError(f"mode={mode!r} is not allowed; choose one of 'reference', 'rubric'.")
        if batch_size < 1 or max_new_tokens < 1 or temperature < 0 or cache_size < 0:
            raise ConfigError("LocalJudge needs batch_size >= 1, max_new_tokens >= 1, temperature >= 0, cache_size >= 0.")
        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError("LocalJudge needs a chat model: its tokenizer has no chat template.")
        _check_plain_text(tokenizer)
        self._model, self._tokenizer = model, tokenizer
        #: (name_or_path, device, dtype) of a judge made by from_pretrained: what a pickled copy reloads.
        self._source: tuple[str, str, str] | None = None
        self.mode, self.rubric, self.name = mode, rubric, name
        self.batch_size, self.max_new_tokens, self.temperature = int(batch_size), int(max_new_tokens), float(temperature)
        self.max_prompt_tokens, self.max_response_chars, self.cache_size = int(max_prompt_tokens), int(max_response_chars), int(cache_size)
        self._cache: OrderedDict[str, RewardResult] = OrderedDict()
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "cache_hits": 0, "errors": 0}

    @classmethod
    def from_pretrained(cls, name_or_path: str, *, device: str = "auto", dtype: str = "auto", **kwargs: Any) -> LocalJudge:
        """Load a hub id or local directory as the judge (``device``/``dtype`` as for a policy); the
        judge pickles as these settings (see the module docstring)."""
        judge = cls(*load_judge_model(str(name_or_path), device, dtype), **kwargs)
        judge._source = (str(name_or_path), device, dtype)
        return judge

    # -- the model, loaded again in each process a pickled judge reaches --------------------------------

    @property
    def model(self) -> Any:
        """The judge's causal LM (a pickled copy loads it here, on first use)."""
        if self._model is None:
            self._load()
        return self._model

    @property
    def tokenizer(self) -> Any:
        """The judge model's tokenizer (loaded with the model)."""
        if self._tokenizer is None:
            self._load()
        return self._tokenizer

    def _load(self) -> None:
        with self._load_lock:  # env threads of one process share one copy
            if self._model is None and self._source is not None:
                self._model, self._tokenizer = load_judge_model(*self._source)

    def __getstate__(self) -> dict[str, Any]:
        """The settings without the weights: the copy reloads the model from ``_source`` on first use."""
        if self._source is None:
            raise TypeError(
                "this LocalJudge was built from a model object, which is not pickled; make it with "
                "LocalJudge.from_pretrained(path, ...) to use it in other processes (each loads its own copy)."
            )
        state = dict(self.__dict__)
        for name in ("_lock", "_load_lock"):
            state.pop(name)
        state.update(_model=None, _tokenizer=None, _cache=OrderedDict())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock, self._load_lock = threading.Lock(), threading.Lock()

    # -- the worker interface ------------------------------------------------------------------------

    def score_batch(self, completions: Sequence[str], references: Sequence[Any] | None = None) -> list[RewardResult]:
        """Judge a batch: refusals and cached judgements first, the rest generated ``batch_size`` at a time."""
        references = [None] * len(completions) if references is None else list(references)
        if len(references) != len(completions):
            raise ConfigError(f"got {len(completions)} completions but {len(references)} references.")
        results: list[RewardResult | None] = [None] * len(completions)
        pending: dict[str, list[int]] = {}  # a response asked twice in one batch is judged once
        prompts: dict[str, tuple[list[int], str]] = {}  # token ids and the nonce of their verdict
        for i, (response, reference) in enumerate(zip(completions, references)):
            task = JudgeInput.coerce(reference)
            results[i] = self._refusal(response, task)
            if results[i] is not None:
                continue
            key = self._key(response, task)
            results[i] = self._cached(key)
            if results[i] is not None:
                continue
            if key not in pending:
                nonce = secrets.token_hex(8)
                prompt = self.prompt_ids(response, task, nonce)
                if len(prompt) > self.max_prompt_tokens:
                    results[i] = RewardResult(0.0, Status.TOO_LONG, {"prompt_tokens": len(prompt), "limit": self.max_prompt_tokens})
                    continue
                prompts[key] = (prompt, nonce)
            pending.setdefault(key, []).append(i)
        keys = list(prompts)
        for start in range(0, len(keys), self.batch_size):
            chunk = keys[start : start + self.batch_size]
            for key, reply in zip(chunk, self.generate([prompts[k][0] for k in chunk])):
                result = judgement_from_reply(reply, prompts[key][1], {"attempts": 1, "failures": []})
                self._store(key, result)
                for i in pending[key]:
                    results[i] = result
        return [r for r in results if r is not None]

    def prompt_ids(self, response: str, task: JudgeInput, nonce: str) -> list[int]:
        """The judge's prompt for ``response`` as token ids, what it shows of the response
        (:meth:`shown_response`: its answer, a long one cut) spliced in as plain text."""
        placeholder = f"\x00response-{nonce}\x00"  # no response is in the chat while it renders
        shown = self.shown_response(response, nonce)
        return render_with_text(self.tokenizer, self.messages(placeholder, task, nonce), placeholder, shown)

    def generate(self, prompts: list[list[int]]) -> list[str]:
        """The judge's replies to token-id ``prompts``, generated together (left-padded)."""
        import torch

        from mathgym.agents.sampling import left_pad

        device = next(self.model.parameters()).device
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        input_ids, attention_mask = left_pad(prompts, pad_id, device)
        sampling = {"do_sample": True, "temperature": self.temperature} if self.temperature > 0 else {"do_sample": False}
        with self._lock:
            self.stats["requests"] += len(prompts)
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=self.max_new_tokens, pad_token_id=pad_id,
                **sampling,
            )
        new = out[:, input_ids.shape[1] :]  # (B, new tokens)
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)
