"""One cell: the JSON schema vLLM's structured outputs fill, and the typed cell read back from the reply.

The schema is per field and per document size: a page number is at most the document's page count rounded up to
a power of two (``page_bound``), so documents of 33 to 64 pages share one schema and vLLM compiles its grammar
once for them (a cell's grammar took 9-22 s to compile on 2 CPU cores; vLLM caches grammars by schema); the
exact page count is checked when the cell is read (``read_cell``: a page past it is ``invalid``). The
model writes ``found`` first, then the page and the verbatim quote, then the value it takes from that quote:
the value follows its evidence. "Not found" is an allowed answer (``found: false``, the rest null).

A reply is never parsed as free text: it is JSON against the schema, or a cell marked ``cut`` (the reply
reached max_tokens) or ``invalid`` (it did not parse, which guided decoding should make impossible); a
broken reply is never passed off as a value.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from finspace.matrix.fields import MatrixField

MAX_QUOTE_CHARS = 200
MAX_TEXT_CHARS = 120
MAX_LIST_ITEMS = 5
MAX_ITEM_CHARS = 60
SCALES = {"units": 1, "thousands": 10**3, "millions": 10**6, "billions": 10**9}
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
CURRENCY_PATTERN = r"^[A-Z]{3}$"
MAX_NUMBER = 1e15  # past a quadrillion a figure is no filing's
DOCUMENT_ROOM_TOKENS = 768  # kept from a cell's reply for the rules, the field and the document's passages
MIN_REPLY_TOKENS = 256  # a quote of 200 characters and its value
MIN_CONTEXT_TOKENS = DOCUMENT_ROOM_TOKENS + MIN_REPLY_TOKENS  # 1,024: demo's


def reply_tokens(max_model_len: int, configured: int) -> int:
    """A cell's reply bound on a model of ``max_model_len`` tokens: the configured bound
    (FINSPACE_MATRIX_REPLY_TOKENS, 768), less what the context needs for the document (DOCUMENT_ROOM_TOKENS):
    256 on ``demo``'s 1,024, 768 from 1,536 up."""
    return min(configured, max(MIN_REPLY_TOKENS, max_model_len - DOCUMENT_ROOM_TOKENS))


def context_problem(max_model_len: int) -> str | None:
    """The Matrix's refusal for a model whose context is too small for a cell, naming the fix; else None."""
    if max_model_len >= MIN_CONTEXT_TOKENS:
        return None
    return (
        f"the loaded model reads {max_model_len:,} tokens at a time; a Matrix cell needs at least "
        f"{MIN_CONTEXT_TOKENS:,} (its rules, the field, the document's passages and the reply): load a model "
        "with a longer context, then fill the matrix"
    )


def _value_schema(type_: str) -> dict[str, Any]:
    text = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS}
    item = {"type": "string", "minLength": 1, "maxLength": MAX_ITEM_CHARS}
    schemas: dict[str, dict[str, Any]] = {
        "number": {"type": "number", "minimum": -MAX_NUMBER, "maximum": MAX_NUMBER},
        "percent": {"type": "number", "minimum": -MAX_NUMBER, "maximum": MAX_NUMBER},
        "money": {
            "type": "object",
            "additionalProperties": False,
            "required": ["amount", "currency", "scale"],
            "properties": {
                "amount": {"type": "number", "minimum": -MAX_NUMBER, "maximum": MAX_NUMBER},
                "currency": {"type": "string", "pattern": CURRENCY_PATTERN},
                "scale": {"enum": list(SCALES)},
            },
        },
        "date": {"type": "string", "pattern": DATE_PATTERN},
        "text": text,
        "list": {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_LIST_ITEMS},
        "yesno": {"type": "boolean"},
    }
    return schemas[type_]


def page_bound(pages: int) -> int:
    """The largest page a cell's schema allows: the page count rounded up to a power of two (1, 2, 4 ... 1024)."""
    return 1 << (max(1, pages) - 1).bit_length()


def cell_schema(field: MatrixField, pages: int) -> dict[str, Any]:
    """The JSON schema of one cell of ``field`` in a document of ``pages`` pages: found with its page, quote and
    typed value, or not found with nothing else."""
    keys = ["found", "quote", "page", "value"]
    found = {
        "type": "object",
        "additionalProperties": False,
        "required": keys,
        "properties": {
            "found": {"const": True},
            "quote": {"type": "string", "minLength": 1, "maxLength": MAX_QUOTE_CHARS},
            "page": {"type": "integer", "minimum": 1, "maximum": page_bound(pages)},
            "value": _value_schema(field.type),
        },
    }
    missing = {
        "type": "object",
        "additionalProperties": False,
        "required": keys,
        "properties": {
            "found": {"const": False},
            "quote": {"const": ""},
            "page": {"type": "null"},
            "value": {"type": "null"},
        },
    }
    return {"anyOf": [found, missing]}


CellStatus = Literal["ok", "cut", "invalid"]  # cut: at max_tokens; invalid: not JSON of the schema


@dataclass(frozen=True)
class Cell:
    """A cell as the model filled it."""

    status: CellStatus
    found: bool = False
    value: Any = None
    page: int | None = None
    quote: str = ""
    raw: str = ""


def _typed(value: Any, type_: str) -> bool:
    number = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and abs(value) <= MAX_NUMBER
    )
    if type_ in ("number", "percent"):
        return number
    if type_ == "money":
        return (
            isinstance(value, dict)
            and set(value) == {"amount", "currency", "scale"}
            and _typed(value["amount"], "number")
            and isinstance(value["currency"], str)
            and len(value["currency"]) == 3
            and value["currency"].isupper()
            and value["scale"] in SCALES
        )
    if type_ == "date":
        return (
            isinstance(value, str)
            and len(value) == 10
            and value[4] == value[7] == "-"
            and value.replace("-", "").isdigit()
        )
    if type_ == "text":
        return isinstance(value, str) and 0 < len(value) <= MAX_TEXT_CHARS
    if type_ == "list":
        return (
            isinstance(value, list)
            and 0 < len(value) <= MAX_LIST_ITEMS
            and all(isinstance(v, str) and 0 < len(v) <= MAX_ITEM_CHARS for v in value)
        )
    return isinstance(value, bool)


def read_cell(reply: str, field: MatrixField, pages: int, finish_reason: str | None) -> Cell:
    """The cell in ``reply``: checked against the field's schema by hand, never trusted as free text."""
    if finish_reason == "length":
        return Cell("cut", raw=reply)
    try:
        data = json.loads(reply)
    except (ValueError, RecursionError):
        return Cell("invalid", raw=reply)
    if (
        not isinstance(data, dict)
        or set(data) != {"found", "page", "quote", "value"}
        or not isinstance(data["found"], bool)
        or not isinstance(data["quote"], str)
    ):
        return Cell("invalid", raw=reply)
    found, page, value = data["found"], data["page"], data["value"]
    if not found:
        return Cell("ok", found=False, quote=data["quote"], raw=reply)
    page_ok = isinstance(page, int) and not isinstance(page, bool) and 1 <= page <= max(1, pages)
    if not page_ok or value is None or not _typed(value, field.type):
        return Cell("invalid", raw=reply)
    return Cell("ok", found=True, value=value, page=page, quote=data["quote"], raw=reply)
