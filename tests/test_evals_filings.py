"""FinanceBench's PDFs for the Scoreboard's filing formats (finspace.scoreboard.pdfs), fetched from a fake of its
repository served on 127.0.0.1 (support.financebench; GitHub is unreachable here): fetched once and cached, read
from where the user placed it, and a missing PDF, a file that is not a PDF and no network each a clear message
naming the fix. The formats' checks (FinanceBench only; the tools need a tool parser) on the desk. The real run on
SmolLM2 is in tests/test_evals_app.py."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from finspace.errors import BadInput, DataUnavailable
from finspace.scoreboard import pdfs
from support.filings import filing
from support.financebench import APPLE, JSONL, MISSING, NOT_PDF, Mirror, mirror


@pytest.fixture
def repo(tmp_path):
    filing("APPLE_2015_10K.pdf")  # skipped, naming the folder, without ../shared/filings
    served = Mirror(mirror(tmp_path / "repo"))
    yield served
    served.stop()


def test_a_questions_pdf_is_fetched_once_then_read_from_the_cache(repo, tmp_path):
    data = tmp_path / "data"
    first = pdfs.pdf_path(APPLE, data, base_url=repo.url, timeout_s=5)
    assert first == data / "evals" / "financebench-pdfs" / f"{APPLE}.pdf"
    assert first.read_bytes() == filing("APPLE_2015_10K.pdf").read_bytes()
    assert repo.asked == {f"/pdfs/{APPLE}.pdf": 1}
    assert pdfs.pdf_path(APPLE, data, base_url=repo.url, timeout_s=5) == first
    assert repo.asked == {f"/pdfs/{APPLE}.pdf": 1}, "the second read asked the network again"


def test_a_placed_pdf_is_read_where_the_user_put_it_without_the_network(tmp_path):
    placed = tmp_path / "evalsets" / "financebench" / "pdfs" / f"{APPLE}.pdf"
    placed.parent.mkdir(parents=True)
    placed.write_bytes(filing("APPLE_2015_10K.pdf").read_bytes())
    assert (
        pdfs.pdf_path(
            APPLE,
            tmp_path / "data",
            evalsets_dir=tmp_path / "evalsets",
            base_url=f"http://127.0.0.1:{_refused_port()}",
            timeout_s=2,
        )
        == placed
    )


def test_a_missing_pdf_and_a_file_that_is_not_a_pdf_are_refused_with_the_fix(repo, tmp_path):
    data = tmp_path / "data"
    with pytest.raises(DataUnavailable) as missing:
        pdfs.pdf_path(MISSING, data, base_url=repo.url, timeout_s=5)
    text = str(missing.value)
    assert f"{MISSING}.pdf could not be fetched from GitHub (HTTP 404: not at the pinned commit)" in text, text
    assert f"evalsets/financebench/pdfs/{MISSING}.pdf" in text and "patronus-ai/financebench" in text, text
    assert not getattr(missing.value, "unreachable", True)  # the file, not the network: other PDFs are tried
    with pytest.raises(BadInput, match=f"{NOT_PDF}.pdf: what was fetched is not a PDF"):
        pdfs.pdf_path(NOT_PDF, data, base_url=repo.url, timeout_s=5)
    assert not pdfs.cached(NOT_PDF, data).exists(), "a fetched non-PDF stays cached"
    with pytest.raises(BadInput, match="does not name one of FinanceBench's PDFs"):
        pdfs.pdf_path("../../etc/passwd", data, base_url=repo.url)
    assert set(repo.asked) == {f"/pdfs/{MISSING}.pdf", f"/pdfs/{NOT_PDF}.pdf"}


def test_no_network_is_a_message_naming_where_to_place_the_pdf(tmp_path):
    with pytest.raises(DataUnavailable) as err:
        pdfs.pdf_path(APPLE, tmp_path, base_url=f"http://127.0.0.1:{_refused_port()}", timeout_s=2)
    assert err.value.unreachable and "could not be fetched from GitHub" in str(err.value)
    assert f"place it as evalsets/financebench/pdfs/{APPLE}.pdf" in str(err.value)
    assert pdfs.remote(APPLE).url == (
        "https://raw.githubusercontent.com/patronus-ai/financebench/"
        "cc39aeb4afdf33909ee1412188bf89035950c2eb/pdfs/APPLE_2015_10K.pdf"
    )


def test_the_open_set_is_read_from_the_same_mirror_at_the_pinned_commit(repo, tmp_path):
    from finspace.scoreboard.sets import load_set

    loaded = load_set("financebench", data_dir=tmp_path / "data", base_url=repo.url, timeout_s=5)
    assert [i.meta["doc_name"] for i in loaded.items] == [APPLE, MISSING, NOT_PDF]
    assert loaded.version.startswith("financebench open_source@cc39aeb first-3 "), loaded.version
    assert repo.asked == {"/" + JSONL: 1}


def test_the_filing_formats_are_financebenchs_and_the_tools_need_a_tool_parser(tmp_path):
    from finspace.engine import Engine
    from finspace.host.gpu import MemoryMonitor
    from finspace.models.catalog import load_catalog
    from finspace.service import Service
    from finspace.settings import Settings

    catalog = load_catalog()

    class NoTools(Engine):
        @property
        def entry(self):
            return dataclasses.replace(catalog.get("demo"), tool_parser=None)

    svc = Service(
        NoTools(catalog, MemoryMonitor(nvml=None)),
        catalog,
        MemoryMonitor(nvml=None),
        settings=Settings(data_dir=str(tmp_path)),
    )
    with pytest.raises(BadInput, match="only FinanceBench's questions name; run it on financebench"):
        svc.scoreboard._check_format("finspace-eval-v1+filing", "tatqa")
    assert svc.scoreboard._check_format("finspace-eval-v1+filing", "financebench") == "finspace-eval-v1+filing"
    with pytest.raises(
        BadInput,
        match=r"call the filing tools, and 'demo' has no tool parser .*run "
        r"finspace-eval-v1\+filing \(the passages\)",
    ):
        svc.scoreboard._check_format("finspace-eval-v1+filing-tools", "financebench")


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_once_github_is_unreachable_a_runs_other_filings_fail_at_once_with_the_same_fix(tmp_path):
    import asyncio
    from types import SimpleNamespace

    from finspace.scoreboard.filings import Filings
    from finspace.scoreboard.formats import EvalItem
    from finspace.settings import Settings

    items = [EvalItem(f"q{i}", "?", "", "1", {"doc_name": doc}) for i, doc in enumerate((APPLE, MISSING, APPLE))]
    held = Filings(
        SimpleNamespace(settings=Settings()),
        items,
        tmp_path,
        timeout_s=2,
        base_url=f"http://127.0.0.1:{_refused_port()}",
    )

    async def go():
        with pytest.raises(DataUnavailable) as first:
            await held.acquire(APPLE)
        assert first.value.unreachable
        with pytest.raises(
            DataUnavailable, match=f"{MISSING}.pdf was not fetched: {APPLE}.pdf could not be fetched from GitHub"
        ):
            await held.acquire(MISSING)
        with pytest.raises(DataUnavailable):  # the same filing's next question: its error, not a second fetch
            await held.acquire(APPLE)
        for item in items:
            held.release(item.meta["doc_name"])

    asyncio.run(go())


def test_a_run_converts_one_filing_at_a_time_holds_at_most_four_and_every_question_gets_its_own():
    """Questions of six filings, interleaved, all asked at once (as a run asks them): each gets its filing, converted
    once; never more than AT_ONCE held (a filing is let go after its last question), and none waits forever on
    a filing whose questions are queued behind it."""
    import asyncio
    from types import SimpleNamespace

    from finspace.scoreboard import filings
    from finspace.scoreboard.formats import EvalItem

    names = [f"DOC{i}_2020_10K" for i in range(6)]
    items = [EvalItem(f"q{n}", "?", "", "1", {"doc_name": names[n % 6]}) for n in range(30)]
    held = filings.Filings(SimpleNamespace(), items, ".")
    converted, most = [], [0]

    async def convert(name):
        assert held._converting == name and len(held._held) < filings.AT_ONCE
        converted.append(name)
        await asyncio.sleep(0.01)
        return name

    held._convert = convert

    async def one(item):
        name = item.meta["doc_name"]
        try:
            got = await held.acquire(name)
            most[0] = max(most[0], len(held._held))
            await asyncio.sleep(0.005)
            return got
        finally:
            held.release(name)

    async def everyone():
        return await asyncio.wait_for(asyncio.gather(*(one(i) for i in items)), 20)

    got = asyncio.run(everyone())
    assert got == [i.meta["doc_name"] for i in items]
    assert sorted(converted) == names and most[0] <= filings.AT_ONCE and held._held == {}


def test_an_asked_items_reply_is_scored_with_its_document_and_notes_and_a_failure_is_its_error():
    """run_item's filing path (the asker: finspace.scoreboard.filings.ask in a run): the reply scored as FinanceBench's,
    the pages given and the usage line's notes kept; a filing that can't be had is the item's error."""
    import asyncio

    from finspace.engine.records import ChatInfo
    from finspace.scoreboard import asking as eval_prompt
    from finspace.scoreboard import score as eval_score
    from finspace.scoreboard.formats import EvalItem
    from finspace.scoreboard.run import item_settings, run_item

    item = EvalItem("q1", "Apple's FY2015 total net sales?", "", "$233715.00", {"doc_name": APPLE})

    async def asker(it):
        if it.id == "bad":
            raise DataUnavailable(f"{MISSING}.pdf could not be fetched from GitHub (HTTP 404)")
        info = ChatInfo(output_tokens=9)
        info.notes.append("tools stopped: a tool call was cut at max tokens")
        return "Total net sales were $233,715 million.\nAnswer: $233,715 million", info, "document: 5 of 84 pages"

    def one(it):
        return asyncio.run(
            run_item(
                None,
                "financebench",
                it,
                item_settings(None, 48),
                context_chars=3000,
                prompt_mod=eval_prompt,
                score_mod=eval_score,
                asker=asker,
            )
        )

    got = one(item)
    assert got.correct and not got.refused and got.error is None and got.output_tokens == 9
    assert got.document == "document: 5 of 84 pages" and got.notes == (
        "tools stopped: a tool call was cut at max tokens",
    )
    bad = one(dataclasses.replace(item, id="bad"))
    assert bad.error.startswith(f"{MISSING}.pdf could not be fetched") and not bad.correct and bad.answer == ""
