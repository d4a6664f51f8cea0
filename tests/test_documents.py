"""finspace.documents without an engine: conversion of generated files, every refusal, passages and BM25,
the prompt's document block, the fit against the catalogue, and the converter process (time bound, deletion)."""

from __future__ import annotations

import asyncio
import dataclasses
import zipfile

import pytest

import documents_gen as gen
from finspace.models.catalog import load_catalog
from finspace.documents import fit, passages
from finspace.documents import placing as prompt
from finspace.documents.convert import Document, Page, convert, markdown_table
from finspace.documents.limits import DocumentLimits
from finspace.documents.upload import convert_upload, inside
from finspace.engine.prompt import ChatSettings, with_system
from finspace.errors import BadInput
from helpers import demo_entry, write_catalog

LIMITS = DocumentLimits()


def words(text: str) -> int:
    return len(text.split())


# ------------------------------------------------------------------ conversion
def test_a_pdf_keeps_its_pages(tmp_path):
    doc = convert(gen.pdf(tmp_path / "r.pdf", pages=5), "r.pdf", LIMITS)
    assert [p.label for p in doc.pages] == [f"page {n}" for n in range(1, 6)]
    for n in range(1, 6):
        assert gen.page_fact(n) in " ".join(doc.pages[n - 1].text.split())
        assert all(gen.page_fact(n) not in p.text for i, p in enumerate(doc.pages) if i != n - 1)
    assert "[page 3]\nPage 3 of the annual report." in doc.text


@pytest.mark.parametrize(
    "make, name, expected",
    [
        (
            lambda p: gen.docx(p / "q.docx"),
            "q.docx",
            [
                "Quarterly review",
                "Revenue rose on strong bond trading.",
                "| Item | USD m |\n| --- | --- |\n| Revenue | 420 |",
                "Outlook: stable.",
            ],
        ),
        (
            lambda p: gen.xlsx(p / "s.xlsx"),
            "s.xlsx",
            ["| Item | 2024 | 2025 |\n| --- | --- | --- |\n| Line 1 | 11 | 12 |"],
        ),
        (
            lambda p: _write(p / "t.csv", "Year,Income\n2025,42\n"),
            "t.csv",
            ["| Year | Income |\n| --- | --- |\n| 2025 | 42 |"],
        ),
        (
            lambda p: _write(p / "f.html", gen.HTML),
            "f.html",
            ["10-K", "Net income was 42 million.", "| Year | Income |\n| --- | --- |\n| 2025 | 42 |"],
        ),
        (lambda p: _write(p / "n.md", "# Notes\n\nEBITDA rose."), "n.md", ["# Notes\n\nEBITDA rose."]),
        (lambda p: _write(p / "n.txt", "plain   text\r\nline two"), "n.txt", ["plain text\nline two"]),
    ],
)
def test_each_type_becomes_text_with_its_tables_in_markdown(tmp_path, make, name, expected):
    doc = convert(make(tmp_path), name, LIMITS)
    for piece in expected:
        assert piece in doc.text, (piece, doc.text)


def test_html_scripts_are_removed_never_run_and_the_page_says_so(tmp_path):
    doc = convert(_write(tmp_path / "f.html", gen.HTML), "f.html", LIMITS)
    assert "alert" not in doc.text and "secret-script" not in doc.text and "color:red" not in doc.text
    assert doc.notes == ("2 scripts removed, never executed",)


def test_an_xlsx_sheet_is_a_page_named_after_it(tmp_path):
    doc = convert(gen.xlsx(tmp_path / "s.xlsx"), "s.xlsx", LIMITS)
    assert [p.label for p in doc.pages] == ["sheet Income"]


def _write(path, text: str | bytes):
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _zip(path, member: str):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, "<x/>")
    return path


