"""The analyst's chat without a browser: the thinking split, enable_thinking, usage, Continue, presets, seed,
rendering, all through real objects (a real Engine with a stand-in for vLLM's AsyncLLM that streams recorded
Qwen 3 replies as vLLM does: text and token ids per delta; the tiny Qwen 3 test model's real tokenizer).

A random-weight model never writes <think>: the split is tested on recordings (tests/data/qwen3-*.json), each
fed through Engine.chat_parts, the path vLLM's deltas take.
"""

from __future__ import annotations

import asyncio
import re
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from finspace.models.catalog import load_catalog
from finspace.engine import ChatInfo, ChatSettings, Engine
from finspace.engine import stream
from finspace.engine.prompt import encode
from finspace.errors import BadInput, CatalogError
from finspace.host.gpu import MemoryMonitor
from finspace.models.presets import DEFAULT_PRESETS, load_presets
from finspace.ui import chat as convo
from finspace.ui.chat_layout import LATEX_DELIMITERS
from finspace.ui.chat_panel import parse_seed

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def qwen_tok():
    from finspace.models.demo import _train_tokenizer

    return _train_tokenizer("tiny-qwen3")


class FakeLLM:
    """vLLM's AsyncLLM.generate as the engine uses it: DELTA outputs (text, token_ids), the last one finished."""

    def __init__(self, deltas: list[list[str]], tok, finish_reason: str = "stop"):
        self.deltas, self.tok, self.finish_reason, self.prompts = deltas, tok, finish_reason, []

    async def generate(self, prompt, params, rid):
        self.prompts.append(prompt["prompt_token_ids"])
        for i, pieces in enumerate(self.deltas):
            ids = [t for p in pieces for t in self.tok.encode(p, add_special_tokens=False)]
            last = i == len(self.deltas) - 1
            out = SimpleNamespace(
                text="".join(pieces), token_ids=ids, finish_reason=self.finish_reason if last else None
            )
            yield SimpleNamespace(outputs=[out], finished=last)
            await asyncio.sleep(0)

    async def abort(self, rid):
        pass


def ready_engine(deltas, tok, key="qwen-3-8b-fin", finish_reason="stop") -> Engine:
    catalog = load_catalog()
    eng = Engine(catalog, MemoryMonitor(nvml=None))
    eng._llm, eng._entry, eng._tokenizer = FakeLLM(deltas, tok, finish_reason), catalog.get(key), tok
    eng._max_model_len, eng._state = 4096, "ready"
    return eng


async def parts_of(eng, messages, settings=None, info=None):
    return [p async for p in eng.chat_parts(messages, settings or ChatSettings(), info)]


ASK = [{"role": "user", "content": "Current ratio?"}]
SPLITS = [  # recording, thinking (stripped), answer (stripped) starts with, ends with
    (
        "qwen3-ratio",
        "Okay, the user wants the current ratio. Current ratio = current assets / current liabilities "
        "= 1,250 / 800 = 1.5625. Round to 1.56.",
        "The current ratio is **1.56**",
        "does not change it.",
    ),
    ("qwen3-awkward", "Net debt / EBITDA = 2.1", "Leverage is 2.1x.", "Leverage is 2.1x."),
    ("qwen3-tight", "Check the yield.", "Yield is 4.2%.", "Yield is 4.2%."),
]


@pytest.mark.parametrize("name,thinking,starts,ends", SPLITS)
def test_recorded_qwen3_streams_split_into_thinking_and_answer(qwen_tok, name, thinking, starts, ends):
    deltas = stream.recording(DATA / f"{name}.json")
    info = ChatInfo()
    pairs = asyncio.run(parts_of(ready_engine(deltas, qwen_tok), ASK, info=info))
    got_thinking = "".join(t for t, _ in pairs).strip()
    got_answer = "".join(a for _, a in pairs).strip()
    assert got_thinking == thinking
    assert got_answer.startswith(starts) and got_answer.endswith(ends)
    assert "<think>" not in got_answer + got_thinking and "</think>" not in got_answer + got_thinking
    assert info.text == "".join("".join(d) for d in deltas)  # the raw reply, tags included, for Continue
    assert info.finish_reason == "stop" and info.output_tokens > 0 and info.prompt_tokens > 0


