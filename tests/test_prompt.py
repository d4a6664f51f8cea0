"""Messages to token ids without an engine: bounds, templating, trimming (finspace.engine.prompt).

A tiny byte-level BPE tokenizer with the demo model's chat template, built with the
tokenizers library in about a second; no vLLM, no model weights.
"""

from __future__ import annotations

import re

import pytest

from finspace.models.catalog import load_catalog
from finspace.models.demo import CHAT_TEMPLATE, CORPUS, SPECIAL_TOKENS
from finspace.engine import MAX_MESSAGES, ChatSettings, normalize_messages
from finspace.engine.prompt import (
    build_prompt,
    check_template_kwargs,
    encode,
    rendered_limit,
    sampling_for,
    with_system,
)
from finspace.errors import BadInput
from helpers import demo_entry, write_catalog

# A template that refuses a system turn, as some models' templates do.
NO_SYSTEM_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def make_tokenizer(template: str = CHAT_TEMPLATE):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|end|>", pad_token="<|pad|>")
    fast.chat_template = template
    return fast


@pytest.fixture(scope="module")
def tok():
    return make_tokenizer()


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    root = tmp_path_factory.mktemp("prompt-catalog")
    catalog = load_catalog(write_catalog(root, {"a": demo_entry(root / "never-written", "tiny-llama", max_tokens=32)}))
    return catalog.get("a")


def text(tok, ids) -> str:
    return tok.decode(ids)


def conversation(turns: int, filler: str = "Revenue grew twelve percent year over year. ") -> list[dict]:
    """``turns`` messages alternating user/assistant, ending with a user turn."""
    out = [
        {"role": "user" if (turns - 1 - i) % 2 == 0 else "assistant", "content": f"m{i} {filler}"} for i in range(turns)
    ]
    out[-1]["content"] = "last question"
    return out


# ----------------------------------------------------------------- bounds
@pytest.mark.parametrize(
    "messages, match",
    [
        ([], "conversation is empty"),
        ("hello", "must be a list"),
        (["hi"], "message 0 must be an object"),
        ([{"role": "user", "content": "   "}], "message is empty"),
        ([{"role": "user", "content": [{"type": "image", "url": "x.png"}]}], "images and audio are not read"),
        ([{"role": "user", "content": {"path": "/etc/passwd"}}], "it must be text"),
        ([{"role": "user", "content": None}], "content is null; it must be text"),  # issue 41: no Python type named
        ([{"role": "user", "content": [7]}], "holds a number where a text part was expected"),
        ([{"role": "robot", "content": "hi"}], "role 'robot'"),
        ([{"role": "user", "content": "x" * 70_000}], "limit is 64,000"),
        ([{"role": "user", "content": "x" * 60_000}] * 5, "the limit is 256,000"),
        ([{"role": "user", "content": "hi"}] * (MAX_MESSAGES + 1), "the limit is 512"),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}],
            "last message must be from the user",
        ),
    ],
)
def test_bad_messages_are_refused(messages, match):
    with pytest.raises(BadInput, match=match):
        normalize_messages(messages)


def test_gradio_parts_are_joined():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Net debt"}, "to", {"text": "EBITDA?"}]}]
    assert normalize_messages(msgs) == [{"role": "user", "content": "Net debt\nto\nEBITDA?"}]


@pytest.mark.parametrize(
    "settings, match",
    [
        (ChatSettings(temperature=float("nan")), "temperature must be a finite number"),
        (ChatSettings(temperature=-0.1), r"temperature -0.1 is out of range"),
        (ChatSettings(top_p=0), r"top_p 0 is out of range; use a value in \(0, 1\]"),
        (ChatSettings(max_tokens=0), "max_tokens 0 is out of range"),
        (ChatSettings(max_tokens=512), r"max_tokens 512 is out of range; use a value in \[1, 511\]"),
        (ChatSettings(max_tokens=2.5), "whole number"),
        (ChatSettings(temperature="hot"), "must be a number"),
        (ChatSettings(seed=-1), "seed -1 is out of range"),
    ],
)
def test_bad_settings_are_refused(entry, settings, match):
    with pytest.raises(BadInput, match=match):
        sampling_for(entry, settings, 512)


