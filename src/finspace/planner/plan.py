"""The plan: will this model start under vLLM on this GPU, with what context, and if not, why.

What vLLM does, and where (see shared/vllm-memory-mechanism.md):

* Budget: ``requested = ceil(total_memory * gpu_memory_utilization)``
  (``vllm/v1/worker/utils.py::request_memory``, called from ``Worker.init_device``).
  ``total_memory`` is what CUDA reports (``hardware.GPUSpec.total_bytes``).
* KV budget: ``available_kv = requested - non_kv`` where ``non_kv = weights +
  torch activation peak of the profiling run + non-torch memory`` and, from
  vLLM 0.21 on, ``- cudagraph_estimate`` (``Worker.determine_available_memory``
  in ``vllm/v1/worker/gpu_worker.py``; ``vllm/utils/mem_utils.py::memory_profiling``).
  ``Settings.vllm_version`` picks the rules: "0.32" (default, our CUDA target)
  subtracts CUDA-graph memory, "0.19" (the calibration logs) does not.
* Start check: ``kv_cache_utils.py::check_enough_kv_cache_memory`` /
  ``_check_enough_kv_cache_memory``: refuse when ``available <= 0`` or when one
  ``max_model_len`` request (sum over layers of ``max_memory_usage_bytes``)
  exceeds it; 0.32 first holds back one block (the null block).
  ``max_model_len=-1`` auto-fits (``_auto_fit_max_model_len``).
* Settings vLLM refuses whatever the memory (more tensor-parallel ranks than
  GPUs, heads that do not split, a length over the model's limit, fp8 on a GPU
  without it, bitsandbytes under 0.32) are the verdict before the memory is.

* Pipeline parallelism: each stage holds its layers (``vllm/distributed/utils.py::
  get_pp_indices``), the embedding on the first and lm_head on the last, and is
  planned as its own worker; every worker gets the fewest KV blocks any has room
  for, so the tightest stage's plan is the answer (``Plan.stages`` holds them all).

``plan`` is the entry point; a plan that does not start carries fixes from
``suggest.suggestions``, each re-checked with ``replan``.
"""

from __future__ import annotations

from typing import Any

from dataclasses import replace

from finspace.errors import BadInput
from finspace.host.hardware import GPUSpec
from finspace.planner import warmup
from finspace.planner.budget import plan_detail, stage_budget, stage_warmup
from finspace.planner.memory import cudagraph_bytes, cudagraphs_counted, kv_dtype_bytes, kv_layout, max_len_that_fits
from finspace.planner.settings import Settings, validate, version
from finspace.planner.shape import (
    ModelShape,
    QuantScheme,
    model_shape,
    pp_partition,
    stage,
    tp_on_machine,
    tp_splits,
)
from finspace.planner.result import Plan, StagePlan, Suggestion, Verdict
from finspace.planner.suggest import suggestions
from finspace.units import fmt_size