def test_the_thinking_streams_before_the_answer(qwen_tok):
    pairs = asyncio.run(parts_of(ready_engine(stream.recording(DATA / "qwen3-ratio.json"), qwen_tok), ASK))
    first_answer = next(i for i, (_, a) in enumerate(pairs) if a.strip())
    assert first_answer > 3 and all(t for t, _ in pairs[: first_answer - 1])
    assert not any(t for t, _ in pairs[first_answer + 1 :])  # nothing is thinking after the answer began


def test_chat_yields_the_answer_only(qwen_tok):
    async def run():
        eng = ready_engine(stream.recording(DATA / "qwen3-awkward.json"), qwen_tok)
        return "".join([d async for d in eng.chat(ASK, ChatSettings())])

    assert asyncio.run(run()).strip() == "Leverage is 2.1x."


def test_a_model_without_a_reasoning_parser_passes_text_through(qwen_tok):
    deltas = stream.recording(DATA / "qwen3-awkward.json")
    pairs = asyncio.run(parts_of(ready_engine(deltas, qwen_tok, key="demo"), ASK))
    assert not any(t for t, _ in pairs) and "".join(a for _, a in pairs).startswith("<think>Net debt")


def test_thinking_off_renders_an_empty_think_block_and_all_is_answer(qwen_tok):
    off = ChatSettings(chat_template_kwargs={"enable_thinking": False})
    on_prompt = qwen_tok.decode(encode(qwen_tok, ASK, ChatSettings()))
    off_prompt = qwen_tok.decode(encode(qwen_tok, ASK, off))
    assert on_prompt.endswith("<|assistant|>") and off_prompt.endswith("<|assistant|><think>\n\n</think>\n\n")
    eng = ready_engine(stream.recording(DATA / "qwen3-no-think.json"), qwen_tok)
    pairs = asyncio.run(parts_of(eng, ASK, off))
    assert (
        not any(t for t, _ in pairs) and "".join(a for _, a in pairs) == "EBITDA is earnings before interest, taxes..."
    )
    assert qwen_tok.decode(eng._llm.prompts[0]).endswith("</think>\n\n")  # what the engine sent vLLM


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ("yes", "must be an object"),
        ({"bad name": 1}, "not a variable name"),
        ({"x": [1]}, "true/false"),
    ],
)
def test_bad_chat_template_kwargs_are_clear_errors(qwen_tok, kwargs, match):
    with pytest.raises(BadInput, match=match):
        encode(qwen_tok, ASK, ChatSettings(chat_template_kwargs=kwargs))


# ------------------------------------------------------------------ Continue and usage
def test_continue_resumes_the_same_reply_in_its_answer(qwen_tok):
    """Cut at max tokens inside the answer: Continue templates the raw reply as an unfinished assistant turn
    (no new turn) and the split starts in the answer."""
    replay = DATA / "qwen3-ratio.json"
    eng = ready_engine([], qwen_tok)
    eng.test_replay, eng._entry = str(replay), dataclasses.replace(eng._entry, generate="tiny-qwen3")
    raw = "".join("".join(d) for d in stream.recording(replay))
    cut = len(qwen_tok.encode(raw[: raw.index("</think>") + 20], add_special_tokens=False))  # inside the answer
    first = ChatInfo()
    pairs = asyncio.run(parts_of(eng, ASK, ChatSettings(max_tokens=cut), first))
    assert first.finish_reason == "length" and first.output_tokens <= cut
    answer1 = "".join(a for _, a in pairs)
    assert "</think>" in first.text and answer1.strip()
    cont = ChatSettings(max_tokens=1000, continue_final_message=True)
    second = ChatInfo()
    msgs = [*ASK, {"role": "assistant", "content": first.text}]
    pairs2 = asyncio.run(parts_of(eng, msgs, cont, second))
    assert not any(t for t, _ in pairs2)
    whole = (answer1 + "".join(a for _, a in pairs2)).strip()
    assert whole.startswith("The current ratio is **1.56**") and whole.endswith("does not change it.")
    assert second.finish_reason == "stop" and first.text + second.text == raw
    prompt = qwen_tok.decode(encode(qwen_tok, msgs, cont))
    assert prompt.endswith(first.text) and not prompt.endswith("<|assistant|>")


