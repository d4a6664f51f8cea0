"""Server-sent event lines, split at LF (CR LF) only, as the SSE format does.

httpx's iter_lines splits as str.splitlines does, also at U+0085, U+2028 and the like; a model's reply can hold
them and Gradio's (and OpenAI's) JSON carries them unescaped, so a message would arrive cut in two.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator


class SseLines:
    """Feed chunks, get whole lines."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[str]:
        *lines, self._buf = (self._buf + chunk).split(b"\n")
        return [line.rstrip(b"\r").decode("utf-8", "replace") for line in lines]

    def rest(self) -> list[str]:
        rest, self._buf = self._buf, b""
        return [rest.rstrip(b"\r").decode("utf-8", "replace")] if rest else []


def sse_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a stream read with httpx's iter_bytes."""
    split = SseLines()
    for chunk in chunks:
        yield from split.feed(chunk)
    yield from split.rest()


async def asse_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[str]:
    """The lines of a stream read with httpx's aiter_bytes."""
    split = SseLines()
    async for chunk in chunks:
        for line in split.feed(chunk):
            yield line
    for line in split.rest():
        yield line
