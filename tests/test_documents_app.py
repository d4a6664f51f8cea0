"""Documents through the real app (vLLM on CPU): /chat with gradio_client's handle_file, the chat box's submit event
over Gradio's queue, /v1 file parts; the prompt the engine receives is read from FINSPACE_TEST_PROMPT_LOG.

The server is conftest's ``shared_documents_server``. Catalogue: "a" (loaded) is the tiny llama with a 1,024-token context; "mid" (4,096) and "long" (16,384) are the
same weights with longer planned contexts, so a 40-page PDF (about 10,000 tokens) fits only "long".
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import httpx
import pytest

import documents_gen as gen
from support.sse import sse_lines

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

FACT = "The net interest margin of the bank was 3.1 percent."
QUESTION = "What was the net interest margin of the bank?"


@pytest.fixture(scope="module")
def server(shared_documents_server):
    """conftest's shared documents server (the catalogue above; shared with test_browser_documents), "a" ready."""
    shared_documents_server.ensure_model("a")
    return shared_documents_server


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return gen.pdf(tmp_path_factory.mktemp("pdf") / "annual-report.pdf", pages=40, facts={7: FACT})


def last_prompt(server) -> str:
    return json.loads(server.prompts.read_text().splitlines()[-1])["prompt"]


def leftovers(server) -> list[str]:
    """Uploaded documents still on the server (there must be none once an answer or refusal is out)."""
    kinds = {".pdf", ".html", ".docx", ".xlsx", ".csv", ".txt", ".md"}
    return [str(p) for p in server.uploads.rglob("*") if p.is_file() and p.suffix in kinds]


def gclient(server):
    from gradio_client import Client

    return Client(server.url, verbose=False)


def test_page_sevens_passage_reaches_the_prompt_through_chat(server, report):
    from gradio_client import handle_file

    reply = gclient(server).predict(QUESTION, [], None, 0.0, 8, handle_file(str(report)), api_name="/chat")
    assert isinstance(reply, str)
    prompt = last_prompt(server)
    assert "[page 7]\nPage 7 of the annual report.\n" + FACT in prompt, prompt[-2000:]
    assert "most relevant to the question" in prompt and "[page 40]" not in prompt.split(FACT)[0][-50:]
    assert prompt.index("<document") < prompt.rindex(QUESTION), "the document comes before the question"
    assert json.loads(server.prompts.read_text().splitlines()[-1])["tokens"] <= 1024
    assert leftovers(server) == []


def test_five_argument_chat_callers_still_work(server):
    r = httpx.post(
        server.url + "/gradio_api/call/chat", json={"data": ["What is a bond?", [], None, 0.0, 4]}, timeout=30
    )
    assert r.status_code == 200, r.text
    text = httpx.get(server.url + f"/gradio_api/call/chat/{r.json()['event_id']}", timeout=120).text
    assert "event: complete" in text, text[-500:]
    assert "<document" not in last_prompt(server)


def upload(server, name: str, data: bytes) -> dict:
    r = httpx.post(server.url + "/gradio_api/upload", files={"files": (name, data)}, timeout=60)
    assert r.status_code == 200, r.text
    return {"path": r.json()[0], "url": None, "orig_name": name, "meta": {"_type": "gradio.FileData"}}


def run_event(server, fn_index: int, data: list, session: str | None = None) -> dict:
    """Join Gradio's queue and read the event's messages until it completes; its last message. ``session``: the
    page's session (its gr.State values), a new one by default."""
    session = session or uuid.uuid4().hex[:11]
    r = httpx.post(
        server.url + "/gradio_api/queue/join",
        timeout=30,
        json={"data": data, "fn_index": fn_index, "session_hash": session, "trigger_id": None},
    )
    assert r.status_code == 200, r.text
    with httpx.stream("GET", server.url + "/gradio_api/queue/data", params={"session_hash": session}, timeout=180) as s:
        for line in sse_lines(s.iter_bytes()):
            if line.startswith("data:"):
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed":
                    return msg
    raise AssertionError("the event did not complete")


def ask_event(server) -> int:
    """The chat box's submit event: (message with its file, conversation, six settings, document, and since issue
    34 the calculator: optional, so the nine inputs these tests send are padded with null)."""
    config = httpx.get(server.url + "/config", timeout=30).json()
    fit_id = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "doc-fit")
    return next(d["id"] for d in config["dependencies"] if fit_id in d["outputs"] and len(d["inputs"]) == 10)


def test_the_fit_table_names_the_models_that_would_hold_it(server, report):
    ref = upload(server, "annual-report.pdf", report.read_bytes())
    msg = run_event(
        server, ask_event(server), [{"text": "", "files": [ref]}, None, None, 0.0, 8, 1.0, None, True, None]
    )
    assert msg["success"], msg
    table = next(v for v in msg["output"]["data"] if isinstance(v, str) and "tokens" in v)
    assert "| `annual-report`: annual-report.pdf (40 pages, PDF) |" in table
    assert "| Tiny Llama 1k | 1,024 context | **does not fit**" in table
    assert "| Tiny Llama 16k (`long`) | 16,384 context | would hold it whole" in table
    assert "`mid`" not in table, "4,096 tokens do not hold it"
    assert "**Two ways on:** switch to a model that holds it whole (`long`" in table
    assert leftovers(server) == []


