"""The score desk and its run (finspace.scoreboard.desk, .run) over the engine seam: an engine that answers with the
gold (so a right answer is scored right: the pipeline can say 1.0, not only ~0), one that answers wrong, one
that refuses long prompts, one that never finishes some items (Cancel). The real Service, catalogue, TAT-QA
items, scorer and results folder; only the engine's four members the desk uses (chat_parts, entry,
max_model_len, health) are scripted. The real engine runs in tests/test_evals_app.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from finspace.models.catalog import load_catalog
from finspace.engine import Engine
from finspace.engine.records import Health
from finspace.errors import BadInput, EvalRunning, SwitchInProgress, Unauthorized
from finspace.host.gpu import MemoryMonitor
from finspace.service import Service
from finspace.settings import Settings
from support.evalsets import place_in

TOKEN = "s3cret-token-123456"


class Scripted(Engine):
    """The four engine members the desk uses; ``answer(question, gold)`` writes the reply (None: never ends)."""

    def __init__(self, catalog, answer, *, longest: int | None = None, state: str = "ready"):
        super().__init__(catalog, MemoryMonitor(nvml=None))
        self.answer, self.longest, self.state = answer, longest, state
        self.golds: dict[str, dict] = {}
        self.in_flight = self.most = 0
        self.prompts: list[int] = []

    @property
    def entry(self):
        return self.catalog.get("demo")

    @property
    def max_model_len(self) -> int:
        return 2048

    def health(self) -> Health:
        return Health(self.state, "demo", "Demo", 1.0, None, None, None, None, True, 0, None, 0, "cpu")

    async def chat_parts(self, messages, settings=None, info=None):
        user = messages[-1]["content"]
        if self.longest is not None and len(user) > self.longest:
            raise BadInput(f"your last message is {len(user)} tokens; the limit is {self.longest}")
        self.prompts.append(len(user))
        question = user.split("Question: ", 1)[1].split("\n", 1)[0]
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.05)  # every item is in the engine before the first ends
            reply = self.answer(question, self.golds[question])
            if reply is None:
                await asyncio.Event().wait()
            info.output_tokens = len(reply.split())
            yield "", reply
        finally:
            self.in_flight -= 1


def gold_reply(_question: str, gold: dict) -> str:
    """The gold, written as TAT-QA's scorer reads it (tests/test_eval_scoring.py: every gold scores itself)."""
    answer = "; ".join(gold["answer"]) if isinstance(gold["answer"], list) else str(gold["answer"])
    scale = {"percent": "%", "": ""}.get(gold["scale"], " " + gold["scale"])
    plain = gold["answer_type"] == "span" and not answer[:1].isdigit() and answer[:1] not in "$-("
    return f"Let me see.\nAnswer: {answer}{'' if plain else scale}"


@pytest.fixture
def make(tmp_path):
    place_in(tmp_path / "data")
    from finspace.scoreboard.sets import load_set

    items = load_set("tatqa", data_dir=tmp_path / "data").items
    catalog = load_catalog()

    def build(answer, **kw):
        engine = Scripted(catalog, answer, **kw)
        engine.golds = {i.question: i.gold for i in items}
        svc = Service(
            engine, catalog, engine.monitor, settings=Settings(data_dir=str(tmp_path / "data"), admin_token=TOKEN)
        )
        return svc, engine

    return build


async def test_gold_answers_score_one_and_every_item_is_in_the_engine_at_once(make, tmp_path):
    svc, engine = make(gold_reply)
    job = await svc.scoreboard.start("tatqa", 20, token=TOKEN)
    p = await svc.scoreboard.wait(job)
    assert p["state"] == "done" and p["score"] == 1.0 and p["n"] == 20 and not p["partial"]
    assert engine.most == 20  # all submitted together: vLLM batches them
    full = json.loads((tmp_path / "data" / "scores" / p["file"]).read_text())
    assert full["correct"] == 20 and full["errors"] == 0 and full["summary"]
    assert all(i["correct"] and i["answer"].startswith("Let me see.") and i["extracted"] for i in full["items"])
    board = svc.scoreboard.board()
    assert board["results"][0]["file"] == p["file"] and board["running"] is None
    from finspace.ui import scoreboard_tab, views

    assert views.latest_line(svc, "demo").startswith("Scoreboard: tatqa 100.0% (n=20, ")  # the picker's line
    assert views.latest_line(svc, "smollm2-135m") == ""
    row = scoreboard_tab.board_rows(board["results"])[0]
    assert row[:4] == ["demo", "tatqa", 100.0, 20] and row[-1] == p["file"]
    assert scoreboard_tab.chart_frame(board["results"]).to_dict("records") == [
        {"model": "demo", "set": "tatqa", "score %": 100.0}
    ]


