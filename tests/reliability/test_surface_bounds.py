"""Issue 41's server-side bounds, each replayed against the shared "surface" server (`python app.py`, tiny models
on vLLM CPU) and measured against a baseline taken in the same run: every test failed on the code before it.

1. A 1.4 KB schema of 20 ``$defs`` each naming the next twice (``$ref`` and ``items``, or
   ``additionalProperties`` and ``items``), as ``response_format`` or a tool's ``parameters``: the cost check was
   exponential (14 s here) inside the async handler, so ``/health`` from another client waited as long. Now it is
   refused with a 400 about as fast as any other bad schema, and ``/health`` stays as fast as its baseline.
2. MCP's stateless JSON transport never noticed a caller that went away: a dropped ``ask_document`` went on
   generating, a dropped ``extract_matrix`` held its Matrix slot to its end. Now both end when the caller does:
   the generation as fast as a dropped /v1 stream's, the slot well inside one slow PDF's conversion.
3. Inline XBRL outside the document's bounds: 3 to 5 MB of contexts nested in chains, long dimensions at the
   bottom, made the converter's child print about 150 MB of JSON that the app parsed on its event loop (+546 MiB
   for one ask_document). Now every product counts against the document's bounds in the child, the app reads
   no more than the bound, off the loop: the app's peak memory for it is about a real 10-K's of the same size.
6. A document with no word to index (560 KB of single digits, an HTML table of 60,000 "1" rows), too long to fit
   whole: bm25s raised ``ValueError: max() arg is an empty sequence``, a 500 ("unexpected server error"). Now its
   passages are chosen in document order, answered as a worded document of the same size is.
4. 2,000 text facts continuing into one ``ix:continuation`` of 150,000 empty elements (0.78 MB) ran the converter
   to its 60 s bound, the part walked again for every fact; from two clients both conversion slots were held and
   a third client's small document waited a minute. Now the part is read once: the file converts in about the
   time a real 10-K of twice its size does, and the third client's document is not held behind it.
5. One client read another's upload: MCP's ``upload`` took any file in the upload folder, and two clients
   uploading the same bytes shared one file (Gradio names it by a hash of the bytes), so one's use deleted the
   other's. Now each upload is its sender's own file, and only its sender names it.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import statistics
import threading
import time

import httpx
import pytest

from rel_utils import (
    SURFACE_ADMIN,
    SURFACE_HF_TOKEN,
    TALLY,
    assert_clean,
    baseline,
    converting,
    drop,
    from_ip,
    peak_rss_during,
    raw_post,
    running_requests,
    still_serving,
    wait_until,
)
from support.filings import filing
from support.slow_pdf import slow_pdf

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]
MIB = 1 << 20
FIELD = [{"name": "Revenue", "type": "number", "instruction": "Total revenue"}]


@pytest.fixture(scope="module")
def server(surface_server):
    surface_server.baseline = baseline(surface_server)
    return surface_server


def chained_defs(levels: int = 20, how: str = "ref") -> dict:
    """``levels`` definitions, each naming the next twice: 2**levels walks for a checker that does not memoise."""
    defs = {}
    for i in range(levels):
        nxt = {"$ref": f"#/$defs/d{i + 1}"} if i + 1 < levels else {"type": "string"}
        defs[f"d{i}"] = (
            {"$ref": nxt["$ref"], "items": nxt}
            if how == "ref" and i + 1 < levels
            else {"additionalProperties": nxt, "items": nxt}
            if how != "ref"
            else nxt
        )
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def v1_body(schema: dict, as_tool: bool) -> dict:
    body = {"model": "a", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    if as_tool:
        body["tools"] = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    else:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    return body


def timed_post(url: str, body: dict, ip: str) -> tuple[float, httpx.Response]:
    t0 = time.monotonic()
    r = httpx.post(url + "/v1/chat/completions", json=body, headers=from_ip(ip), timeout=300)
    TALLY.add(inputs=1)
    TALLY.response(r.status_code, r.text)
    return time.monotonic() - t0, r


def health_s(url: str) -> float:
    t0 = time.monotonic()
    httpx.get(url + "/health", headers=from_ip("198.51.100.9"), timeout=300).raise_for_status()
    return time.monotonic() - t0


def test_a_schema_of_chained_definitions_is_refused_quickly_and_holds_no_route(server):
    """Finding 1: work bounded (linear in the schema) and off the event loop."""
    url = server.url
    assert len(httpx.Request("POST", url, json=chained_defs()).content) < 1500
    # the baseline: a plainly bad schema's 400, and /health, in this run
    plain = [timed_post(url, v1_body({"type": "object", "not": {}}, False), "198.51.100.1") for _ in range(3)]
    assert all(r.status_code == 400 for _, r in plain), [r.text[:200] for _, r in plain]
    plain_s = statistics.median(t for t, _ in plain)
    health_base = statistics.median(health_s(url) for _ in range(5))

    hostile = [v1_body(chained_defs(20, how), as_tool) for how in ("ref", "extra") for as_tool in (False, True)]
    results: list[tuple[float, httpx.Response]] = []
    threads = [
        threading.Thread(target=lambda b=b, i=i: results.append(timed_post(url, b, f"198.51.100.{20 + i}")))
        for i, b in enumerate(hostile)
    ]
    for t in threads:
        t.start()
    during = [health_s(url) for _ in range(5)]
    for t in threads:
        t.join(300)
    assert len(results) == len(hostile)
    for took, r in results:
        assert r.status_code == 400, r.text[:300]
        assert "compile" in r.text and "limit" in r.text, r.text[:300]
        assert_clean(r.text, SURFACE_ADMIN, SURFACE_HF_TOKEN)
    slowest = max(t for t, _ in results)
    print(
        f"chained schema: 400 in {slowest * 1e3:.0f} ms (a plain bad schema {plain_s * 1e3:.0f} ms); /health "
        f"{max(during) * 1e3:.0f} ms under it (baseline {health_base * 1e3:.0f} ms)"
    )
    # four at once against one: a bounded check costs about what parsing the request does
    assert slowest <= 4 * 10 * plain_s, (slowest, plain_s)
    assert statistics.median(during) <= 10 * health_base + 4 * plain_s, (during, health_base)
    still_serving(server)


# ------------------------------------------------------------------ 2: MCP calls end with their caller
MCP = "/gradio_api/mcp/"


def mcp_body(name: str, arguments: dict) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    ).encode()


def mcp_call(url: str, name: str, arguments: dict, http: httpx.Client | None = None) -> dict:
    r = (http or httpx).post(
        url + MCP,
        content=mcp_body(name, arguments),
        timeout=600,
        headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
    )
    TALLY.add(inputs=1)
    TALLY.response(r.status_code, r.text)
    assert r.status_code == 200, r.text[:300]
    return r.json()["result"]


def freed_after(server, sock: socket.socket) -> float:
    wait_until(lambda: running_requests(server) == 1, 120, 0.05, "the long generation running")
    time.sleep(0.5)
    assert running_requests(server) == 1, "the generation ended before the drop: not long enough to test"
    dropped = drop(sock)
    wait_until(lambda: running_requests(server) == 0, 300, 0.05, "the dropped caller's request freed")
    return time.monotonic() - dropped


def test_a_dropped_mcp_call_stops_generating_and_frees_its_matrix_slot(server, tmp_path):
    """Finding 2: the stateless JSON transport never noticed a caller that went away: a dropped ask_document went
    on generating (24 s), a dropped extract_matrix held its Matrix slot to its end. The baseline: a /v1 stream
    dropped the same way, and one slow PDF's conversion, both timed in this run."""
    url = server.url
    assert running_requests(server) == 0
    v1 = json.dumps(
        {
            "model": "a",
            "max_tokens": 4000,
            "stream": True,
            "temperature": 1.0,
            "seed": 1,
            "messages": [{"role": "user", "content": "Write a long story."}],
        }
    ).encode()
    t_v1 = freed_after(server, raw_post(url, "/v1/chat/completions", v1))
    note = base64.b64encode(b"EBITDA rose 4% in fiscal 2024. " * 20).decode()
    ask = mcp_body(
        "ask_document",
        {
            "question": "Write a long story about EBITDA.",
            "max_tokens": 4000,
            "document": {"data": note, "filename": "note.txt"},
        },
    )
    t_mcp = freed_after(server, raw_post(url, MCP, ask))
    print(f"dropped mid-generation: /v1 freed in {t_v1 * 1e3:.0f} ms, MCP ask_document in {t_mcp * 1e3:.0f} ms")
    assert t_mcp <= 5 * t_v1 + 0.5, (t_mcp, t_v1)  # 0.5: the 0.5 s of the wait before each drop, at most
    TALLY.add(faults=2, survived=2)

    # a Matrix slot: a matrix of two slow PDFs (tens of seconds of conversion) dropped while it converts
    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits

    pdf = slow_pdf(tmp_path / "slow.pdf", operators=1600)
    t0 = time.monotonic()
    convert(pdf, "slow.pdf", DocumentLimits(convert_timeout_s=600))
    t_slow = time.monotonic() - t0
    data = base64.b64encode(pdf.read_bytes()).decode()
    matrix = mcp_body(
        "extract_matrix", {"documents": [{"data": data, "filename": f"s{i}.pdf"} for i in range(2)], "fields": FIELD}
    )
    sock = raw_post(url, MCP, matrix)
    wait_until(lambda: converting(server) >= 1, 120, 0.1, "the matrix converting its first slow PDF")
    probe = {"documents": [{"data": note, "filename": "note.txt"}], "fields": FIELD}
    out = mcp_call(url, "extract_matrix", probe)
    assert "already filling" in json.dumps(out), out  # the matrix holds its slot while its caller is there
    dropped = drop(sock)
    while True:
        out = mcp_call(url, "extract_matrix", probe)
        if not out.get("isError"):
            break
        assert "already filling" in json.dumps(out), out
        held = time.monotonic() - dropped
        # before: held through both slow PDFs' conversions and the cells
        assert held < t_slow, (
            f"the dropped matrix still held its slot {held:.1f} s after its caller went away; "
            f"one slow PDF converts in {t_slow:.1f} s"
        )
        time.sleep(0.2)
    print(f"dropped matrix: slot free {time.monotonic() - dropped:.1f} s after the drop (a slow PDF: {t_slow:.1f} s)")
    TALLY.add(faults=1, survived=1)
    still_serving(server)


