"""finspace as an MCP server, through the official ``mcp`` Python client over streamable HTTP against a real
`python app.py` (vLLM on CPU, `demo`: a tiny random-weight llama with a 2,048-token context).

It lists the tools with their descriptions and schemas (load_model only with the admin token), calls
will_it_fit, extract_matrix on two real filings sent as base64 (shared/filings), ask_document on a filing
served by a local HTTP server (the test-only FINSPACE_TEST_MCP_FETCH_LOOPBACK lets 127.0.0.1 through), and gets
tool errors for bad arguments. The random weights cannot read: the matrix proves the plumbing (every cell a value
with its page and quote, or a mark saying why not), not the values; tests/test_smollm_matrix.py reads.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import http.server
import json
import threading
from pathlib import Path

import httpx
import pytest

from helpers import demo_entry, write_catalog
from server_utils import ADMIN_TOKEN, Server
from support.catalog import long_context_copy
from support.filings import filing

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

TOOLS = {
    "will_it_fit",
    "extract_matrix",
    "ask_document",
    "models",
    "health",
    "scores",
    "company_filings",
    "company_facts",
}
CHECKS = {"verified", "not_on_page", "value_not_in_quote", "not_found", "cut", "invalid"}
FIELDS = [
    {"name": "Net sales", "type": "money", "instruction": "Total net sales for the fiscal year"},
    {"name": "Auditor", "type": "text", "instruction": "The independent registered public accounting firm"},
]
CONFIG_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
BIG_CONFIG = {
    **CONFIG_8B,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
}  # a 70B: not on one L4


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("mcp")
    demo = long_context_copy(model_dir / "tiny-llama", root / "tiny-llama-2k", 2048)
    models = {"demo": demo_entry(demo, None, label="Demo (random weights)", max_model_len=2048, max_tokens=32)}
    srv = Server(
        root,
        write_catalog(root / "catalog", models, default="demo"),
        env={
            "FINSPACE_CPU_KV_CACHE_MIB": "64",
            "GRADIO_TEMP_DIR": str(root / "gradio"),
            "FINSPACE_TEST_MCP_FETCH_LOOPBACK": "1",
        },
    )
    srv.uploads = root / "gradio"
    try:
        srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


def run(coro):
    return asyncio.run(coro)


@contextlib.asynccontextmanager
async def mcp_client(server, token: str | None = None):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(600, read=600)) as http:
        async with Client(streamable_http_client(server.url + "/gradio_api/mcp/", http_client=http)) as client:
            yield client


async def _list(server, token=None):
    async with mcp_client(server, token) as c:
        return (await c.list_tools()).tools


async def _call(server, name, args, token=None):
    async with mcp_client(server, token) as c:
        return await c.call_tool(name, args)


def call(server, name, args, token=None):
    return run(_call(server, name, args, token))


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_the_tools_are_listed_with_descriptions_and_schemas(server):
    tools = run(_list(server))
    assert {t.name for t in tools} == TOOLS  # no load_model without the admin token
    for t in tools:
        assert len(t.description) > 120 and "Example" in t.description, t.name
        assert t.input_schema["type"] == "object" and t.input_schema.get("additionalProperties") is False, t.name
    by_name = {t.name: t for t in tools}
    docs = by_name["extract_matrix"].input_schema["properties"]["documents"]
    assert set(docs["items"]["properties"]) == {"url", "data", "filename", "upload", "filing"}
    assert "GiB" in by_name["will_it_fit"].description and "tokens" in by_name["will_it_fit"].description
    assert {t.name for t in run(_list(server, "wrong-token-123456789"))} == TOOLS
    assert {t.name for t in run(_list(server, ADMIN_TOKEN))} == TOOLS | {"load_model"}


def test_will_it_fit(server):
    r = call(server, "will_it_fit", {"config_json": json.dumps(CONFIG_8B), "gpu": "l40s", "max_model_len": 8192})
    assert not r.is_error, text_of(r)
    out = r.structured_content
    assert out["fits"] is True and out["max_model_len"] == 8192 and out["gpu"] and out["breakdown"], out
    r = call(server, "will_it_fit", {"config_json": json.dumps(BIG_CONFIG), "gpu": "l4"})
    assert not r.is_error, text_of(r)
    assert r.structured_content["fits"] is False and r.structured_content["reason"], r.structured_content


def test_extract_matrix_on_two_real_filings_sent_as_base64(server):
    paths = [filing("aapl-10-k-2024-11-01.html"), filing("aapl-10-q-2025-08-01.html")]
    documents = [{"data": base64.b64encode(p.read_bytes()).decode(), "filename": p.name} for p in paths]
    r = call(server, "extract_matrix", {"documents": documents, "fields": FIELDS})
    assert not r.is_error, text_of(r)
    m = r.structured_content
    assert m["state"] == "done" and m["provenance"]["model_key"] == "demo", {k: m[k] for k in ("state", "provenance")}
    assert [f["name"] for f in m["fields"]] == [f["name"] for f in FIELDS]
    assert [row["document"] for row in m["rows"]] == [p.name for p in paths]
    for row in m["rows"]:
        assert row["error"] is None and row["pages"] >= 1, row  # real filings, converted (HTML: pages where marked)
        assert len(row["cells"]) == len(FIELDS)
        for cell in row["cells"]:
            assert set(cell) >= {"found", "value", "page", "quote", "check"} and cell["check"] in CHECKS, cell
            if cell["found"]:
                assert 1 <= cell["page"] <= row["pages"] and cell["quote"], cell
    assert json.loads(text_of(r)) == m  # the text content is the same JSON, for clients that read text only
    assert not [p for p in server.uploads.rglob("*") if p.is_file() and p.suffix == ".html"]  # uploads deleted


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def local_files(folder: Path):
    """An HTTP server on 127.0.0.1 serving ``folder`` (the only address tests fetch from)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_ask_document_by_url_answers_with_the_document(server, tmp_path):
    (tmp_path / "note.md").write_text("# Results\n\nNet sales were $391,035 million in fiscal 2024.\n")
    with local_files(tmp_path) as base:
        r = call(
            server,
            "ask_document",
            {"question": "What were net sales?", "document": {"url": base + "/note.md"}, "max_tokens": 16},
        )
    assert not r.is_error, text_of(r)
    out = r.structured_content
    assert out["model"] == "demo" and out["name"] == "note.md" and out["document"].startswith("document: whole")
    assert isinstance(out["answer"], str) and isinstance(out["citations"], list) and out["output_tokens"] >= 1


