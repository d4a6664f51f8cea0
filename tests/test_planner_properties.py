"""Properties of the planner that must hold for any model, GPU and settings (hypothesis)."""

from __future__ import annotations

from dataclasses import fields, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finspace.host.hardware import GIB, custom_gpu
from finspace.planner import Settings, plan
from finspace.fit.render import plan_json

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def configs(draw):
    heads = draw(st.sampled_from([4, 8, 16, 32]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8, 16, 32) if h <= heads and heads % h == 0]))
    head_dim = draw(st.sampled_from([64, 128, 256]))
    kind = draw(
        st.sampled_from(
            [
                "llama",
                "qwen3",
                "gemma3_text",
                "gpt_neox",
                "mistral",
                "phi3",
                "qwen3_moe",
                "qwen2_moe",
                "mixtral",
                "gpt_oss",
                "deepseek_v2",
                "mistral3",
                "llava",
                "qwen2_5_vl",
            ]
        )
    )
    c = {
        "model_type": kind,
        "hidden_size": heads * head_dim,
        "num_hidden_layers": draw(st.integers(1, 48)),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "intermediate_size": draw(st.integers(1, 8)) * heads * head_dim,
        "vocab_size": draw(st.integers(1000, 260_000)),
        "max_position_embeddings": draw(st.sampled_from([2048, 8192, 32768, 131072])),
        "torch_dtype": draw(st.sampled_from(["bfloat16", "float16", "float32"])),
    }
    if kind == "gemma3_text":
        c["sliding_window"] = draw(st.sampled_from([512, 1024, 4096]))
        c["sliding_window_pattern"] = draw(st.integers(2, 6))
        c["torch_dtype"] = "bfloat16"
    if kind == "mistral" and draw(st.booleans()):
        c["sliding_window"] = 4096
    if kind == "gpt_neox":
        del c["num_key_value_heads"]
        c["rotary_pct"] = 0.25
    if kind in ("qwen3_moe", "qwen2_moe", "mixtral", "gpt_oss", "deepseek_v2"):
        experts = draw(st.integers(2, 64))
        c.update(
            num_experts=experts,
            num_local_experts=experts,
            n_routed_experts=experts,
            num_experts_per_tok=draw(st.integers(1, 2)),
            moe_intermediate_size=draw(st.integers(1, 8)) * 64,
            shared_expert_intermediate_size=512,
            n_shared_experts=draw(st.integers(0, 2)),
            first_k_dense_replace=draw(st.integers(0, 2)),
        )
    if kind == "gpt_oss":
        c["sliding_window"] = 128
    if kind == "deepseek_v2":  # MLA
        c.update(
            kv_lora_rank=draw(st.sampled_from([64, 256, 512])),
            qk_rope_head_dim=draw(st.sampled_from([32, 64])),
            qk_nope_head_dim=64,
            v_head_dim=64,
            q_lora_rank=draw(st.sampled_from([None, 128])),
        )
    if kind in ("mistral3", "llava"):  # a vision tower in front of a text model (heads kept at the top for _clip)
        text = {**c, "model_type": "mistral" if kind == "mistral3" else "llama"}
        vision = {
            "hidden_size": 64 * 4,
            "intermediate_size": 512,
            "num_hidden_layers": draw(st.integers(1, 4)),
            "num_attention_heads": 4,
            "patch_size": 14,
            "image_size": draw(st.sampled_from([224, 336, 896])),
        }
        c = {
            "model_type": kind,
            "text_config": text,
            "vision_config": vision,
            "torch_dtype": c["torch_dtype"],
            "num_attention_heads": heads,
            "max_position_embeddings": c["max_position_embeddings"],
        }
    if kind == "qwen2_5_vl":
        c["vision_config"] = {
            "depth": draw(st.integers(1, 4)),
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_heads": 4,
            "out_hidden_size": c["hidden_size"],
        }
    return c


@st.composite
def plan_settings(draw):
    return Settings(
        dtype="auto",
        kv_cache_dtype=draw(st.sampled_from(["auto", "fp8"])),
        quantization=draw(st.sampled_from([None, "fp8"])),
        max_model_len=draw(st.one_of(st.none(), st.integers(1, 131072))),
        gpu_memory_utilization=draw(st.floats(0.05, 1.0)),
        tensor_parallel_size=draw(st.sampled_from([1, 2, 4])),
        max_num_batched_tokens=draw(st.one_of(st.none(), st.integers(16, 16384))),
        usage_context=draw(st.sampled_from(["engine", "serve"])),
        vllm_version=draw(st.sampled_from(["0.19", "0.32"])),
        pipeline_parallel_size=draw(st.sampled_from([1, 1, 2, 4])),
    )


def _gpu(gib: float):
    return custom_gpu(int(gib * GIB), compute_capability=(9, 0))


def _clip(c: dict, s: Settings) -> Settings:
    """Keep max_model_len within the model's limit and tp dividing the heads."""
    tp = s.tensor_parallel_size
    while c["num_attention_heads"] % tp:
        tp //= 2
    ml = s.max_model_len
    if ml is not None:
        ml = min(ml, c["max_position_embeddings"])
    return replace(s, tensor_parallel_size=tp, max_model_len=ml)


@FAST
@given(configs(), plan_settings(), st.floats(4, 200), st.floats(0.1, 100))
def test_more_memory_never_fits_fewer_tokens(c, s, gib, extra):
    s = _clip(c, s)
    small = plan(c, _gpu(gib), s, gpus=4)
    big = plan(c, _gpu(gib + extra), s, gpus=4)
    assert big.kv_cache_bytes >= small.kv_cache_bytes
    assert big.kv_cache_tokens >= small.kv_cache_tokens
    assert big.max_model_len_that_fits >= small.max_model_len_that_fits
    assert big.fits or not small.fits


@FAST
@given(configs(), plan_settings(), st.floats(4, 200), st.integers(1, 131072), st.integers(1, 131072))
def test_longer_context_never_fits_where_shorter_did_not(c, s, gib, a, b):
    s = _clip(c, s)
    short_len, long_len = sorted((min(a, c["max_position_embeddings"]), min(b, c["max_position_embeddings"])))
    gpu = _gpu(gib)
    short = plan(c, gpu, replace(s, max_model_len=short_len), gpus=4)
    long = plan(c, gpu, replace(s, max_model_len=long_len), gpus=4)
    assert short.fits or not long.fits
    assert short.detail.request_kv_bytes <= long.detail.request_kv_bytes


@FAST
@given(configs(), plan_settings(), st.floats(1, 200), st.integers(1, 8))
def test_no_figure_is_negative(c, s, gib, gpus):
    p = plan(c, _gpu(gib), _clip(c, s), gpus=gpus)
    for f in fields(p):
        v = getattr(p, f.name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            assert v >= 0, f.name
    for k, v in plan_json(p).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            assert v >= 0, k
    assert p.fits == (p.reason.startswith("starts"))
    if p.fits:
        assert p.max_model_len <= p.max_model_len_that_fits
        assert p.max_concurrency >= 1 or p.detail.sliding_layers  # V1 starts only if one request fits
    for sg in p.suggestions:
        assert sg.plan_max_model_len > 0 and sg.kv_cache_tokens > 0
