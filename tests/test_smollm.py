"""What a real model says: SmolLM2-135M-Instruct (the default without a GPU), greedy, through the real engine
and the real app. Each check is also run on the random-weight `demo` model, where it must fail: these tests
pass only with a model that answers. Each failure shows what the model said.

The checkpoint is converted once (support.smollm, the session fixture smollm_models) and reused by later runs.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from finspace.models.catalog import load_catalog
from finspace.engine import ChatInfo, ChatSettings, Engine
from finspace.host.gpu import MemoryMonitor
from support.catalog import demo_entry, write_catalog
from support.filings import filing
from support.smollm import KEY, catalog_entry, chatml_problem, english_problem, eos_problem, figure_problem

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

QUESTIONS = ["What is EBITDA? Answer in one sentence.", "What does free cash flow measure? Answer briefly."]
SYSTEM = "You are a careful analyst who answers about company accounts in one sentence."
MAX_TOKENS = 200
SENTENCE = "Revenue was $12.4 billion in Q3 2024, up 8% year over year."
SCHEMA = {
    "type": "object",
    "properties": {"revenue_usd_billion": {"type": "number"}},
    "required": ["revenue_usd_billion"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory, smollm_models):
    root = tmp_path_factory.mktemp("smollm-catalog")
    models = {
        KEY: catalog_entry(max_tokens=MAX_TOKENS),
        "demo": demo_entry(root / "demo", "bench-llama", label="Demo", max_model_len=1024, max_tokens=MAX_TOKENS),
    }
    return load_catalog(write_catalog(root, models, default=KEY))


@pytest.fixture(scope="module")
async def engine(catalog, smollm_models, tmp_path_factory):
    log = tmp_path_factory.mktemp("smollm-prompts") / "prompts.jsonl"
    eng = Engine(catalog, MemoryMonitor(nvml=None), models_dir=smollm_models, test_prompt_log=str(log))
    eng.prompt_log = log
    yield eng
    await eng.close()


async def on(engine, key):
    if engine.health().model_key != key or engine.health().state != "ready":
        await engine.load(key)
    return engine


async def ask(engine, question, system=None) -> tuple[str, ChatInfo]:
    info = ChatInfo()
    settings = ChatSettings(temperature=0.0, max_tokens=MAX_TOKENS, system_prompt=system)
    text = "".join([d async for d in engine.chat([{"role": "user", "content": question}], settings, info)])
    return text, info


async def extract(engine) -> str:
    """Guided JSON (vLLM structured outputs) through the running engine: the figure of SENTENCE."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    messages = [{"role": "user", "content": f"{SENTENCE} Extract the revenue in billions of dollars as JSON."}]
    ids = engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = engine.tokenizer.encode(ids, add_special_tokens=False)
    params = SamplingParams(
        temperature=0.0, max_tokens=MAX_TOKENS, structured_outputs=StructuredOutputsParams(json=SCHEMA)
    )
    last = None
    async for out in engine._llm.generate({"prompt_token_ids": ids}, params, f"extract-{uuid.uuid4().hex}"):
        last = out
    return last.outputs[0].text


def last_prompt(engine) -> str:
    return json.loads(engine.prompt_log.read_text().splitlines()[-1])["prompt"]


# ------------------------------------------------------------------ the real model
@pytest.mark.parametrize("question", QUESTIONS)
async def test_a_finance_question_gets_common_english_words(engine, question):
    text, _ = await ask(await on(engine, KEY), question)
    assert english_problem(text) is None, f"{english_problem(text)}; the model said: {text!r}"


async def test_a_reply_ends_at_end_of_sequence_before_max_tokens(engine):
    text, info = await ask(await on(engine, KEY), QUESTIONS[0])
    problem = eos_problem(info.finish_reason, info.output_tokens, MAX_TOKENS)
    assert problem is None, f"{problem}; the model said: {text!r}"


async def test_a_system_prompt_goes_through_the_models_chatml_template(engine):
    text, _ = await ask(await on(engine, KEY), QUESTIONS[0], system=SYSTEM)
    prompt = last_prompt(engine)
    assert chatml_problem(prompt, SYSTEM) is None, f"{chatml_problem(prompt, SYSTEM)}: {prompt!r}"
    assert english_problem(text) is None, f"{english_problem(text)}; the model said: {text!r}"


