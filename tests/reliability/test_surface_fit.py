"""Issue 25, findings 2 and 8d: a pasted config.json can neither occupy the machine nor crash /fit with a number.
Replayed against the shared ``surface_server`` (`python app.py`), through the Gradio API (/fit) and the Will-it-fit
tab's own event, as the page sends it.

1. ``num_hidden_layers: 2,000,000`` (before: a 2,000,000-element tuple per layer list, many seconds of CPU in a thread
   nothing could stop; 10^8 took 800 MB): refused at once, naming the field and the bound; so are hidden sizes,
   vocabularies, experts and positions past any published model.
2. ``1e309`` (inf as Python parses it), ``1e308``, ``10**40``, NaN and Infinity in any field (before: "unexpected
   server error (OverflowError)" on /fit, a raw Python message in the tab): a clear refusal naming the field.
3. The engine keeps serving throughout; no traceback or secret in any answer.
"""

from __future__ import annotations

import html
import json
import time

import pytest

from helpers import REPO
from rel_utils import TALLY, GradioRaw, assert_clean, gradio_config, health

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

LLAMA = json.loads((REPO / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())


def with_field(field: str, raw: str, nested: str | None = None) -> str:
    """Llama 3.1 8B's config.json with ``field`` set to the JSON text ``raw`` (inside ``nested`` if given)."""
    marker = "__VALUE__"
    cfg = dict(LLAMA)
    if nested:
        cfg[nested] = {**LLAMA, field: marker}
    else:
        cfg[field] = marker
    return json.dumps(cfg).replace(f'"{marker}"', raw)


def tab_fn_index(url: str) -> int:
    """The Will-it-fit tab's check button event (a private event: the page calls it by fn_index)."""
    cfg = gradio_config(url)
    button = next(c["id"] for c in cfg["components"] if c.get("props", {}).get("elem_id") == "fit-check")
    return next(d["id"] for d in cfg["dependencies"] if [button, "click"] in [list(t) for t in d["targets"]])


def fit_api(raw: GradioRaw, fns: dict, config: str):
    return raw.call(fns["fit"], [None, config, "l40s", 1, None, None, None, None, None, None], timeout=60)


def fit_tab(raw: GradioRaw, fn: int, config: str):
    return raw.call(fn, ["", config, "l40s", 1, None, "auto", "none", 0.9], timeout=60)


CASES = [  # (field, JSON text, nested in, what the refusal must say)
    ("num_hidden_layers", "2000000", None, "'num_hidden_layers' is 2,000,000; the planner takes at most 1,024"),
    ("num_hidden_layers", "1e309", None, "'num_hidden_layers' is inf"),
    ("hidden_size", "1e308", None, "'hidden_size' is 1e+308"),
    ("vocab_size", str(10**40), None, "'vocab_size' is a 41-digit number"),
    ("intermediate_size", "1e308", "text_config", "'text_config.intermediate_size' is 1e+308"),
    ("rope_theta", "NaN", None, "'rope_theta' is nan"),
    ("rope_theta", "Infinity", None, "'rope_theta' is inf"),
    ("max_position_embeddings", "-Infinity", None, "'max_position_embeddings' is -inf"),
    (
        "max_position_embeddings",
        "1e12",
        None,
        "'max_position_embeddings' is 1e+12; the planner takes at most 33,554,432",
    ),
    ("num_local_experts", "100000", None, "'num_local_experts' is 100,000; the planner takes at most 4,096"),
]


@pytest.mark.parametrize("field, value, nested, says", CASES, ids=[f"{c[0]}={c[1][:8]}" for c in CASES])
def test_a_pasted_config_out_of_bounds_is_refused_naming_the_field(surface_server, field, value, nested, says):
    url = surface_server.url
    config = with_field(field, value, nested)
    with GradioRaw(url) as raw:
        for name, call in (
            ("/fit", lambda: fit_api(raw, surface_server.fns, config)),
            ("tab", lambda: fit_tab(raw, tab_fn_index(url), config)),
        ):
            t0 = time.monotonic()
            out = call()
            took = time.monotonic() - t0
            out.error = html.unescape(out.error or "")  # the tab escapes its message as HTML
            assert out.joined and out.success is False, (name, out.join_status, out.error, out.raw)
            assert says in (out.error or ""), (name, out.error)
            assert "unexpected server error" not in out.error and "OverflowError" not in out.error, out.error
            assert took < 10, (name, took)
            assert_clean(out.text)
            TALLY.add(inputs=1)
    status, h = health(surface_server)
    assert status == 200 and h["model"] == "a", h


def test_a_plausible_config_still_plans(surface_server):
    """The bounds refuse nothing real: Llama 3.1 8B on one L40S, through /fit and the tab."""
    with GradioRaw(surface_server.url) as raw:
        out = fit_api(raw, surface_server.fns, json.dumps(LLAMA))
        assert out.success, out.error
        assert out.output["data"][0]["fits"] is True, out.output
        tab = fit_tab(raw, tab_fn_index(surface_server.url), json.dumps(LLAMA))
        assert tab.success and "fit" in json.dumps(tab.output).lower(), tab.error
    TALLY.add(inputs=2)
