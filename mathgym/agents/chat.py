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

These are functions of a tokenizer and a renderer; :class:`~mathgym.agents.chat_format.ChatFormat`
puts them together for one model (probed once each) and is what callers use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mathgym.errors import ConfigError

Chat = list[dict[str, str]]
Render = Callable[[Sequence[dict[str, str]], bool], str]

#: Stands for an assistant message's content when probing a template.
PLACEHOLDER = "MATHGYMPLACEHOLDER"
#: The names under which chat templates read an assistant turn's reasoning (Qwen3's and
#: DeepSeek's ``reasoning_content``, vLLM's ``reasoning``, gpt-oss's ``thinking``); data sets
#: use the same names.
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


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


def end_of_turn_id(tokenizer: Any, **template_kwargs: Any) -> int | None:
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
        text = apply_template(tokenizer, probe, tokenize=False, add_generation_prompt=False, **template_kwargs)
    except Exception:  # noqa: BLE001 - a template that cannot render the probe: no end-of-turn token known
        return None
    if PLACEHOLDER not in text:
        return None
    tail = text[text.rindex(PLACEHOLDER) + len(PLACEHOLDER) :]
    ids = tokenizer(tail, add_special_tokens=False)["input_ids"] if tail else []
    return int(ids[0]) if ids and int(ids[0]) in _added_token_ids(tokenizer) else None


