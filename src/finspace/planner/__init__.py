"""GPU-memory planner: will this model start under vLLM on this GPU, and with what context?

Pure arithmetic on a model's config.json: no torch, no vllm, no I/O. Every figure
is per GPU (per tensor-parallel rank), in integer bytes, like vLLM's own logs.

What vLLM does, and where (file/function names; 0.19.0 and 0.32/0.33 wheels, see
shared/vllm-memory-mechanism.md, checked against the installed vllm 0.32 source):

* Budget: ``requested = ceil(total_memory * gpu_memory_utilization)``
  (``vllm/v1/worker/utils.py::request_memory``, called from ``Worker.init_device``).
  ``total_memory`` is what CUDA reports (``hardware.GPUSpec.total_bytes``).
* KV budget: ``available_kv = requested - non_kv`` where ``non_kv = weights +
  torch activation peak of the profiling run + non-torch memory`` and, from
  vLLM 0.21 on, ``- cudagraph_estimate`` (``Worker.determine_available_memory``
  in ``vllm/v1/worker/gpu_worker.py``; ``vllm/utils/mem_utils.py::memory_profiling``;
  ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 0 in 0.19, 1 since 0.21).
  ``Settings.vllm_version`` picks the rules: "0.32" (default, our CUDA target)
  subtracts CUDA-graph memory, "0.19" (the calibration logs) does not.
* Weights (``model_runner.model_memory_usage``, logged "Model loading took"):
  parameters counted from the config (llama, mistral, qwen2, qwen3, gemma2,
  gemma3 + SigLIP tower + projector, gemma3_text, gpt_neox) times the serving
  dtype, plus the rotary cos/sin caches vLLM registers as buffers
  (``vllm/model_executor/layers/rotary_embedding/base.py``: ``max_positions x
  rotary_dim`` in the model dtype; linear/dynamic/YaRN scaling multiplies the
  positions by ``factor``, ``linear_scaling_rope.py``). Per rank with tensor
  parallelism: linear layers and the vocab-parallel embedding/lm_head are split,
  norms and biases of row-parallel layers are replicated, KV heads are
  replicated when tp > kv_heads. dtype "auto" follows torch_dtype, float32
  checkpoints serve as bf16 (``vllm/config/model.py::_resolve_auto_dtype``).
  Quantization: online fp8 keeps embeddings and lm_head in bf16
  (``layers/quantization/fp8.py``); AWQ/GPTQ/compressed-tensors int4 add
  group scales (+ zero points when asymmetric); bitsandbytes nf4 adds an fp32
  absmax per 64 weights. vLLM 0.32 no longer ships bitsandbytes
  (``layers/quantization/__init__.py::QuantizationMethods``), so it is refused
  under the 0.32 rules.
* Activation peak: ``GPUModelRunner.profile_run`` (``gpu_model_runner.py``):
  multimodal encoder profile, one dummy forward of ``max_num_batched_tokens``
  tokens, then ``_dummy_sampler_run`` over ``min(max_num_seqs, tokens)``
  requests' logits (full vocab on every rank). Fitted to the 0.19 H100 logs
  (see ``activation_bytes`` below). Defaults for max_num_batched_tokens /
  max_num_seqs: ``EngineArgs.get_batch_defaults`` and
  ``_set_default_max_num_seqs_and_batched_tokens_args`` (``vllm/engine/arg_utils.py``);
  ``AsyncLLM.from_engine_args`` uses ``UsageContext.ENGINE_CONTEXT``, which is
  not in that table, so an in-process engine gets ``SchedulerConfig``'s
  2048 tokens / 128 sequences on every GPU (``vllm serve`` gets 2048/256 on
  GPUs < 70 GiB, 8192/1024 on H100/H200).
* KV bytes: page per layer per block = ``2 x block_size x kv_heads_per_rank x
  head_dim x kv_dtype_bytes`` (``vllm/v1/kv_cache_interface.py::AttentionSpec``),
  ``kv_heads_per_rank = max(1, kv_heads // tp)`` (``ModelConfig.get_num_kv_heads``).
  fp8 KV = 1 byte. Hybrid sliding-window models (Gemma 2/3): layers grouped by
  spec, ``group_size = min(#layers per type)`` (max if max < 1.5 min), one
  shared block pool of ``group_size x page`` bytes per block
  (``kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size``); a sliding
  layer needs ``cdiv(min(window - 1 + T, max_model_len), block_size) + 1``
  blocks per request (``SlidingWindowSpec.max_admission_blocks_per_request``),
  ``T = max_num_batched_tokens`` in 0.19 and ``max_in_flight_tokens =
  2 x max_num_batched_tokens`` (async scheduling) in 0.32.
* Start check: ``kv_cache_utils.py::check_enough_kv_cache_memory`` /
  ``_check_enough_kv_cache_memory``: refuse when ``available <= 0`` or when one
  ``max_model_len`` request (sum over layers of ``max_memory_usage_bytes``)
  exceeds it; 0.32 first holds back one block (the null block).
  ``estimate_max_model_len`` binary-searches the largest length that fits.
  ``max_model_len=-1`` auto-fits (``_auto_fit_max_model_len``).
* Reported capacity: tokens = ``num_blocks // num_groups x block_size`` and
  concurrency = ``num_blocks / sum over groups of blocks per request``
  (``_report_kv_cache_config``, ``get_max_concurrency_for_kv_cache_config``).

Calibration (tests/test_calibration.py, ten vLLM 0.19 H100 start-up logs):
mean |error| weights 0.10%, KV cache 0.07%; worst weights -0.74% (GPTQ w4a16),
worst KV +0.27% (float32). The weights and KV-layout formulas are derived, not
fitted; the activation and non-torch constants below were fitted on those same
logs, so the KV figures are in-sample. The Gemma 3 rotary cache (0.56 GiB: the
global layers' linear x8 scaling makes it 1,048,576 positions long) explains
most of the gap between its parameters (22.70 GiB) and vLLM's 23.31 GiB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from finspace.errors import BadInput, ConfigError
from finspace.hardware import GPUSpec
from finspace.planner.settings import (
    CURRENT_VLLM, DEFAULT_BLOCK_SIZE, KV_CACHE_DTYPES, QUANTIZATIONS, USAGE_CONTEXTS,
    VLLM_DEFAULT_GPU_MEMORY_UTILIZATION, VLLM_VERSIONS, Settings, batch_defaults, check_gpu_memory_utilization,
    resolve_batch, resolve_dtype, resolve_quant, validate, version,
)
from finspace.planner.memory import (
    KvCapacity, activation_bytes, cudagraphs_counted, kv_capacity, kv_dtype_bytes, kv_layout, max_len_that_fits,
    overhead, weights,
)
from finspace.planner.shape import (
    DTYPE_ALIASES, DTYPE_BYTES, SUPPORTED_ARCHITECTURES, ModelShape, QuantScheme, VisionShape, cdiv, inventory,
    model_shape, tp_on_machine, tp_splits,
)
from finspace.units import GIB, fmt_size, in_gib

#: The highest utilization the planner suggests: leaves ~2 GiB on a 48 GB card
#: for the CUDA context and allocator slack.
SAFE_MAX_UTILIZATION = 0.95
#: The shortest context a "lower max_model_len" suggestion may propose.
MIN_USEFUL_CONTEXT = 1024


# ---------------------------------------------------------------------------
# Settings and plans
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Suggestion:
    title: str  # e.g. "use kv_cache_dtype fp8"
    settings: Settings
    plan_max_model_len: int
    why: str
    gpus: int = 1  # GPUs the suggested plan needs
    kv_cache_tokens: int = 0
    config_change: str | None = None  # e.g. "an AWQ 4-bit checkpoint" when the repo must change


@dataclass(frozen=True)
class PlanDetail:
    """The pieces behind the totals, for showing the arithmetic."""

    architecture: str = ""
    num_params: int = 0
    rank_params: int = 0
    dtype: str = "bfloat16"  # resolved serving dtype
    kv_dtype_bytes: int = 2
    quant: str = "none"
    weight_parts: tuple[tuple[str, int, float], ...] = ()  # (kind, params, bytes/param)
    buffer_bytes: int = 0  # rotary caches
    weights_source: str = "config"  # or "total_size"
    non_torch_bytes: int = 0
    cudagraph_bytes: int = 0  # subtracted from the budget (0 under 0.19 rules)
    sampler_bytes: int = 0
    forward_bytes: int = 0
    held_bytes: int = 0
    vision_bytes: int = 0
    max_num_batched_tokens: int = 0
    max_num_seqs: int = 0
    model_max_len: int = 0
    kv_heads_per_rank: int = 0
    page_bytes: int = 0  # one layer, one block
    block_bytes: int = 0  # one block of the shared pool (group_size layers)
    num_groups: int = 1
    group_size: int = 0
    full_layers: int = 0
    sliding_layers: int = 0
    sliding_window: int | None = None
    in_flight_tokens: int = 0
    kv_cache_blocks: int = 0
    request_kv_bytes: int = 0  # one max_model_len request
    available_kv_bytes: int = 0  # what the start check compares against (may be < 0)


@dataclass(frozen=True)
class Plan:
    gpu: GPUSpec
    gpus: int
    settings: Settings  # as resolved: max_model_len, max_num_batched_tokens, max_num_seqs filled in
    weights_bytes: int
    kv_bytes_per_token: int
    activation_bytes: int
    overhead_bytes: int  # non-torch + CUDA graphs (when counted)
    requested_bytes: int  # total x utilization, per GPU
    kv_cache_bytes: int
    kv_cache_tokens: int
    max_model_len: int
    max_model_len_that_fits: int
    max_concurrency: float
    fits: bool
    reason: str
    suggestions: tuple[Suggestion, ...] = ()
    detail: PlanDetail = field(default_factory=PlanDetail)
    notes: tuple[str, ...] = ()


def _gpu_short(gpu: GPUSpec) -> str:
    return gpu.name.replace("NVIDIA ", "")


def _round_context(n: int) -> int:
    if n >= 8192:
        return n // 1024 * 1024
    if n >= 1024:
        return n // 256 * 256
    return n


def plan(
    config: dict,
    gpu: GPUSpec,
    settings: Settings = Settings(),
    *,
    gpus: int = 1,
    total_size_bytes: int | None = None,
) -> Plan:
    """Plan one model on one machine (``gpus`` GPUs of type ``gpu``).

    Raises ConfigError for a config it cannot read and BadInput for settings
    vLLM would reject outright (bad values, quantization that does not match
    the checkpoint). Everything else, including "does not fit", is a Plan
    with ``fits`` and ``reason``; a failing plan carries re-checked suggestions.
    """
    validate(settings, gpus)
    shape = model_shape(config)
    if total_size_bytes is not None and (isinstance(total_size_bytes, bool) or total_size_bytes <= 0):
        raise BadInput(f"total_size_bytes must be positive, got {total_size_bytes!r}")
    return _plan(config, shape, gpu, settings, gpus, total_size_bytes, suggest=True)


def _plan(config, shape, gpu, s, gpus, total_size, *, suggest: bool) -> Plan:
    v = version(s.vllm_version)
    tp = s.tensor_parallel_size
    dtype = resolve_dtype(s, shape)
    dbytes = DTYPE_BYTES[dtype]
    quant = resolve_quant(s, shape)
    notes: list[str] = []
    if s.dtype == "auto" and shape.torch_dtype in (None, "float32"):
        notes.append(f"checkpoint is {shape.torch_dtype or 'float32 (assumed)'}; vLLM serves it as bfloat16")

    # --- lengths and batch sizes
    model_max = shape.derived_max_model_len
    auto_fit = s.max_model_len == -1
    length = model_max if (s.max_model_len is None or auto_fit) else s.max_model_len
    mnbt, seqs = resolve_batch(s, gpu, length)

    # --- weights, activation, overhead
    w = weights(shape, quant, dtype, tp, total_size)
    act = activation_bytes(shape, dbytes, mnbt, seqs, tp)
    non_torch, cudagraph = overhead(shape, s)
    graphs_counted = cudagraphs_counted(s)
    overhead_bytes = non_torch + cudagraph
    requested = math.ceil(gpu.total_bytes * s.gpu_memory_utilization)
    available = requested - w.bytes - act["total"] - overhead_bytes

    # --- KV cache
    kv_bytes_el = kv_dtype_bytes(s.kv_cache_dtype, dtype)
    kv = kv_layout(shape, s, kv_bytes_el, tp, mnbt, v)
    kv_rank = max(1, shape.num_kv_heads // tp)
    per_token = shape.num_layers * 2 * kv_rank * shape.head_dim * kv_bytes_el
    kv_cache = max(0, available)
    blocks = kv_cache // kv.block_bytes
    tokens = blocks // len(kv.groups) * s.block_size
    check_avail = available - (kv.block_bytes if v >= (0, 32) else 0)
    fit_len = max_len_that_fits(kv, check_avail, model_max)
    if auto_fit:
        length = fit_len if fit_len > 0 else model_max
    need = kv.request_bytes(length)
    bpr = kv.blocks_per_request(length)
    concurrency = round(blocks / bpr, 2) if bpr else 0.0

    resolved = replace(s, max_model_len=length, max_num_batched_tokens=mnbt, max_num_seqs=seqs)
    detail = PlanDetail(
        architecture=shape.architecture, num_params=shape.num_params, rank_params=w.rank_params,
        dtype=dtype, kv_dtype_bytes=kv_bytes_el, quant=quant.label if quant else "none",
        weight_parts=w.parts, buffer_bytes=w.buffer_bytes, weights_source=w.source,
        non_torch_bytes=non_torch, cudagraph_bytes=cudagraph,
        sampler_bytes=act["sampler"], forward_bytes=act["forward"], held_bytes=act["held"], vision_bytes=act["vision"],
        max_num_batched_tokens=mnbt, max_num_seqs=seqs, model_max_len=model_max,
        kv_heads_per_rank=kv_rank, page_bytes=kv.page, block_bytes=kv.block_bytes,
        num_groups=len(kv.groups), group_size=kv.group_size,
        full_layers=shape.num_full_layers, sliding_layers=shape.num_sliding_layers,
        sliding_window=shape.sliding_window, in_flight_tokens=kv.in_flight,
        kv_cache_blocks=blocks, request_kv_bytes=need, available_kv_bytes=available,
    )
    if not graphs_counted and not s.enforce_eager:
        notes.append(f"vLLM {s.vllm_version} rules: CUDA graphs come out of the 1 - utilization slack")

    # --- verdict
    gname = _gpu_short(gpu)
    setting_problem = None
    own_fix = ""
    fix_settings: Settings | None = None
    if tp > gpus:
        local = tp_on_machine(shape, gpus)
        setting_problem = f"tensor_parallel_size {tp} needs {tp} GPUs; this machine has {gpus}"
        own_fix = f"Run on {tp} GPUs or lower tensor_parallel_size to {local}."
        fix_settings = replace(s, tensor_parallel_size=local)
    elif not tp_splits(shape, tp):
        setting_problem = (
            f"{shape.num_heads} attention heads ({shape.num_kv_heads} KV heads) do not split evenly over "
            f"tensor_parallel_size {tp}"
        )
        split = tp_on_machine(shape, tp)
        own_fix = f"Use a tensor_parallel_size that divides them, e.g. {split}."
        fix_settings = replace(s, tensor_parallel_size=split)
    elif s.max_model_len is not None and not auto_fit and s.max_model_len > model_max:
        setting_problem = (
            f"max_model_len {s.max_model_len} exceeds the model's limit {model_max} (from max_position_embeddings)"
        )
        own_fix = f"Lower max_model_len to {model_max} or less."
        fix_settings = replace(s, max_model_len=model_max)
    elif s.kv_cache_dtype.startswith("fp8") and not gpu.supports_fp8:
        cc = ".".join(map(str, gpu.compute_capability))
        setting_problem = f"kv_cache_dtype {s.kv_cache_dtype} needs compute capability 8.9+ (Ada/Hopper); {gname} is {cc}"
        own_fix = "Use kv_cache_dtype auto."
        fix_settings = replace(s, kv_cache_dtype="auto")
    elif quant is not None and quant.method == "bitsandbytes" and v >= (0, 32):
        setting_problem = f"vLLM {s.vllm_version} has no bitsandbytes quantization"
        own_fix = "Use an AWQ or GPTQ 4-bit checkpoint (quantization awq) or quantization fp8."
        fix_settings = replace(s, quantization=None)
    elif quant is not None and quant.method == "fp8" and gpu.compute_capability < (8, 0):
        setting_problem = f"fp8 weights need compute capability 8.0+; {gname} is older"
        own_fix = "Use a 4-bit checkpoint."
    fits = setting_problem is None
    problem = setting_problem
    mem_kind = None
    if fits:
        if w.bytes > requested:
            fits, mem_kind = False, "weights"
            problem = (
                f"weights {fmt_size(w.bytes, places=1)} GiB exceed the {fmt_size(requested, places=1)} GiB that gpu_memory_utilization "
                f"{s.gpu_memory_utilization:.2f} gives on {gname} ({fmt_size(gpu.total_bytes, places=1)} GiB)"
            )
        elif available <= 0:
            fits, mem_kind = False, "budget"
            problem = (
                f"no memory left for the KV cache: weights {fmt_size(w.bytes, places=1)} + activation {fmt_size(act['total'], places=1)} "
                f"+ overhead {fmt_size(overhead_bytes, places=1)} GiB exceed the {fmt_size(requested, places=1)} GiB that gpu_memory_utilization "
                f"{s.gpu_memory_utilization:.2f} gives on {gname}"
            )
        elif (auto_fit and fit_len <= 0) or need > check_avail:
            fits, mem_kind = False, "kv"
            problem = (
                f"max_model_len {length} needs {fmt_size(need, places=1)} GiB of KV cache; {fmt_size(max(0, check_avail), places=1)} GiB is free "
                f"on {gname} at utilization {s.gpu_memory_utilization:.2f}"
            )

    base = Plan(
        gpu=gpu, gpus=gpus, settings=resolved, weights_bytes=w.bytes, kv_bytes_per_token=per_token,
        activation_bytes=act["total"], overhead_bytes=overhead_bytes, requested_bytes=requested,
        kv_cache_bytes=kv_cache, kv_cache_tokens=tokens, max_model_len=length,
        max_model_len_that_fits=fit_len,
        max_concurrency=concurrency if fits else 0.0, fits=fits, reason="", detail=detail, notes=tuple(notes),
    )
    if fits:
        reason = (
            f"starts: {fmt_size(kv_cache, places=1)} GiB of KV cache holds {tokens:,} tokens; "
            f"{concurrency:.2f} requests of {length:,} tokens at once"
        )
        return replace(base, reason=reason)
    if not suggest:
        return replace(base, reason=problem + (". " + own_fix if own_fix else "."))

    sugg = _suggestions(config, shape, gpu, s, gpus, total_size, base, fix_settings)
    if sugg and mem_kind in ("weights", "budget"):
        fix = _fix_text(sugg, mem_kind)
        reason = problem + "; " + fix[0].lower() + fix[1:]
    elif sugg:
        reason = problem + ". " + _fix_text(sugg, mem_kind)
    elif setting_problem is not None:
        reason = problem + ". " + own_fix
    else:
        reason = problem + ". No single change the planner knows makes it fit; use a GPU with more memory."
    return replace(base, reason=reason, suggestions=tuple(sugg))


def _fix_text(sugg: list[Suggestion], mem_kind: str | None) -> str:
    phrases = []
    for sg in sugg[:3]:
        t = sg.title
        if mem_kind in ("weights", "budget") and t.startswith("raise gpu_memory_utilization to "):
            t = "raise it to ≥ " + t.rsplit(" ", 1)[1]
        phrases.append(t)
    text = phrases[-1] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " or " + phrases[-1]
    return text[0].upper() + text[1:] + "."


def awq_variant(config: dict) -> dict:
    """The same config as a 4-bit AWQ checkpoint (group 128, zero points, fp16)."""
    out = dict(config)
    out["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    if out.get("model_type") != "gemma3":
        out["torch_dtype"] = "float16"
    return out


_FOUR_BIT = ("awq", "awq_marlin", "gptq", "gptq_marlin", "bitsandbytes")


def _weight_level(sg: Suggestion, shape: ModelShape) -> int:
    """How far a suggestion's weights are from full precision: 0 model dtype, 1 fp8, 2 4-bit."""
    q = sg.settings.quantization
    if sg.config_change or q in _FOUR_BIT:
        return 2
    if q == "fp8":
        return 1
    if shape.quantization is not None:
        return 2 if shape.quantization.bits <= 4 else 1
    return 0


