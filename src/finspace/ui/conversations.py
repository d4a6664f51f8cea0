"""The page's list of past conversations (kept in the browser: gr.BrowserState) and the export buttons.

New, rename and Delete act on the store the browser sends (checked by saved.read_store: a corrupt or oversized
one is replaced with a clear message); every reply, Clear and Stop save the current conversation back. A page
refresh restores the current conversation. Export writes the conversation as Markdown and JSON with its
provenance into Gradio's file cache (finspace.ui.exports: a few per client, removed after 10 minutes and when the
app stops), offered as downloads.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from finspace.documents.desk import upload_folder
from finspace.errors import FinspaceError
from finspace.ui import chat as convo
from finspace.ui import saved
from finspace.ui.exports import Exports

if TYPE_CHECKING:
    from finspace.service import Service

STORAGE_KEY = "finspace-conversations"
# BrowserState encrypts with a secret the page itself carries (no secrecy from the browser's user); a fixed one
# keeps saved conversations readable after the app restarts.
STORAGE_SECRET = "finspace-conversations-v1"


def build_conversations(demo: gr.Blocks, c: dict, svc: Service) -> Callable[[], None]:
    """Components and events; ``c`` holds the chat column's components (chatbot, conv, cont, ...). Returns the
    function that registers the page-load restore: call it after the page's own load event, which stays first.
    The exports' folder is removed when ``svc`` closes."""
    store = gr.BrowserState(None, storage_key=STORAGE_KEY, secret=STORAGE_SECRET)
    k = layout()
    private = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden")
    chatbot, conv, cont, picker, title = c["chatbot"], c["conv"], c["cont"], k["picker"], k["title"]
    view = [chatbot, conv, picker, title, store, cont]
    for ev in c["chat_events"]:
        ev.then(save, inputs=[conv, store], outputs=[store, picker, title], **private)
    c["stop"].click(save, inputs=[conv, store], outputs=[store, picker, title], **private)
    switched = [
        picker.input(select, inputs=[picker, store], outputs=view, **private),
        k["new"].click(new_chat, inputs=[conv, store], outputs=view, **private),
    ]
    k["rename"].click(rename_chat, inputs=[title, store], outputs=[store, picker], **private)
    title.submit(rename_chat, inputs=[title, store], outputs=[store, picker], **private)
    switched.append(k["delete"].click(delete_chat, inputs=[store], outputs=view, **private))
    for ev in switched:  # a document belongs to the conversation it was attached in
        ev.then(drop_document, outputs=[c["doc"], c["doc_fit"], c["doc_list"]], **private)
    exports = Exports(upload_folder(svc.settings))
    svc.on_close.append(exports.clear)

    def export(turns, name, request: gr.Request):
        return export_files(turns, name, exports, svc.client_of(request))

    k["export"].click(export, inputs=[conv, title], outputs=[k["files"]], **private)
    return lambda: demo.load(restore, inputs=[store], outputs=view, **private)


def drop_document():
    """The documents' state, their fit table and list, emptied (another conversation is shown)."""
    return None, "", gr.update(choices=[], value=[], visible=False)


def layout() -> dict[str, Any]:
    """The Conversations accordion's components, by name."""
    k: dict[str, Any] = {}
    with gr.Accordion("Conversations (kept in this browser)", open=False, elem_id="conversations"):
        with gr.Row():
            # the choices are this browser's, set per page: the id is checked by select(), not by Gradio
            k["picker"] = gr.Dropdown(
                label="Conversation",
                choices=[],
                elem_id="conversation-picker",
                scale=4,
                interactive=True,
                allow_custom_value=True,
            )
            k["new"] = gr.Button("New", size="sm", elem_id="new-chat", scale=1)
            k["delete"] = gr.Button("Delete", size="sm", variant="stop", elem_id="delete-chat", scale=1)
        with gr.Row():
            k["title"] = gr.Textbox(label="Title", elem_id="chat-title", max_lines=1, scale=4)
            k["rename"] = gr.Button("Rename", size="sm", elem_id="rename-chat", scale=1)
        with gr.Row():
            k["export"] = gr.Button("Export (Markdown + JSON)", size="sm", elem_id="export")
        k["files"] = gr.File(
            label="Downloads", file_count="multiple", interactive=False, visible=False, elem_id="export-files"
        )
    return k


# ------------------------------------------------------------------ handlers (the browser's store in, the view out)
def read(raw: Any) -> dict:
    st, problem = saved.read_store(raw)
    if problem:
        gr.Warning(html.escape(problem))
    return st


def shown(st: dict) -> tuple:
    """The view of the store's current conversation: chatbot, conversation, picker, title, store, Continue."""
    cid = st["current"]
    turns = st["conversations"][cid]["turns"]
    return (
        convo.display(turns),
        turns,
        gr.update(choices=saved.choices(st), value=cid),
        st["conversations"][cid]["title"],
        st,
        gr.update(visible=convo.can_continue(turns)),
    )


def restore(raw):
    return shown(read(raw))


def save(turns, raw):
    try:
        turns = saved.check_turns(list(turns or []))
    except saved.StoreProblem as exc:
        gr.Warning(f"This conversation could not be saved in the browser ({exc}).")
        return gr.skip(), gr.skip(), gr.skip()
    st, problem = saved.put(read(raw), turns)
    if problem:
        gr.Warning(problem)
    cid = st["current"]
    return st, gr.update(choices=saved.choices(st), value=cid), st["conversations"][cid]["title"]


def select(cid, raw):
    st = read(raw)
    if not isinstance(cid, str) or cid not in st["conversations"]:
        gr.Warning("That conversation is no longer saved in this browser.")
        return (gr.skip(),) * 6
    return shown({**st, "current": cid})


def new_chat(turns, raw):
    try:
        st, _ = saved.put(read(raw), saved.check_turns(list(turns or [])))
    except saved.StoreProblem:
        st = read(raw)
    fresh = saved.empty_store()
    st = {"current": fresh["current"], "conversations": {**st["conversations"], **fresh["conversations"]}}
    return shown(st)


def rename_chat(text, raw):
    st = read(raw)
    text = " ".join(str(text or "").split())
    if not text or len(text) > saved.MAX_TITLE_CHARS:
        gr.Warning(f"A title is 1 to {saved.MAX_TITLE_CHARS} characters.")
        return gr.skip(), gr.skip()
    cid = st["current"]
    st["conversations"][cid] = {**st["conversations"][cid], "title": text}
    return st, gr.update(choices=saved.choices(st), value=cid)


def delete_chat(raw):
    st = read(raw)
    convs = {k: v for k, v in st["conversations"].items() if k != st["current"]}
    if not convs:
        return shown(saved.empty_store())
    return shown({"current": max(convs, key=lambda k: convs[k]["updated"]), "conversations": convs})


def export_files(turns, name, exports: Exports, client: str | None):
    try:
        turns = saved.check_turns(list(turns or []))
    except saved.StoreProblem as exc:
        gr.Warning(f"This conversation could not be exported ({exc}).")
        return gr.skip()
    if not any(t["kind"] == "turn" for t in turns):
        gr.Warning("Nothing to export yet: send a message first.")
        return gr.skip()
    name = " ".join(name.split())[: saved.MAX_TITLE_CHARS] if isinstance(name, str) else ""
    doc = saved.export_json(name or saved.title_for(turns), turns)
    try:
        paths = exports.write(client, doc, saved.export_markdown(doc))
    except FinspaceError as exc:
        gr.Warning(html.escape(str(exc)))
        return gr.skip()
    return gr.update(value=paths, visible=True)
