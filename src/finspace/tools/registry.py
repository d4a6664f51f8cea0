"""finspace's built-in tools: their OpenAI function specs (what the model is shown) and how each is run.

The chat offers them to models whose catalogue entry has a ``tool_parser``. ``run(name, arguments)`` returns
the text fed back to the model; a tool's refusal (a bad expression) is returned as ``"error: ..."`` text, so
the model sees why and can try again, and a name that is not a built-in raises BadInput.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from finspace.errors import BadInput
from finspace.tools.calculator import CalculatorError, calculate

CALCULATE = "calculate"

CALCULATE_SPEC: dict = {
    "type": "function",
    "function": {
        "name": CALCULATE,
        "description": (
            "Evaluate an arithmetic expression exactly (decimal arithmetic). Use it for every "
            "calculation: ratios, growth rates, margins, per-share figures. Numbers, + - * / ** "
            "(power), % (percent: 5% is 0.05), parentheses, abs, round(x, digits), min, max, sqrt. "
            "Example: {\"expression\": \"(391035 - 383285) / 383285 * 100\"}."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "the arithmetic to evaluate, at most 200 characters",
                }
            },
            "required": ["expression"],
        },
    },
}


@dataclass(frozen=True)
class ToolStep:
    """One tool call in a reply and its result, as the page shows it and the export records it."""

    name: str
    arguments: str  # the JSON text the model wrote
    result: str
    ok: bool = True

    def as_dict(self) -> dict:
        return {"name": self.name, "arguments": self.arguments, "result": self.result, "ok": self.ok}

    @property
    def title(self) -> str:
        if self.name == CALCULATE:
            return f"🧮 {self.name}: {_expression(self.arguments) or self.arguments[:80]}"
        return f"📄 {self.name}: {_brief(self.arguments)}"  # a filing tool (finspace.tools.filing)


def builtin_specs() -> list[dict]:
    """The built-in tools, as OpenAI ``tools`` entries."""
    return [CALCULATE_SPEC]


def _brief(arguments: str) -> str:
    """A filing tool's arguments in a few words: "aapl-10-k-2024-11-01, total net sales 2024"."""
    try:
        args = json.loads(arguments)
    except ValueError:
        return arguments[:80]
    if not isinstance(args, dict):
        return arguments[:80]
    return ", ".join(str(v)[:60] for v in args.values() if v not in (None, ""))[:120]


def _expression(arguments: str) -> str | None:
    try:
        args = json.loads(arguments)
    except ValueError:
        return None
    value = args.get("expression") if isinstance(args, dict) else None
    return value if isinstance(value, str) else None


def run(name: str, arguments: Any) -> ToolStep:
    """Run the built-in tool ``name`` on ``arguments`` (JSON text or an object)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    if name != CALCULATE:
        raise BadInput(f"there is no built-in tool {str(name)[:40]!r}; the chat's tools: {CALCULATE}")
    expression = _expression(text)
    if expression is None:
        return ToolStep(name, text[:2000], "error: send {\"expression\": \"...\"} with the arithmetic as text", False)
    try:
        return ToolStep(name, text[:2000], calculate(expression))
    except CalculatorError as exc:
        return ToolStep(name, text[:2000], f"error: {exc}", False)
