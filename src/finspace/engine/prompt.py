"""A chat request in tokens: the messages and settings checked, the prompt templated, tokenized and trimmed.

Pure: no vLLM, no engine. ``tok`` is any Hugging Face tokenizer with a chat
template (the running engine's, or a tiny one in tests). Request-size bounds are
hardening: a clear error beats an unbounded prompt.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from finspace.models.catalog import ModelEntry
from finspace.errors import BadInput, PromptTooLong
from finspace.tools import rendering as tool_prompt
from finspace.tools.spec import tool_calls as checked_calls

MAX_MESSAGES = 512
MAX_MESSAGE_CHARS = 64_000
MAX_TOTAL_CHARS = 256_000
MAX_TOKENS_CAP = 8192

ROLES = ("system", "user", "assistant")
TOOL_ROLE = "tool"  # a tool's result, after the assistant's tool_calls (the OpenAI API's tool calling)


@dataclass(frozen=True)
class ChatSettings:
    """Per-request settings; None means the catalogue's default for the model."""

    system_prompt: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()  # generation ends before any of these strings (OpenAI's "stop")
    # extra variables for the chat template (e.g. {"enable_thinking": False} for Qwen 3)
    chat_template_kwargs: dict | None = None
    # the last message is the assistant's unfinished reply: the model continues it (no new turn)
    continue_final_message: bool = False
    # a document block (finspace.documents.placing): after the system prompt, before every turn, so follow-ups
    # share the prefix; bounded by the document limits, not the message limits
    document: str | None = None
    # a JSON schema the answer must follow (vLLM's structured outputs; checked by finspace.structured first)
    json_schema: dict | None = None
    # the functions the model may call (OpenAI "tools", checked by finspace.tools.spec), rendered by the chat
    # template or written into the prompt in the catalogue's tool_parser format (finspace.tools.rendering)
    tools: tuple[dict, ...] | None = None

    @property
    def enable_thinking(self) -> bool:
        return bool((self.chat_template_kwargs or {}).get("enable_thinking", True))


def short(text: str, limit: int = 600) -> str:
    """One line of at most ``limit`` characters, for messages shown to people."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def number(name: str, value: Any, lo: float, hi: float, *, lo_open: bool = False, integer: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{name} must be a number, got {type(value).__name__}; use a value in [{lo}, {hi}]")
    if integer and (isinstance(value, float) and not value.is_integer()):
        raise BadInput(f"{name} must be a whole number, got {value}")
    if not math.isfinite(value):
        raise BadInput(f"{name} must be a finite number, got {value}; use a value in [{lo}, {hi}]")
    if value > hi or value < lo or (lo_open and value == lo):
        left = "(" if lo_open else "["
        raise BadInput(f"{name} {value} is out of range; use a value in {left}{lo}, {hi}]")
    return int(value) if integer else float(value)


def _text_of(i: int, content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            else:
                if not isinstance(part, dict):
                    raise BadInput(
                        f"message {i}'s content holds {_json_kind(part)} where a text part was expected: "
                        'send a string, or parts like {"type": "text", "text": "..."}'
                    )
                raise BadInput(
                    f"message {i} has a {str(part.get('type'))[:40]!r} part; a message takes text parts, "
                    "and one document (PDF, HTML, DOCX, XLSX, CSV, TXT, MD) as a \"file\" part on /v1 or "
                    "attached on the page; images and audio are not read"
                )
        return "\n".join(pieces)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    raise BadInput(
        f"message {i}'s content is {_json_kind(content)}; it must be text (a string), or a list of "
        'text parts like {"type": "text", "text": "..."}'
    )


def _json_kind(value: object) -> str:
    """What a caller sent, in JSON's words (never a Python type's name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "an object without a \"text\" string"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "not text"


MAX_TEMPLATE_KWARGS = 16
# Set by the server, never by a caller: the template itself (a caller's Jinja runs unbounded loops) and the
# arguments apply_chat_template takes for the conversation and the output.
SERVER_SET = (
    "chat_template",
    "messages",
    "conversation",
    "add_generation_prompt",
    "continue_final_message",
    "tokenize",
    "tools",
    "documents",
    "return_dict",
    "return_tensors",
    "padding",
    "truncation",
    "max_length",
    "tokenizer_kwargs",
)
# The chat-template variables a caller may set, per the catalogue entry's ``reasoning`` parser, and their type:
# every other name is refused, so no caller value is rendered by a template that does not expect it.
TEMPLATE_KWARGS: dict[str, dict[str, type]] = {"qwen3": {"enable_thinking": bool}}


