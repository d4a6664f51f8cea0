"""The planner on the architectures of issue #22: mixture-of-experts, MLA, vision-language models,
phi3, transformers' defaults and pipeline parallelism. Each figure has its arithmetic beside it;
tests/data/configs/SOURCES.md says where each config and published size comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from finspace.cli import main
from finspace.errors import ConfigError
from finspace.host.hardware import GIB, KNOWN_GPUS
from finspace.planner import Settings, activation_bytes, model_shape, plan
from finspace.planner.defaults import TRANSFORMERS_DEFAULTS, with_defaults
from finspace.planner.memory import weights
from finspace.planner.shape import inventory, pp_partition, stage
from finspace.fit.render import plan_json

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "configs"
L40S, H100 = KNOWN_GPUS["l40s"], KNOWN_GPUS["h100"]


def cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


QWEN3_MOE, GPT_OSS, GPT_OSS_120 = cfg("Qwen__Qwen3-30B-A3B"), cfg("openai__gpt-oss-20b"), cfg("openai__gpt-oss-120b")
MIXTRAL, QWEN2_MOE, DEEPSEEK = (
    cfg("mistralai__Mixtral-8x7B-v0.1"),
    cfg("Qwen__Qwen1.5-MoE-A2.7B"),
    cfg("deepseek-ai__DeepSeek-V2-Lite"),
)
PHI3, MISTRAL3 = cfg("microsoft__Phi-3-mini-4k-instruct"), cfg("mistralai__Mistral-Small-3.1-24B-Instruct-2503")
GEMMA3_4B, GEMMA3_27B = cfg("google__gemma-3-4b-it"), cfg("google__gemma-3-27b-it")
LLAVA, QWEN25_VL = cfg("llava-hf__llava-1.5-7b-hf"), cfg("Qwen__Qwen2.5-VL-7B-Instruct")
MLLAMA = cfg("meta-llama__Llama-3.2-11B-Vision-Instruct")
LLAMA8 = json.loads((ROOT / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())


# ----------------------------------------------------------------- weights vs published checkpoints


@pytest.mark.parametrize(
    "config,published,planned",
    [
        # 151936*2048*2 + 48 * (attention 18,874,368 + q/k norm 256 + 2 norms 4096 + router 128*2048
        #   + 128 experts * 3*2048*768 = 603,979,776) + 2048 = 30,532,122,624 params x 2 B
        (QWEN3_MOE, 61_064_245_248, 61_064_245_248),
        # bf16: embed+lm_head 2*201088*2880, 24 * (attention 26,542,080 + biases 8,000 + 64 sinks + 2 norms 5,760
        #   + router 92,160 + bias 32 + expert biases 32*(5760+2880)) = 1,804,459,584 params x 2 B
        # mxfp4: 24 * 32 experts * 3*2880*2880 = 19,110,297,600 values x (0.5 + 1/32) B = 10,152,345,600
        (GPT_OSS, 13_761_264_768, 13_761_264_768),
        (GPT_OSS_120, 65_248_815_744, 65_248_815_744),  # the same with 36 layers of 128 experts
        # 32000*4096*2 + 32 * (attention 41,943,040 + 8 * 3*4096*14336 + gate 8*4096 + 2 norms) + 4096
        (MIXTRAL, 93_405_585_408, 93_405_585_408),
        # 151936*2048*2 + 24 * (attention 16,777,216 + qkv bias 6,144 + 60 * 3*2048*1408 + router 60*2048
        #   + shared expert 3*2048*5632 + shared gate 2048 + 2 norms) + 2048
        (QWEN2_MOE, 28_631_568_384, 28_631_568_384),
        # MLA per layer: q_proj 2048*16*192 + kv_a 2048*576 + kv_b 512*16*256 + o 16*128*2048 + kv_a norm 512;
        # layer 0 dense MLP 3*2048*10944; 26 MoE layers of 64 * 3*2048*1408 + shared 3*2048*2816 + router 64*2048
        (DEEPSEEK, 31_412_968_448, 31_412_968_448),
        # 32064*3072*2 + 32 * (4*3072^2 + 3*3072*8192 + 2*3072) + 3072 = 3,821,079,552 params x 2 B
        (PHI3, 7_642_159_104, 7_642_159_104),
        # text 23,572,403,200 + Pixtral tower 403,305,472 (24 * (4*1024^2 + 3*1024*4096 + 2*1024) + patch conv
        #   3*14*14*1024 + ln_pre) + projector 35,652,608 (norm, merger 4096*1024, 1024*5120, 5120*5120)
        (MISTRAL3, 48_022_722_560, 48_022_722_560),
        # tied 262208*2560 + 34 layers (8 heads, 4 KV heads, head_dim 256 from Gemma3TextConfig's defaults)
        #   + SigLIP 416,866,032 + projector 1152*2560+1152
        (GEMMA3_4B, 8_600_158_944, 8_600_158_944),
        (GEMMA3_27B, 54_864_813_280, 54_864_813_280),
        # vLLM loads CLIP up to vision_feature_layer -2: 23 of 24 layers, no post-layernorm (12,598,272 params
        # fewer than the checkpoint's 7,063,427,072): -0.18 %
        (LLAVA, 14_126_854_144, 14_101_657_600),
        # Qwen2 7B text 7,615,616,512 + vision 32 * (4*1280^2 + 3*1280*3420 + biases, norms) + merger
        (QWEN25_VL, 16_584_333_312, 16_584_333_312),
    ],
)
def test_weights_match_published_total_size(config, published, planned):
    shape = model_shape(config)
    w = weights(shape, shape.quantization, "bfloat16", 1, None)
    assert w.bytes - w.buffer_bytes == planned
    assert abs(planned - published) / published < 0.002


# Published "Model loading took" figures (tests/data/vllm-weights-figures.yaml)
WEIGHTS_FIGURES = yaml.safe_load((ROOT / "tests" / "data" / "vllm-weights-figures.yaml").read_text())


@pytest.mark.parametrize("case", WEIGHTS_FIGURES, ids=[c["id"] for c in WEIGHTS_FIGURES])
def test_weights_match_vllm_logs(case):
    shape = model_shape(cfg(case["model_config"].removesuffix(".json")))
    w = weights(shape, shape.quantization, "bfloat16", case["tensor_parallel_size"], None, marlin=case["marlin"])
    # Qwen3-30B-A3B tp4: 14.2453 GiB vs 14.2474 (-0.02 %); gpt-oss-120b on Marlin: 65.9101 vs 65.9651 (-0.08 %)
    assert abs(w.bytes / GIB - case["weights_gib"]) / case["weights_gib"] < 0.002


def test_mxfp4_padding_on_marlin():
    # Marlin: hidden 2880 -> 3072 (256), intermediate 2880 -> 2944 (128): 24 * 32 * 3*3072*2944 values
    shape = model_shape(GPT_OSS)
    parts = dict((k, n) for k, n, _ in weights(shape, shape.quantization, "bfloat16", 1, None, marlin=True).parts)
    assert parts["expert"] == 24 * 32 * 3 * 3072 * 2944
    # Triton (Hopper): the intermediate size per rank rounds to 64; 1440 at tp2 -> 1472
    parts = dict((k, n) for k, n, _ in weights(shape, shape.quantization, "bfloat16", 2, None).parts)
    assert parts["expert"] == 24 * 32 * 3 * 2880 * 1472
    assert plan(GPT_OSS, L40S).weights_bytes > plan(GPT_OSS, H100).weights_bytes


# ----------------------------------------------------------------- KV cache


@pytest.mark.parametrize(
    "config,settings,expected",
    [
        (QWEN3_MOE, Settings(), 98_304),  # 48 layers x 2 x 4 KV heads x 128 x 2 B
        (QWEN3_MOE, Settings(tensor_parallel_size=2), 49_152),  # 2 KV heads per rank
        (QWEN3_MOE, Settings(kv_cache_dtype="fp8"), 49_152),  # 1 B
        (GPT_OSS, Settings(), 49_152),  # 24 x 2 x 8 x 64 x 2 B (12 of them slide over 128 tokens)
        (GPT_OSS_120, Settings(), 73_728),  # 36 x 2 x 8 x 64 x 2 B
        (MIXTRAL, Settings(), 131_072),  # 32 x 2 x 8 x 128 x 2 B
        (QWEN2_MOE, Settings(), 196_608),  # 24 x 2 x 16 x 128 x 2 B
        (DEEPSEEK, Settings(), 31_104),  # MLA: 27 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B
        (DEEPSEEK, Settings(tensor_parallel_size=2), 31_104),  # the latent is on every rank, not split
        (PHI3, Settings(), 393_216),  # 32 x 2 x 32 x 96 x 2 B
        (MISTRAL3, Settings(), 163_840),  # 40 x 2 x 8 x 128 x 2 B
        (GEMMA3_4B, Settings(), 139_264),  # 34 x 2 x 4 x 256 x 2 B
        (GEMMA3_27B, Settings(), 507_904),  # 62 x 2 x 16 x 128 x 2 B
        (LLAVA, Settings(), 524_288),  # 32 x 2 x 32 x 128 x 2 B (LlamaConfig's defaults)
        (QWEN25_VL, Settings(), 57_344),  # 28 x 2 x 4 x 128 x 2 B
    ],
)
def test_kv_bytes_per_token(config, settings, expected):
    assert plan(config, H100, settings, gpus=2).kv_bytes_per_token == expected


def test_mla_page_and_blocks():
    p = plan(DEEPSEEK, H100, Settings(max_model_len=8192))
    # one block = 27 layers x 16 tokens x 576 x 2 B = 497,664 B
    assert p.detail.page_bytes == 16 * 576 * 2 and p.detail.block_bytes == 497_664
    assert p.kv_cache_tokens == p.kv_cache_bytes // 497_664 * 16
    assert p.detail.mla_latent == 576 and p.detail.kv_heads_per_rank == 1


def test_phi3_slides_every_layer():
    # no layer_types: vLLM's CacheConfig.sliding_window = 2047 applies to all 32 layers
    d = plan(PHI3, H100, Settings()).detail
    assert (d.sliding_layers, d.full_layers, d.sliding_window) == (32, 0, 2047)


def test_gpt_oss_is_hybrid_sliding():
    d = plan(GPT_OSS, H100, Settings(max_model_len=32768)).detail
    # 12 sliding (window 128) + 12 full layers: two groups of 12 sharing one pool
    assert (d.sliding_layers, d.full_layers, d.sliding_window, d.num_groups, d.group_size) == (12, 12, 128, 2, 12)


# ----------------------------------------------------------------- activation: the MoE workspace


def test_moe_workspace_in_the_profile():
    shape = model_shape(QWEN3_MOE)
    act = activation_bytes(shape, 2, 2048, 128, 1)
    # fused_experts: cache13 = 2048 x 8 x max(N=2*768, K=2048) + cache2 = 2048 x 8 x 768, in bf16,
    # + router logits 2048 x 128 x 4 B = 2048 x (8 x 2816 x 2 + 512) = 93,323,264;
    # + hidden in/out 2048 x 2 x 2048 x 2 B = 16,777,216
    assert act["forward"] == 93_323_264 + 16_777_216
    # tp 2 halves N: 2048 x (8 x (2048 + 384) x 2 + 512) + 16,777,216
    assert activation_bytes(shape, 2, 2048, 128, 2)["forward"] == 2048 * (8 * 2432 * 2 + 512) + 16_777_216


def test_vision_profile_counts_the_encoder_budget():
    # Pixtral: (1540 / 14)^2 / 2^2 = 3025 tokens per image > 2048 batched tokens: the encoder budget
    shape = model_shape(MISTRAL3)
    assert shape.tower.tokens_per_image == 3025
    assert activation_bytes(shape, 2, 2048, 128, 1)["vision"] == int(3025 * 5120 * 2 * 4.5)


# ----------------------------------------------------------------- defaults and config reading


def test_gemma3_4b_takes_the_class_defaults():
    shape = model_shape(GEMMA3_4B)  # text_config has no num_attention_heads: it crashed before
    assert (shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.vocab_size) == (8, 4, 256, 262208)
    assert plan(GEMMA3_4B, L40S).fits


def test_llava_with_a_pixtral_tower():
    # mistral-community/pixtral-12b style: llava wrapping a Pixtral encoder (no patch merger, projector biases)
    vision = {k: v for k, v in MISTRAL3["vision_config"].items()}
    text = {**MISTRAL3["text_config"], "num_hidden_layers": 2}
    shape = model_shape({"model_type": "llava", "text_config": text, "vision_config": vision})
    # tower 24 * (4*1024^2 + 3*1024*4096) + projector 1024*5120 + 5120*5120
    assert shape.tower.linear_params == 24 * (4 * 1024**2 + 3 * 1024 * 4096) + 1024 * 5120 + 5120 * 5120
    assert shape.tower.tokens_per_image == 110 * 110  # (1540 / 14)^2, no merge


def test_llava_text_config_takes_llama_sizes():
    shape = model_shape(LLAVA)  # text_config gives only vocab_size and max_position_embeddings
    assert (shape.hidden_size, shape.intermediate_size, shape.num_layers) == (4096, 11008, 32)


def test_top_level_sizes_are_never_defaulted():
    with pytest.raises(ConfigError, match=r"no 'num_hidden_layers'"):
        model_shape({k: v for k, v in LLAMA8.items() if k != "num_hidden_layers"})


def test_defaults_table_matches_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig

    classes = {
        "pixtral": transformers.PixtralVisionConfig,
        "clip_vision_model": transformers.CLIPVisionConfig,
        "qwen2_5_vl_vision": Qwen2_5_VLVisionConfig,
    }
    for model_type, row in TRANSFORMERS_DEFAULTS.items():
        c = classes[model_type]() if model_type in classes else transformers.AutoConfig.for_model(model_type)
        for key, value in row.items():
            got = getattr(c, key, None)
            if key == "num_local_experts" and got is None:
                got = getattr(c, "num_experts", None)
            assert got == value, (model_type, key, got, value)


def test_with_defaults_fills_only_absent_keys():
    # "sliding_window": null means no window; it is not replaced by MistralConfig's 4096
    assert with_defaults("mistral", {"sliding_window": None})["sliding_window"] is None
    assert with_defaults("mistral", {})["sliding_window"] == 4096
    assert "hidden_size" not in with_defaults("llama", {}, nested=False)


@pytest.mark.parametrize(
    "config,match",
    [
        (MLLAMA, r"mllama\) is not served by vLLM 0\.32"),
        ({"model_type": "mistral3", "vision_config": {}}, r"config\.json \(mistral3\) has no 'text_config'"),
        (
            {"model_type": "falcon", "text_config": {"model_type": "falcon"}},
            r"unknown architecture model_type='falcon'",
        ),
        ({**MIXTRAL, "num_local_experts": 0}, r"no expert count"),
        ({**GPT_OSS, "quantization_config": {"quant_method": "hqq"}}, r"quant_method 'hqq' is not supported"),
    ],
)
def test_architectures_it_cannot_plan_say_so(config, match):
    with pytest.raises(ConfigError, match=match):
        model_shape(config)


def test_any_text_config_wrapping_a_known_model():
    qwen3 = json.loads((ROOT / "configs" / "Qwen__Qwen3-8B.json").read_text())
    wrapped = {"model_type": "someone_vlm", "architectures": ["SomeoneForConditionalGeneration"], "text_config": qwen3}
    p = plan(wrapped, L40S)
    assert p.weights_bytes == plan(qwen3, L40S).weights_bytes
    assert any("wraps a qwen3 text model" in n for n in p.notes)


# ----------------------------------------------------------------- pipeline parallelism


@pytest.mark.parametrize(
    "layers,pp,expected",
    [
        (48, 4, ((0, 12), (12, 24), (24, 36), (36, 48))),
        (27, 2, ((0, 14), (14, 27))),  # get_pp_indices: the extra layer goes to the stage before the last
        (10, 4, ((0, 2), (2, 5), (5, 8), (8, 10))),  # 2 extra layers: stages -2 and -3
        (5, 1, ((0, 5),)),
    ],
)
def test_pp_partition_as_vllm(layers, pp, expected):
    assert pp_partition(layers, pp) == expected


def test_stages_hold_embedding_first_and_lm_head_last():
    shape = model_shape(LLAMA8)
    first, last = (stage(shape, a, b, i == 0, i == 1) for i, (a, b) in enumerate(pp_partition(32, 2)))
    f, lst = inventory(first, 1, pad_vocab=False), inventory(last, 1, pad_vocab=False)
    assert f["embedding"] == lst["embedding"] == 128256 * 4096  # embed_tokens | lm_head
    assert f["other"] + 4096 == lst["other"]  # the final norm is on the last stage
    assert sum(f.values()) + sum(lst.values()) == shape.num_params
    # tied embeddings: the last stage holds its own copy for lm_head
    g = model_shape(GEMMA3_4B)
    a, b = (stage(g, s, e, i == 0, i == 1) for i, (s, e) in enumerate(pp_partition(34, 2)))
    assert inventory(b, 1, pad_vocab=False)["embedding"] == 262208 * 2560
    assert inventory(b, 1, pad_vocab=False)["vision_linear"] == 0  # the vision tower is on the first stage


def test_pipeline_parallel_plan_uses_the_tightest_stage():
    assert not plan(QWEN3_MOE, L40S).fits  # 56.9 GiB of bf16 weights on one L40S
    p = plan(QWEN3_MOE, L40S, Settings(pipeline_parallel_size=2, max_model_len=32768), gpus=2)
    assert p.fits and len(p.stages) == 2
    assert [(s.first_layer, s.end_layer) for s in p.stages] == [(0, 24), (24, 48)]
    tight = min(p.stages, key=lambda s: (s.max_model_len_that_fits, s.kv_cache_tokens))
    assert p.kv_cache_tokens == tight.kv_cache_tokens and p.weights_bytes == tight.weights_bytes
    assert p.kv_bytes_per_token == 24 * 2 * 4 * 128 * 2  # the stage's 24 layers
    assert "tightest of 2" in p.notes[0]
    j = plan_json(p)
    assert j["settings"]["pipeline_parallel_size"] == 2 and len(j["stages"]) == 2


@pytest.mark.parametrize(
    "settings,gpus,match",
    [
        (Settings(pipeline_parallel_size=2), 1, r"pipeline_parallel_size 2 needs 2 GPUs; the plan has 1"),
        (Settings(pipeline_parallel_size=2, tensor_parallel_size=2), 2, r"needs 4 GPUs"),
        (Settings(pipeline_parallel_size=64), 64, r"pipeline_parallel_size 64 exceeds the model's 48 layers"),
    ],
)
def test_pipeline_settings_that_cannot_work(settings, gpus, match):
    p = plan(QWEN3_MOE, L40S, settings, gpus=gpus)
    assert not p.fits
    assert __import__("re").search(match, p.reason), p.reason


def test_pp1_plan_is_unchanged_by_the_stage_machinery():
    a = plan(LLAMA8, L40S, Settings(max_model_len=8192))
    b = plan(LLAMA8, L40S, Settings(max_model_len=8192, pipeline_parallel_size=1))
    assert a == b and a.stages == () and "pipeline_parallel_size" not in plan_json(a)["settings"]


# ----------------------------------------------------------------- the L40S models of the issue


@pytest.mark.parametrize(
    "config,settings,fits",
    [
        (QWEN3_MOE, Settings(quantization="fp8"), True),  # 29.0 GiB of fp8 weights
        (GPT_OSS, Settings(), True),  # mxfp4 experts, padded for Marlin on the L40S: 13.7 GiB
        (MISTRAL3, Settings(), False),  # 44.8 GiB of bf16 weights > 40.8 GiB
        (MISTRAL3, Settings(quantization="fp8"), False),  # fp8 fits, but not one 131,072-token request
        (MISTRAL3, Settings(quantization="fp8", max_model_len=32768), True),
        (GEMMA3_27B, Settings(quantization="fp8", max_model_len=32768), True),
        (MIXTRAL, Settings(quantization="fp8"), False),  # 43.7 GiB even in fp8
    ],
)
def test_l40s_verdicts(config, settings, fits):
    assert plan(config, L40S, settings).fits == fits


# ----------------------------------------------------------------- fit answers for every config


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_fit_answers_every_config(path, capsys):
    rc = main(["fit", "--config", str(path), "--gpu", "l40s"])
    out, err = capsys.readouterr()
    if path.stem.endswith("Llama-3.2-11B-Vision-Instruct"):
        assert rc == 2 and "error: Llama 3.2 Vision (mllama) is not served" in err
        return
    assert rc == 0, err
    assert "verdict:" in out and "Traceback" not in out + err
    assert main(["fit", "--config", str(path), "--gpu", "l40s", "--json"]) == 0
    assert "fits" in json.loads(capsys.readouterr().out)


def test_fit_pipeline_parallel_flag(capsys):
    path = CONFIGS / "Qwen__Qwen3-30B-A3B.json"
    assert (
        main(
            ["fit", "--config", str(path), "--gpu", "l40s", "--pipeline-parallel-size", "2", "--max-model-len", "32768"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "pipeline_parallel_size 2" in out and "2 x NVIDIA L40S" in out
    assert "stage 0: layers 0-23" in out and "stage 1: layers 24-47" in out
