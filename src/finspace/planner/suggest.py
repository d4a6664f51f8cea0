"""Fixes for a plan that does not start: ranked, each re-checked by the planner.

First what runs on this machine's GPUs (at tensor_parallel_size ``tp_here``: the
settings' own, or, when they ask for more GPUs than there are, the largest power
of two <= gpus that splits the heads): the setting fix, raise utilization, lower
max_model_len, fp8 KV cache, fp8 weights, a 4-bit checkpoint. Each quantization/KV
fix is tried as asked, then with utilization raised (<= SAFE_MAX_UTILIZATION),
then with the longest context that fits (>= MIN_USEFUL_CONTEXT).
Then what needs more GPUs: tensor parallel over N > tp_here GPUs (the smallest N
that serves the requested length, and a smaller N with a shorter context), and
the same for fp8 / 4-bit weights when they do not run on this machine. Of those,
one that another beats on every count (GPUs, quantization, context) is dropped.

Every candidate is re-planned with the ``replan`` function the caller passes
(``plan.replan``): plan.py imports this module for the search, so this module
takes the planner as an argument instead of importing plan.py back.
"""

from __future__ import annotations

from typing import Any

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from finspace.errors import BadInput, ConfigError
from finspace.host.hardware import GPUSpec
from finspace.planner.result import Plan, Suggestion
from finspace.planner.settings import Settings
from finspace.planner.shape import ModelShape, model_shape, tp_on_machine, tp_splits
from finspace.units import fmt_size

#: The highest utilization the planner suggests: leaves ~2 GiB on a 48 GB card
#: for the CUDA context and allocator slack.
SAFE_MAX_UTILIZATION = 0.95
#: The shortest context a "lower max_model_len" suggestion may propose.
MIN_USEFUL_CONTEXT = 1024
_FOUR_BIT = ("awq", "awq_marlin", "gptq", "gptq_marlin", "bitsandbytes")


#: (config, shape, gpu, settings, gpus, total_size_bytes) -> the plan, without fixes; raises
#: BadInput / ConfigError for settings vLLM refuses.
Replan = Callable[[dict[str, Any], ModelShape, GPUSpec, Settings, int, "int | None"], "Plan"]


@dataclass(frozen=True)
class _Search:
    """What the fixes are for: the model as asked, this machine, and how to re-check a candidate."""

    config: dict[str, Any]
    shape: ModelShape
    gpu: GPUSpec
    gpus: int  # on this machine
    total_size: int | None
    floor: int  # the shortest context a fix may serve
    replan: Replan


@dataclass(frozen=True)
class _Candidate:
    """One fix to try: its settings over ``gpus`` GPUs, on the model's checkpoint or another one."""

    title: str
    settings: Settings
    why: str
    gpus: int
    config: dict[str, Any] | None = None  # another checkpoint's config.json (the 4-bit one); None: the model's
    shape: ModelShape | None = None
    change: str | None = None  # the checkpoint change, e.g. "a 4-bit AWQ checkpoint of this model"


@dataclass
class _Found:
    """The fixes found so far, in the order found, each (settings, GPUs, checkpoint) once."""

    items: list[Suggestion] = field(default_factory=list)
    seen: set[object] = field(default_factory=set)


def suggestions(
    config: dict[str, Any],
    shape: ModelShape,
    gpu: GPUSpec,
    s: Settings,
    gpus: int,
    total_size: int | None,
    base: Plan,
    fix_settings: Settings | None,
    replan: Replan,
) -> list[Suggestion]:
    """Ranked fixes for ``base`` (the plan of ``s``, which does not start), each re-planned with ``replan``.

    ``fix_settings``: ``s`` with the setting that cannot work here fixed (None: no such setting).
    """
    search = _Search(config, shape, gpu, gpus, total_size, min(MIN_USEFUL_CONTEXT, base.max_model_len), replan)
    found = _Found()
    tp0 = s.tensor_parallel_size
    tp_here = tp0 if tp0 <= gpus else tp_on_machine(shape, gpus)
    # how the settings themselves (setting fixed) start here: "full", "raised", "short", None
    plain = _fix_the_setting(found, search, s, fix_settings)
    if tp_here == tp0:
        raised = _raise_or_shorten(found, search, s, base)
        plain = plain or raised
    # When the setting fix alone starts it as asked, nothing more is needed here. When raising
    # utilization alone does, a fix that also raises it is never the simpler one.
    quant_variants = []
    if plain != "full":
        quant_variants = _smaller_here(found, search, s, tp_here, raise_util=plain != "raised")
    n_here = len(found.items)
    _over_more_gpus(found, search, s, tp_here, quant_variants)
    return _ranked(found.items, n_here, search)


