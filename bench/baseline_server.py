"""The one-at-a-time baseline for bench/serving.py: one ``vllm.LLM``, one request at a time under a lock.

This is the design that queues users: a server that owns a synchronous engine
and serves each request to completion before the next starts, so vLLM never
batches two users together. It streams (default): under the lock it adds the
request to ``llm.llm_engine`` and steps the engine, sending each step's new
text as a server-sent event, so time to first token includes the wait for the
lock. ``--no-stream`` instead holds the lock around ``LLM.generate`` and
answers with one JSON body (the most common form of this design).

    python bench/baseline_server.py --model PATH --port 8001 [--no-stream]
        [--dtype float32 --max-model-len 1024 --kv-cache-memory-bytes N --enforce-eager]

    GET  /health     200 once the engine is loaded (the port opens only then)
    POST /generate   {"messages": [{"role", "content"}], "max_tokens": 128, "temperature": 0.0, "stream": true}
                     stream: text/event-stream of {"text": delta} events, then {"done": true,
                     "tokens": N, "prompt_tokens": P}; otherwise JSON {"text", "tokens", "prompt_tokens"}

On SIGTERM uvicorn shuts down and the lifespan stops the engine core
(``llm.llm_engine.engine_core.shutdown()``: the sync LLM has no shutdown() in 0.32).
"""

import argparse
import asyncio
import contextlib
import itertools
import json
import logging

log = logging.getLogger("baseline")


def build_app(llm, *, stream_default: bool):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    lock = asyncio.Lock()  # FIFO: users queue in arrival order
    engine = llm.llm_engine
    tok = llm.get_tokenizer()
    ids_counter = itertools.count()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        try:
            yield
        finally:
            log.info("stopping the engine core")
            with contextlib.suppress(Exception):
                engine.engine_core.shutdown()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    def encode(messages: list[dict]) -> list[int]:
        ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    @app.post("/generate")
    async def generate(request: Request):
        body = await request.json()
        ids = encode(body["messages"])
        max_tokens = int(body.get("max_tokens", 128))
        temperature = float(body.get("temperature", 0.0))
        stream = bool(body.get("stream", stream_default))
        if not stream:
            params = SamplingParams(temperature=temperature, max_tokens=max_tokens)
            async with lock:
                outs = await asyncio.to_thread(llm.generate, [{"prompt_token_ids": ids}], params, use_tqdm=False)
            o = outs[0].outputs[0]
            return JSONResponse({"text": o.text, "tokens": len(o.token_ids), "prompt_tokens": len(ids)})

        params = SamplingParams(temperature=temperature, max_tokens=max_tokens, output_kind=RequestOutputKind.DELTA)

        async def events():
            async with lock:
                rid = f"base-{next(ids_counter)}"
                engine.add_request(rid, {"prompt_token_ids": ids}, params)
                n, finished = 0, False
                try:
                    while not finished:
                        for out in await asyncio.to_thread(engine.step):
                            if out.request_id != rid:
                                continue  # leftovers of an aborted request
                            o = out.outputs[0]
                            n += len(o.token_ids)
                            finished = out.finished
                            if o.text:
                                yield f"data: {json.dumps({'text': o.text})}\n\n"
                    yield f"data: {json.dumps({'done': True, 'tokens': n, 'prompt_tokens': len(ids)})}\n\n"
                finally:
                    if not finished:  # the client went away: drop the request before the next user's turn
                        engine.abort_request([rid])
                        while engine.has_unfinished_requests():
                            await asyncio.to_thread(engine.step)

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8001)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--kv-cache-memory-bytes", type=int, default=256 << 20)
    ap.add_argument("--enforce-eager", action="store_true", default=True)
    ap.add_argument(
        "--no-stream",
        dest="stream",
        action="store_false",
        help="answer each request with one JSON body from LLM.generate (default: stream per step)",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from vllm import LLM

    kwargs = dict(
        model=args.model,
        tokenizer=args.model,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        enforce_eager=args.enforce_eager,
    )
    if args.kv_cache_memory_bytes:
        kwargs["kv_cache_memory_bytes"] = args.kv_cache_memory_bytes
    llm = LLM(**kwargs)
    app = build_app(llm, stream_default=args.stream)

    import uvicorn

    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=5)
    finally:
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