def _dominates(a: Suggestion, b: Suggestion, shape: ModelShape) -> bool:
    """a needs no more GPUs, quantizes no more and serves at least as long a context as b."""
    return (a.gpus <= b.gpus and _weight_level(a, shape) <= _weight_level(b, shape)
            and (a.settings.kv_cache_dtype.startswith("fp8") <= b.settings.kv_cache_dtype.startswith("fp8"))
            and a.plan_max_model_len >= b.plan_max_model_len)


def _suggestions(config, shape, gpu, s, gpus, total_size, base: Plan, fix_settings) -> list[Suggestion]:
    """Ranked fixes, each re-planned: first what runs on this machine's ``gpus`` GPUs, then what needs more.

    On this machine (tensor_parallel_size ``tp_here``: the entry's own, or, when it asks for
    more GPUs than there are, the largest power of two <= gpus that splits the heads):
    the setting fix, raise utilization, lower max_model_len, fp8 KV cache, fp8 weights, a 4-bit
    checkpoint. Each quantization/KV fix is tried as asked, then with utilization raised (<= 0.95),
    then with the longest context that fits (>= MIN_USEFUL_CONTEXT).
    Needing more GPUs: tensor parallel over N > tp_here GPUs (the smallest N that serves the
    requested length, and a smaller N with a shorter context), and the same for fp8 / 4-bit
    weights when they do not run on this machine. Of those, one that another beats on every
    count (GPUs, quantization, context) is dropped.
    """
    out: list[Suggestion] = []
    seen: set = set()
    length = base.max_model_len
    floor = min(MIN_USEFUL_CONTEXT, length)
    tp0 = s.tensor_parallel_size
    tp_here = tp0 if tp0 <= gpus else tp_on_machine(shape, gpus)
    here = replace(s, tensor_parallel_size=tp_here)
    at_tp = f" at tensor_parallel_size {tp_here}" if tp_here != tp0 else ""

    def try_plan(settings: Settings, n_gpus: int = gpus, cfg=None, shp=None):
        try:
            return _plan(cfg or config, shp or shape, gpu, settings, n_gpus, None if cfg else total_size, suggest=False)
        except (BadInput, ConfigError):
            return None

    def usable(p) -> bool:
        return p is not None and p.fits and p.max_model_len >= floor

    def add(title, settings, p, why, n_gpus=gpus, change=None):
        key = (settings, n_gpus, change)
        if not usable(p) or key in seen:
            return
        seen.add(key)
        if settings.max_model_len == -1:
            title += f" with max_model_len auto ({p.max_model_len})"
        out.append(Suggestion(title, settings, p.max_model_len, why, n_gpus, p.kv_cache_tokens, change))

    def least_util(settings: Settings, n_gpus: int = gpus, cfg=None, shp=None):
        """The least utilization (in hundredths, above the current, <= SAFE_MAX_UTILIZATION) that starts."""
        lo = math.floor(settings.gpu_memory_utilization * 100 + 1e-9) + 1
        hi = round(SAFE_MAX_UTILIZATION * 100)
        if lo > hi:
            return None

        def at(k: int):
            s2 = replace(settings, gpu_memory_utilization=round(k / 100, 2))
            return s2, try_plan(s2, n_gpus, cfg, shp)

        best = at(hi)
        if not usable(best[1]):
            return None
        while lo < hi:  # more memory never fits less (property-tested), so bisect
            mid = (lo + hi) // 2
            cand = at(mid)
            if usable(cand[1]):
                best, hi = cand, mid
            else:
                lo = mid + 1
        return best

    def fit_variant(title, settings, why, n_gpus=gpus, cfg=None, shp=None, change=None, *,
                    shorter=True, raise_util=True):
        """Add `settings` as asked, else with utilization raised, else with the longest context that
        fits (at its utilization, then at SAFE_MAX_UTILIZATION). Returns "full", "raised", "short" or None."""
        p = try_plan(settings, n_gpus, cfg, shp)
        if p is None:
            return None
        if usable(p):
            add(title, settings, p, why, n_gpus, change)
            return "full"
        raised = least_util(settings, n_gpus, cfg, shp) if raise_util else None
        if raised is not None:
            s2, p2 = raised
            add(f"{title} with gpu_memory_utilization {s2.gpu_memory_utilization:.2f}", s2, p2, why, n_gpus, change)
            return "raised"
        if not shorter or settings.max_model_len == -1:
            return None
        for u in (settings.gpu_memory_utilization, SAFE_MAX_UTILIZATION)[: 2 if raise_util else 1]:
            su = replace(settings, gpu_memory_utilization=u)
            pu = p if u == settings.gpu_memory_utilization else try_plan(su, n_gpus, cfg, shp)
            if pu is None:
                continue
            cut = _round_context(pu.max_model_len_that_fits)
            if floor <= cut < pu.max_model_len:
                s2 = replace(su, max_model_len=cut)
                p2 = try_plan(s2, n_gpus, cfg, shp)
                if usable(p2):
                    util = "" if u == settings.gpu_memory_utilization else f"gpu_memory_utilization {u:.2f} and "
                    add(f"{title} with {util}max_model_len {cut}", s2, p2, why, n_gpus, change)
                    return "short"
        return None

    # ---- on this machine
    plain = None  # how the settings themselves (setting fixed) start here: "full", "raised", "short", None
    if fix_settings is not None:
        before = len(out)
        plain = fit_variant("fix the setting", fix_settings, "the requested setting cannot work on this machine")
        if len(out) > before:
            first = out[before]
            out[before] = replace(first, title=_describe_change(s, first.settings))

    if tp_here == tp0:
        # 1. raise utilization, to the least value that fits (<= SAFE_MAX_UTILIZATION)
        raised = least_util(s)
        if raised is not None:
            plain = plain or "raised"
            su, pu = raised
            u = su.gpu_memory_utilization
            add(f"raise gpu_memory_utilization to {u:.2f}", su, pu,
                f"{u:.2f} x {fmt_size(gpu.total_bytes, places=1)} GiB covers the weights, activation, overhead and one "
                f"{pu.max_model_len}-token request; {SAFE_MAX_UTILIZATION} is the most the planner suggests")

        # 2. lower max_model_len
        lowered = _round_context(base.max_model_len_that_fits)
        if floor <= lowered < length:
            sl = replace(s, max_model_len=lowered)
            add(f"lower max_model_len to {lowered}", sl, try_plan(sl),
                f"one request of {lowered} tokens fits the KV cache (at most {base.max_model_len_that_fits})")

    # When the setting fix alone starts it as asked, nothing more is needed here. When raising
    # utilization alone does, a fix that also raises it is never the simpler one.
    settled = plain == "full"
    raise_util = plain not in ("full", "raised")

    # 3. fp8 KV cache
    if not settled and gpu.supports_fp8 and not s.kv_cache_dtype.startswith("fp8"):
        fit_variant(f"use kv_cache_dtype fp8{at_tp}", replace(here, kv_cache_dtype="fp8"),
                    "fp8 KV cache halves the bytes per token (Ada/Hopper); quality loss is usually small",
                    raise_util=raise_util)

    # 4. fp8 weights
    quant_variants = []  # (title, settings, why, cfg, shp, change) to try over more GPUs if not here
    if not settled and gpu.supports_fp8 and s.quantization is None and shape.quantization is None:
        v8 = ("use fp8 weights (quantization fp8)", replace(here, quantization="fp8"),
              "online fp8 halves the linear layers' weights (embeddings stay bf16); Ada/Hopper", None, None, None)
        if fit_variant(v8[0] + at_tp, *v8[1:3], gpus, *v8[3:], raise_util=raise_util) is None:
            quant_variants.append(v8)

    # 5. a 4-bit checkpoint
    q = shape.quantization
    if not settled and not (q and q.bits <= 4) and s.quantization not in _FOUR_BIT[:4]:
        cfg4 = awq_variant(config)
        v4 = ("use a 4-bit AWQ checkpoint (quantization awq)",
              replace(here, quantization="awq", dtype="auto" if shape.model_type != "gemma3" else s.dtype),
              "4-bit weights take about a quarter of bf16; needs an AWQ (or GPTQ) repo of this model",
              cfg4, model_shape(cfg4), "a 4-bit AWQ checkpoint of this model")
        if fit_variant(v4[0] + at_tp, *v4[1:3], gpus, *v4[3:], raise_util=raise_util) is None:
            quant_variants.append(v4)

    # ---- over more GPUs: tensor parallel over N > tp_here
    n_here = len(out)
    ns = [n for n in (2, 4, 8) if n > tp_here and tp_splits(shape, n)]

    def more(n: int) -> str:
        return f"; needs {n} GPUs, this machine has {gpus}" if gpus < n else ""

    shorter_offered = False
    for n in ns:  # the settings as they are: the smallest N for the requested length, a smaller one shorter
        st = replace(here, tensor_parallel_size=n)
        own = ", as configured" if n == tp0 and tp0 != tp_here else ""
        r = fit_variant(f"tensor parallel over {n} GPUs (tensor_parallel_size {n}{own}{more(n)})", st,
                        f"each GPU holds 1/{n} of the weights and KV heads", max(gpus, n),
                        shorter=not shorter_offered)
        if r == "full":
            break
        shorter_offered = shorter_offered or r == "short"
    for title, sv, why, cfg_v, shp_v, change in quant_variants:  # fp8 / 4-bit that did not run here
        for n in ns:
            st = replace(sv, tensor_parallel_size=n)
            r = fit_variant(f"{title} over {n} GPUs (tensor_parallel_size {n}{more(n)})", st,
                            f"{why}; each GPU holds 1/{n} of them", max(gpus, n), cfg_v, shp_v, change)
            if r is not None:
                break

    # among these, drop one that another beats on every count (fp8 over 4 GPUs when bf16 over 4 serves as long)
    extra = sorted(out[n_here:], key=lambda sg: (sg.gpus, _weight_level(sg, shape)))
    kept = [sg for i, sg in enumerate(extra)
            if not any(_dominates(a, sg, shape) and (j < i or not _dominates(sg, a, shape))
                       for j, a in enumerate(extra) if j != i)]
    ranked = out[:n_here] + kept
    # what runs on this machine's GPUs first (stable: each group keeps its order)
    ranked.sort(key=lambda sg: sg.gpus > gpus)
    return ranked


