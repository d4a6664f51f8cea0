"""The sampler's warm-up: a transient peak after the KV cache and the CUDA graphs are in place, and its fixes.

What vLLM 0.32 does (``vllm/v1/worker/gpu_worker.py``, ``compile_or_warm_up_model``, "Warm up sampler"):
after ``capture_model`` (so after the KV cache is allocated and the graphs are captured), the last pipeline
rank runs ``_dummy_run(num_tokens=min(max_num_seqs, max_num_batched_tokens))`` and then
``GPUModelRunner._dummy_sampler_run`` (``gpu_model_runner.py``) on those requests' hidden states: logits
over the whole vocabulary (``compute_logits``, then float32 in the sampler) with ``top_k = vocab - 1`` and
``top_p = 0.9``, so top-k/top-p sorts every row (``apply_top_k_top_p``: ``logits.sort`` gives float32
values and int64 indices), and the sampler runs twice (``forward`` and ``forward_native``). An out-of-memory
there is "CUDA out of memory occurred when warming up sampler with N dummy requests. Please try lowering
`max_num_seqs` or `gpu_memory_utilization`".

The peak, per logit (request x vocab entry): ``SAMPLER_WARMUP_BYTES_PER_LOGIT`` = 16 B: the float32 logits
(4 B) alive while the sort's values and indices (4 + 8 = 12 B) are allocated. The 12 B is what the reported
failures tried to allocate: "Tried to allocate 1.74 GiB" with 1024 dummy requests over Qwen's 151,936-token
vocabulary (llm-d/llm-d#787, Qwen3-32B; vllm-project/vllm#15105): 1024 x 151,936 x 12 B = 1.74 GiB.

What is free then. The KV cache was sized to leave the profiling run's transient peak (``activation``) and
the CUDA-graph estimate (vLLM >= 0.21) inside ``requested``; graphs outside the budget (0.19 rules, unless
enforce_eager) come out of what is left.

* Before any of that, the non-torch memory held at the worker's memory snapshot (the CUDA context: 0.51 GiB
  on one H100; with TP or PP the communicators too: 1.43-1.55 GiB) is outside ``requested`` and never in
  vLLM's budget, so it comes out of the slack too (``memory.init_non_torch_bytes``).
* Then ``free = total - requested - init non-torch + activation - graphs outside the budget``: the
  profile's transient is free again (the profile run calls the same ``_dummy_sampler_run`` on the same
  requests), on one GPU and with TP or PP alike. Every measured start says so: gemma-3-12b-it at 1024
  sequences and 0.95 on one H100 (3.96 GiB of slack less 0.51 of context and 0.94 of graphs would not hold
  its 4.0 GiB warm-up), and Llama 3.1 8B at TP 2, TP 4, PP 2 and PP 4 at 0.95 (3.96 less 1.43-1.53 of
  context and communicators and 0.5-0.8 of graphs would not hold its 1.96 GiB).
* Except a mixture-of-experts model before vLLM 0.32: its MoE workspace grows in steps during the profile,
  and a later small allocation carved out of a freed multi-GiB block pins the whole segment past the
  profile's ``empty_cache()`` (what vllm 0.32's ``_scoped_allocator_max_split`` in ``gpu_worker.py`` fixes,
  as its comment says). Measured (llm-d-planner's v0.19.0 run matrix): gpt-oss-20b on one H100 at 0.95
  failed "sampler warmup OOM (~786 MiB needed, <552 MiB free)": 3.96 - 0.51 - 1.84 GiB of graphs leaves
  1.61 GiB, and the warm-up's bf16 and float32 logits (0.39 + 0.77 GiB) leave under 0.55 for the next 0.77,
  so its 2.87 GiB transient was not free; at TP 2 it failed at 0.95 and started at 0.90. For those the
  transient is not counted. Older reports (llm-d/llm-d#787 Qwen3-32B at TP 2, vllm-project/vllm#15105 and
  #14452) name no version or settings to replay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from finspace.errors import BadInput, ConfigError
from finspace.planner.result import Plan, Suggestion
from finspace.planner.settings import Settings
from finspace.planner.shape import ModelShape
from finspace.units import fmt_size

#: float32 logits (4 B) + the sort's float32 values and int64 indices (12 B); see the module docstring.
SAMPLER_WARMUP_BYTES_PER_LOGIT = 16
#: The lowest gpu_memory_utilization a warm-up fix may propose.
MIN_UTILIZATION = 0.50


@dataclass(frozen=True)
class Warmup:
    """The sampler warm-up on one rank (the last pipeline stage; 0 requests on the others)."""

    requests: int  # min(max_num_seqs, max_num_batched_tokens)
    peak_bytes: int  # requests x vocab x 16 B
    free_bytes: int  # total - requested - init non-torch (+ activation) - graphs outside the budget

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.free_bytes


def sampler_warmup(
    shape: ModelShape,
    total_bytes: int,
    requested_bytes: int,
    activation: int,
    graphs_outside_budget: int,
    init_non_torch: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    *,
    transient_freed: bool,
) -> Warmup:
    """The warm-up's peak and what is free for it (see the module docstring); ``transient_freed``: the
    profile's transient (``activation``) is free again (``transient_freed``)."""
    reqs = min(max_num_seqs, max_num_batched_tokens) if shape.has_lm_head else 0
    free = (
        total_bytes - requested_bytes - init_non_torch - graphs_outside_budget + (activation if transient_freed else 0)
    )
    return Warmup(reqs, reqs * shape.vocab_size * SAMPLER_WARMUP_BYTES_PER_LOGIT, free)


