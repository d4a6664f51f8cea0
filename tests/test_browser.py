"""The page in a real browser: Debian's chromium driven by Playwright against `python app.py` on localhost.

Opens the page, sends a message and watches the reply grow, switches model and
sees the progress then the new label (and the switch marked in the chat), and
sees the memory panel change between two timer ticks. Screenshots go to
test-artifacts/ (gitignored). Skipped only when /usr/bin/chromium is absent
(`make browser` installs it).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import pytest

from helpers import REPO, demo_entry, write_catalog
from server_utils import ADMIN_TOKEN, Server

pytestmark = [pytest.mark.browser, pytest.mark.engine, pytest.mark.timeout(600)]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = REPO / "test-artifacts"

if not CHROMIUM.exists():
    pytest.skip(
        "no /usr/bin/chromium: install it with `make browser` (apt-get install chromium)", allow_module_level=True
    )


# A reply long and paced enough to be seen growing on a slow machine: Gradio hands the page every update the
# server sent, but a browser that falls behind reads them in one network chunk and renders them at once (a
# 300-token reply written in under a second once arrived as one update of 1,777 characters). So the reply
# takes seconds (1,200 tokens) and its updates go out at most every 250 ms: a frame's worth of slack, many times.
REPLY_TOKENS = 1200
STREAM_INTERVAL_MS = 250


def browser_catalog(folder: Path, model_dir: Path) -> Path:
    models = {
        "a": demo_entry(
            model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama", max_model_len=1536, max_tokens=REPLY_TOKENS
        ),
        "b": demo_entry(model_dir / "tiny-qwen3", "tiny-qwen3", label="Tiny Qwen3", max_tokens=300),
    }
    return write_catalog(folder, models, default="a")


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("browser")
    srv = Server(
        root,
        browser_catalog(root / "catalog", model_dir),
        env={"FINSPACE_CPU_KV_CACHE_MIB": "6", "FINSPACE_STREAM_INTERVAL_MS": str(STREAM_INTERVAL_MS)},
    )
    try:
        srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


@contextlib.contextmanager
def chromium_context(**options):
    """Debian's chromium under Playwright: one browser context (1400x1000), closed afterwards."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser.new_context(viewport={"width": 1400, "height": 1000}, **options)
        finally:
            browser.close()


def open_page(context, url: str, model_label: str | None = None):
    """The app's page, opened and ready (its input, and the model's label when given); ``page_errors`` collects
    the page's JavaScript errors."""
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(url + "/", wait_until="domcontentloaded")
    pg.wait_for_selector("#chat-input textarea", timeout=60_000)
    if model_label:
        pg.wait_for_function(
            f"(document.querySelector('#current-model') || {{innerText: ''}}).innerText.includes({model_label!r})",
            timeout=60_000,
        )  # rendered after the input, at times
    pg.page_errors = errors
    return pg


@pytest.fixture(scope="module")
def page(server):
    with chromium_context() as context:  # the model's label is rendered after the input, at times (a busy host)
        yield open_page(context, server.url, "Tiny Llama")


DOCS = REPO / "docs"


def shot(page, name: str, docs_name: str | None = None) -> None:
    """A screenshot in test-artifacts/; with FINSPACE_UPDATE_SCREENSHOTS=1 also the README's copy in docs/."""
    page.screenshot(path=str(SHOTS / f"browser-{name}.png"), full_page=True)
    if docs_name and os.environ.get("FINSPACE_UPDATE_SCREENSHOTS") == "1":
        page.screenshot(path=str(DOCS / docs_name), full_page=False)


def bot_texts(page) -> list[str]:
    return page.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.map(e => e.innerText)")


WATCH_REPLY = """() => {
  window.__lengths = []; window.__times = [];
  const box = document.querySelector('#chatbot');
  const read = () => { const bots = box.querySelectorAll('[data-testid="bot"]');
                       const last = bots[bots.length - 1]; return last ? last.innerText.length : 0; };
  new MutationObserver(() => { const n = read(); const l = window.__lengths;
                               if (!l.length || l[l.length - 1] !== n) { l.push(n); window.__times.push(performance.now()); } })
    .observe(box, {subtree: true, childList: true, characterData: true});
}"""


def test_page_shows_banner_model_and_memory(page):
    page.wait_for_function("document.querySelector('#current-model').innerText.includes('Tiny Llama')", timeout=30_000)
    banner = page.inner_text("#banner")
    assert "No NVIDIA GPU" in banner and "Tiny Llama" in banner
    assert "host RAM" in page.inner_text("#memory-readings")
    assert page.is_visible("#admin-token")
    shot(page, "1-opened")