def stop_token_ids(tokenizer: Any, generation_config: Any = None, **template_kwargs: Any) -> tuple[int, ...]:
    """Tokens that end a completion: the tokenizer's EOS, the generation config's EOS ids and
    the template's end-of-turn token (in that order, without repeats; ``template_kwargs`` go to
    the template, as :attr:`ChatFormat.template_kwargs <mathgym.agents.chat_format.ChatFormat.template_kwargs>` do)."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    configured = getattr(generation_config, "eos_token_id", None)
    if configured is not None:
        ids += [int(i) for i in (configured if isinstance(configured, (list, tuple)) else [configured])]
    eot = end_of_turn_id(tokenizer, **template_kwargs)
    if eot is not None:
        ids.append(eot)
    return tuple(dict.fromkeys(ids))


def turn_suffix(
    render: Render, chat: Sequence[dict[str, str]], reply: str, template_name: str = "the chat template",
    following: Sequence[dict[str, str]] | None = None,
) -> str:
    """Text the template inserts after an assistant turn's content when the env replies ``reply``.

    Args:
        render: ``render(messages, add_generation_prompt) -> str`` (:meth:`ChatFormat.render <mathgym.agents.chat_format.ChatFormat.render>`).
        chat: The messages so far (ending with a generation prompt's turn: system/user/...).
        reply: The env's reply, sent as a user message.
        template_name: Named in the error message.
        following: The messages between this assistant turn and the next one, when they are not
            one user message holding ``reply`` (a demonstration's tool results, say).

    A template whose generation prompt opens the answer with text that the finished turn does
    not show (DeepSeek-R1's and QwQ's ``<think>\\n``, Qwen3's empty think block when thinking is
    off) is taken as it is: the episode keeps that text where the model saw it, and what
    follows the turn is the template's own. So is one whose finished turn shows a header the
    generation prompt leaves to the model (gpt-oss's ``<|channel|>final<|message|>`` after
    ``<|start|>assistant``, see :func:`answer_opening`): the model wrote it inside its action.

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
    if cut < 0 or not (prompt.startswith(after[:cut]) or after[:cut].startswith(prompt)):
        raise ConfigError(
            f"{template_name} rewrites earlier turns when a turn is added (its rendering of a longer chat does not "
            "start with the shorter one), so a multi-turn episode cannot be kept token-faithful. Use a template "
            "that only appends (edit tokenizer_config.json's chat_template), or a single-turn env."
        )
    return after[cut + len(PLACEHOLDER) :]  # the generation prompt's opening (``<think>\\n``) stays where it was


def _last_turn(render: Render, chat: Sequence[dict[str, Any]], content: str) -> tuple[str, str]:
    """``(generation prompt of chat, rendering of chat + an assistant message content as its last message)``."""
    return render(chat, True), render([*chat, {"role": "assistant", "content": content}], False)


def answer_opening(render: Render, tokenizer: Any = None) -> str:
    """Text the template writes at the head of an assistant turn that its generation prompt
    leaves for the model to write: gpt-oss's channel header ``<|channel|>final<|message|>``
    (its generation prompt ends at ``<|start|>assistant``), Qwen3's empty think block when
    thinking is on. Empty for most templates, and for those whose generation prompt itself
    opens the answer (DeepSeek-R1's ``<think>\\n``). Given the ``tokenizer``, a head holding none
    of its added tokens is empty too: plain text (Llama 2's space before the answer) can be part
    of any answer, and cutting at it would lose text. An action holding it is answered from
    the text after its last occurrence (:meth:`ChatFormat.action_text <mathgym.agents.chat_format.ChatFormat.action_text>`): gpt-oss's analysis
    channel before it is the model's reasoning, which the template leaves out of the history.

    Example:
        >>> plain = lambda chat, gen: "".join(f"<{m['role']}>{m['content']}." for m in chat) + ("<assistant>" if gen else "")
        >>> header = lambda chat, gen: plain([{**m, "content": "final:" + m["content"]} if m["role"] == "assistant" else m for m in chat], gen)
        >>> answer_opening(plain), answer_opening(header)
        ('', 'final:')
    """
    try:
        prompt, full = _last_turn(render, [{"role": "user", "content": "1"}], PLACEHOLDER)
    except Exception:  # noqa: BLE001 - a template that cannot render the probe: no opening known
        return ""
    at = full.find(PLACEHOLDER, len(prompt))
    opening = full[len(prompt) : at] if at >= 0 and full.startswith(prompt) else ""
    if tokenizer is not None:  # a head marks an answer only with one of the tokenizer's added tokens in it
        added = [str(token) for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values()]
        opening = opening if any(token and token in opening for token in added) else ""
    return opening


def answer_text(render: Render, chat: Sequence[dict[str, Any]], content: str | dict[str, Any]) -> str:
    """What a model writes, by its template, to answer ``chat`` with ``content`` (the token that
    closes the turn left out): the template's rendering of the message as the chat's last one,
    from the end of the generation prompt up to what the template writes after any content.
    This is where gpt-oss's ``<|channel|>final<|message|>`` header and Qwen3's think block come
    in; it is ``content`` for templates that write the content as it is, for those whose
    generation prompt opens the answer (the model never writes that opening), and for those that
    refuse a chat ending with an answer. ``content`` may be
    the whole assistant message (its tool calls and reasoning rendered by the template too).

    Example:
        >>> plain = lambda chat, gen: "".join(f"<{m['role']}>{m['content']}." for m in chat) + ("<assistant>" if gen else "")
        >>> header = lambda chat, gen: plain([{**m, "content": "final:" + m["content"]} if m["role"] == "assistant" else m for m in chat], gen)
        >>> answer_text(plain, [{"role": "user", "content": "q"}], "42"), answer_text(header, [{"role": "user", "content": "q"}], "42")
        ('42', 'final:42')
    """
    message = {"role": "assistant", "content": content} if isinstance(content, str) else {**content, "role": "assistant"}
    try:
        prompt = render(chat, True)
        full = render([*chat, message], False)
        probe = _last_turn(render, chat, PLACEHOLDER)[1]
    except Exception:  # noqa: BLE001 - a template that will not end a chat with an answer: the content as it is
        return str(message.get("content") or "")
    at = probe.rfind(PLACEHOLDER)
    tail = probe[at + len(PLACEHOLDER) :] if at >= 0 else ""
    if at < 0 or not full.startswith(prompt) or len(full) < len(prompt) + len(tail) or not full.endswith(tail):
        return str(message.get("content") or "")
    return full[len(prompt) : len(full) - len(tail)]


def renders_field(render: Render, **fields: Any) -> bool:
    """Whether the template writes an assistant message's ``fields`` (each value holding the
    text ``MATHGYMFIELD``): Qwen3's ``reasoning_content``, gpt-oss's ``thinking``, ``tool_calls``.

    Example:
        >>> render = lambda chat, gen: "".join(f"<{m['role']}>{m.get('reasoning_content', '')}{m['content']}." for m in chat)
        >>> renders_field(render, reasoning_content="MATHGYMFIELD"), renders_field(render, thinking="MATHGYMFIELD")
        (True, False)
    """
    message = {"role": "assistant", "content": PLACEHOLDER, **fields}
    try:
        return "MATHGYMFIELD" in render([{"role": "user", "content": "1"}, message], False)
    except Exception:  # noqa: BLE001 - a template that cannot render the field does not write it
        return False


def message_close_id(tokenizer: Any, render: Render) -> int | None:
    """The special token the template closes every message of the history with, when it is not
    the one that closes the chat's last turn (:func:`end_of_turn_id`): gpt-oss writes
    ``<|end|>`` after each earlier message but ``<|return|>``, what the model samples to stop,
    after the last one. ``None`` for templates that close both alike, or with no such token.

    The token after an assistant content in the history counts only when the env's reply in
    the same rendering is closed by it too: a template that writes nothing after an assistant
    turn and opens the next message with a special token has no close to leave out.
    """
    reply = PLACEHOLDER[::-1]
    try:
        suffix = turn_suffix(render, [{"role": "user", "content": "1"}], reply)
    except Exception:  # noqa: BLE001 - a template that cannot render the probe
        return None
    at = suffix.find(reply)
    if at < 0:
        return None
    added = _added_token_ids(tokenizer)
    ids = tokenizer(suffix, add_special_tokens=False)["input_ids"]
    after_reply = tokenizer(suffix[at + len(reply) :], add_special_tokens=False)["input_ids"]
    if ids and after_reply and int(ids[0]) == int(after_reply[0]) and int(ids[0]) in added:
        close = int(ids[0])
        return None if close == end_of_turn_id(tokenizer) else close
    return None


def drop_turn_close(
    ids: list[int], last_token: int | None, stop_ids: Sequence[int], end_of_turn: int, message_close: int | None,
    blank: Callable[[int], bool] | None = None,
) -> list[int]:
    """The tokens that follow an action, less the template's close of the turn when the action
    closed it itself: the model's last token is that close (``<|im_end|>``), or it is the
    template's end of turn and the history's close differs only in name (gpt-oss's sampled
    ``<|return|>`` stands where the history writes ``<|end|>``). A stop token the template does
    not close turns with (a Qwen-base EOS) is followed by the template's close. With ``blank``
    (whether a token is only whitespace), the whitespace a template writes before the close
    (Llama 2's ``" </s>"``, up to 4 tokens) goes with it.

    Example:
        >>> drop_turn_close([7, 1, 2], last_token=7, stop_ids=(7,), end_of_turn=7, message_close=None)
        [1, 2]
        >>> drop_turn_close([8, 1, 2], last_token=7, stop_ids=(7,), end_of_turn=7, message_close=8)
        [1, 2]
        >>> drop_turn_close([8, 1, 2], last_token=9, stop_ids=(7, 9), end_of_turn=7, message_close=8)
        [8, 1, 2]
    """
    if not ids or last_token is None or last_token not in stop_ids:
        return ids
    spaces = 0
    while blank is not None and spaces < min(len(ids) - 1, 4) and blank(ids[spaces]):
        spaces += 1
    close = ids[spaces]
    if close == last_token or (last_token == end_of_turn and message_close is not None and close == message_close):
        return ids[spaces + 1 :]
    return ids
