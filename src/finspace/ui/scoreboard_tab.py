"""The Scoreboard tab and its API: every stored result (model x set, score, n, refusals, tokens/s, date), a chart
comparing models, and a run form (set, limit, admin token, Run, Cancel, a progress bar).

A run goes on in the background (finspace.scoreboard.desk): the page polls its progress, Cancel stops it and keeps
the items that had finished (stored, marked partial). Starting or cancelling a run needs the admin token when one
is set, as switching does; reading results is public (/scores). The API:

    c.predict(api_name="/scores")  # {"results": [...newest first], "notes": [files skipped], "running", "last"}
    for p in c.submit("finqa", 20, "<admin token>", api_name="/run_eval"): print(p["done"], p["total"])
    c.predict("<admin token>", api_name="/cancel_eval")
"""

import asyncio
import html
import math
from typing import Any

import gradio as gr
import pandas as pd

from finspace.documents.desk import upload_folder
from finspace.documents.upload import inside, remove_upload
from finspace.errors import BadInput, FinspaceError
from finspace.scoreboard.limits import FILE_TYPES
from finspace.scoreboard.asking import FORMATS, PROMPT_FORMAT
from finspace.service import Service
from finspace.ui.documents import takes_document

COLUMNS = [
    "model",
    "set",
    "score %",
    "n",
    "of",
    "refusals",
    "errors",
    "tokens/s",
    "date (UTC)",
    "partial",
    "prompt",
    "file",
]
WIDTHS = ["11%", "6%", "6%", "4%", "4%", "6%", "5%", "6%", "12%", "6%", "10%", "24%"]
POLL_S = 0.5
ABOUT = (
    "Each row is one run of a public finance answer key on a model **as this Space served it** (its "
    "revision, quantization, dtype and context), greedy. **score**: the share of the *n* items asked that the "
    "set's own scorer marked correct (FinQA: the final number within its tolerance; TAT-QA: exact match, "
    "with scale). A score compares models on these items under this prompt format; it is not a measure of "
    "a model's finance skill in general. A partial row is a cancelled run."
)


PLACE_HELP = (
    "**No GitHub from this machine?** A set's data is its published file: give it in the box above for "
    "this run (TAT-QA `tatqa_dataset_dev.json`, FinQA `test.json`, FinanceBench "
    "`financebench_open_source.jsonl`, as published), or place it once as `evalsets/<set>/<file>` beside "
    "`src/` (or `$FINSPACE_EVALSETS_DIR/<set>/<file>`), where every run finds it. FinanceBench's `+filing` "
    "formats read each question's PDF: place them as `evalsets/financebench/pdfs/<doc_name>.pdf` "
    "(docs/scoreboard.md)."
)


def limit_box(maximum: int) -> gr.Number:
    """The run form's limit: a number (the page's Number box), or a message saying what a limit is. Gradio's own
    Number compares the payload with its bounds first, and a text ``"5"`` or a list ``[1]`` from a crafted event
    showed its raw "'<' not supported between instances" instead. (Its preprocess is wrapped on the instance: a
    subclass of a Gradio component writes a .pyi stub beside this file when it is defined.)"""
    box = gr.Number(20, precision=0, minimum=1, maximum=maximum, label="Items (limit)", elem_id="scores-limit")
    gradios = box.preprocess

    def preprocess(payload: Any) -> float | int | None:
        if payload is not None and (
            isinstance(payload, bool) or not isinstance(payload, int | float) or not math.isfinite(payload)
        ):
            shown = html.escape(str(payload)[:40])
            raise gr.Error(
                f"limit must be a whole number of items in [1, {maximum}] (FINSPACE_EVAL_MAX_ITEMS), "
                f"got {shown}: send a number such as 20",
                print_exception=False,
            )
        return gradios(payload)

    box.preprocess = preprocess
    return box


def _pct(v: Any) -> Any:
    return round(v * 100, 1) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def board_rows(results: list[dict]) -> list[list]:
    """One row per stored result, newest first (as the desk returns them)."""
    return [
        [
            r.get("model_key"),
            r.get("set"),
            _pct(r.get("score")),
            r.get("n"),
            r.get("total"),
            r.get("refusals"),
            r.get("errors"),
            r.get("tokens_per_s"),
            str(r.get("date") or "").replace("T", " ").rstrip("Z"),
            "partial" if r.get("partial") else "",
            str(r.get("prompt_format") or ""),
            r.get("file"),
        ]
        for r in results
    ]


