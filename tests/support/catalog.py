"""Catalogues (models.yaml) of generated test models, for the tests' servers and the benchmarks'."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def demo_entry(
    path: Path | str,
    preset: str | None = "tiny-llama",
    *,
    label: str | None = None,
    max_model_len: int = 512,
    max_tokens: int = 32,
    **serving,
) -> dict:
    entry = {
        "label": label or f"Tiny {preset or Path(path).name}",
        "description": "generated random-weight test model",
        "path": str(path),
        "architecture": {
            "tiny-llama": "llama",
            "tiny-qwen3": "qwen3",
            "tiny-gemma3": "gemma3_text",
            "tiny-gpt-neox": "gpt_neox",
            "bench-llama": "llama",
            None: "llama",
        }[preset],
        "system_prompt": "You are a test model.",
        "serving": {"dtype": "float32", "max_model_len": max_model_len, **serving},
        "sampling": {"temperature": 0.0, "top_p": 1.0, "max_tokens": max_tokens},
    }
    if preset is not None:
        entry["generate"] = preset
    return entry


def write_catalog(folder: Path, models: dict, default: str | None = None) -> Path:
    """Write a models.yaml for tests; configs of repo entries are the bundled ones."""
    folder.mkdir(parents=True, exist_ok=True)
    first = default or next(iter(models))
    doc = {"defaults": {"gpu": first, "cpu": first}, "models": models}
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    if not (folder / "configs").exists():
        shutil.copytree(REPO / "configs", folder / "configs")
    return path


def long_context_copy(src: Path, dest: Path, positions: int) -> Path:
    """A copy of the checkpoint at ``src`` whose config.json allows at least ``positions`` tokens (the same
    weights: rope positions are computed), for a catalogue entry with a longer max_model_len."""
    shutil.copytree(src, dest)
    cfg = json.loads((dest / "config.json").read_text())
    cfg["max_position_embeddings"] = max(positions, int(cfg.get("max_position_embeddings") or 0))
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest
