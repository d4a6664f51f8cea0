"""The documents of one conversation, each known by a short id: its file name without the extension, made unique.

A ``Library`` is a mapping id -> ``Document`` (finspace.documents.convert), at most ``MAX_DOCUMENTS`` of them
(the Matrix's bound). ``document`` and ``page_text`` are the one way a tool reaches a document's page: an unknown
id raises ``UnknownDocument`` listing the ids there are, a page outside the document ``PageOutOfRange`` giving the
range. ``resolve`` reads a document as a model writes it in a citation ("aapl-10-k-2024-11-01", "AAPL-10-K",
"aapl-10-k-2024-11-01.html"): the id itself, case folded, with or without its extension, or a unique prefix.

``approx_tokens`` is the tokens~characters/4 counter used where no tokenizer is given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from finspace.documents.convert import Document
from finspace.documents.desk import MAX_ID_CHARS, unique_id  # noqa: F401 - MAX_ID_CHARS: the ids' bound
from finspace.errors import BadInput, PageOutOfRange, UnknownDocument

MAX_DOCUMENTS = 20  # the Matrix's bound on documents

Library = Mapping[str, Document]


def approx_tokens(text: str) -> int:
    """Tokens as characters / 4, rounded up: the counter where no tokenizer is at hand."""
    return (len(text) + 3) // 4


def library(docs: Iterable[Document]) -> dict[str, Document]:
    """The documents by id, in order (ids from their names, made unique); BadInput past ``MAX_DOCUMENTS``."""
    out: dict[str, Document] = {}
    for doc in docs:
        if len(out) >= MAX_DOCUMENTS:
            raise BadInput(f"a conversation holds at most {MAX_DOCUMENTS} documents; remove one before adding another")
        out[unique_id(doc.name, out)] = doc
    return out


def ids(lib: Library) -> str:
    return ", ".join(lib) if lib else "none (attach a filing first)"


def resolve(lib: Library, ref: str | None) -> str | None:
    """The id ``ref`` names (exact, case folded, without an extension, or a unique prefix of at least 3
    characters), or None."""
    if not ref:
        return None
    ref = str(ref)[: MAX_ID_CHARS * 2].strip().strip("[]()\"'`,;:").strip()
    if ref in lib:
        return ref
    folded = {k.casefold(): k for k in lib}
    for candidate in (ref, ref.rsplit(".", 1)[0] if "." in ref else ref):
        c = candidate.casefold()
        if c in folded:
            return folded[c]
        if len(c) >= 3:
            starts = [k for f, k in folded.items() if f.startswith(c)]
            if len(starts) == 1:
                return starts[0]
    return None


def document(lib: Library, ref: str | None) -> tuple[str, Document]:
    """(id, document) for ``ref``; with no ``ref`` and one document, that one. ``UnknownDocument`` otherwise."""
    if not ref and len(lib) == 1:
        return next(iter(lib.items()))
    found = resolve(lib, ref)
    if found is None:
        what = "no document was named" if not ref else f"there is no document {str(ref)[:80]!r}"
        raise UnknownDocument(f"{what}; the documents are: {ids(lib)}")
    return found, lib[found]


def page_number(page: object) -> int:
    """A page as a tool's argument gives it (31, "31", "page 31", "p. 31 (printed 29)") as an int, or
    BadInput."""
    if isinstance(page, bool):
        raise BadInput("a page is a number: 1 for the first page")
    if isinstance(page, int):
        return page
    m = re.match(r"\s*(?:page|p\.?|pp\.?)?\s*(\d{1,6})\b", str(page)[:100], re.IGNORECASE)
    if not m:
        raise BadInput(f"{str(page)[:40]!r} is not a page number; give a number, 1 for the first page")
    return int(m[1])


def page_text(lib: Library, ref: str | None, page: object) -> tuple[str, int, str, str]:
    """(id, page, label, text) of one page, numbered from 1; ``PageOutOfRange`` gives the range."""
    key, doc = document(lib, ref)
    n = page_number(page)
    if not 1 <= n <= len(doc.pages):
        raise PageOutOfRange(
            f"{key} has pages 1 to {len(doc.pages)}; page {n} is not one of them (pages are "
            "numbered from 1, as in the outline's labels)"
        )
    p = doc.pages[n - 1]
    return key, n, p.label or f"page {n}", p.text
