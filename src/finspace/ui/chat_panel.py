"""The chat column of the page: its events over the components ``finspace.ui.chat_layout`` lays out.

A reply streams through ``stream_into``: a reasoning model's thinking fills a
collapsible "Thinking" message above the answer (finspace.engine.reasoning splits
it), the answer below it, and when it ends a usage line goes under it (tokens,
tokens/s, time to first token, why it stopped, turns left out). A reply stopped
at max tokens shows Continue, which extends that same reply. Only answers go
back to the model in later turns. Settings are checked before anything is
stored: a bad seed or an unknown preset is a clear message, the page stays usable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import logging
import time
from typing import Any

import gradio as gr

from finspace.documents import desk as docs
from finspace.engine.prompt import allowed_template_kwargs
from finspace.errors import BadInput, FinspaceError
from finspace.service import MAX_TOKENS_CAP, ChatInfo, ChatSettings, Service
from finspace.ui import chat as convo
from finspace.ui import saved
from finspace.ui.api import CHAT_CONCURRENCY_ID, stream_parts
from finspace.ui.chat_layout import SEED_MAX, layout
from finspace.ui.conversations import build_conversations
from finspace.ui.documents import (
    build_attach,
    build_remove,
    doc_list,
    fit_table,
    message_file,
    message_text,
    takes_document,
)

log = logging.getLogger("finspace.ui")

MAX_CONVERSATION_CHARS = saved.MAX_CONVERSATION_CHARS  # one session's conversation held on the server


def parse_seed(value: Any) -> int | None:
    """The seed box: empty for a random seed, else a whole number in [0, 2**31 - 1] (BadInput otherwise)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or (isinstance(value, float) and not value.is_integer())
        or not 0 <= value <= SEED_MAX
    ):
        raise BadInput(
            f"Seed must be a whole number from 0 to {SEED_MAX:,} (empty for a random seed); got {str(value)[:40]}"
        )
    return int(value)


def settings_from(
    engine: Any, sp: Any, temp: Any, mt: Any, top_p: Any = None, seed: Any = None, think: Any = True
) -> ChatSettings:
    """The page's settings as ChatSettings; max tokens clamped to the model's context, the seed checked."""
    cap = max(1, min(MAX_TOKENS_CAP, (engine.max_model_len or 2) - 1))
    try:
        mt = max(1, min(int(mt), cap))
    except (TypeError, ValueError, OverflowError):
        mt = None
    ok_top_p = isinstance(top_p, (int, float)) and not isinstance(top_p, bool) and 0 < top_p <= 1
    return ChatSettings(
        system_prompt=(sp or None) if isinstance(sp, str) else None,
        temperature=temp if isinstance(temp, (int, float)) and not isinstance(temp, bool) else None,
        max_tokens=mt,
        top_p=float(top_p) if ok_top_p else None,
        seed=parse_seed(seed),
        chat_template_kwargs=(
            {"enable_thinking": think if isinstance(think, bool) else True} if thinks(engine.entry) else None
        ),
    )


def thinks(entry: Any) -> bool:
    """Whether the model's chat template takes enable_thinking (the catalogue's allow-list: Qwen 3)."""
    return entry is not None and allowed_template_kwargs(entry).get("enable_thinking") is bool


def effective_sampling(entry: Any, s: ChatSettings) -> dict:
    """What a reply was sampled with (the model's defaults where the page left a value empty), for its record."""
    d = entry.sampling if entry is not None else None

    def pick(v: Any, name: str) -> Any:
        return v if v is not None else (getattr(d, name) if d is not None else None)

    return {
        "temperature": pick(s.temperature, "temperature"),
        "top_p": pick(s.top_p, "top_p"),
        "max_tokens": pick(s.max_tokens, "max_tokens"),
        "seed": s.seed,
        "enable_thinking": s.enable_thinking if entry is not None and entry.reasoning else None,
        "system_prompt": s.system_prompt if s.system_prompt is not None else (entry.system_prompt if entry else None),
    }


def build_chat(svc: Service, default_entry: Any, chat_concurrency: int, demo: gr.Blocks) -> dict:
    """The chat column's components and events (call inside a gr.Column); returns the components by name, with
    ``chat_events`` (the events that change the conversation) and ``register_restore`` (see build_conversations)."""
    handlers = ChatHandlers(svc)
    c = layout(svc, default_entry)
    c["chat_events"] = wire_events(c, handlers, chat_concurrency)
    c["register_restore"] = build_conversations(demo, c, svc)
    return c


def clear_chat():
    return [], [], gr.update(visible=False), None, "", gr.update(choices=[], value=[], visible=False)