def transient_freed(shape: ModelShape, v: tuple[int, ...]) -> bool:
    """Whether the profile's transient is free again at the warm-up: not for an MoE model before vLLM 0.32
    (see the module docstring)."""
    return shape.moe is None or v >= (0, 32)


def problem(w: Warmup, gpu_name: str, util: float) -> str:
    """The verdict's text when the warm-up does not fit."""
    vocab = w.peak_bytes // max(1, w.requests * SAMPLER_WARMUP_BYTES_PER_LOGIT)
    return (
        f"the sampler warm-up after the KV cache is allocated needs {fmt_size(w.peak_bytes, places=2)} GiB "
        f"({w.requests:,} requests x {vocab:,} vocab x {SAMPLER_WARMUP_BYTES_PER_LOGIT} B) and "
        f"{fmt_size(max(0, w.free_bytes), places=2)} GiB is free on {gpu_name} at utilization {util:.2f}: vLLM "
        f"stops with \"CUDA out of memory occurred when warming up sampler\""
    )


#: (settings) -> the plan under them, without fixes; BadInput / ConfigError for settings vLLM refuses.
Check = Callable[[Settings], Plan]


def _starts(check: Check, s: Settings) -> Plan | None:
    try:
        p = check(s)
    except (BadInput, ConfigError):
        return None
    return p if p.fits else None


def fixes(base: Plan, check: Check) -> list[Suggestion]:
    """vLLM's two fixes, in its message's order, each re-checked with ``check``: the largest max_num_seqs
    that starts, and the largest gpu_memory_utilization below the current one that starts."""
    out = []
    seqs = _largest_seqs(base, check)
    if seqs is not None:
        s2, p2 = seqs
        out.append(
            Suggestion(
                f"lower max_num_seqs to {s2.max_num_seqs}",
                s2,
                p2.max_model_len,
                f"the warm-up then samples {p2.detail.warmup_requests:,} requests: "
                f"{fmt_size(p2.detail.warmup_bytes, places=2)} GiB of the {fmt_size(p2.detail.warmup_free_bytes, places=2)}"
                f" GiB free; the KV cache holds {p2.kv_cache_tokens:,} tokens (was {base.kv_cache_tokens:,})",
                base.gpus,
                p2.kv_cache_tokens,
            )
        )
    util = _largest_util(base, check)
    if util is not None:
        s3, p3 = util
        out.append(
            Suggestion(
                f"lower gpu_memory_utilization to {s3.gpu_memory_utilization:.2f}",
                s3,
                p3.max_model_len,
                f"leaves {fmt_size(p3.detail.warmup_free_bytes, places=2)} GiB free for the warm-up's "
                f"{fmt_size(p3.detail.warmup_bytes, places=2)} GiB; the KV cache shrinks to {p3.kv_cache_tokens:,} tokens "
                f"(from {base.kv_cache_tokens:,})",
                base.gpus,
                p3.kv_cache_tokens,
            )
        )
    return out


def _largest_seqs(base: Plan, check: Check) -> tuple[Settings, Plan] | None:
    """Bisect max_num_seqs in [1, current - 1]: fewer sequences never need more memory."""
    s = base.settings
    asked = replace(s, max_model_len=base.max_model_len) if s.max_model_len == -1 else s
    if s.max_num_seqs is None:  # a plan's settings are resolved: vLLM's default filled in
        return None
    lo, hi, best = 1, s.max_num_seqs - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        s2 = replace(asked, max_num_seqs=mid)
        p = _starts(check, s2)
        if p is not None:
            best, lo = (s2, p), mid + 1
        else:
            hi = mid - 1
    return best


def _largest_util(base: Plan, check: Check) -> tuple[Settings, Plan] | None:
    """Step gpu_memory_utilization down by 0.01 until the warm-up fits; that one, if the plan then starts."""
    s = base.settings
    k = round(s.gpu_memory_utilization * 100) - 1
    while k >= round(MIN_UTILIZATION * 100):
        s2 = replace(s, gpu_memory_utilization=round(k / 100, 2))
        try:
            p = check(s2)
        except (BadInput, ConfigError):
            return None
        if p.detail.warmup_bytes <= p.detail.warmup_free_bytes:
            return (s2, p) if p.fits else None
        k -= 1
    return None
