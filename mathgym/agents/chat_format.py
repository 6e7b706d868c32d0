"""``ChatFormat``: how one model's chats become token ids, and its token ids text again.

The chat format is the tokenizer, its chat template and the variables the template is rendered
with (``chat_template_kwargs``): what a model was trained to read and write. It is not the
model: :class:`~mathgym.agents.policy.LLMPolicy` samples token ids, and holds the chat format
it was loaded with as ``policy.chat``; the rollout collector, the SFT / DPO / distillation data
paths and the trainer adapters use the chat format directly, and OpenRLHF's adapter builds one
from its tokenizer alone, with no model.

What the template says about turns is read from the template itself, never from a model's name
(:mod:`mathgym.agents.chat`): its end-of-turn token, the head it gives an answer, the token
closing the history's messages, whether it writes reasoning and tool calls. Each is probed once.

Example:
    >>> from mathgym.agents.tiny import build_tokenizer
    >>> chat = ChatFormat(build_tokenizer())
    >>> ids = chat.prompt_ids([{"role": "user", "content": "2+3?"}])
    >>> chat.render([{"role": "user", "content": "2+3?"}]) == chat.decode(ids, skip_special_tokens=False)
    True
    >>> chat.tokenizer.convert_ids_to_tokens(chat.end_of_turn_id)
    '<|end|>'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathgym.agents import chat as template
from mathgym.errors import ConfigError, DatasetError

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
class ChatFormat:
    """A tokenizer and its chat template: prompts, end of turn, answers and env turns as token ids.

    Attributes:
        tokenizer: The model's tokenizer (with a chat template, or a ``role: content`` fallback).
        template_kwargs: Variables passed to the template at every rendering (Qwen3's
            ``enable_thinking``, gpt-oss's ``reasoning_effort``: ``chat_template_kwargs``).
        generation_config: The model's generation config, whose EOS ids end a completion too
            (``None``: the tokenizer's EOS and the template's end of turn only).
        name: Where it was loaded from, named in error messages.
    """

    tokenizer: Any
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    generation_config: Any = field(default=None, repr=False)
    name: str = ""
    _stop_ids: tuple[int, ...] | None = field(default=None, repr=False)
    _end_of_turn: int | None = field(default=None, repr=False)
    _marks: tuple[str, int | None] | None = field(default=None, repr=False)
    _writes: dict[str, bool] = field(default_factory=dict, repr=False)

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | Path, template_kwargs: Mapping[str, Any] | None = None, generation_config: Any = None,
    ) -> ChatFormat:
        """The chat format of a hub id or model directory: its tokenizer (:func:`load_tokenizer`), and
        the ``chat_template_kwargs`` saved in its ``mathgym.json`` (the variables the model was trained
        with), under ``template_kwargs``.

        Raises:
            ConfigError: A template variable is one mathgym sets itself (:func:`template_options`).
        """
        from mathgym.agents.settings import read_model_settings

        saved = read_model_settings(name_or_path).get("chat_template_kwargs", {})
        kwargs = template_options({**saved, **dict(template_kwargs or {})})
        return cls(load_tokenizer(str(name_or_path)), kwargs, generation_config, str(name_or_path))

    # -- tokens --------------------------------------------------------------------------

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    @property
    def pad_token_id(self) -> int:
        """The id batches are padded with."""
        return int(self.tokenizer.pad_token_id)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Tokens that end a completion: EOS, the generation config's EOS ids and the template's
        end-of-turn token (:func:`~mathgym.agents.chat.stop_token_ids`)."""
        if self._stop_ids is None:
            self._stop_ids = template.stop_token_ids(self.tokenizer, self.generation_config, **self.template_kwargs)
        return self._stop_ids

    @property
    def end_of_turn_id(self) -> int:
        """The token the template closes an assistant turn with (EOS when it names none)."""
        if self._end_of_turn is None:
            eot = template.end_of_turn_id(self.tokenizer, **self.template_kwargs)
            self._end_of_turn = self.eos_token_id if eot is None else eot
        return self._end_of_turn

    def _template_marks(self) -> tuple[str, int | None]:
        if self._marks is None:
            if getattr(self.tokenizer, "chat_template", None):
                self._marks = (template.answer_opening(self.render, self.tokenizer), template.message_close_id(self.tokenizer, self.render))
            else:
                self._marks = ("", None)
        return self._marks

    @property
    def answer_opening(self) -> str:
        """The head the template gives an assistant turn that its generation prompt leaves to the
        model (gpt-oss's ``<|channel|>final<|message|>``; usually empty), see :func:`~mathgym.agents.chat.answer_opening`;
        empty too when it holds none of the tokenizer's added tokens (Llama 2's plain space)."""
        return self._template_marks()[0]

    @property
    def message_close_id(self) -> int | None:
        """The token closing earlier messages when it is not :attr:`end_of_turn_id` (gpt-oss's
        ``<|end|>``), see :func:`~mathgym.agents.chat.message_close_id`."""
        return self._template_marks()[1]

    @property
    def template_name(self) -> str:
        """How error messages name this chat template."""
        return f"the chat template of {self.name or 'the model'}"

    # -- text <-> tokens -------------------------------------------------------------------

    def render(
        self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True, tools: Sequence[dict[str, Any]] | None = None,
    ) -> str:
        """The chat as text (chat template, or ``role: content`` lines without one).

        ``tools`` (the OpenAI function schemas an env lists in ``info["tools"]``) go to the template's
        ``tools`` variable, where templates write the tools a model may call; a template that does not
        read it, and the ``role: content`` fallback, leave them out (the env's prompt names them too).

        Raises:
            ConfigError: The template is broken, or refuses these roles.
        """
        if getattr(self.tokenizer, "chat_template", None):
            from jinja2 import TemplateError

            try:  # a template that refuses a system role gets the system text in the first user turn
                extra = {"tools": list(tools)} if tools else {}
                return template.apply_template(
                    self.tokenizer, messages, add_generation_prompt=add_generation_prompt, tokenize=False, **extra,
                    **self.template_kwargs,
                )
            except TemplateError as err:  # a broken template, or one that refuses these roles
                raise ConfigError(
                    f"{self.template_name} cannot render the env's messages "
                    f"(roles {[m['role'] for m in messages]}): {type(err).__name__}: {err}. Fix the template "
                    "(tokenizer_config.json's chat_template or chat_template.jinja)."
                ) from None
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return text + ("assistant: " if add_generation_prompt else "")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token markup in the text is honoured, none added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> list[int]:
        """Prompt tokens for a chat, ending with the generation prompt (``tools``: see :meth:`render`)."""
        return self.encode(self.render(messages, tools=tools))

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of ``token_ids`` (special tokens left out unless ``skip_special_tokens=False``)."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=skip_special_tokens)

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
        text = self.decode(ids, skip_special_tokens=False)
        opening = self.answer_opening
        if opening and opening in text:
            text = text[text.rindex(opening) + len(opening) :]
        return text

    # -- turns ----------------------------------------------------------------------------

    def env_turn_ids(
        self, chat: Sequence[dict[str, Any]], reply: str, last_token: int | None, tools: Sequence[dict[str, Any]] | None = None,
    ) -> list[int]:
        """Tokens that follow an action: the end of the assistant turn, the env's reply as a
        user turn, and the next generation prompt (what the template inserts there,
        :func:`~mathgym.agents.chat.turn_suffix`), appended to the episode's tokens as they are.

        Args:
            chat: The messages before the action.
            reply: The env's reply.
            last_token: The action's last token: when it closed the turn (the end-of-turn marker
                the template's text starts with, or the one it ends a chat's last turn with,
                gpt-oss's ``<|return|>`` for the history's ``<|end|>``), no close is added.
            tools: The tools the chat was rendered with (:meth:`render`).

        Raises:
            ConfigError: The template rewrites earlier turns (no token-faithful episode).
        """
        render = self.render if not tools else (lambda messages, gen=True: self.render(messages, gen, tools))
        suffix = template.turn_suffix(render, chat, reply, self.template_name)
        return self.after_action(self.encode(suffix), last_token)

    def after_action(self, ids: list[int], last_token: int | None) -> list[int]:
        """``ids`` (the template's text after an assistant turn) less the turn's close when the
        action's ``last_token`` closed it (:func:`~mathgym.agents.chat.drop_turn_close`), with the
        whitespace a template writes before the close (Llama 2's ``" </s>"``)."""

        def blank(token: int) -> bool:
            return not self.tokenizer.decode([token]).strip()

        return template.drop_turn_close(ids, last_token, self.stop_token_ids, self.end_of_turn_id, self.message_close_id, blank)

    def answer_ids(self, chat: Sequence[dict[str, Any]], content: str | dict[str, Any], render: Any = None) -> list[int]:
        """Tokens of a demonstrated answer to ``chat``, as the model would write them: the
        template's head of the turn (gpt-oss's channel header, Qwen3's think block) with the
        content (:func:`~mathgym.agents.chat.answer_text`), then :attr:`end_of_turn_id`.

        ``content`` is the answer's text, or the whole assistant message: its ``tool_calls`` are
        rendered by the template (a template that does not write them is an error: the calls
        would be lost), and its ``reasoning_content`` too, under the name the template reads
        (Qwen3's ``reasoning_content``, gpt-oss's ``thinking``); a template that reads none gets
        it as a ``<think>`` block at the head of the content. ``render`` replaces
        :meth:`render` (a caching wrapper of it).

        Raises:
            DatasetError: The message has tool calls the chat template does not write.
        """
        message = {"role": "assistant", "content": content} if isinstance(content, str) else dict(content)
        reasoning = message.pop("reasoning_content", None)

        def thought() -> str:  # the reasoning as a think block at the head of the content
            return f"<think>\n{reasoning}\n</think>\n\n{message.get('content') or ''}"

        if not getattr(self.tokenizer, "chat_template", None):
            return self.encode(thought() if reasoning else str(message.get("content") or "")) + [self.end_of_turn_id]
        if message.get("tool_calls") and not self.writes("tool_calls"):
            raise DatasetError(
                f"a demonstration's assistant turn makes tool calls, which {self.template_name} does not write: "
                "they would be lost (use a model whose template renders tool_calls, or leave those rows out)"
            )
        if reasoning:
            if self.writes("reasoning"):
                message.update(dict.fromkeys(template.REASONING_FIELDS, reasoning))
            else:
                message["content"] = thought()
        return self.encode(template.answer_text(render or self.render, chat, message)) + [self.end_of_turn_id]

    def writes(self, what: str) -> bool:
        """Whether the template writes an assistant message's ``"reasoning"`` or ``"tool_calls"`` (probed once)."""
        if what not in self._writes:
            probe = "MATHGYMFIELD"
            if what == "reasoning":
                fields = dict.fromkeys(template.REASONING_FIELDS, probe)
            else:
                fields = {"tool_calls": [{"type": "function", "function": {"name": probe, "arguments": {}}}]}
            self._writes[what] = template.renders_field(self.render, **fields)
        return self._writes[what]
