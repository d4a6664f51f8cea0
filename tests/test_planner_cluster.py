"""The planner on big deployments (issue 29): a pipeline stage's own non-torch overhead, the sampler warm-up
as a start check with vLLM's two fixes, and a model sized over a cluster (TP x PP x DP). The arithmetic is
beside each figure; GiB = 2**30 B. H100: 85,029,615,043 B (79.19 GiB), H200: 150,119,844,413 B (139.81 GiB),
L40S: 47,663,399,567 B (44.39 GiB); requested = ceil(total x gpu_memory_utilization)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from finspace.errors import BadInput
from finspace.host.hardware import KNOWN_GPUS
from finspace.planner import Settings, model_shape, plan
from finspace.planner.cluster import MIN_CONCURRENCY, layouts, size_cluster
from finspace.planner.memory import NON_TORCH_PP_STAGE_BYTES, NON_TORCH_TP1_BYTES, NON_TORCH_TP_BYTES
from finspace.planner.warmup import SAMPLER_WARMUP_BYTES_PER_LOGIT

ROOT = Path(__file__).resolve().parents[1]
H100, H200, L40S = KNOWN_GPUS["h100"], KNOWN_GPUS["h200"], KNOWN_GPUS["l40s"]
GIB = 1 << 30


def cfg(name: str) -> dict:
    return json.loads((ROOT / "configs" / f"{name}.json").read_text())


LLAMA8 = cfg("meta-llama__Llama-3.1-8B-Instruct")
LLAMA70 = cfg("meta-llama__Llama-3.1-70B-Instruct")
GEMMA3 = cfg("google__gemma-3-12b-it")  # vocab 262,208
QWEN3 = cfg("Qwen__Qwen3-8B")  # vocab 151,936
OSS20 = json.loads((ROOT / "tests" / "data" / "configs" / "openai__gpt-oss-20b.json").read_text())  # MoE, 201,088


# ----------------------------------------------------------------- a pipeline stage's non-torch overhead


@pytest.mark.parametrize(
    "tp, pp, expected",
    [
        (1, 1, 268_435_456),  # one GPU: int(0.25 GiB), every TP1 log
        (2, 1, 2_254_857_830),  # TP: int(2.1 GiB) (2.07 at TP2, 2.13 at TP4 in the logs), as before
        # PP alone: int(0.07 GiB) = 75,161,927, measured in both PP rows (llmd019 tp1pp2, tp1pp4: "non-torch forward
        # increase memory: 0.07GiB"); the PP group's communicator is built before the memory snapshot (init
        # non-torch 1.43 GiB against 0.51 at TP1), so it is not in this growth. It was 0.25 + 1.85 = 2.1 GiB (assumed).
        (1, 2, 75_161_927),
        (1, 4, 75_161_927),
        # TP and PP: the TP group's measured 2.1 GiB, nothing more for PP (unmeasured; it was 0.25 + 2 x 1.85 = 3.95)
        (4, 2, 2_254_857_830),
        (2, 4, 2_254_857_830),
    ],
)
def test_a_pipeline_stage_has_its_own_measured_non_torch_figure(tp, pp, expected):
    p = plan(
        LLAMA8, H100, Settings(tensor_parallel_size=tp, pipeline_parallel_size=pp, max_model_len=8192), gpus=tp * pp
    )
    assert p.detail.non_torch_bytes == expected
    assert (NON_TORCH_PP_STAGE_BYTES, NON_TORCH_TP1_BYTES, NON_TORCH_TP_BYTES) == (
        75_161_927,
        268_435_456,
        2_254_857_830,
    )


@pytest.mark.parametrize(
    "pp, kv_gib, kv_tokens",
    [
        # llm-d-planner's v0.19.0 study (results_raw.csv), Llama 3.1 8B on H100 at 0.95, 8,192, vllm serve:
        # PP2 "Available KV cache memory: 66.54 GiB", 1,075,312 tokens; PP4 69.8 GiB, 2,257,264 tokens.
        # The planner was -4.24% and -4.05% off with the assumed 2.1 GiB; with 0.07 the stage keeps
        # 2,254,857,830 - 75,161,927 = 2,179,695,903 B (2.03 GiB) more: 63.72 + 2.03 = 65.75 GiB (-1.19%) and
        # 66.97 + 2.03 = 69.00 GiB (-1.15%). (The plan gives the smallest stage's, the last one that samples; the
        # log line is rank 0's: its activation is 1.1 GiB, the last stage's 1.9.)
        (2, 66.54, 1_075_312),
        (4, 69.8, 2_257_264),
    ],
)
def test_pipeline_parallel_kv_within_one_and_a_half_percent_of_vllms_log(pp, kv_gib, kv_tokens):
    s = Settings(
        pipeline_parallel_size=pp,
        gpu_memory_utilization=0.95,
        max_model_len=8192,
        usage_context="serve",
        vllm_version="0.19",
    )
    p = plan(LLAMA8, H100, s, gpus=pp)
    assert p.fits
    assert abs(p.kv_cache_bytes / GIB - kv_gib) / kv_gib < 0.015
    assert abs(p.kv_cache_tokens - kv_tokens) / kv_tokens < 0.015


# ----------------------------------------------------------------- the sampler warm-up

OSS_SERVE = {"quantization": "mxfp4", "usage_context": "serve", "vllm_version": "0.19"}


def _plan(config, gpu, tp, util, kw):
    return plan(
        config, gpu, Settings(tensor_parallel_size=tp, gpu_memory_utilization=util, max_model_len=8192, **kw), gpus=tp
    )


# H100 at 0.95: requested 80,778,134,291, slack 85,029,615,043 - 80,778,134,291 = 4,251,480,752 (3.96 GiB). Held
# before the memory snapshot, outside the budget: int(0.51 GiB) = 547,608,330 on one GPU, int(1.43 GiB) =
# 1,535,450,808 with TP. gpt-oss-20b's graphs outside the budget (0.19 rules): int(0.48 GiB) + 24 x int(0.01125 GiB)
# = 515,396,075 + 289,910,280 = 805,306,355. Its warm-up: 1024 x 201,088 x 16 = 3,294,625,792 (3.07 GiB); MoE under
# vLLM 0.19: the profile's transient stays pinned, so it is not counted as free (planner/warmup.py).
@pytest.mark.parametrize(
    "config, gpu, tp, util, kw, need, free, seqs_fix, util_fix",
    [
        # one GPU: free = 4,251,480,752 - 547,608,330 - 805,306,355 = 2,898,566,067 < 3,294,625,792: vLLM failed it
        # ("sampler warmup OOM", llm-d-planner's run matrix). max_num_seqs: 2,898,566,067 // (201,088 x 16 =
        # 3,217,408) = 900; utilization 0.94: slack 5,101,776,903 - 547,608,330 - 805,306,355 = 3,748,862,218 >=
        (OSS20, H100, 1, 0.95, OSS_SERVE, 3_294_625_792, 2_898_566_067, 900, 0.94),
        # TP 2: free = 4,251,480,752 - 1,535,450,808 - 805,306,355 = 1,910,723,589: vLLM failed it at 0.95 too;
        # 1,910,723,589 // 3,217,408 = 593; 0.94 leaves 2,760,919,740 (<), 0.93 leaves 3,611,215,891 (>=)
        (OSS20, H100, 2, 0.95, OSS_SERVE, 3_294_625_792, 1_910_723_589, 593, 0.93),
    ],
)
def test_a_warm_up_that_cannot_fit_fails_the_plan_with_vllms_two_fixes(
    config, gpu, tp, util, kw, need, free, seqs_fix, util_fix
):
    p = _plan(config, gpu, tp, util, kw)
    assert (p.detail.warmup_requests, p.detail.warmup_bytes, p.detail.warmup_free_bytes) == (1024, need, free)
    assert need == 1024 * model_vocab(config) * SAMPLER_WARMUP_BYTES_PER_LOGIT
    assert not p.fits and p.detail.available_kv_bytes > 0  # the KV cache fits: only the warm-up does not
    assert "CUDA out of memory occurred when warming up sampler" in p.reason
    assert p.reason.endswith(f"Lower max_num_seqs to {seqs_fix} or lower gpu_memory_utilization to {util_fix:.2f}.")
    fix_seqs, fix_util = p.suggestions
    assert fix_seqs.settings.max_num_seqs == seqs_fix and fix_util.settings.gpu_memory_utilization == util_fix
    for sg in p.suggestions:  # each fix re-checked: it starts, and one step further would not be needed
        assert plan(config, gpu, sg.settings, gpus=tp).fits
    assert not plan(config, gpu, replace(fix_seqs.settings, max_num_seqs=seqs_fix + 1), gpus=tp).fits
    assert not plan(
        config, gpu, replace(fix_util.settings, gpu_memory_utilization=round(util_fix + 0.01, 2)), gpus=tp
    ).fits


@pytest.mark.parametrize(
    "tp, kw",
    [
        (1, OSS_SERVE),  # 0.90 leaves 8,502,961,504 - 547,608,330 - 805,306,355 = 7,150,046,819: started at TP 2
        (2, OSS_SERVE),  # 8,502,961,504 - 1,535,450,808 - 805,306,355 = 6,162,204,341 (vLLM: "succeeded at gmu=0.90")
        (1, {**OSS_SERVE, "vllm_version": "0.32"}),  # 0.32: the transient is free again and graphs are in the budget
    ],
)
def test_gpt_oss_starts_where_the_warm_up_fits(tp, kw):
    util = 0.95 if kw["vllm_version"] == "0.32" else 0.90
    p = _plan(OSS20, H100, tp, util, kw)
    assert p.fits and p.detail.warmup_free_bytes >= p.detail.warmup_bytes == 3_294_625_792


def model_vocab(config: dict) -> int:
    return model_shape(config).vocab_size  # 201,088 (gpt-oss), 262,208 (Gemma 3), 151,936 (Qwen 3)


@pytest.mark.parametrize(
    "config, tp, pp, need, free",
    [
        # A dense model counts the profile's transient (activation) as free again (the same _dummy_sampler_run ran in
        # the profile). gemma-3-12b-it, vllm serve on H100 at 0.95, 0.19 rules: vLLM STARTED it (vllm-figures.yaml).
        # free = slack 4,251,480,752 - context 547,608,330 + activation 4,230,873,088 - graphs outside the budget
        # (515,396,075 + 48 x 12,079,595 = 1,095,216,635) = 6,839,528,875 >= 1024 x 262,208 x 16 = 4,296,015,872.
        # Without the transient it would be 2,608,655,787 and the planner would refuse a logged start.
        (GEMMA3, 1, 1, 4_296_015_872, 6_839_528_875),
        # Llama 3.1 8B: 1024 x 128,256 x 16 = 2,101,346,304; its TP1, TP2 and PP2 starts were logged. PP2's last
        # stage: 4,251,480,752 - 1,535,450,808 + 2,040,004,608 - (515,396,075 + 16 x 12,079,595) = 4,047,364,957
        (LLAMA8, 1, 1, 2_101_346_304, None),
        (LLAMA8, 2, 1, 2_101_346_304, None),
        (LLAMA8, 1, 2, 2_101_346_304, 4_047_364_957),
    ],
)
def test_dense_models_count_the_profiles_transient_and_the_logged_starts_still_start(config, tp, pp, need, free):
    p = plan(
        config,
        H100,
        Settings(
            gpu_memory_utilization=0.95,
            max_model_len=8192,
            usage_context="serve",
            vllm_version="0.19",
            tensor_parallel_size=tp,
            pipeline_parallel_size=pp,
        ),
        gpus=tp * pp,
    )
    assert p.fits and p.stages[-1].warmup_bytes if pp > 1 else p.detail.warmup_bytes == need
    if free is not None:
        assert (p.stages[-1].warmup_free_bytes if pp > 1 else p.detail.warmup_free_bytes) == free


def test_only_the_last_pipeline_stage_warms_the_sampler():
    p = plan(LLAMA8, H100, Settings(tensor_parallel_size=2, pipeline_parallel_size=4, max_model_len=8192), gpus=8)
    # the in-process default: 128 sequences (SchedulerConfig); 128 x 128,256 x 16 = 262,668,288 on stage 3 only
    assert [(st.index, st.warmup_requests, st.warmup_bytes) for st in p.stages] == [
        (0, 0, 0),
        (1, 0, 0),
        (2, 0, 0),
        (3, 128, 262_668_288),
    ]


# ----------------------------------------------------------------- a model on a cluster


@pytest.mark.parametrize(
    "config, gpu, gpus, per_node, layout, tokens, concurrency",
    [
        # 70B bf16 on 8 x H100 at 8k: TP1 cannot hold 131.4 GiB of weights; TP2 (65.7 GiB a GPU) starts but holds
        # 2.65 sequences (21,712 tokens): fewer than MIN_CONCURRENCY 8; TP4 holds 57.89: 2 replicas of 4 GPUs
        (LLAMA70, H100, 8, 8, (4, 1, 2, 0), 474_208, 57.89),
        (LLAMA70, H100, 16, 8, (4, 1, 4, 0), 474_208, 57.89),
        # a 4 x L40S Space: TP2 leaves no room (65.7 GiB > 44.39 x 0.92 = 40.8 GiB); TP4 starts with 6.66 (< 8):
        # nothing reaches the floor, so the layout that starts with the most concurrency
        (LLAMA70, L40S, 4, 4, (4, 1, 1, 0), 54_560, 6.66),
        # nodes of 2 L40S: TP stays in a node (2), so stages: PP2 holds too few, PP3 35.81: one replica of 6, 2 idle
        # (257,440 tokens and 31.43 before issue 35: a TP x PP stage paid a PP communicator of 1.85 GiB more)
        (LLAMA70, L40S, 8, 2, (2, 3, 1, 2), 293_376, 35.81),
        # 8B fits one GPU with room: every GPU a replica
        (LLAMA8, H100, 8, 8, (1, 1, 8, 0), None, None),
    ],
)
def test_the_smallest_tp_that_serves_then_pp_across_nodes_then_replicas(
    config, gpu, gpus, per_node, layout, tokens, concurrency
):
    c = size_cluster(config, gpu, Settings(max_model_len=8192), gpus, gpus_per_node=per_node)
    assert (c.tp, c.pp, c.dp, c.idle_gpus) == layout and c.fits and c.chosen == "auto"
    # every smaller TP without stages held fewer than 8 sequences (0: did not start)
    assert all(conc < MIN_CONCURRENCY for t, p, conc in c.tried if p == 1 and t < c.tp)
    if c.pp > 1:  # one stage fewer held fewer than 8
        assert any(p == c.pp - 1 and conc < MIN_CONCURRENCY for t, p, conc in c.tried)
    if tokens is not None:
        assert (c.kv_tokens_per_replica, c.concurrency_per_replica) == (tokens, concurrency)
    # totals are one replica's x DP; concurrent sequences: whole full-length requests, at most max_num_seqs (128)
    assert c.kv_tokens_total == c.kv_tokens_per_replica * c.dp
    assert c.seqs_per_replica == min(math.floor(c.concurrency_per_replica), 128)
    assert c.seqs_total == c.seqs_per_replica * c.dp


def test_a_given_layout_is_sized_as_given_and_leftover_gpus_are_idle():
    c = size_cluster(LLAMA70, H100, Settings(max_model_len=8192), 20, tp=8)
    # 20 // (8 x 1) = 2 replicas, 4 GPUs idle
    assert (c.tp, c.pp, c.dp, c.idle_gpus, c.chosen) == (8, 1, 2, 4, "given") and c.fits


def test_heads_that_do_not_split_are_skipped():
    odd = {**LLAMA8, "num_attention_heads": 12, "num_key_value_heads": 12}  # 12 heads: TP8 does not split them
    assert layouts(odd, 16, 8) == [(1, 1), (2, 1), (4, 1), (4, 2), (4, 3), (4, 4)]


def test_no_layout_that_starts_says_so_with_the_last_ones_reason():
    c = size_cluster(LLAMA70, KNOWN_GPUS["a10g"], Settings(max_model_len=8192), 8)
    assert not c.fits and (c.tp, c.pp) == (8, 1) and c.seqs_total == 0 and c.kv_tokens_total == 0
    assert c.replica.reason and c.replica.suggestions  # the pick is planned in full: with its fixes


def test_stages_are_bisected_to_the_fewest_that_serve():
    # 70B on L4s, one per node, 8k: TP1 fails; 80 stages (one per layer) hold plenty; bisecting 2..80 finds
    # 8 stages at 3.82 (< 8) and 9 at 9.95: 4096 // 9 = 455 replicas, 1 GPU idle; 8 checks, not 80. (Before
    # issue 35 a PP stage paid 2.1 GiB of non-torch memory, not the measured 0.07: 10 stages were needed.)
    c = size_cluster(LLAMA70, KNOWN_GPUS["l4"], Settings(max_model_len=8192), 4096, gpus_per_node=1)
    assert (c.tp, c.pp, c.dp, c.idle_gpus) == (1, 9, 455, 1) and c.concurrency_per_replica == 9.95
    assert (1, 8, 3.82) in c.tried and len(c.tried) == 8


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(gpus=0), r"gpus must be a whole number from 1 to 4096, got 0"),
        (dict(gpus=True), r"gpus must be a whole number from 1 to 4096, got True"),
        (dict(gpus=5000), r"gpus must be a whole number from 1 to 4096, got 5000"),
        (dict(gpus=8, gpus_per_node=0), r"gpus_per_node must be a whole number from 1 to 4096"),
        (
            dict(gpus=8, tp=8, pp=2),
            r"tensor_parallel_size 8 x pipeline_parallel_size 2 needs 16 GPUs and the cluster "
            r"has 8: give more GPUs or lower them",
        ),
        (dict(gpus=8, tp=0), r"tensor_parallel_size must be a whole number from 1 to 4096, got 0"),
    ],
)
def test_bad_counts_are_refused_naming_the_fix(kwargs, message):
    gpus = kwargs.pop("gpus")
    with pytest.raises(BadInput, match=message):
        size_cluster(LLAMA8, H100, Settings(), gpus, **kwargs)
