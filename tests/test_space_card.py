"""The Space card's front matter (README_HF_SPACE.md) in the forms the Spaces configuration reference documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from finspace.models.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]


def front_matter(text: str) -> dict:
    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert m, "the card has no YAML front matter"
    return yaml.safe_load(m.group(1))


def preload_problems(entry: str) -> list[str]:
    """What is wrong with one preload_from_hub entry: a repo id, optionally a space and a comma-separated list
    of exact file names, optionally a space and a commit sha."""
    parts = entry.split()
    problems = []
    if not parts or len(parts) > 3 or not re.fullmatch(r"[\w.-]+/[\w.-]+", parts[0]):
        return [f"{entry!r} does not start with a repo id (owner/name)"]
    if len(parts) >= 2:
        names = parts[1].split(",")
        problems += [f"{n!r} is a pattern, not an exact file name" for n in names if re.search(r"[*?\[\]]", n)]
        problems += ["an empty file name" for n in names if not n]
    if len(parts) == 3 and not re.fullmatch(r"[0-9a-f]{40}", parts[2]):
        problems.append(f"{parts[2]!r} is not a commit sha")
    return problems


@pytest.mark.parametrize(
    "entry, problems",
    [
        ("DragonLLM/Llama-Open-Finance-8B", []),
        ("hexgrad/Kokoro-82M kokoro-v1_0.pth", []),
        ("org/m config.json,model.safetensors " + "a" * 40, []),
        (
            "DragonLLM/Llama-Open-Finance-8B *.json,*.safetensors,tokenizer.model",
            ["'*.json' is a pattern, not an exact file name", "'*.safetensors' is a pattern, not an exact file name"],
        ),
        ("org/m config.json main", ["'main' is not a commit sha"]),
        ("just-a-name", ["'just-a-name' does not start with a repo id (owner/name)"]),
    ],
)
def test_preload_entry_form(entry, problems):
    assert preload_problems(entry) == problems


def test_card_preloads_the_gpu_default_in_the_documented_form():
    card = front_matter((ROOT / "README_HF_SPACE.md").read_text())
    entries = card["preload_from_hub"]
    assert [p for e in entries for p in preload_problems(e)] == []
    catalog = load_catalog()
    assert catalog.get(catalog.default_gpu).repo in {e.split()[0] for e in entries}


def test_card_python_runs_vllm():
    card = front_matter((ROOT / "README_HF_SPACE.md").read_text())
    major, minor = (int(x) for x in str(card["python_version"]).split(".")[:2])
    assert (major, minor) >= (3, 11), "vLLM needs Python >= 3.11 (the Space default is 3.10)"
