"""Real filings read whole: milliseconds per page, pages read of the file's, statement rows intact, tokens.

    .venv/bin/python bench/filings.py [--rounds 1] [--only APPLE,aapl]

Over every filing in ``../shared/filings`` (or ``$FINSPACE_SHARED_DIR/filings``; SOURCES.md there): 8 EDGAR HTML
and 6 PDF. Each filing is read by two readers side by side, in one process, before then after, ``--rounds``
times (the best time is kept: noise only ever slows a run):

* **before**: ``finspace.documents.pdf`` / ``html`` as they were at commit ``BASE`` (PDF: pypdf's layout mode,
  pages read until 60% of the conversion's 60 s bound is spent), read with ``git show`` into modules of their own;
* **after**: the same modules now.

Both run with the app's own limits (``DocumentLimits()``: the 60 s bound), so "pages read" is what an upload
gets on this machine now. Per filing: milliseconds per page read, wall and CPU (the process's own CPU time: what
one quiet core would take, on a machine shared with other jobs), pages read of the file's pages, statement rows
intact (``ROWS``: rows read off the PDFs, each a label and its figures: intact when one line holds the label and
then every figure, in order, ``$`` and spacing aside), tokens of the whole text (SmolLM2's tokenizer when
``data/models/smollm2-*/tokenizer.json`` is there, else the ``demo`` model's; the output says which); then the
ratio after / before.

Last line: ``filings_pdf_ms_per_page=M pdf_pages_read=R/T rows_intact=X`` (after; M in CPU ms a page read; X as
intact/checked). The line
before it gives the same for before, and ``filings_html_ms_per_page``.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
BASE = "19be81d"  # the last commit with pypdf's layout mode and the 36 s page budget

# (file, label, figures): rows read off the shared PDFs (pages noted), each one statement row
ROWS = [
    ("APPLE_2015_10K.pdf", "Net sales", ("233,715", "182,795", "170,910")),  # p. 41 (printed 39)
    ("APPLE_2015_10K.pdf", "Cost of sales", ("140,089", "112,258", "106,606")),
    ("APPLE_2015_10K.pdf", "Research and development", ("8,067", "6,041", "4,475")),
    ("APPLE_2015_10K.pdf", "Net income", ("53,394", "39,510", "37,037")),
    (
        "APPLE_2015_10K.pdf",
        "Payments for acquisition of property, plant and equipment",
        ("(11,247)", "(9,571)", "(8,165)"),
    ),  # p. 45
    ("APPLE_2015_10K.pdf", "Depreciation and amortization", ("11,257", "7,946", "6,757")),
    ("AMAZON_2015_10K.pdf", "Total net sales", ("107,006", "88,988", "74,452")),  # p. 39
    ("AMAZON_2015_10K.pdf", "Interest expense", ("(459)", "(210)", "(141)")),
    ("AMAZON_2015_10K.pdf", "Net income (loss)", ("596", "(241)", "274")),
    ("MICROSOFT_2015_10K.pdf", "Cash and cash equivalents", ("5,595", "8,669")),  # p. 55
    ("MICROSOFT_2015_10K.pdf", "Total current assets", ("124,712", "114,246")),
    ("MICROSOFT_2015_10K.pdf", "Total assets", ("176,223", "172,384")),
    ("MICROSOFT_2015_10K.pdf", "Short-term unearned revenue", ("23,223", "23,150")),
    ("MICROSOFT_2015_10K.pdf", "Total liabilities", ("96,140", "82,600")),
    ("COSTCO_2015_10K.pdf", "Total revenue", ("116,199", "112,640", "105,156")),  # p. 40
    ("COSTCO_2015_10K.pdf", "Merchandise costs", ("101,065", "98,458", "91,948")),
    ("COSTCO_2015_10K.pdf", "Interest expense", ("(124)", "(113)", "(99)")),
    ("JPMORGAN_2022Q1_10Q.pdf", "Total net revenue", ("30,717", "32,266")),  # p. 80
    ("JPMORGAN_2022Q1_10Q.pdf", "Provision for credit losses", ("1,463", "(4,156)")),
    ("JPMORGAN_2022Q1_10Q.pdf", "Compensation expense", ("10,787", "10,601")),
    ("JPMORGAN_2022Q1_10Q.pdf", "Deposits with banks", ("728,367", "714,396")),  # p. 82
    ("JPMORGAN_2022Q1_10Q.pdf", "Allowance for loan losses", ("(17,192)", "(16,386)")),
    ("INTEL_2022Q4_EARNINGS.pdf", "Additions to property, plant and equipment", ("(24,844)", "(18,733)")),  # p. 10
    ("INTEL_2022Q4_EARNINGS.pdf", "Depreciation", ("11,128", "9,953")),
]


def shared_filings() -> Path:
    return Path(os.environ.get("FINSPACE_SHARED_DIR") or ROOT.parent / "shared") / "filings"


def module_at(commit: str, rel: str, name: str):
    """``src/finspace/documents/<rel>`` as it was at ``commit``, from git, as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:src/finspace/documents/{rel}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="finspace-bench-")) / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def token_counter():
    """(count(text) -> tokens, which tokenizer)."""
    found = sorted((ROOT / "data" / "models").glob("smollm2-*/tokenizer.json"))
    if found:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(found[0]))
        return (lambda text: len(tok.encode(text, add_special_tokens=False).ids)), f"SmolLM2 ({found[0].parent.name})"
    from finspace.models.demo import _train_tokenizer

    fast = _train_tokenizer()
    return (lambda text: len(fast(text, add_special_tokens=False)["input_ids"])), "demo (bench-llama's BPE)"


