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

from finspace.ui import checks as figure_checks

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


async def coalesce_parts(
    parts: AsyncIterator[tuple[str, str]], interval: float | Any = BASE_INTERVAL_S
) -> AsyncIterator[tuple[str, str]]:
    """``coalesce`` for (thinking, answer) delta pairs: yields both texts so far, at most every ``interval``."""
    thinking = answer = ""
    last = 0.0
    pending = False
    async for t, a in parts:
        if not t and not a:
            continue
        thinking, answer = thinking + t, answer + a
        pending = True
        now = time.monotonic()
        wait = interval() if callable(interval) else interval
        if now - last >= wait:
            last = now
            pending = False
            yield thinking, answer
    if pending:
        yield thinking, answer


# ------------------------------------------------------------------ conversation
def turn(role: str, content: str, model: str | None = None, kind: str = "turn") -> dict:
    return {"role": role, "content": content, "model": model, "kind": kind, "at": time.time()}


def message_problem(message: Any, conv: Any, max_conversation_chars: int) -> str | None:
    """Why a message from the page can't be taken (checked before anything is stored), else None."""
    from finspace.service import MAX_MESSAGE_CHARS

    if not isinstance(message, str) or not message.strip():
        return "Type a message first."
    if len(message) > MAX_MESSAGE_CHARS:
        return (
            f"The message has {len(message):,} characters; the limit is {MAX_MESSAGE_CHARS:,}. "
            "Send a shorter one (or split it)."
        )
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
    render "system" messages, so a marker is shown on the assistant side; it never reaches the model).
    A reply's thinking is a collapsible "Thinking" message above it (open while it streams, closed once the
    answer begins); its usage line goes under it."""
    out = []
    for t in conv:
        if t["kind"] == "turn":
            if t["role"] == "assistant" and t.get("reasoning"):
                done = bool(t["content"]) or t.get("usage") is not None
                out.append(
                    {
                        "role": "assistant",
                        "content": t["reasoning"].strip(),
                        "metadata": {"title": "Thinking", "status": "done" if done else "pending"},
                    }
                )
            if t["role"] == "assistant":
                out += [tool_step(s) for s in t.get("tools") or ()]
            if t["role"] == "assistant" and not t["content"] and t.get("usage") is None:
                continue
            content = t["content"]
            if t["role"] == "assistant" and t.get("checks"):  # each figure's mark (finspace.ui.checks)
                content = figure_checks.marked(content, t["checks"])
            if t["role"] == "assistant" and t.get("usage") is not None:
                content = f"{content}\n\n<sub>{usage_line(t['usage'])}</sub>"
            out.append({"role": t["role"], "content": content})
            if t["role"] == "assistant" and (t.get("checks") or t.get("sources")):
                out.append(figure_checks.sources(t.get("sources") or [], t.get("checks") or []))
        else:
            out.append({"role": "assistant", "content": f"*{_md_escape(t['content'])}*"})
    return out


def tool_step(step: dict) -> dict:
    """A calculator call and its result as a collapsed step (as the Thinking block), above the answer."""
    from finspace.tools.registry import ToolStep

    s = ToolStep(
        str(step.get("name", "")),
        str(step.get("arguments", "")),
        str(step.get("result", "")),
        bool(step.get("ok", True)),
    )
    body = f"`{_md_escape(s.arguments)}`\n\n→ **{_md_escape(s.result)}**"
    return {"role": "assistant", "content": body, "metadata": {"title": s.title, "status": "done"}}


def _md_escape(text: str) -> str:
    return "".join("\\" + c if c in "\\*_`[]<>#|" else c for c in text)


def strip_last_reply(conv: list[dict]) -> tuple[list[dict], str | None]:
    """For regenerate: drop everything after the last user turn; return it and that turn's text."""
    for i in range(len(conv) - 1, -1, -1):
        t = conv[i]
        if t["kind"] == "turn" and t["role"] == "user":
            return conv[: i + 1], t["content"]
    return conv, None


# ------------------------------------------------------------------ usage and Continue
def usage(info: Any, started: float, ended: float, previous: dict | None = None) -> dict:
    """A reply's usage from the engine's ChatInfo; ``previous`` is the usage of the part a Continue extends."""
    first = info.first_token_at
    decode_s = ended - first if first is not None else 0.0
    out = {
        "prompt_tokens": info.prompt_tokens,
        "output_tokens": info.output_tokens,
        "tokens_per_s": round(info.output_tokens / decode_s, 1) if decode_s > 0 and info.output_tokens > 1 else None,
        "first_token_s": round(first - started, 3) if first is not None else None,
        "finish_reason": info.finish_reason,
        "trimmed_messages": info.trimmed_messages,
        "continued": 0,
        "tool_calls": len(getattr(info, "tool_steps", ()) or ()),
        "notes": [str(n)[:400] for n in getattr(info, "notes", ()) or ()],
    }
    if previous:
        out["output_tokens"] += int(previous.get("output_tokens") or 0)
        out["continued"] = int(previous.get("continued") or 0) + 1
    return out


STOP_REASONS = {
    "stop": "finished",
    "length": "stopped at max tokens: press Continue for more",
    "abort": "stopped",
    None: "stopped",
}


def usage_line(u: dict) -> str:
    """One line under a reply: tokens, speed, time to first token, why it stopped, turns left out."""
    parts = [f"prompt {u['prompt_tokens']:,} tokens", f"reply {u['output_tokens']:,} tokens"]
    if u.get("tokens_per_s") is not None:
        parts.append(f"{u['tokens_per_s']:g} tokens/s")
    if u.get("first_token_s") is not None:
        parts.append(f"first token {u['first_token_s']:.2f} s")
    parts.append(STOP_REASONS.get(u.get("finish_reason"), str(u.get("finish_reason"))))
    if u.get("continued"):
        parts.append(f"continued {u['continued']}×")
    if u.get("tool_calls"):
        n = u["tool_calls"]
        parts.append(f"{n} calculator call{'s' if n != 1 else ''}")
    parts.extend(str(n) for n in u.get("notes") or ())
    if u.get("document"):
        parts.append(str(u["document"]))
    if u.get("trimmed_messages"):
        n = u["trimmed_messages"]
        parts.append(f"{n} older message{'s' if n != 1 else ''} left out to fit the context")
    return " · ".join(parts)


def last_reply(conv: list[dict]) -> int | None:
    """Index of the conversation's last turn if it is a model reply, else None."""
    for i in range(len(conv) - 1, -1, -1):
        t = conv[i]
        if t["kind"] == "note":
            continue
        return i if t["kind"] == "turn" and t["role"] == "assistant" else None
    return None


def can_continue(conv: list[dict]) -> bool:
    i = last_reply(conv)
    return (
        i is not None
        and (conv[i].get("usage") or {}).get("finish_reason") == "length"
        and bool(conv[i].get("raw") or conv[i]["content"])
    )


def continue_messages(conv: list[dict], i: int) -> list[dict]:
    """What the model sees to continue reply ``i``: the turns before it, then the reply's raw text so far."""
    before = engine_messages(conv[:i])
    return [*before, {"role": "assistant", "content": conv[i].get("raw") or conv[i]["content"]}]
