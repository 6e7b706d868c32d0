"""What a chat template says about turns: its end-of-turn token, and the text it inserts
between the end of an assistant turn and the next generation prompt; and :func:`apply_template`,
through which every chat is rendered.

Both are read from the template itself (rendering a probe chat), never from a model's name:

- :func:`end_of_turn_id`: the special token the template writes right after an assistant
  message's content (``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``...). It can differ from
  the tokenizer's EOS (Qwen base: EOS ``<|endoftext|>``, end of turn ``<|im_end|>``).
- :func:`turn_suffix`: the text that follows an assistant turn's content when an env replies:
  the end-of-turn marker, the reply as a user turn, the next generation prompt. The rollout
  appends its tokens to the episode's token sequence, which stays the single source of truth:
  the history is never re-rendered. The suffix is measured on a copy of the chat whose
  assistant contents are a placeholder, so templates that rewrite earlier assistant turns
  (Qwen3 drops their ``<think>`` reasoning) still give the text they would insert, and
  templates that inject a default system prompt into a chat without one do not inject it
  mid-episode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mathgym.errors import ConfigError

Chat = list[dict[str, str]]
Render = Callable[[Sequence[dict[str, str]], bool], str]

#: Stands for an assistant message's content when probing a template.
PLACEHOLDER = "MATHGYMPLACEHOLDER"


def fold_system(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The chat with its leading system message moved to the head of the first user turn
    (``None`` when it does not start with a system message followed by a user message).

    Example:
        >>> fold_system([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
        [{'role': 'user', 'content': 'Be brief.\\n\\n2+2?'}]
    """
    if len(messages) < 2 or messages[0].get("role") != "system" or messages[1].get("role") != "user":
        return None
    system, user = str(messages[0].get("content") or ""), messages[1]
    content = f"{system}\n\n{user['content']}" if system else user["content"]
    return [{**user, "content": content}, *(dict(m) for m in messages[2:])]


def apply_template(tokenizer: Any, messages: Sequence[dict[str, Any]], **kwargs: Any) -> Any:
    """``tokenizer.apply_chat_template(messages, **kwargs)``, also for templates with no system role.

    A template that refuses a system message (it raises, as Mistral's first instruct templates
    and Gemma's strict ones do) gets the chat with the system text at the head of the first
    user turn (:func:`fold_system`), which is what templates that accept but have no system
    role (Gemma's) write themselves. The fold depends only on the messages, so a longer chat
    renders as the shorter one's continuation, and a multi-turn episode stays token-faithful.
    Any other error of the template propagates.
    """
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(list(messages), **kwargs)
    except TemplateError:
        folded = fold_system(messages)
        if folded is None:
            raise
        return tokenizer.apply_chat_template(folded, **kwargs)


def _added_token_ids(tokenizer: Any) -> set[int]:
    """Ids of the tokenizer's added tokens (special or not)."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return {int(i) for i in decoder}


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The token the chat template writes right after an assistant message (``None``: none found).

    Example:
        >>> from mathgym.agents.tiny import build_tokenizer
        >>> tok = build_tokenizer()
        >>> tok.convert_ids_to_tokens(end_of_turn_id(tok))
        '<|end|>'
    """
    if not getattr(tokenizer, "chat_template", None):
        return None
    probe = [{"role": "user", "content": "1"}, {"role": "assistant", "content": PLACEHOLDER}]
    try:
        text = apply_template(tokenizer, probe, tokenize=False, add_generation_prompt=False)
    except Exception:  # noqa: BLE001 - a template that cannot render the probe: no end-of-turn token known
        return None
    if PLACEHOLDER not in text:
        return None
    tail = text[text.rindex(PLACEHOLDER) + len(PLACEHOLDER) :]
    ids = tokenizer(tail, add_special_tokens=False)["input_ids"] if tail else []
    return int(ids[0]) if ids and int(ids[0]) in _added_token_ids(tokenizer) else None


def stop_token_ids(tokenizer: Any, generation_config: Any = None) -> tuple[int, ...]:
    """Tokens that end a completion: the tokenizer's EOS, the generation config's EOS ids and
    the template's end-of-turn token (in that order, without repeats)."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    configured = getattr(generation_config, "eos_token_id", None)
    if configured is not None:
        ids += [int(i) for i in (configured if isinstance(configured, (list, tuple)) else [configured])]
    eot = end_of_turn_id(tokenizer)
    if eot is not None:
        ids.append(eot)
    return tuple(dict.fromkeys(ids))


def turn_suffix(
    render: Render, chat: Sequence[dict[str, str]], reply: str, template_name: str = "the chat template",
    following: Sequence[dict[str, str]] | None = None,
) -> str:
    """Text the template inserts after an assistant turn's content when the env replies ``reply``.

    Args:
        render: ``render(messages, add_generation_prompt) -> str`` (the policy's chat renderer).
        chat: The messages so far (ending with a generation prompt's turn: system/user/...).
        reply: The env's reply, sent as a user message.
        template_name: Named in the error message.
        following: The messages between this assistant turn and the next one, when they are not
            one user message holding ``reply`` (a demonstration's tool results, say).

    A template whose generation prompt opens the answer with text that the finished turn does
    not show (DeepSeek-R1's and QwQ's ``<think>\\n``, Qwen3's empty think block when thinking is
    off) is taken as it is: the episode keeps that text where the model saw it, and what
    follows the turn is the template's own.

    Raises:
        ConfigError: The template renders ``chat + [assistant, user]`` so that the text before the
            assistant's content is not the start of the rendering of ``chat`` with its generation
            prompt, even with placeholder contents: its turns cannot be appended token-faithfully.
    """
    history = [{**m, "content": PLACEHOLDER} if m["role"] == "assistant" else dict(m) for m in chat]
    replies = [{"role": "user", "content": reply}] if following is None else [dict(m) for m in following]
    prompt = render(history, True)
    after = render(history + [{"role": "assistant", "content": PLACEHOLDER}, *replies], True)
    cut = after.rfind(PLACEHOLDER)  # this turn's content: every later message is the env's
    if cut < 0 or not prompt.startswith(after[:cut]):
        raise ConfigError(
            f"{template_name} rewrites earlier turns when a turn is added (its rendering of a longer chat does not "
            "start with the shorter one), so a multi-turn episode cannot be kept token-faithful. Use a template "
            "that only appends (edit tokenizer_config.json's chat_template), or a single-turn env."
        )
    return after[cut + len(PLACEHOLDER) :]  # the generation prompt's opening (``<think>\\n``) stays where it was
