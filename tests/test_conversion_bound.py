"""A document's conversion is bounded by its pages, not only by the whole file's bound (issue 33, finding 4): the
converter child says how many pages a PDF has before it reads them, and a PDF of a few pages that makes the
parser spin is stopped after its pages' bound, long before FINSPACE_DOCUMENT_TIMEOUT_S."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest

from finspace.documents.limits import DocumentLimits
from finspace.documents.upload import convert_upload
from finspace.errors import BadInput
from support.slow_pdf import slow_pdf


def test_the_bound_grows_with_the_pages_up_to_the_whole_files():
    lim = DocumentLimits()
    assert lim.convert_bound_s(None) == lim.convert_timeout_s
    assert lim.convert_bound_s(2) == pytest.approx(lim.convert_base_s + 2 * lim.convert_page_s)
    assert lim.convert_bound_s(10_000) == lim.convert_timeout_s


def test_a_short_pdf_that_spins_is_stopped_by_its_pages_bound(tmp_path):
    lim = replace(DocumentLimits(), convert_timeout_s=240.0)
    folder = tmp_path / "uploads"
    folder.mkdir()
    # a quick one first, under the whole-file bound: what a 2-page PDF takes on this machine now, the baseline
    t0 = time.monotonic()
    doc = asyncio.run(
        convert_upload(str(slow_pdf(folder / "quick.pdf", pages=2, operators=40)), "quick.pdf", lim, str(folder))
    )
    quick = time.monotonic() - t0
    assert len(doc.pages) == 2
    # 2 pages, each drawing 400,000 operators: minutes of extraction, bounded by its pages at a few times the
    # quick one's whole time
    lim = replace(lim, convert_base_s=2 * quick, convert_page_s=quick)
    spin = slow_pdf(folder / "spin.pdf", pages=2, operators=400_000)
    t0 = time.monotonic()
    with pytest.raises(
        BadInput, match=r"took longer than [0-9.]+ s, the limit for its 2 pages \(FINSPACE_DOCUMENT_PAGE_S\)"
    ):
        asyncio.run(convert_upload(str(spin), "spin.pdf", lim, str(folder)))
    took = time.monotonic() - t0
    assert took < 6 * quick + lim.convert_timeout_s / 4, f"stopped after {took:.1f} s (a quick PDF: {quick:.1f} s)"
    assert not spin.exists()
