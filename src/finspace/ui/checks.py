"""An answer's figure checks on the page (finspace.grounding.check): a mark after each figure, and a Sources panel
under the answer with each cited page's text, the checked rows marked."""

from __future__ import annotations

MARK_WORDS = {
    "verified": "verified",
    "differs": "differs from the page",
    "not_on_page": "not on the cited page",
    "uncited": "uncited",
    "no_such_page": "no such page",
    "other_document": "on another document's page",
    "unknown_document": "no such document",
}


def _mark(c: dict) -> str:
    symbol = str(c.get("symbol") or "?")
    if c.get("mark") == "differs" and c.get("printed"):
        return f" {symbol} *(p. {c.get('page')} prints {c['printed']})*"
    if c.get("mark") == "verified":
        return f" {symbol}"
    return f" {symbol} *({MARK_WORDS.get(str(c.get('mark')), c.get('mark'))})*"


def marked(answer: str, checks: list[dict]) -> str:
    """``answer`` with each checked figure followed by its mark (✓ verified; ≠ with what the page prints; ✗ not on
    the cited page; ? uncited ...), at the offsets the check gives."""
    out = answer
    for c in sorted(checks or (), key=lambda c: -int(c.get("end") or 0)):
        end = int(c.get("end") or 0)
        if 0 < end <= len(out) and out[int(c.get("start") or 0) : end] == c.get("figure"):
            out = out[:end] + _mark(c) + out[end:]
    return out


def counts(checks: list[dict]) -> str:
    """ "2 ✓ verified, 1 ≠ differs from the page" for the Sources panel's title."""
    tally: dict[str, int] = {}
    for c in checks or ():
        key = f"{c.get('symbol')} {MARK_WORDS.get(str(c.get('mark')), c.get('mark'))}"
        tally[key] = tally.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in tally.items())


def marked_page(text: str, marks: list[tuple[str, str]]) -> str:
    """A page's text with each quote in ``marks`` ((quote, note)) followed by "⟵ **note**", at its first place.
    A quote that is a Markdown table's row takes the note in its first cell, beside the row's label: after the
    row's closing pipe it would be a cell beyond the header's, which Markdown drops. The chat's Sources and the Matrix's cell view."""
    notes: dict[str, list[str]] = {}  # one quote's notes together (two figures read from one row)
    for quote, note in marks:
        if quote and str(quote) in text and note not in notes.setdefault(str(quote), []):
            notes[str(quote)].append(note)
    for quote, said in notes.items():
        note, row = " · ".join(f"**{n}**" for n in said), quote.rstrip()
        if row.startswith("|") and row.endswith("|") and (cut := row.find("|", 1)) > 0:  # in the row's label
            tagged = f"{row[:cut].rstrip()} ⟵ {note} {row[cut:]}" + quote[len(row) :]
        else:
            tagged = f"{quote} ⟵ {note}"
        text = text.replace(quote, tagged, 1)
    return text


def page_view(source: dict, marks: list[tuple[str, str]]) -> str:
    """One page under its name, "**document · label**", its quotes marked (``marked_page``)."""
    return (
        f"**{source.get('document')} · {source.get('label')}**\n\n{marked_page(str(source.get('text') or ''), marks)}"
    )


def sources(sources_: list[dict], checks: list[dict]) -> dict | None:
    """The collapsed Sources message under the answer: each cited page's text, the rows the checks quote marked
    with the figure and its mark; None when nothing was cited."""
    if not sources_ and not checks:
        return None
    parts = []
    for s in sources_ or ():
        marks = [
            (c.get("quote"), f"{c.get('symbol')} {c.get('figure')}")
            for c in checks or ()
            if c.get("document") == s.get("document") and c.get("page") == s.get("page")
        ]
        parts.append(page_view(s, marks))
    title = "📑 Sources" + (f": {counts(checks)}" if checks else "")
    body = "\n\n---\n\n".join(parts) or "No cited page: the figures carry no citation."
    return {"role": "assistant", "content": body, "metadata": {"title": title, "status": "done"}}