def plan(
    config: dict[str, Any],
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
    base, verdict = evaluate(config, shape, gpu, settings, gpus, total_size_bytes)
    if verdict is None:
        return base
    if verdict.kind == "warmup":  # vLLM's own two fixes, not the KV-cache ones
        sugg = warmup.fixes(base, lambda s2: replan(config, shape, gpu, s2, gpus, total_size_bytes))
    else:
        sugg = suggestions(config, shape, gpu, settings, gpus, total_size_bytes, base, verdict.fix_settings, replan)
    return replace(base, reason=_reason_with_fixes(verdict, sugg), suggestions=tuple(sugg))


def replan(
    config: dict[str, Any], shape: ModelShape, gpu: GPUSpec, s: Settings, gpus: int, total_size: int | None
) -> Plan:
    """A candidate fix's plan, without fixes of its own (suggest.py re-checks each fix with it)."""
    return evaluate(config, shape, gpu, s, gpus, total_size)[0]


def evaluate(
    config: dict[str, Any], shape: ModelShape, gpu: GPUSpec, s: Settings, gpus: int, total_size: int | None
) -> tuple[Plan, Verdict | None]:
    """The plan under settings ``s`` (not validated) and, when it does not start, why.

    The plan's reason is "starts: ..." or the problem with the planner's own fix; no suggestions.
    With pipeline parallelism every stage is planned (its layers, the embedding on the first, lm_head on
    the last) and the tightest stage's plan is the answer: vLLM gives every worker the fewest KV blocks
    any of them has room for (``get_kv_cache_configs``).
    """
    pp = s.pipeline_parallel_size
    if pp == 1:
        return _evaluate_stage(config, shape, shape, gpu, s, gpus, total_size)
    if pp > shape.num_layers:  # vLLM refuses: a stage without layers
        one, _ = _evaluate_stage(config, shape, shape, gpu, replace(s, pipeline_parallel_size=1), gpus, total_size)
        v = Verdict(
            f"pipeline_parallel_size {pp} exceeds the model's {shape.num_layers} layers",
            "setting",
            f"Lower pipeline_parallel_size to {shape.num_layers} or less.",
            replace(s, pipeline_parallel_size=shape.num_layers),
        )
        return replace(
            one,
            settings=replace(one.settings, pipeline_parallel_size=pp),
            fits=False,
            max_concurrency=0.0,
            reason=f"{v.problem}. {v.own_fix}",
        ), v
    results = []
    for i, (a, b) in enumerate(pp_partition(shape.num_layers, pp)):
        results.append(
            _evaluate_stage(config, stage(shape, a, b, i == 0, i == pp - 1), shape, gpu, s, gpus, total_size)
        )
    stages = tuple(
        StagePlan(
            i,
            a,
            b,
            r.weights_bytes,
            r.activation_bytes,
            r.kv_cache_bytes,
            r.kv_cache_tokens,
            r.max_model_len_that_fits,
            r.fits,
            r.detail.warmup_requests,
            r.detail.warmup_bytes,
            r.detail.warmup_free_bytes,
        )
        for i, ((a, b), (r, _)) in enumerate(zip(pp_partition(shape.num_layers, pp), results))
    )
    k = min(
        range(pp),
        key=lambda i: (results[i][0].fits, results[i][0].max_model_len_that_fits, results[i][0].kv_cache_tokens),
    )
    p, verdict = results[k]
    note = (
        f"pipeline_parallel_size {pp}: figures are stage {k}'s (layers {stages[k].first_layer}-"
        f"{stages[k].end_layer - 1}), the tightest of {pp}"
    )
    return replace(p, stages=stages, notes=(note, *p.notes)), verdict


def _evaluate_stage(
    config: dict[str, Any],
    shape: ModelShape,
    whole: ModelShape,
    gpu: GPUSpec,
    s: Settings,
    gpus: int,
    total_size: int | None,
) -> tuple[Plan, Verdict | None]:
    """``evaluate`` for the layers ``shape`` holds (the whole model, or one pipeline stage of ``whole``)."""
    v = version(s.vllm_version)
    tp = s.tensor_parallel_size
    notes: list[str] = list(shape.notes)
    if s.dtype == "auto" and shape.torch_dtype in (None, "float32"):
        notes.append(f"checkpoint is {shape.torch_dtype or 'float32 (assumed)'}; vLLM serves it as bfloat16")

    # budget: requested = ceil(total x utilization); the KV cache gets what weights, activation, overhead leave
    model_max = shape.derived_max_model_len
    auto_fit = s.max_model_len == -1
    length = model_max if (s.max_model_len is None or auto_fit) else s.max_model_len
    b = stage_budget(shape, whole, gpu, s, total_size, length)
    available = b.available_kv_bytes

    # KV cache: blocks, the start check (0.32 holds back the null block), the longest length that fits
    kv_el = kv_dtype_bytes(s.kv_cache_dtype, b.dtype)
    kv = kv_layout(shape, s, kv_el, tp, b.max_num_batched_tokens, v)
    kv_cache = max(0, available)
    blocks = kv_cache // kv.block_bytes
    check_avail = available - (kv.block_bytes if v >= (0, 32) else 0)
    fit_len = max_len_that_fits(kv, check_avail, model_max)
    if auto_fit:
        length = fit_len if fit_len > 0 else model_max
    bpr = kv.blocks_per_request(length)
    graphs_outside = 0
    if not cudagraphs_counted(s) and not s.enforce_eager:
        notes.append(f"vLLM {s.vllm_version} rules: CUDA graphs come out of the 1 - utilization slack")
        graphs_outside = cudagraph_bytes(shape)
    warm = stage_warmup(shape, gpu, s, b, graphs_outside, v)

    p = Plan(
        gpu=gpu,
        gpus=gpus,
        settings=replace(
            s, max_model_len=length, max_num_batched_tokens=b.max_num_batched_tokens, max_num_seqs=b.max_num_seqs
        ),
        weights_bytes=b.weights.bytes,
        kv_bytes_per_token=shape.num_layers * shape.kv_entry(tp) * kv_el,
        activation_bytes=b.activation["total"],
        overhead_bytes=b.non_torch_bytes + b.cudagraph_bytes,
        requested_bytes=b.requested_bytes,
        kv_cache_bytes=kv_cache,
        kv_cache_tokens=blocks // len(kv.groups) * s.block_size,
        max_model_len=length,
        max_model_len_that_fits=fit_len,
        max_concurrency=round(blocks / bpr, 2) if bpr else 0.0,
        fits=True,
        reason="",
        detail=plan_detail(shape, b, kv, kv_el, blocks, length, warm, model_max, tp),
        notes=tuple(notes),
    )
    verdict = _setting_problem(shape, gpu, s, gpus, b.quant, auto_fit) or _memory_problem(p, auto_fit, check_avail)
    return _with_verdict(p, verdict), verdict


def _with_verdict(p: Plan, verdict: Verdict | None) -> Plan:
    """The plan with its reason: what starts and holds how much, or the problem with its own fix."""
    if verdict is None:
        return replace(
            p,
            reason=(
                f"starts: {fmt_size(p.kv_cache_bytes, places=1)} GiB of KV cache holds {p.kv_cache_tokens:,} "
                f"tokens; {p.max_concurrency:.2f} requests of {p.max_model_len:,} tokens at once"
            ),
        )
    own = ". " + verdict.own_fix if verdict.own_fix else "."
    return replace(p, fits=False, max_concurrency=0.0, reason=verdict.problem + own)


def _gpu_short(gpu: GPUSpec) -> str:
    return gpu.name.replace("NVIDIA ", "")


def _setting_problem(
    shape: ModelShape, gpu: GPUSpec, s: Settings, gpus: int, quant: QuantScheme | None, auto_fit: bool
) -> Verdict | None:
    """A setting that cannot work on this machine, whatever the memory: the first one, with its fix."""
    tp, pp = s.tensor_parallel_size, s.pipeline_parallel_size
    model_max = shape.derived_max_model_len
    gname = _gpu_short(gpu)
    if pp > 1 and tp * pp > gpus:
        return Verdict(
            f"tensor_parallel_size {tp} x pipeline_parallel_size {pp} needs {tp * pp} GPUs; the plan has {gpus}",
            "setting",
            f"Run on {tp * pp} GPUs or lower pipeline_parallel_size to {max(1, gpus // tp)}.",
            replace(s, pipeline_parallel_size=max(1, gpus // tp)) if gpus >= tp else None,
        )
    if tp > gpus:
        local = tp_on_machine(shape, gpus)
        return Verdict(
            f"tensor_parallel_size {tp} needs {tp} GPUs; the plan has {gpus}",
            "setting",
            f"Run on {tp} GPUs or lower tensor_parallel_size to {local}.",
            replace(s, tensor_parallel_size=local),
        )
    if not tp_splits(shape, tp):
        split = tp_on_machine(shape, tp)
        return Verdict(
            f"{shape.num_heads} attention heads ({shape.num_kv_heads} KV heads) do not split evenly over "
            f"tensor_parallel_size {tp}",
            "setting",
            f"Use a tensor_parallel_size that divides them, e.g. {split}.",
            replace(s, tensor_parallel_size=split),
        )
    if s.max_model_len is not None and not auto_fit and s.max_model_len > model_max:
        return Verdict(
            f"max_model_len {s.max_model_len} exceeds the model's limit {model_max} (from max_position_embeddings)",
            "setting",
            f"Lower max_model_len to {model_max} or less.",
            replace(s, max_model_len=model_max),
        )
    if s.kv_cache_dtype.startswith("fp8") and not gpu.supports_fp8:
        cc = ".".join(map(str, gpu.compute_capability))
        return Verdict(
            f"kv_cache_dtype {s.kv_cache_dtype} needs compute capability 8.9+ (Ada/Hopper); {gname} is {cc}",
            "setting",
            "Use kv_cache_dtype auto.",
            replace(s, kv_cache_dtype="auto"),
        )
    if quant is not None and quant.method == "bitsandbytes" and version(s.vllm_version) >= (0, 32):
        return Verdict(
            f"vLLM {s.vllm_version} has no bitsandbytes quantization",
            "setting",
            "Use an AWQ or GPTQ 4-bit checkpoint (quantization awq) or quantization fp8.",
            replace(s, quantization=None),
        )
    if quant is not None and quant.method == "fp8" and gpu.compute_capability < (8, 0):
        return Verdict(
            f"fp8 weights need compute capability 8.0+; {gname} is older", "setting", "Use a 4-bit checkpoint."
        )
    return None


def _memory_problem(p: Plan, auto_fit: bool, check_avail: int) -> Verdict | None:
    """What does not fit in the budget: the weights alone, everything before the KV cache, or one request."""
    s, d = p.settings, p.detail
    gname = _gpu_short(p.gpu)
    util = s.gpu_memory_utilization
    requested = fmt_size(p.requested_bytes, places=1)
    if p.weights_bytes > p.requested_bytes:
        return Verdict(
            f"weights {fmt_size(p.weights_bytes, places=1)} GiB exceed the {requested} GiB that gpu_memory_utilization "
            f"{util:.2f} gives on {gname} ({fmt_size(p.gpu.total_bytes, places=1)} GiB)",
            "weights",
        )
    if d.available_kv_bytes <= 0:
        return Verdict(
            f"no memory left for the KV cache: weights {fmt_size(p.weights_bytes, places=1)} + activation "
            f"{fmt_size(p.activation_bytes, places=1)} + overhead {fmt_size(p.overhead_bytes, places=1)} GiB "
            f"exceed the {requested} GiB that gpu_memory_utilization {util:.2f} gives on {gname}",
            "budget",
        )
    if (auto_fit and p.max_model_len_that_fits <= 0) or d.request_kv_bytes > check_avail:
        return Verdict(
            f"max_model_len {p.max_model_len} needs {fmt_size(d.request_kv_bytes, places=1)} GiB of KV cache; "
            f"{fmt_size(max(0, check_avail), places=1)} GiB is free on {gname} at utilization {util:.2f}",
            "kv",
        )
    if d.warmup_bytes > d.warmup_free_bytes:
        w = warmup.Warmup(d.warmup_requests, d.warmup_bytes, d.warmup_free_bytes)
        return Verdict(warmup.problem(w, gname, util), "warmup")
    return None


def _reason_with_fixes(verdict: Verdict, sugg: list[Suggestion]) -> str:
    """The problem and what to do: the first fixes found, else the planner's own fix, else a bigger GPU."""
    if sugg and verdict.kind in ("weights", "budget"):
        fix = _fix_text(sugg, verdict.kind)
        return verdict.problem + "; " + fix[0].lower() + fix[1:]
    if sugg:
        return verdict.problem + ". " + _fix_text(sugg, verdict.kind)
    if verdict.kind == "setting":
        return verdict.problem + ". " + verdict.own_fix
    return verdict.problem + ". No single change the planner knows makes it fit; use a GPU with more memory."


def _fix_text(sugg: list[Suggestion], mem_kind: str) -> str:
    phrases = []
    for sg in sugg[:3]:
        t = sg.title
        if mem_kind in ("weights", "budget") and t.startswith("raise gpu_memory_utilization to "):
            t = "raise it to ≥ " + t.rsplit(" ", 1)[1]
        phrases.append(t)
    text = phrases[-1] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " or " + phrases[-1]
    return text[0].upper() + text[1:] + "."