def test_sampling_defaults_come_from_the_catalogue(entry):
    assert sampling_for(entry, ChatSettings(), 512) == {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 32,
        "seed": None,
    }
    assert sampling_for(entry, ChatSettings(), 20)["max_tokens"] == 19  # capped by the context
    assert sampling_for(entry, ChatSettings(temperature=1, seed=7), 512)["temperature"] == 1.0


# ----------------------------------------------------------------- templating
def test_the_catalogue_system_prompt_is_added_and_can_be_removed(tok, entry):
    msgs = [{"role": "user", "content": "hi"}]
    ids, dropped = build_prompt(msgs, entry, ChatSettings(), 8, tok, 512)
    assert text(tok, ids) == "<|bos|><|system|>You are a test model.<|end|><|user|>hi<|end|><|assistant|>"
    assert dropped == 0
    ids, _ = build_prompt(msgs, entry, ChatSettings(system_prompt=""), 8, tok, 512)
    assert text(tok, ids) == "<|bos|><|user|>hi<|end|><|assistant|>"


def test_a_template_without_a_system_role_gets_it_in_the_first_user_turn():
    ids = encode(
        make_tokenizer(NO_SYSTEM_TEMPLATE), [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}]
    )
    assert text(make_tokenizer(), ids) == "<|bos|><|user|>S\n\nq<|end|><|assistant|>"


def test_a_template_error_is_bad_input():
    tok = make_tokenizer("{{ raise_exception('Conversation roles must alternate') }}")
    with pytest.raises(BadInput, match="does not fit the model's chat template: Conversation roles must alternate"):
        encode(tok, [{"role": "user", "content": "q"}])


# ----------------------------------------------------------------- trimming
def test_long_history_is_trimmed_keeping_system_and_last_turn(tok, entry):
    msgs = conversation(25)
    full = len(encode(tok, [{"role": "system", "content": "SYS"}] + msgs))
    ids, dropped = build_prompt(msgs, entry, ChatSettings(system_prompt="SYS"), 32, tok, 512)
    assert full > 512 - 32 >= len(ids) and dropped > 0
    out = text(tok, ids)
    assert out.startswith("<|bos|><|system|>SYS<|end|><|user|>") and out.endswith("last question<|end|><|assistant|>")


def test_a_last_turn_longer_than_the_context_is_refused(tok, entry):
    huge = [{"role": "user", "content": "Free cash flow covers the dividend twice. " * 100}]
    with pytest.raises(
        BadInput, match=r"your last message is [\d,]+ tokens .* leaves room for 480. Shorten the message"
    ):
        build_prompt(huge, entry, ChatSettings(), 32, tok, 512)


# ----------------------------------------------------------------- trimming cost (security finding)
def _reference_build_prompt(msgs, entry, settings, max_tokens, tok, max_model_len):
    """The trimming as it was before the fix (binary search, re-encoding the kept tail each step): the
    results every conversation must still get."""
    msgs = with_system(msgs, entry, settings)
    budget = max_model_len - max_tokens
    ids = encode(tok, msgs)
    if len(ids) <= budget:
        return ids, 0
    head = msgs[:1] if msgs[0]["role"] == "system" else []
    body = msgs[len(head) :]
    lo, hi, best = 1, len(body) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        kept = body[mid:]
        while kept and kept[0]["role"] != "user":
            kept = kept[1:]
        trial = encode(tok, head + kept)
        if len(trial) <= budget:
            best, hi = (trial, mid), mid - 1
        else:
            lo = mid + 1
    if best is None:
        last = encode(tok, head + body[-1:])
        raise BadInput(
            f"your last message is {len(last):,} tokens with the system prompt; with max_tokens {max_tokens} "
            f"the model's context of {max_model_len:,} leaves room for {budget:,}. Shorten the message or lower max tokens"
        )
    return best


class CountingTokenizer:
    """The tokenizer, counting the turns it templates and the texts it encodes outside the template."""

    def __init__(self, tok):
        self.tok, self.templated, self.template_calls, self.texts = tok, 0, 0, 0

    def apply_chat_template(self, msgs, **kwargs):
        self.template_calls += 1
        self.templated += len(msgs)
        return self.tok.apply_chat_template(msgs, **kwargs)

    def __call__(self, texts, **kwargs):
        self.texts += len(texts) if isinstance(texts, list) else 1
        return self.tok(texts, **kwargs)


