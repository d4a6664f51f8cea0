"""A reasoning model's reply split into its thinking and its answer, by vLLM's own reasoning parser.

``splitter_for(engine, template_kwargs)`` gives a ``ReasoningSplit`` for the loaded
model when its architecture has a parser in ``PARSERS`` (Qwen 3: ``<think>...</think>``),
else None. Feed it the engine's text deltas in order (``feed``) and it returns the
pieces as OpenAI deltas (``{"reasoning_content": ...}`` / ``{"content": ...}``); or
split a whole reply at once (``whole``). The parser is vLLM's (``vllm.reasoning``),
imported lazily, never a regex of ours; ``chat_template_kwargs`` reach it, so with
``enable_thinking: false`` the reply is all answer. The OpenAI API (finspace.openai_api)
uses it; the Gradio chat can use the same object to show the thinking apart.
"""

from __future__ import annotations

from typing import Any

PARSERS = {"qwen3": "qwen3"}  # catalogue architecture -> vLLM reasoning parser name


class ReasoningSplit:
    """One reply's split; not shared between requests (the parser keeps state)."""

    def __init__(self, parser: Any, tokenizer: Any):
        self._parser, self._tok = parser, tokenizer
        self._text, self._ids = "", []

    def feed(self, delta: str) -> list[dict]:
        """The OpenAI deltas for the next piece of text (none while a tag is still incomplete)."""
        ids = list(self._tok.encode(delta, add_special_tokens=False))
        current, current_ids = self._text + delta, self._ids + ids
        msg = self._parser.extract_reasoning_streaming(self._text, current, delta, self._ids, current_ids, ids)
        self._text, self._ids = current, current_ids
        if msg is None:
            return []
        out = []
        if getattr(msg, "reasoning", None):
            out.append({"reasoning_content": msg.reasoning})
        if getattr(msg, "content", None):
            out.append({"content": msg.content})
        return out

    def whole(self, text: str) -> tuple[str | None, str | None]:
        """(reasoning, answer) of a complete reply."""
        return self._parser.extract_reasoning(text, None)


def make_split(parser_name: str, tokenizer: Any, template_kwargs: dict | None = None) -> ReasoningSplit:
    from vllm.reasoning import ReasoningParserManager  # lazily: only a reasoning model's request needs it

    cls = ReasoningParserManager.get_reasoning_parser(parser_name)
    return ReasoningSplit(cls(tokenizer, chat_template_kwargs=dict(template_kwargs or {})), tokenizer)


def splitter_for(engine: Any, template_kwargs: dict | None = None) -> ReasoningSplit | None:
    """The split for ``engine``'s loaded model, or None when it is not a reasoning model (or none is loaded)."""
    entry, tok = engine.entry, getattr(engine, "tokenizer", None)
    name = PARSERS.get(entry.architecture) if entry is not None else None
    if name is None or tok is None:
        return None
    return make_split(name, tok, template_kwargs)