# ------------------------------------------------------------------ refusals
BAD = [
    (
        "too large",
        lambda p: gen.pdf(p / "a.pdf", pages=2),
        "a.pdf",
        {"max_bytes": 200},
        r"a\.pdf is 0\.0 MiB; the limit is .* MiB per document",
    ),
    (
        "too many pages",
        lambda p: gen.pdf(p / "a.pdf", pages=5),
        "a.pdf",
        {"max_pages": 3},
        r"a\.pdf has 5 pages; the limit is 3 pages per document",
    ),
    (
        "encrypted",
        lambda p: gen.pdf(p / "a.pdf", password="s3cret"),
        "a.pdf",
        {},
        r"a\.pdf is an encrypted PDF \(it needs a password\)",
    ),
    (
        "corrupt",
        lambda p: _write(p / "a.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage"),
        "a.pdf",
        {},
        r"a\.pdf is not a readable PDF \(corrupt or truncated",
    ),
    (
        "scanned",
        lambda p: gen.pdf(p / "a.pdf", pages=2, text=False),
        "a.pdf",
        {},
        r"a\.pdf has no text layer \(a scanned document\?\); OCR is not supported",
    ),
    (
        "cells",
        lambda p: gen.xlsx(p / "s.xlsx", rows=60, cols=20),
        "s.xlsx",
        {"max_cells": 1000},
        r"s\.xlsx expands past 1,000 table cells, the limit per document",
    ),
    (
        "csv cells",
        lambda p: _write(p / "t.csv", "a,b\n" * 600),
        "t.csv",
        {"max_cells": 1000},
        r"t\.csv expands past 1,000 table cells",
    ),
    (
        "zip bomb",
        lambda p: gen.zip_bomb(p / "s.xlsx"),
        "s.xlsx",
        {"max_unpacked_bytes": 8 << 20},
        r"s\.xlsx unpacks to 64 MiB; the limit is 8 MiB",
    ),
    (
        "text named .pdf",
        lambda p: _write(p / "a.pdf", "just text"),
        "a.pdf",
        {},
        r"a\.pdf is named \.pdf but is not a PDF \(no %PDF header\)",
    ),
    (
        "pdf named .docx",
        lambda p: gen.pdf(p / "a.docx"),
        "a.docx",
        {},
        r"a\.docx is named \.docx but is not an Office file",
    ),
    (
        "xlsx named .docx",
        lambda p: gen.xlsx(p / "a.docx"),
        "a.docx",
        {},
        r"a\.docx is named \.docx but is another kind of zip \(no word/document\.xml\)",
    ),
    ("pdf named .csv", lambda p: gen.pdf(p / "a.csv"), "a.csv", {}, r"a\.csv is named \.csv but holds binary data"),
    ("zip named .html", lambda p: _zip(p / "a.html", "x.txt"), "a.html", {}, r"named \.html but holds binary data"),
    ("not utf-8", lambda p: _write(p / "a.txt", "caf\xe9".encode("latin-1")), "a.txt", {}, r"a\.txt is not UTF-8"),
    ("unknown type", lambda p: _write(p / "a.exe", "MZ"), "a.exe", {}, r"a\.exe: this file type is not supported"),
    ("empty", lambda p: _write(p / "a.txt", b""), "a.txt", {}, r"a\.txt is empty"),
    ("blank text", lambda p: _write(p / "a.txt", "  \n "), "a.txt", {}, r"a\.txt has no text to read"),
    (
        "text too long",
        lambda p: _write(p / "a.txt", "x" * 5000),
        "a.txt",
        {"max_chars": 1000},
        r"a\.txt holds 5,000 characters of text; the limit is 1,000",
    ),
    ("broken docx", lambda p: _zip(p / "a.docx", "word/document.xml"), "a.docx", {}, r"a\.docx is not a readable"),
]


