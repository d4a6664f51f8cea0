"""Issue 25, finding 1: a /v1 caller can neither replace the chat template nor, with a slow legal request, hold up
another client's chat. Replayed against the shared ``surface_server`` (`python app.py`, model "a": tiny Llama,
no template variables in the catalogue), over plain HTTP.

1. ``chat_template_kwargs: {"chat_template": <107 characters of nested loops>}`` (the issue's attack: it held the
   one tokenizer thread for 10 s): 400 at once, naming the variables this model takes (none); a plain chat right
   after answers as fast as before. Any other variable the catalogue does not allow this model is refused too.
2. A legal but slow request: a 3 MB text file as a /v1 file part, which the server counts and cuts into passages in
   the model's tokens (seconds of tokenizing), then refused for its temperature. While it is tokenized, another
   client's /v1 chats, Gradio /chat and the page keep answering within a bound (before: they queued behind it in
   the engine's one tokenizer thread, for the whole count).
"""

from __future__ import annotations

import base64
import statistics
import threading
import time

import httpx
import pytest

from rel_utils import TALLY, assert_clean, gclient

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

# The 107-character template: 2 x 10^8 loop steps in Jinja, in the tokenizer thread
NESTED = "{% for i in range(100000) %}{% for j in range(2000) %}{% endfor %}{% endfor %}{{ messages[-1]['content'] }}"
ASK = [{"role": "user", "content": "What is EBITDA?"}]


def v1(url: str, body: dict, timeout: float = 120.0) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=timeout)
    TALLY.response(r.status_code, r.text)
    return r, time.monotonic() - start


def plain_chat(url: str) -> float:
    r, took = v1(url, {"model": "a", "messages": ASK, "max_tokens": 2})
    assert r.status_code == 200, r.text[:300]
    return took


def test_a_caller_cannot_send_a_chat_template(surface_server):
    url = surface_server.url
    assert len(NESTED) == 107
    base = min(plain_chat(url) for _ in range(3))
    r, took = v1(
        url,
        {"model": "a", "messages": ASK, "max_tokens": 2, "chat_template_kwargs": {"chat_template": NESTED}},
        timeout=60,
    )
    assert r.status_code == 400, (r.status_code, r.text[:300], took)
    err = r.json()["error"]
    assert err["param"] == "chat_template_kwargs" and "chat_template" in err["message"], err
    assert took < 5, took
    assert plain_chat(url) < max(5.0, 10 * base)
    # a variable the catalogue does not give model "a" (any, here): 400 naming what it takes
    for kwargs in (
        {"enable_thinking": False},
        {"x": "{% for i in range(10**9) %}{% endfor %}"},
        {"date_string": "{{ 7 * 7 }}"},
    ):
        r, took = v1(url, {"model": "a", "messages": ASK, "max_tokens": 2, "chat_template_kwargs": kwargs})
        assert r.status_code == 400, (kwargs, r.status_code, r.text[:300])
        assert "it takes none" in r.json()["error"]["message"] and took < 5, (r.text[:300], took)
        assert_clean(r.text)
    TALLY.add(inputs=4)


def _document_request(chars: int) -> dict:
    words = ("revenue", "margin", "EBITDA", "guidance", "cash", "flow", "segment", "dividend", "leverage", "capex")
    text = " ".join(f"{words[i % 10]}{i % 997}" for i in range(chars // 10))[:chars]
    data = base64.b64encode(text.encode()).decode()
    return {
        "model": "a",
        "temperature": 5,
        "max_tokens": 2,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What was the dividend?"},
                    {"type": "file", "file": {"filename": "filing.txt", "file_data": f"data:text/plain;base64,{data}"}},
                ],
            }
        ],
    }


def test_a_slow_legal_tokenization_does_not_hold_up_other_clients(surface_server):
    url = surface_server.url
    client = gclient(surface_server)
    base = statistics.median(plain_chat(url) for _ in range(3))
    attack: dict = {}

    def attacker():
        attack["response"], attack["took"] = v1(url, _document_request(3_200_000), timeout=300)

    t = threading.Thread(target=attacker)
    t.start()
    page, v1_times, gradio_times = [], [], []
    started = time.monotonic()
    while t.is_alive() and time.monotonic() - started < 240:
        v1_times.append(plain_chat(url))
        t0 = time.monotonic()
        reply = client.predict("What is EBITDA?", [], None, None, 2, None, api_name="/chat")
        gradio_times.append(time.monotonic() - t0)
        assert isinstance(reply, str)
        t0 = time.monotonic()
        assert httpx.get(url + "/", timeout=60).status_code == 200
        page.append(time.monotonic() - t0)
    t.join(300)
    r = attack["response"]
    # the document was read and measured, then the request refused for its temperature (no generation)
    assert r.status_code == 400 and "temperature" in r.text, r.text[:300]
    # Before, a chat sent while the document was counted waited for the whole count (most of the attacker's
    # time); now it waits for nothing but its own work: a bound of half the attacker's time, at most 4 s
    bound = max(6 * base, min(4.0, attack["took"] / 2))
    print(
        f"attacker {attack['took']:.1f}s, bound {bound:.2f}s, v1 base {base:.2f}s max {max(v1_times):.2f}s, "
        f"/chat max {max(gradio_times):.2f}s, page max {max(page):.2f}s, rounds {len(v1_times)}"
    )
    assert attack["took"] > 2.0, "the document was measured too fast to show anything; make it larger"
    assert max(v1_times) < bound, (v1_times, attack["took"])
    assert max(gradio_times) < bound + 1, (gradio_times, attack["took"])
    assert max(page) < bound, (page, attack["took"])
    TALLY.add(inputs=1 + 3 * len(v1_times))
