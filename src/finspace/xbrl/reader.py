"""The inline-XBRL facts of an HTML filing, read with lxml (a small reader, not ixbrlparse: see notes/xbrl.md).

One pass over the parsed tree in document order counts CSS page breaks (``xbrl.pagebreaks``, the rule the
HTML converter splits pages by) and collects the ``ix:header`` contexts and units, the ``ix:nonFraction`` and
``ix:nonNumeric`` tags with the page each is on, and the ``ix:continuation`` parts; then each fact is read:

- ``ix:nonFraction``: the displayed number read by its ``format`` (ixt:num-dot-decimal, num-comma-decimal,
  fixed-zero, zerodash, numwordsen's "no"/"none"), times 10^``scale``, negated by ``sign="-"``; ``xsi:nil`` is
  no value;
- ``ix:nonNumeric``: its text without ``ix:exclude``, followed along ``continuedAt`` (a loop is refused: the
  text stops where it would repeat);
- a fact whose context or unit is missing, whose number does not read, or whose scale is past ±MAX_SCALE is
  skipped, and the skips are counted in ``Facts.notes`` (one line per reason, never one per fact).

Everything a file controls is bounded: facts, contexts, text per fact, continuation chains, digits per number.
The parser resolves no entities and reaches no network; a file that is not well-formed XHTML is read with
lxml's HTML parser (tag names lower-cased) instead.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from finspace.xbrl.pagebreaks import breaks
from finspace.xbrl.facts import Context, Fact, Facts


@dataclass(frozen=True)
class XbrlLimits:
    max_facts: int = 50_000  # Apple's 10-K has 1,127, NVIDIA's 1,417
    max_contexts: int = 50_000  # Wells Fargo's 10-K has 1,892
    max_scale: int = 15  # scale is a power of ten: filings use -6 .. 12
    max_number_chars: int = 40
    max_text_chars: int = 1_000  # a text fact kept (a text block is cut there, marked with "…")
    max_chain: int = 1_000  # ix:continuation parts followed for one fact
    # all the facts' text and the contexts they name together, in characters: the product of a conversion is
    # bounded as its text is (a 3.18 MB file of 50,000 nested contexts was 170 MB of JSON before); past it the
    # rest of the facts are left out, counted in the notes
    max_total_chars: int = 2_000_000
    max_context_elements: int = 64  # elements read inside one context (its period and dimensions)


_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_ZERO_WORDS = {"no", "none", "nil", "zero", "-", "—", "–", ""}
_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}


def read_file(path: str | Path, limits: XbrlLimits | None = None) -> Facts:
    return read(Path(path).read_bytes(), limits)


def read(data: bytes, limits: XbrlLimits | None = None) -> Facts:
    """The facts of an inline-XBRL document (empty for an HTML file without tags). Never raises on bad tags."""
    limits = limits or XbrlLimits()
    if b"nonfraction" not in data.lower() and b"nonnumeric" not in data.lower():
        return Facts()
    root = _parse(data)
    if root is None:
        return Facts(notes=("the inline XBRL could not be parsed: no facts read",))
    return _Reader(limits).run(root)


def _parse(data: bytes) -> Any:
    from lxml import etree

    xml = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_comments=True, remove_pis=True
    )
    try:
        return etree.fromstring(data, xml)
    except etree.XMLSyntaxError:
        pass
    try:
        return etree.fromstring(data, etree.HTMLParser(no_network=True, remove_comments=True, remove_pis=True))
    except (etree.XMLSyntaxError, ValueError):
        return None


def _local(tag: object) -> str:
    """``{ns}nonFraction`` (XHTML) or ``ix:nonfraction`` (HTML parser) -> ``nonfraction``."""
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def _attrs(el: Any) -> dict[str, str]:
    return {k.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower(): v for k, v in el.attrib.items()}


class _Reader:
    def __init__(self, limits: XbrlLimits):
        self.lim = limits
        self.skipped: Counter[str] = Counter()
        self.contexts: dict[str, Context] = {}
        self.units: dict[str, str] = {}
        self.tags: list[tuple[str, object, int]] = []  # (nonfraction | nonnumeric, element, page)
        self.parts: dict[str, object] = {}  # ix:continuation by id
        self.pieces: dict[str, str] = {}  # ix:continuation's text by id, read once

    def run(self, root: Any) -> Facts:
        from lxml import etree

        page, dropped = 1, 0
        for event, el in etree.iterwalk(root, events=("start", "end")):
            name = _local(el.tag)
            if not name:
                continue
            before, after = breaks(el.get("style"))
            if event == "start":
                page += before
                if name in ("nonfraction", "nonnumeric"):
                    if len(self.tags) < self.lim.max_facts:
                        self.tags.append((name, el, page))
                    else:
                        dropped += 1
                elif name == "continuation" and el.get("id") and len(self.parts) < self.lim.max_facts:
                    self.parts[el.get("id")] = el
                continue
            page += after
            if name == "context":
                self._context(el)
            elif name == "unit":
                self._unit(el)
        facts: list[Fact] = []
        contexts: dict[str, Context] = {}
        spent = over = 0
        for kind, el, pg in self.tags:
            if spent > self.lim.max_total_chars:
                over += 1
                continue
            fact = self._fact(kind, el, pg)
            if fact is None:
                continue
            spent += _size(fact) + (_context_size(self.contexts[fact.context]) if fact.context not in contexts else 0)
            if spent > self.lim.max_total_chars:
                over += 1
                continue
            facts.append(fact)
            contexts.setdefault(fact.context, self.contexts[fact.context])
        for cid, ctx in self.contexts.items():  # the contexts no fact names, while the bound allows
            if cid not in contexts:
                spent += _context_size(ctx)
                if spent > self.lim.max_total_chars:
                    break
                contexts[cid] = ctx
        notes = [f"{n:,} fact{'s' if n != 1 else ''} skipped: {why}" for why, n in self.skipped.items()]
        if dropped:
            notes.append(f"{dropped:,} facts past the bound of {self.lim.max_facts:,} left out")
        if over:
            notes.append(f"{over:,} facts past the bound of {self.lim.max_total_chars:,} characters of facts left out")
        return Facts(tuple(facts), contexts, tuple(notes))

    # ------------------------------------------------------------ header
    def _context(self, el: Any) -> None:
        cid = el.get("id")
        if not cid or len(self.contexts) >= self.lim.max_contexts:
            if cid:
                self.skipped[f"contexts past the bound of {self.lim.max_contexts:,}"] += 1
            return
        start = end = None
        instant = False
        dims: list[tuple[str, str]] = []
        for n, sub in enumerate(el.iter()):
            if n >= self.lim.max_context_elements:  # a context nesting others: each read once, a bounded part
                break
            name = _local(sub.tag)
            text = (sub.text or "").strip()[:32]
            if name == "instant":
                end, instant = text[:10], True
            elif name == "startdate":
                start = text[:10]
            elif name == "enddate":
                end = text[:10]
            elif name in ("explicitmember", "typedmember") and len(dims) < 16:
                member = text if name == "explicitmember" else " ".join("".join(sub.itertext()).split())[:80]
                dims.append((sub.get("dimension", "")[:200], member[:200]))
        self.contexts[cid] = Context(cid, start, end, instant, tuple(dims))

    def _unit(self, el: Any) -> None:
        uid = el.get("id")
        if not uid or len(self.units) >= self.lim.max_contexts:
            return

        def measures(node: Any) -> str:
            return "*".join((m.text or "").strip()[:60] for m in node.iter() if _local(m.tag) == "measure")

        num = next((s for s in el.iter() if _local(s.tag) == "unitnumerator"), None)
        den = next((s for s in el.iter() if _local(s.tag) == "unitdenominator"), None)
        self.units[uid] = f"{measures(num)}/{measures(den)}" if num is not None and den is not None else measures(el)

    # ------------------------------------------------------------ facts
    def _fact(self, kind: str, el: Any, page: int) -> Fact | None:
        a = _attrs(el)
        concept = a.get("name", "").strip()[:200]
        if not concept:
            self.skipped["a tag without a name"] += 1
            return None
        ctx = a.get("contextref", "")
        if ctx not in self.contexts:
            self.skipped["its contextRef names no context in ix:header"] += 1
            return None
        if kind == "nonnumeric":
            return Fact(concept, ctx, page, text=self._text(el))
        if a.get("nil", "").lower() == "true":
            return None
        unit = a.get("unitref", "")
        if unit not in self.units:
            self.skipped["its unitRef names no unit in ix:header"] += 1
            return None
        try:
            scale = int(a.get("scale", "0") or "0")
        except ValueError:
            self.skipped["its scale is not a whole number"] += 1
            return None
        if abs(scale) > self.lim.max_scale:
            self.skipped[f"its scale is past 10^±{self.lim.max_scale}"] += 1
            return None
        shown = self._number(el, a.get("format", ""))
        if shown is None:
            return None
        value = shown.scaleb(scale)
        if a.get("sign", "") == "-":
            value = -value
        return Fact(
            concept,
            ctx,
            page,
            value=value,
            unit=self.units[unit],
            decimals=a.get("decimals", "")[:8] or None,
            scale=scale,
        )

    def _number(self, el: Any, fmt: str) -> Decimal | None:
        fmt = fmt.rsplit(":", 1)[-1].replace("-", "").lower()
        raw = "".join(el.itertext())
        if len(raw) > self.lim.max_number_chars * 4:
            self.skipped["its number is too long"] += 1
            return None
        text = " ".join(raw.split())
        if fmt in ("fixedzero", "zerodash", "numwordsen", "fixedempty") and text.lower() in _ZERO_WORDS | {"nil"}:
            return Decimal(0)
        if fmt in ("fixedzero",):
            return Decimal(0)
        if fmt == "numwordsen" and text.lower() in _WORDS:  # "two" (of twenty at most: a count in words)
            return Decimal(_WORDS[text.lower()])
        if fmt == "numcommadecimal":
            text = text.replace(".", "").replace(" ", "").replace("\u00a0", "").replace(",", ".")
        elif fmt in ("numdotdecimal", "", "numdotdecimalin", "numdotcomma"):
            text = text.replace(",", "").replace(" ", "").replace("\u00a0", "")
        else:
            self.skipped[f"format {fmt} is not read"] += 1
            return None
        if len(text) > self.lim.max_number_chars or not _NUMBER.match(text):
            self.skipped["its text is not a number in its format"] += 1
            return None
        try:
            return Decimal(text)
        except InvalidOperation:
            self.skipped["its text is not a number in its format"] += 1
            return None

    def _piece(self, pid: str, part: Any) -> str:
        """An ix:continuation's own text (up to the text bound), read once: 2,000 facts continuing into one part
        of 150,000 empty elements walked it 2,000 times (the converter's whole time bound)."""
        if pid not in self.pieces:
            out: list[str] = []
            _collect(part, out, self.lim.max_text_chars)
            self.pieces[pid] = "".join(out)
        return self.pieces[pid]

    def _text(self, el: Any) -> str:
        """The fact's text, ix:exclude left out, its continuations followed (a loop stops the chain)."""
        out: list[str] = []
        size = _collect(el, out, self.lim.max_text_chars)
        seen = {el.get("id")} if el.get("id") else set()
        nxt = _attrs(el).get("continuedat")
        for _ in range(self.lim.max_chain):
            if not nxt or size > self.lim.max_text_chars:
                break
            if nxt in seen:
                self.skipped["an ix:continuation loop (the text stops where it would repeat)"] += 1
                break
            part = self.parts.get(nxt)
            if part is None:
                self.skipped["a continuedAt that names no ix:continuation (the text stops there)"] += 1
                break
            seen.add(nxt)
            piece = self._piece(nxt, part)  # each part walked once for the document, however many facts reach it
            out.append(" ")
            out.append(piece[: self.lim.max_text_chars - size + 1])
            size += len(piece)
            nxt = _attrs(part).get("continuedat")
        text = " ".join("".join(out).split())
        return text if len(text) <= self.lim.max_text_chars else text[: self.lim.max_text_chars - 1] + "…"


def _size(fact: Fact) -> int:
    return len(fact.concept) + len(fact.context) + len(fact.text or "") + len(fact.unit or "") + 32


def _context_size(ctx: Context) -> int:
    return len(ctx.id) + sum(len(a) + len(b) for a, b in ctx.dims) + 32


def _collect(el: Any, out: list[str], room: int) -> int:
    """Append ``el``'s text (without ix:exclude subtrees) to ``out`` until ``room`` characters; return the size."""
    from lxml import etree

    size, skip = 0, 0
    for event, sub in etree.iterwalk(el, events=("start", "end")):
        excluded = _local(sub.tag) == "exclude"
        if event == "start":
            skip += excluded
            if not skip and sub.text:
                out.append(sub.text)
                size += len(sub.text)
        else:
            skip -= excluded
            if sub is not el and not skip and sub.tail:
                out.append(sub.tail)
                size += len(sub.tail)
        if size > room:
            break
    return size