@pytest.mark.parametrize("case, make, name, limits, match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_naming_the_limit_or_reason(tmp_path, case, make, name, limits, match):
    with pytest.raises(BadInput, match=match):
        convert(make(tmp_path), name, dataclasses.replace(LIMITS, **limits))


# ------------------------------------------------------------------ the converter process
def test_an_upload_is_converted_in_a_child_and_deleted_after(tmp_path):
    up = tmp_path / "uploads" / "abc"
    up.mkdir(parents=True)
    path = gen.pdf(up / "r.pdf", pages=2)
    doc = asyncio.run(convert_upload(str(path), "r.pdf", LIMITS, str(tmp_path / "uploads")))
    assert [p.label for p in doc.pages] == ["page 1", "page 2"]
    assert not path.exists() and not up.exists(), "the upload (and its folder) must be gone"


@pytest.mark.parametrize(
    "where, limits, match",
    [
        ("outside", {}, r"must be a file uploaded to this app"),
        ("inside", {"max_pages": 1}, r"r\.pdf has 2 pages; the limit is 1"),
        ("inside", {"convert_timeout_s": 0.01}, r"converting r\.pdf took longer than 0\.01 s, the limit"),
    ],
)
def test_the_child_refuses_and_still_deletes(tmp_path, where, limits, match):
    folder = tmp_path / "uploads"
    (folder / "x").mkdir(parents=True)
    path = gen.pdf((folder / "x" if where == "inside" else tmp_path) / "r.pdf", pages=2)
    with pytest.raises(BadInput, match=match):
        asyncio.run(convert_upload(str(path), "r.pdf", dataclasses.replace(LIMITS, **limits), str(folder)))
    assert path.exists() == (where == "outside"), "an upload is deleted; a file outside the folder is never touched"


@pytest.mark.parametrize(
    "path, expected",
    [
        ("{u}/a/b.pdf", True),
        ("{u}", False),
        ("{u}/../x.pdf", False),
        ("/etc/passwd", False),
        ("{u}x/b.pdf", False),
    ],
)
def test_inside_the_upload_folder_is_by_real_path(tmp_path, path, expected):
    assert inside(path.format(u=tmp_path / "up"), tmp_path / "up") is expected


def test_a_link_out_of_the_upload_folder_is_outside(tmp_path):
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "l.pdf").symlink_to("/etc/passwd")
    assert not inside(tmp_path / "up" / "l.pdf", tmp_path / "up")


# ------------------------------------------------------------------ passages and the prompt
def forty_pages(facts: dict[int, str] | None = None) -> Document:
    return Document(
        "r.pdf",
        "pdf",
        tuple(
            Page(
                f"page {n}",
                "\n".join(
                    [f"Page {n} of the annual report.", (facts or {}).get(n, gen.page_fact(n)), *[gen.FILLER] * 6]
                ),
            )
            for n in range(1, 41)
        ),
    )


def test_passages_keep_their_pages_and_cover_the_document():
    doc = forty_pages()
    parts = passages.split(doc, words=60)
    assert {p.label for p in parts} == {f"page {n}" for n in range(1, 41)}
    assert [p.index for p in parts] == list(range(len(parts)))
    assert all(words(p.text) <= 60 for p in parts)
    assert sum(words(p.text) for p in parts) == sum(words(p.text) for p in doc.pages)


@pytest.mark.parametrize(
    "question, page",
    [
        ("What was the net interest margin of the bank?", 7),
        ("How large was the goodwill impairment?", 23),
    ],
)
def test_bm25_finds_the_page_that_answers(question, page):
    doc = forty_pages(
        {
            7: "The net interest margin of the bank was 3.1 percent.",
            23: "A goodwill impairment of 80 million was booked.",
        }
    )
    chosen = passages.select(passages.split(doc), question, 200, words)
    assert chosen and chosen[0].label == f"page {page}" or any(p.label == f"page {page}" for p in chosen)
    assert sum(words(p.text) + 8 for p in chosen) <= 200
    assert [p.index for p in chosen] == sorted(p.index for p in chosen), "document order"


def test_a_document_that_fits_goes_whole_else_as_passages_with_pages():
    doc = forty_pages({7: "The net interest margin of the bank was 3.1 percent."})
    whole = prompt.prepare(doc, "margin?", 100_000, words)
    assert whole.whole and whole.summary == "document: whole (40 pages)" and "[page 40]" in whole.text
    part = prompt.prepare(doc, "What was the net interest margin?", 400, words)
    assert not part.whole and "[page 7]\nPage 7 of the annual report.\nThe net interest margin" in part.text
    assert words(part.text) <= 400
    assert part.summary.startswith("document: ") and " of 40 pages (" in part.summary


def test_the_document_goes_after_the_system_prompt_before_every_turn():
    entry = load_catalog(write_catalog_for_test()).get("a")
    msgs = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
    ]
    out = with_system(msgs, entry, ChatSettings(document="<document>D</document>"))
    assert out[0] == {"role": "system", "content": "You are a test model.\n\n<document>D</document>"}
    assert out[1:] == msgs
    given = with_system([{"role": "system", "content": "S"}, *msgs], entry, ChatSettings(document="DOC"))
    assert given[0]["content"] == "S\n\nDOC"
    assert with_system(msgs, entry, ChatSettings())[0]["content"] == "You are a test model."


