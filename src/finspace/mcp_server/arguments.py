"""A tool call's arguments held to the tool's JSON schema, and its documents turned into files to convert.

``check`` validates with ``jsonschema`` (Draft 2020-12, the schema ``tools`` lists) and answers the first
problems as a ``BadInput`` that names the argument and what it must be, never echoing the value (it may be
10 MB, or a secret). jsonschema walks every item of a list and every branch of a ``oneOf`` before it answers,
past ``maxItems`` too: 1.3 MB of 50,000 bad fields took it 22 s of CPU (issue 41); so ``_too_big`` first refuses a
list longer than its ``maxItems`` and a closed object with more keys than its properties, in one pass over what
the schema can hold, and jsonschema only ever sees arguments of the schema's size. ``document_file`` writes one document (fetched by URL, decoded from base64, or an upload
already in Gradio's upload folder) as a file inside the upload folder, where the converters take it from; no
argument ever names another file on the server.
"""

from __future__ import annotations

import base64
import binascii
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from finspace.documents import fetch
from finspace.documents.convert import kind_of, short_name
from finspace.documents.upload import inside
from finspace.errors import BadInput

FOLDER = "finspace-mcp"  # the tools' decoded and fetched files, inside the upload folder, deleted after conversion
_KIND_WORDS = {
    "type": "must be {expected}",
    "maxLength": "is too long (at most {expected} characters)",
    "minLength": "is too short (at least {expected} characters)",
    "maxItems": "has too many items (at most {expected})",
    "minItems": "needs at least {expected} item(s)",
    "maximum": "must be at most {expected}",
    "minimum": "must be at least {expected}",
    "exclusiveMinimum": "must be more than {expected}",
    "enum": "must be one of {expected}",
    "required": "is missing a required argument",
    "additionalProperties": "has an unknown argument",
    "oneOf": "must be {expected}",
}


def _where(path: Any) -> str:
    out = "arguments"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{str(part)[:40]}"
    return out


def _expected(error: Any) -> str:
    v = error.validator_value
    if error.validator == "enum":
        return ", ".join(str(x) for x in v)[:300]
    if error.validator == "oneOf":
        return "a preset name (text) or a list of {name, type, instruction} fields"
    if error.validator == "type":
        return {
            "string": "text",
            "integer": "a whole number",
            "number": "a number",
            "object": "an object ({...})",
            "array": "a list",
            "boolean": "true or false",
        }.get(str(v), str(v))
    return str(v)[:60]


def check(schema: dict, arguments: Any) -> dict:
    """``arguments`` if they match ``schema``; else BadInput naming up to three problems and the schema's fields."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise BadInput("the tool's arguments must be a JSON object; see the tool's inputSchema")
    if problem := _too_big(schema, arguments, ()):
        return _raise("invalid arguments: " + problem)
    errors = sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: len(list(e.absolute_path)))
    if not errors:
        return arguments
    parts = []
    for error in errors[:3]:
        if error.validator == "additionalProperties":
            extra = (
                sorted(set(error.instance) - set(error.schema.get("properties", {})))
                if isinstance(error.instance, dict)
                else []
            )
            allowed = ", ".join(error.schema.get("properties", {})) or "none"
            kind = (
                f"has an unknown argument {str(extra[0])[:40]!r}" if extra else "has an unknown argument"
            ) + f"; the arguments are: {allowed}"
        elif error.validator == "required":
            missing = [k for k in error.validator_value if isinstance(error.instance, dict) and k not in error.instance]
            kind = f"is missing {', '.join(missing)}"
        else:
            kind = _KIND_WORDS.get(error.validator, "does not match the tool's inputSchema").format(
                expected=_expected(error)
            )
        parts.append(f"{_where(error.absolute_path)} {kind}")
    return _raise("invalid arguments: " + "; ".join(parts))


_TYPES = {"array": list, "object": dict, "string": str, "boolean": bool, "integer": int, "number": (int, float)}


def _may_be(schema: dict, value: Any) -> bool:
    """Whether ``value``'s JSON type is one ``schema`` names (or it names none)."""
    kinds = schema.get("type")
    if kinds is None:
        return True
    return any(isinstance(value, _TYPES.get(k, object)) for k in ([kinds] if isinstance(kinds, str) else kinds))


def _too_big(schema: Any, value: Any, path: tuple) -> str | None:
    """Where ``value`` is larger than ``schema`` lets it be (a list past ``maxItems``, an unknown key of a closed
    object), else None; it descends only into what the schema bounds, so its work is the schema's size at most."""
    if not isinstance(schema, dict):
        return None
    branches = [
        b for b in schema.get("oneOf") or schema.get("anyOf") or () if isinstance(b, dict) and _may_be(b, value)
    ]
    if branches:
        found = [_too_big(b, value, path) for b in branches]
        return None if None in found else found[0]
    if isinstance(value, list) and isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        return f"{_where(path)} has too many items (at most {schema['maxItems']})"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return next(filter(None, (_too_big(schema["items"], v, (*path, i)) for i, v in enumerate(value))), None)
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        known = schema["properties"]
        if schema.get("additionalProperties") is False and len(value) > len(known):
            extra = next(k for k in value if k not in known)
            return f"{_where(path)} has an unknown argument {str(extra)[:40]!r}; the arguments are: {', '.join(known) or 'none'}"
        return next(filter(None, (_too_big(known[k], v, (*path, k)) for k, v in value.items() if k in known)), None)
    return None


def _raise(message: str):
    raise BadInput(message)


async def document_file(
    doc: dict,
    upload_dir: str,
    max_bytes: int,
    *,
    allow_loopback: bool = False,
    fetch_timeout_s: float = 30.0,
    owned: Callable[[str], bool] | None = None,
) -> tuple[str, str]:
    """(path inside ``upload_dir``, name) of one document argument (already schema-checked)."""
    given = [k for k in ("url", "data", "upload") if k in doc]
    if len(given) != 1:
        raise BadInput("each document needs exactly one of url, data (with filename) or upload")
    name = doc.get("filename")
    if "upload" in doc:
        path = doc["upload"]
        if (
            "\x00" in path
            or not inside(path, upload_dir)
            or not os.path.isfile(path)
            or (owned is not None and not owned(path))
        ):  # only the caller's own upload
            raise BadInput(
                "upload must be a path that this app's upload route returned (POST gradio_api/upload, one "
                "file each, from this client; uploads are deleted once read: upload again); no other "
                "file on the server is read"
            )
        name = name or Path(path).name
        kind_of(name)
        return os.path.realpath(path), name
    if "url" in doc:
        got = await fetch.fetch(doc["url"], max_bytes, fetch_timeout_s, allow_loopback)
        data, name = got.data, name or got.name
    else:
        if not name:
            raise BadInput(
                "a document sent as data needs its filename with the extension (.pdf, .html, .docx, "
                ".xlsx, .csv, .txt, .md)"
            )
        try:
            data = base64.b64decode(doc["data"], validate=True)
        except (binascii.Error, ValueError):
            raise BadInput(
                f"data of {short_name(name)} is not valid base64; encode the file's bytes with standard base64"
            ) from None
    kind_of(name)
    if len(data) > max_bytes:
        raise BadInput(
            f"{short_name(name)} is {len(data) / (1 << 20):.1f} MiB; the limit is "
            f"{max_bytes / (1 << 20):g} MiB per document (FINSPACE_DOCUMENT_MAX_MIB)"
        )
    folder = Path(upload_dir) / FOLDER / uuid.uuid4().hex
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("document" + Path(name).suffix.lower())
    path.write_bytes(data)
    return str(path), name
