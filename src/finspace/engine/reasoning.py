"""A reasoning model's stream split into its thinking and its answer, by vLLM's own reasoning parser.

``ReasoningSplit(tokenizer, "qwen3")`` wraps ``vllm.reasoning``'s parser of that
name (imported when the split is made, never on import of this module): feed it
each delta as it comes from the engine, text and token ids, and it returns the
thinking and the answer in that delta. Qwen 3's ``<think>``/``</think>`` are
single tokens, found by id, so a tag is never split between deltas; a delta may
end right after one, or hold a tag with text either side.

``enable_thinking=False`` (the chat template was told not to think) or
``in_answer=True`` (a continued reply whose thinking has ended) start the split
in the answer, so everything is answer unless the model opens a new ``<think>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PARSERS = ("qwen3",)  # the catalogue's `reasoning` values


class ReasoningSplit:
    """Stateful: one per reply. ``feed`` returns (thinking delta, answer delta); ``finish`` flushes."""

    def __init__(
        self, tokenizer: Any, parser_name: str = "qwen3", *, enable_thinking: bool = True, in_answer: bool = False
    ):
        from vllm.reasoning import ReasoningParserManager

        cls = ReasoningParserManager.get_reasoning_parser(parser_name)
        thinking = enable_thinking and not in_answer
        self._parser = cls(tokenizer, chat_template_kwargs={"enable_thinking": thinking})
        self._tok = tokenizer
        self._text = ""
        self._ids: list[int] = []

    def feed(self, delta_text: str, delta_token_ids: Sequence[int] | None = None) -> tuple[str, str]:
        if delta_token_ids is None:  # text alone: its ids by the tokenizer (right when tags are whole in it)
            delta_token_ids = self._tok.encode(delta_text, add_special_tokens=False)
        ids = list(delta_token_ids)
        previous_text, previous_ids = self._text, self._ids
        self._text, self._ids = previous_text + delta_text, previous_ids + ids
        msg = self._parser.extract_reasoning_streaming(
            previous_text, self._text, delta_text, previous_ids, self._ids, ids
        )
        return _parts(msg)

    def finish(self) -> tuple[str, str]:
        finish = getattr(self._parser, "finish_streaming", None)
        return _parts(finish() if finish is not None else None)

    @property
    def text(self) -> str:
        """All the raw text fed so far, tags included (what a continued reply resumes from)."""
        return self._text


def _parts(msg: Any) -> tuple[str, str]:
    if msg is None:
        return "", ""
    return getattr(msg, "reasoning", None) or "", getattr(msg, "content", None) or ""