def test_the_same_upload_on_another_event_is_refused(server, report):
    ref = upload(server, "annual-report.pdf", report.read_bytes())
    config = httpx.get(server.url + "/config", timeout=30).json()
    other = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "models")
    r = httpx.post(
        server.url + "/gradio_api/queue/join",
        timeout=30,
        json={"data": [ref], "fn_index": other, "session_hash": "s1", "trigger_id": None},
    )
    assert r.status_code == 400 and "file references are not accepted" in r.json()["error"]
    for path in ("/proc/self/environ", "/etc/passwd", str(server.uploads / ".." / "prompts.jsonl")):
        bad = {**ref, "path": path}
        r = httpx.post(server.url + "/gradio_api/call/chat", json={"data": ["q", [], None, 0.0, 4, bad]}, timeout=30)
        assert r.status_code == 400 and "file references are not accepted" in r.json()["error"], path
    # an upload no chat used stays until Gradio's cache sweep (ui.blocks.DELETE_CACHE: files older than 10 minutes)
    Path(ref["path"]).unlink()


def test_a_v1_file_part_reaches_the_prompt(server, report):
    """(A request without a document has no finspace_checks: test_openai_api's replies are OpenAI's shape.)"""
    data = base64.b64encode(report.read_bytes()).decode()
    body = {
        "model": "a",
        "max_tokens": 4,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": QUESTION},
                    {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{data}", "filename": "r.pdf"}},
                ],
            }
        ],
    }
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    assert "[page 7]\nPage 7 of the annual report.\n" + FACT in last_prompt(server)
    assert leftovers(server) == []


SECOND_FACT = "The loan growth of the bank was 4.2 percent."
BOTH_QUESTION = "What were the net interest margin and the loan growth of the bank?"


@pytest.fixture(scope="module")
def second(tmp_path_factory):
    return gen.pdf(tmp_path_factory.mktemp("pdf2") / "loan-book.pdf", pages=12, facts={3: SECOND_FACT})


def test_two_documents_on_chat_give_passages_from_each_labelled_by_id(server, report, second):
    """Issue 39: /chat takes a list of files; the passages come from both, each labelled with its document's id
    and page (the 1,024-token model holds neither whole)."""
    from gradio_client import handle_file

    gclient(server).predict(
        BOTH_QUESTION, [], None, 0.0, 8, [handle_file(str(report)), handle_file(str(second))], api_name="/chat"
    )
    prompt = last_prompt(server)
    assert "[annual-report, page 7]\nPage 7 of the annual report.\n" + FACT in prompt, prompt[-3000:]
    assert "[loan-book, page 3]" in prompt and SECOND_FACT in prompt, prompt[-3000:]
    assert '<document id="annual-report"' in prompt and '<document id="loan-book"' in prompt
    assert json.loads(server.prompts.read_text().splitlines()[-1])["tokens"] <= 1024
    assert leftovers(server) == []


def test_two_v1_file_parts_reach_the_prompt_and_a_third_is_past_the_bound(server, report, second):
    def part(path, name):
        data = base64.b64encode(path.read_bytes()).decode()
        return {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{data}", "filename": name}}

    body = {
        "model": "a",
        "max_tokens": 4,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": BOTH_QUESTION},
                    part(report, "annual-report.pdf"),
                    part(second, "loan-book.pdf"),
                ],
            }
        ],
    }
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    prompt = last_prompt(server)
    assert "[annual-report, page 7]" in prompt and "[loan-book, page 3]" in prompt, prompt[-3000:]
    choice = r.json()["choices"][0]  # the answer's figure checks, in the documented extension field
    assert isinstance(choice["finspace_checks"], list) and "finspace_checks" not in choice["message"]
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=120) as s:
        chunks = [
            json.loads(line[5:])
            for line in sse_lines(s.iter_bytes())
            if line.startswith("data:") and line[5:].strip() != "[DONE]"
        ]
    finish = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    assert isinstance(finish["choices"][0]["finspace_checks"], list), finish  # streamed: on the finish chunk
    body["messages"][0]["content"].append(part(second, "loan-book.pdf"))  # this server holds 2 per conversation
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 400 and "a conversation holds at most 2" in r.json()["error"]["message"], r.text
    assert leftovers(server) == []


