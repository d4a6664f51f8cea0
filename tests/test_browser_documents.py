"""A filing in the real page: a generated 40-page PDF attached in the chat box, the fit table, and an answer from
its passages with the usage line saying how much of it was used. Takes the README's docs/documents-fit.png
(FINSPACE_UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations


import pytest

import documents_gen as gen
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
        page.wait_for_function("document.querySelector('#doc-fit').innerText.includes('would hold it whole')",
                               timeout=120_000)
        fit = page.inner_text("#doc-fit")
        assert "annual-report-2025.pdf" in fit and "40 pages" in fit and "does not fit" in fit
        assert "Tiny Llama 16k" in fit and "Tiny Llama 4k" not in fit and "Two ways on" in fit
        page.wait_for_function("[...document.querySelectorAll('#chatbot [data-testid=\"bot\"]')]"
                               ".some(e => e.innerText.includes('document:'))", timeout=180_000)
        reply = bot_texts(page)[-1]
        assert "of 40 pages (" in reply and "passage" in reply, reply
        assert page.page_errors == []
        page.locator("#doc-fit").scroll_into_view_if_needed()
        shot(page, "documents-fit", docs_name="documents-fit.png")