def template_kwargs(value: Any) -> dict:
    """The chat template's extra variables, checked: a few names with plain values, none the server sets."""
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_TEMPLATE_KWARGS:
        raise BadInput(f"chat_template_kwargs must be an object of at most {MAX_TEMPLATE_KWARGS} names")
    for k, v in value.items():
        if not isinstance(k, str) or not k.isidentifier() or len(k) > 64:
            raise BadInput(f"chat_template_kwargs: {str(k)[:40]!r} is not a variable name")
        if k in SERVER_SET:
            raise BadInput(
                f"chat_template_kwargs: {k!r} is set by the server and cannot be sent; the model's own "
                f"chat template is used"
            )
        if not (v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= 1000)):
            raise BadInput(f"chat_template_kwargs[{k!r}] must be true/false, a number or short text")
    return dict(value)


def allowed_template_kwargs(entry: Any) -> dict[str, type]:
    """The template variables the catalogue allows for ``entry``'s model (``enable_thinking`` for Qwen 3)."""
    return TEMPLATE_KWARGS.get(getattr(entry, "reasoning", None) or "", {})


def check_template_kwargs(entry: Any, value: Any) -> dict:
    """``value`` checked against the model's allow-list: BadInput naming the names it takes."""
    kwargs = template_kwargs(value)
    allowed = allowed_template_kwargs(entry)
    names = ", ".join(allowed) if allowed else None
    label = getattr(entry, "key", None) or "this model"
    for k, v in kwargs.items():
        if k not in allowed:
            raise BadInput(
                f"chat_template_kwargs: {k[:40]!r} is not a variable {label}'s chat template takes; "
                + (f"allowed: {names}" if names else "it takes none: leave chat_template_kwargs out")
            )
        if not isinstance(v, allowed[k]):
            raise BadInput(
                f"chat_template_kwargs[{k!r}] must be {allowed[k].__name__ if allowed[k] is not bool else 'true or false'}"
            )
    return kwargs


def source_chars(msgs: list[dict], entry: Any, settings: ChatSettings) -> int:
    """Characters a prompt is made of before templating: the turns, the system prompt and the document."""
    system = settings.system_prompt if settings.system_prompt is not None else getattr(entry, "system_prompt", "")
    doc = settings.document if isinstance(settings.document, str) else ""
    return sum(len(m["content"]) for m in msgs) + len(system or "") + len(doc)


def rendered_limit(msgs: list[dict]) -> int:
    """The most characters a chat template may turn ``msgs`` into: the text twice over, plus room for the
    template's own tokens per turn and a fixed preamble. A template cannot amplify a caller's text past it."""
    calls = sum(len(str(m["tool_calls"])) for m in msgs if m.get("tool_calls"))
    return 2 * (sum(len(m["content"]) for m in msgs) + calls) + 256 * len(msgs) + 65_536


def normalize_messages(messages: Any, *, continue_final: bool = False) -> list[dict]:
    """OpenAI-style messages -> [{"role", "content": str}]; text parts are joined.

    Gradio 6 sends content as a string or a list of parts ``[{"type": "text", "text": ...}]``.
    """
    if not isinstance(messages, (list, tuple)):
        raise BadInput(f"messages must be a list of {{'role', 'content'}} objects, got {type(messages).__name__}")
    if not messages:
        raise BadInput("the conversation is empty; send at least one user message")
    if len(messages) > MAX_MESSAGES:
        raise BadInput(
            f"the conversation has {len(messages)} messages; the limit is {MAX_MESSAGES}. Clear the chat or start a new one"
        )
    out: list[dict] = []
    total = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadInput(f"message {i} must be an object with 'role' and 'content', got {type(m).__name__}")
        role = m.get("role")
        if role not in ROLES and role != TOOL_ROLE:
            raise BadInput(f"message {i} has role {str(role)[:40]!r}; use one of {', '.join((*ROLES, TOOL_ROLE))}")
        has_calls = role == "assistant" and m.get("tool_calls") is not None
        calls = checked_calls(i, m["tool_calls"]) if has_calls else None
        text = "" if calls and m.get("content") is None else _text_of(i, m.get("content"))
        if len(text) > MAX_MESSAGE_CHARS:
            raise BadInput(
                f"message {i} is {len(text):,} characters; the limit is {MAX_MESSAGE_CHARS:,}. Shorten it or split it"
            )
        total += len(text) + (len(str(calls)) if calls else 0)
        out.append({"role": role, "content": text, **_tool_keys(m, calls)})
    if total > MAX_TOTAL_CHARS:
        raise BadInput(f"the conversation is {total:,} characters; the limit is {MAX_TOTAL_CHARS:,}. Clear older turns")
    if continue_final:
        if out[-1]["role"] != "assistant" or not out[-1]["content"]:
            raise BadInput("to continue a reply, the last message must be the assistant's unfinished reply")
        return out
    if out[-1]["role"] == TOOL_ROLE:  # the model answers from a tool's result
        return out
    if out[-1]["role"] != "user":
        raise BadInput("the last message must be from the user (or a tool's result)")
    if not out[-1]["content"].strip():
        raise BadInput("the message is empty; type a question first")
    return out


