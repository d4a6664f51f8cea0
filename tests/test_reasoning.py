"""finspace.engine.reasoning: a Qwen 3 reply split into reasoning and answer by vLLM's own qwen3 parser,
fed as the engine's deltas arrive (split at awkward places); enable_thinking reaching the chat template."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from finspace.engine.prompt import ChatSettings, encode
from finspace.engine.reasoning import ReasoningSplit

REPLY = "<think>\nThe margin is EBITDA over revenue.\n</think>\n\nEBITDA margin = EBITDA / revenue."
# The engine's deltas are whole tokens (vLLM detokenizes per token), and <think> / </think> are single tokens of a
# Qwen 3 tokenizer: a tag never arrives cut in two. The cuts fall at token boundaries, awkward ones included.
CUTS = [
    [REPLY],  # one delta
    "by-token",  # one token at a time
    ["<think>", "\nThe margin is EBITDA over revenue.\n", "</think>", "\n\nEBITDA margin = EBITDA / revenue."],
    ["<think>\nThe margin", " is EBITDA over revenue.\n</think>\n\nEBITDA", " margin = EBITDA / revenue."],
]


@pytest.fixture(scope="module")
def tok(model_dir):
    return AutoTokenizer.from_pretrained(model_dir / "tiny-qwen3")


def make_split(parser: str, tok, template_kwargs: dict | None = None) -> ReasoningSplit:
    return ReasoningSplit(tok, parser, enable_thinking=(template_kwargs or {}).get("enable_thinking", True))


def joined(split, deltas):
    reasoning, content = [], []
    for d in deltas:
        thinking, answer = split.feed(d)
        reasoning.append(thinking)
        content.append(answer)
    thinking, answer = split.finish()
    return "".join(reasoning) + thinking, "".join(content) + answer


@pytest.mark.parametrize("deltas", CUTS, ids=["whole", "by-token", "tags-alone", "text-around-tags"])
def test_streamed_deltas_split_into_reasoning_and_answer(tok, deltas):
    if deltas == "by-token":
        deltas = [tok.decode([i]) for i in tok.encode(REPLY, add_special_tokens=False)]
    reasoning, content = joined(make_split("qwen3", tok), deltas)
    assert "".join(deltas) == REPLY
    assert reasoning.strip() == "The margin is EBITDA over revenue."
    assert content.strip() == "EBITDA margin = EBITDA / revenue."
    assert "<think>" not in reasoning + content and "</think>" not in reasoning + content


def test_the_whole_reply_splits_the_same(tok):
    reasoning, content = joined(make_split("qwen3", tok), [REPLY])
    assert (reasoning.strip(), content.strip()) == (
        "The margin is EBITDA over revenue.",
        "EBITDA margin = EBITDA / revenue.",
    )


def test_thinking_off_is_all_answer(tok):
    split = make_split("qwen3", tok, {"enable_thinking": False})
    assert joined(split, ["EBITDA margin", " = EBITDA / revenue."]) == ("", "EBITDA margin = EBITDA / revenue.")


def test_enable_thinking_reaches_the_chat_template(tok):
    msgs = [{"role": "user", "content": "What is EBITDA?"}]

    def kw(value):
        return ChatSettings(chat_template_kwargs=value)

    on, off = encode(tok, msgs), encode(tok, msgs, kw({"enable_thinking": False}))
    assert on == encode(tok, msgs, kw({"enable_thinking": True}))
    assert tok.decode(off).endswith("<|assistant|><think>\n\n</think>\n\n") and off[: len(on)] == on


def test_the_catalogue_marks_its_qwen3_reasoning_models():
    from finspace.models.catalog import load_catalog

    marked = {e.key: e.reasoning for e in load_catalog().entries if getattr(e, "reasoning", None)}
    assert marked and set(marked.values()) == {"qwen3"} and "qwen-3-8b-fin" in marked, marked
