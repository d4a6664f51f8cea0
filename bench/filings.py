"""Real filings converted: seconds per page and tokens per filing, today's converter against the one before.

    .venv/bin/python bench/filings.py [--rounds 1] [--only aapl,APPLE] [--no-recall]

Over every filing in ``../shared/filings`` (or ``$FINSPACE_SHARED_DIR/filings``; SOURCES.md there): 8 EDGAR HTML
and 6 PDF. Each filing is converted by both converters side by side, in one process, before then after, for
``--rounds`` rounds (the best time of each is kept: noise only ever slows a run):

* **before**: ``finspace.documents.convert`` as it was at commit ``BASE`` (one page per HTML filing, tables with
  spacer cells; PDF in pypdf's plain mode), read with ``git show`` into a temporary module;
* **after**: ``finspace.documents.convert`` now (pages at CSS page breaks, tables cleaned; PDF in layout mode,
  columns as tabs). The conversion's time bound is lifted here, so both read every page.

Per filing: seconds per page (the filing's pages: the PDF's, or the HTML's page breaks + 1, the same divisor for
both), tokens of the whole converted text (SmolLM2's tokenizer when ``data/models/smollm2-*/tokenizer.json`` is
there, else the ``demo`` model's tokenizer; the output says which), and the ratios after / before.

Recall: when ``bench/filings_recall.py`` is there (branch ``verify``), its ``recall()`` gives retrieval recall of
the page holding a known figure at 4k, 8k and 32k tokens, before and after; else ``nan``.

Last line: ``filings_recall_at_8k=R tokens_after_over_before=T convert_s_per_page=S`` (T: all filings' tokens
after / before; S: after, all seconds / all pages). The line before it gives ``convert_s_per_page_before``.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
BASE = "83be4a8"  # the last commit with the one-page HTML / plain-mode PDF converter


def shared_filings() -> Path:
    return Path(os.environ.get("FINSPACE_SHARED_DIR") or ROOT.parent / "shared") / "filings"


def old_converter():
    """``convert`` as it was at BASE, from git, as a module of its own."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BASE}:src/finspace/documents/convert.py"],
                            check=True, capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="finspace-bench-"))
    path = folder / "convert_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("convert_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["convert_before"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module.convert


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


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def measure(files: list[Path], rounds: int, count) -> list[dict]:
    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits

    before = old_converter()
    limits = DocumentLimits(convert_timeout_s=1e9, max_chars=10**9)
    rows = []
    for path in files:
        tb = ta = math.inf
        for _ in range(rounds):
            t, doc_b = timed(before, path, path.name, limits)
            tb = min(tb, t)
            t, doc_a = timed(convert, path, path.name, limits)
            ta = min(ta, t)
        pages = len(doc_a.pages)
        row = {"file": path.name, "pages": pages, "before_s": tb, "after_s": ta,
               "before_tokens": count(doc_b.text), "after_tokens": count(doc_a.text),
               "before_pages": len(doc_b.pages), "notes": doc_a.notes}
        rows.append(row)
        print(f"{row['file']:<28} {pages:>4} pages ({row['before_pages']:>3} before)  "
              f"s/page {tb / pages:.3f} -> {ta / pages:.3f} ({ta / tb:.2f}x)  "
              f"tokens {row['before_tokens']:>7,} -> {row['after_tokens']:>7,} "
              f"({row['after_tokens'] / row['before_tokens']:.3f})", flush=True)
    return rows


def recall_line() -> tuple[float, str]:
    """R (after, at 8k) and a line for each budget, or nan and why."""
    if not (Path(__file__).resolve().parent / "filings_recall.py").is_file():
        return math.nan, "recall: bench/filings_recall.py is not here (branch verify): nan"
    try:
        from filings_recall import recall

        r = recall(budgets=(4000, 8000, 32000))
    except Exception as exc:  # noqa: BLE001 - the other half's bench failing must not hide these figures
        return math.nan, f"recall: bench/filings_recall.py failed ({type(exc).__name__}: {exc}): nan"
    lines = [f"recall at {b // 1000}k: before {r['before'][b]:.3f} after {r['after'][b]:.3f}"
             for b in (4000, 8000, 32000)]
    return float(r["after"][8000]), "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated parts of file names to keep")
    ap.add_argument("--no-recall", action="store_true")
    args = ap.parse_args(argv)
    folder = shared_filings()
    files = sorted(p for p in folder.glob("*") if p.suffix.lower() in (".html", ".pdf"))
    if args.only:
        files = [p for p in files if any(part in p.name for part in args.only.split(","))]
    if not files:
        print(f"no filings in {folder}: see shared/filings/SOURCES.md", file=sys.stderr)
        return 2
    count, which = token_counter()
    print(f"{len(files)} filings in {folder}; tokens by {which}; {args.rounds} round(s), best time kept")
    rows = measure(files, args.rounds, count)
    for kind in (".html", ".pdf"):
        part = [r for r in rows if r["file"].lower().endswith(kind)]
        if part:
            pages = sum(r["pages"] for r in part)
            print(f"{kind[1:]}: {len(part)} filings, {pages} pages: s/page {sum(r['before_s'] for r in part) / pages:.3f}"
                  f" -> {sum(r['after_s'] for r in part) / pages:.3f}; tokens "
                  f"{sum(r['after_tokens'] for r in part) / sum(r['before_tokens'] for r in part):.3f} of before")
    r8, lines = (math.nan, "recall: skipped (--no-recall): nan") if args.no_recall else recall_line()
    print(lines)
    pages = sum(r["pages"] for r in rows)
    ratio = sum(r["after_tokens"] for r in rows) / sum(r["before_tokens"] for r in rows)
    print(f"convert_s_per_page_before={sum(r['before_s'] for r in rows) / pages:.4f}")
    print(f"filings_recall_at_8k={r8:.3f} tokens_after_over_before={ratio:.3f} "
          f"convert_s_per_page={sum(r['after_s'] for r in rows) / pages:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