def _tool_keys(m: dict, calls: list[dict] | None) -> dict:
    if calls:
        return {"tool_calls": calls}
    call_id = m.get("tool_call_id")
    if m.get("role") == TOOL_ROLE and isinstance(call_id, str) and call_id:
        return {"tool_call_id": call_id[:128]}
    return {}


def sampling_for(entry: ModelEntry, settings: ChatSettings, max_model_len: int) -> dict:
    """The request's sampling values, checked: the catalogue's defaults where ``settings`` leaves them None."""
    d = entry.sampling
    temperature = d.temperature if settings.temperature is None else number("temperature", settings.temperature, 0, 2)
    top_p = d.top_p if settings.top_p is None else number("top_p", settings.top_p, 0, 1, lo_open=True)
    cap = max(1, min(MAX_TOKENS_CAP, max_model_len - 1))
    if settings.max_tokens is None:
        max_tokens = min(d.max_tokens, cap)
    else:
        max_tokens = number("max_tokens", settings.max_tokens, 1, cap, integer=True)
    seed = None if settings.seed is None else number("seed", settings.seed, 0, 2**31 - 1, integer=True)
    return {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "seed": seed}


def with_system(msgs: list[dict], entry: ModelEntry, settings: ChatSettings) -> list[dict]:
    """The messages with the system prompt first (the settings', else the model's), and the settings' document
    after it."""
    doc = settings.document if isinstance(settings.document, str) and settings.document.strip() else None
    if msgs[0]["role"] == "system":
        if doc is None:
            return msgs
        return [{"role": "system", "content": f"{msgs[0]['content']}\n\n{doc}".strip()}, *msgs[1:]]
    system = entry.system_prompt if settings.system_prompt is None else settings.system_prompt
    if not isinstance(system, str):
        raise BadInput("system_prompt must be text")
    if len(system) > MAX_MESSAGE_CHARS:
        raise BadInput(f"the system prompt is {len(system):,} characters; the limit is {MAX_MESSAGE_CHARS:,}")
    if doc is not None:
        system = f"{system}\n\n{doc}".strip()
    return ([{"role": "system", "content": system}] if system.strip() else []) + msgs