def test_a_second_attachment_joins_the_first_and_one_can_be_removed(server, report, second):
    """The page: a second filing attached in the same conversation joins the first (before issue 39 it replaced
    it silently); the fit table covers both; the documents list removes one."""
    session, event = uuid.uuid4().hex[:11], ask_event(server)
    for path in (report, second):
        ref = upload(server, path.name, path.read_bytes())
        msg = run_event(
            server, event, [{"text": "", "files": [ref]}, None, None, 0.0, 8, 1.0, None, True, None], session
        )
        assert msg["success"], msg
    table = next(v for v in msg["output"]["data"] if isinstance(v, str) and "tokens" in v)
    assert "`annual-report`: annual-report.pdf (40 pages, PDF)" in table and "`loan-book`: loan-book.pdf" in table
    assert "**2 documents together**" in table
    listed = msg["output"]["data"][-1]
    assert listed["choices"] == [["annual-report"] * 2, ["loan-book"] * 2] or [c[0] for c in listed["choices"]] == [
        "annual-report",
        "loan-book",
    ], listed
    msg = run_event(
        server, event, [{"text": QUESTION, "files": []}, None, None, 0.0, 8, 1.0, None, True, None], session
    )
    prompt = last_prompt(server)
    assert '<document id="annual-report"' in prompt and '<document id="loan-book"' in prompt
    config = httpx.get(server.url + "/config", timeout=30).json()
    list_id = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "doc-list")
    remove = next(d["id"] for d in config["dependencies"] if d["inputs"][:1] == [list_id])
    msg = run_event(server, remove, [["loan-book"], None], session)
    assert msg["success"] and "annual-report" not in msg["output"]["data"][1], msg
    run_event(server, event, [{"text": QUESTION, "files": []}, None, None, 0.0, 8, 1.0, None, True, None], session)
    assert "loan-book.pdf" in last_prompt(server) and "annual-report" not in last_prompt(server)
    assert leftovers(server) == []


BAD = [
    (
        "too many pages",
        lambda p: gen.pdf(p / "long.pdf", pages=60, filler=0),
        r"long\.pdf has 60 pages; the limit is 50",
    ),
    ("encrypted", lambda p: gen.pdf(p / "locked.pdf", password="pw"), r"locked\.pdf is an encrypted PDF"),
    (
        "corrupt",
        lambda p: _write(p / "broken.pdf", b"%PDF-1.7\n1 0 obj << >> trailer garbage"),
        r"broken\.pdf is not a readable PDF",
    ),
    ("scanned", lambda p: gen.pdf(p / "scan.pdf", text=False), r"scan\.pdf has no text layer .*OCR is not supported"),
    ("zip bomb", lambda p: gen.zip_bomb(p / "sheet.xlsx", unpacked_mib=256), r"sheet\.xlsx unpacks to 256 MiB"),
    ("lying extension", lambda p: _write(p / "fake.pdf", b"just some text"), r"fake\.pdf is named \.pdf but is not"),
]


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case, make, match", BAD, ids=[b[0] for b in BAD])
def test_bad_documents_get_a_clear_message_on_chat_and_v1(server, tmp_path, case, make, match):
    import re

    from gradio_client import handle_file

    path = make(tmp_path)
    with pytest.raises(Exception, match=match):
        gclient(server).predict("q", [], None, 0.0, 4, handle_file(str(path)), api_name="/chat")
    data = base64.b64encode(path.read_bytes()).decode()
    body = {
        "model": "a",
        "max_tokens": 4,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "q"},
                    {
                        "type": "file",
                        "file": {"file_data": f"data:application/octet-stream;base64,{data}", "filename": path.name},
                    },
                ],
            }
        ],
    }
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 400 and re.search(match, r.json()["error"]["message"]), r.text
    assert leftovers(server) == []


def test_html_scripts_never_reach_the_model(server, tmp_path):
    from gradio_client import handle_file

    page = _write(tmp_path / "filing.html", gen.HTML.encode())
    gclient(server).predict("What was net income?", [], None, 0.0, 4, handle_file(str(page)), api_name="/chat")
    prompt = last_prompt(server)
    assert "Net income was 42 million." in prompt and "| Year | Income |" in prompt
    assert "alert" not in prompt and "secret-script" not in prompt


def test_an_upload_over_the_size_limit_is_refused_before_it_is_read(server):
    """The body bound is the largest legal upload (2 documents of 1 MiB here: FINSPACE_MATRIX_MAX_DOCUMENTS); past
    it the upload is refused from its Content-Length; within it, each file is held to the document limit."""
    r = httpx.post(
        server.url + "/gradio_api/upload", files={"files": ("big.pdf", b"%PDF-" + b"x" * (3 << 20))}, timeout=60
    )
    assert r.status_code == 413 and "a document may be 1 MiB at most" in r.json()["error"]
    r = httpx.post(
        server.url + "/gradio_api/upload", files={"files": ("big.pdf", b"%PDF-" + b"x" * (3 << 19))}, timeout=60
    )
    assert r.status_code == 413 and "'big.pdf' is 1.5 MiB: a document may be 1 MiB at most" in r.json()["error"]
    three = [("files", (f"{c}.pdf", b"%PDF-1")) for c in "abc"]
    r = httpx.post(server.url + "/gradio_api/upload", files=three, timeout=60)
    assert r.status_code == 400 and "3 files in one upload; send at most 2 documents" in r.json()["error"]
    assert server.health()["status"] == "ok" or httpx.get(server.url + "/health").status_code == 200