async def test_guided_json_extracts_the_figure(engine):
    text = await extract(await on(engine, KEY))
    problem = figure_problem(text, "revenue_usd_billion", 12.4)
    assert problem is None, f"{problem}; the model said: {text!r}"


# ------------------------------------------------------------------ a filing on the default (calculator on)
APPLE = "aapl-10-k-2024-11-01.html"
APPLE_QUESTION = "What were Apple's total net sales in fiscal 2024, and on which page?"
DEFAULT_MAX_TOKENS = 512  # make run's SmolLM2 (models.yaml), which the module's catalogue lowers


async def test_a_question_about_a_real_10k_is_answered_with_the_calculator_on(engine, catalog, tmp_path):
    """The newcomer's first question (issue 39): Apple's FY2024 10-K attached, the page's default calculator on,
    SmolLM2's 2,048-token context and 512-token reply. The document's budget counts the calculator's spec (and
    a round of calls) with the rest of the prompt, so the answer comes instead of "your last message is 1,770
    tokens ... leaves room for 1,536" (what the budget without the tools gave)."""
    from finspace.host.gpu import MemoryMonitor as Monitor
    from finspace.service import Service
    from finspace.settings import Settings

    svc = Service(await on(engine, KEY), catalog, Monitor(nvml=None), settings=Settings(gradio_temp_dir=str(tmp_path)))
    assert svc.chat_tools("auto"), "SmolLM2 (tool_parser hermes) is offered the calculator"
    att = await svc.documents.attach_bytes(APPLE, filing(APPLE).read_bytes(), None)
    messages = [{"role": "user", "content": APPLE_QUESTION}]
    settings = ChatSettings(temperature=0.0, max_tokens=DEFAULT_MAX_TOKENS)
    settings, summary = await svc.with_document(att, messages, settings, calculator="auto")
    info = ChatInfo()
    answer = await first_words(svc.chat_parts(messages, settings, info, calculator="auto"))
    assert answer and info.output_tokens > 0, (answer, info)
    assert info.prompt_tokens + DEFAULT_MAX_TOKENS <= engine.max_model_len, info.prompt_tokens
    assert "passages" in summary and "aapl-10-k-2024-11-01 p. " in summary, summary


async def first_words(parts, chars: int = 60) -> str:
    """The answer's first ``chars`` characters (the stream is closed there: the test needs an answer, not all of
    it, and 512 tokens on two busy cores take minutes)."""
    import contextlib

    answer = ""
    async with contextlib.aclosing(parts) as stream:
        async for _thinking, delta in stream:
            answer += delta
            if len(answer.strip()) >= chars:
                break
    return answer.strip()


NVIDIA = "nvda-10-k-2025-02-26.html"
BOTH_QUESTION = "Compare Apple's and NVIDIA's total revenue in fiscal 2024."


async def test_two_filings_in_one_chat_give_passages_from_both_named_by_id_and_page(engine, catalog, tmp_path):
    """Apple's and NVIDIA's 10-Ks in one conversation (issue 39): a question naming both companies gets passages
    from each, labelled with the document's id and page, and the usage phrase names the pages given; the model
    answers from them (the calculator on, as the page's default)."""
    from finspace.documents import desk as docs
    from finspace.host.gpu import MemoryMonitor as Monitor
    from finspace.service import Service
    from finspace.settings import Settings

    svc = Service(await on(engine, KEY), catalog, Monitor(nvml=None), settings=Settings(gradio_temp_dir=str(tmp_path)))
    atts: list = []
    for name in (APPLE, NVIDIA):
        atts.append(docs.with_id(await svc.documents.attach_bytes(name, filing(name).read_bytes(), None), atts))
    assert [a.ident for a in atts] == ["aapl-10-k-2024-11-01", "nvda-10-k-2025-02-26"]
    messages = [{"role": "user", "content": BOTH_QUESTION}]
    settings = ChatSettings(temperature=0.0, max_tokens=DEFAULT_MAX_TOKENS)
    settings, summary = await svc.with_document(atts, messages, settings, calculator="auto")
    for ident in ("aapl-10-k-2024-11-01", "nvda-10-k-2025-02-26"):
        assert f"[{ident}, page " in settings.document, f"no passage of {ident}: {settings.document[:2000]}"
        assert f"{ident} p. " in summary, summary  # "aapl-10-k-2024-11-01 p. 26, 31; nvda-... p. 41"
    info = ChatInfo()
    answer = await first_words(svc.chat_parts(messages, settings, info, calculator="auto"))
    assert answer and info.prompt_tokens + DEFAULT_MAX_TOKENS <= engine.max_model_len, (answer, info.prompt_tokens)


