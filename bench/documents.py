"""Time to first token on a document: a first question, then a follow-up, finspace against vLLM's own server.

    .venv/bin/python bench/documents.py [--rounds 3] [--doc-tokens 6000] [--tokens 16]

The model is the catalogue's `demo` (bench-llama, random weights), served with max_model_len 8,192 instead of
its catalogue's 1,024 (a ~6,000-token document does not fit 1,024): the bench writes its own one-entry
catalogue, and the checkpoint's max_position_embeddings is raised to 8,192 in the bench's copy (rope: the same
weights). Both servers get float32, max_model_len 8192, enforce_eager, the same KV pool, prefix caching at
vLLM's default (on; finspace does not set it), greedy decoding, --tokens output tokens.

Each round makes a new PDF of about --doc-tokens tokens (fpdf2; its first line names the round, so no round's
document is in either server's prefix cache), then:

* finspace (`app.py`), through the page's own events over Gradio's queue, as the analyst does it: the
  document attached (upload, conversion, fit table: untimed, it is "before anything runs"), then the first
  question, then a follow-up, in one session. TTFT: the question's join to the first update that shows the
  model's reply.
* vLLM's server (`python -m vllm.entrypoints.openai.api_server`), streaming chat completions with the same
  messages finspace's engine builds: the system prompt and the document block (finspace.documents, the same
  conversion), the question; for the follow-up the first exchange, then the follow-up. TTFT: request sent to
  the first content delta.

The servers run one after another (finspace, then vLLM). Figures are the median over rounds. Last line:
`followup_over_first=R1 first_ttft_over_vllm=R2` (targets: R1 <= 0.3, R2 <= 1.1).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    MODEL_KEY,
    ROOT,
    ServerProcess,
    install_cleanup,
    prepare_model,
    sse_lines,  # noqa: E402
    start_pair_server,
    write_catalog,
)

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
import documents_gen as gen  # noqa: E402
from support.catalog import long_context_copy  # noqa: E402

CONTEXT = 8192
FIRST = "Which division had the largest widget backlog, and how large was it?"
FOLLOWUP = "And which division had the smallest?"


def make_document(folder: Path, round_no: int, doc_tokens: int, tok) -> Path:
    """A PDF of about ``doc_tokens`` tokens of the model's tokenizer; its first line names the round."""
    per_page = len(
        tok(
            "\n".join(["Page 1 of the annual report.", gen.page_fact(1), gen.FILLER, gen.FILLER]),
            add_special_tokens=False,
        )["input_ids"]
    )
    pages = max(1, round(doc_tokens / per_page))
    facts = {1: f"Report {round_no}-{uuid.uuid4().hex[:8]}. {gen.page_fact(1)}"}
    return gen.pdf(folder / f"report-{round_no}.pdf", pages=pages, facts=facts)


def document_system(entry: dict, path: Path) -> tuple[str, int]:
    """The system message finspace's engine builds for a document that fits: the system prompt, then the block."""
    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits
    from finspace.documents.placing import whole_block

    doc = convert(path, path.name, DocumentLimits())
    return f"{entry['system_prompt']}\n\n{whole_block(doc)}", len(doc.pages)


# ------------------------------------------------------------------ finspace: the page's events
class Page:
    """One Gradio session of the page: attach, then questions (the chat box's submit events)."""

    def __init__(self, url: str):
        self.url, self.session = url, uuid.uuid4().hex[:11]
        self.http = httpx.Client(timeout=300)
        config = self.http.get(url + "/config").json()
        ids = {c.get("props", {}).get("elem_id"): c["id"] for c in config["components"]}
        deps = config["dependencies"]
        self.respond_fn = next(d["id"] for d in deps if ids["doc-fit"] in d["outputs"] and len(d["inputs"]) == 9)

    def _event(self, fn_index: int, data: list, answers_before: int = 0) -> tuple[float | None, dict]:
        """(seconds from the join to the first update whose conversation shows more than ``answers_before``
        replies, the completed message). Updates after the first are diffs: applied as gradio_client does."""
        from gradio_client.utils import apply_diff

        t0, chat = time.perf_counter(), None
        r = self.http.post(
            self.url + "/gradio_api/queue/join",
            json={"data": data, "fn_index": fn_index, "session_hash": self.session, "trigger_id": None},
        )
        r.raise_for_status()
        first = None
        with self.http.stream("GET", self.url + "/gradio_api/queue/data", params={"session_hash": self.session}) as s:
            for line in sse_lines_sync(s.iter_bytes()):
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_generating":
                    out = (msg.get("output") or {}).get("data", [None])[0]
                    chat = out if chat is None else apply_diff(chat, out)
                    replies = (
                        sum(1 for m in chat if isinstance(m, dict) and m.get("role") == "assistant")
                        if isinstance(chat, list)
                        else 0
                    )
                    if first is None and replies > answers_before:
                        first = time.perf_counter() - t0
                if msg.get("msg") == "process_completed":
                    if not msg.get("success"):
                        raise RuntimeError(f"finspace: the event failed: {str(msg)[:300]}")
                    return first, msg
        raise RuntimeError("finspace: the event stream ended early")

    def attach(self, path: Path) -> str:
        r = self.http.post(self.url + "/gradio_api/upload", files={"files": (path.name, path.read_bytes())})
        r.raise_for_status()
        ref = {"path": r.json()[0], "url": None, "orig_name": path.name, "meta": {"_type": "gradio.FileData"}}
        _, msg = self._event(self.respond_fn, [{"text": "", "files": [ref]}, None, None, 0.0, 8, 1.0, None, True, None])
        return next(v for v in msg["output"]["data"] if isinstance(v, str) and "tokens" in v)

    def ask(self, question: str, tokens: int, answers_before: int) -> float:
        ttft, _ = self._event(
            self.respond_fn,
            [{"text": question, "files": []}, None, None, 0.0, tokens, 1.0, None, True, None],
            answers_before,
        )
        if ttft is None:
            raise RuntimeError("finspace: no reply text arrived")
        return ttft


