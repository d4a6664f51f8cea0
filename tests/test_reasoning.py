"""finspace.engine.reasoning: a Qwen 3 reply split into reasoning and answer by vLLM's own qwen3 parser,
fed as the engine's deltas arrive (split at awkward places); enable_thinking reaching the chat template."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from finspace.engine.prompt import encode
from finspace.engine.reasoning import PARSERS, make_split

REPLY = "<think>\nThe margin is EBITDA over revenue.\n</think>\n\nEBITDA margin = EBITDA / revenue."
CUTS = [
    [REPLY],  # one delta
    list(REPLY),  # a character at a time: every tag split
    ["<th", "ink>\nThe margin is EBITDA over revenue.\n</", "think>\n\nEBITDA", " margin = EBITDA / revenue."],
    ["<think>\nThe margin is EBITDA over revenue.\n</think", ">", "\n\nEBITDA margin = EBITDA / revenue."],
]


@pytest.fixture(scope="module")
def tok(model_dir):
    return AutoTokenizer.from_pretrained(model_dir / "tiny-qwen3")


def joined(split, deltas):
    reasoning, content = [], []
    for d in deltas:
        for piece in split.feed(d):
            reasoning.append(piece.get("reasoning_content", ""))
            content.append(piece.get("content", ""))
    return "".join(reasoning), "".join(content)


@pytest.mark.parametrize("deltas", CUTS, ids=["whole", "by-character", "awkward", "tag-split"])
def test_streamed_deltas_split_into_reasoning_and_answer(tok, deltas):
    reasoning, content = joined(make_split("qwen3", tok), deltas)
    assert "".join(deltas) == REPLY
    assert reasoning.strip() == "The margin is EBITDA over revenue."
    assert content.strip() == "EBITDA margin = EBITDA / revenue."
    assert "<think>" not in reasoning + content and "</think>" not in reasoning + content


def test_the_whole_reply_splits_the_same(tok):
    reasoning, content = make_split("qwen3", tok).whole(REPLY)
    assert (reasoning.strip(), content.strip()) == ("The margin is EBITDA over revenue.",
                                                    "EBITDA margin = EBITDA / revenue.")


def test_thinking_off_is_all_answer(tok):
    split = make_split("qwen3", tok, {"enable_thinking": False})
    assert joined(split, ["EBITDA margin", " = EBITDA / revenue."]) == ("", "EBITDA margin = EBITDA / revenue.")


def test_enable_thinking_reaches_the_chat_template(tok):
    msgs = [{"role": "user", "content": "What is EBITDA?"}]
    on, off = encode(tok, msgs), encode(tok, msgs, {"enable_thinking": False})
    assert on == encode(tok, msgs, {"enable_thinking": True})
    assert tok.decode(off).endswith("<|assistant|><think>\n\n</think>\n\n") and off[: len(on)] == on


def test_qwen3_is_the_reasoning_architecture():
    assert PARSERS == {"qwen3": "qwen3"}
