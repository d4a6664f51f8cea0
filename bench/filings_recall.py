"""Retrieval recall on real filings: does the context hold the page that prints the answer's figure?

    .venv/bin/python bench/filings_recall.py [--budgets 4000 8000 32000] [--questions tests/data/filing_questions.yaml]

Each question of ``tests/data/filing_questions.yaml`` (44 questions on 8 filings in ``../shared/filings``: 4
EDGAR HTML, 4 PDF; revenue, net income, capital expenditure, total assets, and metrics no statement prints)
names a figure and the pages that print it. Its filing is converted (finspace.documents.convert), the passages
for the question are chosen within each token budget, and the question is a hit when a chosen passage is on one
of those pages and holds the figure. Pages are the PDF's pages; for an HTML filing they are the printed page
numbers of its footers ("Apple Inc. | 2024 Form 10-K | 29"): a page label that says "(printed 29)" gives it,
and an HTML filing converted to one page is cut at its footers here.

**before** is main's retrieval as it was (copied below: 160-word passages, tables cut like prose, plain BM25
over the question's words); **after** is finspace.documents.passages (tables whole with their scale line, finance
synonyms and statement titles, a metric's inputs, the statements' own pages first within a share of the budget).

Tokens are counted with SmolLM2's tokenizer when ``data/models/smollm2-*/tokenizer.json`` is there (the CPU
default model: the test suite converts it), else as characters / 3.5; the line says which. ``recall()`` is
imported by bench/filings.py. Last line: ``filings_recall_at_8k=R`` (after); the line before it gives before.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "tests" / "data" / "filing_questions.yaml"
_FOOTER = re.compile(r"^(?:[^|\n][^\n]{0,58}\|\s*)?(\d{1,3})$")  # "Apple Inc. | 2024 Form 10-K | 29", "54"
_PRINTED = re.compile(r"printed (\d+)")


def shared_dir() -> Path:
    import os

    return Path(os.environ.get("FINSPACE_SHARED_DIR") or REPO.parent / "shared")


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    import yaml

    return yaml.safe_load(path.read_text())


def paged(doc):  # -> Document
    """An HTML filing converted to one page, cut at its printed footers ("page 23 (printed 21)"); else as it is."""
    from finspace.documents.convert import Document, Page

    if doc.kind != "html" or len(doc.pages) != 1:
        return doc
    pages, current = [], []
    for line in doc.pages[0].text.split("\n"):
        current.append(line)
        m = _FOOTER.match(line.strip())
        if m and len(line) <= 60:
            pages.append(Page(f"page {len(pages) + 1} (printed {m[1]})", "\n".join(current)))
            current = []
    if current:
        pages.append(Page(f"page {len(pages) + 1}", "\n".join(current)))
    return Document(doc.name, doc.kind, tuple(pages), doc.notes)


def counter(tokenizer: Path | None = None) -> tuple[Callable[[str], int], str]:
    """A token count (remembered per text) and what it counts with."""
    found = tokenizer or next(iter(sorted((REPO / "data" / "models").glob("smollm2-*/tokenizer.json"))), None)
    memo: dict[str, int] = {}
    if found is not None and Path(found).is_file():
        from tokenizers import Tokenizer

        tk = Tokenizer.from_file(str(found))

        def count(text: str) -> int:
            if text not in memo:
                memo[text] = len(tk.encode(text, add_special_tokens=False).ids)
            return memo[text]

        return count, f"SmolLM2's tokenizer ({Path(found).parent.name})"
    return (lambda text: int(len(text) / 3.5)), "characters / 3.5 (no SmolLM2 tokenizer in data/models)"


def page_number(label: str, kind: str) -> int | None:
    if kind == "html":
        m = _PRINTED.search(label)
    else:
        m = re.match(r"page (\d+)", label)
    return int(m[1]) if m else None


def hit(chosen: Sequence, q: dict, kind: str) -> bool:
    """A chosen passage is on one of the question's pages and prints its figure."""
    figure = re.compile(r"(?<![\d,.])" + re.escape(q["figure"]) + r"(?![\d,]\d)")
    return any(page_number(p.label, kind) in q["pages"] and figure.search(p.text) for p in chosen)


# ---------------------------------------------------------------- main's retrieval, as it was (the "before")
def before_split(doc, words: int = 160) -> list:
    from finspace.documents.passages import Passage

    out: list = []
    for page in doc.pages:
        current: list[str] = []
        for para in (p for p in page.text.split("\n") if p.strip()):
            pw = para.split()
            while len(pw) > words:
                if current:
                    out.append(Passage(len(out), page.label, "\n".join(current)))
                    current = []
                out.append(Passage(len(out), page.label, " ".join(pw[:words])))
                pw = pw[words:]
            if current and sum(len(c.split()) for c in current) + len(pw) > words:
                out.append(Passage(len(out), page.label, "\n".join(current)))
                current = []
            if pw:
                current.append(" ".join(pw))
        if current:
            out.append(Passage(len(out), page.label, "\n".join(current)))
    return out


def before_select(passages: Sequence, question: str, budget_tokens: int, count: Callable[[str], int]) -> list:
    import bm25s

    if not passages:
        return []
    corpus = bm25s.tokenize([p.text for p in passages], stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    query = bm25s.tokenize([question], stopwords="en", show_progress=False)
    if not any(len(q) for q in query.ids):
        order = list(range(len(passages)))
    else:
        ids, scores = retriever.retrieve(query, k=len(passages), show_progress=False)
        ranked = sorted(range(len(passages)), key=lambda j: (-float(scores[0][j]), int(ids[0][j])))
        order = [int(ids[0][j]) for j in ranked]
    chosen, used = [], 0
    for i in order:
        cost = count(passages[i].text) + 8
        if used + cost > budget_tokens:
            continue
        chosen.append(passages[i])
        used += cost
    return sorted(chosen, key=lambda p: p.index)


# ---------------------------------------------------------------- the measurement
def documents(questions: Sequence[dict]) -> dict:
    """Each filing the questions name, converted once (and cut at its printed footers when it is one page)."""
    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits

    folder = shared_dir() / "filings"
    out = {}
    for name in dict.fromkeys(q["file"] for q in questions):
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the real filings are in ../shared/filings (SOURCES.md)")
        out[name] = paged(convert(path, name, DocumentLimits()))
    return out


def recall(
    budgets: Sequence[int] = (4000, 8000, 32000),
    *,
    questions: Sequence[dict] | None = None,
    count: Callable[[str], int] | None = None,
    variants: dict | None = None,
    docs: dict | None = None,
) -> dict:
    """Recall of the answer's page at each budget: ``{"before": {budget: r}, "after": {budget: r}, ...}``, plus
    one entry per ``variants`` (name: a passages.Use), and the questions each one missed at each budget."""
    from finspace.documents import passages

    questions = list(questions if questions is not None else load_questions())
    count = count or counter()[0]
    docs = docs if docs is not None else documents(questions)
    uses = {"after": passages.Use(), **(variants or {})}
    indexes = {name: passages.Index.of(doc) for name, doc in docs.items()}
    old_parts = {name: before_split(doc) for name, doc in docs.items()}
    out: dict = {"questions": len(questions), "filings": len(docs), "missed": {}}
    for key in ("before", *uses):
        out[key] = {}
        for budget in budgets:
            missed = []
            for q in questions:
                doc = docs[q["file"]]
                if key == "before":
                    chosen = before_select(old_parts[q["file"]], q["question"], budget, count)
                else:
                    chosen = indexes[q["file"]].select(q["question"], budget, count, uses[key])
                if not hit(chosen, q, doc.kind):
                    missed.append(q["question"])
            out[key][budget] = round(1 - len(missed) / len(questions), 3)
            out["missed"][(key, budget)] = missed
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[4000, 8000, 32000])
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--missed", action="store_true", help="list the questions missed at each budget")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    count, how = counter()
    questions = load_questions(args.questions)
    t = time.perf_counter()
    docs = documents(questions)
    print(
        f"{len(questions)} questions on {len(docs)} filings, converted in {time.perf_counter() - t:.1f} s; "
        f"tokens: {how}"
    )
    t = time.perf_counter()
    r = recall(args.budgets, questions=questions, count=count, docs=docs)
    print(f"measured in {time.perf_counter() - t:.1f} s")
    print(f"{'budget':>8} {'before':>8} {'after':>8}")
    for b in args.budgets:
        print(f"{b:>8} {r['before'][b]:>8.3f} {r['after'][b]:>8.3f}")
        if args.missed:
            for key in ("before", "after"):
                for q in r["missed"][(key, b)]:
                    print(f"    missed {key}: {q}")
    at8 = 8000 if 8000 in args.budgets else args.budgets[0]
    print(" ".join(f"before_at_{b // 1000}k={r['before'][b]:.3f}" for b in args.budgets))
    print(
        " ".join(f"filings_recall_at_{b // 1000}k={r['after'][b]:.3f}" for b in args.budgets if b != at8)
        + f" filings_recall_at_{at8 // 1000}k={r['after'][at8]:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
