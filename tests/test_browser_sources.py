"""An answer's figure marks and its Sources panel in a real browser (Debian's chromium, Playwright), on the real
engine: SmolLM2 (greedy, conftest's shared server) with Apple's FY2024 10-K attached in the chat box.

SmolLM2 does not cite pages on its own, but greedily (its tools off) it repeats a sentence it is asked to repeat: the answer
states two figures cited to page 31, the income statement's page: $391,035 million (the page prints it: ✓) and
$100,295 million (the page prints $93,736 in that row: ≠). The page shows each figure's mark after it (the check,
finspace.grounding.check, runs on the reply as the model wrote it), and under the answer the collapsed
"📑 Sources" message; opened, it shows page 31's text with the row that prints the figure marked. Takes the
README's docs/chat-sources.png (FINSPACE_UPDATE_SCREENSHOTS=1). The checks themselves on real pages:
test_grounding_check.py; the display's words: test_chat_checks.py.
"""

from __future__ import annotations

import os

import pytest

from support.filings import filing
from support.smollm import KEY
from test_browser import DOCS, bot_texts, chromium_context, open_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.engine, pytest.mark.timeout(600)]

APPLE = "aapl-10-k-2024-11-01"
SENTENCE = "On page 31, total net sales were $391,035 million and net income was $100,295 million."
# the README's picture: the conversation grown to its content (the page's box scrolls at 520 px), its top 1,290 px (to the Net income row)
GROW = """() => { window.scrollTo(0, 0); for (const e of [document.querySelector('#chatbot'),
  ...document.querySelectorAll('#chatbot *')]) { const s = getComputedStyle(e);
  if (e.id === 'chatbot' || ['auto', 'scroll'].includes(s.overflowY)) { e.style.maxHeight = 'none'; e.style.height = 'auto'; } } }"""


def readme_shot(page) -> None:
    """docs/chat-sources.png, with FINSPACE_UPDATE_SCREENSHOTS=1: the answer and the Sources panel open."""
    if os.environ.get("FINSPACE_UPDATE_SCREENSHOTS") != "1":
        return
    page.evaluate(GROW)
    page.wait_for_timeout(500)
    box = page.locator("#chatbot").bounding_box()
    page.screenshot(
        path=str(DOCS / "chat-sources.png"),
        full_page=True,
        clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": min(box["height"], 1290)},
    )


@pytest.fixture(scope="module")
def server(shared_smollm_server):
    """conftest's shared SmolLM2 server (greedy; shared with test_browser_smollm, test_smollm, ...)."""
    shared_smollm_server.ensure_model(KEY)
    return shared_smollm_server


def test_the_answers_figures_carry_their_marks_and_the_sources_panel_shows_the_cited_page(server):
    apple = filing(f"{APPLE}.html")
    with chromium_context() as context:
        page = open_page(context, server.url, "SmolLM2 135M")
        with page.expect_response(lambda r: "/gradio_api/upload" in r.url and r.status == 200, timeout=60_000):
            page.set_input_files("#chat-input input[type=file]", str(apple))
        page.click("#settings button, #settings .label-wrap")  # tools off: SmolLM2 would try a calculator call
        page.locator("#calculator").get_by_text("Off", exact=True).click()
        page.fill("#chat-input textarea", f"Repeat exactly: {SENTENCE}")
        page.press("#chat-input textarea", "Enter")
        # the usage line is written when the reply ends; the checks come with it
        page.wait_for_function("document.querySelectorAll('#chatbot sub').length >= 1", timeout=300_000)
        page.wait_for_selector("#chatbot >> text=📑 Sources", timeout=60_000)
        answer = next(t for t in reversed(bot_texts(page)) if "391,035" in t)
        assert "$391,035 million ✓" in answer, answer  # verified on page 31
        assert "$100,295 million ≠ (p. 31 prints $93,736)" in answer, answer  # the row prints another figure
        text = page.inner_text("#chatbot")
        title = next(line for line in text.splitlines() if "📑 Sources" in line)
        assert "1 ✓ verified" in title and "1 ≠ differs from the page" in title, title
        assert text.index("391,035 million") < text.index("📑 Sources")  # the panel is under the answer
        assert "CONSOLIDATED STATEMENTS OF OPERATIONS" not in text  # collapsed: its title shows, its text does not

        page.get_by_text("📑 Sources").first.click()
        page.wait_for_function(
            "document.querySelector('#chatbot').innerText.includes('CONSOLIDATED STATEMENTS OF OPERATIONS')",
            timeout=10_000,
        )
        text = page.inner_text("#chatbot")
        assert f"{APPLE} · page 31 (printed 29)" in text  # the cited page, named
        assert "⟵ ✓ $391,035 million" in text and "⟵ ≠ $100,295 million" in text  # its rows, marked
        assert page.page_errors == []
        page.get_by_text("📑 Sources").first.scroll_into_view_if_needed()
        shot(page, "chat-sources")
        readme_shot(page)