def test_continue_needs_an_unfinished_assistant_reply(qwen_tok):
    with pytest.raises(BadInput, match="unfinished reply"):
        asyncio.run(parts_of(ready_engine([], qwen_tok), ASK, ChatSettings(continue_final_message=True)))


def test_usage_line_says_tokens_speed_first_token_stop_and_trimmed():
    info = ChatInfo(
        prompt_tokens=120, output_tokens=64, finish_reason="length", trimmed_messages=2, first_token_at=10.25
    )
    u = convo.usage(info, started=10.0, ended=11.25)
    assert u["tokens_per_s"] == 64.0 and u["first_token_s"] == 0.25
    line = convo.usage_line(u)
    assert line == (
        "prompt 120 tokens · reply 64 tokens · 64 tokens/s · first token 0.25 s · "
        "stopped at max tokens: press Continue for more · 2 older messages left out to fit the context"
    )
    more = convo.usage(
        ChatInfo(prompt_tokens=190, output_tokens=10, finish_reason="stop", first_token_at=1.0), 0.5, 2.0, previous=u
    )
    assert more["output_tokens"] == 74 and "continued 1×" in convo.usage_line(more)
    assert "finished" in convo.usage_line(more)


def test_only_answers_go_back_and_continue_is_offered_after_a_length_stop():
    reply = convo.turn("assistant", "The ratio is", model="a")
    reply.update(
        reasoning="Let me think",
        raw="<think>Let me think</think>The ratio is",
        usage={"prompt_tokens": 5, "output_tokens": 8, "finish_reason": "length"},
    )
    conv = [convo.turn("user", "Ratio?"), reply]
    assert convo.engine_messages(conv) == [
        {"role": "user", "content": "Ratio?"},
        {"role": "assistant", "content": "The ratio is"},
    ]
    shown = convo.display(conv)
    assert shown[1] == {
        "role": "assistant",
        "content": "Let me think",
        "metadata": {"title": "Thinking", "status": "done"},
    }
    assert shown[2]["content"].startswith("The ratio is\n\n<sub>prompt 5 tokens · reply 8 tokens")
    assert convo.can_continue(conv) and convo.last_reply(conv) == 1
    assert convo.continue_messages(conv, 1)[-1] == {"role": "assistant", "content": reply["raw"]}
    reply["usage"]["finish_reason"] = "stop"
    assert not convo.can_continue(conv)
    assert not convo.can_continue([convo.turn("user", "hi")])


# ------------------------------------------------------------------ settings, presets, rendering
@pytest.mark.parametrize("value,expected", [(None, None), ("", None), (0, 0), (42.0, 42), (2**31 - 1, 2**31 - 1)])
def test_seed_box_accepts_empty_or_a_whole_number(value, expected):
    assert parse_seed(value) == expected


@pytest.mark.parametrize("value", [-1, 2**31, 1.5, float("nan"), "abc", True])
def test_seed_out_of_range_is_a_clear_message(value):
    with pytest.raises(BadInput, match=r"Seed must be a whole number from 0 to 2,147,483,647"):
        parse_seed(value)


def test_presets_file_has_the_analysts_tasks():
    presets = load_presets(DEFAULT_PRESETS)
    labels = " ".join(presets.labels()).lower()
    for word in ("earnings", "ratio", "risk", "translation"):
        assert word in labels
    assert "table" in presets.by_label("Ratio analysis from statements").system_prompt
    with pytest.raises(BadInput, match="unknown preset 'Astrology'; choose one of: Earnings-call summary"):
        presets.by_label("Astrology")


@pytest.mark.parametrize(
    "doc,match",
    [
        ({"presets": {"a": {"label": "A"}}}, "preset 'a' field 'system_prompt': missing required field"),
        ({"presets": {"a": {"label": "A", "system_prompt": "x", "temp": 1}}}, "preset 'a' field 'temp': unknown key"),
        ({"presets": {"a": {"label": 3, "system_prompt": "x"}}}, "preset 'a' field 'label'"),
        (
            {"presets": {"a": {"label": "A", "system_prompt": "x"}, "b": {"label": "A", "system_prompt": "y"}}},
            "label 'A' is used twice",
        ),
        ({"models": {}}, "top level field 'presets': missing"),
    ],
)
def test_bad_presets_files_name_the_entry_and_field(tmp_path, doc, match):
    path = tmp_path / "presets.yaml"
    path.write_text(json.dumps(doc))
    with pytest.raises(CatalogError, match=match):
        load_presets(path)