# ------------------------------------------------------------------ 3: a conversion's every product is bounded
def nested_contexts(chains: int = 400, depth: int = 100) -> bytes:
    """Chains of ``depth`` contexts nested in each other, 16 long dimensions at the bottom: a reader that takes a
    context's first 16 dimensions from everything inside it gives every context of the chain all 16 (6 KB each:
    about 150 MB of JSON from a 4.6 MB file)."""
    dims = "".join(
        f'<xbrldi:explicitMember dimension="d:{"D" * 190}{j}">m:{"M" * 190}{j}</xbrldi:explicitMember>'
        for j in range(16)
    )
    out = [
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" '
        'xmlns:xbrli="http://www.xbrl.org/2003/instance" xmlns:xbrldi="http://xbrl.org/2006/xbrldi"><body>'
        '<ix:header><ix:resources>'
    ]
    for c in range(chains):
        out += [f'<xbrli:context id="c{c}_{i}">' for i in range(depth)]
        out += [dims, "</xbrli:context>" * depth]
    out.append(
        '</ix:resources></ix:header><p>Revenue <ix:nonNumeric name="dei:X" contextRef="c0_0">rose</ix:nonNumeric>'
        '</p></body></html>'
    )
    return "".join(out).encode()


def ask_with_file(url: str, name: str, data: bytes) -> dict:
    return mcp_call(
        url,
        "ask_document",
        {
            "question": "What rose?",
            "max_tokens": 1,
            "document": {"data": base64.b64encode(data).decode(), "filename": name},
        },
    )


