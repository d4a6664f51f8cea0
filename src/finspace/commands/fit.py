"""`python -m finspace fit [MODEL]`: which models start on this GPU, with what context, and what to change.

Without MODEL: every catalogue model as a table. With MODEL (a catalogue key),
``--config PATH`` (any config.json) or ``--model OWNER/NAME`` (a Hub repo, read
through ``finspace.fit.hub``): one model's breakdown with the arithmetic; with ``--gpus N`` > 1, sized as a
cluster (``planner.cluster``): TP x PP x DP, KV capacity and concurrent sequences per replica and in total. ``--json`` prints the planner's figures as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from finspace import planner

from finspace.fit import render
from finspace.fit.rows import DEFAULT_GPU, entry_settings, overrides, plan_rows
from finspace.commands.args import positive_int
from finspace.errors import FinspaceError
from finspace.host.hardware import KNOWN_GPUS, GPUSpec, custom_gpu
from finspace.planner.cluster import size_cluster
from finspace.units import GIB, in_gib


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give e.g. 44.4") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive; give e.g. 44.4")
    return v


def _utilization(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a fraction such as 0.90") from None
    if not planner.utilization_ok(v):
        raise argparse.ArgumentTypeError(f"{text} is not in (0, 1]; it is a fraction of GPU memory, e.g. 0.90")
    return v


def _max_len(text: str) -> int:
    if text.lower() in ("auto", "-1"):
        return -1
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token count; give e.g. 8192 or 'auto'") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive token count (or 'auto'); e.g. 8192")
    return v


def _quantization(text: str) -> str:
    if text.lower() == "none":
        return "none"
    if text not in planner.QUANTIZATIONS:
        raise argparse.ArgumentTypeError(
            f"unknown quantization {text!r}; use one of {', '.join(planner.QUANTIZATIONS)} or none"
        )
    return text


def _gpu_key(text: str) -> str:
    if text.lower() not in KNOWN_GPUS:
        raise argparse.ArgumentTypeError(
            f"unknown GPU {text!r}; use one of {', '.join(KNOWN_GPUS)} (or --gpu-memory-gib for another card)"
        )
    return text.lower()


def _config_path(text: str) -> Path:
    p = Path(text)
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file; give the path of a config.json")
    return p


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit",
        help="which models start on this GPU, with what context, and what to change",
        description=(
            "Plan GPU memory the way vLLM does: weights, activation, overhead, KV cache, "
            "and whether the engine will start. Without MODEL: every catalogue model."
        ),
    )
    p.add_argument("model", nargs="?", help="a catalogue key (default: all of them)")
    p.add_argument(
        "--config", type=_config_path, metavar="PATH", help="plan any config.json instead of a catalogue model"
    )
    p.add_argument(
        "--model",
        dest="repo",
        metavar="OWNER/NAME",
        help="plan a Hugging Face Hub repo: its config.json and safetensors total_size "
        "(HF_TOKEN for gated repos; the hub cache when offline)",
    )
    p.add_argument("--revision", metavar="REV", help="with --model: a branch, tag or commit")
    p.add_argument(
        "--total-size-bytes",
        type=positive_int("2"),
        metavar="N",
        help="with --config: the checkpoint's exact safetensors total_size",
    )
    p.add_argument(
        "--gpu",
        type=_gpu_key,
        metavar="KEY",
        help=f"plan for this GPU instead of the detected one: {', '.join(KNOWN_GPUS)}",
    )
    p.add_argument(
        "--gpu-memory-gib",
        type=_positive_float,
        metavar="X",
        help="GPU memory as CUDA reports it (e.g. 44.4); with --gpu, overrides its size",
    )
    p.add_argument(
        "--gpus",
        type=positive_int("2"),
        metavar="N",
        help="GPUs on the machine (default: detected; with --gpu, as many as each model's tensor_parallel_size); "
        "for one model, N > 1 sizes a cluster: TP x PP x DP (--tensor/--pipeline-parallel-size: as given)",
    )
    p.add_argument(
        "--gpus-per-node",
        type=positive_int("8"),
        metavar="N",
        help="with --gpus N > 1: GPUs per node; tensor parallel stays within a node (default: 8)",
    )
    p.add_argument("--gpu-memory-utilization", type=_utilization, metavar="F")
    p.add_argument("--max-model-len", type=_max_len, metavar="N", help="tokens, or 'auto' for the longest that fits")
    p.add_argument("--dtype", choices=("auto", "bfloat16", "float16", "float32"))
    p.add_argument(
        "--quantization", type=_quantization, metavar="Q", help=f"{', '.join(planner.QUANTIZATIONS)} or none"
    )
    p.add_argument("--kv-cache-dtype", choices=planner.KV_CACHE_DTYPES)
    p.add_argument("--tensor-parallel-size", type=positive_int("2"), metavar="N")
    p.add_argument(
        "--pipeline-parallel-size",
        type=positive_int("2"),
        metavar="N",
        help="pipeline stages: each holds a slice of the layers; the tightest stage decides",
    )
    p.add_argument("--max-num-batched-tokens", type=positive_int("2"), metavar="N")
    p.add_argument("--max-num-seqs", type=positive_int("2"), metavar="N")
    p.add_argument(
        "--usage-context",
        choices=planner.USAGE_CONTEXTS,
        help="whose batch defaults: engine (the app, default), serve (vllm serve), llm (LLM class)",
    )
    p.add_argument(
        "--vllm-version", choices=planner.VLLM_VERSIONS, help="whose memory rules (default: %s)" % planner.CURRENT_VLLM
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (names documented in the README)")
    p.set_defaults(func=run)


def _detect() -> tuple[GPUSpec | None, int]:
    try:
        from finspace.host.gpu import MemoryMonitor

        mon = MemoryMonitor()
        if mon.has_gpu:
            return mon.gpu_spec(), mon.gpu_count
    except FinspaceError:
        raise
    except Exception:  # no pynvml / psutil, no driver
        pass
    return None, 0


def _target(args) -> tuple[GPUSpec, int | None]:
    """The GPU to plan for and the machine's GPU count (None: assume what each model needs)."""
    if args.gpu:
        gpu = KNOWN_GPUS[args.gpu]
        if args.gpu_memory_gib:
            gpu = replace(
                gpu,
                key="custom",
                name=f"{gpu.name} ({args.gpu_memory_gib:g} GiB)",
                total_bytes=int(args.gpu_memory_gib * GIB),
            )
        return gpu, args.gpus
    if args.gpu_memory_gib:
        return custom_gpu(int(args.gpu_memory_gib * GIB), name=f"GPU with {args.gpu_memory_gib:g} GiB"), args.gpus
    gpu, count = _detect()
    if gpu is not None:
        return gpu, args.gpus or count
    print(
        f"note: no NVIDIA GPU detected; planning for {KNOWN_GPUS[DEFAULT_GPU].name} "
        "(give --gpu KEY or --gpu-memory-gib X to choose)",
        file=sys.stderr,
    )
    return KNOWN_GPUS[DEFAULT_GPU], args.gpus


