"""What one matrix may take: documents, cells, matrices at once, a cell's reply. Frozen and passed in
(``Settings.matrix``, read once from the environment by finspace.settings); nothing here reads the environment."""

from __future__ import annotations

from dataclasses import dataclass

# a cell's JSON: its keys, a page, a quote of at most 200 characters and a value (a text of 120, a list of 5 x 60):
# a digit is a token for some tokenizers, so a quote and a value can take a token a character; a reply that runs
# into this bound anyway is marked cut, never read
REPLY_TOKENS = 768


@dataclass(frozen=True)
class MatrixLimits:
    max_documents: int = 20  # rows (FINSPACE_MATRIX_MAX_DOCUMENTS)
    max_cells: int = 120  # documents x fields in one matrix (FINSPACE_MATRIX_MAX_CELLS)
    max_running: int = 2  # matrices filling at once, all clients together (FINSPACE_MATRIX_MAX_RUNNING)
    reply_tokens: int = REPLY_TOKENS  # a cell's reply bound; past it the cell is marked cut
    # the Matrix tab uploads its filings in one request: that request's body bound (each file is still held to the
    # document limit), FINSPACE_MATRIX_UPLOAD_MIB
    upload_bytes: int = 64 << 20
