"""Chat plumbing shared by the UI and the /chat API: the conversation state and coalesced streaming.

A UI conversation is a list of turns ``{"role", "content", "model", "kind"}``;
``kind`` is "turn" for what the model sees, "switch" for the marker written
when the next reply comes from another model, and "note" for errors and stops.
Only turns reach the engine, so markers never become part of a prompt.

Streaming never yields per token: ``coalesce`` joins the engine's deltas and
hands the text on at most every ``interval`` seconds (50 ms by default, longer
when many streams run), so the app process spends its time on whole updates,
not on tokens the engine has to wait for.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

BASE_INTERVAL_S = 0.05  # FINSPACE_STREAM_INTERVAL_MS (finspace.settings) sets the app's own
# Above this many concurrent streams, each waits proportionally longer between updates: the app sends at most
# ~160 updates a second in all (8 streams x 20/s), so 16 streams get one every 100 ms, 32 every 200 ms. Each update
# costs the app process CPU (Gradio's event step, a diff, an SSE message) that the engine needs on a small machine:
# at 16 users, 50 ms gave 0.21 ms of app CPU per token and 800 tok/s, 100 ms gave 0.13 ms and 876 tok/s
# (bench/serving.py --servers a --levels 16, README).
STREAMS_PER_STEP = 8


def interval_for(active_streams: int, base: float = BASE_INTERVAL_S) -> float:
    """Seconds between updates of one stream: ``base``, stretched when many streams share the process."""
    return base * max(1.0, active_streams / STREAMS_PER_STEP)


async def coalesce(deltas: AsyncIterator[str], interval: float | Any = BASE_INTERVAL_S) -> AsyncIterator[str]:
    """Yield the accumulated text at most every ``interval`` seconds (a number or a callable returning one).

    The first piece goes out at once (time to first token); the final text always goes out.
    """
    text = ""
    last = 0.0
    pending = False
    async for delta in deltas:
        if not delta:
            continue
        text += delta
        pending = True
        now = time.monotonic()
        wait = interval() if callable(interval) else interval
        if now - last >= wait:
            last = now
            pending = False
            yield text
    if pending:
        yield text


# ------------------------------------------------------------------ conversation
def turn(role: str, content: str, model: str | None = None, kind: str = "turn") -> dict:
    return {"role": role, "content": content, "model": model, "kind": kind}


def message_problem(message: Any, conv: Any, max_conversation_chars: int) -> str | None:
    """Why a message from the page can't be taken (checked before anything is stored), else None."""
    from finspace.service import MAX_MESSAGE_CHARS

    if not isinstance(message, str) or not message.strip():
        return "Type a message first."
    if len(message) > MAX_MESSAGE_CHARS:
        return (f"The message has {len(message):,} characters; the limit is {MAX_MESSAGE_CHARS:,}. "
                "Send a shorter one (or split it).")
    held = sum(len(t.get("content") or "") for t in conv or () if isinstance(t, dict))
    if held + len(message) > max_conversation_chars:
        return "This conversation is too long to continue here; press Clear to start a new one."
    return None


def last_model(conv: list[dict]) -> str | None:
    """The model that wrote the conversation's latest reply (None before the first)."""
    for t in reversed(conv):
        if t["kind"] in ("turn", "switch") and t["role"] == "assistant" and t.get("model"):
            return t["model"]
        if t["kind"] == "switch":
            return t.get("model")
    return None


def needs_switch_marker(conv: list[dict], current_key: str | None) -> bool:
    prev = last_model(conv)
    return prev is not None and current_key is not None and prev != current_key


def switch_marker(key: str, label: str) -> dict:
    return turn("system", f"— switched to {label} —", model=key, kind="switch")


def note(text: str) -> dict:
    return turn("system", text, kind="note")


def engine_messages(conv: list[dict]) -> list[dict]:
    """The turns the model sees: markers dropped, and a user turn left unanswered (error, stop before any text)
    merged into the next, so roles alternate as strict chat templates demand."""
    out: list[dict] = []
    for t in conv:
        if t["kind"] != "turn":
            continue
        if out and out[-1]["role"] == t["role"] == "user":
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + t["content"]}
            continue
        if t["role"] == "assistant" and not t["content"]:
            continue
        out.append({"role": t["role"], "content": t["content"]})
    return out


def display(conv: list[dict]) -> list[dict]:
    """Chatbot messages: turns as they are, markers as their own italic bubble (Gradio 6's Chatbot does not
    render "system" messages, so a marker is shown on the assistant side; it never reaches the model)."""
    out = []
    for t in conv:
        if t["kind"] == "turn":
            if t["role"] == "assistant" and not t["content"]:
                continue
            out.append({"role": t["role"], "content": t["content"]})
        else:
            out.append({"role": "assistant", "content": f"*{_md_escape(t['content'])}*"})
    return out


def _md_escape(text: str) -> str:
    return "".join("\\" + c if c in "\\*_`[]<>#|" else c for c in text)


def strip_last_reply(conv: list[dict]) -> tuple[list[dict], str | None]:
    """For regenerate: drop everything after the last user turn; return it and that turn's text."""
    for i in range(len(conv) - 1, -1, -1):
        t = conv[i]
        if t["kind"] == "turn" and t["role"] == "user":
            return conv[: i + 1], t["content"]
    return conv, None