def chart_frame(results: list[dict]) -> pd.DataFrame:
    """The newest complete result per (model, set, prompt format): one bar each, coloured by set; a run in another
    format than the plain one is its own bar, "<model> +calc" (the calculator), "<model> +filing" (FinanceBench's
    whole filings, passages), "<model> +filing-tools" (with the filing tools)."""
    seen: dict[tuple, dict] = {}
    for r in results:  # newest first: the first seen is the latest
        fmt = str(r.get("prompt_format") or "")
        model = f"{r.get('model_key')} +{fmt.split('+', 1)[1]}" if "+" in fmt else r.get("model_key")
        key = (model, r.get("set"))
        if not r.get("partial") and key not in seen:
            seen[key] = r
    rows = [{"model": str(m), "set": str(s), "score %": _pct(r.get("score")) or 0.0} for (m, s), r in seen.items()]
    return pd.DataFrame(rows, columns=["model", "set", "score %"])


def progress_html(p: dict | None) -> str:
    if not p:
        return ""
    state = {"running": "running", "done": "done", "cancelled": "cancelled (partial result stored)"}.get(
        p.get("state"), str(p.get("state"))
    )
    tail = ""
    if p.get("score") is not None:
        tail = f" · score {_pct(p['score'])}% of {p.get('n')}"
    if p.get("errors"):
        tail += f" · {p['errors']} item errors"
    if p.get("error"):
        tail += f" · {html.escape(str(p['error']))}"
    return (
        f"<progress value='{p.get('done', 0)}' max='{max(1, p.get('total') or 1)}' style='width:100%'></progress>"
        f"<div id='scores-count'>{html.escape(str(p.get('set')))} on {html.escape(str(p.get('model_key')))}: "
        f"{p.get('done', 0)} of {p.get('total', 0)} items · {state}{tail}</div>"
    )


def _error(svc: Service, exc: BaseException) -> gr.Error:
    """The API's translation (finspace.ui.api.user_error): the message as it is."""
    from finspace.ui.api import user_error

    return user_error(svc, exc)


def _page_error(svc: Service, exc: BaseException) -> gr.Error:
    """gr.Error renders HTML in the browser: escape what may echo user input."""
    err = _error(svc, exc)
    err.message = html.escape(str(err.message))
    return err


class ScoreEndpoints:
    """/scores (public, read-only), /run_eval and /cancel_eval (the admin token when one is set)."""

    def __init__(self, svc: Service):
        self.svc = svc

    async def scores(self) -> dict:
        """Every stored scoreboard result, newest first: model key, repo, revision, quantization, dtype,
        max_model_len, load id, set and version, prompt format, n, score, refusals, errors, tokens/s, date,
        partial; "notes": result files that could not be read (skipped); "running": the run in progress."""
        try:
            return await asyncio.to_thread(self.svc.scoreboard.board)
        except Exception as exc:  # noqa: BLE001 - the boundary: never a traceback to the client
            raise _error(self.svc, exc) from None

    async def run_eval(
        self, set_name: str, limit: int | None = None, admin_token: str | None = None, request: gr.Request = None
    ) -> dict:
        """Run `set_name` (finqa, tatqa) on the loaded model, `limit` items (null: up to FINSPACE_EVAL_MAX_ITEMS).
        Needs admin_token when the Space sets FINSPACE_ADMIN_TOKEN. Yields {"state", "done", "total", ...} as items
        finish; the last has "score", "n" and "file". The run goes on if the caller leaves; /cancel_eval stops it."""
        try:
            desk = self.svc.scoreboard
            job = await desk.start(set_name, limit, token=admin_token, client=self.svc.client_of(request))
            while job.running:
                yield job.progress()
                await asyncio.wait({job.task}, timeout=POLL_S)
            yield job.progress()
        except Exception as exc:  # noqa: BLE001
            raise _error(self.svc, exc) from None

    async def cancel_eval(self, admin_token: str | None = None, request: gr.Request = None) -> dict:
        """Cancel the running scoreboard run; the items done are stored, marked partial. Returns its progress."""
        try:
            return await self.svc.scoreboard.cancel(token=admin_token, client=self.svc.client_of(request))
        except Exception as exc:  # noqa: BLE001
            raise _error(self.svc, exc) from None


def register_scores_api(svc: Service) -> None:
    """The tab's named endpoints (call inside ``with gr.Blocks()``, after finspace.ui.api's)."""
    api = ScoreEndpoints(svc)
    gr.api(api.scores, api_name="scores", concurrency_limit=None)
    gr.api(api.run_eval, api_name="run_eval", concurrency_limit=4)
    gr.api(api.cancel_eval, api_name="cancel_eval", concurrency_limit=4)


