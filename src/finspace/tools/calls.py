"""A reply's tool calls, read by vLLM's own tool parsers (``vllm.tool_parsers``), as the reply streams.

``CallReader(parser, tokenizer, tools)`` is fed the answer's deltas (the thinking is already split off by the
reasoning parser, so a ``<tool_call>`` written while thinking is never taken for a call: vllm #19056, #22885)
and returns the text that can be shown now; ``finish()`` returns the rest of the text and the calls.

- ``auto``: text streams until it may be a call (``<tool_call>`` for hermes; ``<|python_tag|>``, or an answer
  that opens with ``{``, for llama3_json; an answer that opens with ``[`` for pythonic). From there the text is
  held, and the whole answer is read once by the parser's ``extract_tool_calls``. vLLM's streaming parsers are
  not used: llama3_json's breaks JSON when a delta holds several tokens (vllm PR #51577), and finspace's
  deltas often do.
- ``required`` and a named function: the reply was constrained by structured outputs to the JSON schema vLLM
  builds for them (``forced_schema``: ``get_json_schema_from_tools``, what the parsers' ``adjust_request``
  uses), so even a weak model's call parses: the arguments object alone for a named function, a list of
  ``{"name", "parameters"}`` for ``required``.

vLLM is imported when a reader or a schema is made, never on import of this module.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from finspace.errors import BadInput
from finspace.structured import check_schema
from finspace.tools.spec import MAX_CALLS_PER_MESSAGE, ToolRequest

PARSERS = ("hermes", "llama3_json", "pythonic")
_MARKERS = {"hermes": ("<tool_call>",), "llama3_json": ("<|python_tag|>",), "pythonic": ()}
_OPENERS = {"hermes": "", "llama3_json": "{", "pythonic": "["}


def _vllm_tools(req: ToolRequest) -> list:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam

    return [ChatCompletionToolsParam.model_validate(s) for s in req.specs]


def forced_schema(req: ToolRequest) -> dict:
    """The JSON schema a forced reply follows (vLLM's ``get_json_schema_from_tools``), checked like any schema
    finspace hands to structured outputs."""
    from vllm.entrypoints.openai.chat_completion.protocol import (
        ChatCompletionNamedFunction,
        ChatCompletionNamedToolChoiceParam,
    )
    from vllm.tool_parsers.utils import get_json_schema_from_tools

    if req.choice == "named":
        choice: Any = ChatCompletionNamedToolChoiceParam(function=ChatCompletionNamedFunction(name=req.name))
    else:
        choice = req.choice
    schema = get_json_schema_from_tools(tool_choice=choice, tools=_vllm_tools(req), parallel_tool_calls=req.parallel)
    if not isinstance(schema, dict):
        raise BadInput(f"tool_choice {req.choice!r} does not constrain the reply; use required or a named function")
    if req.choice == "required":  # at most MAX_CALLS_PER_MESSAGE calls in one reply
        schema = {**schema, "maxItems": min(schema.get("maxItems", MAX_CALLS_PER_MESSAGE), MAX_CALLS_PER_MESSAGE)}
    return check_schema(schema, "tools (as the schema of a forced call)")


def reading_parser(engine: Any) -> str | None:
    """The parser that reads the engine's calls: the catalogue's; for a remote endpoint (which parses its
    model's calls itself, finspace.remote.chat writes them back as hermes text) hermes when none is given."""
    parser = getattr(getattr(engine, "entry", None), "tool_parser", None)
    return parser or ("hermes" if getattr(engine, "kind", "local") == "remote" else None)


def call(name: str, arguments: Any, call_id: str | None = None) -> dict:
    """One call as OpenAI writes it: the arguments as JSON text."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def completed_items(text: str) -> list:
    """The items of a JSON array that were written whole before ``text`` was cut (``[{...}, {...}, {"na`` gives
    the first two); an empty list when it does not open an array."""
    decoder, items = json.JSONDecoder(), []
    at = len(text) - len(text.lstrip())
    if not text.startswith("[", at):
        return items
    at += 1
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        try:
            item, at = decoder.raw_decode(text, at)
        except ValueError:
            return items
        items.append(item)
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if not text.startswith(",", at):
            return items
        at += 1


class _Markers:
    """A vocabulary of the parsers' marker tokens, for a parser made without the model's tokenizer (a remote
    endpoint's reply) or with one that lacks them: the parsers read text, the tokenizer only finds markers."""

    def get_vocab(self) -> dict[str, int]:
        return {"<|python_tag|>": 0, "<tool_call>": 1, "</tool_call>": 2}


def _parser(name: str, tokenizer: Any, tools: list) -> Any:
    from vllm.tool_parsers import ToolParserManager

    cls = ToolParserManager.get_tool_parser(name)
    try:
        return cls(tokenizer if tokenizer is not None else _Markers(), tools)
    except (RuntimeError, ValueError, AttributeError):
        return cls(_Markers(), tools)


class CallReader:
    """One reply's answer text in, shown text and tool calls out (see the module's docstring)."""

    def __init__(self, parser: str, tokenizer: Any, req: ToolRequest):
        if parser not in PARSERS:
            raise BadInput(f"unknown tool parser {parser!r}; use one of {', '.join(PARSERS)}")
        self.parser_name, self.req = parser, req
        self._tokenizer = tokenizer
        self._text = ""
        self._shown = 0  # characters of _text already returned by feed
        self._held = req.forced  # a forced reply is JSON: nothing of it is text
        self.calls: list[dict] = []  # set by finish's caller (openai_api.toolcalls) once read
        self._early: list[dict] = []  # ``required``: the calls written whole so far, handed out as they complete
        self._early_items = 0  # the array's items read into _early (a malformed one is skipped, counted)
        self._early_looked = 0  # the text's length at the last look
        self.late_thinking = ""  # thinking the reasoning split took for answer (see _auto), found by finish

    @property
    def text(self) -> str:
        return self._text

    def feed(self, delta: str) -> str:
        """The part of the answer so far that can be shown now (never the start of a call)."""
        self._text += delta
        if self._held:
            return ""
        text = self._text
        stripped = text.lstrip()
        opener = _OPENERS[self.parser_name]
        if opener and (not stripped or stripped.startswith(opener)):  # a call may open the answer
            if stripped:
                self._held = True
            return ""
        cut = len(text)
        for marker in _MARKERS[self.parser_name]:
            at = text.find(marker, self._shown)
            if at >= 0:
                cut = min(cut, at)
                self._held = True
            else:  # a marker's start at the end may be split across deltas
                for k in range(min(len(marker) - 1, len(text)), 0, -1):
                    if text.endswith(marker[:k]):
                        cut = min(cut, len(text) - k)
                        break
        out = text[self._shown : cut] if cut > self._shown else ""
        self._shown = max(self._shown, cut)
        return out

    def early_calls(self) -> list[dict]:
        """``required``: the calls completed since the last look, so a stream sends each call as soon as it is
        written whole instead of all of them when the reply ends (finish returns the same calls, the same ids)."""
        if self.req.choice != "required" or "}" not in self._text[self._early_looked :]:
            return []  # no item can have ended since the last look
        self._early_looked = len(self._text)
        items = completed_items(self._text)[: MAX_CALLS_PER_MESSAGE if self.req.parallel else 1]
        new = [
            call(c["name"], c.get("parameters", {}))
            for c in items[self._early_items :]
            if isinstance(c, dict) and isinstance(c.get("name"), str)
        ]
        self._early_items = max(self._early_items, len(items))
        self._early += new
        return new

    def finish(self) -> tuple[str, list[dict]]:
        """(the text not yet shown, the calls): the whole answer read once."""
        content, calls = self._forced() if self.req.forced else self._auto()
        if not self.req.parallel:
            calls = calls[:1]
        calls = calls[:MAX_CALLS_PER_MESSAGE]
        if self._early and len(calls) >= len(self._early):  # the calls already handed out keep their ids
            calls = self._early + calls[len(self._early) :]
        shown = self._text[: self._shown]
        rest = content[len(shown) :] if content.startswith(shown) else ""
        return rest, calls

    def _forced(self) -> tuple[str, list[dict]]:
        """A forced reply's calls. Cut by max_tokens, a named call keeps its arguments as written (what vLLM's
        own server returns, with ``finish_reason: "length"``) and ``required`` keeps the calls that completed."""
        try:
            value = json.loads(self._text)
        except ValueError:  # cut by max_tokens
            if self.req.choice == "named":
                return ("", [call(self.req.name, self._text.strip())]) if self._text.strip() else (self._text, [])
            value = completed_items(self._text)
            if not value:
                return self._text, []
        if self.req.choice == "named" and isinstance(value, dict):
            return "", [call(self.req.name, value)]
        if self.req.choice == "required" and isinstance(value, list):
            return "", [
                call(c["name"], c.get("parameters", {}))
                for c in value
                if isinstance(c, dict) and isinstance(c.get("name"), str)
            ]
        return self._text, []

    def _auto(self) -> tuple[str, list[dict]]:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        tools = _vllm_tools(self.req)
        parser = _parser(self.parser_name, self._tokenizer, tools)
        request = ChatCompletionRequest(
            model="finspace", messages=[{"role": "user", "content": "-"}], tools=tools, tool_choice="auto"
        )
        info = parser.extract_tool_calls(self._text, request)
        start = 0
        while not info.tools_called and self.parser_name == "hermes":
            # vLLM's qwen3 reasoning parser ends the thinking at a "<tool_call>" written inside it (and drops
            # the "</think>" after), so the answer may open with thinking that mentions the tag: read from each
            # later tag until the calls parse; what comes before them was thinking (vllm #19056, #22885).
            start = self._text.find("<tool_call>", start + 1)
            if start < 0:
                return self._text, []
            info = parser.extract_tool_calls(self._text[start:], request)
            if info.tools_called:
                before = self._text[:start]
                if before.lstrip().startswith("<tool_call>"):
                    self.late_thinking, before = before, ""
                info.content = before
        if not info.tools_called:
            return self._text, []
        calls = [call(c.function.name, c.function.arguments) for c in info.tool_calls]
        return info.content or "", calls
