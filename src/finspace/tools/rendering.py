"""Tools in the prompt: handed to a chat template that renders them, or written by finspace for one that doesn't.

Qwen 3's and Llama 3.1's templates take ``tools=`` and render calls (``tool_calls`` on an assistant message)
and results (``role: "tool"``) themselves. Templates without tools (ChatML as in SmolLM2, Gemma 3's, the
demo models') would drop them silently, so for those finspace writes what the parser reads, in the model
family's own words: the functions in the system prompt, past calls in the assistant's text, the results as a
user turn (consecutive results in one, so turns still alternate).
"""

from __future__ import annotations

import json
from typing import Any

_HERMES = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
    "with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\nFor each "
    "function call, return a json object with function name and arguments within <tool_call></tool_call> "
    "XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"
)
_LLAMA = (
    "Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\n\nRespond in the format {{\"name\": function name, "
    "\"parameters\": dictionary of argument name and its value}}. Do not use variables.\n\n{tools}"
)
_PYTHONIC = (
    "You can call functions. If you decide to invoke any of the function(s), you MUST put it in the "
    "format of [func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
    "\nYou SHOULD NOT include any other text in the response if you call a function.\nThe functions:\n"
    "{tools}"
)
INSTRUCTIONS = {"hermes": _HERMES, "llama3_json": _LLAMA, "pythonic": _PYTHONIC}


def takes_tools(tok: Any) -> bool:
    """Whether the tokenizer's chat template renders ``tools`` (it names them)."""
    template = getattr(tok, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("tool_use") or template.get("default")
    return isinstance(template, str) and "tools" in template


def _args(call: dict) -> dict:
    args = call["function"].get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return {}
    return args if isinstance(args, dict) else {}


def written_calls(parser: str | None, calls: list[dict]) -> str:
    """Calls (OpenAI's {"function": {"name", "arguments"}}) as the text the parser reads."""
    return _written(parser or "hermes", calls)


def _written(parser: str, calls: list[dict]) -> str:
    if parser == "pythonic":
        inner = ", ".join(
            f"{c['function']['name']}("
            + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in _args(c).items())
            + ")"
            for c in calls
        )
        return f"[{inner}]"
    key = "parameters" if parser == "llama3_json" else "arguments"
    objs = [json.dumps({"name": c["function"]["name"], key: _args(c)}, ensure_ascii=False) for c in calls]
    if parser == "llama3_json":
        return "; ".join(objs)
    return "\n".join(f"<tool_call>\n{o}\n</tool_call>" for o in objs)


def _result(parser: str, message: dict) -> str:
    if parser == "hermes":
        return f"<tool_response>\n{message['content']}\n</tool_response>"
    return f"Tool result: {message['content']}"


def written(msgs: list[dict], tools: list[dict] | None, parser: str | None) -> list[dict]:
    """``msgs`` (system first, when there is one) with the tools, calls and results written as text."""
    parser = parser or "hermes"
    out: list[dict] = []
    for m in msgs:
        if m["role"] == "tool":
            text = _result(parser, m)
            if out and out[-1]["role"] == "user" and out[-1].get("_results"):
                out[-1] = {**out[-1], "content": out[-1]["content"] + "\n" + text}
            else:
                out.append({"role": "user", "content": text, "_results": True})
        elif m.get("tool_calls"):
            text = "\n".join(t for t in (m["content"], _written(parser, m["tool_calls"])) if t)
            out.append({"role": "assistant", "content": text})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    out = [{k: v for k, v in m.items() if k != "_results"} for m in out]
    if tools:
        block = INSTRUCTIONS[parser].format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{block}".strip()}
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def for_template(tok: Any, msgs: list[dict], tools: Any, parser: str | None) -> tuple[list[dict], list | None]:
    """(messages, tools for ``apply_chat_template``): as they are when the template renders tools, else written
    into the messages (and no ``tools``). Messages without calls or results and no tools pass unchanged."""
    tools = list(tools) if tools else None
    if not tools and not any(m["role"] == "tool" or m.get("tool_calls") for m in msgs):
        return msgs, None
    if takes_tools(tok):
        return msgs, tools
    return written(msgs, tools, parser), None
