"""The MCP server's pure parts, fast: URL refusals (before any connection), argument checks, tool specs.

No test here sends traffic to a non-loopback address: refusals happen before connecting; the one download and the
redirect test use an HTTP server of their own on 127.0.0.1 with ``allow_loopback`` (the test-only setting).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.server
import threading

import pytest

from finspace.errors import BadInput
from finspace.mcp_server import arguments, fetch
from finspace.mcp_server.tools import tool_specs


def refusal(url: str, allow_loopback: bool = False) -> str:
    with pytest.raises(BadInput) as err:
        asyncio.run(fetch.fetch(url, 1 << 20, 10, allow_loopback))
    return str(err.value)


@pytest.mark.parametrize(
    "url, phrase",
    [
        ("http://127.0.0.1/x.pdf", "this machine"),
        ("http://127.9.9.9:8080/x.pdf", "this machine"),
        ("http://localhost/x.pdf", "this machine"),
        ("http://app.localhost/x.pdf", "this machine"),
        ("http://[::1]/x.pdf", "this machine"),
        ("http://0.0.0.0/x.pdf", "this machine"),
        ("http://[::]/x.pdf", "this machine"),
        ("http://[::ffff:127.0.0.1]/x.pdf", "this machine"),
        ("http://10.1.2.3/x.pdf", "private"),
        ("http://172.16.0.9/x.pdf", "private"),
        ("http://172.31.255.255/x.pdf", "private"),
        ("http://192.168.1.1/x.pdf", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/x.pdf", "link-local"),
        ("http://[fc00::1]/x.pdf", "private"),
        ("http://[fd12:3456::1]/x.pdf", "private"),
        # issue 41: 6to4 and NAT64 carry an IPv4 address (127.0.0.1 here); fec0::/10 is site-local
        ("http://[2002:7f00:1::1]/x.pdf", "this machine"),
        ("http://[64:ff9b::7f00:1]/x.pdf", "this machine"),
        ("http://[2002:a00:1::1]/x.pdf", "private"),
        ("http://[fec0::1]/x.pdf", "site-local"),
        ("http://100.64.0.1/x.pdf", "private"),
        ("http://224.0.0.1/x.pdf", "not a public"),
        ("file:///etc/passwd", "only public http(s)"),
        ("FILE:///proc/self/environ", "only public http(s)"),
        ("ftp://example.com/a.pdf", "only public http(s)"),
        ("gopher://127.0.0.1:6379/_", "only public http(s)"),
        ("/etc/passwd", "only public http(s)"),
        ("http://user:pw@example.com/a.pdf", "user name or password"),
        ("http://[::1", "not a valid URL"),
        ("http://example.com:99999/a.pdf", "not a valid URL"),
        ("http://2130706433/x.pdf", "this machine"),  # 127.0.0.1 as one number, resolved by the system
    ],
)
def test_urls_to_this_machine_private_networks_and_files_are_refused_before_connecting(url, phrase):
    message = refusal(url)
    assert phrase in message, message
    assert "data" in message or "address" in message or "URL" in message


def test_allow_loopback_lets_only_loopback_through():
    assert "link-local" in refusal("http://169.254.169.254/", allow_loopback=True)
    assert "private" in refusal("http://10.0.0.1/", allow_loopback=True)
    assert "only public http(s)" in refusal("file:///etc/passwd", allow_loopback=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict = {}

    def do_GET(self):  # noqa: N802 - the stdlib's name
        status, headers, body = self.routes.get(self.path, (404, {}, b""))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def loopback_server(routes: dict):
    handler = type("H", (_Handler,), {"routes": routes})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_every_redirect_is_checked_and_a_download_is_bounded():
    routes: dict = {}
    with loopback_server(routes) as base:
        routes.update(
            {
                "/meta": (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""),
                "/file": (301, {"Location": "file:///etc/passwd"}, b""),
                "/private": (307, {"Location": "http://192.168.0.1/a.pdf"}, b""),
                "/loop": (302, {"Location": "/loop"}, b""),
                "/ok": (302, {"Location": base + "/doc.md"}, b""),
                "/doc.md": (200, {"Content-Type": "text/markdown"}, b"# Net sales\n\n391,035\n"),
                "/big.txt": (200, {"Content-Type": "text/plain"}, b"x" * (2 << 20)),
                "/page": (200, {"Content-Type": "text/html; charset=utf-8"}, b"<p>hi</p>"),
                "/blob": (200, {"Content-Type": "application/octet-stream"}, b"MZ"),
            }
        )

        def get(path):
            return asyncio.run(fetch.fetch(base + path, 1 << 20, 10, allow_loopback=True))

        for path, phrase in (
            ("/meta", "link-local"),
            ("/file", "only public http(s)"),
            ("/private", "private"),
            ("/loop", "redirected more than"),
            ("/big.txt", "larger than 1 MiB"),
            ("/blob", "not one finspace reads"),
            ("/missing.pdf", "HTTP 404"),
        ):
            with pytest.raises(BadInput, match=phrase.replace("(", r"\(").replace(")", r"\)")):
                get(path)
        got = get("/ok")
        assert got.name == "doc.md" and got.data.startswith(b"# Net sales")
        assert get("/page").name == "page.html"


SCHEMA = next(t for t in tool_specs(4, 20, False) if t["name"] == "extract_matrix")["inputSchema"]


@pytest.mark.parametrize(
    "args, phrase",
    [
        ({}, "arguments is missing documents"),
        ({"documents": "a.pdf"}, "arguments.documents must be a list"),
        ({"documents": []}, "arguments.documents needs at least 1 item"),
        ({"documents": [{}] * 5}, "has too many items (at most 4)"),
        ({"documents": [{"url": 5}]}, "arguments.documents[0].url must be text"),
        ({"documents": [{"path": "/etc/passwd"}]}, "unknown argument 'path'"),
        (
            {"documents": [{"url": "https://x/a.pdf"}], "fields": [{"name": "a", "type": "float", "instruction": "b"}]},
            "must be a preset name (text) or a list",
        ),
        ({"documents": [{"data": "x" * 30_000_000, "filename": "a.pdf"}]}, "is too long"),
        ({"documents": [{"url": "https://x/a.pdf"}], "{format}": 1}, "unknown argument '{format}'"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_arguments_are_held_to_the_schema_without_echoing_them(args, phrase):
    with pytest.raises(BadInput) as err:
        arguments.check(SCHEMA, args)
    message = str(err.value)
    assert phrase in message, message
    assert len(message) < 600 and "xxxxxxxx" not in message


def test_a_document_is_written_only_inside_the_upload_folder(tmp_path):
    upload = tmp_path / "gradio"
    upload.mkdir()
    path, name = asyncio.run(
        arguments.document_file(
            {"data": base64.b64encode(b"hello").decode(), "filename": "../../a.txt"}, str(upload), 1 << 20
        )
    )
    assert name == "../../a.txt" and path.startswith(str(upload) + "/") and open(path, "rb").read() == b"hello"
    outside = tmp_path / "secret.txt"
    outside.write_text("s")
    for doc in ({"upload": str(outside)}, {"upload": str(upload / ".." / "secret.txt")}, {"upload": "/etc/passwd"}):
        with pytest.raises(BadInput, match="upload route"):
            asyncio.run(arguments.document_file(doc, str(upload), 1 << 20))
    with pytest.raises(BadInput, match="needs its filename"):
        asyncio.run(arguments.document_file({"data": "aGk="}, str(upload), 1 << 20))
    with pytest.raises(BadInput, match="limit is 1e-05 MiB|limit is"):
        asyncio.run(
            arguments.document_file(
                {"data": base64.b64encode(b"x" * 100).decode(), "filename": "a.txt"}, str(upload), 10
            )
        )


def test_every_tool_has_a_description_for_a_model_and_load_model_only_for_admins():
    public = tool_specs(20, 20, False)
    assert {t["name"] for t in public} == {
        "will_it_fit",
        "extract_matrix",
        "ask_document",
        "models",
        "health",
        "scores",
        "company_filings",
        "company_facts",
    }
    assert {t["name"] for t in tool_specs(20, 20, True)} == {t["name"] for t in public} | {"load_model"}
    for t in public:
        assert "Example: {" in t["description"] and t["inputSchema"]["type"] == "object", t["name"]
