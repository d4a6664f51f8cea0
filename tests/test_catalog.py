"""models.yaml's serving settings against the planner's vocabularies and its one utilization check."""

from __future__ import annotations

import typing

import pytest

from finspace import planner
from finspace.catalog import Serving, _Entry, load_catalog
from finspace.errors import CatalogError
from finspace.planner.shape import DTYPE_ALIASES
from helpers import write_catalog


def _strings(annotation) -> set:
    """The string values of a Literal (or of the Literals in a union)."""
    out = set()
    for a in typing.get_args(annotation):
        out |= _strings(a) if typing.get_args(a) else ({a} if isinstance(a, str) else set())
    return out


@pytest.mark.parametrize("field, model, vocabulary", [
    ("dtype", Serving, DTYPE_ALIASES),
    ("quantization", Serving, planner.QUANTIZATIONS),
    ("kv_cache_dtype", Serving, planner.KV_CACHE_DTYPES),
    ("architecture", _Entry, planner.SUPPORTED_ARCHITECTURES),
])
def test_the_catalogue_offers_only_what_the_planner_knows(field, model, vocabulary):
    offered = _strings(model.model_fields[field].annotation)
    assert offered, field
    assert offered <= set(vocabulary), offered - set(vocabulary)


@pytest.mark.parametrize("value, ok", [(0.5, True), (0.99, True), (1, True), (1.0, True),
                                       (0, False), (-0.1, False), (1.01, False), (1.5, False)])
def test_gpu_memory_utilization_is_the_planners_check(value, ok):
    # the same bounds as planner.Settings and vLLM's CacheConfig: (0, 1]
    assert planner.utilization_ok(value) is ok
    if ok:
        assert Serving(max_model_len=2048, gpu_memory_utilization=value).gpu_memory_utilization == value
    else:
        with pytest.raises(ValueError, match=r"gpu_memory_utilization must be in \(0, 1\]"):
            Serving(max_model_len=2048, gpu_memory_utilization=value)


def test_a_bad_utilization_in_models_yaml_names_the_entry_and_field(tmp_path):
    entry = {"label": "L", "description": "d", "repo": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama",
             "config": "configs/meta-llama__Llama-3.1-8B-Instruct.json",
             "serving": {"max_model_len": 2048, "gpu_memory_utilization": 1.2}}
    with pytest.raises(CatalogError, match=r"model 'm' field 'serving.gpu_memory_utilization'.*must be in \(0, 1\]"):
        load_catalog(write_catalog(tmp_path, {"m": entry}))
    entry["serving"]["gpu_memory_utilization"] = 0.99  # vLLM accepts it; the planner says whether it fits
    assert load_catalog(write_catalog(tmp_path, {"m": entry})).get("m").serving.gpu_memory_utilization == 0.99