def _norm(text: str) -> str:
    text = text.replace("$", " ").replace("\u2019", "'")
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", text))
    return " ".join(text.split())


def rows_intact(file: str, text: str) -> tuple[int, int]:
    """(rows of ``ROWS`` for ``file`` that one line of ``text`` holds whole, rows checked)."""
    wanted = [(_norm(label), " ".join(figs)) for f, label, figs in ROWS if f == file]
    lines = [_norm(line) for line in text.split("\n")]
    ok = sum(1 for label, figs in wanted if any(line.startswith(label) and f"{label} {figs}" in line for line in lines))
    return ok, len(wanted)


def file_pages(path: Path) -> int:
    if path.suffix.lower() == ".pdf":
        from pypdf import PdfReader

        return len(PdfReader(str(path)).pages)
    from finspace.documents import html

    return len(html.convert(path, path.name, _limits())[0])


def _limits():
    from finspace.documents.limits import DocumentLimits

    return DocumentLimits()


def measure(files: list[Path], rounds: int, count) -> list[dict]:
    from finspace.documents import html, pdf

    readers = {
        "before": {
            ".pdf": module_at(BASE, "pdf.py", "pdf_before").convert,
            ".html": module_at(BASE, "html.py", "html_before").convert,
        },
        "after": {".pdf": pdf.convert, ".html": html.convert},
    }
    rows = []
    for path in files:
        kind, total = path.suffix.lower(), file_pages(path)
        row = {"file": path.name, "kind": kind, "total": total}
        for side, by_kind in readers.items():
            best, cpu, pages, notes = math.inf, math.inf, [], ()
            for _ in range(rounds):
                t0, c0 = time.perf_counter(), time.process_time()
                pages, notes = by_kind[kind](path, path.name, _limits())
                best, cpu = min(best, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
            text = "\n\n".join(f"[{label}]\n{body}" for label, body in pages)
            row[side] = {
                "s": best,
                "cpu": cpu,
                "read": len(pages),
                "tokens": count(text),
                "rows": rows_intact(path.name, text),
                "notes": notes,
            }
        b, a = row["before"], row["after"]
        rows.append(row)
        print(
            f"{path.name:<28} {total:>4} pages | ms/page {1000 * b['s'] / b['read']:7.1f} -> "
            f"{1000 * a['s'] / a['read']:6.1f} ({(a['s'] / a['read']) / (b['s'] / b['read']):.3f}x), cpu "
            f"{1000 * b['cpu'] / b['read']:6.1f} -> {1000 * a['cpu'] / a['read']:5.1f} | read "
            f"{b['read']:>3} -> {a['read']:>3} of {total:>3} | rows {b['rows'][0]}/{b['rows'][1]} -> "
            f"{a['rows'][0]}/{a['rows'][1]} | tokens {b['tokens']:>7,} -> {a['tokens']:>7,} "
            f"({a['tokens'] / b['tokens']:.3f})",
            flush=True,
        )
    return rows


def summary(rows: list[dict], side: str, kind: str) -> dict:
    part = [r for r in rows if r["kind"] == kind]
    read = sum(r[side]["read"] for r in part)
    return {
        "ms": 1000 * sum(r[side]["s"] for r in part) / max(1, read),
        "cpu": 1000 * sum(r[side]["cpu"] for r in part) / max(1, read),
        "read": read,
        "total": sum(r["total"] for r in part),
        "ok": sum(r[side]["rows"][0] for r in part),
        "checked": sum(r[side]["rows"][1] for r in part),
        "tokens": sum(r[side]["tokens"] for r in part),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated parts of file names to keep")
    args = ap.parse_args(argv)
    folder = shared_filings()
    files = sorted(p for p in folder.glob("*") if p.suffix.lower() in (".html", ".pdf"))
    if args.only:
        files = [p for p in files if any(part in p.name for part in args.only.split(","))]
    if not files:
        print(f"no filings in {folder}: see shared/filings/SOURCES.md", file=sys.stderr)
        return 2
    count, which = token_counter()
    print(f"{len(files)} filings in {folder}; before = {BASE}; tokens by {which}; {args.rounds} round(s), best kept")
    rows = measure(files, args.rounds, count)
    for kind in (".html", ".pdf"):
        b, a = summary(rows, "before", kind), summary(rows, "after", kind)
        if b["read"]:
            print(
                f"{kind[1:]}: ms/page {b['ms']:.1f} -> {a['ms']:.1f} ({a['ms'] / b['ms']:.3f}x), cpu {b['cpu']:.1f} "
                f"-> {a['cpu']:.1f} ({a['cpu'] / b['cpu']:.3f}x); pages read "
                f"{b['read']}/{b['total']} -> {a['read']}/{a['total']}; rows intact {b['ok']}/{b['checked']} -> "
                f"{a['ok']}/{a['checked']}; tokens {a['tokens'] / b['tokens']:.3f} of before"
            )
    h, b, a = summary(rows, "after", ".html"), summary(rows, "before", ".pdf"), summary(rows, "after", ".pdf")
    hb = summary(rows, "before", ".html")
    print(
        f"before: filings_pdf_ms_per_page={b['cpu']:.1f} (wall {b['ms']:.1f}) pdf_pages_read={b['read']}/{b['total']}"
        f" rows_intact={b['ok']}/{b['checked']}; filings_html_ms_per_page={hb['cpu']:.1f} (wall {hb['ms']:.1f}) -> "
        f"{h['cpu']:.1f} (wall {h['ms']:.1f}) after; pdf wall after {a['ms']:.1f}"
    )
    print(
        f"filings_pdf_ms_per_page={a['cpu']:.1f} pdf_pages_read={a['read']}/{a['total']} "
        f"rows_intact={a['ok']}/{a['checked']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