def encode(tok: Any, msgs: list[dict], settings: ChatSettings | None = None, tools: list | None = None) -> list[int]:
    """Token ids of ``msgs`` through the tokenizer's chat template, with the generation prompt (or, to continue
    the final assistant message, without one) and the settings' template variables."""
    settings = settings or ChatSettings()
    cont = settings.continue_final_message
    try:
        # rendered first, bounded, then tokenized: what apply_chat_template(tokenize=True) does, with a bound
        text = tok.apply_chat_template(
            msgs,
            tokenize=False,
            add_generation_prompt=not cont,
            continue_final_message=cont,
            **({"tools": tools} if tools else {}),
            **template_kwargs(settings.chat_template_kwargs),
        )
        if not isinstance(text, str):
            raise BadInput("the model's chat template did not render text; it cannot be used for chat")
        if len(text) > rendered_limit(msgs):
            raise BadInput(
                f"the templated prompt is {len(text):,} characters, over the bound of "
                f"{rendered_limit(msgs):,} for this conversation; shorten it"
            )
        ids = tok(text, add_special_tokens=False)["input_ids"]
    except BadInput:
        raise
    except Exception as exc:
        if msgs and msgs[0]["role"] == "system" and "system" in str(exc).lower():
            # templates without a system role: fold it into the first user turn
            merged = [{"role": "user", "content": msgs[0]["content"] + "\n\n" + msgs[1]["content"]}] + msgs[2:]
            return encode(tok, merged, settings, tools)
        raise BadInput(
            f"the conversation does not fit the model's chat template: {short(str(exc), 200)}; "
            f"alternate user and assistant turns"
        ) from None
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def build_prompt(
    msgs: list[dict], entry: ModelEntry, settings: ChatSettings, max_tokens: int, tok: Any, max_model_len: int
) -> tuple[list[int], int]:
    """Token ids of the templated prompt, trimming the oldest turns to leave room for max_tokens.

    Keeps the system prompt and the last user turn; returns (ids, messages dropped). The kept tail is the
    longest that fits and starts at a user turn (fewer dropped never gets shorter). Linear in the
    conversation: it is templated once whole; each turn's text is encoded once (one batch) to estimate
    where the cut falls; then only the tails either side of the cut are templated, two when the estimate
    is right (a wrong one costs a few more, never a different answer).
    """
    msgs, tools = tool_prompt.for_template(
        tok, with_system(msgs, entry, settings), settings.tools, getattr(entry, "tool_parser", None)
    )
    budget = max_model_len - max_tokens
    ids = encode(tok, msgs, settings, tools)
    if len(ids) <= budget:
        return ids, 0
    head = msgs[:1] if msgs[0]["role"] == "system" else []
    body = msgs[len(head) :]
    starts = [i for i in range(1, len(body)) if body[i]["role"] == "user"]  # where a kept tail can begin
    tails: dict[int, list[int]] = {}

    def fits(k: int) -> bool:
        tails[k] = encode(tok, head + body[starts[k] :], settings, tools)
        return len(tails[k]) <= budget

    guess = _cut_guess(tok, msgs, len(ids), len(head), [i + len(head) for i in starts], budget)
    k = _first_true(len(starts), fits, guess)
    if k == len(starts):
        last = tails[k - 1] if starts else ids  # head + body[-1:], the last user turn alone
        raise PromptTooLong(
            f"your last message is {len(last):,} tokens with the system prompt; with max_tokens {max_tokens} "
            f"the model's context of {max_model_len:,} leaves room for {budget:,}. Shorten the message or lower max tokens"
        )
    # dropped as counted since the start: the first slice index whose tail (from the next user turn on) is this
    return tails[k], starts[k - 1] + 1 if k else 1


def _cut_guess(tok: Any, msgs: list[dict], total: int, kept: int, starts: list[int], budget: int) -> int:
    """Which of ``starts`` (indexes into ``msgs``, whose first ``kept`` stay) probably begins the longest tail
    that fits: each turn's text encoded once, in one batch, the template's own tokens spread over the turns."""
    try:
        counts = [len(t) for t in tok([m["content"] for m in msgs], add_special_tokens=False)["input_ids"]]
    except Exception:  # a tokenizer without batch encoding: about four characters a token
        counts = [len(m["content"]) // 4 for m in msgs]
    per_turn = max(0.0, (total - sum(counts)) / len(msgs))
    dropped, i = 0.0, kept
    for k, start in enumerate(starts):
        while i < start:
            dropped += counts[i] + per_turn
            i += 1
        if total - dropped <= budget:
            return k
    return len(starts) - 1


def _first_true(n: int, pred: Callable[[int], bool], guess: int) -> int:
    """The smallest k in [0, n) with pred(k), else n; pred must be monotone (False..., then True...).

    Probes ``guess`` first, then gallops away from it (1, 2, 4, ... steps) until both a False and a True
    are seen, then bisects between them: two probes when the guess is next to the answer."""
    lo, hi = 0, n  # pred is False below lo and True from hi on
    probe, step, seen = min(max(guess, 0), n - 1), 1, set()
    while lo < hi:
        ok = pred(probe)
        seen.add(ok)
        if ok:
            hi = probe
        else:
            lo = probe + 1
        if len(seen) == 2:
            probe = (lo + hi) // 2
        else:
            probe = min(max(probe - step if ok else probe + step, lo), hi - 1)
            step *= 2
    return lo
