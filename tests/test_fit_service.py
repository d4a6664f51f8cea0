"""Will it fit? for the page and the Gradio API /fit (issue 22, item 4): validation first, then the planner's answer."""

from __future__ import annotations

import json

import pytest

from finspace.errors import BadInput, FinspaceError
from finspace.fit.service import check_fit
from finspace.ui.fit_tab import layout_lines, plan_bars, verdict_markdown
from helpers import REPO

LLAMA_8B = (REPO / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json").read_text()


def test_a_pasted_config_gets_the_planners_verdict_breakdown_and_bars():
    r = check_fit(LLAMA_8B, None, "l40s", 1)
    assert r["fits"] and r["gpu"] == "NVIDIA L40S" and r["gpus"] == 1
    assert r["max_model_len"] == 131072 and "weights" in r["breakdown"].lower()
    bars = plan_bars(r["plan"])
    assert list(bars["part"]) == ["weights", "KV cache", "activation", "overhead", "free"]
    assert abs(bars["GiB"].sum() - r["plan"]["gpu_total_gib"]) < 0.05  # the parts and what is left fill the GPU
    assert "✓ starts" in verdict_markdown(r)


def test_a_model_that_wont_fit_comes_with_ranked_fixes():
    r = check_fit(LLAMA_8B, None, "l4", 1, max_model_len=131072, gpu_memory_utilization=0.5)
    assert not r["fits"] and r["suggestions"]
    text = verdict_markdown(r)
    assert "✗ won't start" in text and "Ranked fixes" in text and "1. **" in text


@pytest.mark.parametrize(
    "args, kw, match",
    [
        ((None, None, "l40s"), {}, r"give either a Hub repo id \(OWNER/NAME\) or a pasted config.json"),
        ((LLAMA_8B, "meta-llama/Llama-3.1-8B", "l40s"), {}, r"not both"),
        (("{not json", None, "l40s"), {}, r"not valid JSON"),
        (("[1, 2]", None, "l40s"), {}, r"must be a JSON object"),
        (('{"a": NaN}', None, "l40s"), {}, r"field 'a' is nan; a config holds finite numbers"),
        ((LLAMA_8B.rstrip()[:-1] + ', "rope_theta": Infinity}', None, "l40s"), {}, r"field 'rope_theta' is inf"),
        ((LLAMA_8B.rstrip()[:-1] + ', "num_hidden_layers": 1e309}', None, "l40s"), {}, r"'num_hidden_layers' is inf"),
        (
            (LLAMA_8B.rstrip()[:-1] + ', "hidden_size": 1e308}', None, "l40s"),
            {},
            r"'hidden_size' is 1e\+308; .* up to 1e\+15",
        ),
        (
            (LLAMA_8B.rstrip()[:-1] + ', "vocab_size": 1' + "0" * 40 + "}", None, "l40s"),
            {},
            r"'vocab_size' is a 41-digit number",
        ),
        (
            (LLAMA_8B.rstrip()[:-1] + ', "num_hidden_layers": 100000000}', None, "l40s"),
            {},
            r"'num_hidden_layers' is 100,000,000; the planner takes at most 1,024",
        ),
        (
            (json.dumps({"text_config": {"num_experts": 10**6}}), None, "l40s"),
            {},
            r"'text_config.num_experts' .* 4,096",
        ),
        ((LLAMA_8B, None, "l40s", 1), {"max_model_len": 10**40}, r"max_model_len must be at most 33,554,432"),
        (("x" * 200_001, None, "l40s"), {}, r"the limit is 200,000"),
        ((LLAMA_8B, None, "tpu-v5"), {}, r"unknown GPU 'tpu-v5'; use one of"),
        ((LLAMA_8B, None, "l40s", 0), {}, r"gpus must be a whole number from 1 to 64"),
        ((LLAMA_8B, None, "l40s", 1), {"max_model_len": -5}, r"max_model_len must be a positive whole number"),
        ((LLAMA_8B, None, "l40s", 1), {"gpu_memory_utilization": "lots"}, r"gpu_memory_utilization must be a number"),
        ((LLAMA_8B, None, "l40s", 1), {"quantization": "int3"}, r"unknown quantization 'int3'"),
        ((LLAMA_8B, None, "l40s", 1), {"trust_remote_code": True}, r"unknown setting 'trust_remote_code'"),
        ((json.dumps({"model_type": "bert"}), None, "l40s"), {}, r"model_type='bert'"),
        ((None, "../../etc/passwd", "l40s"), {}, r"is not a Hub repo id; give OWNER/NAME"),
    ],
)
def test_bad_input_is_refused_naming_the_fix(args, kw, match):
    with pytest.raises(FinspaceError, match=match):
        check_fit(*args, **kw)


def test_a_repo_id_offline_says_how_to_plan_it_anyway(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(FinspaceError, match=r"unreachable.*--config"):
        check_fit(None, "Qwen/Qwen3-30B-A3B", "l40s")


LLAMA_70B = (REPO / "configs" / "meta-llama__Llama-3.1-70B-Instruct.json").read_text()


def test_more_than_one_gpu_is_sized_as_a_cluster_and_the_tab_shows_the_layout():
    r = check_fit(LLAMA_70B, None, "h100", 8, max_model_len=8192)
    c = r["cluster"]
    # TP1 cannot hold 131 GiB; TP2 holds 2.65 sequences of 8k (< 8); TP4 holds 57.89: 2 replicas of 4 GPUs,
    # 474,208 KV tokens and 57 full 8k sequences each (max_num_seqs 128)
    assert (c["tensor_parallel_size"], c["pipeline_parallel_size"], c["data_parallel_size"]) == (4, 1, 2)
    assert (c["kv_cache_tokens_per_replica"], c["kv_cache_tokens_total"]) == (474_208, 948_416)
    assert (c["concurrent_seqs_per_replica"], c["concurrent_seqs_total"]) == (57, 114) and r["gpus"] == 8
    assert r["fits"] and r["plan"]["settings"]["tensor_parallel_size"] == 4 and c["sampler_warmup"]["fits"]
    text = verdict_markdown(r)
    assert "8 GPUs = TP 4 × PP 1 × DP 2" in text and "total (× 2): KV cache 948,416 tokens" in text
    assert "Sampler warm-up fits" in text and "TP 4 x PP 1 x DP 2" in r["breakdown"]


def test_one_gpu_has_no_layout_but_the_warm_up_verdict():
    r = check_fit(LLAMA_8B, None, "l40s", 1)
    assert r["cluster"] is None and r["sampler_warmup"]["fits"] and "Layout" not in verdict_markdown(r)


def test_a_layout_bigger_than_the_cluster_is_a_4xx_naming_the_fix():
    with pytest.raises(BadInput, match=r"needs 16 GPUs and the cluster has 8: give more GPUs or lower them"):
        check_fit(LLAMA_70B, None, "h100", 8, tensor_parallel_size=8, pipeline_parallel_size=2)


def test_the_tab_says_when_the_sampler_warm_up_does_not_fit():
    from finspace import planner
    from finspace.fit import render
    from finspace.host.hardware import KNOWN_GPUS

    oss = json.loads((REPO / "tests" / "data" / "configs" / "openai__gpt-oss-20b.json").read_text())
    p = planner.plan(
        oss,
        KNOWN_GPUS["h100"],
        planner.Settings(
            tensor_parallel_size=2,
            max_model_len=8192,
            gpu_memory_utilization=0.95,
            quantization="mxfp4",
            usage_context="serve",
            vllm_version="0.19",
        ),
        gpus=2,
    )
    text = "\n".join(layout_lines(None, render.warmup_json(p)))
    assert "Sampler warm-up **does not fit**: 1,024 requests × the vocabulary need 3.07 GiB, 1.78 GiB free" in text


def test_a_catalogue_key_is_planned_offline_from_its_bundled_config(monkeypatch, tmp_path):
    """#41: will_it_fit and the tab take the key every user of the page knows, with no Hub."""
    from finspace.models.catalog import load_catalog

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    catalog = load_catalog()
    r = check_fit(None, "qwen-3-8b-fin", "l40s", catalog=catalog, max_model_len=32768)
    assert r["fits"] is True and r["max_model_len"] == 32768 and r["source"].startswith("qwen-3-8b-fin"), r
    r = check_fit(json.loads(LLAMA_8B), None, "l40s")  # a config as the JSON object, as MCP clients send it
    assert r["fits"] is True and r["source"] == "pasted config.json"
    with pytest.raises(FinspaceError, match=r"neither a catalogue key \(.*qwen-3-8b-fin.*\) nor a Hub repo id"):
        check_fit(None, "qwen-3-8b", "l40s", catalog=catalog)
