"""Tool calls written in the chat models' own format, shared by the tool envs.

Qwen2.5 / Hermes-style chat templates render an assistant's tool call as::

    <tool_call>
    {"name": "python", "arguments": {"code": "print(6 * 7)"}}
    </tool_call>

:func:`find_tool_calls` finds such blocks in a model's text, and the other formats chat
models write their calls in, told apart by the text itself: Qwen3-Coder's
``<tool_call><function=python><parameter=code>...</parameter></function></tool_call>``,
Mistral's ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` (or ``[TOOL_CALLS]python[ARGS]{...}``),
gpt-oss's channel messages addressed to a tool
(``<|channel|>commentary to=functions.python <|constrain|>json<|message|>{"code": ...}``, or a
built-in tool's ``to=python code<|message|>print(1)``, the code as the message),
and Llama 3's JSON message ``{"name": ..., "parameters": {...}}`` (after ``<|python_tag|>``, or
the whole message). A call that does not parse is kept with ``error`` set, so the env can say
what was wrong. Pure Python: model output is untrusted text and never raises here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from mathgym.rewards.extract import delimited

#: The JSON schema of the Python tool, in the form chat templates take as ``tools=[...]``.
PYTHON_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python code in a sandbox and return what it prints.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
}


@dataclass(frozen=True)
class ToolCall:
    """One tool call found in a model's text.

    Attributes:
        start: Offset of the block in the text.
        end: Offset just after the block.
        name: The tool's name (``""`` when the block did not parse).
        arguments: The call's arguments.
        error: Why the block is not a valid call (``""`` when it is).
    """

    start: int
    end: int
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _parse(body: str) -> tuple[str, dict[str, Any], str]:
    """``(name, arguments, error)`` of a ``<tool_call>`` body."""
    try:
        call = json.loads(body)
    except (ValueError, RecursionError):
        return "", {}, 'the tool call is not valid JSON; write {"name": ..., "arguments": {...}}'
    return _fields(call)


def _fields(call: object) -> tuple[str, dict[str, Any], str]:
    """``(name, arguments, error)`` of a decoded call: ``{"name", "arguments"}`` (or Llama 3's ``parameters``)."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return "", {}, 'the tool call needs a "name" string and an "arguments" object'
    arguments = call.get("arguments", call.get("parameters", {}))  # Llama 3 names them parameters
    if isinstance(arguments, str):  # OpenAI-style: the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return call["name"], {}, '"arguments" is not valid JSON'
    if not isinstance(arguments, dict):
        return call["name"], {}, '"arguments" must be an object'
    return call["name"], arguments, ""


def _parse_xml(body: str) -> tuple[str, dict[str, Any], str]:
    """``(name, arguments, error)`` of Qwen3-Coder's ``<function=NAME><parameter=KEY>VALUE</parameter>...</function>``."""
    head, _, rest = body[len("<function="):].partition(">")
    name = head.strip()
    if not name or "</function>" not in rest:
        return "", {}, "the tool call is not <function=NAME>...</function>"
    arguments: dict[str, Any] = {}
    for start, key_start, key_end, _ in delimited(rest, "<parameter=", ">"):
        value_end = rest.find("</parameter>", key_end)
        if value_end < 0:
            return name, {}, f"<parameter={rest[key_start:key_end][:40]}> is never closed"
        arguments[rest[key_start:key_end].strip()] = rest[key_end + 1:value_end].strip("\n")
    return name, arguments, ""


#: Mistral's marker before its calls, and before each call's arguments in the newer format.
MISTRAL_CALLS, MISTRAL_ARGS = "[TOOL_CALLS]", "[ARGS]"
#: Llama 3's marker of a call it makes (a special token, kept or dropped by the decoding).
PYTHON_TAG = "<|python_tag|>"
#: The most call markers of another format read in one text: a model makes few calls a turn,
#: and each marker may send the JSON reader over the rest of the text.
MAX_MARKERS = 16
_DECODER = json.JSONDecoder()


def _mistral_calls(text: str) -> list[ToolCall]:
    """Calls after Mistral's ``[TOOL_CALLS]``: a JSON list of calls, or ``NAME[ARGS]{...}``."""
    out, position = [], 0
    for _ in range(MAX_MARKERS):
        start = text.find(MISTRAL_CALLS, position)
        if start < 0:
            break
        at = start + len(MISTRAL_CALLS)
        while at < len(text) and text[at] in " \n":
            at += 1
        position = at
        try:
            if text.startswith("[", at):
                calls, position = _DECODER.raw_decode(text, at)
                listed = calls if isinstance(calls, list) else [calls]
                out += [ToolCall(start, position, *_fields(call)) for call in listed]
                continue
            args = text.find(MISTRAL_ARGS, at, at + 200)
            if args < 0:
                out.append(ToolCall(start, at, "", {}, f"write {MISTRAL_CALLS}[{{\"name\": ..., \"arguments\": {{...}}}}]"))
                continue
            name = text[at:args].strip()
            arguments, position = _DECODER.raw_decode(text, args + len(MISTRAL_ARGS))
            out.append(ToolCall(start, position, *_fields({"name": name, "arguments": arguments})))
        except (ValueError, RecursionError):
            out.append(ToolCall(start, at, "", {}, "the tool call is not valid JSON"))
    return out


#: gpt-oss's (harmony) markup: a message's header names its recipient with ``to=`` and ends at ``<|message|>``.
HARMONY_TO, HARMONY_MESSAGE = "to=", "<|message|>"
#: What ends a harmony message's body (``<|call|>`` is a stop token, usually cut already).
HARMONY_ENDS = ("<|call|>", "<|end|>", "<|start|>", "<|return|>")
#: The longest header read between ``to=`` and ``<|message|>``.
HARMONY_HEADER_CHARS = 200
_RECIPIENT = re.compile(r"[A-Za-z_][\w.\-]*")


def _harmony_calls(text: str) -> list[ToolCall]:
    """gpt-oss's calls: a message whose header holds ``to=RECIPIENT`` (``functions.NAME`` for a
    declared function, ``NAME`` for a built-in tool), its body JSON arguments, or the ``code``
    argument itself when the header's content type is ``code``."""
    out, position, opened = [], 0, -1
    while len(out) < MAX_MARKERS:  # the markers and message starts are each found once: linear in all
        start = text.find(HARMONY_TO, position)
        if start < 0:
            break
        position = start + len(HARMONY_TO)
        if opened < position:
            opened = text.find(HARMONY_MESSAGE, position)
            if opened < 0:
                break
        if opened - position > HARMONY_HEADER_CHARS:  # too far from the next message: so is every marker before this one
            position = max(position, opened - HARMONY_HEADER_CHARS - len(HARMONY_TO))
            continue
        if start and not (text[start - 1].isspace() or text[start - 1] == ">"):
            continue  # prose that happens to hold "to=", not a header
        header = text[position:opened].replace("<|constrain|>", " ").replace("<|channel|>", " ")
        words = header.split()
        if "<|" in header or "\n" in header or not words or len(words) > 3 or not _RECIPIENT.fullmatch(words[0]):
            continue  # not a header: a recipient is a name, and a few words of channel and content type follow it
        recipient, *kinds = words
        name = recipient.removeprefix("functions.")
        body_start = opened + len(HARMONY_MESSAGE)
        ends = [at for at in (text.find(mark, body_start) for mark in HARMONY_ENDS) if at >= 0]
        end = min(ends, default=len(text))
        body = text[body_start:end]
        position = end
        if "code" in kinds and "json" not in kinds:
            out.append(ToolCall(start, end, name, {"code": body}))
            continue
        try:
            arguments = json.loads(body)
        except (ValueError, RecursionError):
            out.append(ToolCall(start, end, "", {}, f"the arguments of the call to {recipient[:40]!r} are not valid JSON"))
            continue
        out.append(ToolCall(start, end, *_fields({"name": name, "arguments": arguments})))
    return out


def _json_message_call(text: str) -> list[ToolCall]:
    """Llama 3's call: a JSON object with ``name`` and ``parameters`` (or ``arguments``) after
    ``<|python_tag|>``, or as the whole message."""
    tag = text.find(PYTHON_TAG)
    start = tag + len(PYTHON_TAG) if tag >= 0 else 0
    while start < len(text) and text[start].isspace():
        start += 1
    if not text.startswith("{", start):
        return []
    try:
        call, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return [ToolCall(start, len(text), "", {}, "the tool call is not valid JSON")] if tag >= 0 else []
    if not isinstance(call, dict) or "name" not in call or not ({"parameters", "arguments"} & call.keys()):
        return []
    if tag < 0 and text[end:].strip():  # untagged, a call is the whole message
        return []
    return [ToolCall(tag if tag >= 0 else start, end, *_fields(call))]


def find_tool_calls(text: str) -> list[ToolCall]:
    """Every tool call of ``text``, in order: ``<tool_call>...</tool_call>`` blocks (JSON, or
    Qwen3-Coder's XML inside); where there is none, Mistral's ``[TOOL_CALLS]`` calls; then
    gpt-oss's messages ``to=`` a tool; where there is none either, Llama 3's JSON call (the
    module docstring shows each). Linear in ``len(text)``
    for the blocks; at most :data:`MAX_MARKERS` markers of the other formats are read.

    Example:
        >>> [c.arguments for c in find_tool_calls('<tool_call>{"name": "python", "arguments": {"code": "1"}}</tool_call>')]
        [{'code': '1'}]
        >>> [(c.name, c.arguments) for c in find_tool_calls('{"name": "python", "parameters": {"code": "2"}}')]
        [('python', {'code': '2'})]
    """
    out = []
    for start, body, body_end, end in delimited(text, "<tool_call>", "</tool_call>"):
        inner = text[body:body_end].strip()
        name, arguments, error = _parse_xml(inner) if inner.startswith("<function=") else _parse(inner)
        out.append(ToolCall(start, end, name, arguments, error))
    return out or _mistral_calls(text) or _harmony_calls(text) or _json_message_call(text)
