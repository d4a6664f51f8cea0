"""The page with the real small model (smollm2-135m, the default without a GPU) in a real browser: a finance
question gets a real English answer that ends on its own (the usage line appears). Takes the README's main
screenshot, docs/finspace-page.png, with FINSPACE_UPDATE_SCREENSHOTS=1. One server start (~1 min here), shared with
test_smollm and test_smollm_matrix (conftest's ``shared_smollm_server``); the rest of the browser suite keeps the tiny random models.
"""

from __future__ import annotations

import pytest

from support.smollm import KEY, english_problem
from test_browser import chromium_context, open_page, shot

pytestmark = [pytest.mark.browser, pytest.mark.engine, pytest.mark.timeout(900)]

QUESTION = "What is free cash flow? Answer in two sentences."


@pytest.fixture(scope="module")
def server(shared_smollm_server):
    """conftest's shared SmolLM2 server (greedy; shared with test_smollm and test_smollm_matrix)."""
    shared_smollm_server.ensure_model(KEY)
    return shared_smollm_server


def test_the_page_shows_a_real_english_answer(server):
    with chromium_context() as context:
        page = open_page(context, server.url, "SmolLM2 135M")
        page.fill("#chat-input textarea", QUESTION)
        page.click("#send")
        # the usage line is written when the reply ends: at the model's end of sequence, before max_tokens
        page.wait_for_function("document.querySelectorAll('#chatbot sub').length >= 1", timeout=120_000)
        reply = page.eval_on_selector_all('#chatbot [data-testid="bot"]', "els => els.map(e => e.innerText)")[-1]
        usage = page.inner_text("#chatbot sub")
        assert english_problem(reply) is None, f"{english_problem(reply)}; the page showed: {reply!r}"
        assert usage.endswith("finished"), usage  # finish_reason stop
        assert page.page_errors == []
        shot(page, "smollm-replied", docs_name="finspace-page.png")
