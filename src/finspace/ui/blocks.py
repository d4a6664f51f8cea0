"""The Gradio Blocks: chat, settings, model picker, live memory panel, load history.

Every UI event is private (``api_visibility="private"``); the stable API lives
in finspace.ui.api. The chat streams through async generators (Stop cancels the
event, which closes the engine's stream and aborts the vLLM request), replies
are coalesced to at most one update per ~50 ms, and the chat event's
concurrency limit is raised so concurrent users reach vLLM's batching.
"""

from __future__ import annotations

import asyncio
import html
import logging
from typing import Any

import gradio as gr

from finspace.errors import FinspaceError
from finspace.service import Service
from finspace.ui import views
from finspace.ui.api import register_api
from finspace.ui.chat_panel import MAX_CONVERSATION_CHARS, build_chat  # noqa: F401 - MAX_CONVERSATION_CHARS: tests
from finspace.ui.fit_tab import build_fit_tab
from finspace.ui.edgar_tab import build_edgar_tab, register_edgar_api
from finspace.ui.matrix_tab import CSS as MATRIX_CSS
from finspace.ui.matrix_tab import build_matrix_tab
from finspace.ui.scoreboard_tab import build_scores_tab, register_scores_api

log = logging.getLogger("finspace.ui")

TICK_S = 2.0
# Gradio's queue rebuilds a pandas summary of up to 10,000 past events after every event, in a worker thread,
# for its /monitoring page: 1.3 ms of CPU per event with 1,000 events recorded, 5.5 ms with 10,000, and every
# open page's memory tick (one per TICK_S) is an event. finspace does not use that page: the summary is rebuilt
# every ANALYTICS_EVERY events, over the last ANALYTICS_EVERY (bench/serving.py at 16 and 32 users: 2-3% more
# tokens/s in two A/B pairs, within the noise of one start).
ANALYTICS_EVERY = 1000
DELETE_CACHE = (600, 600)  # Gradio's file cache: every 10 minutes, files older than 10 minutes go
SESSION_CAPACITY = 2000  # sessions whose state (a conversation) the server holds; the oldest go first
CSS = (
    """
#banner {padding: 6px 12px; border-radius: 8px; background: var(--background-fill-secondary);}
#chat-notice:empty {display: none;}
#chat-notice p {margin: 4px 0; color: var(--body-text-color);}
#memory-readings table {font-size: 0.9em;}
#disclaimer p {margin: 2px 0; font-size: 0.85em; color: var(--body-text-color-subdued);}
"""
    + MATRIX_CSS
)
# the browser puts the page's own address where the API tab's examples name the server's (its last registered
# event, so no other event's number moves)
PAGE_URL_JS = r"""(text) => text.replace(/http:\/\/127\.0\.0\.1:\d+\//g,
    window.location.origin + window.location.pathname.replace(/[^/]*$/, ""))"""
API_HELP = """
### Gradio API (gradio_client)
```python
from gradio_client import Client
c = Client("{url}")
job = c.submit("What is free cash flow?", [], None, 0.7, 256, api_name="/chat")  # message, history, system_prompt, temperature, max_tokens
for reply_so_far in job: print(reply_so_far)  # the answer (a reasoning model's thinking left out)
job = c.submit("What is free cash flow?", [], api_name="/chat_with_thinking")  # same, plus enable_thinking
for part in job: print(part["thinking"], part["answer"])  # history: send answers back, never the thinking
c.predict("demo-qwen3", "<admin token or empty>", api_name="/load_model")  # waits until ready; returns /health
c.predict(api_name="/models")   # catalogue + planner verdict per model
c.predict(api_name="/health")   # status, model, engine stage, memory
c.predict(50, api_name="/loads")  # the load ledger's last records
c.predict("Qwen/Qwen3-30B-A3B", None, "l40s", 1, api_name="/fit")  # will it fit? (repo id or config.json text)
job = c.submit([handle_file("a.pdf"), handle_file("b.pdf")], "income-statement", api_name="/matrix")  # Filing Matrix
for p in job: print(p["done"], p["total"])  # p["matrix"]: each cell's value, page, quote and check
c.predict(api_name="/scores")  # every stored scoreboard result (public), with its provenance
for p in c.submit("finqa", 20, "<admin token or empty>", api_name="/run_eval"): print(p["done"], p["total"])
c.predict("<admin token or empty>", api_name="/cancel_eval")  # stops the run; its finished items are kept (partial)
```
### REST
`GET /health` (200 ready, 503 otherwise) · `GET /models` · `GET /loads?limit=50` · `GET /scores` ·
`POST /load-model {{"model": KEY}}` with `Authorization: Bearer <FINSPACE_ADMIN_TOKEN>` when set (202, 401, 409, 422, 400).
"""