def test_inline_xbrl_counts_against_the_document_bounds(server):
    """Finding 3: the app's memory for a hostile inline-XBRL file against real 10-Ks of the same size, in this run
    (the hostile file took +260 MiB at the app's peak before the fix, the 10-Ks about 40)."""
    hostile = nested_contexts()
    # the baseline: real 10-Ks (inline XBRL too) one after another, as large as the hostile file
    real = b"".join(
        filing(n).read_bytes()
        for n in ("nvda-10-k-2025-02-26.html", "nflx-10-k-2025-01-27.html", "wfc-10-k-2025-02-25.html")
    )[: len(hostile)]
    ask_with_file(server.url, "warm.html", filing("aapl-10-q-2025-08-01.html").read_bytes())  # imports, caches
    grew_real, out = peak_rss_during(server.proc.pid, lambda: ask_with_file(server.url, "10-ks.html", real))
    assert not out.get("isError"), out
    health_base = statistics.median(health_s(server.url) for _ in range(3))
    during: list[float] = []
    done = threading.Event()

    def probe():
        while not done.is_set():
            during.append(health_s(server.url))
            time.sleep(0.05)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        grew, out = peak_rss_during(server.proc.pid, lambda: ask_with_file(server.url, "nested.html", hostile))
    finally:
        done.set()
        prober.join()
    text = json.dumps(out)
    assert "Traceback" not in text and "unexpected" not in text, text[:300]
    print(
        f"inline XBRL of nested contexts: the app grew {grew / MIB:.0f} MiB at its peak (real 10-Ks as large "
        f"{grew_real / MIB:.0f} MiB); /health at most {max(during) * 1e3:.0f} ms (baseline {health_base * 1e3:.0f} ms)"
    )
    assert grew <= 2 * grew_real + 16 * MIB, (grew / MIB, grew_real / MIB)
    assert max(during) <= 20 * health_base + 0.25, (during, health_base)
    TALLY.add(inputs=1)
    still_serving(server)