class ScoreHandlers:
    def __init__(self, svc: Service):
        self.svc = svc

    async def board(self):
        b = await asyncio.to_thread(self.svc.scoreboard.board)
        notes = "".join(f"\n- ⚠ {html.escape(n)}" for n in b["notes"])
        return board_rows(b["results"]), chart_frame(b["results"]), ("Skipped:" + notes if notes else "")

    @takes_document
    async def run(
        self,
        set_name: str,
        limit: Any,
        token: str,
        prompt_format: Any,
        data_file: Any = None,
        request: gr.Request = None,
    ):
        """``data_file``: the set's published file uploaded for this run (read once, in the upload folder, deleted
        after), for a machine that cannot reach GitHub; nothing is written anywhere else."""
        svc = self.svc
        folder = upload_folder(svc.settings)
        path = data_file if isinstance(data_file, str) and data_file else None
        try:
            if path is not None and not inside(path, folder):
                raise BadInput("the set's file must be uploaded with the page's file box")
            job = await svc.scoreboard.start(
                set_name,
                int(limit) if isinstance(limit, (int, float)) else limit,
                token=token,
                client=svc.client_of(request),
                prompt_format=prompt_format,
                path=path,
            )
        except FinspaceError as exc:
            raise _page_error(svc, exc) from None
        finally:  # the set is read (or refused) by now: the upload never stays
            if path is not None:
                remove_upload(path, folder)
        while job.running:
            yield progress_html(job.progress())
            await asyncio.wait({job.task}, timeout=POLL_S)
        yield progress_html(job.progress())

    # the prompt format and the set's file, last: a caller of the earlier three inputs gets the plain format and the
    # set's placed or fetched file (finspace.wall.guard pads null)
    run.finspace_optional_inputs = 2

    async def cancel(self, token: str, request: gr.Request):
        svc = self.svc
        try:
            return progress_html(await svc.scoreboard.cancel(token=token, client=svc.client_of(request)))
        except FinspaceError as exc:
            raise _page_error(svc, exc) from None


def build_scores_tab(svc: Service) -> dict[str, Any]:
    """The tab's components and events (call inside ``with gr.Tab(...)``)."""
    h = ScoreHandlers(svc)
    sets = svc.scoreboard.sets()
    first = "tatqa" if "tatqa" in sets else (sets[0] if sets else None)  # CC BY 4.0: the set most machines have
    gr.Markdown(ABOUT)
    with gr.Row():
        set_name = gr.Dropdown(sets, value=first, label="Set", elem_id="scores-set")
        limit = limit_box(svc.scoreboard.limits.max_items)
        token = gr.Textbox(
            label="Admin token",
            type="password",
            visible=svc.locked,
            elem_id="scores-token",
            placeholder="FINSPACE_ADMIN_TOKEN: needed to start a run",
        )
        fmt = gr.Dropdown(
            list(FORMATS),
            value=PROMPT_FORMAT,
            elem_id="scores-format",
            label="Prompt format (+calc: the model may call the calculator; +filing: FinanceBench over "
            "each question's whole filing, passages; +filing-tools: with the filing tools)",
        )
    data_file = gr.File(
        label="The set's published file (optional: when this machine cannot reach GitHub)",
        file_types=list(FILE_TYPES),
        type="filepath",
        elem_id="scores-file",
        height=90,
    )
    gr.Markdown(PLACE_HELP, elem_id="scores-place")
    with gr.Row():
        run = gr.Button("Run on the loaded model", variant="primary", elem_id="scores-run")
        cancel = gr.Button("Cancel", elem_id="scores-cancel")
    progress = gr.HTML(elem_id="scores-progress")
    table = gr.Dataframe(
        headers=COLUMNS, value=[], interactive=False, wrap=True, elem_id="scores-board", column_widths=WIDTHS
    )
    chart = gr.BarPlot(
        x="model",
        y="score %",
        color="set",
        title="Latest complete score per model and set",
        height=260,
        elem_id="scores-chart",
        x_title="",
        y_title="score %",
        y_lim=[0, 100],
        sort=None,
    )
    notes = gr.Markdown(elem_id="scores-notes")
    refresh = gr.Button("Refresh", size="sm", elem_id="scores-refresh")
    board = [table, chart, notes]
    (
        run.click(
            h.run,
            [set_name, limit, token, fmt, data_file],
            [progress],
            api_visibility="private",
            concurrency_limit=4,
            show_progress="hidden",
        ).then(h.board, outputs=board, api_visibility="private", show_progress="hidden")
    )
    cancel.click(h.cancel, [token], [progress], api_visibility="private", show_progress="hidden")
    refresh.click(h.board, outputs=board, api_visibility="private", show_progress="hidden")
    return {"board": board, "load": h.board}
