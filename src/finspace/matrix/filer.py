"""The filer's own value beside the model's: each cell of a field that names XBRL concepts gets the filing's
tagged figure for the document's own period (``finspace.xbrl.concepts``), shown as the model's values are, and
the model's value is marked against it.

Filled at once, from the converted documents, before any model answers (and with no model loaded at all).
A model's value agrees when it is the filer's figure as the model wrote it, rounded: 391 billion or 391.04 billion
agree with 391,035 million; a value more precise than the filer's agrees when it rounds to the filer's
``decimals``. A money value in another currency than the filer's unit differs. A model that answered "not found"
where the filer reports a value missed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from finspace.matrix.cells import SCALES
from finspace.matrix.fields import MatrixField
from finspace.matrix.numbers import as_decimal
from finspace.xbrl.concepts import FilerValue, as_date, filer_value
from finspace.xbrl.facts import Facts


AGREES = "agrees"
DIFFERS = "differs"
MISSED = "missed"  # the model answered "not found" where the filer reports a value
_DECIMAL_SCALES = {-9: "billions", -6: "millions", -3: "thousands"}


def filer_values(fields: Sequence[MatrixField], facts: Sequence[Facts | None]) -> dict[tuple[int, int], FilerValue]:
    """(row, column) -> the filer's value, for every document with facts and every field naming concepts."""
    out = {}
    for r, doc_facts in enumerate(facts):
        if doc_facts is None or not doc_facts.facts:
            continue
        for c, f in enumerate(fields):
            got = filer_value(doc_facts, f.concepts) if f.concepts else None
            if got is not None:
                out[(r, c)] = got
    return out


def typed(fv: FilerValue, type_: str) -> Any:
    """The filer's value as a cell of ``type_`` holds it (money: amount, currency, scale from its decimals)."""
    if fv.value is None:
        text = fv.text or ""
        if type_ == "date":
            return as_date(text) or text
        if type_ == "yesno":
            return text.strip().lower() in ("true", "yes")
        return [text] if type_ == "list" else text
    if type_ == "money":
        currency = (fv.unit or "").split("/")[0].rsplit(":", 1)[-1].upper() or "USD"
        decimals = _int(fv.decimals)
        scale = _DECIMAL_SCALES.get(decimals, "units") if decimals is not None else "units"
        return {"amount": _number(fv.value / SCALES[scale]), "currency": currency, "scale": scale}
    if type_ == "percent" and (fv.unit or "").endswith("pure"):
        return _number(fv.value * 100)
    return _number(fv.value)


def agreement(model: Any, fv: FilerValue, type_: str) -> str | None:
    """The model's value against the filer's: AGREES, DIFFERS, or None when the model gave no value."""
    if model is None:
        return None
    return AGREES if _same(model, typed(fv, type_), fv, type_) else DIFFERS


def _same(model: Any, filer: Any, fv: FilerValue, type_: str) -> bool:
    if type_ in ("text", "date"):
        return " ".join(str(model).casefold().split()) == " ".join(str(filer).casefold().split())
    if type_ == "list":
        return [" ".join(str(m).casefold().split()) for m in model] == [" ".join(filer[0].casefold().split())]
    if type_ == "yesno":
        return model is filer
    try:
        if type_ == "money":
            if model["currency"] != filer["currency"]:
                return False
            m, unit = as_decimal(model["amount"]), Decimal(SCALES[model["scale"]])
        else:
            m, unit = as_decimal(model), Decimal(1)
        f = fv.value if type_ == "money" else as_decimal(filer)
    except (InvalidOperation, KeyError, TypeError, ValueError):
        return False
    if f is None or not m.is_finite():
        return False
    model_value = m * unit
    if model_value == f:
        return True
    # the model rounded: the filer's value within half of the model's last digit
    places = max(0, -int(m.as_tuple().exponent))
    if abs(f / unit - m) <= Decimal(5).scaleb(-places - 1):
        return True
    # the model was more precise than the filer: its value at the filer's decimals
    d = _int(fv.decimals)
    return d is not None and -12 <= d <= 12 and model_value.quantize(Decimal(1).scaleb(-d)) == f


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _number(value: Decimal) -> float | int:
    return int(value) if value == value.to_integral_value() and abs(value) < 2**53 else float(value)