def write_catalog_for_test():
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="finspace-doc-test-"))
    return write_catalog(folder, {"a": demo_entry(folder / "m", "tiny-llama")})


# ------------------------------------------------------------------ fit
MODELS = [
    {"key": "small", "label": "Small", "fits": True, "max_model_len": 4096},
    {"key": "mid", "label": "Mid", "fits": True, "max_model_len": 32768},
    {"key": "long", "label": "Long", "fits": True, "max_model_len": 131072},
    {"key": "huge", "label": "Huge", "fits": False, "max_model_len": 1_000_000},  # does not start here
    {"key": "broken", "label": "Broken", "fits": False, "max_model_len": None},
]


@pytest.mark.parametrize(
    "doc_tokens, fits, holders",
    [
        (1000, True, ["mid", "long"]),
        (20_000, False, ["mid", "long"]),
        (40_000, False, ["long"]),
        (500_000, False, []),
    ],
)
def test_fit_names_the_catalogue_models_whose_planned_context_holds_it(doc_tokens, fits, holders):
    f = fit.check(
        doc_tokens, model_key="small", model_label="Small", max_model_len=4096, reply_tokens=512, models=MODELS
    )
    assert f.fits is fits and [h.key for h in f.holders] == holders


def test_the_fit_table_shows_tokens_verdict_holders_and_the_two_ways_on():
    doc = Document("10-K.pdf", "pdf", (Page("page 1", "x"), Page("page 2", "y")), ("1 script removed, never executed",))
    f = fit.check(20_000, model_key="small", model_label="Small", max_model_len=4096, reply_tokens=512, models=MODELS)
    md = fit.table(f, doc)
    for piece in (
        "| **10-K.pdf** (2 pages, PDF) | 20,000 |",
        "| Small | 4,096 context | **does not fit**",
        "| Mid (`mid`) | 32,768 context | would hold it whole",
        "**Two ways on:** switch to",
        "most relevant passages",
        "*1 script removed, never executed.*",
    ):
        assert piece in md, (piece, md)
    assert "Huge" not in md
    ok = fit.table(
        fit.check(100, model_key="small", model_label="Small", max_model_len=4096, reply_tokens=512, models=MODELS), doc
    )
    assert "**fits**" in ok and "Two ways on" not in ok


def test_markdown_table_pads_and_escapes():
    assert markdown_table([["a", "b|c"], ["1"], ["", ""]]) == "| a | b\\|c |\n| --- | --- |\n| 1 |  |"


# ------------------------------------------------------------------ settings
@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, (20 << 20, 1000, 60.0)),
        (
            {
                "FINSPACE_DOCUMENT_MAX_MIB": "5",
                "FINSPACE_DOCUMENT_MAX_PAGES": "40",
                "FINSPACE_DOCUMENT_TIMEOUT_S": "9.5",
            },
            (5 << 20, 40, 9.5),
        ),
    ],
)
def test_document_limits_come_from_the_environment(env, expected):
    from finspace.settings import Settings

    d = Settings.from_env(env).documents
    assert (d.max_bytes, d.max_pages, d.convert_timeout_s) == expected
    assert d.upload_body_bytes == d.max_bytes + 64 * 1024


@pytest.mark.parametrize(
    "env, match",
    [
        ({"FINSPACE_DOCUMENT_MAX_MIB": "0"}, r"FINSPACE_DOCUMENT_MAX_MIB=0 is out of range"),
        ({"FINSPACE_DOCUMENT_MAX_PAGES": "many"}, r"FINSPACE_DOCUMENT_MAX_PAGES='many' is not a whole number"),
        ({"FINSPACE_DOCUMENT_TIMEOUT_S": "0.1"}, r"FINSPACE_DOCUMENT_TIMEOUT_S=0.1 is out of range"),
    ],
)
def test_bad_document_limits_are_refused(env, match):
    from finspace.settings import Settings

    with pytest.raises(BadInput, match=match):
        Settings.from_env(env)
