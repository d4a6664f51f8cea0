"""System-prompt presets for the tasks analysts repeat, from presets.yaml beside models.yaml.

Validated like the catalogue: unknown keys, missing fields and wrong types are
errors naming the entry and the field (``CatalogError``), never defaults. The
page's preset menu fills the system prompt from the chosen entry; a name that is
not in the file is refused with a clear message (``BadInput``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from finspace.models.catalog import REPO_ROOT, read_validated
from finspace.errors import BadInput, CatalogError

FILENAME = "presets.yaml"
DEFAULT_PRESETS = REPO_ROOT / FILENAME
MAX_PROMPT_CHARS = 8000


class _Preset(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    label: str = Field(min_length=1, max_length=80)
    system_prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    presets: dict[str, _Preset] = Field(min_length=1)


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    system_prompt: str


@dataclass(frozen=True)
class Presets:
    entries: tuple[Preset, ...]
    path: Path | None

    def labels(self) -> list[str]:
        return [p.label for p in self.entries]

    def by_label(self, label: object) -> Preset:
        for p in self.entries:
            if isinstance(label, str) and p.label == label:
                return p
        raise BadInput(f"unknown preset {str(label)[:60]!r}; choose one of: {', '.join(self.labels())}")


def presets_path(catalog_path: str | Path | None, filename: str = FILENAME) -> Path:
    """``filename`` (presets.yaml, or matrix.yaml) beside the catalogue in use, else the repository's."""
    if catalog_path is not None:
        beside = Path(catalog_path).parent / filename
        if beside.is_file():
            return beside
    return REPO_ROOT / filename


def load_presets(path: str | Path) -> Presets:
    path = Path(path)
    parsed = read_validated(path, _File, what="presets", keys="'presets'", section="presets", noun="preset")
    entries = []
    for key, p in parsed.presets.items():
        if not key or not all(c.isalnum() or c in "-._" for c in key):
            raise CatalogError(f"{path.name}: preset key {key!r}: use letters, digits, '-', '.', '_' only")
        entries.append(Preset(key=key, label=p.label, system_prompt=p.system_prompt))
    labels = [e.label for e in entries]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise CatalogError(f"{path.name}: preset label {dupes[0]!r} is used twice; labels name the menu's entries")
    return Presets(tuple(entries), path)
