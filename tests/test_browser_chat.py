"""The analyst's chat in a real browser (Debian's chromium, Playwright) against `python app.py` and vLLM on CPU.

Model "a" (tiny random Llama) answers for the usage line and Continue: it never writes an end token, so every
reply stops at max tokens, and the usage line's counts are checked against the model's own tokenizer and
chat template. A refresh brings the conversation back; the exported JSON carries the provenance. The Thinking
block and the browser-stored conversations' checks are in test_browser_thinking.py.
Screenshots: test-artifacts/; the README's copies in docs/ with FINSPACE_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from test_browser import chromium_context, open_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.engine, pytest.mark.timeout(900)]

MAX_TOKENS = 32  # model "a"'s max_tokens in server_utils.make_catalog (the shared server's catalogue)
QUESTION = "What is EBITDA?"


@pytest.fixture(scope="module")
def server(shared_tiny_server):
    """conftest's shared server (server_utils.make_catalog: "a" with max_tokens MAX_TOKENS; shared with test_server
    and test_api_bad_input), model "a" ready."""
    shared_tiny_server.ensure_model("a")
    return shared_tiny_server


@pytest.fixture(scope="module")
def page(server):
    with chromium_context(accept_downloads=True) as context:
        yield open_page(context, server.url, "Tiny Llama")


def usage_lines(page) -> list[str]:
    return page.eval_on_selector_all("#chatbot sub", "els => els.map(e => e.innerText)")


def wait_usage(page, count: int, timeout: float = 90_000) -> str:
    page.wait_for_function(f"document.querySelectorAll('#chatbot sub').length >= {count}", timeout=timeout)
    return usage_lines(page)[count - 1]


def send(page, text: str) -> None:
    page.fill("#chat-input textarea", text)
    page.click("#send")


STORE = "localStorage['finspace-conversations'] || ''"


def settled_store(page, quiet_s: float = 1.0) -> str:
    """The browser's store once no save has changed it for ``quiet_s`` (a save in flight has landed)."""
    value, since = page.evaluate(STORE), time.monotonic()
    while time.monotonic() - since < quiet_s:
        page.wait_for_timeout(200)
        now = page.evaluate(STORE)
        if now != value:
            value, since = now, time.monotonic()
    return value


def wait_saved(page, previous: str) -> None:
    """The browser's store changed from ``previous``: the save runs as its own event after the reply's last
    piece, one round trip later, so a reload right after the usage line can still come before it."""
    page.wait_for_function(f"({STORE}) !== {json.dumps(previous)}", timeout=30_000)


def prompt_tokens(model_dir, messages) -> int:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir / "tiny-llama"))
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tok(text, add_special_tokens=False)["input_ids"])


def test_usage_line_counts_are_the_engines(page, model_dir):
    send(page, QUESTION)
    line = wait_usage(page, 1)
    expected = prompt_tokens(
        model_dir, [{"role": "system", "content": "You are a test model."}, {"role": "user", "content": QUESTION}]
    )
    assert f"prompt {expected} tokens" in line, line
    assert f"reply {MAX_TOKENS} tokens" in line, line
    assert re.search(r"[\d.]+ tokens/s", line) and re.search(r"first token \d+\.\d\d s", line), line
    assert "stopped at max tokens" in line, line
    assert page.is_visible("#continue")
    assert "not investment advice" in page.inner_text("#disclaimer")
    shot(page, "chat-1-usage", docs_name="chat-usage.png")


def test_continue_extends_the_same_reply(page):
    bubbles = page.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.length")
    before = page.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.map(e => e.innerText)")[-1]
    page.click("#continue")
    page.wait_for_function(
        "[...document.querySelectorAll('#chatbot sub')].some(e => e.innerText.includes('continued 1'))", timeout=90_000
    )
    line = usage_lines(page)[-1]
    assert f"reply {2 * MAX_TOKENS} tokens" in line, line
    texts = page.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.map(e => e.innerText)")
    assert len(texts) == bubbles  # the same reply grew; no new bubble
    head = before.split("\n")[0].strip()
    assert texts[-1].startswith(head) and len(texts[-1].split("\n")[0]) > len(head)
    shot(page, "chat-2-continued", docs_name="chat-continue.png")


def test_a_seed_out_of_range_is_a_clear_message_and_the_page_still_works(page):
    page.click("#settings button, #settings .label-wrap")
    page.fill("#seed input", "99999999999")
    send(page, "And the margin?")
    page.wait_for_selector("text=Seed must be a whole number", timeout=30_000)
    shot(page, "chat-3-bad-seed")
    page.fill("#seed input", "7")
    page.fill("#chat-input textarea", "And the margin?")
    stored = settled_store(page)
    page.click("#send")
    wait_usage(page, 2)
    wait_saved(page, stored)
    assert not page.page_errors, page.page_errors


def test_a_refresh_brings_back_the_conversation(page):
    before = page.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.map(e => e.innerText)")
    assert before
    page.reload(wait_until="domcontentloaded")
    page.wait_for_selector("#chat-input textarea", timeout=60_000)
    page.wait_for_function(
        f"document.querySelectorAll('#chatbot [data-testid=\"bot\"]').length === {len(before)}", timeout=30_000
    )
    after = page.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.map(e => e.innerText)")
    assert after == before
    page.click("#conversations button, #conversations .label-wrap")
    assert QUESTION in page.locator("#chat-title input, #chat-title textarea").first.input_value()
    page.locator("#conversations").scroll_into_view_if_needed()
    shot(page, "chat-6-restored", docs_name="chat-conversations.png")


def test_export_json_holds_the_provenance(page):
    page.click("#export")
    link = page.locator('#export-files tr:has-text(".json") a').first
    link.wait_for(timeout=30_000)
    with page.expect_download() as dl:
        link.click()
    doc = json.loads(open(dl.value.path()).read())
    (model,) = doc["models"]
    assert model["model_key"] == "a" and model["dtype"] == "float32" and model["max_model_len"] == 512
    assert {"repo", "revision", "quantization", "load_record_id"} <= set(model)
    assert model["load_record_id"] and model["load_record_id"].endswith("-a")
    replies = [m for m in doc["messages"] if m["role"] == "assistant" and m["kind"] == "turn"]
    assert replies and all(r["sampling"]["max_tokens"] == MAX_TOKENS and "seed" in r["sampling"] for r in replies)
    assert replies[-1]["sampling"]["seed"] == 7
    assert all(m["at"] for m in doc["messages"])
    assert replies[0]["usage"]["output_tokens"] == 2 * MAX_TOKENS  # the continued reply
    page.locator("#export-files").scroll_into_view_if_needed()
    shot(page, "chat-7-exported", docs_name="chat-export.png")
