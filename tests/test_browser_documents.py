"""A filing in the real page: a generated 40-page PDF attached in the chat box, the fit table, and an answer from
its passages with the usage line saying how much of it was used. Takes the README's docs/documents-fit.png
(FINSPACE_UPDATE_SCREENSHOTS=1). On the same server: the fit table follows the chat's max tokens, the API tab
names the page's own address, and the Will it fit? tab plans a catalogue key and says what it planned (#41)."""

from __future__ import annotations


import pytest

import documents_gen as gen
from helpers import REPO
from test_browser import bot_texts, chromium_context, open_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.engine, pytest.mark.timeout(600)]

FACT = "The net interest margin of the bank was 3.1 percent."


@pytest.fixture(scope="module")
def server(shared_documents_server):
    """conftest's shared documents server (test_documents_app's catalogue: "a" 1k, "mid" 4k, "long" 16k)."""
    shared_documents_server.ensure_model("a")
    return shared_documents_server


def test_a_pdf_in_the_chat_box_shows_the_fit_table_then_an_answer_from_its_pages(server, tmp_path):
    report = gen.pdf(tmp_path / "annual-report-2025.pdf", pages=40, facts={7: FACT})
    with chromium_context() as context:
        page = open_page(context, server.url, "Tiny Llama 1k")
        with page.expect_response(lambda r: "/gradio_api/upload" in r.url and r.status == 200, timeout=60_000):
            page.set_input_files("#chat-input input[type=file]", str(report))
        page.fill("#chat-input textarea", "What was the net interest margin of the bank?")
        page.press("#chat-input textarea", "Enter")
        page.wait_for_function(
            "document.querySelector('#doc-fit').innerText.includes('would hold it whole')", timeout=120_000
        )
        fit = page.inner_text("#doc-fit")
        assert "annual-report-2025.pdf" in fit and "40 pages" in fit and "does not fit" in fit
        assert "Tiny Llama 16k" in fit and "Tiny Llama 4k" not in fit and "Two ways on" in fit
        page.wait_for_function(
            "[...document.querySelectorAll('#chatbot [data-testid=\"bot\"]')]"
            ".some(e => e.innerText.includes('document:'))",
            timeout=180_000,
        )
        reply = bot_texts(page)[-1]
        assert "of 40 pages (" in reply and "passage" in reply, reply
        assert page.page_errors == []
        page.locator("#doc-fit").scroll_into_view_if_needed()
        shot(page, "documents-fit", docs_name="documents-fit.png")


LLAMA_70B = (REPO / "configs" / "meta-llama__Llama-3.1-70B-Instruct.json").read_text()


def test_the_fit_tab_plans_a_catalogue_key_and_says_what_it_planned(server):
    """#41: the default click errored on max_model_len 0 (the field labelled "empty: the largest that fits"); a
    CPU host was told "this machine has 1" GPU; a won't-start verdict still showed the sampler's free memory."""
    with chromium_context() as context:
        page = open_page(context, server.url)
        page.click("button[role=tab]:has-text('Will it fit?')")
        page.locator("#fit-repo textarea, #fit-repo input").first.fill("a")  # the catalogue key: no Hub needed
        page.click("#fit-check")
        page.wait_for_function("document.querySelector('#fit-verdict').innerText.includes('start')", timeout=60_000)
        verdict = page.inner_text("#fit-verdict")
        assert "✓ starts" in verdict and "This host has no GPU" in verdict, verdict
        assert "must be a positive whole number" not in page.inner_text("body")
        page.locator("#fit-repo textarea, #fit-repo input").first.fill("")
        page.click("#fit-config .cm-content")
        page.keyboard.insert_text(LLAMA_70B)
        page.click("#fit-check")
        page.wait_for_function(
            "document.querySelector('#fit-verdict').innerText.includes(\"won't start\")", timeout=60_000
        )
        verdict = page.inner_text("#fit-verdict")
        assert "free after the KV cache" not in verdict and "this machine has" not in verdict, verdict
        assert page.page_errors == []


def test_the_fit_table_follows_max_tokens_and_the_api_tab_names_this_page(server, tmp_path):
    """#41: the document's fit table said "a 512-token reply" after max tokens was set to 200; the API tab's
    examples named port 7860 whatever the page's address."""
    doc = tmp_path / "note.txt"
    doc.write_text("The bank's net interest margin was 3.1 percent in 2025.\n" * 20)
    with chromium_context() as context:
        page = open_page(context, server.url, "Tiny Llama 1k")
        page.click("#settings button, #settings .label-wrap")
        page.fill("#max-tokens input[type=number]", "200")
        page.press("#max-tokens input[type=number]", "Tab")
        with page.expect_response(lambda r: "/gradio_api/upload" in r.url and r.status == 200, timeout=60_000):
            page.set_input_files("#chat-input input[type=file]", str(doc))
        page.press("#chat-input textarea", "Enter")
        page.wait_for_function("document.querySelector('#doc-fit').innerText.includes('reply')", timeout=120_000)
        fit = page.inner_text("#doc-fit")
        assert "200-token reply" in fit, fit
        page.click("button[role=tab]:has-text('API')")
        page.wait_for_function(
            f"document.querySelector('#api-help').innerText.includes({server.url + '/'!r})", timeout=30_000
        )
        assert ":7860" not in page.inner_text("#api-help")
        assert page.page_errors == []