def test_ask_document_on_an_uploaded_file(server, tmp_path):
    import httpx

    note = tmp_path / "q3.txt"
    note.write_text("Revenue was 1,234.5 million in the third quarter.\n")
    with note.open("rb") as f:
        up = httpx.post(server.url + "/gradio_api/upload", files={"files": ("q3.txt", f, "text/plain")}, timeout=60)
    assert up.status_code == 200, up.text
    [path] = up.json()
    r = call(server, "ask_document", {"question": "What was revenue?", "document": {"upload": path}, "max_tokens": 8})
    assert not r.is_error and r.structured_content["name"] == "q3.txt", text_of(r)
    assert not Path(path).exists()  # the upload is deleted once read
    r = call(server, "ask_document", {"question": "again?", "document": {"upload": path}})
    assert r.is_error and "upload again" in text_of(r), text_of(r)


def test_will_it_fit_takes_a_config_object_and_a_catalogue_key(server):
    """#41: Inspector 2.12 and LLMs send config_json as a JSON object; users know the catalogue's keys; offline,
    a Hub repo says how to plan it anyway, in this door's own terms."""
    r = call(server, "will_it_fit", {"config_json": CONFIG_8B, "gpu": "l40s", "max_model_len": 8192})
    assert not r.is_error and r.structured_content["fits"] is True, text_of(r)
    r = call(server, "will_it_fit", {"repo": "demo", "gpu": "l4"})
    assert not r.is_error and r.structured_content["source"].startswith("demo"), text_of(r)
    r = call(server, "will_it_fit", {"repo": "qwen-3-8b"})
    assert r.is_error and "neither a catalogue key (demo)" in text_of(r), text_of(r)
    r = call(server, "will_it_fit", {"repo": "Qwen/Qwen3-8B", "gpu": "l40s"})  # the Hub is unreachable here
    assert r.is_error and "unreachable" in text_of(r) and "paste it as config_json" in text_of(r), text_of(r)


