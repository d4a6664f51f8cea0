"""Plans for people and programs: the all-models table, one model's breakdown with its arithmetic,
and the stable JSON of a plan (``plan_json``, the ``--json`` object, the ledger's and the API's).

Numbers come from finspace.planner; this module only formats them.
"""

from __future__ import annotations

from finspace.host.hardware import GPUSpec
from finspace.planner import Plan
from finspace.planner.cluster import MIN_CONCURRENCY, ClusterPlan
from finspace.planner.export import cluster_json, plan_json, settings_json, warmup_json
from finspace.units import fmt_size

__all__ = [
    "breakdown",
    "cluster_text",
    "cluster_json",
    "columns",
    "fit_table",
    "plan_json",
    "settings_json",
    "warmup_text",
]


def _count(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _settings_line(p: Plan) -> str:
    s, d = p.settings, p.detail
    dtype = s.dtype if s.dtype == d.dtype else f"{s.dtype}→{d.dtype}"
    parts = [
        f"dtype {dtype}",
        f"quantization {d.quant}",
        f"kv_cache_dtype {s.kv_cache_dtype}",
        f"max_model_len {p.max_model_len:,}",
        f"gpu_memory_utilization {s.gpu_memory_utilization:.2f}",
        f"tensor_parallel_size {s.tensor_parallel_size}",
        *([f"pipeline_parallel_size {s.pipeline_parallel_size}"] if s.pipeline_parallel_size > 1 else []),
        f"max_num_batched_tokens {s.max_num_batched_tokens:,}",
        f"max_num_seqs {s.max_num_seqs}",
    ]
    return ", ".join(parts)


def _short_settings(p: Plan) -> str:
    s, d = p.settings, p.detail
    bits = [d.dtype if d.quant == "none" else (s.quantization or d.quant.split(" ")[0])]
    if s.kv_cache_dtype != "auto":
        bits.append(f"kv {s.kv_cache_dtype}")
    if s.tensor_parallel_size > 1:
        bits.append(f"tp{s.tensor_parallel_size}")
    if s.pipeline_parallel_size > 1:
        bits.append(f"pp{s.pipeline_parallel_size}")
    bits.append(f"util {s.gpu_memory_utilization:.2f}")
    bits.append(f"len {p.max_model_len}")
    return " ".join(bits)


def columns(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Text columns: the head, a rule, the rows; every column but the last (free text) padded to its widest."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]

    def fmt(row: tuple[str, ...]) -> str:
        return ("  ".join(c.ljust(w) for c, w in zip(row[:-1], widths)) + "  " + row[-1]).rstrip()

    return [fmt(head), fmt(tuple("-" * w for w in widths) + ("-" * len(head[-1]),)), *(fmt(r) for r in rows)]


def fit_table(rows: list[tuple[str, Plan | Exception]], gpu: GPUSpec, gpus: int | None) -> str:
    """One line per model; reasons and fixes for the ones that do not start follow the table."""
    head = ("model", "settings", "weights", "KV/token", "KV budget", "max context", "verdict", "fix")
    lines: list[tuple[str, ...]] = []
    notes: list[str] = []
    for key, p in rows:
        if isinstance(p, Exception):
            lines.append((key, "-", "-", "-", "-", "-", "error", str(p)[:60]))
            notes.append(f"{key}: {p}")
            continue
        ctx = f"{p.max_model_len_that_fits:,}"
        verdict = "starts" if p.fits else "WON'T START"
        # the first fix that runs on this machine's GPUs (the planner ranks those first)
        here = [sg for sg in p.suggestions if sg.gpus <= p.gpus] or list(p.suggestions)
        fix = "-" if p.fits else (here[0].title if here else "bigger GPU")
        lines.append(
            (
                key,
                _short_settings(p),
                f"{fmt_size(p.weights_bytes)} GiB",
                fmt_size(p.kv_bytes_per_token, "KiB", 0, with_unit=True),
                f"{fmt_size(p.kv_cache_bytes)} GiB",
                ctx,
                verdict,
                fix,
            )
        )
        if not p.fits:
            notes.append(f"{key}: {p.reason}")
    if gpus is None:
        out = [
            f"{gpu.name} ({fmt_size(gpu.total_bytes)} GiB); figures per GPU; "
            "a model with tensor_parallel_size N is planned on N of them"
        ]
    else:
        out = [f"{gpus} x {gpu.name} ({fmt_size(gpu.total_bytes)} GiB each); figures per GPU"]
    out.extend(columns(head, lines))
    if notes:
        out.append("")
        out.extend(notes)
    out.append("")
    out.append(
        "max context: the longest max_model_len whose KV cache fits (capped at the model's limit). "
        "`python -m finspace fit MODEL` shows the arithmetic."
    )
    return "\n".join(out)


def breakdown(p: Plan, label: str = "") -> str:
    """One plan, step by step, with each figure's arithmetic."""
    s = p.settings
    gname = p.gpu.name
    out = []
    title = f"{label} on " if label else ""
    out.append(
        f"{title}{p.gpus} x {gname} ({fmt_size(p.gpu.total_bytes)} GiB each), vLLM {s.vllm_version} rules, per GPU"
    )
    out.append(f"settings: {_settings_line(p)}")
    out.append("")
    out.extend(_budget_lines(p))
    out.extend(_kv_lines(p))
    out.extend(_verdict_lines(p))
    return "\n".join(out)


def _budget_lines(p: Plan) -> list[str]:
    """The budget and what comes off it before the KV cache: weights, activation, overhead."""
    s, d = p.settings, p.detail
    out = []
    out.append(
        f"  budget        {fmt_size(p.gpu.total_bytes)} GiB x {s.gpu_memory_utilization:.2f}"
        f" = {fmt_size(p.requested_bytes)} GiB"
    )
    # weights
    src = " (checkpoint's total_size)" if d.weights_source == "total_size" else ""
    parts = " + ".join(f"{_count(n)} {k} x {b:.4g} B" for k, n, b in d.weight_parts if n)
    out.append(
        f"- weights       {fmt_size(p.weights_bytes)} GiB: {_count(d.num_params)} params{src};"
        f" this GPU holds {_count(d.rank_params)}: {parts}"
    )
    out.append(f"                + rotary caches {fmt_size(d.buffer_bytes)} GiB")
    act = (
        f"held hidden {fmt_size(d.held_bytes)} + max(sampler {fmt_size(d.sampler_bytes)}, "
        f"forward {fmt_size(d.forward_bytes)})"
    )
    if d.vision_bytes:
        act += f" + vision profile {fmt_size(d.vision_bytes)}"
    out.append(
        f"- activation    {fmt_size(p.activation_bytes)} GiB: {act}"
        f" ({d.max_num_batched_tokens:,} batched tokens, {d.max_num_seqs} sequences)"
    )
    graphs = f"CUDA graphs {fmt_size(d.cudagraph_bytes)}" if d.cudagraph_bytes else "CUDA graphs not in the budget"
    out.append(f"- overhead      {fmt_size(p.overhead_bytes)} GiB: non-torch {fmt_size(d.non_torch_bytes)} + {graphs}")
    out.append(f"= KV cache      {fmt_size(d.available_kv_bytes)} GiB")
    out.append("")
    return out


def _kv_lines(p: Plan) -> list[str]:
    """The KV cache: bytes per token, sliding windows, blocks, capacity."""
    s, d = p.settings, p.detail
    out = []
    layers = d.full_layers + d.sliding_layers
    per_layer = p.kv_bytes_per_token // max(1, layers)
    if d.mla_latent:
        out.append(
            f"  KV per token  {layers} layers x {d.mla_latent} MLA latent (kv_lora_rank + qk_rope_head_dim) x "
            f"{d.kv_dtype_bytes} B = {p.kv_bytes_per_token:,} B ({fmt_size(p.kv_bytes_per_token, 'KiB', 0)} KiB)"
        )
    else:
        out.append(
            f"  KV per token  {layers} layers x 2 x {d.kv_heads_per_rank} KV heads x "
            f"{per_layer // (2 * max(1, d.kv_heads_per_rank) * d.kv_dtype_bytes)} head_dim x "
            f"{d.kv_dtype_bytes} B = {p.kv_bytes_per_token:,} B "
            f"({fmt_size(p.kv_bytes_per_token, 'KiB', 0)} KiB)"
        )
    if d.sliding_layers:
        out.append(
            f"                {d.sliding_layers} of {layers} layers use a {d.sliding_window}-token sliding window: "
            f"each holds at most {d.sliding_window} - 1 + {d.in_flight_tokens:,} in-flight tokens per request"
        )
    out.append(
        f"  blocks        {fmt_size(p.kv_cache_bytes)} GiB / ({d.group_size} layers x {s.block_size} tokens x "
        f"{fmt_size(d.page_bytes // s.block_size, 'KiB', 0)} KiB = "
        f"{fmt_size(d.block_bytes, 'KiB', 0)} KiB) = {d.kv_cache_blocks:,} blocks"
        + (f" shared by {d.num_groups} layer groups" if d.num_groups > 1 else "")
    )
    out.append(
        f"  capacity      {p.kv_cache_tokens:,} tokens; one request of {p.max_model_len:,} tokens needs "
        f"{fmt_size(d.request_kv_bytes)} GiB"
    )
    out.append("")
    return out


def _verdict_lines(p: Plan) -> list[str]:
    """The verdict, the longest context, the pipeline stages, the fixes and the notes."""
    d = p.detail
    out = []
    if p.fits:
        out.append(f"verdict: STARTS: {p.reason.removeprefix('starts: ')}")
    else:
        out.append(f"verdict: WON'T START: {p.reason}")
    if p.fits:
        out.append(f"max concurrency {p.max_concurrency:.2f} requests of {p.max_model_len:,} tokens")
    out.append(f"longest max_model_len that fits: {p.max_model_len_that_fits:,} (model limit {d.model_max_len:,})")
    for st in p.stages:
        out.append(
            f"  stage {st.index}: layers {st.first_layer}-{st.end_layer - 1}, weights {fmt_size(st.weights_bytes)} GiB, "
            f"activation {fmt_size(st.activation_bytes)} GiB, KV cache {fmt_size(st.kv_cache_bytes)} GiB = "
            f"{st.kv_cache_tokens:,} tokens, longest max_model_len {st.max_model_len_that_fits:,}"
            + ("" if st.fits else " (does not start)")
        )
    if p.suggestions:
        out.append("")
        out.append("fixes, each re-checked by the planner:")
        for i, sg in enumerate(p.suggestions, 1):
            out.append(
                f"  {i}. {sg.title}: max_model_len {sg.plan_max_model_len:,}, "
                f"{sg.kv_cache_tokens:,} KV tokens. {sg.why}"
            )
    for n in p.notes:
        out.append(f"note: {n}")
    return out


def warmup_text(p: Plan) -> str:
    """The sampler warm-up's verdict in one line."""
    w = warmup_json(p)
    if not w["requests"]:
        return "sampler warm-up: none (no lm_head on this rank)"
    verdict = "fits" if w["fits"] else "DOES NOT FIT"
    return (
        f"sampler warm-up {verdict}: {w['requests']:,} requests x full vocab need {fmt_size(w['peak_bytes'])} GiB, "
        f"{fmt_size(max(0, w['free_bytes']))} GiB free after the KV cache and CUDA graphs"
    )


def cluster_text(c: ClusterPlan) -> str:
    """The layout and what it serves, per replica and in total."""
    how = "the planner's pick" if c.chosen == "auto" else "as given"
    idle = f", {c.idle_gpus} idle" if c.idle_gpus else ""
    out = [f"layout ({how}): {c.gpus} GPUs ({c.gpus_per_node} per node) = TP {c.tp} x PP {c.pp} x DP {c.dp}{idle}"]
    skipped = [
        f"TP {t} x PP {p} starts but holds {conc:.2f}"
        for t, p, conc in c.tried
        if 0 < conc and (t, p) != (c.tp, c.pp) and c.tp * c.pp > t * p
    ]
    if skipped and c.chosen == "auto":
        out.append(f"  ({'; '.join(skipped)} sequences of {c.context:,} tokens: fewer than {MIN_CONCURRENCY})")
    if not c.fits:
        tried = ", ".join(f"TP {t} x PP {p}" for t, p, _ in c.tried)
        head = "this layout does not start" if c.chosen == "given" else f"no layout starts (tried {tried})"
        out.append(f"  {head}: {c.replica.reason}")
        out.append(f"  {warmup_text(c.replica)}")
        return "\n".join(out)
    out.append(
        f"  per replica   {c.tp * c.pp} GPUs, KV cache {c.kv_tokens_per_replica:,} tokens, "
        f"{c.concurrency_per_replica:.2f} sequences of {c.context:,} tokens at once "
        f"({c.seqs_per_replica:,} with max_num_seqs {c.replica.settings.max_num_seqs})"
    )
    out.append(
        f"  total (x{c.dp})   KV cache {c.kv_tokens_total:,} tokens, {c.concurrency_total:.2f} sequences of "
        f"{c.context:,} tokens at once ({c.seqs_total:,})"
    )
    out.append(f"  {warmup_text(c.replica)}")
    return "\n".join(out)