async def test_a_forced_first_round_searches_the_filing_and_the_result_goes_into_the_next_round(
    engine, catalog, tmp_path
):
    """The filing tools on the real engine (issue 39): SmolLM2 with "always" (the first round is a call, through
    structured outputs) and Apple's 10-K attached calls ``search``; its result (bounded) is in the next round's
    prompt, and the model answers."""
    from finspace.documents import desk as docs
    from finspace.host.gpu import MemoryMonitor as Monitor
    from finspace.service import Service
    from finspace.settings import Settings

    svc = Service(await on(engine, KEY), catalog, Monitor(nvml=None), settings=Settings(gradio_temp_dir=str(tmp_path)))
    att = docs.with_id(await svc.documents.attach_bytes(APPLE, filing(APPLE).read_bytes(), None), [])
    messages = [{"role": "user", "content": APPLE_QUESTION}]
    settings = ChatSettings(temperature=0.0, max_tokens=DEFAULT_MAX_TOKENS)
    settings, _summary = await svc.with_document([att], messages, settings, calculator="always")
    assert "the documents' ids: aapl-10-k-2024-11-01" in settings.document
    info = ChatInfo()
    answer = await first_words(svc.chat_parts(messages, settings, info, calculator="always", documents=[att]), 20)
    assert info.tool_steps, (answer, info.notes, info.text[:600])
    step = info.tool_steps[0]
    assert step.name == "search" and step.ok and "[aapl-10-k-2024-11-01 page" in step.result, step
    prompt = last_prompt(engine)
    assert "<tool_response>\nsearch '" in prompt and step.result[:200] in prompt, prompt[-1500:]
    assert answer or len(info.tool_steps) > 1, (answer, info.tool_steps)


# ------------------------------------------------------------------ the same checks on random weights
async def test_every_check_fails_for_the_random_weight_demo(engine):
    """The checks above can fail: on `demo` (random weights) each one does."""
    demo = await on(engine, "demo")
    said = {}
    for question in QUESTIONS:
        said[question], _ = await ask(demo, question)
        assert english_problem(said[question]) is not None, f"demo passed the English check: {said[question]!r}"
    text, info = await ask(demo, QUESTIONS[0], system=SYSTEM)
    assert eos_problem(info.finish_reason, info.output_tokens, MAX_TOKENS) is not None, (info, text)
    assert chatml_problem(last_prompt(demo), SYSTEM) is not None
    text = await extract(demo)
    assert figure_problem(text, "revenue_usd_billion", 12.4) is not None, text


# ------------------------------------------------------------------ the real app over HTTP
def test_the_app_serves_a_real_english_answer_over_http(shared_smollm_server):
    """`python app.py` with smollm2-135m as its default (conftest's shared server): /v1/chat/completions answers
    in English and stops."""
    srv = shared_smollm_server
    srv.ensure_model(KEY)
    r = httpx.post(
        srv.url + "/v1/chat/completions",
        timeout=120,
        headers=srv.auth(),
        json={
            "model": KEY,
            "messages": [{"role": "user", "content": QUESTIONS[0]}],
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
        },
    )
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    text = choice["message"]["content"]
    assert english_problem(text) is None, f"{english_problem(text)}; the model said: {text!r}"
    assert choice["finish_reason"] == "stop", f"finish_reason {choice['finish_reason']}; said: {text!r}"