@pytest.mark.parametrize("path", ["/gradio_api/mcp", "/gradio_api/mcp/", "/gradio_api/mcp/mcp"])
def test_the_endpoint_forms_and_get_answering_405_with_allow(server, path):
    """#41: GET is a 405 with the Allow header HTTP requires; the URL without the slash and the one MCP Inspector
    0.15 makes of a URL ending in "/" (".../mcp/mcp") both serve."""
    r = httpx.get(server.url + path, timeout=30)
    assert r.status_code == 405 and "POST" in r.headers.get("allow", ""), (r.status_code, r.headers)
    assert "stateless" in r.json()["error"]

    async def tools():
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(timeout=60) as http:
            async with Client(streamable_http_client(server.url + path, http_client=http)) as client:
                return {t.name for t in (await client.list_tools()).tools}

    assert run(tools()) == TOOLS


def test_ask_document_on_two_documents_reads_both_by_id(server):
    import base64

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    docs = [
        {"data": b64("# Apple\n\nNet sales were $391,035 million in fiscal 2024.\n"), "filename": "apple.md"},
        {"data": b64("# NVIDIA\n\nRevenue was $130,497 million in fiscal 2025.\n"), "filename": "nvidia.md"},
    ]
    r = call(server, "ask_document", {"question": "Compare their sales.", "documents": docs, "max_tokens": 8})
    assert not r.is_error, text_of(r)
    out = r.structured_content
    assert out["ids"] == ["apple", "nvidia"] and out["document"] == "documents: apple whole, nvidia whole", out
    assert isinstance(out["checks"], list) and out["steps"] == []  # the demo model calls no tools
    r = call(server, "ask_document", {"question": "q", "documents": docs, "document": docs[0]})
    assert r.is_error and "not both" in text_of(r), text_of(r)


@pytest.mark.parametrize(
    "name, args, phrase",
    [
        ("will_it_fit", {"gpus": "two", "repo": "a/b"}, "arguments.gpus must be a whole number"),
        ("will_it_fit", {"config_json": "{}", "repo": "a/b"}, "not both"),
        ("will_it_fit", {"repo": "a/b", "gpu": "t4"}, "arguments.gpu must be one of l4, a10g"),
        ("extract_matrix", {"documents": "10-K.pdf"}, "arguments.documents must be a list"),
        ("extract_matrix", {"documents": [{"upload": "/etc/passwd", "filename": "passwd.txt"}]}, "upload route"),
        ("extract_matrix", {"documents": [{"data": "!!notbase64!!", "filename": "a.pdf"}]}, "not valid base64"),
        ("extract_matrix", {"documents": [{"url": "file:///etc/passwd"}]}, "only public http(s) addresses"),
        (
            "ask_document",
            {"question": "q", "document": {"url": "http://169.254.169.254/latest/meta-data/"}},
            "link-local",
        ),
        ("ask_document", {"question": "q"}, "is missing document"),
        ("health", {"verbose": True}, "unknown argument 'verbose'"),
        ("load_model", {"model": "demo"}, "needs the admin token"),
        ("rm_rf", {}, "unknown tool 'rm_rf'"),
    ],
)
def test_bad_arguments_are_tool_errors_naming_the_fix(server, name, args, phrase):
    r = call(server, name, args)
    assert r.is_error, (name, r)
    text = text_of(r)
    assert phrase in text, text
    assert "Traceback" not in text and str(server.workdir) not in text and ADMIN_TOKEN not in text


def test_load_model_with_the_admin_token(server):
    r = call(server, "load_model", {"model": "demo"}, ADMIN_TOKEN)  # already loaded: the switch is a no-op or 409
    text = text_of(r)
    assert (not r.is_error and r.structured_content["model"] == "demo") or "in progress" in text, text
    r = call(server, "load_model", {"model": "../../etc/passwd"}, ADMIN_TOKEN)
    assert r.is_error and "catalogue" in text_of(r).lower(), text_of(r)
