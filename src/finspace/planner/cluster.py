"""A model on N GPUs: tensor parallel x pipeline parallel per replica, and data-parallel replicas of that.

The layout vLLM users pick, and that ``size_cluster`` picks when none is given:

* the smallest tensor_parallel_size that serves the requested context to ``MIN_CONCURRENCY`` sequences at
  once: a power of two, at most the GPUs of one node, that splits the attention and KV heads
  (``shape.tp_splits``, vLLM's own check);
* pipeline parallel only when tensor parallel within a node cannot: a node's worth of TP per stage, the
  fewest stages that fit (each stage's layers per ``get_pp_indices``; ``plan`` plans every stage);
* the rest as data-parallel replicas: DP = GPUs // (TP x PP); GPUs left over are idle.

A TP/PP given by the user is sized as given. Every replica is one vLLM instance planned by ``plan.plan`` on
TP x PP GPUs; its KV capacity and concurrency are vLLM's own figures for one instance (all ranks of an
instance get the fewest blocks any rank has room for), so the totals are DP x those.
"""

from __future__ import annotations

from typing import Any

import math
from dataclasses import dataclass, replace

from finspace.errors import BadInput
from finspace.host.hardware import GPUSpec
from finspace.planner.plan import plan, replan
from finspace.planner.result import Plan
from finspace.planner.settings import Settings, validate
from finspace.planner.shape import model_shape, tp_splits

#: The most GPUs the planner sizes (a bound on public input; 512 nodes of 8).
MAX_GPUS = 4096
#: GPUs per node when none is given: 8 (an HGX/DGX node), or fewer when the cluster has fewer.
DEFAULT_GPUS_PER_NODE = 8
#: The fewest sequences of the requested context a replica must hold for the planner to pick its layout
#: (max_num_seqs when that is fewer). A replica that merely starts is not what anyone deploys: 70B bf16 at
#: TP2 on H100 (vllm serve) starts with 1.24 sequences of 8k (10,128 tokens), TP4 holds 55 (450,880): the planner takes
#: more TP until a replica serves a small batch. 8 is the floor, not a target; give TP/PP to size another.
MIN_CONCURRENCY = 8


@dataclass(frozen=True)
class ClusterPlan:
    """One model on ``gpus`` GPUs: the layout and one replica's plan (per GPU figures in ``replica``)."""

    gpus: int
    gpus_per_node: int
    tp: int
    pp: int
    dp: int
    replica: Plan  # one vLLM instance on tp x pp GPUs
    chosen: str  # "auto" (the planner's layout) or "given" (the user's TP/PP)
    tried: tuple[tuple[int, int, float], ...] = ()  # (tp, pp, max concurrency; 0: does not start), as checked

    @property
    def fits(self) -> bool:
        return self.replica.fits

    @property
    def idle_gpus(self) -> int:
        return self.gpus - self.tp * self.pp * self.dp

    @property
    def context(self) -> int:
        """The context the concurrency is for: the replica's max_model_len."""
        return self.replica.max_model_len

    @property
    def kv_tokens_per_replica(self) -> int:
        return self.replica.kv_cache_tokens if self.fits else 0

    @property
    def concurrency_per_replica(self) -> float:
        """Requests of ``context`` tokens the KV cache holds at once (vLLM's "Maximum concurrency")."""
        return self.replica.max_concurrency if self.fits else 0.0

    @property
    def seqs_per_replica(self) -> int:
        """Full-context sequences that run at once: the KV cache's count, at most max_num_seqs."""
        return min(math.floor(self.concurrency_per_replica), self.replica.settings.max_num_seqs or 0)

    @property
    def kv_tokens_total(self) -> int:
        return self.kv_tokens_per_replica * self.dp

    @property
    def concurrency_total(self) -> float:
        return round(self.concurrency_per_replica * self.dp, 2)

    @property
    def seqs_total(self) -> int:
        return self.seqs_per_replica * self.dp