def _shapes() -> dict[str, list[dict]]:
    ragged = [
        {"role": "user" if i % 3 else "assistant", "content": "Free cash flow. " * (1 + i % 7)} for i in range(40)
    ]
    ragged[-1] = {"role": "user", "content": "and now?"}
    return {
        "alternating": conversation(31),
        "assistant first": [{"role": "assistant", "content": "Hello! How can I help?"}] + conversation(20),
        "users in a row": [{"role": "user", "content": f"u{i} " + "Analysts expect earnings. " * 3} for i in range(25)],
        "ragged": ragged,
        "own system turn": [{"role": "system", "content": "Be brief."}] + conversation(15),
        "one long last turn": conversation(9)[:-1] + [{"role": "user", "content": "Revenue grew. " * 30}],
    }


@pytest.mark.parametrize("shape", list(_shapes()))
@pytest.mark.parametrize("system", [None, ""])
def test_trimming_results_are_unchanged(tok, entry, shape, system):
    msgs, settings = _shapes()[shape], ChatSettings(system_prompt=system)
    full = len(encode(tok, with_system(msgs, entry, settings)))
    checked = 0
    for max_model_len in range(12, full + 12, max(1, full // 40)):  # cuts all along, from refused to none
        try:
            expected = _reference_build_prompt(msgs, entry, settings, 8, tok, max_model_len)
        except BadInput as exc:
            with pytest.raises(BadInput, match=f"^{re.escape(str(exc))}$"):
                build_prompt(msgs, entry, settings, 8, tok, max_model_len)
            continue
        assert build_prompt(msgs, entry, settings, 8, tok, max_model_len) == expected, max_model_len
        checked += expected[1] > 0
    assert checked >= 10  # most contexts trim this conversation


def crafted(turns: int = 510) -> list[dict]:
    """The finding's conversation: hundreds of short turns, just over the context, so the cut falls near the start."""
    return conversation(turns, filler="Net debt to EBITDA is 1.8 times. ")


@pytest.mark.parametrize("over", [1, 6, 40, 300])
def test_trimming_a_510_turn_conversation_templates_each_turn_a_bounded_number_of_times(tok, entry, over):
    msgs = crafted()
    full = len(encode(tok, [{"role": "system", "content": "You are a test model."}] + msgs))
    budget_short_by = {1: 1, 6: 60, 40: 400, 300: 3000}[over]  # tokens over the budget: the cut falls ~`over` turns in
    counting = CountingTokenizer(tok)
    ids, dropped = build_prompt(msgs, entry, ChatSettings(), 8, counting, full - budget_short_by + 8)
    assert dropped > 0 and len(ids) <= full - budget_short_by
    # the whole conversation once, then the tails either side of the cut: each turn templated at most 3 times,
    # and each turn's text encoded once more to find the cut (the old binary search templated ~9 tails of ~510);
    # each templated prompt is rendered, bounded, then encoded as one more text
    assert counting.templated <= 3 * (len(msgs) + 1), (counting.templated, counting.template_calls)
    assert counting.template_calls <= 3 and counting.texts <= len(msgs) + 1 + counting.template_calls


@pytest.mark.parametrize(
    "reasoning, kwargs, match",
    [
        (None, {"enable_thinking": False}, "it takes none"),
        ("qwen3", {"chat_template": "{{ 1 }}"}, "set by the server"),
        ("qwen3", {"foo": 1}, "allowed: enable_thinking"),
        ("qwen3", {"enable_thinking": "no"}, "true or false"),
    ],
)
def test_template_variables_are_only_the_catalogues_allow_list(reasoning, kwargs, match):
    entry = type("Entry", (), {"reasoning": reasoning, "key": "m"})()
    with pytest.raises(BadInput, match=match):
        check_template_kwargs(entry, kwargs)
    assert check_template_kwargs(type("Q", (), {"reasoning": "qwen3"})(), {"enable_thinking": False}) == {
        "enable_thinking": False
    }


def test_a_template_that_amplifies_the_text_is_refused_before_tokenizing():
    """The bound is on the rendered prompt: a template that repeats a turn 100,000 times never reaches the
    tokenizer (the caller can't send a template any more; a catalogue template can't do this either)."""
    msgs = [{"role": "user", "content": "lorem ipsum "}]
    tok = make_tokenizer("{% for m in messages %}{{ m.content * 100000 }}{% endfor %}")
    with pytest.raises(BadInput, match="templated prompt is 1,200,000 characters"):
        encode(tok, msgs)
    assert rendered_limit(msgs) < 1_200_000