def _quiet_queue_analytics(queue: Any) -> None:
    """Gradio reads these from GRADIO_ANALYTICS_CACHE_FREQUENCY / GRADIO_ANALYTICS_MAX_EVENTS when the queue is
    made (1 and 10,000); set on the queue itself, not in the process's environment. A larger frequency or a
    smaller bound given in the environment is kept."""
    if hasattr(queue, "ANAYLTICS_CACHE_FREQUENCY"):  # sic: Gradio's spelling
        queue.ANAYLTICS_CACHE_FREQUENCY = max(int(queue.ANAYLTICS_CACHE_FREQUENCY), ANALYTICS_EVERY)
    if hasattr(queue, "ANALYTICS_MAX_EVENTS"):
        queue.ANALYTICS_MAX_EVENTS = min(int(queue.ANALYTICS_MAX_EVENTS), ANALYTICS_EVERY)


def _ui_error(svc: Service, exc: BaseException) -> gr.Error:
    """gr.Error renders HTML in the browser: escape what may echo user input."""
    if isinstance(exc, FinspaceError):
        return gr.Error(html.escape(svc.redact(str(exc))), print_exception=False)
    log.error("unexpected %s in a UI event", type(exc).__name__, exc_info=exc)
    return gr.Error(f"unexpected server error ({type(exc).__name__}); the app is still running", print_exception=False)


def build_ui(svc: Service, *, chat_concurrency: int = 64, queue_size: int = 256) -> gr.Blocks:
    """The Space's page, over the service it shares with every other door (build_app makes both)."""
    catalog = svc.catalog
    key = catalog.default_key(svc.on_gpu)
    default_entry = catalog.get(key) if key in catalog else None  # None: a remote endpoint not yet read

    with gr.Blocks(title="finspace · finance LLMs on vLLM", fill_width=True, delete_cache=DELETE_CACHE) as demo:
        p: dict[str, Any] = {
            "banner": gr.Markdown(elem_id="banner"),
            "seen": gr.State({}),
        }  # what this session's page last showed: ticks send only changes
        with gr.Tab("Chat", id="chat-tab"):
            with gr.Row(equal_height=False):
                with gr.Column(scale=3):
                    chat = build_chat(svc, default_entry, chat_concurrency, demo)
                    p.update(notice=chat["notice"], msg=chat["msg"], send=chat["send"])
                with gr.Column(scale=2):
                    p.update(model_panel(svc))
                    p.update(memory_panel())
        with gr.Tab("Matrix", id="matrix-tab"):
            build_matrix_tab(svc, chat_concurrency)
        with gr.Tab("Scoreboard", id="scores-tab") as scoreboard_tab:
            scores = build_scores_tab(svc)
        scoreboard_tab.select(scores["load"], outputs=scores["board"], api_visibility="private", show_progress="hidden")
        p.update(history_tab(svc))
        with gr.Tab("Companies", id="edgar-tab"):
            build_edgar_tab(svc, chat)
        with gr.Tab("Will it fit?", id="fit-tab"):
            build_fit_tab(svc)
        with gr.Tab("API", id="api-tab"):
            api_help = gr.Markdown(API_HELP.format(url=f"http://127.0.0.1:{svc.settings.port}/"), elem_id="api-help")
        wire_page(demo, p, PageHandlers(svc), chat["register_restore"])
        register_api(svc, chat_concurrency=chat_concurrency)
        register_edgar_api(svc)
        register_scores_api(svc)
        # the examples name the page's own address (a Space's, a proxy's), read by the browser: no server event
        demo.load(None, inputs=[api_help], outputs=[api_help], js=PAGE_URL_JS, api_visibility="private")

    demo.queue(default_concurrency_limit=16, max_size=queue_size, api_open=False)
    demo.state_session_capacity = SESSION_CAPACITY
    _quiet_queue_analytics(demo._queue)
    demo.finspace_service = svc  # type: ignore[attr-defined]  # for build_app and tests
    return demo