def _fix_the_setting(found: _Found, search: _Search, s: Settings, fix_settings: Settings | None) -> str | None:
    if fix_settings is None:
        return None
    before = len(found.items)
    plain = _fit_variant(
        found,
        search,
        _Candidate("fix the setting", fix_settings, "the requested setting cannot work on this machine", search.gpus),
    )
    if len(found.items) > before:
        first = found.items[before]
        found.items[before] = replace(first, title=_describe_change(s, first.settings))
    return plain


def _raise_or_shorten(found: _Found, search: _Search, s: Settings, base: Plan) -> str | None:
    """1. raise utilization, to the least value that fits; 2. lower max_model_len. "raised" when 1 works."""
    gpu = search.gpu
    raised = _least_util(search, _Candidate("", s, "", search.gpus))
    if raised is not None:
        su, pu = raised
        u = su.gpu_memory_utilization
        _add(
            found,
            search,
            _Candidate(
                f"raise gpu_memory_utilization to {u:.2f}",
                su,
                f"{u:.2f} x {fmt_size(gpu.total_bytes, places=1)} GiB covers the weights, activation, overhead and one "
                f"{pu.max_model_len}-token request; {SAFE_MAX_UTILIZATION} is the most the planner suggests",
                search.gpus,
            ),
            pu,
        )
    lowered = _round_context(base.max_model_len_that_fits)
    if search.floor <= lowered < base.max_model_len:
        sl = replace(s, max_model_len=lowered)
        _add(
            found,
            search,
            _Candidate(
                f"lower max_model_len to {lowered}",
                sl,
                f"one request of {lowered} tokens fits the KV cache (at most {base.max_model_len_that_fits})",
                search.gpus,
            ),
            _check(search, _Candidate("", sl, "", search.gpus)),
        )
    return "raised" if raised is not None else None


def _smaller_here(found: _Found, search: _Search, s: Settings, tp_here: int, *, raise_util: bool) -> list[_Candidate]:
    """3. fp8 KV cache, 4. fp8 weights, 5. a 4-bit checkpoint, on this machine. Returns the weight
    variants that do not run here (to try over more GPUs)."""
    shape, gpu, gpus = search.shape, search.gpu, search.gpus
    here = replace(s, tensor_parallel_size=tp_here)
    at_tp = f" at tensor_parallel_size {tp_here}" if tp_here != s.tensor_parallel_size else ""
    if gpu.supports_fp8 and not s.kv_cache_dtype.startswith("fp8"):
        _fit_variant(
            found,
            search,
            _Candidate(
                f"use kv_cache_dtype fp8{at_tp}",
                replace(here, kv_cache_dtype="fp8"),
                "fp8 KV cache halves the bytes per token (Ada/Hopper); quality loss is usually small",
                gpus,
            ),
            raise_util=raise_util,
        )
    variants = []
    if gpu.supports_fp8 and s.quantization is None and shape.quantization is None:
        variants.append(
            _Candidate(
                "use fp8 weights (quantization fp8)",
                replace(here, quantization="fp8"),
                "online fp8 halves the linear layers' weights (embeddings stay bf16); Ada/Hopper",
                gpus,
            )
        )
    q = shape.quantization
    if not (q and q.bits <= 4) and s.quantization not in _FOUR_BIT[:4]:
        cfg4 = awq_variant(search.config)
        variants.append(
            _Candidate(
                "use a 4-bit AWQ checkpoint (quantization awq)",
                replace(here, quantization="awq", dtype="auto" if shape.model_type != "gemma3" else s.dtype),
                "4-bit weights take about a quarter of bf16; needs an AWQ (or GPTQ) repo of this model",
                gpus,
                cfg4,
                model_shape(cfg4),
                "a 4-bit AWQ checkpoint of this model",
            )
        )
    return [
        v
        for v in variants
        if _fit_variant(found, search, replace(v, title=v.title + at_tp), raise_util=raise_util) is None
    ]


