"""The "Will it fit?" tab: any model (a Hub repo id or a pasted config.json) on any known GPU, before it is loaded.

It shows the planner's verdict (with GPUs > 1 the layout: TP x PP x DP, KV capacity and concurrent
sequences per replica and in total; and the sampler warm-up's verdict), the breakdown bars the memory panel draws for the
loaded model (weights, KV cache, activation, overhead, free, per GPU) and the
ranked fixes. The same check is the Gradio API's ``/fit`` (finspace.ui.api). A
config.json is pasted as text, not uploaded: the app takes no files.
"""

from __future__ import annotations

import html
import math
from typing import Any

import gradio as gr
import pandas as pd

from finspace.errors import FinspaceError
from finspace.host.hardware import KNOWN_GPUS
from finspace.service import Service
from finspace.ui import views
from finspace.ui.api import user_error

DTYPES = ["auto", "bfloat16", "float16", "float32"]
QUANTS = ["none", "fp8", "awq", "gptq", "bitsandbytes", "compressed-tensors", "mxfp4"]


def plan_bars(plan: dict | None) -> pd.DataFrame:
    """One stacked bar per GPU of the plan: its parts and what is left, in GiB (every part always present)."""
    parts = {
        "weights": "weights_gib",
        "KV cache": "kv_cache_gib",
        "activation": "activation_gib",
        "overhead": "overhead_gib",
    }
    values = {name: float(plan.get(key) or 0) if plan else 0.0 for name, key in parts.items()}
    total = float(plan.get("gpu_total_gib") or 0) if plan else 0.0
    values["free"] = max(0.0, round(total - sum(values.values()), 3))
    return pd.DataFrame(
        [{"bar": "planned, per GPU", "part": k, "GiB": v} for k, v in values.items()], columns=["bar", "part", "GiB"]
    )


def verdict_markdown(result: dict, host_has_gpu: bool = True) -> str:
    """The verdict, its reason, the layout and the fixes. ``host_has_gpu`` False (a CPU host): the GPUs are the
    ones picked in the tab, never this machine's, and the verdict says so."""
    mark = "✓ starts" if result["fits"] else "✗ won't start"
    head = (
        f"**{mark}** · {html.escape(result['source'])} on {result['gpus']} × {html.escape(result['gpu'])}"
        f" · max context {result['max_model_len']:,} tokens"
    )
    fixes = [
        f"{i}. **{html.escape(s['title'])}**: {html.escape(s['why'])}" for i, s in enumerate(result["suggestions"], 1)
    ]
    out = [head]
    if not host_has_gpu:
        out += [
            "",
            f"This host has no GPU: the plan is for the {result['gpus']} × {html.escape(result['gpu'])} picked here.",
        ]
    out += ["", html.escape(result["reason"])]
    # the sampler warm-up runs only once the engine starts: under a won't-start verdict it has no memory to report
    out += layout_lines(result.get("cluster"), result.get("sampler_warmup") if result["fits"] else None)
    if fixes:
        out += ["", "**Ranked fixes** (each re-checked by the planner):", *fixes]
    return "\n".join(out)


def layout_lines(cluster: dict | None, warm: dict | None) -> list[str]:
    """The cluster's layout (GPUs > 1): TP x PP x DP, KV capacity and concurrent sequences per replica and in
    total; and the sampler warm-up's verdict."""
    out = []
    if cluster:
        c = cluster
        how = "the planner's pick" if c["chosen"] == "auto" else "as given"
        idle = f", {c['idle_gpus']} idle" if c["idle_gpus"] else ""
        out += [
            "",
            f"**Layout** ({how}): {c['gpus']} GPUs = TP {c['tensor_parallel_size']} × PP "
            f"{c['pipeline_parallel_size']} × DP {c['data_parallel_size']}{idle}",
        ]
        if c["fits"]:
            out += [
                f"- per replica: KV cache {c['kv_cache_tokens_per_replica']:,} tokens, "
                f"{c['max_concurrency_per_replica']:.2f} sequences of {c['context']:,} tokens at once "
                f"({c['concurrent_seqs_per_replica']:,} with max_num_seqs {c['max_num_seqs']})",
                f"- total (× {c['data_parallel_size']}): KV cache {c['kv_cache_tokens_total']:,} tokens, "
                f"{c['max_concurrency_total']:.2f} sequences at once ({c['concurrent_seqs_total']:,})",
            ]
    if warm and warm["requests"]:
        verdict = "fits" if warm["fits"] else "**does not fit**"
        out += [
            "",
            f"Sampler warm-up {verdict}: {warm['requests']:,} requests × the vocabulary need "
            f"{warm['peak_bytes'] / 2**30:.2f} GiB, {max(0, warm['free_bytes']) / 2**30:.2f} GiB free "
            f"after the KV cache and CUDA graphs",
        ]
    return out


