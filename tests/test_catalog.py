"""models.yaml's serving settings against the planner's vocabularies and its one utilization check."""

from __future__ import annotations

import typing

import pytest

from finspace import planner
from finspace.models.catalog import Serving, _Entry, load_catalog
from finspace.errors import CatalogError
from finspace.planner.shape import DTYPE_ALIASES
from helpers import write_catalog


def _strings(annotation) -> set:
    """The string values of a Literal (or of the Literals in a union)."""
    out = set()
    for a in typing.get_args(annotation):
        out |= _strings(a) if typing.get_args(a) else ({a} if isinstance(a, str) else set())
    return out


@pytest.mark.parametrize(
    "field, model, vocabulary",
    [
        ("dtype", Serving, DTYPE_ALIASES),
        ("quantization", Serving, planner.QUANTIZATIONS),
        ("kv_cache_dtype", Serving, planner.KV_CACHE_DTYPES),
        ("architecture", _Entry, planner.SUPPORTED_ARCHITECTURES),
    ],
)
def test_the_catalogue_offers_only_what_the_planner_knows(field, model, vocabulary):
    offered = _strings(model.model_fields[field].annotation)
    assert offered, field
    assert offered <= set(vocabulary), offered - set(vocabulary)


@pytest.mark.parametrize(
    "value, ok",
    [(0.5, True), (0.99, True), (1, True), (1.0, True), (0, False), (-0.1, False), (1.01, False), (1.5, False)],
)
def test_gpu_memory_utilization_is_the_planners_check(value, ok):
    # the same bounds as planner.Settings and vLLM's CacheConfig: (0, 1]
    assert planner.utilization_ok(value) is ok
    if ok:
        assert Serving(max_model_len=2048, gpu_memory_utilization=value).gpu_memory_utilization == value
    else:
        with pytest.raises(ValueError, match=r"gpu_memory_utilization must be in \(0, 1\]"):
            Serving(max_model_len=2048, gpu_memory_utilization=value)


def test_a_bad_utilization_in_models_yaml_names_the_entry_and_field(tmp_path):
    entry = {
        "label": "L",
        "description": "d",
        "repo": "meta-llama/Llama-3.1-8B-Instruct",
        "architecture": "llama",
        "config": "configs/meta-llama__Llama-3.1-8B-Instruct.json",
        "serving": {"max_model_len": 2048, "gpu_memory_utilization": 1.2},
    }
    with pytest.raises(CatalogError, match=r"model 'm' field 'serving.gpu_memory_utilization'.*must be in \(0, 1\]"):
        load_catalog(write_catalog(tmp_path, {"m": entry}))
    entry["serving"]["gpu_memory_utilization"] = 0.99  # vLLM accepts it; the planner says whether it fits
    assert load_catalog(write_catalog(tmp_path, {"m": entry})).get("m").serving.gpu_memory_utilization == 0.99


# ---------------------------------------------------------------- pre-quantized checkpoints (issue 18)
def _fp8_entry(**serving) -> dict:
    return {
        "label": "L",
        "description": "d",
        "repo": "meta-llama/Llama-3.1-8B-Instruct-FP8",
        "architecture": "llama",
        "config": "configs/meta-llama__Llama-3.1-8B-Instruct.json",
        "serving": {"dtype": "bfloat16", "max_model_len": 8192, **serving},
    }


def test_quantization_and_prequantized_exclude_each_other(tmp_path):
    with pytest.raises(CatalogError, match=r"model 'm'.*prequantized.*not both"):
        load_catalog(write_catalog(tmp_path, {"m": _fp8_entry(quantization="fp8", prequantized="fp8")}))


@pytest.mark.parametrize(
    "scheme, method, bits",
    [
        ("fp8", "fp8", 8),
        ("compressed-tensors-fp8", "compressed-tensors", 8),
        ("compressed-tensors-w4a16", "compressed-tensors", 4),
        ("awq", "awq", 4),
        ("gptq", "gptq", 4),
    ],
)
def test_a_prequantized_entry_is_planned_from_its_scheme_and_vllm_gets_no_quantization(tmp_path, scheme, method, bits):
    from finspace.engine import process
    from finspace.host.hardware import KNOWN_GPUS

    entry = load_catalog(write_catalog(tmp_path, {"m": _fp8_entry(prequantized=scheme)})).get("m")
    config = entry.config()
    assert config["quantization_config"]["quant_method"] == method  # the base model's config gains the scheme
    settings = entry.planner_settings()
    assert settings.quantization is None  # nothing applied at load time: vLLM reads the checkpoint's scheme
    p = planner.plan(config, KNOWN_GPUS["l40s"], settings)
    base = planner.plan(
        load_catalog(write_catalog(tmp_path / "b", {"m": _fp8_entry()})).get("m").config(), KNOWN_GPUS["l40s"], settings
    )
    # 8-bit weights are about half the bf16 ones, 4-bit about a quarter (embeddings and lm_head stay bf16)
    assert 0.2 < p.weights_bytes / base.weights_bytes < (0.6 if bits == 8 else 0.4), (scheme, p.weights_bytes)
    kw = process.engine_args(
        entry, "/models/m", p, on_gpu=True, cpu_kv_cache_bytes=0, distributed_backend=None, overrides={}
    )
    assert kw["quantization"] is None


def test_the_catalogue_fp8_checkpoints_are_prequantized():
    catalog = load_catalog()
    for entry in catalog.entries:
        if entry.repo and entry.repo.upper().endswith("-FP8"):
            assert entry.serving.prequantized and entry.serving.quantization is None, entry.key


# ---------------------------------------------------------------- tool parsers (issue 34)
def test_a_tool_parser_is_one_of_vllms_and_a_typo_names_the_entry_and_field(tmp_path):
    entry = {
        "label": "L",
        "description": "d",
        "repo": "meta-llama/Llama-3.1-8B-Instruct",
        "architecture": "llama",
        "config": "configs/meta-llama__Llama-3.1-8B-Instruct.json",
        "tool_parser": "llama3-json",
        "serving": {"max_model_len": 2048},
    }
    with pytest.raises(CatalogError, match=r"model 'm' field 'tool_parser'.*'hermes', 'llama3_json' or 'pythonic'"):
        load_catalog(write_catalog(tmp_path, {"m": entry}))
    entry["tool_parser"] = "llama3_json"
    assert load_catalog(write_catalog(tmp_path, {"m": entry})).get("m").tool_parser == "llama3_json"


def test_the_catalogue_chooses_each_familys_parser():
    parsers = {e.key: e.tool_parser for e in load_catalog().entries}
    assert parsers["qwen-3-8b-fin"] == "hermes" and parsers["llama-3.1-8b-fin"] == "llama3_json"
    assert parsers["gemma-3-12b-fin"] == "pythonic" and parsers["fin-pythia-1.4b"] is None
    assert parsers["demo"] == parsers["smollm2-135m"] == "hermes"
