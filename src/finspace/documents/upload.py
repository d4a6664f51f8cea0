"""An uploaded file converted off the serving loop: in a child process, with a time bound, then deleted.

``convert_upload`` checks that the file lies inside Gradio's upload folder (its
real path: no link or ``..`` leads out), runs finspace.documents.convert in a
child process of this one (``python -m finspace.documents.upload``; same process
group, no new session) that may use at most ``CHILD_MEMORY_BYTES`` of address
space and is killed after ``limits.convert_timeout_s``, or for a PDF after its pages' bound
(``limits.convert_bound_s``: the child says how many pages it has before it reads them): a PDF that makes a
parser spin or balloon costs that child, never the server, and a short one is stopped in seconds. The uploaded file is deleted
afterwards, whatever happened; the child writes nothing (its answer is JSON on
stdout).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
from pathlib import Path

from finspace.documents.convert import Document, short_name
from finspace.documents.limits import DocumentLimits
from finspace.errors import BadInput, Busy

CHILD_MEMORY_BYTES = 4 << 30
_SRC = str(Path(__file__).resolve().parents[2])  # the folder holding the finspace package


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether ``path``'s real path lies strictly inside ``folder``'s real path."""
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return real != root and real.is_relative_to(root)


def remove_upload(path: str | Path, folder: str | Path) -> None:
    """Delete the uploaded file, and the one-file folder Gradio made for it when it is left empty."""
    if not inside(path, folder):
        return
    p = Path(os.path.realpath(path))
    with contextlib.suppress(OSError):
        p.unlink()
    with contextlib.suppress(OSError):
        if p.parent != Path(os.path.realpath(folder)):
            p.parent.rmdir()  # only when empty


async def convert_upload(
    path: str, name: str, limits: DocumentLimits, upload_dir: str, quick_s: float | None = None
) -> Document:
    """The uploaded file as a Document (BadInput naming the reason otherwise); the file is deleted after.
    ``quick_s``: converted in the gate's quick lane (documents.gate), cut there with Busy (429) past it."""
    if not isinstance(path, str) or not inside(path, upload_dir):
        raise BadInput("the document must be a file uploaded to this app (gradio_client's handle_file)")
    try:
        if not Path(path).is_file():
            raise BadInput(f"{short_name(name)} is no longer on the server; upload it again")
        return await _in_child(os.path.realpath(path), name, limits, quick_s)
    finally:
        remove_upload(path, upload_dir)


async def _in_child(path: str, name: str, limits: DocumentLimits, quick_s: float | None = None) -> Document:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("TOKEN", "KEYS"))}
    env["PYTHONPATH"] = os.pathsep.join([_SRC, *filter(None, [env.get("PYTHONPATH")])])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "finspace.documents.upload",
        path,
        name,
        json.dumps(dataclasses.asdict(limits)),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    loop = asyncio.get_running_loop()
    quick = bool(quick_s) and quick_s < limits.convert_timeout_s  # cut by the gate's quick lane (a 429 past it)
    bound, pages = (quick_s if quick else limits.convert_timeout_s), None
    deadline = loop.time() + bound
    errors = asyncio.ensure_future(proc.stderr.read())
    try:
        head = await asyncio.wait_for(proc.stdout.readline(), bound)  # {"pages": N or null}, a short line
        with contextlib.suppress(ValueError, TypeError, KeyError):
            pages = int(json.loads(head)["pages"])
            if limits.convert_bound_s(pages) < deadline - loop.time():  # a PDF: bounded by its pages from here
                bound = limits.convert_bound_s(pages)
                deadline = loop.time() + bound
        out = await asyncio.wait_for(_read_bounded(proc.stdout, limits.answer_bytes), max(0.0, deadline - loop.time()))
        if out is None:
            raise BadInput(
                f"{short_name(name)} converts to more than {limits.answer_bytes >> 20} MiB of text, "
                "tables and facts, the bound of one document; upload a smaller document or the part you "
                "need"
            )
        err = await asyncio.wait_for(errors, max(0.1, deadline - loop.time()))
    except (asyncio.TimeoutError, TimeoutError):
        if quick and bound == quick_s:  # the lane's cut, not the document's own (a PDF's pages') bound
            raise Busy(
                f"the server's conversion slots are all busy with other clients' documents, and "
                f"{short_name(name)} needs longer than the {bound:g} s a document converts in beside them "
                "(FINSPACE_DOCUMENT_QUICK_S); send it again shortly",
                retry_after_s=10,
            ) from None
        why = (
            f"the limit for its {pages} pages (FINSPACE_DOCUMENT_PAGE_S)"
            if pages is not None and bound < limits.convert_timeout_s
            else "the limit"
        )
        raise BadInput(
            f"converting {short_name(name)} took longer than {bound:g} s, {why}; "
            "upload a smaller document or the part you need"
        ) from None
    finally:
        errors.cancel()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()
    try:  # parsed off the event loop: a document's answer is megabytes of JSON
        return await asyncio.to_thread(_document, out)
    except ValueError:
        why = (
            "it ran out of memory"
            if proc.returncode in (-9, 137) or b"MemoryError" in err
            else f"the converter stopped (exit {proc.returncode})"
        )
        raise BadInput(f"{short_name(name)} could not be converted: {why}; upload a smaller or simpler file") from None


def _document(out: bytes) -> Document:
    answer = json.loads(out.decode("utf-8"))
    if "error" in answer:
        raise BadInput(str(answer["error"]))
    return Document.from_json(answer["document"])


async def _read_bounded(stream: asyncio.StreamReader, limit: int) -> bytes | None:
    """The rest of ``stream``, or None as soon as it passes ``limit`` bytes (the rest is never read)."""
    chunks, size = [], 0
    while chunk := await stream.read(1 << 20):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _child(argv: list[str]) -> int:
    """The converter process: print {"pages": N or null} on a line, then convert the file and print
    {"document": ...} or {"error": message} as JSON."""
    import resource

    from finspace.documents.convert import convert

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    path, name, limits = argv[0], argv[1], DocumentLimits(**json.loads(argv[2]))
    sys.stdout.write(json.dumps({"pages": _pdf_pages(path, name)}) + "\n")  # first: the parent's bound by pages
    sys.stdout.flush()
    try:
        answer = {"document": convert(path, name, limits).to_json()}
        if len(_encoded(answer)) > limits.answer_bytes:  # every product counts: text, tables, facts, contexts
            answer = {
                "error": f"{short_name(name)} converts to more than {limits.answer_bytes >> 20} MiB of text, "
                "tables and facts, the bound of one document; upload a smaller document or the part "
                "you need"
            }
    except BadInput as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": f"{short_name(name)} needs more memory to convert than the limit; upload a smaller file"}
    except Exception as exc:  # noqa: BLE001 - the child's boundary: a named refusal, never a traceback
        answer = {"error": f"{short_name(name)} could not be converted ({type(exc).__name__}); check the file"}
    sys.stdout.flush()
    sys.stdout.buffer.write(_encoded(answer))
    return 0


def _encoded(answer: dict) -> bytes:
    return json.dumps(answer, ensure_ascii=False).encode("utf-8", "replace")


def _pdf_pages(path: str, name: str) -> int | None:
    """A PDF's page count (its page tree only, nothing read), or None: not a PDF, or not readable so far."""
    if not name.lower().endswith(".pdf"):
        return None
    try:
        from finspace.documents.pdf import page_count

        return page_count(path)
    except Exception:  # noqa: BLE001 - the conversion itself says what is wrong with the file
        return None


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