# ------------------------------------------------------------------ 6: a document with no word to index
def test_a_document_with_no_word_to_index_is_answered(server):
    """Finding 6: digits only, too long to fit whole, through MCP and /v1: answered (passages in document order),
    in about the time a worded text of the same size takes (the baseline, in this run)."""
    digits = (" ".join(str(i % 10) for i in range(280_000))).encode()  # 560 KB of single digits
    table = ("<table>" + "<tr><td>1</td></tr>" * 60_000 + "</table>").encode()
    worded = (b"Revenue rose in fiscal 2024. " * (len(digits) // 29 + 1))[: len(digits)]
    t0 = time.monotonic()
    out = ask_with_file(server.url, "worded.txt", worded)
    t_worded = time.monotonic() - t0
    assert not out.get("isError"), out
    for name, data in (("digits.txt", digits), ("ones.html", table)):
        t0 = time.monotonic()
        out = ask_with_file(server.url, name, data)
        took = time.monotonic() - t0
        assert not out.get("isError"), json.dumps(out)[:300]
        assert "answer" in out["structuredContent"], json.dumps(out)[:300]
        print(f"{name}: answered in {took:.1f} s (a worded text of the same size {t_worded:.1f} s)")
        assert took <= 4 * t_worded, (took, t_worded)
    TALLY.add(inputs=2)


# ------------------------------------------------------------------ 5: uploads owned by their sender
def from_address(address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (another 127.x address: another client to the app)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=600)


def test_uploads_are_owned_by_the_client_that_sent_them(server):
    """Finding 5, the figure: files stored for the same bytes from two clients (2), and the other's after one
    client used its own (still there)."""
    note = b"Net sales rose 4% to $391 billion in fiscal 2024. " * 10
    url = server.url
    with from_address("127.0.0.2") as a, from_address("127.0.0.3") as b:
        paths = []
        for http in (a, b):
            r = http.post(url + "/gradio_api/upload", files=[("files", ("note.txt", note))])
            TALLY.response(r.status_code, r.text)
            assert r.status_code == 200, r.text[:300]
            paths.append(r.json()[0])
        pa, pb = paths
        assert pa != pb and os.path.isfile(pa) and os.path.isfile(pb), paths
        stolen = mcp_call(
            url,
            "ask_document",
            {"question": "What rose?", "max_tokens": 1, "document": {"upload": pa, "filename": "note.txt"}},
            b,
        )
        assert stolen.get("isError") and "from this client" in json.dumps(stolen), stolen
        assert os.path.isfile(pa), "a refused call deleted the owner's upload"
        mine = mcp_call(
            url,
            "ask_document",
            {"question": "What rose?", "max_tokens": 1, "document": {"upload": pa, "filename": "note.txt"}},
            a,
        )
        assert not mine.get("isError"), mine
        assert not os.path.exists(pa) and os.path.isfile(pb), "one client's use deleted the other's upload"
        theirs = mcp_call(
            url,
            "ask_document",
            {"question": "What rose?", "max_tokens": 1, "document": {"upload": pb, "filename": "note.txt"}},
            b,
        )
        assert not theirs.get("isError"), theirs
    TALLY.add(inputs=4)


# ------------------------------------------------------------------ 4: per-fact work linear in the document
def continuation_file(facts: int = 2000, empties: int = 150_000) -> bytes:
    head = (
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" '
        'xmlns:xbrli="http://www.xbrl.org/2003/instance"><body><ix:header><ix:resources><xbrli:context id="c">'
        '<xbrli:period><xbrli:instant>2024-12-31</xbrli:instant></xbrli:period></xbrli:context>'
        '</ix:resources></ix:header>'
    )
    tagged = "".join(
        f'<p><ix:nonNumeric name="us-gaap:Note{i}" contextRef="c" continuedAt="k">Revenue rose</ix:nonNumeric></p>'
        for i in range(facts)
    )
    return (
        head + tagged + '<ix:continuation id="k">' + "<i></i>" * empties + "</ix:continuation></body></html>"
    ).encode()


def test_a_continuation_reached_by_every_fact_is_read_once_and_holds_no_slot(server):
    """Finding 4: the hostile file's time against a real 10-K's (2 MB) through the same route, and a third
    client's small document while two clients send the hostile file, against that document alone."""
    url, hostile = server.url, continuation_file()
    real = filing("nvda-10-k-2025-02-26.html").read_bytes()
    note = b"EBITDA rose 4% in fiscal 2024."

    def timed(http: httpx.Client, name: str, data: bytes) -> float:
        t0 = time.monotonic()
        out = mcp_call(
            url,
            "ask_document",
            {
                "question": "What rose?",
                "max_tokens": 1,
                "document": {"data": base64.b64encode(data).decode(), "filename": name},
            },
            http,
        )
        assert not out.get("isError"), json.dumps(out)[:300]
        return time.monotonic() - t0

    with from_address("127.0.0.4") as a, from_address("127.0.0.5") as b, from_address("127.0.0.6") as c:
        t_note = timed(c, "note.txt", note)
        t_real = timed(a, "nvda.html", real)
        t_hostile = timed(a, "notes.html", hostile)
        both = [threading.Thread(target=timed, args=(http, "notes.html", hostile)) for http in (a, b)]
        for t in both:
            t.start()
        time.sleep(min(1.0, t_hostile / 4))  # both converting
        t_third = timed(c, "note.txt", note)
        for t in both:
            t.join(300)
    print(
        f"continuation file: {t_hostile:.1f} s (a real 10-K {t_real:.1f} s); a third client's note "
        f"{t_third:.1f} s beside two of them ({t_note:.1f} s alone)"
    )
    assert t_hostile <= 3 * t_real, (t_hostile, t_real)
    # it may wait for one of them (two conversions share two cores here): never for the converter's bound
    assert t_third <= 2 * t_hostile + 3 * t_note, (t_third, t_hostile, t_note)
    TALLY.add(inputs=4)
