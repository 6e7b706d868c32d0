"""``LLMPolicy``: a Hugging Face causal LM + tokenizer that samples and scores text.

The policy is the only object in mathgym that touches the model: rollouts ask it for
completions (token ids and per-token log-probs), trainers ask it for log-probs of given
sequences. Generation goes through a backend (:mod:`mathgym.agents.backends`); what it takes and
gives, :class:`SamplingParams` and :class:`Generation`, are defined in :mod:`mathgym.agents.sampling`
(and importable from here). Chats become token ids through the chat format the policy was loaded
with, ``policy.chat`` (:class:`~mathgym.agents.chat_format.ChatFormat`), not through the policy.

Example:
    >>> from mathgym.agents.tiny import tiny_model_path
    >>> policy = LLMPolicy.from_pretrained(str(tiny_model_path()), device="cpu")
    >>> prompt = policy.chat.prompt_ids([{"role": "user", "content": "What is 2 + 3?"}])
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
from mathgym.agents.chat_format import ChatFormat, load_tokenizer, template_options  # noqa: F401 - importable from here
from mathgym.agents.choices import Backend, DType
from mathgym.agents.dropout import has_dropout
from mathgym.agents.fast.turn_cache import TurnCache
from mathgym.agents.forward import ForwardOutput, forward_pass
from mathgym.agents.sampling import Generation, SamplingParams
from mathgym.errors import ConfigError
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


@dataclass
class LLMPolicy:
    """A causal LM policy: batched sampling of token ids, log-probs of given tokens.

    Attributes:
        model: The (possibly peft-wrapped) ``PreTrainedModel``.
        tokenizer: Its tokenizer (saved beside the weights).
        device: Where the model lives.
        backend: Generation backend name (``"native"``, ``"hf"``, ``"vllm"``).
        name_or_path: Where the model was loaded from.
        autocast_dtype: Compute dtype of :meth:`autocast` (``None``: the weights' own dtype).
        weights_version: Bumped by :meth:`mark_weights_updated` after each change of the
            weights, so that a backend holding its own copy (vLLM) knows to re-sync.
        chat: The chat format the model was loaded with (its tokenizer and chat template:
            :class:`~mathgym.agents.chat_format.ChatFormat`); it says which tokens stop a
            completion and how one decodes. Default: ``tokenizer``'s, with no template variables.
    """

    model: Any
    tokenizer: Any
    device: torch.device
    backend: Backend = "native"
    name_or_path: str = ""
    autocast_dtype: torch.dtype | None = None
    weights_version: int = 0
    chat: ChatFormat = field(default=None, repr=False)  # type: ignore[assignment] - built in __post_init__
    _backend_impl: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.chat is None:  # a model wrapped as it is (a trainer's): its tokenizer's format
            generation_config = getattr(self.model, "generation_config", None)
            self.chat = ChatFormat(self.tokenizer, generation_config=generation_config, name=self.name_or_path)

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
        in its ``mathgym.json`` (a model trained with them is prompted the same way after):
        the policy's :attr:`chat` is :meth:`ChatFormat.from_pretrained <mathgym.agents.chat_format.ChatFormat.from_pretrained>`.
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
        chat = ChatFormat.from_pretrained(name_or_path, chat_template_kwargs, getattr(model, "generation_config", None))
        policy = cls(
            model=model, tokenizer=chat.tokenizer, device=dev, name_or_path=str(name_or_path),
            autocast_dtype=precision.autocast, chat=chat,
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

    @property
    def pad_token_id(self) -> int:
        """The id prompts are padded with (the tokenizer's)."""
        return int(self.tokenizer.pad_token_id)

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