def watch_one_reply(page, start: str) -> tuple[list[int], list[float]]:
    """The DOM's lengths of the last reply (and when each was rendered) from clicking ``start`` until it stops."""
    page.evaluate(WATCH_REPLY)
    page.click(start)
    page.wait_for_function("window.__lengths.some(n => n > 0)", timeout=30_000)
    last, stable_since = -1, time.monotonic()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the reply stops growing
        texts = bot_texts(page)
        n = len(texts[-1]) if texts else 0
        if n != last:
            last, stable_since = n, time.monotonic()
        elif n > 0 and time.monotonic() - stable_since > 2.0:
            break
        time.sleep(0.1)
    lengths, times = page.evaluate("window.__lengths"), page.evaluate("window.__times")
    return [n for n in lengths if n > 0], [t for n, t in zip(lengths, times) if n > 0]


def test_send_a_message_and_see_the_reply_stream(page):
    """The reply is rendered in several growing steps over time. A browser starved of CPU by the rest of a full
    run once rendered a whole reply in two (it read every message in one chunk): then the same reply is generated
    again (Regenerate) and watched once more; one of the two must stream, as a reply always did when alone."""
    page.fill("#chat-input textarea", "What is free cash flow?")
    attempts = [watch_one_reply(page, "#send")]
    shot(page, "2-streaming")
    if len(set(attempts[0][0])) < 3:
        attempts.append(watch_one_reply(page, "#regenerate"))
    for growing, shown in attempts:
        print(
            f"the reply grew in {len(set(growing))} steps over {(shown[-1] - shown[0]) / 1000:.1f} s "
            f"to {growing[-1]:,} characters"
        )
    growing, shown = max(attempts, key=lambda a: len(set(a[0])))
    assert len(set(growing)) >= 3, f"the reply did not grow in steps: {attempts}"
    assert growing == sorted(growing), growing
    assert shown[-1] - shown[0] >= STREAM_INTERVAL_MS, "the steps were not rendered over time"
    assert page.input_value("#chat-input textarea") == ""  # the input was cleared
    shot(page, "3-replied")  # the README's main screenshot shows the real small model: test_browser_smollm.py


def test_switch_model_shows_progress_then_the_new_label(page):
    page.click("#model-picker input")
    page.click('li[data-testid="dropdown-option"]:has-text("Tiny Qwen3")')
    page.fill("#admin-token input", ADMIN_TOKEN)
    page.click("#load-model")
    # the engine's stages show as a progress bar (stage: message) over the load status
    page.wait_for_function(
        "/(plan|fetch|stop|release|start|warmup):/.test(document.querySelector('#load-status').innerText)",
        timeout=60_000,
    )
    status = page.inner_text("#load-status")
    shot(page, "4-loading")
    assert re.search(r"(plan|fetch|stop|release|start|warmup):", status), status
    # chat is paused with a notice while the switch runs
    page.wait_for_function("document.querySelector('#chat-input textarea').disabled", timeout=10_000)
    assert "paused" in page.inner_text("#chat-notice")
    page.wait_for_function(
        "document.querySelector('#current-model').innerText.includes('Serving Tiny Qwen3')", timeout=420_000
    )
    page.wait_for_function("!document.querySelector('#chat-input textarea').disabled", timeout=30_000)
    assert "is ready" in page.inner_text("#load-status")
    assert "Tiny Qwen3" in page.inner_text("#banner")
    shot(page, "5-switched")


def test_chat_after_a_switch_is_marked(page):
    page.fill("#chat-input textarea", "And now?")
    page.click("#send")
    page.wait_for_function(
        "document.querySelector('#chatbot').innerText.includes('switched to Tiny Qwen3')", timeout=30_000
    )
    page.wait_for_function("document.querySelectorAll('#chatbot [data-testid=\"bot\"]').length >= 2", timeout=60_000)
    shot(page, "6-marked")


def test_memory_panel_updates_between_ticks(page):
    stamp = re.compile(r"sampled (\d\d:\d\d:\d\d)")
    first = page.inner_text("#memory-readings")
    assert stamp.search(first), first
    # a later timer tick brings a new reading: the sample time (and usually the figures) change
    page.wait_for_function(
        """prev => { const m = /sampled (\\d\\d:\\d\\d:\\d\\d)/.exec(document.querySelector('#memory-readings').innerText);
                    return m && m[1] !== prev; }""",
        arg=stamp.search(first).group(1),
        timeout=15_000,
    )
    second = page.inner_text("#memory-readings")
    assert second != first
    assert page.locator("#memory-plot").is_visible() and page.locator("#breakdown-plot").is_visible()
    shot(page, "7-memory")
    assert not page.page_errors, page.page_errors
