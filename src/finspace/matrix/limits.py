"""What one matrix may take: documents, cells, matrices at once, a cell's reply. Frozen and passed in
(``Settings.matrix``, read once from the environment by finspace.settings); nothing here reads the environment."""

from __future__ import annotations

from dataclasses import dataclass

REPLY_TOKENS = 256  # a cell's JSON: found, page, a quote of at most 300 characters, a value


@dataclass(frozen=True)
class MatrixLimits:
    max_documents: int = 20  # rows (FINSPACE_MATRIX_MAX_DOCUMENTS)
    max_cells: int = 120  # documents x fields in one matrix (FINSPACE_MATRIX_MAX_CELLS)
    max_running: int = 2  # matrices filling at once, all clients together (FINSPACE_MATRIX_MAX_RUNNING)
    reply_tokens: int = REPLY_TOKENS  # a cell's reply bound; past it the cell is marked cut