class ChatHandlers:
    """The chat column's event handlers over one Service. Each reply streams through ``stream_into``, which
    yields the four outputs (chatbot, conversation, message box, Continue); a handler that refuses (a bad
    setting, nothing to regenerate) warns and yields ``skip4``. Each takes the conversation's document state as
    its last input (optional: finspace.wall.guard pads it for callers of the earlier inputs)."""

    def __init__(self, svc: Service):
        self.svc, self.serving = svc, svc.serving
        self.provenance = svc.provenance
        self.attach = build_attach(svc)
        self.remove = build_remove(svc)
        self.skip4 = (gr.skip(), gr.skip(), gr.skip(), gr.skip())

    async def stream_into(
        self,
        conv_: list[dict],
        settings: ChatSettings,
        first_msg: Any,
        at: int | None = None,
        doc_state: Any = None,
        calculator: Any = "auto",
    ):
        """Stream a reply into conv_ (a new one, or turn ``at`` continued), yielding the four outputs; the
        conversation's document (``doc_state``) goes before it, whole or as the passages that fit."""
        entry = self.serving.entry
        attached = docs.attached_list(doc_state)
        if at is None:
            reply = convo.turn("assistant", "", model=entry.key if entry is not None else None)
            reply.update(
                reasoning="",
                raw="",
                usage=None,
                sampling=effective_sampling(entry, settings),
                provenance=self.provenance(),
            )
            messages = convo.engine_messages(conv_)
            conv_.append(reply)
        else:
            reply = conv_[at]
            messages = convo.continue_messages(conv_, at)
        base_thinking, base_answer, base_raw = reply.get("reasoning") or "", reply["content"], reply.get("raw") or ""
        previous, reply["usage"] = reply.get("usage"), None
        info, started = ChatInfo(), time.monotonic()
        calculator = calculator if calculator in ("off", "always") else "auto"  # null (an older caller): on
        if at is not None:
            calculator = "off"  # a continued reply goes on writing its answer
        hide = gr.update(visible=False)
        yield convo.display(conv_), conv_, first_msg, hide
        try:
            async with contextlib.aclosing(
                stream_parts(self.svc, messages, settings, info, calculator, attached)
            ) as parts:
                async for thinking, answer in parts:
                    reply["reasoning"] = base_thinking + thinking
                    reply["content"] = base_answer + answer if base_answer else answer.lstrip()
                    if info.tool_steps:  # the calculator's calls, shown as steps above the answer
                        reply["tools"] = [step.as_dict() for step in info.tool_steps]
                    yield convo.display(conv_), conv_, gr.skip(), gr.skip()
            reply["raw"] = base_raw + info.text
            reply["usage"] = convo.usage(info, started, time.monotonic(), previous if at is not None else None)
            reply["usage"]["document"] = info.documents
            if attached and reply["content"]:  # each cited figure against its page, and the pages (Sources)
                reply.update(await self.svc.check_answer(reply["content"], attached))
            if info.tool_steps:
                reply["tools"] = [step.as_dict() for step in info.tool_steps]
            yield convo.display(conv_), conv_, gr.skip(), gr.update(visible=convo.can_continue(conv_))
        except FinspaceError as exc:
            text = self.svc.redact(str(exc))
            conv_.append(convo.note(f"⚠ {text}"))
            gr.Warning(html.escape(text))
            yield convo.display(conv_), conv_, gr.skip(), hide
        except Exception as exc:  # noqa: BLE001
            log.exception("chat failed")
            conv_.append(convo.note(f"⚠ unexpected server error ({type(exc).__name__}); try again"))
            yield convo.display(conv_), conv_, gr.skip(), hide
        finally:
            reply["raw"] = base_raw + info.text  # also when stopped halfway: what was written is kept

    def mark_switch(self, conv_: list[dict]) -> None:
        entry = self.serving.entry
        if entry is not None and convo.needs_switch_marker(conv_, entry.key):
            conv_.append(convo.switch_marker(entry.key, entry.label))

    def checked_settings(self, *values) -> ChatSettings | None:
        try:
            return settings_from(self.serving, *values)
        except BadInput as exc:
            gr.Warning(html.escape(str(exc)))
            return None

    @takes_document
    async def respond(self, message, conv_, request: gr.Request, *values):
        """A question, with a document attached or not: the document is converted and its fit table shown first
        (finspace.ui.documents); outputs: the chat's four, then the document state and its fit table. Inputs: the
        message, the conversation, the six settings, the document state."""
        *values, doc_state, calculator = values
        text, skip2 = message_text(message), (gr.skip(), gr.skip(), gr.skip())
        if message_file(message) is not None:
            try:  # the table leaves room for the reply the settings ask for
                fit_settings = settings_from(self.serving, *values)
            except BadInput:
                fit_settings = None
            attached = await self.attach(message, self.svc.client_of(request), doc_state, fit_settings)
            if attached is None:  # refused: its reason is shown, the file is gone, the question stays
                yield gr.skip(), gr.skip(), {"text": text, "files": []}, gr.skip(), gr.skip(), gr.skip(), gr.skip()
                return
            doc_state, table = attached
            yield (
                gr.skip(),
                gr.skip(),
                {"text": text, "files": []},
                gr.skip(),
                doc_state,
                table,
                doc_list(docs.attached_list(doc_state)),
            )
        if not text.strip() and doc_state is not None:
            return  # a document attached without a question: its fit table is the answer
        problem = convo.message_problem(text, conv_, MAX_CONVERSATION_CHARS)
        settings = self.checked_settings(*values) if problem is None else None
        if problem is not None:
            gr.Warning(problem)
        if settings is None:
            yield (*self.skip4, *skip2)
            return
        if doc_state is not None and message_file(message) is None:  # the settings may have changed since
            yield (*self.skip4, gr.skip(), fit_table(self.svc, doc_state, settings), gr.skip())
        conv_ = list(conv_ or [])
        self.mark_switch(conv_)
        conv_.append(convo.turn("user", text))
        async for out in self.stream_into(conv_, settings, "", doc_state=doc_state, calculator=calculator):
            yield (*out, *skip2)

    async def regenerate(self, conv_, *values):
        *values, doc_state, calculator = values
        conv_, last = convo.strip_last_reply(list(conv_ or []))
        if last is None:
            gr.Warning("Nothing to regenerate yet: send a message first.")
            yield self.skip4
            return
        settings = self.checked_settings(*values)
        if settings is None:
            yield self.skip4
            return
        self.mark_switch(conv_)
        async for out in self.stream_into(conv_, settings, gr.skip(), doc_state=doc_state, calculator=calculator):
            yield out

    async def continue_reply(self, conv_, *values):
        *values, doc_state, _calculator = values
        conv_ = list(conv_ or [])
        at = convo.last_reply(conv_)
        entry = self.serving.entry
        if not convo.can_continue(conv_):
            gr.Warning("Nothing to continue: the last reply was not stopped at max tokens.")
            yield self.skip4
            return
        if entry is None or conv_[at].get("model") != entry.key:
            gr.Warning("The model changed since this reply; press Regenerate for a new one.")
            yield self.skip4
            return
        settings = self.checked_settings(*values)
        if settings is None:
            yield self.skip4
            return
        async for out in self.stream_into(
            conv_, dataclasses.replace(settings, continue_final_message=True), gr.skip(), at=at, doc_state=doc_state
        ):
            yield out

    def apply_preset(self, label):
        if label is None or label == "":
            return gr.skip()
        try:
            return self.svc.presets.by_label(label).system_prompt
        except BadInput as exc:
            gr.Warning(html.escape(str(exc)))
            return gr.skip()

    for _fn in (respond, regenerate, continue_reply):  # the document state and the calculator, last: callers of
        _fn.finspace_optional_inputs = 2  # the earlier inputs keep working (finspace.wall.guard pads null)
    del _fn


