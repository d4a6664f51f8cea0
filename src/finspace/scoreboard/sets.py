"""The eval sets: load one by name, from a published file: placed, cached, fetched, or named by path.

``load_set("finqa")`` gives the first 50 items of FinQA's test split, ``load_set("tatqa")`` the first 50
questions of TAT-QA's dev split, ``load_set("financebench")`` FinanceBench's open set (150). The published
file is read from evalsets/<set>/ or shared/evalsets/<set>/ beside src/ where one was placed, else from the
data folder's cache, else fetched once from GitHub (fetched.py). ``path=`` names a published file instead
(every item of it); ``limit=N`` keeps the first N. Every EvalSet says what it holds: ``version`` names the
split, the commit, the items taken and the sha256 of those items (the same whichever copy they came from).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from finspace.errors import BadInput
from finspace.scoreboard import fetched
from finspace.scoreboard.formats import EvalItem, financebench_items, finqa_items, tatqa_items

__all__ = ["SETS", "EvalItem", "EvalSet", "load_set", "placed_dirs"]

SETS = ("finqa", "tatqa", "financebench")
REPO_ROOT = Path(__file__).resolve().parents[3]  # beside src/ in a checkout (and on a Space)
FINANCEBENCH_ENV = "FINSPACE_FINANCEBENCH_FILE"
# FinanceBench's repository at the commit its open set and PDFs are read from (the jsonl's last change, 6e138b2,
# is an ancestor: the same file); finspace.scoreboard.pdfs fetches each question's filing at the same commit
FINANCEBENCH_COMMIT = "cc39aeb4afdf33909ee1412188bf89035950c2eb"


@dataclass(frozen=True)
class EvalSet:
    """A loaded set: ``version`` pins its items (e.g. "tatqa dev@870accc first-50 sha256:1a2b3c4d5e6f")."""

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
    remote: fetched.Remote
    split: str
    license: str
    subset: int | None  # the default takes the first N items of the published file; None: all
    jsonl: bool = False
    env_hint: str = ""
    digest: str | None = None  # sha256 (items_digest) of the default items as published, where checked

    @property
    def source(self) -> str:
        return f"{self.remote.repo}@{self.remote.commit[:7]} {self.remote.file}"


_SPECS = {
    "finqa": _Spec(
        finqa_items,
        fetched.github("czyssrs/FinQA", "0f16e2867befa6840783e58be38c9efb9229d742", "dataset/test.json"),
        "test",
        "MIT (FinQA, Copyright (c) 2021 Zhiyu Chen)",
        50,
    ),
    "tatqa": _Spec(
        tatqa_items,
        fetched.github(
            "NExTplusplus/TAT-QA", "870accc41953dcde885aabeb963d94aabdc0fbc3", "dataset_raw/tatqa_dataset_dev.json"
        ),
        "dev",
        "CC BY 4.0 (TAT-QA dataset, Zhu et al. 2021)",
        50,
        digest="1c07f0412998",
    ),
    "financebench": _Spec(
        financebench_items,
        fetched.github("patronus-ai/financebench", FINANCEBENCH_COMMIT, "data/financebench_open_source.jsonl"),
        "open_source",
        "CC BY-NC 4.0 (FinanceBench, Patronus AI; non-commercial, fetched for the user, not redistributed)",
        None,
        jsonl=True,
        env_hint=FINANCEBENCH_ENV,
    ),
}


def placed_dirs(evalsets_dir: str | Path | None = None) -> tuple[Path, ...]:
    """Where a set's published file may be placed: ``evalsets_dir`` (FINSPACE_EVALSETS_DIR) when given, then
    evalsets/ and shared/evalsets/ inside the repository, then shared/evalsets/ beside it (where a checkout's
    shared data lies: ../shared/evalsets, as ../shared/filings)."""
    given = (Path(evalsets_dir).expanduser(),) if evalsets_dir else ()
    return given + (REPO_ROOT / "evalsets", REPO_ROOT / "shared" / "evalsets", REPO_ROOT.parent / "shared" / "evalsets")


def _spec(name: object) -> _Spec:
    if not isinstance(name, str) or name.strip().lower() not in _SPECS:
        shown = repr(name)[:60]
        raise BadInput(f"unknown eval set {shown}: choose one of {', '.join(SETS)}")
    return _SPECS[name.strip().lower()]


def _limit(limit: object) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BadInput(
            f"limit must be a whole number of items, at least 1 (got {str(limit)[:20]!r}); "
            f"leave it out for the whole set"
        )
    return limit


def _fix(spec: _Spec, where: str) -> str:
    """What to do about a bad file: ``where`` is "given" (path=), "placed" (evalsets/) or "cached"."""
    if where == "given":
        return f"pass {spec.remote.filename} as published ({spec.remote.file} in {spec.remote.repo})"
    if where == "placed":
        return f"replace it with {spec.remote.file} as published in {spec.remote.repo}, or remove it"
    return f"delete it from the data folder's evals/ to fetch it again, or {spec.remote.fix(spec.env_hint)}"


def _read(path: Path, name: str, spec: _Spec, where: str) -> list:
    """The file's records; BadInput naming the file (its basename only) and the fix."""
    label = path.name
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{name}: no file {label}; {_fix(spec, where)}") from None
    except OSError as err:
        raise BadInput(
            f"{name}: {label} can't be read ({err.strerror or err.__class__.__name__}); {_fix(spec, where)}"
        ) from None
    try:
        text = raw.decode("utf-8-sig")
        if spec.jsonl:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        at = f"line {err.lineno}" if isinstance(err, json.JSONDecodeError) else "its encoding"
        raise BadInput(f"{name}: {label} is corrupted (not valid JSON at {at}); {_fix(spec, where)}") from None


