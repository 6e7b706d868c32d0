"""``LLMPolicy``: a Hugging Face causal LM + tokenizer that samples and scores text.

The policy is the only object in mathgym that touches the model: rollouts ask it for
completions (token ids and per-token log-probs), trainers ask it for log-probs of given
sequences. Generation goes through a backend (:mod:`mathgym.agents.backends`); what it takes and
gives, :class:`SamplingParams` and :class:`Generation`, are defined in :mod:`mathgym.agents.sampling`
(and importable from here).

Example:
    >>> from mathgym.agents.tiny import tiny_model_path
    >>> policy = LLMPolicy.from_pretrained(str(tiny_model_path()), device="cpu")
    >>> prompt = policy.encode_chat([{"role": "user", "content": "What is 2 + 3?"}])
    >>> out = policy.generate([prompt], SamplingParams(max_new_tokens=16))
    >>> len(out[0].token_ids) == len(out[0].logprobs) <= 16, type(out[0].text)
    (True, <class 'str'>)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch

from mathgym.agents.backends import make_backend
from mathgym.agents.choices import Backend, DType
from mathgym.agents.dropout import has_dropout
from mathgym.agents.fast.turn_cache import TurnCache
from mathgym.agents.forward import ForwardOutput, forward_pass
from mathgym.agents.sampling import Generation, SamplingParams
from mathgym.errors import ConfigError, DatasetError
from mathgym.options import pick


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings (peft).

    Attributes:
        r: Rank; ``0`` disables LoRA (full fine-tuning).
        alpha: Scaling numerator.
        target_modules: Module names to adapt (``"all-linear"`` for every linear layer).
        dropout: Dropout on the adapter input.
    """

    r: int = 0
    alpha: int = 16
    target_modules: tuple[str, ...] | str = "all-linear"
    dropout: float = 0.0


def pick_device(device: str = "auto", cuda_available: bool | None = None) -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; an unavailable CUDA device is an error.

    Args:
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        cuda_available: Whether CUDA can be used (default: ask torch).
    """
    cuda = torch.cuda.is_available() if cuda_available is None else cuda_available
    if device == "auto":
        return torch.device("cuda" if cuda else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device={device!r} is not a torch device; use 'auto', 'cpu', 'cuda' or 'cuda:N'.") from None
    if dev.type == "cuda" and not cuda:
        raise ConfigError(f"device={device!r} but torch sees no CUDA GPU here; use device='cpu' (or 'auto').")
    return dev


class Precision(NamedTuple):
    """How a policy stores and computes: ``weights`` dtype, and the ``autocast`` dtype (``None``: off).

    ``float16`` keeps fp32 weights and computes under fp16 autocast with a gradient scaler
    (fp16 weights with AdamW under- and overflow); ``bfloat16`` stores the weights in bf16.
    """

    weights: torch.dtype
    autocast: torch.dtype | None = None


def _auto_precision(device: torch.device, bf16_supported: bool | None) -> Precision:
    """bfloat16 on a CUDA device that supports it, else float32."""
    if device.type != "cuda":
        return Precision(torch.float32)
    supported = torch.cuda.is_bf16_supported() if bf16_supported is None else bf16_supported
    return Precision(torch.bfloat16 if supported else torch.float32)


#: ``dtype`` choices (:data:`~mathgym.agents.choices.DType`) -> ``(device, bf16_supported) -> Precision``.
PRECISIONS: dict[str, Callable[[torch.device, bool | None], Precision]] = {
    "auto": _auto_precision,
    "float32": lambda device, bf16_supported: Precision(torch.float32),
    "bfloat16": lambda device, bf16_supported: Precision(torch.bfloat16),
    "float16": lambda device, bf16_supported: Precision(torch.float32, torch.float16),
}


def pick_precision(dtype: DType, device: torch.device, bf16_supported: bool | None = None) -> Precision:
    """Resolve the ``dtype`` option for ``device`` (:data:`PRECISIONS`).

    ``"auto"`` → bfloat16 on a CUDA device that supports it, else float32.

    Args:
        dtype: ``"auto"``, ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        device: Where the model will live.
        bf16_supported: Whether that CUDA device computes in bf16 (default: ask torch).
    """
    return pick(PRECISIONS, "dtype", dtype)(device, bf16_supported)


def pick_dtype(dtype: DType, device: torch.device, bf16_supported: bool | None = None) -> torch.dtype:
    """The dtype the model computes in (see :func:`pick_precision`)."""
    precision = pick_precision(dtype, device, bf16_supported)
    return precision.autocast or precision.weights


#: Arguments of ``apply_chat_template`` that mathgym sets itself: not chat template options.
_OWN_TEMPLATE_ARGUMENTS = frozenset({"conversation", "messages", "add_generation_prompt", "tokenize", "continue_final_message", "return_dict"})


def template_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked as chat template keyword arguments (names of variables the template reads).

    Example:
        >>> template_options({"enable_thinking": False})
        {'enable_thinking': False}

    Raises:
        ConfigError: A name is not text, or is an argument mathgym sets itself (``add_generation_prompt``...).
    """
    if not isinstance(options, Mapping):
        raise ConfigError(f"chat_template_kwargs must be a mapping of template variables, not {type(options).__name__}")
    for name in options:
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"chat_template_kwargs: {name!r} is not a template variable name")
        if name in _OWN_TEMPLATE_ARGUMENTS:
            raise ConfigError(f"chat_template_kwargs: {name!r} is set by mathgym itself; leave it out")
    return dict(options)


