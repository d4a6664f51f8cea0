"""wall.sessions on Gradio's own StateHolder and Blocks (issue 41, finding 3): a session that never opened a
heartbeat loses its state once idle ``idle_s``; a page's (heartbeat heard), a busy one and a recent one keep it."""

from __future__ import annotations

import datetime

import gradio as gr
from gradio.state_holder import StateHolder

from finspace.wall.sessions import Sessions


def test_sessions_without_a_heartbeat_are_dropped_when_idle():
    deleted = []
    with gr.Blocks() as demo:
        doc = gr.State(None, delete_callback=deleted.append)
    holder = StateHolder()
    holder.set_blocks(demo)
    for session in ("script", "page", "busy", "recent"):
        holder[session][doc._id] = f"{session}'s document"
    old = datetime.datetime.now() - datetime.timedelta(seconds=120)
    for session in ("script", "page", "busy"):
        holder.time_last_used[session] = old
    sessions = Sessions(60, busy=lambda s: s == "busy")
    sessions.attach(holder)
    sessions.heard("/gradio_api/heartbeat/page")
    sessions.heard("/gradio_api/queue/data")  # not a heartbeat
    assert sessions.sweep() == 1
    assert "script" not in holder.session_data and deleted == ["script's document"]
    assert {"page", "busy", "recent"} <= set(holder.session_data)
    assert holder["page"][doc._id] == "page's document"
    # the figure: sessions held. Before, Gradio kept all four until 10,000 newer ones arrived
    assert len(holder.session_data) == 3
