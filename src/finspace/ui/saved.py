"""Conversations kept in the browser (gr.BrowserState), and a conversation's export with its provenance.

Nothing here is stored on the server: the page keeps ``{"current": id, "conversations": {id: {"title",
"updated", "turns"}}}`` in the browser's localStorage and sends it back with each event that needs it. What
the browser sends is not trusted: ``read_store`` checks its size and shape turn by turn (the same bounds as a
message typed on the page) and answers a clear problem instead of an exception; a bad store is replaced by an
empty one, and the page stays usable.

An export (Markdown and JSON) carries each reply's provenance as it was recorded when the reply was written:
model key, repository and revision, dtype and quantization, max context, the load ledger's record id, the
sampling settings and seed, and a timestamp per message.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

MAX_CONVERSATIONS = 50
MAX_CONVERSATION_CHARS = 1_000_000  # one conversation's text (its messages' content), as the page holds it
MAX_TIMESTAMP = 253_402_300_799  # 9999-12-31T23:59:59Z: the last second time.gmtime formats on every platform
MAX_STORE_CHARS = 1_500_000  # the whole store, as JSON: localStorage holds about 5 MB, an event body 6 MiB
MAX_TURNS = 1024
MAX_TITLE_CHARS = 80
TURN_TEXT = {"content": 64_000 * 4, "reasoning": 64_000 * 4, "raw": 64_000 * 8}
ROLES = ("user", "assistant", "system")
KINDS = ("turn", "switch", "note")
SCHEMA = "finspace-conversation/1"


class StoreProblem(ValueError):
    """Why what the browser sent can't be used (a message for the page)."""


def empty_store() -> dict:
    cid = new_id()
    return {"current": cid, "conversations": {cid: {"title": "New conversation", "updated": time.time(), "turns": []}}}


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def timestamp(v: Any) -> float | None:
    """A stored time (seconds since 1970) that time.gmtime can format, else None: what the browser sends may hold
    1e308, NaN, a negative or a huge integer, which would make every restore and export fail."""
    if not _number(v) or not 0 <= v <= MAX_TIMESTAMP:
        return None
    return float(v)


def held_chars(turns: list[dict]) -> int:
    """A conversation's text as the chat box counts it against MAX_CONVERSATION_CHARS."""
    return sum(len(t.get("content") or "") for t in turns)


def _plain(v: Any, depth: int = 0) -> bool:
    """A small JSON value: what usage, sampling and provenance may hold."""
    if v is None or isinstance(v, (bool, str)) and len(str(v)) <= 64_000 or _number(v):
        return True
    if depth < 3 and isinstance(v, dict) and len(v) <= 32:
        return all(isinstance(k, str) and len(k) <= 64 and _plain(x, depth + 1) for k, x in v.items())
    return False


def check_turn(t: Any, i: int) -> dict:
    if not isinstance(t, dict):
        raise StoreProblem(f"message {i} is not an object")
    if t.get("role") not in ROLES or t.get("kind", "turn") not in KINDS:
        raise StoreProblem(f"message {i} has an unknown role or kind")
    out = {"role": t["role"], "kind": t.get("kind", "turn"), "model": t.get("model")}
    if out["model"] is not None and (not isinstance(out["model"], str) or len(out["model"]) > 200):
        raise StoreProblem(f"message {i} has a bad model key")
    for key, limit in TURN_TEXT.items():
        v = t.get(key, "" if key == "content" else None)
        if v is None:
            continue
        if not isinstance(v, str) or len(v) > limit:
            raise StoreProblem(f"message {i}'s {key} is not text of at most {limit:,} characters")
        out[key] = v
    out["at"] = timestamp(t.get("at"))
    out["usage"] = check_usage(t.get("usage"), i)
    for key in ("sampling", "provenance"):
        v = t.get(key)
        if v is not None and not (isinstance(v, dict) and _plain(v)):
            raise StoreProblem(f"message {i}'s {key} is not a small object")
        out[key] = v
    tools = check_tools(t.get("tools"), i)
    if tools is not None:
        out["tools"] = tools
    for key in ("checks", "sources"):  # the answer's figure checks and cited pages (finspace.ui.checks)
        v = t.get(key)
        if (
            isinstance(v, list)
            and len(v) <= MAX_CHECKS
            and all(isinstance(x, dict) and _plain(x) for x in v)
            and len(json.dumps(v)) <= MAX_CHECKS_CHARS
        ):
            out[key] = v
    return out


MAX_CHECKS = 100
MAX_CHECKS_CHARS = 60_000


MAX_TOOL_STEPS = 16
TOOL_STEP_KEYS = {"name": 64, "arguments": 2000, "result": 8000}  # a filing tool's page: 1,500 tokens


