"""Agent programs for the agent-endpoint tests, written against OpenAI's API as any agent is.

``tool_agent`` is a multi-turn tool-using agent: it offers a calculator tool, runs each call the
model makes, sends the results back and returns the model's last answer. ``two_turn_agent`` asks
twice (an answer, then a check), tools or not, so that any model plays a multi-turn run.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

#: The calculator tool the agents offer (OpenAI function form).
CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(expression: str) -> str:
    """``expression`` evaluated when it is numbers and + - * / only (never ``eval``)."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError("not arithmetic")

    try:
        result = value(ast.parse(str(expression), mode="eval").body)
    except (ValueError, SyntaxError, ZeroDivisionError, RecursionError):
        return "error: not an arithmetic expression"
    return str(int(result) if float(result).is_integer() else result)


def tool_agent(task: Any) -> str:
    """Offer the calculator; run the model's calls until it answers (at most 3 calls)."""
    import json

    client = task.client()
    messages: list[dict[str, Any]] = list(task.messages)
    content = ""
    for _ in range(3):
        reply = client.chat.completions.create(model=task.model, messages=messages, tools=[CALCULATOR])
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        content = message.content or ""
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments or "{}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calculate(arguments.get("expression", ""))})
    return content


def two_turn_agent(task: Any) -> str:
    """Answer, then answer again after a check request (two calls of one conversation)."""
    client = task.client()
    messages: list[dict[str, Any]] = list(task.messages)
    first = client.chat.completions.create(model=task.model, messages=messages).choices[0].message
    messages += [first.model_dump(exclude_none=True), {"role": "user", "content": "Check it and give the final answer."}]
    return client.chat.completions.create(model=task.model, messages=messages).choices[0].message.content or ""


async def sdk_agent(task: Any) -> str:
    """The same calculator agent written with OpenAI's Agents SDK (``openai-agents``), unmodified but
    for the model it is pointed at: the endpoint, through ``OpenAIChatCompletionsModel``."""
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # its traces would go to OpenAI's servers

    @function_tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return calculate(expression)

    system = "\n".join(m["content"] for m in task.messages if m["role"] == "system")
    user = "\n".join(m["content"] for m in task.messages if m["role"] == "user")
    client = AsyncOpenAI(base_url=task.base_url, api_key=task.api_key)
    model = OpenAIChatCompletionsModel(model=task.model, openai_client=client)
    agent = Agent(name="solver", instructions=system or None, model=model, tools=[calculator])
    result = await Runner.run(agent, user, max_turns=3)
    return str(result.final_output)
