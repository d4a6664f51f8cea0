"""The eval sets: load one by name, from the vendored subset, a published file, or (FinanceBench) a fetch.

``load_set("finqa")`` reads evalsets/finqa/ (50 items of FinQA's test split), ``load_set("tatqa")``
evalsets/tatqa/ (the first 50 questions of TAT-QA's dev split), ``load_set("financebench")`` the open set,
fetched once into the data folder. ``path=`` names a full published file instead (its own format);
``limit=N`` keeps the first N items. Every EvalSet says what it holds: its ``version`` pins the data
(split, commit, subset, and the sha256 of the file read).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from finspace.errors import BadInput
from finspace.evals import financebench
from finspace.evals.formats import EvalItem, financebench_items, finqa_items, tatqa_items

__all__ = ["SETS", "EvalItem", "EvalSet", "load_set", "EVALSETS_DIR"]

SETS = ("finqa", "tatqa", "financebench")
EVALSETS_DIR = Path(__file__).resolve().parents[3] / "evalsets"  # beside src/ in a checkout (and on a Space)


@dataclass(frozen=True)
class EvalSet:
    """A loaded set: ``version`` pins the data read (e.g. "finqa test@0f16e28 subset-50 sha256:1a2b3c4d5e6f")."""

    name: str
    version: str
    source: str
    license: str
    items: tuple[EvalItem, ...]

    @property
    def n(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class _Spec:
    parse: Callable[[object], list[EvalItem]]
    source: str
    license: str
    vendored: str | None  # the subset under evalsets/, or None (fetched)
    tag: str  # what the vendored (or fetched) file is: split@commit subset
    jsonl: bool = False


_SPECS = {
    "finqa": _Spec(finqa_items, "czyssrs/FinQA dataset/test.json", "MIT (Copyright (c) 2021 Zhiyu Chen)",
                   "finqa/test.first50.json", "test@0f16e28 subset-50"),
    "tatqa": _Spec(tatqa_items, "NExTplusplus/TAT-QA dataset_raw/tatqa_dataset_dev.json",
                   "CC BY 4.0 (dataset; TAT-QA authors)", "tatqa/tatqa_dataset_dev.first50.json",
                   "dev@870accc subset-50"),
    "financebench": _Spec(financebench_items, financebench.SOURCE, financebench.LICENSE, None,
                          "open_source@main", jsonl=True),
}


def _spec(name: object) -> _Spec:
    if not isinstance(name, str) or name.strip().lower() not in _SPECS:
        shown = repr(name)[:60]
        raise BadInput(f"unknown eval set {shown}: choose one of {', '.join(SETS)}")
    return _SPECS[name.strip().lower()]


def _limit(limit: object) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BadInput(f"limit must be a whole number of items, at least 1 (got {str(limit)[:20]!r}); "
                       f"leave it out for the whole set")
    return limit


def _fix(name: str, spec: _Spec, given: bool) -> str:
    if given:
        return f"pass the published {spec.source.split(' ')[-1]} file as it was downloaded"
    if spec.vendored:
        return f"restore evalsets/{spec.vendored} from the repository (git checkout -- evalsets/)"
    return f"delete it from the data folder's evals/ to fetch it again, or {financebench.FIX}"


def _read(path: Path, name: str, spec: _Spec, given: bool) -> tuple[list, str]:
    """The file's records and its sha256; BadInput naming the file (basename only) and the fix."""
    label = path.name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{name}: no file {label}; {_fix(name, spec, given)}") from None
    except OSError as err:
        raise BadInput(f"{name}: {label} can't be read ({err.strerror or err.__class__.__name__}); "
                       f"{_fix(name, spec, given)}") from None
    try:
        text = raw.decode("utf-8-sig")
        if spec.jsonl:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            records = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        where = f"line {err.lineno}" if isinstance(err, json.JSONDecodeError) else "its encoding"
        raise BadInput(f"{name}: {label} is corrupted (not valid JSON at {where}); "
                       f"{_fix(name, spec, given)}") from None
    return records, hashlib.sha256(raw).hexdigest()[:12]


def _source_path(name: str, spec: _Spec, path: str | Path | None, data_dir: str | Path | None,
                 timeout_s: float) -> Path:
    if path is not None:
        return Path(path).expanduser()
    if spec.vendored:
        return EVALSETS_DIR / spec.vendored
    if data_dir is None:
        from finspace.ledger import default_data_dir
        data_dir = default_data_dir()
    return financebench.fetch(data_dir, timeout_s=timeout_s)


def load_set(name: str, *, limit: int | None = None, path: str | Path | None = None,
             data_dir: str | Path | None = None, timeout_s: float = 10.0) -> EvalSet:
    """Load a set by name (one of SETS). ``path``: a published file to read instead of the default;
    ``limit``: the first N items; ``data_dir``: where FinanceBench is cached (default: the app's data folder);
    ``timeout_s``: the FinanceBench download's network timeout. BadInput for an unknown set, a bad limit, or
    an unreadable/corrupted file (named by its basename, with the fix); DataUnavailable when FinanceBench
    can't be fetched."""
    spec = _spec(name)
    key = name.strip().lower()
    count = _limit(limit)
    file = _source_path(key, spec, path, data_dir, timeout_s)
    records, digest = _read(file, key, spec, given=path is not None)
    try:
        items = spec.parse(records)
    except (ValueError, TypeError, AttributeError, KeyError) as err:
        raise BadInput(f"{key}: {file.name} is not in the published {key} format ({str(err)[:200]}); "
                       f"{_fix(key, spec, path is not None)}") from None
    if not items:
        raise BadInput(f"{key}: {file.name} holds no items; {_fix(key, spec, path is not None)}")
    if len({item.id for item in items}) != len(items):
        raise BadInput(f"{key}: {file.name} has the same item id twice; {_fix(key, spec, path is not None)}")
    tag = spec.tag if path is None else f"file {file.name}"
    return EvalSet(name=key, version=f"{key} {tag} sha256:{digest}", source=spec.source, license=spec.license,
                   items=tuple(items[:count] if count else items))