def _locate(
    name: str,
    spec: _Spec,
    path: str | Path | None,
    data_dir: str | Path | None,
    evalsets_dir: str | Path | None,
    timeout_s: float,
    base_url: str | None = None,
) -> tuple[Path, str]:
    """The file to read and how it came: given (path=), placed (evalsets/), or cached (fetched once)."""
    if path is not None:
        return Path(path).expanduser(), "given"
    for folder in placed_dirs(evalsets_dir):
        candidate = folder / name / spec.remote.filename
        if candidate.is_file():
            return candidate, "placed"
    if data_dir is None:
        from finspace.ledger import default_data_dir

        data_dir = default_data_dir()
    remote = fetched.mirrored(spec.remote, base_url if name == "financebench" else None)
    return fetched.fetch(remote, data_dir, timeout_s=timeout_s, env_hint=spec.env_hint), "cached"


def items_digest(items: tuple[EvalItem, ...] | list[EvalItem]) -> str:
    """sha256 (12 hex digits) of the items as scored: the same whichever copy of the file they came from."""
    canon = json.dumps(
        [[i.id, i.question, i.context, i.gold] for i in items], sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:12]


def load_set(
    name: str,
    *,
    limit: int | None = None,
    path: str | Path | None = None,
    data_dir: str | Path | None = None,
    evalsets_dir: str | Path | None = None,
    timeout_s: float = 10.0,
    base_url: str | None = None,
) -> EvalSet:
    """Load a set by name (one of SETS): by default the first 50 items (FinQA, TAT-QA) or all (FinanceBench)
    of its published file. ``path``: a published file to read instead (every item); ``limit``: the first N
    items; ``data_dir``: where fetched files are cached (default: the app's data folder); ``evalsets_dir``: a
    folder of placed files (<set>/<published file name>) to look in first; ``timeout_s``: the
    fetch's network timeout; ``base_url``: FinanceBench's files read from this mirror instead of GitHub
    (FINSPACE_FINANCEBENCH_BASE_URL). BadInput for an unknown set, a bad limit, or an unreadable or corrupted file
    (named by its basename, with the fix); DataUnavailable when the file can't be fetched."""
    spec = _spec(name)
    key = name.strip().lower()
    count = _limit(limit)
    file, where = _locate(key, spec, path, data_dir, evalsets_dir, timeout_s, base_url)
    records = _read(file, key, spec, where)
    try:
        items = spec.parse(records)
    except (ValueError, TypeError, AttributeError, KeyError) as err:
        raise BadInput(
            f"{key}: {file.name} is not in the published {key} format ({str(err)[:200]}); {_fix(spec, where)}"
        ) from None
    if not items:
        raise BadInput(f"{key}: {file.name} holds no items; {_fix(spec, where)}")
    if len({item.id for item in items}) != len(items):
        raise BadInput(f"{key}: {file.name} has the same item id twice; {_fix(spec, where)}")
    if where != "given" and spec.subset:
        items = items[: spec.subset]
    taken = tuple(items[:count] if count else items)
    origin = f"file {file.name}" if where == "given" else f"{spec.split}@{spec.remote.commit[:7]}"
    if where != "given" and spec.digest and len(items) == spec.subset and items_digest(items) != spec.digest:
        origin = f"file {file.name} (not the published {origin} items)"  # a placed or cached file of other items
    return EvalSet(
        name=key,
        version=f"{key} {origin} first-{len(taken)} sha256:{items_digest(taken)}",
        source=spec.source,
        license=spec.license,
        items=taken,
    )