def wire_events(c: dict[str, Any], h: ChatHandlers, chat_concurrency: int) -> list:
    """The chat column's events, in the page's order (Gradio numbers them as registered); returns the events
    that change the conversation (send, Enter, Regenerate, Continue, Clear, the chatbot's clear)."""
    chatbot, conv, msg, cont, doc = c["chatbot"], c["conv"], c["msg"], c["cont"], c["doc"]
    settings_in = [c["system_prompt"], c["temperature"], c["max_tokens"], c["top_p"], c["seed"], c["think"]]
    respond = h.respond
    common = dict(
        outputs=[chatbot, conv, msg, cont],
        concurrency_limit=chat_concurrency,
        concurrency_id=CHAT_CONCURRENCY_ID,
        api_visibility="private",
        show_progress="minimal",
    )
    asking = {**common, "outputs": [chatbot, conv, msg, cont, doc, c["doc_fit"], c["doc_list"]]}
    calc = c["calculator"]
    ev_submit = msg.submit(respond, inputs=[msg, conv, *settings_in, doc, calc], **asking)
    ev_send = c["send"].click(respond, inputs=[msg, conv, *settings_in, doc, calc], **asking)
    ev_regen = c["regen"].click(h.regenerate, inputs=[conv, *settings_in, doc, calc], **common)
    ev_cont = cont.click(h.continue_reply, inputs=[conv, *settings_in, doc, calc], **common)
    c["stop"].click(None, cancels=[ev_submit, ev_send, ev_regen, ev_cont], api_visibility="private")
    cleared = [chatbot, conv, cont, doc, c["doc_fit"], c["doc_list"]]
    c["doc_list"].input(
        h.remove,
        inputs=[c["doc_list"], doc],
        outputs=[doc, c["doc_fit"], c["doc_list"]],
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )
    ev_clear = c["clear"].click(clear_chat, outputs=cleared, api_visibility="private", concurrency_limit=None)
    ev_clear2 = chatbot.clear(clear_chat, outputs=cleared, api_visibility="private", concurrency_limit=None)
    c["preset"].change(
        h.apply_preset,
        inputs=[c["preset"]],
        outputs=[c["system_prompt"]],
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )
    return [ev_submit, ev_send, ev_regen, ev_cont, ev_clear, ev_clear2]