def model_panel(svc: Service) -> dict[str, Any]:
    """The Model group: what is loaded, the picker, the admin token (when locked), Load, the models that won't fit."""
    with gr.Group():
        gr.Markdown("#### Model")
        current = gr.Markdown(elem_id="current-model")
        picker = gr.Dropdown(
            label="Models that fit this machine (max context)", choices=[], elem_id="model-picker", interactive=True
        )
        token = gr.Textbox(
            label="Admin token",
            type="password",
            visible=svc.locked,
            elem_id="admin-token",
            placeholder="FINSPACE_ADMIN_TOKEN: needed to switch models",
        )
        load_btn = gr.Button("Load model", variant="secondary", elem_id="load-model")
        load_status = gr.Markdown(elem_id="load-status")
        with gr.Accordion("Models that won't fit", open=False):
            unfit = gr.Markdown(elem_id="unfit-models")
    return dict(current=current, picker=picker, token=token, load_btn=load_btn, load_status=load_status, unfit=unfit)


def memory_panel() -> dict[str, Any]:
    """The Memory group: the readings, the last 5 minutes' plot, the planned breakdown against capacity."""
    with gr.Group():
        gr.Markdown("#### Memory")
        mem_md = gr.Markdown(elem_id="memory-readings")
        mem_plot = gr.LinePlot(
            x="time",
            y="GiB",
            color="series",
            title="Memory, last 5 minutes",
            height=220,
            elem_id="memory-plot",
            x_title="",
            y_title="GiB",
            y_lim=[0, None],
        )
        bar_caption = gr.Markdown(elem_id="breakdown-caption")
        bar_plot = gr.BarPlot(
            x="bar",
            y="GiB",
            color="part",
            title="Planned breakdown vs capacity",
            height=220,
            elem_id="breakdown-plot",
            x_title="",
            y_title="GiB",
            color_map=views.PART_COLORS,
            sort=None,
        )
    return dict(mem_md=mem_md, mem_plot=mem_plot, bar_caption=bar_caption, bar_plot=bar_plot)


def history_tab(svc: Service) -> dict[str, Any]:
    """The Load history tab: every load attempt from the ledger, with Refresh."""
    with gr.Tab("Load history", id="history-tab") as tab:
        gr.Markdown(
            "Every load attempt: the planner's prediction beside what vLLM did (from the load ledger)."
            if svc.ledger is not None
            else "The load ledger is not enabled in this app."
        )
        history = gr.Dataframe(
            headers=views.HISTORY_COLUMNS, value=[], interactive=False, elem_id="load-history", wrap=True
        )
        history_btn = gr.Button("Refresh", size="sm")
    return dict(history_tab=tab, history=history, history_btn=history_btn)