def _over_more_gpus(
    found: _Found, search: _Search, s: Settings, tp_here: int, quant_variants: list[_Candidate]
) -> None:
    """Tensor parallel over N > tp_here GPUs: the settings as they are (the smallest N for the requested
    length, a smaller one shorter), then the weight variants that did not run here."""
    gpus, tp0 = search.gpus, s.tensor_parallel_size
    here = replace(s, tensor_parallel_size=tp_here)
    ns = [n for n in (2, 4, 8) if n > tp_here and tp_splits(search.shape, n)]
    shorter_offered = False
    for n in ns:
        own = ", as configured" if n == tp0 and tp0 != tp_here else ""
        r = _fit_variant(
            found,
            search,
            _Candidate(
                f"tensor parallel over {n} GPUs (tensor_parallel_size {n}{own}{_more(n, gpus)})",
                replace(here, tensor_parallel_size=n),
                f"each GPU holds 1/{n} of the weights and KV heads",
                max(gpus, n),
            ),
            shorter=not shorter_offered,
        )
        if r == "full":
            break
        shorter_offered = shorter_offered or r == "short"
    for v in quant_variants:
        for n in ns:
            c = replace(
                v,
                title=f"{v.title} over {n} GPUs (tensor_parallel_size {n}{_more(n, gpus)})",
                settings=replace(v.settings, tensor_parallel_size=n),
                why=f"{v.why}; each GPU holds 1/{n} of them",
                gpus=max(gpus, n),
            )
            if _fit_variant(found, search, c) is not None:
                break


def _more(n: int, gpus: int) -> str:
    return f"; needs {n} GPUs, the plan has {gpus}" if gpus < n else ""


def _ranked(found: list[Suggestion], n_here: int, search: _Search) -> list[Suggestion]:
    """Those found on this machine as found; of the others, drop one that another beats on every count
    (fp8 over 4 GPUs when bf16 over 4 serves as long); then what runs on this machine's GPUs first."""
    shape = search.shape
    extra = sorted(found[n_here:], key=lambda sg: (sg.gpus, _weight_level(sg, shape)))
    kept = [
        sg
        for i, sg in enumerate(extra)
        if not any(
            _dominates(a, sg, shape) and (j < i or not _dominates(sg, a, shape)) for j, a in enumerate(extra) if j != i
        )
    ]
    ranked = found[:n_here] + kept
    ranked.sort(key=lambda sg: sg.gpus > search.gpus)  # stable: each group keeps its order
    return ranked


# ---------------------------------------------------------------- trying one candidate


def _check(search: _Search, c: _Candidate) -> Plan | None:
    """The candidate's plan, or None when vLLM would refuse its settings."""
    try:
        return search.replan(
            c.config or search.config,
            c.shape or search.shape,
            search.gpu,
            c.settings,
            c.gpus,
            None if c.config else search.total_size,
        )
    except (BadInput, ConfigError):
        return None


def _usable(search: _Search, p: Plan | None) -> bool:
    return p is not None and p.fits and p.max_model_len >= search.floor


def _add(found: _Found, search: _Search, c: _Candidate, p: Plan | None) -> None:
    """Keep ``c`` (planned as ``p``) when it starts with a useful context and is not kept already."""
    key = (c.settings, c.gpus, c.change)
    if p is None or not _usable(search, p) or key in found.seen:
        return
    found.seen.add(key)
    title = c.title
    if c.settings.max_model_len == -1:
        title += f" with max_model_len auto ({p.max_model_len})"
    found.items.append(Suggestion(title, c.settings, p.max_model_len, c.why, c.gpus, p.kv_cache_tokens, c.change))


