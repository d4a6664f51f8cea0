"""The chat's calculator in a real browser (Debian's chromium, Playwright) against `python app.py` and vLLM on CPU.

Model "a" is the tiny random Llama with ``tool_parser: hermes``. Settings > Calculator "Always first" forces
the reply's first round to be a ``calculate`` call (structured outputs: a named tool_choice), so even a random
model calls it: the call and its result show as a collapsed step above the answer, the usage line counts it,
the result goes back to the model (the engine's prompt log shows it in the second round's prompt), and the
exported JSON holds the step. The rounds' logic on scripted replies: test_chat_calculator.py.
"""

from __future__ import annotations

import json

import pytest

from helpers import demo_entry, write_catalog
from server_utils import Server
from test_browser import chromium_context, open_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.engine, pytest.mark.timeout(2400)]

QUESTION = "What is 15% of 2,400?"


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("browser-calculator")
    entry = {
        **demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama", max_model_len=2048, max_tokens=256),
        "tool_parser": "hermes",
    }
    catalog = write_catalog(root / "catalog", {"a": entry}, default="a")
    srv = Server(
        root, catalog, env={"FINSPACE_TEST_PROMPT_LOG": str(root / "prompts.jsonl"), "FINSPACE_CPU_KV_CACHE_MIB": "16"}
    )  # 2,048 tokens of the tiny llama: 4 MiB
    try:
        srv.wait(ready=True, timeout=1500)  # a busy 2-core machine: the first load took over 400 s
        srv.prompts = root / "prompts.jsonl"
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def page(server):
    with chromium_context(accept_downloads=True) as context:
        yield open_page(context, server.url, "Tiny Llama")


def test_a_forced_call_is_a_step_above_the_answer_its_result_goes_back_and_the_export_holds_it(page, server):
    page.click("#settings button, #settings .label-wrap")
    page.locator("#calculator").get_by_text("Always first").click()
    page.fill("#chat-input textarea", QUESTION)
    page.click("#send")
    page.wait_for_function("document.querySelectorAll('#chatbot sub').length >= 1", timeout=600_000)
    line = page.eval_on_selector_all("#chatbot sub", "els => els.map(e => e.innerText)")[-1]
    assert "calculator call" in line, line
    text = page.inner_text("#chatbot")
    assert "🧮 calculate" in text and text.index("🧮 calculate") < text.index(line.split(" · ")[0])
    shot(page, "chat-8-calculator")

    page.click("#conversations button, #conversations .label-wrap")  # the export is in Conversations
    page.click("#export")
    link = page.locator('#export-files tr:has-text(".json") a').first
    link.wait_for(timeout=60_000)
    with page.expect_download() as dl:
        link.click()
    doc = json.loads(open(dl.value.path()).read())
    reply = [m for m in doc["messages"] if m["role"] == "assistant" and m["kind"] == "turn"][-1]
    first = reply["tools"][0]
    assert first["name"] == "calculate" and "expression" in json.loads(first["arguments"]), first
    assert reply["usage"]["tool_calls"] == len(reply["tools"])

    prompts = [json.loads(x)["prompt"] for x in server.prompts.read_text().splitlines()]
    assert len(prompts) >= 2 and "<tools>" in prompts[0]
    assert f"<tool_response>\n{first['result']}\n</tool_response>" in prompts[1]  # the result went back
    print(f"the random model asked for {first['arguments']} -> {first['result']}")
