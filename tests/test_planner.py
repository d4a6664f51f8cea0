"""The planner, table by table. Each expected figure has its arithmetic beside it."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest

from finspace import planner
from finspace.errors import BadInput, ConfigError
from finspace.host.hardware import GIB, KNOWN_GPUS, custom_gpu
from finspace.planner import Settings, model_shape, plan

ROOT = Path(__file__).resolve().parents[1]
L40S, H100, A100 = KNOWN_GPUS["l40s"], KNOWN_GPUS["h100"], KNOWN_GPUS["a100-80gb"]
KIB, MIB = 1 << 10, 1 << 20


def cfg(name: str) -> dict:
    return json.loads((ROOT / "configs" / name).read_text())


LLAMA8 = cfg("meta-llama__Llama-3.1-8B-Instruct.json")
LLAMA70 = cfg("meta-llama__Llama-3.1-70B-Instruct.json")
AWQ70 = cfg("PatronusAI__Llama-3.1-70B-Instruct-AWQ-INT4.json")
QWEN3 = cfg("Qwen__Qwen3-8B.json")
QWEN25 = cfg("Qwen__Qwen2.5-7B-Instruct.json")
MISTRAL = cfg("mistralai__Mistral-7B-Instruct-v0.3.json")
GEMMA3 = cfg("google__gemma-3-12b-it.json")
PYTHIA = cfg("LinguaCustodia__fin-pythia-1.4b.json")


# ----------------------------------------------------------------- model shapes


@pytest.mark.parametrize(
    "config,params",
    [
        # 128256*4096*2 (embed + untied lm_head) + 32 * (4096*4096*2 q,o + 4096*1024*2 k,v + 3*4096*14336 + 2*4096) + 4096
        (LLAMA8, 8_030_261_248),
        # 151936*4096*2 + 36 * (2*4096*4096 + 2*4096*1024 + 3*4096*12288 + 2*4096 + 2*128 q/k norm) + 4096
        (QWEN3, 8_190_735_360),
        # 152064*3584*2 + 28 * (2*3584^2 + 2*3584*512 + qkv bias 3584+1024 + 3*3584*18944 + 2*3584) + 3584
        (QWEN25, 7_615_616_512),
        (MISTRAL, 7_248_023_552),  # 32768*4096*2 + 32 * 218,112,000 + 4096
        (LLAMA70, 70_553_706_496),  # 128256*8192*2 + 80 * 855,654,400 + 8192
        # text 11,766,034,176 (tied 262208*3840, 48 layers of 224,148,992) + SigLIP 416,866,032 + projector 1152*3840+1152
        (GEMMA3, 12_187_325_040),
        # 50304*2048*2 + 24 * 50,358,272 (qkv+dense+4h+h4, biases, 2 LayerNorms) + 2*2048
        (PYTHIA, 1_414_647_808),
    ],
)
def test_parameter_count_from_config(config, params):
    assert model_shape(config).num_params == params


@pytest.mark.parametrize(
    "config,field,value",
    [
        (LLAMA8, "derived_max_model_len", 131072),  # rope_type llama3: max_position_embeddings already scaled
        (GEMMA3, "derived_max_model_len", 131072),  # gemma3: factor not applied again (vLLM)
        (QWEN3, "derived_max_model_len", 40960),
        (PYTHIA, "num_kv_heads", 16),  # no num_key_value_heads: multi-head attention
        (PYTHIA, "rope_caches", ((2048, 32),)),  # rotary_pct 0.25 of head_dim 128
        (GEMMA3, "num_sliding_layers", 40),  # 5 of every 6 of 48 layers
        (GEMMA3, "sliding_window", 1024),
        (GEMMA3, "head_dim", 256),  # transformers default, absent from the config
        (GEMMA3, "rope_caches", ((131072 * 8, 256), (131072, 256))),  # global (linear x8) + local
        (QWEN25, "sliding_window", None),  # use_sliding_window false
        (AWQ70, "torch_dtype", "float16"),
    ],
)
def test_shape_fields(config, field, value):
    assert getattr(model_shape(config), field) == value


def test_gemma3_text_only_config():
    text = {**GEMMA3["text_config"], "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]}
    shape = model_shape(text)
    assert shape.vision is None
    # the multimodal count minus SigLIP (416,866,032) and the projector (4,424,832)
    assert shape.num_params == 12_187_325_040 - 416_866_032 - 4_424_832


@pytest.mark.parametrize(
    "config,match",
    [
        ({}, r"model_type=None"),
        ({"model_type": "falcon", "architectures": ["FalconForCausalLM"]}, r"unknown architecture model_type='falcon'"),
        ({**LLAMA8, "hidden_size": None}, r"no 'hidden_size'"),
        ({k: v for k, v in LLAMA8.items() if k != "num_hidden_layers"}, r"no 'num_hidden_layers'"),
        ({**LLAMA8, "vocab_size": -5}, r"'vocab_size' must be a positive integer"),
        ({**LLAMA8, "num_key_value_heads": 5}, r"not a multiple of num_key_value_heads 5"),
        ({k: v for k, v in GEMMA3.items() if k != "text_config"}, r"no 'text_config'"),
        ({**LLAMA8, "quantization_config": {"quant_method": "hqq"}}, r"quant_method 'hqq' is not supported"),
        # a caller's config reaches int(): these were a TypeError / ValueError (a 500 on will_it_fit)
        ({**LLAMA8, "quantization_config": {"quant_method": "awq", "bits": "four"}}, r"field 'bits' must be a whole"),
        (
            {**LLAMA8, "quantization_config": {"quant_method": "gptq", "group_size": [128]}},
            r"'group_size' must be a whole",
        ),
        (
            {
                **LLAMA8,
                "quantization_config": {
                    "quant_method": "compressed-tensors",
                    "config_groups": {"g": {"weights": {"num_bits": 4.5}}},
                },
            },
            r"'num_bits' must be a whole number, got 4.5",
        ),
    ],
)
def test_config_errors_name_the_field(config, match):
    with pytest.raises(ConfigError, match=match):
        model_shape(config)


# ----------------------------------------------------------------- weights


@pytest.mark.parametrize(
    "config,settings,gpus,gib",
    [
        # 8,030,261,248 * 2 B + rope cache 131072*128*2 B = 16,093,… B
        (LLAMA8, Settings(dtype="bfloat16"), 1, 14.99),
        # TP2: linears/2 + vocab-parallel embed and lm_head/2 + replicated norms: 7.48 GiB + rope 0.03
        (LLAMA8, Settings(dtype="bfloat16", tensor_parallel_size=2), 2, 7.51),
        (LLAMA8, Settings(dtype="bfloat16", tensor_parallel_size=4), 4, 3.77),
        # online fp8: 6,979,321,856 linear params x 1 B + 1,050,939,392 others x 2 B + rope = 8.49 GiB
        (LLAMA8, Settings(quantization="fp8"), 1, 8.49),
        # float32 on the Hub, served as bf16: 1,414,647,808 x 2 B + rope 2048*32*2 B
        (PYTHIA, Settings(), 1, 2.64),
        # float32 asked for explicitly: x 4 B
        (PYTHIA, Settings(dtype="float32"), 1, 5.27),
        # AWQ int4 g128 + zero points: 68,451,041,280 linear x (0.5 + 2/128 + 0.5/128) + 2,102,665,216 x 2 B + rope
        (AWQ70, Settings(), 1, 37.07),
        # fp8 over 2 GPUs: (68,451,041,280 x 1 B + 2,101,346,304 x 2 B) / 2 + norms + rope = 33.87 GiB per GPU
        (LLAMA70, Settings(quantization="fp8", tensor_parallel_size=2), 2, 33.87),
        # bf16 over 4 GPUs: 141,107,412,992 / 4 B + rope = 32.89 GiB per GPU
        (LLAMA70, Settings(tensor_parallel_size=4), 4, 32.89),
        # 24,374,650,080 B of tensors + rope caches 1,048,576*256*2 + 131072*256*2 B (vLLM logs 23.31)
        (GEMMA3, Settings(), 1, 23.26),
    ],
)
def test_weights_per_gpu(config, settings, gpus, gib):
    p = plan(config, H100, settings, gpus=gpus)
    assert p.weights_bytes / GIB == pytest.approx(gib, abs=0.006)


def test_float32_checkpoint_is_served_as_bf16():
    p = plan(PYTHIA, L40S)
    assert p.detail.dtype == "bfloat16"
    assert any("serves it as bfloat16" in n for n in p.notes)


# ----------------------------------------------------------------- KV bytes per token


@pytest.mark.parametrize(
    "config,settings,expected",
    [
        (LLAMA8, Settings(), 32 * 2 * 8 * 128 * 2),  # 131,072 B = 128 KiB
        (LLAMA8, Settings(kv_cache_dtype="fp8"), 32 * 2 * 8 * 128 * 1),  # 64 KiB
        (LLAMA8, Settings(dtype="float32"), 32 * 2 * 8 * 128 * 4),  # auto follows the model dtype
        (QWEN3, Settings(), 36 * 2 * 8 * 128 * 2),  # 144 KiB
        (QWEN25, Settings(), 28 * 2 * 4 * 128 * 2),  # 56 KiB
        (QWEN25, Settings(tensor_parallel_size=4), 28 * 2 * 1 * 128 * 2),  # 4 KV heads / 4 = 1 per GPU: 14 KiB
        (QWEN25, Settings(tensor_parallel_size=8), 28 * 2 * 1 * 128 * 2),  # replicated: still 1 per GPU
        (LLAMA70, Settings(tensor_parallel_size=2), 80 * 2 * 4 * 128 * 2),  # 160 KiB per GPU
        (PYTHIA, Settings(), 24 * 2 * 16 * 128 * 2),  # MHA: 192 KiB
        (GEMMA3, Settings(), 48 * 2 * 8 * 256 * 2),  # all layers, before sliding windows: 384 KiB
    ],
)
def test_kv_bytes_per_token(config, settings, expected):
    tp = settings.tensor_parallel_size
    assert plan(config, H100, settings, gpus=tp).kv_bytes_per_token == expected


def test_gemma3_worked_check_from_the_mechanism_doc():
    # page = 16 tokens x 8 heads x 256 x 2 (K,V) x 2 B = 128 KiB per layer; 6 groups of 8 layers share
    # one pool with 8 x 128 KiB = 1 MiB blocks. 47.72 GiB -> 48,865 blocks; 48,865 // 6 x 16 = 130,304
    # tokens; concurrency = 48,865 / (512 full + 5 x 513 sliding blocks) = 15.88.
    s = Settings(dtype="bfloat16", max_model_len=8192, max_num_batched_tokens=8192, vllm_version="0.19")
    cap = planner.kv_capacity(model_shape(GEMMA3), s, int(47.72 * GIB))
    assert (cap.groups, cap.block_bytes, cap.blocks) == (6, MIB, 48_865)
    assert cap.tokens == 130_304
    assert cap.max_concurrency == 15.88


def test_sliding_window_saves_memory_only_at_long_context():
    shape = model_shape(GEMMA3)
    s = Settings(dtype="bfloat16", max_num_batched_tokens=2048, vllm_version="0.32")
    short = planner.kv_capacity(shape, replace(s, max_model_len=4096), 10 * GIB)
    long = planner.kv_capacity(shape, replace(s, max_model_len=131072), 10 * GIB)
    # 4096 tokens <= window - 1 + 2 x 2048 in flight: sliding layers cost as much as full ones (+1 block)
    # 40 x (256 + 1) + 8 x 256 blocks of 128 KiB
    assert short.request_bytes == (40 * 257 + 8 * 256) * 128 * KIB
    # 131072: sliding layers hold cdiv(1023 + 4096, 16) + 1 = 321 blocks, full ones 8192
    assert long.request_bytes == (40 * 321 + 8 * 8192) * 128 * KIB


# ----------------------------------------------------------------- budget and verdicts


def test_budget_arithmetic_adds_up():
    p = plan(LLAMA8, L40S, Settings(max_model_len=8192, gpu_memory_utilization=0.9))
    # requested = ceil(44.39 GiB x 0.90); KV = requested - weights - activation - overhead
    assert p.requested_bytes == -(-L40S.total_bytes * 9 // 10)
    assert p.kv_cache_bytes == p.requested_bytes - p.weights_bytes - p.activation_bytes - p.overhead_bytes
    # tokens = floor(KV / (32 layers x 16 tokens x 4 KiB (2 x 8 heads x 128 x 2 B))) x 16
    assert p.kv_cache_tokens == p.kv_cache_bytes // (32 * 16 * 4 * KIB) * 16
    # overhead under 0.32 rules = non-torch 0.25 GiB + CUDA graphs 0.48 + 32 x 0.01125 GiB
    assert p.overhead_bytes == int(0.25 * GIB) + int(0.48 * GIB) + 32 * int(0.01125 * GIB)
    assert p.fits and p.max_concurrency > 1


def test_cudagraphs_only_in_budget_since_021():
    new = plan(LLAMA8, L40S, Settings(max_model_len=8192))
    old = plan(LLAMA8, L40S, Settings(max_model_len=8192, vllm_version="0.19"))
    eager = plan(LLAMA8, L40S, Settings(max_model_len=8192, enforce_eager=True))
    assert old.overhead_bytes == eager.overhead_bytes == int(0.25 * GIB)
    assert new.overhead_bytes - old.overhead_bytes == new.detail.cudagraph_bytes > 0


@pytest.mark.parametrize(
    "gpu,usage,expected",
    [
        (L40S, "engine", (2048, 128)),  # AsyncLLM.from_engine_args: ENGINE_CONTEXT -> SchedulerConfig defaults
        (H100, "engine", (2048, 128)),
        (L40S, "serve", (2048, 256)),
        (L40S, "llm", (8192, 256)),
        (H100, "serve", (8192, 1024)),  # >= 70 GiB and not an A100
        (H100, "llm", (16384, 1024)),
        (A100, "serve", (2048, 256)),  # A100-80GB excluded by name
    ],
)
def test_batch_defaults(gpu, usage, expected):
    assert planner.batch_defaults(gpu, usage) == expected


def test_activation_scales_with_batched_tokens_and_vocab():
    small = plan(LLAMA8, H100, Settings(max_model_len=8192, max_num_batched_tokens=2048, max_num_seqs=128))
    big = plan(LLAMA8, H100, Settings(max_model_len=8192, max_num_batched_tokens=8192, max_num_seqs=1024))
    qwen = plan(QWEN3, H100, Settings(max_model_len=8192, max_num_batched_tokens=8192, max_num_seqs=1024))
    assert small.activation_bytes < big.activation_bytes < qwen.activation_bytes  # 128256 < 151936 vocab
    # sampler: 1024 requests x 128256 vocab x 14 B = 1.71 GiB; held hidden 8192 x 4096 x 2 B x 3 = 0.19 GiB
    assert big.activation_bytes / GIB == pytest.approx(1.90, abs=0.01)


@pytest.mark.parametrize(
    "config,settings,gpus,match",
    [
        # Gemma 3 12B with the old table's "conservative" settings: 0.50 x 44.39 = 22.2 GiB < 23.3 GiB of weights
        (
            GEMMA3,
            Settings(gpu_memory_utilization=0.50, max_model_len=256),
            1,
            r"^weights 23\.3 GiB exceed the 22\.2 GiB that gpu_memory_utilization 0\.50 gives on L40S \(44\.4 GiB\); "
            r"raise it to ≥ 0\.5[6-9]",
        ),
        # Llama 3.1 8B at its default 131072 tokens: 131072 x 128 KiB = 16.0 GiB of KV
        (
            LLAMA8,
            Settings(gpu_memory_utilization=0.50),
            1,
            r"^max_model_len 131072 needs 16\.0 GiB of KV cache; \d+\.\d GiB is free on L40S at utilization 0\.50\. "
            r"Raise gpu_memory_utilization to 0\.\d\d, lower max_model_len to \d+",
        ),
        (LLAMA70, Settings(tensor_parallel_size=4), 1, r"tensor_parallel_size 4 needs 4 GPUs; the plan has 1"),
        (LLAMA8, Settings(max_model_len=200_000), 1, r"max_model_len 200000 exceeds the model's limit 131072"),
        (
            QWEN25,
            Settings(tensor_parallel_size=8),
            8,
            r"28 attention heads \(4 KV heads\) do not split evenly over tensor_parallel_size 8",
        ),
        (
            LLAMA70,
            Settings(quantization="bitsandbytes", max_model_len=4096),
            1,
            r"vLLM 0\.32 has no bitsandbytes quantization\. Use a 4-bit AWQ checkpoint",
        ),
        (LLAMA70, Settings(), 1, r"^weights 131\.4 GiB exceed"),
    ],
)
def test_refusals_carry_the_reason(config, settings, gpus, match):
    p = plan(config, L40S, settings, gpus=gpus)
    assert not p.fits
    assert p.max_concurrency == 0
    with pytest.raises(AssertionError, match=match):
        raise AssertionError(p.reason)


def test_fp8_kv_cache_needs_ada_or_hopper():
    p = plan(LLAMA8, A100, Settings(kv_cache_dtype="fp8", max_model_len=8192))
    assert not p.fits
    assert "kv_cache_dtype fp8 needs compute capability 8.9+ (Ada/Hopper); A100 80GB is 8.0" in p.reason
    assert p.suggestions and p.suggestions[0].settings.kv_cache_dtype == "auto"
    assert plan(LLAMA8, L40S, Settings(kv_cache_dtype="fp8", max_model_len=8192)).fits


def test_no_memory_left_for_kv_cache():
    tiny = custom_gpu(int(15.5 * GIB))
    p = plan(LLAMA8, tiny, Settings(gpu_memory_utilization=1.0, max_model_len=1024))
    # 15.5 GiB - 14.99 weights - activation - overhead < 0
    assert not p.fits and p.kv_cache_bytes == 0 and p.kv_cache_tokens == 0
    assert p.reason.startswith("no memory left for the KV cache")


@pytest.mark.parametrize(
    "settings,match",
    [
        (Settings(gpu_memory_utilization=1.5), r"gpu_memory_utilization must be in \(0, 1\]"),
        (Settings(gpu_memory_utilization=0), r"gpu_memory_utilization must be in \(0, 1\]"),
        (Settings(max_model_len=0), r"max_model_len must be a positive integer"),
        (Settings(tensor_parallel_size=-2), r"tensor_parallel_size must be a positive integer"),
        (Settings(quantization="int3"), r"unknown quantization 'int3'; use one of fp8, awq"),
        (Settings(dtype="fp64"), r"unknown dtype 'fp64'"),
        (Settings(kv_cache_dtype="int4"), r"unknown kv_cache_dtype 'int4'"),
        (Settings(usage_context="batch"), r"unknown usage_context 'batch'"),
        (
            Settings(quantization="gptq"),
            r"quantization 'gptq' does not match the checkpoint's quantization_config \(awq\)",
        ),
    ],
)
def test_bad_settings_raise(settings, match):
    with pytest.raises(BadInput, match=match):
        plan(AWQ70, L40S, settings)


def test_awq_needs_an_awq_checkpoint():
    with pytest.raises(ConfigError, match=r"quantization 'awq' needs a pre-quantized checkpoint"):
        plan(LLAMA8, L40S, Settings(quantization="awq"))


def test_gemma_refuses_float16():
    with pytest.raises(BadInput, match=r"vLLM refuses dtype float16 for gemma3"):
        plan(GEMMA3, L40S, Settings(dtype="float16"))


def test_auto_fit_max_model_len():
    p = plan(LLAMA8, KNOWN_GPUS["l4"], Settings(max_model_len=-1))
    assert p.fits and p.max_model_len == p.max_model_len_that_fits < 131072
    # the largest length: one more token would not fit
    assert p.detail.request_kv_bytes <= p.detail.available_kv_bytes


# ----------------------------------------------------------------- suggestions


@pytest.mark.parametrize(
    "config,settings,gpus",
    [
        (GEMMA3, Settings(gpu_memory_utilization=0.50, max_model_len=256), 1),
        (LLAMA8, Settings(gpu_memory_utilization=0.50), 1),
        (LLAMA70, Settings(), 1),
        (LLAMA70, Settings(quantization="fp8", tensor_parallel_size=2, max_model_len=32768), 2),
        (QWEN3, Settings(max_model_len=40960), 1),
    ],
)
def test_every_suggestion_is_rechecked_and_fits(config, settings, gpus):
    gpu = L40S if config is not QWEN3 else KNOWN_GPUS["a10g"]
    p = plan(config, gpu, settings, gpus=gpus)
    assert not p.fits and p.suggestions
    for sg in p.suggestions:
        c = planner.awq_variant(config) if sg.config_change else config
        again = plan(c, gpu, sg.settings, gpus=sg.gpus)
        assert again.fits, sg.title
        assert again.max_model_len == sg.plan_max_model_len


def test_suggestion_ranking_for_gemma_half_utilization():
    p = plan(GEMMA3, L40S, Settings(gpu_memory_utilization=0.50, max_model_len=256))
    titles = [s.title for s in p.suggestions]
    # raise utilization first (least change), then fp8 weights, a 4-bit checkpoint, tensor parallel
    assert titles[0].startswith("raise gpu_memory_utilization to 0.5")
    assert "use fp8 weights (quantization fp8)" in titles
    assert any(t.startswith("tensor parallel over 2 GPUs") and "needs 2 GPUs, the plan has 1" in t for t in titles)


def test_lower_context_suggestion_is_rounded_and_fits():
    p = plan(LLAMA8, KNOWN_GPUS["l4"], Settings(gpu_memory_utilization=0.90))
    lower = [s for s in p.suggestions if s.title.startswith("lower max_model_len to ")]
    assert lower
    n = lower[0].plan_max_model_len
    assert n % 1024 == 0 and n <= p.max_model_len_that_fits


def test_tensor_parallel_suggestion_smallest_n():
    p = plan(LLAMA70, L40S, Settings(max_model_len=8192))
    tp = [
        s
        for s in p.suggestions
        if s.settings.tensor_parallel_size > 1 and "max_model_len" not in s.title and s.settings.quantization is None
    ]
    # 131.4 GiB of bf16 weights: 2 x 40.8 GiB is too little, 4 x 32.9 GiB fits
    assert tp and tp[0].settings.tensor_parallel_size == 4 and tp[0].gpus == 4


# ----------------------------------------------------------------- must show (issue 2)


def test_gemma3_12b_works_on_one_l40s():
    bf16 = plan(GEMMA3, L40S, Settings(dtype="bfloat16", max_model_len=32768, gpu_memory_utilization=0.90))
    fp8 = plan(GEMMA3, L40S, Settings(quantization="fp8", max_model_len=-1, gpu_memory_utilization=0.90))
    assert bf16.fits and bf16.kv_cache_bytes > 10 * GIB
    assert fp8.fits and fp8.max_model_len == 131072


def test_llama70b_working_plans_on_l40s():
    four_bit = plan(AWQ70, L40S, Settings(max_model_len=4096, gpu_memory_utilization=0.95))
    fp8_tp2 = plan(LLAMA70, L40S, Settings(quantization="fp8", tensor_parallel_size=2, max_model_len=8192), gpus=2)
    bf16_tp4 = plan(
        LLAMA70, L40S, Settings(tensor_parallel_size=4, max_model_len=32768), gpus=4, total_size_bytes=141_107_412_992
    )
    for p in (four_bit, fp8_tp2, bf16_tp4):
        assert p.fits, p.reason
        assert p.max_concurrency >= 1


def test_plan_json_names_are_stable():
    j = planner.plan_json(plan(GEMMA3, L40S, Settings(gpu_memory_utilization=0.5, max_model_len=256)))
    for key in (
        "weights_gib",
        "kv_bytes_per_token",
        "activation_gib",
        "overhead_gib",
        "kv_cache_gib",
        "kv_cache_tokens",
        "max_model_len",
        "max_model_len_that_fits",
        "fits",
        "reason",
        "suggestions",
    ):
        assert key in j
    assert j["fits"] is False and j["suggestions"][0]["settings"]["gpu_memory_utilization"] > 0.5
    json.dumps(j)


def _imports(path: Path) -> set:
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mods.add(node.module if node.level == 0 else f"relative {node.module}")
    return mods


def test_planner_is_pure():
    # every module of the planner package and every finspace module they import, however deep
    # (lazy imports inside functions too): no torch, vllm, NVML, files or network
    src = ROOT / "src"
    todo = sorted((src / "finspace" / "planner").glob("*.py"))
    assert todo, "no planner package"
    seen: set = set()
    mods: set = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for m in _imports(path):
            if m is not None and m.startswith("finspace."):
                module = src / (m.replace(".", "/") + ".py")
                todo.append(module if module.is_file() else module.with_suffix("") / "__init__.py")
            else:
                mods.add(m)
    allowed = {"__future__", "math", "dataclasses", "re", "typing", "collections.abc"}
    assert mods <= allowed, mods - allowed


# ----------------------------------------------------------------- fewer GPUs than tensor_parallel_size


def test_tp_on_machine():
    # largest power of two <= gpus that splits the heads: Llama 70B 64 heads / 8 KV heads,
    # Qwen2.5 7B 28 heads / 4 KV heads (8 does not divide 28), Gemma 3 16 heads / 8 KV, SigLIP 16
    table = [
        (LLAMA70, 1, 1),
        (LLAMA70, 2, 2),
        (LLAMA70, 3, 2),
        (LLAMA70, 6, 4),
        (LLAMA70, 8, 8),
        (QWEN25, 8, 4),
        (GEMMA3, 8, 8),
        (PYTHIA, 5, 4),
    ]
    for config, gpus, tp in table:
        assert planner.tp_on_machine(model_shape(config), gpus) == tp, (config["model_type"], gpus)


BF16_TP4 = Settings(dtype="bfloat16", tensor_parallel_size=4, max_model_len=32768, gpu_memory_utilization=0.90)
FP8_TP2 = Settings(
    dtype="bfloat16", quantization="fp8", tensor_parallel_size=2, max_model_len=-1, gpu_memory_utilization=0.90
)
LLAMA70_SIZE = 141_107_412_992  # the bf16 checkpoint's safetensors total_size


@pytest.mark.parametrize(
    "settings,gpus,expected",
    [
        # models.yaml's llama-3.1-70b-fin (bf16, TP 4) on 1 x L40S: budget 44.39 x 0.90 = 39.95 GiB per GPU.
        # 1. AWQ 4-bit at TP 1: 39.95 - 37.07 weights - 0.48 activation - 1.63 overhead (0.25 non-torch + 1.38
        #    CUDA graphs) = 0.77 GiB = 157 blocks of 80 layers x 16 tokens x 4 KiB; one held back -> 156 x 16 =
        #    2,496 tokens -> rounded down to 2,304 (a multiple of 256)
        # 2. fp8 over 2 GPUs: 39.95 - 33.87 - 0.32 - 3.48 (2.10 non-torch with TP + 1.38) = 2.28 GiB at
        #    160 KiB/token -> 14,944 -> 14,336 (multiple of 1024)
        # 3. bf16 over 4 GPUs (as configured): 39.95 - 32.89 - 0.31 - 3.48 = 3.28 GiB at 80 KiB/token ->
        #    42,912 tokens >= 32,768 asked
        (BF16_TP4, 1, [("awq", 1, 1, 2304), ("fp8", 2, 2, 14336), (None, 4, 4, 32768)]),
        # the same on 2 x L40S: TP 2 runs here; fp8 at TP 2 (14,336, as above) ranks first, then AWQ at TP 2
        # (18.5 GiB of weights per GPU leave room for 32,768), then bf16 over the 4 GPUs it asks for
        (BF16_TP4, 2, [("fp8", 2, 2, 14336), ("awq", 2, 2, 32768), (None, 4, 4, 32768)]),
        # 3 x L40S: TP 2 is the largest power of two <= 3; same plans, on this machine
        (BF16_TP4, 3, [("fp8", 2, 3, 14336), ("awq", 2, 3, 32768), (None, 4, 4, 32768)]),
        # models.yaml's llama-3.1-70b-fin-fp8 (fp8, TP 2, max_model_len auto) on 1 x L40S: fp8 at TP 1 is
        # 67 GiB of weights (no fit); AWQ at TP 1 auto-fits 2,496 tokens (as above, not rounded: auto);
        # then its own fp8 over 2 GPUs (auto: 14,944). No TP 4: TP 2 already serves the auto length.
        (FP8_TP2, 1, [("awq", 1, 1, 2496), ("fp8", 2, 2, 14944)]),
    ],
)
def test_fewer_gpus_than_tensor_parallel(settings, gpus, expected):
    p = plan(LLAMA70, L40S, settings, gpus=gpus, total_size_bytes=LLAMA70_SIZE)
    assert not p.fits and p.reason.startswith(f"tensor_parallel_size {settings.tensor_parallel_size} needs")
    got = [
        (sg.settings.quantization, sg.settings.tensor_parallel_size, sg.gpus, sg.plan_max_model_len)
        for sg in p.suggestions
    ]
    assert got == expected
    # what runs on this machine first, and each suggestion re-checked
    on_machine = [sg.gpus <= gpus for sg in p.suggestions]
    assert on_machine == sorted(on_machine, reverse=True) and on_machine[0]
    for sg in p.suggestions:
        four_bit = sg.config_change is not None
        again = plan(
            planner.awq_variant(LLAMA70) if four_bit else LLAMA70,
            L40S,
            sg.settings,
            gpus=sg.gpus,
            total_size_bytes=None if four_bit else LLAMA70_SIZE,
        )
        assert again.fits and again.max_model_len == sg.plan_max_model_len, sg.title
        assert sg.settings.tensor_parallel_size <= sg.gpus
        assert (f"needs {sg.gpus} GPUs, the plan has {gpus}" in sg.title) == (sg.gpus > gpus)


@pytest.mark.parametrize(
    "config,settings,gpus,titles",
    [
        # Llama 8B asked for TP 2 on 1 x L40S: at TP 1 it fits as asked (15 GiB of weights), so the setting
        # fix alone, then the configured TP 2 on 2 GPUs; no quantization offered
        (
            LLAMA8,
            Settings(tensor_parallel_size=2, max_model_len=32768),
            1,
            [
                "set tensor_parallel_size to 1",
                "tensor parallel over 2 GPUs (tensor_parallel_size 2, as configured; needs 2 GPUs, the plan has 1)",
            ],
        ),
        # Llama 70B bf16 TP 8 on 4 x L40S: TP 4 fits 32,768 (42,912 tokens, as above)
        (
            LLAMA70,
            replace(BF16_TP4, tensor_parallel_size=8),
            4,
            [
                "set tensor_parallel_size to 4",
                "tensor parallel over 8 GPUs (tensor_parallel_size 8, as configured; needs 8 GPUs, the plan has 4)",
            ],
        ),
        # Qwen2.5 7B: 28 heads do not split over 8; 4 does
        (QWEN25, Settings(tensor_parallel_size=8, max_model_len=32768), 8, ["set tensor_parallel_size to 4"]),
        # the bf16 entry on 1 x L40S: the AWQ line names the TP it runs at and the shortened context
        (
            LLAMA70,
            BF16_TP4,
            1,
            [
                "use a 4-bit AWQ checkpoint (quantization awq) at tensor_parallel_size 1 with max_model_len 2304",
                "use fp8 weights (quantization fp8) over 2 GPUs (tensor_parallel_size 2; needs 2 GPUs, the plan has 1)"
                " with max_model_len 14336",
                "tensor parallel over 4 GPUs (tensor_parallel_size 4, as configured; needs 4 GPUs, the plan has 1)",
            ],
        ),
    ],
)
def test_tensor_parallel_setting_fix_titles(config, settings, gpus, titles):
    p = plan(config, L40S, settings, gpus=gpus, total_size_bytes=LLAMA70_SIZE if config is LLAMA70 else None)
    assert [sg.title for sg in p.suggestions] == titles


def test_util_is_raised_for_a_fix_only_when_raising_alone_does_not_do():
    # Gemma 3 at 0.50: raising utilization alone (to 0.57) fixes it, so fp8 KV "with utilization 0.57"
    # would be a bigger change for the same result and is not offered
    p = plan(GEMMA3, L40S, Settings(gpu_memory_utilization=0.50, max_model_len=256))
    assert not any("kv_cache_dtype fp8 with gpu_memory_utilization" in sg.title for sg in p.suggestions)
    # Llama 70B at 8192 on one L40S: nothing at 0.92 fits; AWQ (37.07 GiB) does at 0.94:
    # 44.39 x 0.94 = 41.73 - 37.07 - 0.48 - 1.63 = 2.54 GiB >= 8192 x 320 KiB = 2.5 GiB (+ one block);
    # at 0.93: 41.28 - 37.18 = 2.10 GiB < 2.5 GiB
    p = plan(LLAMA70, L40S, Settings(max_model_len=8192))
    first = p.suggestions[0]
    assert first.config_change and first.settings.gpu_memory_utilization == 0.94
    assert first.title == "use a 4-bit AWQ checkpoint (quantization awq) with gpu_memory_utilization 0.94"
