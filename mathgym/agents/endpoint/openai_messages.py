"""OpenAI Chat Completions messages: read into the chat template's messages, and written back.

What an agent program sends (``messages``, ``tools``) becomes what a Hugging Face chat template
renders (:func:`template_messages`): text parts joined, ``developer`` read as ``system``, a tool
call's JSON ``arguments`` string as the object templates write with ``tojson``. What the model
writes becomes the assistant message of the response (:func:`assistant_message`): the tool calls
found by :func:`~mathgym.envs.tools.tool_calls.find_tool_calls` (every format mathgym reads) as OpenAI
``tool_calls``, the rest as ``content``. :func:`message_key` is what two messages must share to be
the same turn of a conversation (ids and whitespace at the ends aside). Pure Python, no torch.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from mathgym.envs.tools.tool_calls import find_tool_calls
from mathgym.errors import MathgymError

#: The roles a request's messages may have (``developer`` is OpenAI's newer name for ``system``).
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


class RequestError(MathgymError, ValueError):
    """A request the endpoint cannot serve as sent (answered 400, with ``param`` naming the field)."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param, self.code = param, code


def content_text(content: Any, where: str) -> str:
    """The text of a message's ``content``: a string, ``None``, or a list of ``{"type": "text", "text": ...}`` parts.

    Example:
        >>> content_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "messages[0]")
        'ab'
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RequestError(f"{where}.content: only text parts are served ({{'type': 'text', 'text': ...}})", where)
            texts.append(part["text"])
        return "".join(texts)
    raise RequestError(f"{where}.content must be a string or a list of text parts", where)


def _arguments(raw: Any) -> Any:
    """A tool call's arguments as an object when its JSON string parses (templates write them with ``tojson``)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return raw
    return raw


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        raise RequestError(f"{where}.tool_calls must be a list", where)
    out = []
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise RequestError(f"{where}.tool_calls[{k}] needs function.name", where)
        out.append({
            "id": str(call.get("id") or ""), "type": "function",
            "function": {"name": function["name"], "arguments": _arguments(function.get("arguments", {}))},
        })
    return out


def template_messages(messages: Any) -> list[dict[str, Any]]:
    """A request's ``messages`` as a chat template reads them.

    Raises:
        RequestError: Not a non-empty list of messages with a known role and text content.

    Example:
        >>> template_messages([{"role": "developer", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "2+2?"}]}])
        [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': '2+2?'}]
    """
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list", "messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping) or message.get("role") not in ROLES:
            raise RequestError(f"{where} needs a role, one of {sorted(ROLES)}", where)
        role = "system" if message["role"] == "developer" else str(message["role"])
        item: dict[str, Any] = {"role": role, "content": content_text(message.get("content"), where)}
        if role == "assistant" and message.get("tool_calls"):
            item["tool_calls"] = _tool_calls(message["tool_calls"], where)
        if role == "assistant" and isinstance(message.get("reasoning_content"), str):
            item["reasoning_content"] = message["reasoning_content"]
        if role == "tool":
            item["tool_call_id"] = str(message.get("tool_call_id") or "")
            if isinstance(message.get("name"), str):
                item["name"] = message["name"]
        out.append(item)
    return out


def message_key(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two messages the same turn: role, content (ends stripped) and the tool calls' names
    and arguments; ids left out (a framework may rename them).

    Example:
        >>> a = {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]}
        >>> b = {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}
        >>> message_key(a) == message_key(b)
        True
    """
    calls = tuple(
        (c["function"]["name"], json.dumps(_arguments(c["function"].get("arguments")), sort_keys=True))
        for c in message.get("tool_calls") or () if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)
    )
    role = "system" if message.get("role") == "developer" else message.get("role")
    try:
        text = content_text(message.get("content"), "message").strip()
    except RequestError:
        text = repr(message.get("content"))
    return (role, text, calls)


def assistant_message(text: str, tools_on: bool) -> dict[str, Any]:
    """The response's assistant message for the model's ``text``: with ``tools_on``, the valid tool calls
    in it become ``tool_calls`` (``content`` the rest, ``None`` when empty); otherwise all is ``content``.

    Example:
        >>> m = assistant_message('Let me run it.<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>', True)
        >>> m["content"], m["tool_calls"][0]["function"]["arguments"]
        ('Let me run it.', '{"code": "1"}')
    """
    calls = [c for c in find_tool_calls(text) if not c.error] if tools_on else []
    if not calls:
        return {"role": "assistant", "content": text}
    kept, at = [], 0
    for call in calls:
        kept.append(text[at:call.start])
        at = call.end
    kept.append(text[at:])
    content = "".join(kept).strip()
    return {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [
            {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
            for call in calls
        ],
    }


def tools_option(tools: Any, tool_choice: Any) -> tuple[list[dict[str, Any]] | None, bool]:
    """``(tools for the template, whether tool calls are read from the output)`` of a request.

    ``tool_choice="none"`` leaves the model's text as text (the tools are still shown to the template,
    as OpenAI's API describes); ``"auto"``, ``"required"`` and a named function read calls (no
    decoding is constrained: a model that writes no call answers in text).

    Raises:
        RequestError: ``tools`` is not a list of function tools, or ``tool_choice`` is unknown.
    """
    if tools is None:
        return None, False
    if not isinstance(tools, list) or not all(
        isinstance(t, Mapping) and t.get("type") == "function" and isinstance(t.get("function"), Mapping)
        and isinstance(t["function"].get("name"), str) for t in tools
    ):
        raise RequestError("tools must be a list of {'type': 'function', 'function': {'name': ...}}", "tools")
    if tool_choice not in (None, "none", "auto", "required") and not (
        isinstance(tool_choice, Mapping) and tool_choice.get("type") == "function"
    ):
        raise RequestError("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', ...}", "tool_choice")
    return [dict(t) for t in tools] or None, bool(tools) and tool_choice != "none"


def parse_stop(stop: Any) -> tuple[str, ...]:
    """``stop`` as a tuple of strings (``None``, a string, or a list of up to 4)."""
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,) if stop else ()
    if isinstance(stop, Sequence) and all(isinstance(s, str) for s in stop) and len(stop) <= 4:
        return tuple(s for s in stop if s)
    raise RequestError("stop must be a string or a list of up to 4 strings", "stop")