def gpus_count(value: Any) -> Any:
    """The GPUs box as a whole number; anything else (NaN, infinity, text) as it is, for check_fit to refuse."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value if value is None or isinstance(value, int) else str(value)[:20]


def build_fit_tab(svc: Service) -> None:
    """The tab's components and its event (call inside ``with gr.Tab(...)``)."""
    gr.Markdown(
        "Plan any model before loading it: a catalogue key (planned from its bundled config.json), a Hub "
        "repo id, or its config.json pasted below. The planner predicts what vLLM does at start-up on the "
        "GPU you pick."
    )
    ins = _inputs(svc.serving.gpu.key if svc.serving.gpu is not None else "l40s")
    verdict, bars, breakdown = _outputs()
    check = ins.pop("check")
    check.click(
        _runner(svc),
        inputs=list(ins.values()),
        outputs=[verdict, bars, breakdown],
        api_visibility="private",
        concurrency_limit=4,
        show_progress="minimal",
    )


def _inputs(default_gpu: str) -> dict[str, Any]:
    """The model (key, repo or config.json), the GPU and the engine settings, in the event's input order."""
    with gr.Row():
        with gr.Column(scale=3):
            repo = gr.Textbox(
                label="Catalogue key or Hub repo id",
                elem_id="fit-repo",
                placeholder="e.g. qwen-3-8b-fin, or Qwen/Qwen3-30B-A3B on the Hub",
            )
            config = gr.Code(label="…or paste its config.json", language="json", lines=8, elem_id="fit-config")
        with gr.Column(scale=2):
            gpu = gr.Dropdown(list(KNOWN_GPUS), value=default_gpu, label="GPU", elem_id="fit-gpu")
            gpus = gr.Number(
                value=1,
                precision=0,
                minimum=1,
                maximum=64,
                label="GPUs (over 1: sized as a cluster, TP × PP × DP)",
                elem_id="fit-gpus",
            )
            max_len = gr.Number(
                value=None,
                precision=0,
                minimum=0,
                label="max_model_len (empty or 0: the largest that fits)",
                elem_id="fit-max-len",
            )
            dtype = gr.Dropdown(DTYPES, value="auto", label="dtype", elem_id="fit-dtype")
            quant = gr.Dropdown(QUANTS, value="none", label="quantization", elem_id="fit-quant")
            util = gr.Slider(0.05, 1.0, value=0.9, step=0.01, label="gpu_memory_utilization", elem_id="fit-util")
    check = gr.Button("Will it fit?", variant="primary", elem_id="fit-check")
    return dict(
        repo=repo, config=config, gpu=gpu, gpus=gpus, max_len=max_len, dtype=dtype, quant=quant, util=util, check=check
    )


def _outputs() -> tuple[Any, Any, Any]:
    """The verdict, the planned breakdown per GPU as bars, and the arithmetic."""
    verdict = gr.Markdown(elem_id="fit-verdict")
    bars = gr.BarPlot(
        x="bar",
        y="GiB",
        color="part",
        title="Planned breakdown per GPU",
        height=200,
        elem_id="fit-plot",
        x_title="",
        y_title="GiB",
        color_map=views.PART_COLORS,
        sort=None,
    )
    breakdown = gr.Code(label="The arithmetic", language=None, interactive=False, elem_id="fit-breakdown")

    return verdict, bars, breakdown


def _runner(svc: Service):
    """The event's handler: the plan through svc.fits (bounded per client and in time, shared with /fit)."""

    async def run(
        repo_: Any,
        config_: Any,
        gpu_: Any,
        gpus_: Any,
        max_len_: Any,
        dtype_: Any,
        quant_: Any,
        util_: Any,
        request: gr.Request,
    ):
        try:  # bounded per client and in time, shared with /fit (fit_runner.py)
            result = await svc.fits.run(
                svc.client_of(request),
                config_,
                repo_,
                gpu_,
                gpus_count(gpus_),
                max_model_len=max_len_ or None,
                dtype=dtype_,
                quantization=None if quant_ == "none" else quant_,
                gpu_memory_utilization=util_,
            )
        except FinspaceError as exc:
            raise gr.Error(html.escape(svc.redact(str(exc))), print_exception=False) from None
        except Exception as exc:  # noqa: BLE001 - the boundary: never a raw Python message in the tab
            raise user_error(svc, exc) from None
        return verdict_markdown(result, svc.serving.gpu is not None), plan_bars(result["plan"]), result["breakdown"]

    return run