def test_latex_only_between_brackets_and_double_dollars_never_single_dollars():
    lefts = {d["left"] for d in LATEX_DELIMITERS}
    assert lefts == {"$$", "\\[", "\\("} and "$" not in lefts


def test_disclaimer_is_on_by_default_configurable_and_empty_turns_it_off():
    from finspace.settings import DISCLAIMER, Settings

    assert Settings.from_env({}).disclaimer == DISCLAIMER and "not investment advice" in DISCLAIMER
    assert Settings.from_env({"FINSPACE_DISCLAIMER": "Internal use only."}).disclaimer == "Internal use only."
    assert Settings.from_env({"FINSPACE_DISCLAIMER": ""}).disclaimer == ""
    with pytest.raises(BadInput, match="FINSPACE_DISCLAIMER is 600 characters"):
        Settings.from_env({"FINSPACE_DISCLAIMER": "x" * 600})


# ------------------------------------------------------------------ conversations in the browser, export
from finspace.ui import saved  # noqa: E402


def _reply(**extra):
    t = convo.turn("assistant", "The ratio is 1.56.", model="qwen-3-8b-fin")
    t.update(
        reasoning="CA / CL",
        raw="<think>CA / CL</think>The ratio is 1.56.",
        usage={"prompt_tokens": 20, "output_tokens": 9, "finish_reason": "stop"},
        sampling={"temperature": 0.6, "top_p": 0.95, "max_tokens": 2048, "seed": 7},
        provenance={
            "model_key": "qwen-3-8b-fin",
            "repo": "DragonLLM/Qwen-Open-Finance-R-8B",
            "revision": None,
            "dtype": "bfloat16",
            "quantization": None,
            "max_model_len": 32768,
            "load_record_id": "1764556800.000-qwen-3-8b-fin",
        },
        **extra,
    )
    return t


def test_a_saved_conversation_comes_back_checked():
    turns = [convo.turn("user", "Current ratio?"), _reply()]
    st, problem = saved.put(saved.empty_store(), saved.check_turns(turns))
    assert problem is None and st["conversations"][st["current"]]["title"] == "Current ratio?"
    back, problem = saved.read_store(json.loads(json.dumps(st)))  # through the browser: JSON
    assert problem is None and back["current"] == st["current"]
    got = back["conversations"][back["current"]]["turns"]
    assert convo.engine_messages(got) == convo.engine_messages(turns)
    assert convo.display(got) == convo.display(saved.check_turns(turns))


BAD_STORES = [
    ("not a store", "no conversation list"),
    ({"conversations": {"a": {"title": "t", "turns": [{"role": "hacker", "content": "x"}]}}}, "unknown role"),
    (
        {"conversations": {"a": {"title": "t", "turns": [{"role": "user", "content": "x" * 300_000}]}}},
        "too large|at most 256,000 characters",
    ),
    ({"conversations": {"a": {"title": "t", "turns": [{"role": "user", "content": "x" * 1_600_000}]}}}, "too large"),
    ({"conversations": {"../a": {"title": "t", "turns": []}}}, "bad id"),
    (
        {
            "conversations": {
                "a": {
                    "title": "t",
                    "turns": [{"role": "assistant", "content": "x", "usage": {"prompt_tokens": "<img>"}}],
                }
            }
        },
        "not a count",
    ),
    ({"conversations": {"a": {"title": "t", "turns": "x"}}}, "list of at most"),
    ({"conversations": {str(i): {"title": "t", "turns": []} for i in range(60)}}, "more than 50"),
]


@pytest.mark.parametrize("raw,match", BAD_STORES)
def test_an_oversized_or_corrupt_browser_store_is_a_clear_message_and_a_fresh_start(raw, match):
    st, problem = saved.read_store(raw)
    assert problem is not None and re.search(match, problem), problem
    assert "started a new one" in problem
    assert list(st["conversations"].values())[0]["turns"] == []  # usable: an empty conversation