def _describe_change(old: Settings, new: Settings) -> str:
    changes = [f"{name} to {getattr(new, name) if getattr(new, name) is not None else 'none'}"
               for name in ("tensor_parallel_size", "quantization", "kv_cache_dtype", "gpu_memory_utilization",
                            "max_model_len")
               if getattr(old, name) != getattr(new, name)]
    if not changes:
        return "change the settings"
    return "set " + (changes[0] if len(changes) == 1 else ", ".join(changes[:-1]) + " and " + changes[-1])


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------


def settings_json(s: Settings) -> dict:
    return {
        "dtype": s.dtype, "quantization": s.quantization, "kv_cache_dtype": s.kv_cache_dtype,
        "max_model_len": s.max_model_len, "gpu_memory_utilization": s.gpu_memory_utilization,
        "tensor_parallel_size": s.tensor_parallel_size, "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs, "block_size": s.block_size, "enforce_eager": s.enforce_eager,
        "usage_context": s.usage_context, "vllm_version": s.vllm_version,
    }


def plan_json(p: Plan) -> dict:
    """The ``--json`` object. Names are stable; GiB values are rounded to 0.01."""
    d = p.detail
    return {
        "gpu": p.gpu.key, "gpu_name": p.gpu.name, "gpu_total_gib": in_gib(p.gpu.total_bytes), "gpus": p.gpus,
        "settings": settings_json(p.settings),
        "dtype": d.dtype, "quantization": d.quant,
        "num_params": d.num_params,
        "weights_gib": in_gib(p.weights_bytes), "weights_bytes": p.weights_bytes,
        "kv_bytes_per_token": p.kv_bytes_per_token,
        "activation_gib": in_gib(p.activation_bytes), "activation_bytes": p.activation_bytes,
        "overhead_gib": in_gib(p.overhead_bytes), "overhead_bytes": p.overhead_bytes,
        "non_torch_gib": in_gib(d.non_torch_bytes), "cudagraph_gib": in_gib(d.cudagraph_bytes),
        "requested_gib": in_gib(p.requested_bytes), "requested_bytes": p.requested_bytes,
        "kv_cache_gib": in_gib(p.kv_cache_bytes), "kv_cache_bytes": p.kv_cache_bytes,
        "kv_cache_tokens": p.kv_cache_tokens, "kv_cache_blocks": d.kv_cache_blocks,
        "kv_request_gib": in_gib(d.request_kv_bytes),
        "max_model_len": p.max_model_len, "max_model_len_that_fits": p.max_model_len_that_fits,
        "model_max_len": d.model_max_len,
        "max_concurrency": p.max_concurrency, "fits": p.fits, "reason": p.reason,
        "suggestions": [
            {"title": sg.title, "why": sg.why, "max_model_len": sg.plan_max_model_len, "gpus": sg.gpus,
             "kv_cache_tokens": sg.kv_cache_tokens, "checkpoint": sg.config_change,
             "settings": settings_json(sg.settings)}
            for sg in p.suggestions
        ],
        "notes": list(p.notes),
    }
