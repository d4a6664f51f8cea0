"""Issue 41's server-side bounds, each replayed against the shared "surface" server (`python app.py`, tiny models
on vLLM CPU) and measured against a baseline taken in the same run: every test failed on the code before it.

1. A 1.4 KB schema of 20 ``$defs`` each naming the next twice (``$ref`` and ``items``, or
   ``additionalProperties`` and ``items``), as ``response_format`` or a tool's ``parameters``: the cost check was
   exponential (14 s here) inside the async handler, so ``/health`` from another client waited as long. Now it is
   refused with a 400 about as fast as any other bad schema, and ``/health`` stays as fast as its baseline.
"""

from __future__ import annotations

import statistics
import threading
import time

import httpx
import pytest

from rel_utils import SURFACE_ADMIN, SURFACE_HF_TOKEN, TALLY, assert_clean, baseline, still_serving

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server(surface_server):
    surface_server.baseline = baseline(surface_server)
    return surface_server


def client(ip: str) -> dict:
    return {"X-Forwarded-For": ip}


def chained_defs(levels: int = 20, how: str = "ref") -> dict:
    """``levels`` definitions, each naming the next twice: 2**levels walks for a checker that does not memoise."""
    defs = {}
    for i in range(levels):
        nxt = {"$ref": f"#/$defs/d{i + 1}"} if i + 1 < levels else {"type": "string"}
        defs[f"d{i}"] = ({"$ref": nxt["$ref"], "items": nxt} if how == "ref" and i + 1 < levels else
                         {"additionalProperties": nxt, "items": nxt} if how != "ref" else nxt)
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
    r = httpx.post(url + "/v1/chat/completions", json=body, headers=client(ip), timeout=300)
    TALLY.add(inputs=1)
    TALLY.response(r.status_code, r.text)
    return time.monotonic() - t0, r


def health_s(url: str) -> float:
    t0 = time.monotonic()
    httpx.get(url + "/health", headers=client("198.51.100.9"), timeout=300).raise_for_status()
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
    threads = [threading.Thread(target=lambda b=b, i=i: results.append(timed_post(url, b, f"198.51.100.{20 + i}")))
               for i, b in enumerate(hostile)]
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
    print(f"chained schema: 400 in {slowest * 1e3:.0f} ms (a plain bad schema {plain_s * 1e3:.0f} ms); /health "
          f"{max(during) * 1e3:.0f} ms under it (baseline {health_base * 1e3:.0f} ms)")
    # four at once against one: a bounded check costs about what parsing the request does
    assert slowest <= 4 * 10 * plain_s, (slowest, plain_s)
    assert statistics.median(during) <= 10 * health_base + 4 * plain_s, (during, health_base)
    still_serving(server)
