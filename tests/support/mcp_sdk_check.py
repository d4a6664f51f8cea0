"""Serve finspace's McpEndpoint (on a stand-in Service) with whichever ``mcp`` SDK this interpreter imports, on
127.0.0.1, and print what raw JSON-RPC calls get back as one JSON object (tests/test_mcp_sdk.py runs it in a
subprocess, once per SDK major: the SDK is chosen by PYTHONPATH)."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import json
import socket
import threading
import time

import httpx
import uvicorn
from fastapi import FastAPI

from finspace.errors import Unauthorized
from finspace.mcp_server.endpoint import MCP_PATH, McpEndpoint
from finspace.settings import Settings

TOKEN = "t" * 20


class StandIn:
    versions = {"finspace": "0"}
    settings = Settings(admin_token=TOKEN)
    switching = "token"

    def authorize(self, token, client=None, action=""):
        if token != TOKEN:
            raise Unauthorized("the admin token is wrong")

    def redact(self, text):
        return text

    def health(self):
        return {"ready": True, "model": "demo"}, 200

    def provenance(self):  # Service.provenance: the serving model's, for a reply's record
        return None


def main() -> None:
    endpoint = McpEndpoint(StandIn(), max_body_bytes=1 << 20)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with endpoint.run():
            yield

    app = FastAPI(lifespan=lifespan)
    app.router.add_route(MCP_PATH + "/", endpoint, methods=["POST"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    def rpc(method, params=None, token=None):
        headers = {
            "Accept": "application/json, text/event-stream",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        }
        r = httpx.post(
            f"http://127.0.0.1:{port}{MCP_PATH}/",
            headers=headers,
            timeout=30,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}},
        )
        return r.json()["result"]

    def text(result):
        return {
            "isError": bool(result.get("isError")),
            "text": result["content"][0]["text"],
            "structured": result.get("structuredContent"),
        }

    out = {
        "sdk": md.version("mcp"),
        "problem": endpoint.problem,
        "tools": [t["name"] for t in rpc("tools/list")["tools"]],
        "admin_tools": [t["name"] for t in rpc("tools/list", token=TOKEN)["tools"]],
        "health": text(rpc("tools/call", {"name": "health", "arguments": {}})),
        "bad": text(rpc("tools/call", {"name": "will_it_fit", "arguments": {"gpus": "two"}})),
        "unknown": text(rpc("tools/call", {"name": "nope", "arguments": {}})),
        "switch": text(rpc("tools/call", {"name": "load_model", "arguments": {"model": "x"}})),
    }
    print(json.dumps(out))
    server.should_exit = True
    thread.join(10)


if __name__ == "__main__":
    main()
