"""What one uploaded document may take: bytes, pages, spreadsheet cells, unpacked size, text, conversion time.

Frozen and passed in (``Settings.documents``, read once from the environment by
finspace.settings); nothing here reads the environment.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class DocumentLimits:
    max_bytes: int = 20 * MIB  # the uploaded file (FINSPACE_DOCUMENT_MAX_MIB); the upload route's body bound too
    max_pages: int = 1000  # PDF pages (FINSPACE_DOCUMENT_MAX_PAGES); an annual report is 100 to 400
    max_cells: int = 200_000  # spreadsheet cells read, over all sheets (XLSX, CSV), and HTML table cells
    max_tags: int = 500_000  # HTML elements (a 10-K has 10,000 to 25,000)
    max_unpacked_bytes: int = 200 * MIB  # a DOCX/XLSX (a zip) unpacked: a zip bomb stops here
    max_chars: int = 4_000_000  # text after conversion (a 10-K is about 600,000 characters)
    convert_timeout_s: float = 60.0  # the converter process is killed after this (FINSPACE_DOCUMENT_TIMEOUT_S)
    # ...and a PDF's sooner, by its pages: convert_base_s + convert_page_s per page (FINSPACE_DOCUMENT_PAGE_S), so a
    # file of a few pages that makes the parser spin is stopped in seconds, not after the whole-file bound
    convert_base_s: float = 10.0
    convert_page_s: float = 0.5
    # converter processes at once (FINSPACE_MAX_CONVERSIONS): each may take 4 GiB of address space, so 2 keep the
    # children's peak under 8 GiB beside the app (a 62 GB Space, a 24 GB machine); a conversion past it waits
    # up to convert_timeout_s for a slot, then gets 429
    max_conversions: int = 2
    max_conversions_per_client: int = 1  # running or waiting, per client address; past it 429 at once
    # a newcomer's document while every slot is held: one more child, cut at this (FINSPACE_DOCUMENT_QUICK_S; 0: no
    # quick lane), then 429 "send it again shortly" (documents.gate)
    quick_s: float = 10.0

    def convert_bound_s(self, pages: int | None) -> float:
        """The conversion's time bound: by its pages when they are known (a PDF's), never past the whole file's."""
        if pages is None:
            return self.convert_timeout_s
        return min(self.convert_timeout_s, self.convert_base_s + self.convert_page_s * max(0, pages))

    @property
    def answer_bytes(self) -> int:
        """The converter's whole answer (text, tables, facts, contexts as UTF-8 JSON), in bytes: the text's bound
        at up to 4 bytes a character, and 16 MiB for the inline-XBRL facts (finspace.xbrl's own character bound).
        The child refuses a larger document; the app never reads past it."""
        return 4 * self.max_chars + 16 * MIB

    @property
    def upload_body_bytes(self) -> int:
        """The upload route's body bound: one file of ``max_bytes`` and its multipart envelope."""
        return self.max_bytes + 64 * 1024