def load_tokenizer(name_or_path: str):
    """Load a tokenizer; left padding, and a pad token (EOS) when the model has none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


@dataclass
class LLMPolicy:
    """A causal LM policy: chat encoding, batched sampling, log-probs of given tokens.

    Attributes:
        model: The (possibly peft-wrapped) ``PreTrainedModel``.
        tokenizer: Its tokenizer (with a chat template, or a plain-text fallback).
        device: Where the model lives.
        backend: Generation backend name (``"native"``, ``"hf"``, ``"vllm"``).
        name_or_path: Where the model was loaded from.
        autocast_dtype: Compute dtype of :meth:`autocast` (``None``: the weights' own dtype).
        weights_version: Bumped by :meth:`mark_weights_updated` after each change of the
            weights, so that a backend holding its own copy (vLLM) knows to re-sync.
    """

    model: Any
    tokenizer: Any
    device: torch.device
    backend: Backend = "native"
    name_or_path: str = ""
    autocast_dtype: torch.dtype | None = None
    weights_version: int = 0
    _backend_impl: Any = field(default=None, repr=False)
    _stop_ids: tuple[int, ...] | None = field(default=None, repr=False)
    _end_of_turn: int | None = field(default=None, repr=False)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    _template_marks: tuple[str, int | None] | None = field(default=None, repr=False)
    _template_fields: dict[str, bool] = field(default_factory=dict, repr=False)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        lora: LoraSettings | None = None,
        device: str = "auto",
        dtype: DType = "auto",
        backend: Backend = "native",
        gradient_checkpointing: bool = False,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> LLMPolicy:
        """Load a hub id or local directory (a saved LoRA adapter directory works too).

        ``dtype`` and ``device`` are resolved by :func:`pick_precision` and :func:`pick_device`;
        ``gradient_checkpointing`` recomputes activations in the backward pass (less memory);
        ``chat_template_kwargs`` are passed to the chat template at every rendering (Qwen3's
        ``enable_thinking``, gpt-oss's ``reasoning_effort``), over those saved with the model
        in its ``mathgym.json`` (a model trained with them is prompted the same way after).
        """
        from transformers import AutoModelForCausalLM

        dev = pick_device(device)
        precision = pick_precision(dtype, dev)
        torch_dtype = precision.weights
        adapter_config = Path(name_or_path) / "adapter_config.json"
        if adapter_config.is_file():
            from peft import AutoPeftModelForCausalLM

            model = AutoPeftModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype, is_trainable=True)
        else:
            model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype)
            if lora is not None and lora.r > 0:
                model = apply_lora(model, lora)
        model.to(dev)
        from mathgym.agents.settings import read_model_settings

        policy = cls(
            model=model, tokenizer=load_tokenizer(name_or_path), device=dev, name_or_path=str(name_or_path),
            autocast_dtype=precision.autocast,
            chat_template_kwargs=template_options({**read_model_settings(name_or_path).get("chat_template_kwargs", {}),
                                                   **dict(chat_template_kwargs or {})}),
        )
        if gradient_checkpointing:
            policy.enable_gradient_checkpointing()
        policy.set_backend(backend)
        return policy

    # -- precision and memory -------------------------------------------------------

    def autocast(self) -> contextlib.AbstractContextManager:
        """A context computing forward passes in :attr:`autocast_dtype` (a no-op when ``None``)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def enable_gradient_checkpointing(self) -> None:
        """Recompute each layer's activations in the backward pass instead of keeping them.

        Non-reentrant checkpointing: works under LoRA (frozen embeddings) without making the
        inputs require grad. Only active in train mode; generation (eval mode) keeps its KV cache.
        """
        model = self.model.get_base_model() if self.has_lora else self.model
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise ConfigError(
                f"{type(model).__name__} does not support gradient checkpointing; set gradient_checkpointing=false."
            )
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's name for it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

    def mark_weights_updated(self) -> None:
        """Record that the weights changed (an optimizer step, a loaded checkpoint)."""
        self.weights_version += 1

    # -- text <-> tokens ---------------------------------------------------------

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def pad_token_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Tokens that end a turn: EOS, the generation config's EOS ids and the chat template's
        end-of-turn token (read from the template, see :mod:`mathgym.agents.chat`)."""
        if self._stop_ids is None:
            from mathgym.agents.chat import stop_token_ids

            self._stop_ids = stop_token_ids(self.tokenizer, getattr(self.model, "generation_config", None), **self.chat_template_kwargs)
        return self._stop_ids

    @property
    def end_of_turn_id(self) -> int:
        """The token the chat template closes an assistant turn with (EOS when it names none)."""
        if self._end_of_turn is None:
            from mathgym.agents.chat import end_of_turn_id

            eot = end_of_turn_id(self.tokenizer, **self.chat_template_kwargs)
            self._end_of_turn = self.eos_token_id if eot is None else eot
        return self._end_of_turn

    def _marks(self) -> tuple[str, int | None]:
        if self._template_marks is None:
            from mathgym.agents.chat import answer_opening, message_close_id

            if getattr(self.tokenizer, "chat_template", None):
                self._template_marks = (answer_opening(self.render_chat, self.tokenizer), message_close_id(self.tokenizer, self.render_chat))
            else:
                self._template_marks = ("", None)
        return self._template_marks

    @property
    def answer_opening(self) -> str:
        """The head the template gives an assistant turn that its generation prompt leaves to the
        model (gpt-oss's ``<|channel|>final<|message|>``; usually empty), see :func:`~mathgym.agents.chat.answer_opening`;
        empty too when it holds none of the tokenizer's added tokens (Llama 2's plain space)."""
        return self._marks()[0]

    @property
    def message_close_id(self) -> int | None:
        """The token closing earlier messages when it is not :attr:`end_of_turn_id` (gpt-oss's
        ``<|end|>``), see :func:`~mathgym.agents.chat.message_close_id`."""
        return self._marks()[1]

    def after_action(self, ids: list[int], last_token: int | None) -> list[int]:
        """``ids`` (the template's text after an assistant turn) less the turn's close when the
        action's ``last_token`` closed it (:func:`~mathgym.agents.chat.drop_turn_close`), with the
        whitespace a template writes before the close (Llama 2's ``" </s>"``)."""
        from mathgym.agents.chat import drop_turn_close

        def blank(token: int) -> bool:
            return not self.tokenizer.decode([token]).strip()

        return drop_turn_close(ids, last_token, self.stop_token_ids, self.end_of_turn_id, self.message_close_id, blank)

    def answer_ids(self, chat: Sequence[dict[str, Any]], content: str | dict[str, Any], render: Any = None) -> list[int]:
        """Tokens of a demonstrated answer to ``chat``, as the model would write them: the
        template's head of the turn (gpt-oss's channel header, Qwen3's think block) with the
        content (:func:`~mathgym.agents.chat.answer_text`), then :attr:`end_of_turn_id`.

        ``content`` is the answer's text, or the whole assistant message: its ``tool_calls`` are
        rendered by the template (a template that does not write them is an error: the calls
        would be lost), and its ``reasoning_content`` too, under the name the template reads
        (Qwen3's ``reasoning_content``, gpt-oss's ``thinking``); a template that reads none gets
        it as a ``<think>`` block at the head of the content. ``render`` replaces
        :meth:`render_chat` (a caching wrapper of it).

        Raises:
            DatasetError: The message has tool calls the chat template does not write.
        """
        message = {"role": "assistant", "content": content} if isinstance(content, str) else dict(content)
        reasoning = message.pop("reasoning_content", None)

        def thought() -> str:  # the reasoning as a think block at the head of the content
            return f"<think>\n{reasoning}\n</think>\n\n{message.get('content') or ''}"

        if not getattr(self.tokenizer, "chat_template", None):
            return self.encode_text(thought() if reasoning else str(message.get("content") or "")) + [self.end_of_turn_id]
        from mathgym.agents.chat import REASONING_FIELDS, answer_text

        if message.get("tool_calls") and not self._renders("tool_calls"):
            raise DatasetError(
                f"a demonstration's assistant turn makes tool calls, which {self.template_name} does not write: "
                "they would be lost (use a model whose template renders tool_calls, or leave those rows out)"
            )
        if reasoning:
            if self._renders("reasoning"):
                message.update(dict.fromkeys(REASONING_FIELDS, reasoning))
            else:
                message["content"] = thought()
        return self.encode_text(answer_text(render or self.render_chat, chat, message)) + [self.end_of_turn_id]

    def _renders(self, what: str) -> bool:
        """Whether the chat template writes an assistant message's reasoning or tool calls (probed once)."""
        if what not in self._template_fields:
            from mathgym.agents.chat import REASONING_FIELDS, renders_field

            probe = "MATHGYMFIELD"
            if what == "reasoning":
                fields = dict.fromkeys(REASONING_FIELDS, probe)
            else:
                fields = {"tool_calls": [{"type": "function", "function": {"name": probe, "arguments": {}}}]}
            self._template_fields[what] = renders_field(self.render_chat, **fields)
        return self._template_fields[what]

    @property
    def template_name(self) -> str:
        """How error messages name this model's chat template."""
        return f"the chat template of {self.name_or_path or 'the model'}"

    def render_chat(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The chat as text (chat template, or ``role: content`` lines without one)."""
        if getattr(self.tokenizer, "chat_template", None):
            from jinja2 import TemplateError

            from mathgym.agents.chat import apply_template

            try:  # a template that refuses a system role gets the system text in the first user turn
                return apply_template(
                    self.tokenizer, messages, add_generation_prompt=add_generation_prompt, tokenize=False, **self.chat_template_kwargs
                )
            except TemplateError as err:  # a broken template, or one that refuses these roles
                raise ConfigError(
                    f"{self.template_name} cannot render the env's messages "
                    f"(roles {[m['role'] for m in messages]}): {type(err).__name__}: {err}. Fix the template "
                    "(tokenizer_config.json's chat_template or chat_template.jinja)."
                ) from None
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return text + ("assistant: " if add_generation_prompt else "")

    def encode_text(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token markup in the text is honoured, none added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode_chat(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Prompt tokens for a chat, ending with the generation prompt."""
        return self.encode_text(self.render_chat(messages))

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def action_text(self, token_ids: Sequence[int]) -> str:
        """The text of an action: its tokens without the stop token that ended it, special
        tokens inside it kept, so that the chat template's rendering of the env's messages is
        the decoded token sequence. When the action holds the head the template gives an
        answer (:attr:`answer_opening`, gpt-oss's ``<|channel|>final<|message|>``), the answer is
        the text after its last occurrence: what the template writes as the message's content
        (gpt-oss's analysis channel before it is reasoning the history leaves out, as Qwen3's
        earlier think blocks are; the episode's tokens keep it)."""
        ids = list(token_ids)
        if ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        opening = self.answer_opening
        if opening and opening in text:
            text = text[text.rindex(opening) + len(opening) :]
        return text

    # -- generation ----------------------------------------------------------------

    def set_backend(self, backend: Backend) -> None:
        """Choose the generation backend (see :mod:`mathgym.agents.backends`)."""
        self._backend_impl = make_backend(backend, self)
        self.backend = backend

    def _generation_backend(self) -> Any:
        """The backend object, built for :attr:`backend` on first use (a policy constructed
        directly, not through :meth:`from_pretrained`, has none yet)."""
        if self._backend_impl is None:
            self.set_backend(self.backend)
        return self._backend_impl

    @contextlib.contextmanager
    def reusing_turns(self) -> Iterator[Any]:
        """A scope in which :meth:`generate` keeps the key/value cache of the sequences it ran and
        runs a later prompt from the end of its longest kept prefix: a multi-turn episode's next
        turn runs only the tokens added since its last turn (:mod:`mathgym.agents.fast.turn_cache`).

        The kept rows belong to the weights that computed them: do not change the weights inside
        the scope. Yields the :class:`~mathgym.agents.fast.turn_cache.TurnCache` (its ``reused_tokens``
        and ``run_tokens`` count what was saved), or ``None`` where the backend has no such cache
        (``hf``, ``vllm``: vLLM caches prefixes itself). Scopes do not nest: an inner one shares the outer's cache.
        """
        backend = self._generation_backend()
        if not hasattr(backend, "turns") or backend.turns is not None:
            yield getattr(backend, "turns", None)
            return
        backend.turns = TurnCache()
        try:
            yield backend.turns
        finally:
            backend.turns = None

    @torch.inference_mode()
    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, generator: torch.Generator | None = None,
        seeds: Sequence[int] | None = None,
    ) -> list[Generation]:
        """Sample one completion per prompt (prompts are token-id lists).

        Args:
            prompts: Token ids of each prompt.
            params: Temperature, top-p, length and stop strings.
            generator: Where each prompt's seed is drawn from when ``seeds`` is not given
                (``None``: the global RNG).
            seeds: One seed per prompt: with the ``native`` and ``vllm`` backends prompt ``i``'s
                completion is drawn from the stream of ``seeds[i]`` alone, whatever else the
                batch holds (see :mod:`mathgym.agents.backends`).
        """
        if not prompts:
            return []
        was_training = self.model.training
        self.model.eval()
        try:
            backend = self._generation_backend()
            with self.autocast():
                if seeds is None:
                    return backend.generate(prompts, params, generator)
                return backend.generate(prompts, params, generator, seeds)
        finally:
            self.model.train(was_training)

    # -- scoring ---------------------------------------------------------------------

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0, *,
        groups: torch.Tensor | None = None, value_model: Any = None, entropy_grad: bool = False,
        positions: torch.Tensor | None = None,
    ) -> ForwardOutput:
        """Log-probs, entropy (and values) of given sequences, in this policy's precision: the one
        forward path (:func:`~mathgym.agents.forward.forward_pass`), with or without gradient as
        the caller's context says.

        Args:
            input_ids: ``(B, T)`` right-padded token ids.
            attention_mask: ``(B, T)`` 1 for real tokens.
            temperature: Logits are divided by it (match the sampling temperature).
            groups: ``(B,)`` group of each row (GRPO's samples of one task): the prefix the rows of
                a group share is computed once per group (:mod:`mathgym.agents.fast.prefix`); same
                result, less compute.
            value_model: A :class:`~mathgym.agents.value_head.ValueModel` read on the same pass.
            entropy_grad: Keep the entropy in the graph (an entropy bonus).
            positions: ``(B, T)`` the tokens whose log-probs are wanted (the others hold 0): the
                output head runs there only.
        """
        with self.autocast():
            return forward_pass(
                self.model, input_ids, attention_mask, temperature=temperature, groups=groups, value_model=value_model,
                entropy_grad=entropy_grad, positions=positions,
            )

    def token_logprobs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0,
        groups: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logprobs, entropy)`` of :meth:`forward`, both ``(B, T)``; position 0 (no context) is 0.
        The entropy is detached (a statistic)."""
        out = self.forward(input_ids, attention_mask, temperature, groups=groups)
        return out.logprobs, out.entropy

    @contextlib.contextmanager
    def adapter_disabled(self) -> Iterator[None]:
        """Run the base model without the LoRA adapter (the GRPO/PPO reference)."""
        if not self.has_lora:
            raise ConfigError("adapter_disabled() needs a LoRA policy (lora_r > 0).")
        with self.model.disable_adapter():
            yield

    @property
    def has_lora(self) -> bool:
        return hasattr(self.model, "disable_adapter") and hasattr(self.model, "peft_config")

    @property
    def has_active_dropout(self) -> bool:
        """Whether a train-mode forward pass draws dropout (:func:`~mathgym.agents.dropout.has_dropout`)."""
        return has_dropout(self.model)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def save_pretrained(self, path: str | Path) -> None:
        """Save model (or adapter) and tokenizer so ``from_pretrained(path)`` reloads them."""
        self.model.save_pretrained(str(path))
        self.tokenizer.save_pretrained(str(path))


def apply_lora(model: Any, lora: LoraSettings, task_type: str = "CAUSAL_LM") -> Any:
    """Wrap ``model`` with a peft LoRA adapter (``task_type="TOKEN_CLS"``: its classification head trains in full)."""
    from peft import LoraConfig, get_peft_model

    targets = lora.target_modules if isinstance(lora.target_modules, str) else list(lora.target_modules)
    heads = ["score", "classifier"] if task_type == "TOKEN_CLS" else None  # peft trains these whole, never with an adapter
    config = LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, target_modules=targets, exclude_modules=heads, lora_dropout=lora.dropout,
        task_type=task_type,
    )
    return get_peft_model(model, config)
