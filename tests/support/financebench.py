"""FinanceBench's repository as the Scoreboard's filing formats read it, faked at the edge: a folder laid out as
patronus-ai/financebench is (data/financebench_open_source.jsonl, pdfs/<doc_name>.pdf), served over HTTP by a
server in the test process that counts what it was asked. GitHub can't be reached here, so the app is pointed
at it with FINSPACE_FINANCEBENCH_BASE_URL.

The questions are written in FinanceBench's own schema about a filing that exists in ../shared/filings: Apple's
FY2015 10-K, one of FinanceBench's own PDFs (its total net sales, 233,715 million, printed on page 26). Beside it,
a question whose PDF the repository lacks (a 404) and one whose "PDF" is an HTML page (not a PDF)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from support.filings import filings_dir

APPLE = "APPLE_2015_10K"
MISSING = "MISSING_2020_10K"  # no such PDF: the server answers 404
NOT_PDF = "NOTAPDF_2024_10K"  # an HTML page where the PDF should be
JSONL = "data/financebench_open_source.jsonl"


def record(fid: str, doc: str, question: str, answer: str, page: int, evidence: str) -> dict:
    """One line in FinanceBench's open-set schema."""
    return {
        "financebench_id": fid,
        "company": doc.split("_")[0].title(),
        "doc_name": doc,
        "question_type": "metrics-generated",
        "question_reasoning": "Information extraction",
        "domain_question_num": None,
        "question": question,
        "answer": answer,
        "justification": "The metric total revenue was directly extracted from the company 10K.",
        "dataset_subset_label": "OPEN_SOURCE",
        "evidence": [
            {
                "evidence_text": evidence,
                "doc_name": doc,
                "evidence_page_num": page - 1,
                "evidence_text_full_page": evidence,
            }
        ],
    }


RECORDS = [
    record(
        "financebench_id_90001",
        APPLE,
        "What were Apple's total net sales in FY2015? Answer in USD millions, using the income statement.",
        "$233715.00",
        26,
        "Total net sales 233,715 182,795 170,910",
    ),
    record(
        "financebench_id_90002",
        MISSING,
        "What was the company's FY2020 revenue in USD millions?",
        "$100.00",
        1,
        "Revenue 100",
    ),
    record(
        "financebench_id_90003",
        NOT_PDF,
        "What was the company's FY2024 revenue in USD millions?",
        "$200.00",
        1,
        "Revenue 200",
    ),
]


def mirror(root: Path) -> Path | None:
    """The repository's layout under ``root`` (None when ../shared/filings lacks Apple's 2015 10-K)."""
    apple = filings_dir() / "APPLE_2015_10K.pdf"
    if not apple.is_file():
        return None
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "pdfs").mkdir(parents=True, exist_ok=True)
    (root / JSONL).write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    (root / "pdfs" / f"{APPLE}.pdf").write_bytes(apple.read_bytes())
    (root / "pdfs" / f"{NOT_PDF}.pdf").write_text("<html><body><p>Revenue 200</p></body></html>")
    return root


class Mirror:
    """``root`` served on 127.0.0.1 in a thread; ``asked`` counts each path requested."""

    def __init__(self, root: Path):
        asked: Counter = Counter()

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):  # noqa: N802 - http.server's name
                asked[self.path] += 1
                super().do_GET()

            def log_message(self, *args):
                pass

        self.asked = asked
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