def sse_lines_sync(chunks):
    from support.sse import sse_lines as lines

    return lines(chunks)


# ------------------------------------------------------------------ vLLM's server
def vllm_ask(url: str, messages: list[dict], tokens: int) -> tuple[float, str]:
    import asyncio

    async def go():
        body = {
            "model": MODEL_KEY,
            "messages": messages,
            "max_tokens": tokens,
            "temperature": 0.0,
            "top_p": 1.0,
            "stream": True,
        }
        t0, first, parts = time.perf_counter(), None, []
        async with httpx.AsyncClient(timeout=300) as c, c.stream("POST", url + "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                raise RuntimeError(f"vLLM: HTTP {r.status_code}: {(await r.aread())[:300]!r}")
            async for line in sse_lines(r.aiter_bytes()):
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                text = "".join((ch.get("delta") or {}).get("content") or "" for ch in json.loads(line[5:])["choices"])
                if text:
                    first = first or time.perf_counter() - t0
                    parts.append(text)
        return first, "".join(parts)

    first, text = asyncio.run(go())
    if first is None:
        raise RuntimeError("vLLM: no reply text arrived")
    return first, text


# ------------------------------------------------------------------ main
def start(which: str, model_path: Path, catalog: Path, workdir: Path, kv_mib: int) -> ServerProcess:
    return start_pair_server(which, model_path, catalog, workdir, kv_mib, CONTEXT)


def prepare(workdir: Path) -> tuple[Path, Path, dict]:
    model_path, _, entry = prepare_model(workdir)
    long_path = workdir / "models" / "demo-8k"
    if not long_path.exists():
        long_context_copy(model_path, long_path, CONTEXT)
    entry = {**entry, "path": str(long_path), "serving": {**entry["serving"], "max_model_len": CONTEXT}}
    return long_path, write_catalog(workdir / "catalog8k", {MODEL_KEY: entry}, default=MODEL_KEY), entry


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--doc-tokens", type=int, default=6000)
    ap.add_argument("--tokens", type=int, default=16, help="output tokens per reply (default 16)")
    ap.add_argument("--kv-mib", type=int, default=512)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    install_cleanup()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="finspace-bench-docs-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    model_path, catalog, entry = prepare(workdir)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    docs = [make_document(workdir, r, args.doc_tokens, tok) for r in range(args.rounds + 1)]  # 0: warm-up
    fs: dict[str, list[float]] = {"first": [], "followup": []}
    vl: dict[str, list[float]] = {"first": [], "followup": []}

    srv = start("finspace", model_path, catalog, workdir, args.kv_mib)
    try:
        for r, path in enumerate(docs):
            page = Page(srv.url)
            table = page.attach(path)
            first, followup = page.ask(FIRST, args.tokens, 0), page.ask(FOLLOWUP, args.tokens, 1)
            if r:
                fs["first"].append(first), fs["followup"].append(followup)
            else:
                print("fit table:\n" + table)
    finally:
        srv.stop()
    srv = start("vllm", model_path, catalog, workdir, args.kv_mib)
    try:
        for r, path in enumerate(docs):
            system, pages = document_system(entry, path)
            messages = [{"role": "system", "content": system}, {"role": "user", "content": FIRST}]
            first, answer = vllm_ask(srv.url, messages, args.tokens)
            messages += [{"role": "assistant", "content": answer.strip()}, {"role": "user", "content": FOLLOWUP}]
            followup, _ = vllm_ask(srv.url, messages, args.tokens)
            if r:
                vl["first"].append(first), vl["followup"].append(followup)
            else:
                n = len(
                    tok.apply_chat_template(messages[:2], tokenize=True, add_generation_prompt=True, return_dict=True)[
                        "input_ids"
                    ]
                )
                print(f"document: {pages} pages, first prompt {n} tokens (max_model_len {CONTEXT})")
    finally:
        srv.stop()

    med = {
        k: statistics.median(v)
        for k, v in (
            ("fs_first", fs["first"]),
            ("fs_followup", fs["followup"]),
            ("vl_first", vl["first"]),
            ("vl_followup", vl["followup"]),
        )
    }
    print(f"{'':24} {'first question':>16} {'follow-up':>12}   (TTFT, median of {args.rounds} rounds)")
    print(
        f"{'finspace (page events)':24} {med['fs_first'] * 1000:14.0f} ms {med['fs_followup'] * 1000:9.0f} ms   "
        f"rounds: {', '.join(f'{a * 1000:.0f}/{b * 1000:.0f}' for a, b in zip(fs['first'], fs['followup']))}"
    )
    print(
        f"{'vLLM server':24} {med['vl_first'] * 1000:14.0f} ms {med['vl_followup'] * 1000:9.0f} ms   "
        f"rounds: {', '.join(f'{a * 1000:.0f}/{b * 1000:.0f}' for a, b in zip(vl['first'], vl['followup']))}"
    )
    print(f"vLLM's own follow-up/first: {med['vl_followup'] / med['vl_first']:.3f}")
    print(
        f"followup_over_first={med['fs_followup'] / med['fs_first']:.3f} "
        f"first_ttft_over_vllm={med['fs_first'] / med['vl_first']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