def _least_util(search: _Search, c: _Candidate) -> tuple[Settings, Plan] | None:
    """The least utilization (in hundredths, above the current, <= SAFE_MAX_UTILIZATION) that starts."""
    lo = math.floor(c.settings.gpu_memory_utilization * 100 + 1e-9) + 1
    hi = round(SAFE_MAX_UTILIZATION * 100)
    if lo > hi:
        return None

    def at(k: int) -> tuple[Settings, Plan | None]:
        s2 = replace(c.settings, gpu_memory_utilization=round(k / 100, 2))
        return s2, _check(search, replace(c, settings=s2))

    # Upwards, one step at a time, not bisected: more memory gives the KV cache more, but the sampler warm-up
    # (planner/warmup.py) less of the slack above it, so 0.95 can fail where 0.92 starts.
    for k in range(lo, hi + 1):
        s2, p2 = at(k)
        if p2 is not None and _usable(search, p2):
            return s2, p2
    return None


def _fit_variant(
    found: _Found, search: _Search, c: _Candidate, *, shorter: bool = True, raise_util: bool = True
) -> str | None:
    """Add ``c`` as asked, else with utilization raised, else with the longest context that fits
    (at its utilization, then at SAFE_MAX_UTILIZATION). Returns "full", "raised", "short" or None."""
    p = _check(search, c)
    if p is None:
        return None
    if _usable(search, p):
        _add(found, search, c, p)
        return "full"
    raised = _least_util(search, c) if raise_util else None
    if raised is not None:
        s2, p2 = raised
        _add(
            found,
            search,
            replace(c, title=f"{c.title} with gpu_memory_utilization {s2.gpu_memory_utilization:.2f}", settings=s2),
            p2,
        )
        return "raised"
    if not shorter or c.settings.max_model_len == -1:
        return None
    return _shorter(found, search, c, p, raise_util)


def _shorter(found: _Found, search: _Search, c: _Candidate, p: Plan, raise_util: bool) -> str | None:
    """``c`` with the longest context that fits, at its utilization, then at SAFE_MAX_UTILIZATION."""
    asked = c.settings.gpu_memory_utilization
    for u in (asked, SAFE_MAX_UTILIZATION)[: 2 if raise_util else 1]:
        su = replace(c.settings, gpu_memory_utilization=u)
        pu = p if u == asked else _check(search, replace(c, settings=su))
        if pu is None:
            continue
        cut = _round_context(pu.max_model_len_that_fits)
        if search.floor <= cut < pu.max_model_len:
            c2 = replace(c, settings=replace(su, max_model_len=cut))
            p2 = _check(search, c2)
            if _usable(search, p2):
                util = "" if u == asked else f"gpu_memory_utilization {u:.2f} and "
                _add(found, search, replace(c2, title=f"{c.title} with {util}max_model_len {cut}"), p2)
                return "short"
    return None


# ---------------------------------------------------------------- small helpers


def awq_variant(config: dict[str, Any]) -> dict[str, Any]:
    """The same config as a 4-bit AWQ checkpoint (group 128, zero points, fp16)."""
    out = dict(config)
    out["quantization_config"] = {
        "quant_method": "awq",
        "bits": 4,
        "group_size": 128,
        "zero_point": True,
        "version": "gemm",
    }
    if out.get("model_type") != "gemma3":
        out["torch_dtype"] = "float16"
    return out


def _round_context(n: int) -> int:
    if n >= 8192:
        return n // 1024 * 1024
    if n >= 1024:
        return n // 256 * 256
    return n


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
    return (
        a.gpus <= b.gpus
        and _weight_level(a, shape) <= _weight_level(b, shape)
        and (a.settings.kv_cache_dtype.startswith("fp8") <= b.settings.kv_cache_dtype.startswith("fp8"))
        and a.plan_max_model_len >= b.plan_max_model_len
    )


def _describe_change(old: Settings, new: Settings) -> str:
    changes = [
        f"{name} to {getattr(new, name) if getattr(new, name) is not None else 'none'}"
        for name in (
            "tensor_parallel_size",
            "quantization",
            "kv_cache_dtype",
            "gpu_memory_utilization",
            "max_model_len",
        )
        if getattr(old, name) != getattr(new, name)
    ]
    if not changes:
        return "change the settings"
    return "set " + (changes[0] if len(changes) == 1 else ", ".join(changes[:-1]) + " and " + changes[-1])