async def test_wrong_answers_score_zero_and_a_long_prompt_is_asked_again_with_less_context(make, tmp_path):
    svc, engine = make(lambda q, g: "Answer: 987654321", longest=1600)
    p = await svc.scoreboard.wait(await svc.scoreboard.start("tatqa", 20, token=TOKEN))
    full = json.loads((tmp_path / "data" / "scores" / p["file"]).read_text())
    assert p["score"] == 0.0 and full["errors"] == 0 and max(engine.prompts) <= 1600
    budgets = {i["context_chars"] for i in full["items"]}
    assert full["context_chars"] in budgets and len(budgets) > 1  # some were asked again with half the context


async def test_an_item_that_never_fits_is_an_error_and_the_run_completes(make, tmp_path):
    svc, engine = make(gold_reply, longest=10)
    p = await svc.scoreboard.wait(await svc.scoreboard.start("tatqa", 5, token=TOKEN))
    full = json.loads((tmp_path / "data" / "scores" / p["file"]).read_text())
    assert p["state"] == "done" and full["errors"] == 5 and full["n"] == 5 and full["score"] == 0.0
    assert all("limit is 10" in i["error"] and i["context_chars"] == full["context_chars"] // 4 for i in full["items"])


async def test_cancel_keeps_the_finished_items_partial_and_no_switch_meanwhile(make, tmp_path):
    order = {}
    svc, engine = make(lambda q, g: None if order.setdefault(q, len(order)) % 2 else gold_reply(q, g))
    job = await svc.scoreboard.start("tatqa", 20, token=TOKEN)
    while job.run.done < 10:
        await asyncio.sleep(0.02)
    with pytest.raises(EvalRunning, match="wait for it to finish or cancel it"):
        svc.start_load("demo")
    with pytest.raises(EvalRunning, match="already going"):
        await svc.scoreboard.start("tatqa", 3, token=TOKEN)
    with pytest.raises(Unauthorized):
        await svc.scoreboard.cancel(token="wrong")
    p = await svc.scoreboard.cancel(token=TOKEN)
    assert p["state"] == "cancelled" and p["partial"] is True and p["n"] == 10 and p["score"] == 1.0
    full = json.loads((tmp_path / "data" / "scores" / p["file"]).read_text())
    assert full["partial"] is True and full["total"] == 20 and len(full["items"]) == 10
    assert engine.in_flight == 0  # the unfinished requests were cancelled


async def test_a_run_is_refused_without_the_token_while_switching_or_for_an_unknown_set(make):
    svc, engine = make(gold_reply, state="switching")
    with pytest.raises(Unauthorized, match="a Scoreboard run on this Space needs the admin token"):
        await svc.scoreboard.start("tatqa", 5)
    with pytest.raises(SwitchInProgress, match="wait for it to finish, then start the run"):
        await svc.scoreboard.start("tatqa", 5, token=TOKEN)
    with pytest.raises(BadInput, match="unknown set 'x'"):
        await svc.scoreboard.start("x", 5, token=TOKEN)
    with pytest.raises(BadInput, match=r"limit must be a whole number of items in \[1, 500\]"):
        await svc.scoreboard.start("tatqa", 10**6, token=TOKEN)
    assert svc.scoreboard.job is None and not svc.scoreboard.running


async def test_a_run_going_at_shutdown_is_stored_partial(make, tmp_path):
    order = {}
    svc, engine = make(lambda q, g: None if order.setdefault(q, len(order)) >= 3 else gold_reply(q, g))
    job = await svc.scoreboard.start("tatqa", 8, token=TOKEN)
    while job.run.done < 3:
        await asyncio.sleep(0.02)
    await svc.close()
    full = json.loads((tmp_path / "data" / "scores" / job.file).read_text())
    assert full["partial"] is True and full["n"] == 3 and full["errors"] == 0 and engine.in_flight == 0


def test_a_placed_file_of_other_items_is_not_labelled_as_the_published_set(tmp_path):
    """The version names the published split and commit only when the items are the published ones (their
    sha256 is known for TAT-QA's default 50): the tests' own items say they are a file of other items."""
    from finspace.scoreboard.sets import load_set
    from support.evalsets import made_tatqa

    made_tatqa(tmp_path / "tatqa" / "tatqa_dataset_dev.json")
    version = load_set("tatqa", evalsets_dir=tmp_path).version
    assert version.startswith("tatqa file tatqa_dataset_dev.json (not the published dev@870accc items) first-50 "), (
        version
    )
    assert load_set("tatqa", evalsets_dir=tmp_path, limit=5).version.startswith(
        "tatqa file tatqa_dataset_dev.json (not"
    )
