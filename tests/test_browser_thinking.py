"""The Thinking block and the conversations kept in the browser, in a real browser against `python app.py`.

Model "b" is the tiny random Qwen 3 with `reasoning: qwen3`. A random model never writes <think>, so this server
is started with FINSPACE_TEST_REPLAY (TEST-ONLY, off by default): b streams the recorded Qwen 3 reply
tests/data/qwen3-ratio.json through the real path (the engine's split by vLLM's qwen3 reasoning parser, the
coalescing, the page); the prompt is still templated and counted by the engine. The reply's answer holds a
table, LaTeX between \\( \\) and "$5 and $10", so the rendering is checked on it too.
Then a corrupt and an oversized conversation are planted in localStorage, encrypted as Gradio's BrowserState
does: each is a clear message and the page still answers.
"""

from __future__ import annotations

import json

import pytest

from helpers import REPO, demo_entry, write_catalog
from server_utils import Server
from test_browser import SHOTS, chromium_context, open_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.engine, pytest.mark.timeout(900)]

REPLAY = REPO / "tests" / "data" / "qwen3-ratio.json"


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("browser-thinking")
    b = demo_entry(model_dir / "tiny-qwen3", "tiny-qwen3", label="Tiny Qwen3", max_tokens=400, max_model_len=1024)
    b["reasoning"] = "qwen3"
    srv = Server(
        root, write_catalog(root / "catalog", {"b": b}, default="b"), env={"FINSPACE_TEST_REPLAY": str(REPLAY)}
    )
    try:
        srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser(server):
    with chromium_context() as context:
        yield context


@pytest.fixture(scope="module")
def page(browser, server):
    return open_page(browser, server.url, "Tiny Qwen3")


def send(page, text: str) -> None:
    page.fill("#chat-input textarea", text)
    page.click("#send")


def test_thinking_streams_into_a_collapsed_block_above_the_answer(page):
    page.wait_for_function("!document.querySelector('#chat-input textarea').disabled", timeout=30_000)
    send(page, "Current ratio from: current assets 1,250, current liabilities 800?")
    page.wait_for_selector("#chatbot >> text=Thinking", timeout=90_000)
    page.wait_for_function("document.querySelectorAll('#chatbot sub').length >= 1", timeout=90_000)
    line = page.inner_text("#chatbot sub")
    assert "finished" in line, line
    html = page.inner_html("#chatbot")
    (SHOTS / "chat-thinking.html").write_text(html)
    box = page.locator("#chatbot")
    text = box.inner_text()
    # the Thinking block comes first, collapsed: its title shows, its text does not
    assert text.index("Thinking") < text.index("The current ratio is")
    assert not page.get_by_text("Round to 1.56").first.is_visible()
    # rendering: a Markdown table, LaTeX between \( \), and "$5 and $10" left as text
    assert box.locator("table").count() >= 1
    assert box.locator(".katex").count() >= 1
    assert "$5 and $10" in text
    shot(page, "chat-4-thinking", docs_name="chat-thinking.png")
    page.get_by_text("Thinking").first.click()
    page.wait_for_function("document.querySelector('#chatbot').innerText.includes('Round to 1.56')", timeout=10_000)
    shot(page, "chat-5-thinking-open")
    assert not page.page_errors, page.page_errors


def _encrypt_like_browser_state(value, secret: str) -> str:
    """What Gradio's BrowserState writes to localStorage: CryptoJS AES with the passphrase sha256(secret)."""
    import base64
    import hashlib
    import os as _os

    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    passphrase = hashlib.sha256(secret.encode()).hexdigest().encode()
    salt = _os.urandom(8)
    derived, block = b"", b""
    while len(derived) < 48:  # OpenSSL's EVP_BytesToKey with MD5, as CryptoJS derives key and iv
        block = hashlib.md5(block + passphrase + salt).digest()
        derived += block
    padder = padding.PKCS7(128).padder()
    data = padder.update(json.dumps(value).encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(derived[:32]), modes.CBC(derived[32:48])).encryptor()
    ct = enc.update(data) + enc.finalize()
    return base64.b64encode(_os.urandom(16)).decode() + ":" + base64.b64encode(b"Salted__" + salt + ct).decode()


@pytest.mark.parametrize(
    "store,message",
    [
        (
            {
                "current": "x",
                "conversations": {
                    "x": {
                        "title": "t",
                        "turns": [
                            {
                                "role": "assistant",
                                "content": "hi",
                                "usage": {"prompt_tokens": "<img src=x onerror=alert(1)>"},
                            }
                        ],
                    }
                },
            },
            "could not be read",
        ),
        (
            {
                "current": "x",
                "conversations": {"x": {"title": "t", "turns": [{"role": "user", "content": "x" * 1_600_000}]}},
            },
            "too large",
        ),
    ],
)
def test_a_corrupt_or_oversized_saved_conversation_is_a_clear_message(browser, server, store, message):
    from finspace.ui.conversations import STORAGE_KEY, STORAGE_SECRET

    # a fresh context whose localStorage holds the planted store before any of the page's scripts run
    ctx = browser.browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_init_script(
        f"localStorage.setItem({json.dumps(STORAGE_KEY)}, "
        f"{json.dumps(_encrypt_like_browser_state(store, STORAGE_SECRET))})"
    )
    pg = ctx.new_page()
    pg.goto(server.url + "/", wait_until="domcontentloaded")
    try:
        _bad_store_page(pg, message)
    finally:
        ctx.close()


def _bad_store_page(pg, message):
    pg.wait_for_selector(f"text=/{message}/", timeout=60_000)
    shot(pg, f"chat-8-bad-store-{message.split()[0]}")
    assert pg.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.length") == 0
    assert not pg.is_visible("img[src=x]")
    pg.wait_for_function("!document.querySelector('#chat-input textarea').disabled", timeout=60_000)
    pg.fill("#chat-input textarea", "Still there?")
    pg.click("#send")
    pg.wait_for_function("document.querySelectorAll('#chatbot sub').length >= 1", timeout=120_000)
