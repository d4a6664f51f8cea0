"""vLLM's refusal of a request (``VLLMValidationError``, any ``VLLMClientError``) as a message naming the keyword.

finspace.structured's checks run first, so this is the last wall: whatever vLLM or xgrammar still refuses is the
caller's to fix, a 400 in ``/v1`` and a refusal in the Matrix, never a 500 with a traceback. xgrammar's messages
carry its build paths (``/project/cpp/json_schema_converter.cc:4944``) and a time stamp: both are cut.
"""

from __future__ import annotations

import re

_NOISE = re.compile(r"\[\d\d:\d\d:\d\d\]\s*|/?[\w./-]*\.(?:cc|cpp|h|py):\d+:?\s*")
_KEYWORDS = (  # (what the message says, the keyword to name), first match wins
    ("regex", "pattern"),
    ("backreference", "pattern"),
    ("lookbehind", "pattern"),
    ("word boundary", "pattern"),
    ("minlength", "minLength/maxLength"),
    ("maxlength", "minLength/maxLength"),
    ("minitems", "minItems/maxItems"),
    ("maxitems", "minItems/maxItems"),
    ("prefixitems", "prefixItems"),
    ("cannot find field", "$ref"),
    ("$ref", "$ref"),
    ("range", "minimum/maximum"),
    ("minimum", "minimum/maximum"),
    ("maximum", "minimum/maximum"),
    ("integer constraint", "minimum/maximum"),
    ("nested too deeply", "nesting"),
    ("enum", "enum"),
    ("const", "const"),
    ("format", "format"),
    ("schema 'false'", "false"),
    ("not supported by xgrammar", "a keyword xgrammar cannot enforce"),
)
MAX_CHARS = 300


def keyword(message: str) -> str | None:
    """The JSON-schema keyword vLLM's ``message`` is about, if it names one."""
    low = message.lower()
    return next((kw for needle, kw in _KEYWORDS if needle in low), None)


def explain(exc: BaseException) -> str:
    """The text of a ``BadInput`` for vLLM's refusal ``exc``: what it refused (the keyword when it names one),
    vLLM's own reason without build paths, and the fix."""
    reason = " ".join(_NOISE.sub("", str(exc)).split())[:MAX_CHARS] or type(exc).__name__
    kw = keyword(reason)
    if kw is None:
        return f"the engine refused this request: {reason}; change the request and send it again"
    return (
        f"response_format.json_schema: the engine cannot build a grammar from this schema ({kw}): {reason}; "
        f"change the schema's {kw} and send it again"
    )