@pytest.mark.parametrize("bad", [1e308, -1.0, float("inf"), float("nan"), 10**40, -(10**40), 253_402_300_800])
def test_stored_times_out_of_range_are_cleared_with_a_note_and_export_still_works(bad):
    turns = [{**convo.turn("user", "Current ratio?"), "at": bad}, {**_reply(), "at": bad}]
    raw = {
        "current": "a1",
        "conversations": {
            "a1": {"title": "Ratios", "updated": bad, "turns": turns},
            "b2": {"title": "Fine", "updated": 1_700_000_000, "turns": []},
        },
    }
    st, note = saved.read_store(raw)
    assert note is not None and "out of range" in note and "started a new one" not in note, note
    assert set(st["conversations"]) == {"a1", "b2"} and st["current"] == "a1"
    assert saved.choices(st)  # formats every time (no "timestamp out of range")
    kept = st["conversations"]["a1"]["turns"]
    assert [t["at"] for t in kept] == [None, None]
    doc = saved.export_json("Ratios", saved.check_turns(kept))
    assert [m["at"] for m in doc["messages"]] == [None, None] and saved.export_markdown(doc)


def test_a_stored_conversation_past_the_conversation_bound_is_dropped_by_name():
    big = [{"role": "user", "kind": "turn", "content": "x" * 200_000} for _ in range(7)]  # 1,400,000 characters
    raw = {
        "current": "a1",
        "conversations": {
            "a1": {"title": "Huge", "updated": 1, "turns": big},
            "b2": {"title": "Small", "updated": 2, "turns": []},
        },
    }
    st, note = saved.read_store(raw)
    assert note is not None and "1,000,000" in note and "'Huge'" in note, note
    assert set(st["conversations"]) == {"b2"} and st["current"] == "b2"


def test_exports_keep_the_newest_few_per_client_and_refuse_an_oversized_one(tmp_path):
    from finspace.ui.exports import Exports

    ex = Exports(tmp_path, per_client=3, max_bytes=100_000)
    doc = saved.export_json("Ratios", saved.check_turns([convo.turn("user", "Current ratio?"), _reply()]))
    paths = [ex.write("10.0.0.1", doc, saved.export_markdown(doc)) for _ in range(10)]
    ex.write("10.0.0.2", doc, saved.export_markdown(doc))
    on_disk = sorted(str(p) for p in tmp_path.rglob("*.*"))
    assert len(on_disk) == 2 * 4 and set(paths[-1]) <= set(on_disk) and not set(paths[0]) & set(on_disk)
    big = {**doc, "messages": [{"content": "x" * 200_000}]}
    with pytest.raises(BadInput, match=r"the limit is 0.095\d* MiB per export|the limit is .* MiB per export"):
        ex.write("10.0.0.1", big, "")
    ex.clear()
    assert not any(tmp_path.rglob("*.*"))


def test_the_store_drops_the_oldest_conversations_to_stay_small():
    st = saved.empty_store()
    big = [convo.turn("user", "x" * 60_000) for _ in range(5)]
    for _ in range(8):
        st, problem = saved.put(st, saved.check_turns(big))
        st = {"current": saved.new_id(), "conversations": st["conversations"]}
    assert len(json.dumps(st)) <= saved.MAX_STORE_CHARS and problem is None


def test_export_carries_the_provenance():
    turns = saved.check_turns([convo.turn("user", "Current ratio?"), _reply()])
    doc = saved.export_json("Ratios", turns)
    assert doc["schema"] == "finspace-conversation/1"
    (model,) = doc["models"]
    assert model["repo"] == "DragonLLM/Qwen-Open-Finance-R-8B" and model["load_record_id"].endswith("qwen-3-8b-fin")
    reply = doc["messages"][1]
    assert reply["sampling"]["seed"] == 7 and reply["thinking"] == "CA / CL" and reply["at"].endswith("Z")
    assert all(m["at"] for m in doc["messages"])
    md = saved.export_markdown(doc)
    assert "DragonLLM/Qwen-Open-Finance-R-8B@main, dtype bfloat16" in md and "seed 7" in md
    assert "<summary>Thinking</summary>" in md and "The ratio is 1.56." in md


def test_ledger_records_have_an_id():
    from finspace.ledger_line import normalize

    rec = normalize({"at": 1764556800.0, "model_key": "demo", "outcome": "ok"})
    assert rec["id"] == "1764556800.000-demo"
    assert normalize({**rec, "at": 5.0})["id"] == "1764556800.000-demo"  # an id once given is kept
