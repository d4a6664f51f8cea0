"""A matrix column: its name, its type and the instruction the model follows, and the presets file.

Fields come from two places, both validated strictly: ``matrix.yaml`` beside presets.yaml (a mistake is a
``CatalogError`` naming the preset and the field, like the catalogue's) and callers of the page and the API
(JSON; a mistake is a ``BadInput`` naming the field's position and what to change). Every size a caller
controls has a bound, because the Space is public.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from finspace.models.catalog import REPO_ROOT, read_validated
from finspace.errors import BadInput, CatalogError

FILENAME = "matrix.yaml"
DEFAULT_MATRIX_PRESETS = REPO_ROOT / FILENAME
FIELD_TYPES = ("number", "percent", "money", "date", "text", "list", "yesno")
FieldType = Literal["number", "percent", "money", "date", "text", "list", "yesno"]
MAX_FIELDS = 12
MAX_NAME_CHARS = 60
MAX_INSTRUCTION_CHARS = 600
MAX_CONCEPTS = 8  # XBRL concepts a field names, most preferred first (finspace.xbrl.concepts)
Concept = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][\w.-]{0,30}:[A-Za-z_][\w.-]{0,150}$")]
# what a spreadsheet runs as a formula when a cell begins with it (OWASP, CSV injection): no field name begins so
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
TYPE_HELP = {
    "number": "a plain number as printed (no unit)",
    "percent": "a percentage, as its number: 12.5 for 12.5%",
    "money": "an amount with its ISO currency code and scale (units, thousands, millions, billions)",
    "date": "a date as YYYY-MM-DD",
    "text": "a short text, copied from the document",
    "list": "a list of short texts, each copied from the document",
    "yesno": "true or false",
}


class _FieldSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    type: FieldType
    instruction: str = Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)
    concepts: list[Concept] = Field(default_factory=list, max_length=MAX_CONCEPTS)


class _Preset(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    label: str = Field(min_length=1, max_length=80)
    fields: list[_FieldSpec] = Field(min_length=1, max_length=MAX_FIELDS)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    presets: dict[str, _Preset] = Field(min_length=1)


@dataclass(frozen=True)
class MatrixField:
    name: str
    type: str
    instruction: str
    concepts: tuple[str, ...] = ()  # the filer's XBRL concepts for this field (us-gaap:Revenues, ...)

    def to_json(self) -> dict[str, Any]:
        """As a caller writes it; ``concepts`` only when the field names some."""
        out = {"name": self.name, "type": self.type, "instruction": self.instruction}
        return {**out, "concepts": list(self.concepts)} if self.concepts else out


@dataclass(frozen=True)
class FieldPreset:
    key: str
    label: str
    fields: tuple[MatrixField, ...]


@dataclass(frozen=True)
class FieldPresets:
    entries: tuple[FieldPreset, ...]

    def keys(self) -> list[str]:
        return [p.key for p in self.entries]

    def get(self, key: object) -> FieldPreset:
        for p in self.entries:
            if isinstance(key, str) and key in (p.key, p.label):
                return p
        raise BadInput(f"unknown field preset {str(key)[:60]!r}; choose one of: {', '.join(self.keys())}")


def _check_names(fields: tuple[MatrixField, ...], where: str, error: type) -> tuple[MatrixField, ...]:
    seen: set[str] = set()
    for f in fields:
        if not f.name.strip() or not f.name.isprintable():
            raise error(f"{where}: field name {f.name[:MAX_NAME_CHARS]!r}: use printable characters, not only spaces")
        if f.name.lstrip(" ").startswith(FORMULA_START):
            raise error(
                f"{where}: field name {f.name[:MAX_NAME_CHARS]!r} begins with {f.name.lstrip(' ')[0]!r}: a "
                f"spreadsheet would run it as a formula in the CSV/XLSX export; a field name cannot begin "
                f"with =, +, -, @, a tab or a carriage return: start it with a letter or a digit"
            )
        folded = f.name.strip().casefold()
        if folded in seen:
            raise error(f"{where}: field name {f.name!r} is used twice; each column needs its own name")
        seen.add(folded)
    return fields


def _field(spec: _FieldSpec) -> MatrixField:
    return MatrixField(
        name=spec.name.strip(),
        type=spec.type,
        instruction=spec.instruction.strip(),
        concepts=tuple(dict.fromkeys(spec.concepts)),
    )


def load_field_presets(path: str | Path = DEFAULT_MATRIX_PRESETS) -> FieldPresets:
    """matrix.yaml, validated: errors name the file, the preset and the field."""
    path = Path(path)
    parsed = read_validated(path, _File, what="matrix presets", keys="'presets'", section="presets", noun="preset")
    entries = []
    for key, p in parsed.presets.items():
        if not key or not all(c.isalnum() or c in "-._" for c in key):
            raise CatalogError(f"{path.name}: preset key {key!r}: use letters, digits, '-', '.', '_' only")
        fields = _check_names(tuple(_field(f) for f in p.fields), f"{path.name}: preset {key!r}", CatalogError)
        entries.append(FieldPreset(key=key, label=p.label, fields=fields))
    return FieldPresets(tuple(entries))


def parse_fields(raw: object) -> tuple[MatrixField, ...]:
    """A caller's fields: a JSON list of {name, type, instruction[, concepts]}, at most MAX_FIELDS."""
    if not isinstance(raw, list) or not raw:
        raise BadInput('fields must be a JSON list of {"name", "type", "instruction"} objects, or a preset name')
    if len(raw) > MAX_FIELDS:
        raise BadInput(f"{len(raw)} fields asked for; a matrix has at most {MAX_FIELDS}: split it in two")
    fields = []
    for i, item in enumerate(raw, 1):
        try:
            fields.append(_field(_FieldSpec.model_validate(item)))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "the entry"
            hint = f"; the types are {', '.join(FIELD_TYPES)}" if where == "type" else ""
            raise BadInput(f"field {i} ({where}): {first['msg']}{hint}") from None
    return _check_names(tuple(fields), "fields", BadInput)