class PageHandlers:
    """The page's own events over one Service: loading a model, the model panel, the memory tick, the history."""

    def __init__(self, svc: Service):
        self.svc, self.serving = svc, svc.serving

    async def begin_load(self, key, tok, request: gr.Request):
        svc = self.svc
        try:
            svc.authorize(tok, client=svc.client_of(request))
            svc.start_load(key)
        except Exception as exc:  # noqa: BLE001
            raise _ui_error(svc, exc) from None
        label = views.esc(views._label(svc, key))
        off = gr.update(interactive=False)
        return f"Loading **{label}**…", off, off, views.load_notice(svc)

    async def wait_load(self, progress=gr.Progress()):
        svc = self.svc
        task = svc.load_task
        while task is not None and not task.done():
            stage, fraction, message = svc.load_progress or ("start", 0.0, "")
            progress(max(0.001, fraction), desc=f"{stage}: {message}")
            await asyncio.wait({task}, timeout=0.3)
        if task is None:
            return ""
        if task.cancelled():
            raise gr.Error("the load was cancelled", print_exception=False)
        exc = task.exception()
        if exc is not None:
            raise _ui_error(svc, exc)
        h = self.serving.health()
        return f"✓ **{views.esc(h.model_label)}** is ready."

    def refresh_model_panel(self):
        svc = self.svc
        h = self.serving.health()
        busy = h.state in ("loading", "switching") or svc.load_running
        ready = h.state == "ready" and not busy
        return (
            views.banner(svc),
            views.current_model(svc),
            gr.update(choices=views.picker_choices(svc), value=h.model_key if h.model_key else None),
            views.unfit_markdown(svc),
            views.load_notice(svc),
            gr.update(interactive=ready),
            gr.update(interactive=ready),
        )

    def history_table(self):
        try:
            return views.history_rows(self.svc.loads(200))
        except FinspaceError as exc:
            gr.Warning(html.escape(str(exc)))
            return gr.skip()

    def memory_outputs(self):
        svc = self.svc
        readings = svc.read_memory()
        return (
            views.memory_markdown(svc, readings),
            views.memory_frame(svc),
            views.breakdown_caption(svc),
            views.breakdown_frame(svc, readings),
        )

    def signature(self) -> tuple:
        h = self.serving.health()
        return (
            h.state,
            h.model_key,
            h.loading_key,
            h.stage,
            h.last_error,
            self.svc.load_running,
            self.svc.scoreboard.store.writes,
        )

    async def tick(self, seen_: dict):
        sig = self.signature()
        mem = self.memory_outputs()
        if seen_.get("sig") == sig:
            return (*mem, *([gr.skip()] * 7), seen_)
        seen_ = {"sig": sig}
        return (*mem, *self.refresh_model_panel(), seen_)

    async def page_load(self):
        return (*self.memory_outputs(), *self.refresh_model_panel(), {"sig": self.signature()}, self.history_table())


def wire_page(demo: gr.Blocks, p: dict[str, Any], h: PageHandlers, register_restore: Any) -> None:
    """The page's events after the chat column's, in this order (Gradio numbers events as they are registered):
    Load and its chain, the memory tick, the page's load, the conversation's restore, the history's refresh."""
    panel = [p[k] for k in ("banner", "current", "picker", "unfit", "notice", "msg", "send")]
    memory = [p[k] for k in ("mem_md", "mem_plot", "bar_caption", "bar_plot")]
    history, seen = p["history"], p["seen"]
    history_table = h.history_table  # one function for its three events, so they share one concurrency group

    (
        p["load_btn"]
        .click(
            h.begin_load,
            inputs=[p["picker"], p["token"]],
            outputs=[p["load_status"], p["msg"], p["send"], p["notice"]],
            api_visibility="private",
            concurrency_limit=None,
            show_progress="hidden",
        )
        .success(
            h.wait_load,
            outputs=[p["load_status"]],
            api_visibility="private",
            concurrency_limit=None,
            show_progress="full",
        )
        .then(h.refresh_model_panel, outputs=panel, api_visibility="private", show_progress="hidden")
        .then(history_table, outputs=[history], api_visibility="private", show_progress="hidden")
    )

    timer = gr.Timer(TICK_S)
    timer.tick(
        h.tick,
        inputs=[seen],
        outputs=[*memory, *panel, seen],
        api_visibility="private",
        show_progress="hidden",
        concurrency_limit=None,
        queue=True,
    )
    demo.load(
        h.page_load,
        outputs=[*memory, *panel, seen, history],
        api_visibility="private",
        show_progress="hidden",
        concurrency_limit=None,
    )
    register_restore()  # the saved conversation comes back after the page's own load event
    p["history_btn"].click(history_table, outputs=[history], api_visibility="private", show_progress="hidden")
    p["history_tab"].select(history_table, outputs=[history], api_visibility="private", show_progress="hidden")
