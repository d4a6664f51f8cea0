"""A bare Gradio app over vLLM's AsyncLLM: the reference for what Gradio itself costs (bench/paired.py's `g`).

Issue 5's own prototype, kept so the claim can be checked: one ``gr.api`` endpoint ``/chat`` with the
signature finspace's has (message, history, system_prompt, temperature, max_tokens), so the same
gradio_client driver calls both; the reply coalesced to at most one update per ``--interval-ms`` (50) with
no stretching under load; served by ``demo.launch()``. Nothing else: no catalogue, planner, model picker,
memory panel, queue bound, trimming or error translation. The same engine settings as bench/serving.py's
other servers. What it tells: finspace's /chat against this is what finspace adds on top of Gradio;
this against vLLM's server (b) is what Gradio and gradio_client cost.

    python bench/bare_gradio.py --model PATH --port 8002 --system-prompt TEXT
        [--dtype float32 --max-model-len 1024 --kv-cache-memory-bytes N --interval-ms 50]

GET / answers (the page) once the engine is loaded: the port opens only then.
"""

from __future__ import annotations

import argparse
import signal
import time
import uuid


def build_demo(llm, tokenizer, default_system: str, interval_s: float):
    import gradio as gr
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    async def chat(
        message: str,
        history: list | None = None,
        system_prompt: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        system = system_prompt or default_system  # what finspace does with "": the catalogue's prompt
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": message}]
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        params = SamplingParams(
            temperature=temperature or 0.0, max_tokens=max_tokens or 128, output_kind=RequestOutputKind.DELTA
        )
        text, last, pending = "", 0.0, False
        async for out in llm.generate({"prompt_token_ids": list(ids)}, params, uuid.uuid4().hex):
            delta = out.outputs[0].text
            if not delta:
                continue
            text += delta
            pending = True
            now = time.monotonic()
            if now - last >= interval_s:
                last, pending = now, False
                yield text
        if pending:
            yield text

    with gr.Blocks() as demo:
        gr.api(chat, api_name="chat", concurrency_limit=None)
    demo.queue(default_concurrency_limit=None)
    return demo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--system-prompt", default="")
    ap.add_argument("--interval-ms", type=float, default=50.0)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--kv-cache-memory-bytes", type=int, default=256 << 20)
    ap.add_argument("--enforce-eager", action="store_true")
    args = ap.parse_args()

    from transformers import AutoTokenizer
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    llm = AsyncLLM.from_engine_args(
        AsyncEngineArgs(
            model=args.model,
            dtype=args.dtype,
            max_model_len=args.max_model_len,
            enforce_eager=args.enforce_eager,
            kv_cache_memory_bytes=args.kv_cache_memory_bytes,
        )
    )
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    demo = build_demo(llm, tokenizer, args.system_prompt, args.interval_ms / 1000.0)
    # SIGTERM (bench/common.py's stop) as Ctrl-C: launch() then closes its server and the engine is shut
    # down here, so its shared memory is released rather than left to the process-group SIGKILL
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        demo.launch(server_name="127.0.0.1", server_port=args.port, show_error=True)
    finally:
        llm.shutdown()


if __name__ == "__main__":
    main()
