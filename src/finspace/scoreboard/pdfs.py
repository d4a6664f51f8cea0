"""FinanceBench's filings: the PDF each open-set question is about, fetched once for the user and cached.

FinanceBench's repository keeps them as ``pdfs/<doc_name>.pdf`` (368 files, 4.2 MB the largest), read here at
the commit the open set is read at (finspace.scoreboard.sets.FINANCEBENCH_COMMIT). A question's PDF is looked for
where the user placed it (``<evalsets>/financebench/pdfs/<doc_name>.pdf``: FINSPACE_EVALSETS_DIR, evalsets/ beside
src/), then in the data folder's cache (``<data folder>/evals/financebench-pdfs/``), else fetched once from
GitHub (or FINSPACE_FINANCEBENCH_BASE_URL's mirror) through finspace.scoreboard.fetched, bounded in bytes. The dataset
is CC BY-NC 4.0: fetched for the user, never shipped.
"""

from __future__ import annotations

import re
from pathlib import Path

from finspace.errors import BadInput, DataUnavailable
from finspace.scoreboard import fetched
from finspace.scoreboard.sets import FINANCEBENCH_COMMIT, placed_dirs

REPO = "patronus-ai/financebench"
FOLDER = "financebench-pdfs"  # in the data folder's evals/
MAX_BYTES = 32 << 20  # the largest of the repository's PDFs is 4.2 MB
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,150}")


def check_name(doc_name: object) -> str:
    """A question's doc_name as FinanceBench writes it ("APPLE_2015_10K"), or BadInput (it names a file)."""
    if not isinstance(doc_name, str) or not _NAME.fullmatch(doc_name) or ".." in doc_name:
        raise BadInput(
            f"the question's doc_name {str(doc_name)[:60]!r} does not name one of FinanceBench's PDFs "
            "(letters, digits, _ . -); check the set's file"
        )
    return doc_name


def remote(doc_name: str, base_url: str | None = None) -> fetched.Remote:
    """Where ``doc_name``'s PDF is published (at the pinned commit), or read from ``base_url``'s mirror."""
    return fetched.mirrored(fetched.github(REPO, FINANCEBENCH_COMMIT, f"pdfs/{check_name(doc_name)}.pdf"), base_url)


def cached(doc_name: str, data_dir: str | Path) -> Path:
    return Path(data_dir) / "evals" / FOLDER / f"{check_name(doc_name)}.pdf"


def fix(doc_name: str) -> str:
    return (
        f"download pdfs/{doc_name}.pdf from https://github.com/{REPO} (commit {FINANCEBENCH_COMMIT[:7]}) and "
        f"place it as evalsets/financebench/pdfs/{doc_name}.pdf beside src/ (or under FINSPACE_EVALSETS_DIR), or "
        f"run where GitHub can be reached once (it is then cached in the data folder's evals/{FOLDER}/); "
        "docs/scoreboard.md"
    )


def pdf_path(
    doc_name: str,
    data_dir: str | Path,
    *,
    evalsets_dir: str | Path | None = None,
    base_url: str | None = None,
    timeout_s: float = 10.0,
    max_bytes: int = MAX_BYTES,
) -> Path:
    """The question's PDF: placed, cached, or fetched once (then cached). DataUnavailable naming the fix when it
    can't be had (its ``unreachable`` is True when the network, not the file, failed); BadInput when what was
    placed or fetched is not a PDF (a fetched one is removed, so the next run fetches it again)."""
    name = check_name(doc_name)
    for folder in placed_dirs(evalsets_dir):
        candidate = folder / "financebench" / "pdfs" / f"{name}.pdf"
        if candidate.is_file():
            return _checked(candidate, name, placed=True)
    path = fetched.fetch(
        remote(name, base_url),
        data_dir,
        timeout_s=timeout_s,
        dest=cached(name, data_dir),
        max_bytes=max_bytes,
        fix=fix(name),
    )
    return _checked(path, name, placed=False)


def _checked(path: Path, name: str, *, placed: bool) -> Path:
    """``path`` when it starts as a PDF does; else BadInput (a cached copy is removed first)."""
    try:
        with path.open("rb") as f:
            head = f.read(1024)
    except OSError as err:
        raise DataUnavailable(f"{name}.pdf can't be read ({err.strerror or type(err).__name__}); {fix(name)}") from None
    if b"%PDF-" in head:
        return path
    if not placed:
        path.unlink(missing_ok=True)
    where = "the placed file" if placed else "what was fetched"
    raise BadInput(f"{name}.pdf: {where} is not a PDF (it does not start with %PDF-); {fix(name)}")
