"""What a request body may hold: the payload checks the wall (``finspace.wall.guard``) makes before Gradio reads it.

``strict_json`` reads a body as JSON with no NaN, no binary and no nesting past the parser's depth;
``file_references`` finds every Gradio FileData in it (iteratively: any depth), ``uploaded_file`` says whether one
names a file Gradio's upload route wrote, and ``check_event_body`` checks a queue/join (or call) body against the
app's events: fn_index, the number of inputs, the session hash, and file references only on the events that take
a document, only inside the upload folder and only the sender's own. Each refusal is a ``Refusal`` (status,
message naming the fix, headers) that the guard answers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any
from urllib.parse import unquote

FILE_MARKER = "gradio.FileData"
_MAX_DEPTH = 64


class Refusal(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def strict_json(body: bytes) -> Any:
    """The body as JSON, or Refusal(400): undecodable bytes, NaN/Infinity, too deeply nested."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Refusal(
            400, "the body is not valid JSON (UTF-8, finite numbers only); send a JSON object as gradio_client does"
        ) from None
    return value


def file_references(value: Any) -> list[dict] | None:
    """Every Gradio file reference in ``value`` (the FileData objects); None when nested too deeply to tell.
    Iterative: any depth."""
    found: list[dict] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > _MAX_DEPTH:
            return None
        if isinstance(item, dict):
            meta = item.get("meta")
            if (isinstance(meta, dict) and meta.get("_type") == FILE_MARKER) or item.get("_type") == FILE_MARKER:
                found.append(item)
                continue
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return found


def _shown(ref: dict) -> str:
    return str(ref.get("path") or ref.get("url") or "?")[:120]


def find_file_reference(value: Any) -> str | None:
    """The first Gradio file reference in ``value`` (its "path"/"url" as given), else None. Iterative: any depth."""
    refs = file_references(value)
    if refs is None:
        return "(nested too deeply)"
    return _shown(refs[0]) if refs else None


def uploaded_file(ref: dict, upload_dir: str) -> bool:
    """Whether a FileData names a file Gradio's upload route wrote: its real path strictly inside
    ``upload_dir`` (no link or ``..`` out), and its url, if any, that same file's /gradio_api/file= address."""
    path, url = ref.get("path"), ref.get("url")
    if not isinstance(path, str) or not path or "\x00" in path:
        return False
    real, root = os.path.realpath(path), os.path.realpath(upload_dir)
    if real == root or not real.startswith(root + os.sep):
        return False
    return url is None or (isinstance(url, str) and unquote(url).endswith("/gradio_api/file=" + path))


def _check_references(
    value: Any,
    fn_index: Any,
    documents: Collection[int],
    upload_dir: str | None,
    owned: Callable[[str], bool] | None = None,
) -> None:
    refs = file_references(value)
    if refs == []:
        return
    on_document_event = isinstance(fn_index, int) and not isinstance(fn_index, bool) and fn_index in documents
    if (
        refs is not None
        and upload_dir is not None
        and on_document_event
        and all(uploaded_file(r, upload_dir) for r in refs)
    ):
        if owned is not None and not all(owned(r["path"]) for r in refs):
            raise Refusal(403, "that upload is not yours: a document is used by the client that uploaded it")
        return
    shown = (
        "(nested too deeply)"
        if refs is None
        else next((_shown(r) for r in refs if upload_dir is None or not uploaded_file(r, upload_dir)), _shown(refs[0]))
    )
    raise Refusal(
        400,
        f"file references are not accepted (got a gradio.FileData for {shown!r}): finspace takes "
        "no files on this endpoint, and a document only as an upload to the chat; send the text "
        "itself, or the document with gradio_client's handle_file on /chat",
    )


def check_event_body(
    value: Any,
    events: Mapping[int, tuple],
    api_name: str | None = None,
    documents: Collection[int] = (),
    upload_dir: str | None = None,
    owned: Callable[[str], bool] | None = None,
) -> tuple[int | None, str | None]:
    """A queue/join body (or a call body for ``api_name``): (fn_index, session_hash), or Refusal(400) naming the
    field. ``events`` maps each event's fn_index to its (api_name, number of inputs[, number required: the rest
    are optional and padded with null in ``value``]). File references pass only on ``documents`` events, and
    only for files inside ``upload_dir``."""
    if not isinstance(value, dict):
        raise Refusal(400, "the body must be a JSON object with \"data\" (a list), \"fn_index\" and \"session_hash\"")
    named = next((i for i, e in events.items() if e[0] == api_name), None) if api_name is not None else None
    _check_references(value, named if api_name is not None else value.get("fn_index"), documents, upload_dir, owned)
    if "data" in value and not isinstance(value["data"], list):
        raise Refusal(400, "\"data\" must be a list of the endpoint's inputs")
    fn_index = value.get("fn_index")
    if api_name is not None:
        fn_index = named
    elif fn_index is not None and (
        isinstance(fn_index, bool) or not isinstance(fn_index, int) or fn_index not in events
    ):
        raise Refusal(
            400,
            f"fn_index must be one of the app's events (0 to {max(events, default=0)}), got "
            f"{str(fn_index)[:40]}; see /gradio_api/info for the endpoints",
        )
    data = value.get("data")
    if fn_index is not None and isinstance(data, list) and len(data) != events[fn_index][1]:
        name, n = events[fn_index][:2]
        required = events[fn_index][2] if len(events[fn_index]) > 2 else n
        if not required <= len(data) <= n:
            took = f"{required} to {n}" if required < n else str(n)
            raise Refusal(
                400,
                f"{'/' + name if name else 'this event'} takes {took} input value(s) in \"data\", "
                f"got {len(data)}; see /gradio_api/info for each endpoint's parameters",
            )
        data.extend([None] * (n - len(data)))  # the optional trailing inputs, as gradio_client sends them
    session = value.get("session_hash")
    if session is not None and (not isinstance(session, str) or not 0 < len(session) <= 128):
        raise Refusal(400, "session_hash must be text of 1 to 128 characters")
    trigger = value.get("trigger_id")
    if trigger is not None and (isinstance(trigger, bool) or not isinstance(trigger, int)):
        raise Refusal(400, "trigger_id must be a whole number or null")
    return fn_index, session
