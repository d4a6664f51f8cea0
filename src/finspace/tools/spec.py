"""A request's tools, checked: OpenAI's ``tools``, ``tool_choice`` and ``parallel_tool_calls``, and the
``tool_calls`` / ``role: "tool"`` messages of a conversation that used them.

Pure: no vLLM. Each function's ``parameters`` is a JSON schema that may reach vLLM's structured outputs (a
named ``tool_choice`` or ``required``), so it goes through the same check as ``response_format``
(``finspace.structured.check_schema``); the tools together are bounded in number and size because they are
written into the prompt. A problem is a ``BadInput`` naming the field and the fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from finspace.errors import BadInput
from finspace.structured import check_schema

MAX_TOOLS = 64
MAX_TOOLS_CHARS = 32_000  # all the tools as JSON: they are written into the prompt
MAX_DESCRIPTION_CHARS = 4_000
MAX_CALLS_PER_MESSAGE = 16
MAX_ARGUMENTS_CHARS = 16_000
MAX_TOOL_ROUNDS = 16  # assistant tool-call turns in a row since the last user message
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CHOICES = ("none", "auto", "required")


@dataclass(frozen=True)
class ToolRequest:
    """The checked tools of one request: ``specs`` as OpenAI writes them, ``choice`` one of CHOICES or
    ``"named"`` (then ``name`` is the function), ``parallel`` whether several calls may come in one reply."""

    specs: tuple[dict, ...]
    choice: str = "auto"
    name: str | None = None
    parallel: bool = True

    @property
    def names(self) -> list[str]:
        return [s["function"]["name"] for s in self.specs]

    @property
    def forced(self) -> bool:
        """The reply must be a call (through structured outputs): ``required`` or a named function."""
        return self.choice in ("required", "named")


def _function(i: int, tool: Any) -> dict:
    where = f"tools[{i}]"
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
        raise BadInput(
            f"{where} must be {{\"type\": \"function\", \"function\": {{\"name\", \"description\", "
            "\"parameters\"}}}}; finspace offers function tools only"
        )
    extra = sorted(set(tool) - {"type", "function"})
    fn = tool["function"]
    extra += sorted(set(fn) - {"name", "description", "parameters", "strict"})
    if extra:
        raise BadInput(
            f"{where} has {str(extra[0])[:40]!r}; a function tool takes name, description, parameters, strict"
        )
    name = fn.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise BadInput(f"{where}.function.name must be 1 to 64 letters, digits, '_' or '-'")
    description = fn.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        raise BadInput(f"{where}.function.description must be text of at most {MAX_DESCRIPTION_CHARS:,} characters")
    if "strict" in fn and not isinstance(fn["strict"], bool):
        raise BadInput(f"{where}.function.strict must be true or false")
    parameters = fn.get("parameters")
    if parameters is not None:
        check_schema(parameters, f"{where}.function.parameters")
    return {"type": "function", "function": dict(fn)}


def parse_tools(tools: Any, tool_choice: Any = None, parallel_tool_calls: Any = None) -> ToolRequest | None:
    """The request's tools checked, or None when it sends none (then ``tool_choice`` must be absent or none)."""
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise BadInput("parallel_tool_calls must be true or false")
    if tools is None or tools == []:
        if tool_choice not in (None, "none"):
            raise BadInput("tool_choice needs tools: send the functions in \"tools\", or leave tool_choice out")
        return None
    if not isinstance(tools, list):
        raise BadInput("tools must be a list of {\"type\": \"function\", \"function\": {...}} objects")
    if len(tools) > MAX_TOOLS:
        raise BadInput(
            f"tools has {len(tools):,} functions; the limit is {MAX_TOOLS}. Send the ones this conversation needs"
        )
    specs = tuple(_function(i, t) for i, t in enumerate(tools))
    names = [s["function"]["name"] for s in specs]
    if len(set(names)) != len(names):
        raise BadInput(
            f"tools: the name {next(n for n in names if names.count(n) > 1)!r} is given twice; "
            "each function needs its own name"
        )
    size = len(json.dumps(specs))
    if size > MAX_TOOLS_CHARS:
        raise BadInput(
            f"tools are {size:,} characters as JSON; the limit is {MAX_TOOLS_CHARS:,} (they are written "
            "into the prompt): send fewer or shorter ones"
        )
    parallel = parallel_tool_calls is not False
    if tool_choice is None or tool_choice in CHOICES:
        return ToolRequest(specs, tool_choice or "auto", None, parallel)
    if (
        isinstance(tool_choice, dict)
        and tool_choice.get("type") == "function"
        and isinstance(tool_choice.get("function"), dict)
        and set(tool_choice) == {"type", "function"}
    ):
        name = tool_choice["function"].get("name")
        if isinstance(name, str) and name in names:
            return ToolRequest(specs, "named", name, parallel)
        raise BadInput(
            f"tool_choice names {str(name)[:64]!r}, which is not one of the tools sent: {', '.join(names)[:400]}"
        )
    raise BadInput(
        "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
        "\"function\": {\"name\": NAME}}"
    )


def _arguments(where: str, value: Any) -> dict:
    if isinstance(value, dict):  # already parsed (a conversation checked once at the boundary)
        value = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str) or len(value) > MAX_ARGUMENTS_CHARS:
        raise BadInput(f"{where}.function.arguments must be JSON text of at most {MAX_ARGUMENTS_CHARS:,} characters")
    try:
        args = json.loads(value) if value.strip() else {}
    except (ValueError, RecursionError):
        raise BadInput(f"{where}.function.arguments is not valid JSON; send the arguments the model wrote") from None
    if not isinstance(args, dict):
        raise BadInput(f"{where}.function.arguments must be a JSON object")
    return args


def tool_calls(i: int, value: Any) -> list[dict]:
    """An assistant message's ``tool_calls``, checked, with each call's arguments parsed (chat templates take an
    object): [{"id", "type": "function", "function": {"name", "arguments": {...}}}]."""
    where = f"message {i} tool_calls"
    if not isinstance(value, list) or not value or len(value) > MAX_CALLS_PER_MESSAGE:
        raise BadInput(f"{where} must be a list of 1 to {MAX_CALLS_PER_MESSAGE} calls")
    out = []
    for k, call in enumerate(value):
        w = f"{where}[{k}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(fn, dict)
            or call.get("type", "function") != "function"
            or not isinstance(call.get("id", ""), str)
            or len(call.get("id", "")) > 128
        ):
            raise BadInput(f"{w} must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}")
        name = fn.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise BadInput(f"{w}.function.name must be 1 to 64 letters, digits, '_' or '-'")
        out.append(
            {
                "id": call.get("id") or f"call_{i}_{k}",
                "type": "function",
                "function": {"name": name, "arguments": _arguments(w, fn.get("arguments"))},
            }
        )
    return out


def check_rounds(messages: list[dict]) -> None:
    """BadInput when more than MAX_TOOL_ROUNDS assistant tool-call turns follow the last user message: a model
    that keeps calling tools is stopped, whoever runs them."""
    rounds = 0
    for m in reversed(messages):
        if m.get("role") == "user":
            break
        rounds += bool(m.get("role") == "assistant" and m.get("tool_calls"))
    if rounds > MAX_TOOL_ROUNDS:
        raise BadInput(
            f"messages: {rounds} tool-call rounds in a row since the last user message; the bound is "
            f"{MAX_TOOL_ROUNDS} per reply. Answer from the results so far, or start a new user turn"
        )
