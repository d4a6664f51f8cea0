"""Shared test helpers: tiny catalogues pointing at generated checkpoints."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def demo_entry(path: Path | str, preset: str | None = "tiny-llama", *, label: str | None = None,
               max_model_len: int = 512, max_tokens: int = 32, **serving) -> dict:
    entry = {
        "label": label or f"Tiny {preset or Path(path).name}",
        "description": "generated random-weight test model",
        "path": str(path),
        "architecture": {"tiny-llama": "llama", "tiny-qwen3": "qwen3", "tiny-gemma3": "gemma3_text",
                         "tiny-gpt-neox": "gpt_neox", "bench-llama": "llama", None: "llama"}[preset],
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


def corrupt_copy(src: Path, dst: Path) -> Path:
    """A copy of a checkpoint whose safetensors file is truncated halfway."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    weights = next(dst.glob("*.safetensors"))
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    return dst


def mismatched_copy(src: Path, dst: Path) -> Path:
    """A copy whose config no longer matches its weights: passes every file check, fails in vLLM's loader."""
    import json

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["intermediate_size"] = cfg["intermediate_size"] * 2
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst
