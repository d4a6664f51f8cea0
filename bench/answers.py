"""Does the model see the page that answers? One-shot passages against the filing tools, at the same token budget.

    .venv/bin/python bench/answers.py [--budget 1536] [--questions tests/data/answer_questions.yaml] [--each]

Model-free. Each question of ``tests/data/answer_questions.yaml`` (41 questions written for this bench on 13 filings
in ``../shared/filings``: 7 EDGAR HTML with XBRL, 6 PDFs; statements, notes, MD&A and cover-page facts) names the
figure that answers it and the pages that print it. Its filing is converted once (finspace.documents.convert), and
the question is put two ways, each within ``--budget`` tokens (1,536 by default: what SmolLM2's 2,048-token
context leaves a document after a 512-token reply):

- **one-shot** (the baseline, today's chat): the passages ``finspace.documents.passages`` selects for the question
  within the budget, each under its page label;
- **tools**: a fixed policy of the filing tools (finspace.grounding): the filing's ``outline`` (at most
  ``OUTLINE_SHARE`` of the budget), ``search`` for the question (``SEARCH_SHARE``, 5 results), and ``read_page`` of
  the first result's page with what is left (the question as its focus: a page too long shows its part that holds
  the question's words).

The evidence is seen when the page that prints the figure is in what the model is given, with the figure on it
(spaces compared collapsed): a one-shot passage on that page holding it; a search result on that page whose
rendered excerpt holds it, or the page read. Tokens are what each costs, rendered as the model gets it:
SmolLM2's tokenizer when ``data/models/smollm2-*/tokenizer.json`` is there (or ``--tokenizer``), else characters
/ 4 (``finspace.grounding.library.approx_tokens``); the output says which.

Last line: ``answers_evidence_oneshot=A answers_evidence_tools=B tokens_tools_over_oneshot=T``; the lines before it
give each side (the baseline first) and the questions each side missed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "tests" / "data" / "answer_questions.yaml"
OUTLINE_SHARE = 0.2
SEARCH_SHARE = 0.35
LABEL_TOKENS = 8  # a passage's label line and separator, as passages.select counts them
_HEADER = re.compile(r"^\[(?P<doc>\S+) page (?P<page>\d+)[^\]]*\]$", re.MULTILINE)


def shared_dir() -> Path:
    return Path(os.environ.get("FINSPACE_SHARED_DIR") or REPO.parent / "shared")


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    import yaml

    return yaml.safe_load(path.read_text())


def counter(tokenizer: Path | None = None) -> tuple[Callable[[str], int], str]:
    """A token count (remembered per text) and what it counts with."""
    from finspace.grounding.library import approx_tokens

    found = tokenizer or next(iter(sorted((REPO / "data" / "models").glob("smollm2-*/tokenizer.json"))), None)
    if found is None or not Path(found).is_file():
        return approx_tokens, "characters / 4 (no SmolLM2 tokenizer in data/models)"
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(found))
    memo: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in memo:
            memo[text] = len(tk.encode(text, add_special_tokens=False).ids)
        return memo[text]

    return count, f"SmolLM2's tokenizer ({Path(found).parent.name})"


def _flat(text: str) -> str:
    return " ".join(text.split())


def holds(text: str, figure: str) -> bool:
    """``text`` prints ``figure`` (spaces collapsed; not inside a longer number)."""
    return re.search(r"(?<![\d,.])" + re.escape(_flat(figure)) + r"(?![\d]|,\d)", _flat(text)) is not None


@dataclass(frozen=True)
class Seen:
    evidence: bool
    tokens: int
    pages: tuple[int, ...]  # the pages whose text the model was given


def oneshot(doc, q: dict, budget: int, count: Callable[[str], int]) -> Seen:
    from finspace.documents.passages import index_of

    chosen = index_of(doc).select(q["question"], budget, count)
    text = "\n\n".join(f"[{p.label}]\n{p.text}" for p in chosen)
    numbers = {p.label: n for n, p in enumerate(doc.pages, 1)}
    pages = tuple(dict.fromkeys(numbers.get(p.label, 0) for p in chosen))
    evidence = any(numbers.get(p.label) in q["pages"] and holds(p.text, q["figure"]) for p in chosen)
    return Seen(evidence, count(text), pages)


def blocks(rendered: str) -> list[tuple[int, str]]:
    """(page, text) of each result block of a rendered search or page: a block runs from its "[doc page N ...]"
    header to the next."""
    heads = list(_HEADER.finditer(rendered))
    return [
        (int(h["page"]), rendered[h.end() : heads[i + 1].start() if i + 1 < len(heads) else len(rendered)])
        for i, h in enumerate(heads)
    ]


def tools(key: str, doc, q: dict, budget: int, count: Callable[[str], int]) -> Seen:
    from finspace.grounding.lookup import read_page, search
    from finspace.grounding.outline import outline

    lib = {key: doc}
    shown = outline(doc, key).render(int(budget * OUTLINE_SHARE), count)
    found = search(lib, q["question"], key, k=5)
    results = found.render(int(budget * SEARCH_SHARE), count)
    parts = [shown, results]
    if found.hits:
        room = budget - sum(count(p) for p in parts)
        parts.append(read_page(lib, key, found.hits[0].page, max(room, 0), count, focus=q["question"]).render())
    seen = [b for part in parts[1:] for b in blocks(part)]
    evidence = any(page in q["pages"] and holds(text, q["figure"]) for page, text in seen)
    return Seen(evidence, sum(count(p) for p in parts), tuple(dict.fromkeys(p for p, _ in seen)))


def documents(questions: list[dict]) -> dict:
    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits
    from finspace.documents.desk import unique_id

    folder = shared_dir() / "filings"
    out = {}
    for name in dict.fromkeys(q["file"] for q in questions):
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the real filings are in ../shared/filings (SOURCES.md)")
        out[name] = (unique_id(name), convert(path, name, DocumentLimits()))
    return out


def measure(
    budget: int = 1536,
    questions: list[dict] | None = None,
    count: Callable[[str], int] | None = None,
    docs: dict | None = None,
) -> dict:
    """Both sides over the questions: evidence share, mean tokens, and the questions each missed."""
    questions = questions if questions is not None else load_questions()
    count = count or counter()[0]
    docs = docs if docs is not None else documents(questions)
    rows = []
    for q in questions:
        key, doc = docs[q["file"]]
        rows.append((q, oneshot(doc, q, budget, count), tools(key, doc, q, budget, count)))
    n = len(rows)
    out = {"questions": n, "filings": len(docs), "budget": budget, "rows": rows}
    for i, side in ((1, "oneshot"), (2, "tools")):
        out[side] = {
            "evidence": round(sum(r[i].evidence for r in rows) / n, 3),
            "tokens": round(sum(r[i].tokens for r in rows) / n, 1),
            "missed": [r[0]["question"] for r in rows if not r[i].evidence],
        }
    out["tokens_ratio"] = round(out["tools"]["tokens"] / max(out["oneshot"]["tokens"], 1), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=int, default=1536)
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer.json (default: SmolLM2's in data/models)")
    ap.add_argument("--each", action="store_true", help="a line per question")
    args = ap.parse_args(argv)
    count, how = counter(args.tokenizer)
    t = time.perf_counter()
    got = measure(args.budget, load_questions(args.questions), count)
    print(
        f"{got['questions']} questions on {got['filings']} filings, {args.budget:,}-token budget, tokens by {how}, "
        f"{time.perf_counter() - t:.1f} s"
    )
    if args.each:
        for q, one, tl in got["rows"]:
            print(
                f"  {'+' if one.evidence else '-'}{'+' if tl.evidence else '-'} {one.tokens:5} {tl.tokens:5} "
                f"{q['file'][:14]:14} p{q['pages']} {q['question'][:70]} one{list(one.pages)[:6]} "
                f"tools{list(tl.pages)}"
            )
    for side, name in (
        ("oneshot", "one-shot passages (baseline)"),
        ("tools", "filing tools (outline, search, read the best page)"),
    ):
        s = got[side]
        print(f"{name:58} evidence seen {s['evidence']:.3f}  mean tokens {s['tokens']:,.0f}  missed {len(s['missed'])}")
    print(
        f"{'tools / one-shot':58} evidence x{got['tools']['evidence'] / max(got['oneshot']['evidence'], 1e-9):.2f}"
        f"  tokens x{got['tokens_ratio']:.2f}"
    )
    print(
        f"answers_evidence_oneshot={got['oneshot']['evidence']:.3f} "
        f"answers_evidence_tools={got['tools']['evidence']:.3f} tokens_tools_over_oneshot={got['tokens_ratio']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    sys.exit(main())