def _load_catalog():
    from finspace.models.catalog import load_catalog

    return load_catalog()


def run(args: argparse.Namespace) -> int:
    if args.repo is not None and (args.config is not None or args.model):
        raise FinspaceError("give one of MODEL, --config PATH or --model OWNER/NAME")
    gpu, machine_gpus = _target(args)

    if args.repo is not None:
        from finspace.fit.hub import read_repo

        repo = read_repo(args.repo, revision=args.revision, token=os.environ.get("HF_TOKEN") or None)
        settings = overrides(args, planner.Settings())
        total = args.total_size_bytes or repo.total_size_bytes
        _one(repo.config, gpu, settings, machine_gpus, args, total, args.repo)
        return 0
    if args.config is not None:
        try:
            config = json.loads(args.config.read_text())
        except (OSError, ValueError) as exc:
            raise FinspaceError(f"cannot read {args.config} as JSON: {exc}; give a config.json") from None
        settings = overrides(args, planner.Settings())
        _one(config, gpu, settings, machine_gpus, args, args.total_size_bytes, args.model or args.config.name)
        return 0
    if args.total_size_bytes is not None:
        raise FinspaceError("--total-size-bytes goes with --config or --model; catalogue models carry their own")

    catalog = _load_catalog()
    if args.model:
        entry = catalog.get(args.model)
        settings = entry_settings(entry, args)
        _one(entry.config(), gpu, settings, machine_gpus, args, entry.total_size_bytes, entry.label, key=entry.key)
        return 0

    rows = plan_rows(catalog, gpu, machine_gpus, args)
    if args.json:
        out = {
            "gpu": {"key": gpu.key, "name": gpu.name, "total_gib": in_gib(gpu.total_bytes)},
            "gpus": machine_gpus,
            "models": {k: ({"error": str(p)} if isinstance(p, Exception) else render.plan_json(p)) for k, p in rows},
        }
        print(json.dumps(out, indent=2))
    else:
        print(render.fit_table(rows, gpu, machine_gpus))
    return 0


def _one(
    config: dict,
    gpu: GPUSpec,
    settings: planner.Settings,
    machine_gpus: int | None,
    args,
    total: int | None,
    label: str,
    key: str | None = None,
) -> None:
    """One model: on one machine as today, or, with --gpus N > 1, sized as a cluster (TP x PP x DP; the TP/PP
    flags, when given, are the layout)."""
    if machine_gpus is None or machine_gpus <= 1:
        gpus = machine_gpus or settings.tensor_parallel_size * settings.pipeline_parallel_size
        _show_one(planner.plan(config, gpu, settings, gpus=gpus, total_size_bytes=total), label, args.json, key=key)
        return
    c = size_cluster(
        config,
        gpu,
        settings,
        machine_gpus,
        gpus_per_node=args.gpus_per_node,
        tp=args.tensor_parallel_size,
        pp=args.pipeline_parallel_size,
        total_size_bytes=total,
    )
    _show_one(c.replica, label, args.json, key=key, cluster=c)


def _show_one(p: planner.Plan, label: str, as_json: bool, key: str | None = None, cluster=None) -> None:
    if as_json:
        obj = render.plan_json(p)
        if key:
            obj = {"model": key, **obj}
        if cluster is not None:
            obj["cluster"] = render.cluster_json(cluster)
        print(json.dumps(obj, indent=2))
    else:
        print(render.breakdown(p, label))
        if cluster is not None:
            print()
            print(render.cluster_text(cluster))
