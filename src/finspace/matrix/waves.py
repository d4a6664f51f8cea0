"""Which documents of a matrix go to the engine together: by document, in waves that fit the KV cache.

A document's cells share its prefix (the rules and the document, first in each cell's prompt), and vLLM's
prefix cache computes it once, but only while it stays in the KV cache. Twenty 10-Ks of 60,000-100,000 tokens do
not fit an L40S's KV cache together: sent all at once, vLLM evicts a document's prefix before its other cells
reuse it, and computes it again. So a matrix sends its documents in waves: as many at once as the KV cache
holds (each document's tokens and its cells' own: field message and reply), all of a document's cells together,
and the next document as soon as one has finished. A document larger than the whole cache goes alone.

The capacity is what the engine reports (``EngineAPI.kv_cache_tokens``: vLLM's num_gpu_blocks x block_size); an
engine that does not know it (a remote endpoint) gets every document at once, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def cost(prefix_tokens: int, cell_tokens: Sequence[int]) -> int:
    """KV tokens a document's cells hold together: the shared prefix once, each cell's own tokens."""
    return prefix_tokens + sum(cell_tokens)


@dataclass
class Waves:
    """The documents in flight and their KV tokens; ``fits`` says whether the next one may join them."""

    capacity: int | None  # KV tokens; None: unknown, every document at once
    active: dict[int, int] = field(default_factory=dict)  # row -> its KV tokens

    @property
    def used(self) -> int:
        return sum(self.active.values())

    def fits(self, tokens: int) -> bool:
        """Whether a document of ``tokens`` may start now (always, when nothing else is in flight)."""
        return self.capacity is None or not self.active or self.used + tokens <= self.capacity

    def start(self, row: int, tokens: int) -> None:
        self.active[row] = tokens

    def finish(self, row: int) -> None:
        self.active.pop(row, None)
