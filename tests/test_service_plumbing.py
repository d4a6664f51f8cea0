"""The service's plumbing in-process on the one fake of the engine protocol (tests/support/fake_engine.py): the
fast lane's view of the seam. The same paths run on the real engine in test_smollm, test_documents_app and the
browser tests."""

from __future__ import annotations

import contextlib

import pytest

from finspace.engine.api import EngineAPI
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.host.gpu import MemoryMonitor
from finspace.ledger import Ledger
from finspace.models.catalog import load_catalog
from finspace.scoreboard import result as scoreboard_result
from finspace.service import Service
from finspace.settings import Settings
from support.fake_engine import FakeEngine

NOTE = b"Apple's total net sales were $391,035 million in fiscal 2024."


@pytest.fixture
def svc(tmp_path):
    catalog = load_catalog()
    engine = FakeEngine(catalog.get(catalog.default_key(False)))
    return Service(engine, catalog, MemoryMonitor(nvml=None), settings=Settings(gradio_temp_dir=str(tmp_path)))


def test_provenance_cites_the_ledgers_last_load_of_the_serving_model(tmp_path):
    catalog = load_catalog()
    engine = FakeEngine(catalog.get(catalog.default_key(False)))
    ledger = Ledger(tmp_path / "loads.jsonl")
    settings = Settings(gradio_temp_dir=str(tmp_path))
    empty = Service(engine, catalog, MemoryMonitor(nvml=None), ledger=ledger, settings=settings).provenance()
    assert empty is not None and empty["load_record_id"] is None
    with open(ledger.path, "w") as f:  # a line from before records had ids: cited by its time and model
        f.write(f'{{"model_key": "{engine.entry.key}", "outcome": "ok", "at": 17}}\n')
    prov = Service(engine, catalog, MemoryMonitor(nvml=None), ledger=ledger, settings=settings).provenance()
    assert prov["model_key"] == engine.entry.key and prov["load_record_id"] == f"17.000-{engine.entry.key}"
    # a converted model names its package and file (the export said "local", the Scoreboard the package)
    assert prov["repo"] == engine.entry.source and engine.entry.convert is not None
    # a Scoreboard run cites the same (it had a copy of its own, which cited no record for such a line)
    stored = scoreboard_result.provenance(prov, "cpu")
    assert (stored["load_id"], stored["repo"], stored["model_label"]) == (
        prov["load_record_id"],
        prov["repo"],
        prov["label"],
    )


def test_the_fake_implements_the_engine_protocol(svc):
    assert isinstance(svc.engine, EngineAPI)


async def test_one_method_answers_with_a_document_placed_in_the_prompt(svc):
    att = await svc.documents.attach_bytes("note.txt", NOTE, None)
    info, parts = ChatInfo(), []
    messages = [{"role": "user", "content": "What were total net sales?"}]
    async with contextlib.aclosing(svc.answer(messages, ChatSettings(max_tokens=64), info, documents=[att])) as s:
        async for _thinking, delta in s:
            parts.append(delta)
    assert "".join(parts) == svc.engine.reply
    assert info.documents == "document: whole", info.documents  # the usage phrase: it fits whole
    _sent, settings = svc.engine.sent[-1]
    assert "391,035" in settings.document  # the document went into the prompt
    assert svc.serving.entry is svc.engine.entry and svc.serving.ready


async def test_without_documents_the_settings_go_through_untouched(svc):
    info = ChatInfo()
    async with contextlib.aclosing(svc.answer([{"role": "user", "content": "hi"}], ChatSettings(), info)) as s:
        async for _ in s:
            pass
    assert info.documents is None and svc.engine.sent[-1][1].document is None
