"""The Matrix tab: several filings, the same fields from each, every value with its page, quote and check.

Documents are uploaded together (one row each), the fields come from a preset (matrix.yaml) or are edited as
JSON, and "Fill" sends every cell to the engine at once: the progress bar counts cells done, cells appear as
they finish, and Cancel stops the rest (their vLLM requests are aborted). Each cell shows its check as a
colour *and* a text marker (✓ verified, ✗ quote not on that page, ≠ value not in the quote, — not found,
✂ cut at max_tokens). A field that names XBRL concepts has a second column with the filer's own value (shown
as soon as the filings are read, with no model too), and the model's cell says whether it agrees with it.
The finished matrix downloads as CSV, XLSX (with a Provenance sheet) and JSON, kept as
the chat's exports are (finspace.ui.exports: a few per client, removed after 10 minutes and when the app stops).
"""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path
from typing import Any

import gradio as gr
import gradio_client.utils

from finspace.documents.desk import upload_folder
from finspace.documents.convert import KINDS
from finspace.errors import FinspaceError
from finspace.matrix import export
from finspace.matrix.pages import cell_source
from finspace.matrix.table import DETAIL_HEADERS, MatrixResult, detail_headers, details, grid, mark_keys, xbrl_marks
from finspace.matrix.verify import MARKS
from finspace.service import Service
from finspace.ui.checks import page_view
from finspace.ui.documents import takes_document
from finspace.ui.exports import Exports

COLOURS = {
    "verified": "#d9f2d9",
    "not_on_page": "#f8d7d7",
    "value_not_in_quote": "#fde8c8",
    "not_found": "#ececec",
    "cut": "#e6dcf5",
    "invalid": "#f8d7d7",
    "pending": "transparent",
    "error": "#ececec",
    "xbrl": "#dbe9f7",
    "xbrl_none": "#f3f3f3",
}
XBRL_LEGEND = {
    "xbrl": "the filer's XBRL value",
    "agrees": "agrees with the filer's XBRL",
    "differs": "differs from the filer's XBRL",
    "missed": "not found, the filer's XBRL has it",
}
# a cell's hover for the keys that are not a check's mark (finspace.matrix.verify.MARKS) nor in the legend
CELL_TITLES = {
    "xbrl_none": "the filer's XBRL has no value for this field",
    "pending": "waiting for the model",
    "error": "this filing could not be read",
    "verified": "verified: the quote is on its page and holds the value",
}  # a mark's one-word label
AGREEMENT_BORDER = {"agrees": "4px solid #2e7d32", "differs": "4px solid #c62828", "missed": "4px dashed #c62828"}
CSS = """
#matrix-grid table {border-collapse: collapse; font-size: 0.92em;}
#matrix-grid th, #matrix-grid td {border: 1px solid var(--border-color-primary); padding: 4px 8px; text-align: left;}
#matrix-grid td {color: #1f1f1f;}
#matrix-grid td[data-col] {cursor: pointer;}
"""
# a click on a cell sends its row and column (the grid is re-rendered as cells arrive: one listener on the element)
CELL_CLICK = (
    "element.addEventListener('click', (e) => { const td = e.target.closest('td[data-col]');"
    " if (td) trigger('click', {row: Number(td.dataset.row), col: Number(td.dataset.col)}); });"
)
NO_CELL = "Click a cell to see its page, with its quote marked."


def legend() -> str:
    marks = [
        f"<span style='background:{COLOURS[m.key]};color:#1f1f1f;padding:1px 6px;border-radius:4px'>"
        f"{m.symbol} {html.escape(m.label)}</span>"
        for m in MARKS
    ]
    marks.append(
        f"<span style='background:{COLOURS['xbrl']};color:#1f1f1f;padding:1px 6px;border-radius:4px'>"
        f"{XBRL_LEGEND['xbrl']}</span>"
    )
    marks += [
        f"<span style='border-left:{AGREEMENT_BORDER[k]};color:inherit;padding:1px 6px'>"
        f"{html.escape(XBRL_LEGEND[k])}</span>"
        for k in ("agrees", "differs", "missed")
    ]
    return " · ".join(marks)