def check_tools(steps: Any, i: int) -> list[dict] | None:
    """A reply's calculator steps (finspace.tools.registry.ToolStep.as_dict): a few short texts each."""
    if steps is None:
        return None
    if not isinstance(steps, list) or len(steps) > MAX_TOOL_STEPS:
        raise StoreProblem(f"message {i}'s tools is not a list of at most {MAX_TOOL_STEPS} steps")
    out = []
    for s in steps:
        if not isinstance(s, dict) or not all(
            isinstance(s.get(k), str) and len(s[k]) <= n for k, n in TOOL_STEP_KEYS.items()
        ):
            raise StoreProblem(f"message {i} has a tool step that is not name, arguments and result as short text")
        out.append({**{k: s[k] for k in TOOL_STEP_KEYS}, "ok": s.get("ok") is not False})
    return out


USAGE_INTS = ("prompt_tokens", "output_tokens", "trimmed_messages", "continued", "tool_calls")
USAGE_NUMBERS = ("tokens_per_s", "first_token_s")


def check_usage(u: Any, i: int) -> dict | None:
    """A reply's usage line as the page shows it: known counts only, each a number (never trusted as is)."""
    if u is None:
        return None
    if not isinstance(u, dict):
        raise StoreProblem(f"message {i}'s usage is not an object")
    out: dict = {}
    for k in USAGE_INTS:
        v = u.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 10**9:
            raise StoreProblem(f"message {i}'s usage {k} is not a count")
        out[k] = v
    for k in USAGE_NUMBERS:
        v = u.get(k)
        if v is not None and (not _number(v) or v < 0):
            raise StoreProblem(f"message {i}'s usage {k} is not a number")
        out[k] = v
    reason = u.get("finish_reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 20):
        raise StoreProblem(f"message {i}'s usage finish_reason is not a short text")
    out["finish_reason"] = reason
    document = u.get("document")  # "document: 12 of 40 pages (5 passages)"
    if isinstance(document, str) and len(document) <= 600:  # it names the pages given
        out["document"] = document
    return out


def check_turns(turns: Any) -> list[dict]:
    if not isinstance(turns, list) or len(turns) > MAX_TURNS:
        raise StoreProblem(f"a conversation must be a list of at most {MAX_TURNS} messages")
    return [check_turn(t, i) for i, t in enumerate(turns)]


def read_store(raw: Any) -> tuple[dict, str | None]:
    """The browser's store, checked: (store, None), or (a fresh store, why the old one was dropped)."""
    if raw is None or raw == {} or raw == "":
        return empty_store(), None
    try:
        size = len(json.dumps(raw))
    except (TypeError, ValueError):
        return empty_store(), "The conversations saved in this browser could not be read (not JSON); started a new one."
    if size > MAX_STORE_CHARS:
        return empty_store(), (
            f"The conversations saved in this browser are too large ({size:,} characters; the "
            f"limit is {MAX_STORE_CHARS:,}); started a new one."
        )
    try:
        if not isinstance(raw, dict) or not isinstance(raw.get("conversations"), dict):
            raise StoreProblem("no conversation list")
        convs = raw["conversations"]
        if len(convs) > MAX_CONVERSATIONS:
            raise StoreProblem(f"more than {MAX_CONVERSATIONS} conversations")
        out, notes = _read_conversations(convs)
    except StoreProblem as exc:
        return empty_store(), f"The conversations saved in this browser could not be read ({exc}); started a new one."
    note = " ".join(notes) or None
    if not out:
        return empty_store(), note
    current = raw.get("current")
    if current not in out:
        current = max(out, key=lambda k: out[k]["updated"])
    return {"current": current, "conversations": out}, note


def _read_conversations(convs: dict) -> tuple[dict, list[str]]:
    """Each stored conversation checked: (the kept ones, notes on what was dropped or repaired)."""
    out, too_long, repaired = {}, [], 0
    for cid, c in convs.items():
        if not isinstance(cid, str) or not cid.isalnum() or len(cid) > 40 or not isinstance(c, dict):
            raise StoreProblem("a conversation has a bad id")
        title = c.get("title")
        if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE_CHARS:
            raise StoreProblem(f"conversation {cid} has a bad title")
        turns = check_turns(c.get("turns"))
        if held_chars(turns) > MAX_CONVERSATION_CHARS:  # the chat box would refuse to continue it
            too_long.append(title)
            continue
        updated = timestamp(c.get("updated"))
        raw_times = [c.get("updated"), *(t.get("at") for t in c.get("turns") or () if isinstance(t, dict))]
        repaired += sum(v is not None and timestamp(v) is None for v in raw_times)
        out[cid] = {"title": title, "updated": 0.0 if updated is None else updated, "turns": turns}
    notes = []
    if too_long:
        notes.append(
            f"{len(too_long)} saved conversation(s) were longer than {MAX_CONVERSATION_CHARS:,} characters, "
            f"the limit, and were dropped ({', '.join(repr(t) for t in too_long[:3])})."
        )
    if repaired:
        notes.append(f"{repaired} saved time(s) were out of range and were cleared.")
    return out, notes


def put(store: dict, turns: list[dict]) -> tuple[dict, str | None]:
    """The store with the current conversation's turns saved; the oldest others go when it grows too large."""
    convs = dict(store["conversations"])
    cid = store["current"]
    old = convs.get(cid) or {"title": "New conversation"}
    title = old["title"] if old["title"] != "New conversation" else title_for(turns)
    convs[cid] = {"title": title, "updated": time.time(), "turns": turns}
    out = {"current": cid, "conversations": convs}
    while len(json.dumps(out)) > MAX_STORE_CHARS and len(convs) > 1:
        oldest = min((k for k in convs if k != cid), key=lambda k: convs[k]["updated"])
        del convs[oldest]
    if len(json.dumps(out)) > MAX_STORE_CHARS:
        convs[cid] = {**convs[cid], "turns": []}
        return out, (
            "This conversation is too large to keep in this browser: it stays on the page until you "
            "leave; export it to keep it."
        )
    return out, None


def title_for(turns: list[dict]) -> str:
    first = next((t["content"] for t in turns if t["kind"] == "turn" and t["role"] == "user"), "")
    first = " ".join(first.split())
    return (first[: MAX_TITLE_CHARS - 1] + "…" if len(first) > MAX_TITLE_CHARS else first) or "New conversation"


def choices(store: dict) -> list[tuple[str, str]]:
    """(label, id) for the picker, newest first."""
    items = sorted(store["conversations"].items(), key=lambda kv: -kv[1]["updated"])
    return [(f"{c['title']} · {_when(c['updated'])}", cid) for cid, c in items]


def _when(ts: Any) -> str:
    ts = timestamp(ts)
    return time.strftime("%d %b %H:%M", time.gmtime(ts)) if ts is not None else "undated"


# ------------------------------------------------------------------ export
def _iso(ts: Any) -> str | None:
    ts = timestamp(ts)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts is not None else None


def export_json(title: str, turns: list[dict]) -> dict:
    messages = []
    for t in turns:
        m = {"role": t["role"], "kind": t["kind"], "content": t.get("content", ""), "at": _iso(t.get("at"))}
        if t["role"] == "assistant" and t["kind"] == "turn":
            m.update(
                model=t.get("model"),
                thinking=t.get("reasoning") or None,
                usage=t.get("usage"),
                sampling=t.get("sampling"),
                provenance=t.get("provenance"),
                tools=t.get("tools") or None,
                checks=t.get("checks") or None,
                sources=t.get("sources") or None,
            )
        messages.append(m)
    models = {}
    for t in turns:
        p = t.get("provenance")
        if isinstance(p, dict) and p.get("model_key"):
            models[p["model_key"]] = p
    return {
        "schema": SCHEMA,
        "title": title,
        "exported_at": _iso(time.time()),
        "models": list(models.values()),
        "messages": messages,
    }


def export_markdown(doc: dict) -> str:
    lines = [f"# {doc['title']}", "", f"Exported {doc['exported_at']} from finspace.", ""]
    for p in doc["models"]:
        lines += [
            f"- **{p.get('label') or p.get('model_key')}** (`{p.get('model_key')}`): {p.get('repo')}"
            f"@{p.get('revision') or 'main'}, dtype {p.get('dtype')}, quantization {p.get('quantization')}, "
            f"max context {p.get('max_model_len')}, load record `{p.get('load_record_id')}`"
        ]
    lines.append("")
    for m in doc["messages"]:
        if m["kind"] != "turn":
            lines += [f"*{m['content']}*", ""]
            continue
        head = f"## {'You' if m['role'] == 'user' else 'Assistant'} · {m['at']}"
        if m["role"] == "assistant":
            s = m.get("sampling") or {}
            head += (
                f" · `{m.get('model')}` · temperature {s.get('temperature')}, top-p {s.get('top_p')}, "
                f"max tokens {s.get('max_tokens')}, seed {s.get('seed')}"
            )
        lines += [head, ""]
        if m.get("thinking"):
            lines += ["<details><summary>Thinking</summary>", "", m["thinking"].strip(), "", "</details>", ""]
        for step in m.get("tools") or ():
            lines += [
                f"<details><summary>Tool: {step['name']}</summary>",
                "",
                f"`{step['arguments']}` → **{step['result']}**",
                "",
                "</details>",
                "",
            ]
        lines += [m["content"], ""]
        for c in m.get("checks") or ():
            where = f"{c.get('document')} p. {c.get('page')}" if c.get("page") else "uncited"
            lines.append(
                f"- {c.get('symbol')} {c.get('figure')} ({where}): {c.get('label_text')}"
                + (f"; the page prints {c['printed']}" if c.get("printed") else "")
                + (f"; \"{c['quote']}\"" if c.get("quote") else "")
            )
        if m.get("checks"):
            lines.append("")
    return "\n".join(lines)