def _whole(name: str, v: object, top: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
        raise BadInput(f"{name} must be a whole number from 1 to {top}, got {str(v)[:20]}")
    return v


def size_cluster(
    config: dict[str, Any],
    gpu: GPUSpec,
    settings: Settings,
    gpus: int,
    *,
    gpus_per_node: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    total_size_bytes: int | None = None,
) -> ClusterPlan:
    """The layout of ``config`` on ``gpus`` GPUs of type ``gpu`` and one replica's plan.

    ``tp`` / ``pp``: the user's tensor/pipeline parallel sizes (None: the planner picks; a given TP with no
    PP means PP 1). BadInput for counts out of bounds or a layout that needs more GPUs than there are.
    """
    gpus = _whole("gpus", gpus, MAX_GPUS)
    per_node = _whole(
        "gpus_per_node", gpus_per_node if gpus_per_node is not None else min(gpus, DEFAULT_GPUS_PER_NODE), MAX_GPUS
    )
    if tp is not None or pp is not None:
        t = _whole("tensor_parallel_size", 1 if tp is None else tp, MAX_GPUS)
        p = _whole("pipeline_parallel_size", 1 if pp is None else pp, MAX_GPUS)
        if t * p > gpus:
            raise BadInput(
                f"tensor_parallel_size {t} x pipeline_parallel_size {p} needs {t * p} GPUs and the "
                f"cluster has {gpus}: give more GPUs or lower them"
            )
        one = _replica(config, gpu, settings, t, p, total_size_bytes)
        return ClusterPlan(gpus, per_node, t, p, gpus // (t * p), one, "given", ((t, p, one.max_concurrency),))
    return _auto(config, gpu, settings, gpus, per_node, total_size_bytes)


def layouts(config: dict[str, Any], gpus: int, gpus_per_node: int) -> list[tuple[int, int]]:
    """(tp, pp) the planner may pick, in order of preference: TP 1, 2, 4 ... within a node, then a node's TP
    over 2, 3 ... stages (at most one stage per layer)."""
    shape = model_shape(config)
    node = min(gpus, gpus_per_node)
    tps = [n for n in (2**k for k in range(node.bit_length())) if n <= node and tp_splits(shape, n)]
    out = [(t, 1) for t in tps]
    top = tps[-1]
    out += [(top, p) for p in range(2, min(gpus // top, shape.num_layers) + 1)]
    return out


def _auto(
    config: dict[str, Any], gpu: GPUSpec, s: Settings, gpus: int, per_node: int, total_size: int | None
) -> ClusterPlan:
    """The first layout of ``layouts`` whose replica starts and holds ``MIN_CONCURRENCY`` sequences of the
    context (max_num_seqs if fewer): TP in order, then the stages bisected (more stages never hold less). When
    none does, the one that starts with the most concurrency; when none starts, the last one. Candidates are
    checked without fixes (``replan``); the pick is planned in full, with its fixes."""
    validate(s, gpus)
    shape = model_shape(config)
    tried: list[tuple[int, int, float]] = []

    def good(t: int, p: int) -> bool:
        r = replan(config, shape, gpu, replace(s, tensor_parallel_size=t, pipeline_parallel_size=p), t * p, total_size)
        tried.append((t, p, r.max_concurrency if r.fits else 0.0))
        seqs = r.settings.max_num_seqs  # a plan's settings are resolved: vLLM's default filled in
        return r.fits and seqs is not None and r.max_concurrency >= min(MIN_CONCURRENCY, seqs)

    order = layouts(config, gpus, per_node)
    flat = [lp for lp in order if lp[1] == 1]
    staged = [lp for lp in order if lp[1] > 1]
    pick = next((lp for lp in flat if good(*lp)), None)
    if pick is None and staged and good(*staged[-1]):
        lo, hi = 0, len(staged) - 1  # staged[hi] is good; find the fewest stages that are
        while lo < hi:
            mid = (lo + hi) // 2
            if good(*staged[mid]):
                hi = mid
            else:
                lo = mid + 1
        pick = staged[lo]
    if pick is None:
        started = [(c, i) for i, (_, _, c) in enumerate(tried) if c > 0]
        pick = tried[max(started)[1]][:2] if started else (staged or flat)[-1]
    t, p = pick
    one = _replica(config, gpu, s, t, p, total_size)
    return ClusterPlan(gpus, per_node, t, p, gpus // (t * p), one, "auto", tuple(tried))


def _replica(config: dict[str, Any], gpu: GPUSpec, s: Settings, tp: int, pp: int, total_size: int | None) -> Plan:
    return plan(
        config,
        gpu,
        replace(s, tensor_parallel_size=tp, pipeline_parallel_size=pp),
        gpus=tp * pp,
        total_size_bytes=total_size,
    )