def grid_html(result: MatrixResult | None) -> str:
    """The grid as an HTML table: each cell coloured by its check, with the check's marker in its text and title."""
    if result is None:
        return ""
    headers, rows = grid(result)
    keys, agreement = mark_keys(result), xbrl_marks(result)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for r, row in enumerate(rows):
        cells = [f"<td>{html.escape(row[0])}</td>"]
        for c, text in enumerate(row[1:]):
            key, agrees = keys[r][c], agreement[r][c]
            label = CELL_TITLES.get(key) or next((m.label for m in MARKS if m.key == key), XBRL_LEGEND.get(key, ""))
            border = f";border-left:{AGREEMENT_BORDER[agrees]}" if agrees else ""
            cells.append(
                f"<td data-check='{key}' data-xbrl='{agrees}' title='{html.escape(label)}' "
                f"data-row='{r}' data-col='{c}' "
                f"style='background:{COLOURS.get(key, 'transparent')}{border}'>{html.escape(text)}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def progress_html(result: MatrixResult | None) -> str:
    if result is None:
        return ""
    counts = result.counts()
    summary = ", ".join(f"{n} {m.label}" for m in MARKS if (n := counts.get(m.key)))
    state = {"running": "filling", "done": "done", "cancelled": "cancelled"}[result.state]
    flat = [k for row in xbrl_marks(result) for k in row if k]
    xbrl = f"{len(result.filer)} filer's XBRL values"
    if flat:
        xbrl += (
            f" (the model agrees with {flat.count('agrees')}, differs from {flat.count('differs')}, "
            f"missed {flat.count('missed')})"
        )
    if not result.model:
        return f"<div id='matrix-count'>no model loaded: the filer's XBRL values only · {xbrl}</div>"
    return (
        f"<progress value='{result.done}' max='{max(1, result.total)}' style='width:100%'></progress>"
        f"<div id='matrix-count'>{result.done} of {result.total} cells · {state}"
        f"{' · ' + html.escape(summary) if summary else ''}{' · ' + xbrl if result.filer else ''}</div>"
    )


def cell_markdown(result: MatrixResult | None, row: Any, col: Any) -> str:
    """What a click on the grid's cell shows: its page's text with its quote marked (finspace.ui.checks.page_view,
    the chat's Sources view), or why there is no page."""
    if result is None or not all(isinstance(v, int) and not isinstance(v, bool) for v in (row, col)):
        return NO_CELL
    view = cell_source(result, row, col)
    if view is None:
        return NO_CELL
    title = f"#### {html.escape(view['title'])}"
    source, quote = view["source"], view["quote"]
    if source is None:
        return f"{title}\n\nNo page to show: the cell cites none, or a page the filing does not have."
    missing = quote and quote not in source["text"]
    warn = f"\n\nThe quote is not on this page: «{html.escape(quote)}»" if missing else ""
    return f"{title}{warn}\n\n{page_view(source, [(quote, view['note'])] if quote else [])}"


def details_frame(result: MatrixResult):
    """The details as a table with its own headers (XBRL columns when a field names concepts)."""
    import pandas as pd

    return pd.DataFrame(details(result), columns=detail_headers(result))


def fields_json(svc: Service, preset: str) -> str:
    fields = svc.matrix.presets.get(preset).fields
    return json.dumps([f.to_json() for f in fields], indent=1)


class MatrixHandlers:
    def __init__(self, svc: Service):
        self.svc = svc
        self.provenance = svc.provenance
        self.exports = Exports(upload_folder(svc.settings))  # bounded per client, removed when the app stops
        svc.on_close.append(self.exports.clear)

    @staticmethod
    def cell(result: MatrixResult | None, evt: gr.EventData):
        """A click on the grid: the clicked cell's page and quote (``cell_markdown``)."""
        data = evt._data if isinstance(getattr(evt, "_data", None), dict) else {}
        return cell_markdown(result, data.get("row"), data.get("col"))

    def preset(self, label: str):
        try:
            return fields_json(self.svc, label)
        except FinspaceError as exc:
            raise gr.Error(html.escape(str(exc)), print_exception=False) from None

    @takes_document
    async def fill(self, files: Any, fields: str, request: gr.Request):
        """Stream the matrix: progress, grid, details; the downloads when it is done."""
        paths = [
            (str(getattr(f, "path", f)), Path(str(getattr(f, "orig_name", None) or getattr(f, "path", f))).name)
            for f in (files or [])
        ]
        result, client = None, self.svc.client_of(request)
        try:
            async for result in self.svc.matrix.fill(paths, fields, client, self.provenance()):
                yield progress_html(result), grid_html(result), details_frame(result), gr.update(), result
            if result is not None:
                written = await asyncio.to_thread(
                    self.exports.write_files, client, export.files(result), "use fewer documents or fields"
                )
                yield (
                    progress_html(result),
                    grid_html(result),
                    details_frame(result),
                    gr.update(value=written, visible=True),
                    result,
                )
        except FinspaceError as exc:
            raise gr.Error(html.escape(self.svc.redact(str(exc))), print_exception=False) from None


def hand_over_paths(component: gr.File):
    """``component`` (a gr.File) hands the event the uploaded paths as they are. gr.File's own preprocessing
    (gradio 6.31, components/file.py ``_process_single_file``) makes an empty NamedTemporaryFile in the upload
    folder for each file and never removes it: a Matrix of 20 filings left 20 empty ``tmp*`` files behind. Set on
    the instance: a subclass of a Gradio component makes Gradio write a .pyi file beside this module."""
    from gradio.utils import NamedString

    def as_given(f: Any) -> Any:
        if component.file_types and not gradio_client.utils.is_valid_file(f.path, component.file_types):
            raise gr.Error(f"upload one of {', '.join(component.file_types)}", print_exception=False)
        return NamedString(f.path)

    component._process_single_file = as_given
    return component


def build_matrix_tab(svc: Service, concurrency: int) -> dict[str, Any]:
    """The tab's components and events (call inside ``with gr.Tab(...)``)."""
    h = MatrixHandlers(svc)
    labels = [p.label for p in svc.matrix.presets.entries]
    gr.Markdown(
        "Pull the same fields from several filings at once. Each value comes with the page and the quote it "
        "was read from, and is checked against that page. A field with XBRL concepts also shows the filer's "
        "own tagged value for the filing's period, before any model answers, and the model's value is marked "
        "against it. " + legend()
    )
    with gr.Row():
        with gr.Column(scale=2):
            files = hand_over_paths(
                gr.File(
                    label=f"Filings (up to {svc.matrix.limits.max_documents})",
                    file_count="multiple",
                    file_types=sorted(KINDS),
                    elem_id="matrix-files",
                )
            )
        with gr.Column(scale=3):
            preset = gr.Dropdown(labels, value=labels[0], label="Fields preset", elem_id="matrix-preset")
            fields = gr.Code(
                fields_json(svc, labels[0]),
                language="json",
                label="Fields (name, type, instruction)",
                lines=8,
                elem_id="matrix-fields",
            )
    with gr.Row():
        fill = gr.Button("Fill the matrix", variant="primary", elem_id="matrix-fill")
        cancel = gr.Button("Cancel", elem_id="matrix-cancel")
    progress = gr.HTML(elem_id="matrix-progress")
    table = gr.HTML(elem_id="matrix-grid", js_on_load=CELL_CLICK)
    shown = gr.State(None)  # the last matrix, for a click on a cell (its cited pages: finspace.matrix.pages)
    cell_view = gr.Markdown(NO_CELL, elem_id="matrix-cell", max_height=480)
    downloads = gr.File(
        label="Export (CSV, XLSX, JSON)", file_count="multiple", visible=False, elem_id="matrix-downloads"
    )
    with gr.Accordion("Pages and quotes", open=False):
        detail = gr.Dataframe(headers=DETAIL_HEADERS, wrap=True, elem_id="matrix-details")
    preset.change(h.preset, preset, fields, api_visibility="private", show_progress="hidden")
    run = fill.click(
        h.fill,
        [files, fields],
        [progress, table, detail, downloads, shown],
        api_visibility="private",
        concurrency_limit=concurrency,
        show_progress="minimal",
    )
    table.click(h.cell, shown, cell_view, api_visibility="private", show_progress="hidden")
    cancel.click(None, None, None, cancels=[run], api_visibility="private")
    return {"files": files, "fields": fields, "fill": fill, "cancel": cancel, "grid": table, "cell": cell_view}
