"""The chat column's components: the conversation, its input and buttons, the settings (``layout``).

``finspace.ui.chat_panel`` wires their events; the settings' bounds (seed, max tokens) are checked there.
"""

from __future__ import annotations

import html
from typing import Any

import gradio as gr

from finspace.models.catalog import Sampling
from finspace.service import MAX_TOKENS_CAP, Service
from finspace.ui.documents import FILE_TYPES

SEED_MAX = 2**31 - 1
CALCULATOR_CHOICES = [("Off", "off"), ("When the model asks", "auto"), ("Always first", "always")]
# LaTeX between \( \), \[ \] and $$ only: a single $ is a currency sign ("$5 and $10" stays text)
LATEX_DELIMITERS = [
    {"left": "$$", "right": "$$", "display": True},
    {"left": "\\[", "right": "\\]", "display": True},
    {"left": "\\(", "right": "\\)", "display": False},
]


def layout(svc: Service, default_entry: Any) -> dict[str, Any]:
    """The chat column's components, by name: the conversation, its input and buttons, the settings."""
    c: dict[str, Any] = {}
    _conversation(c)
    _input(c)
    if svc.settings.disclaimer:
        gr.Markdown(html.escape(svc.settings.disclaimer), elem_id="disclaimer")
    _settings(c, svc, default_entry)
    return c


def _conversation(c: dict[str, Any]) -> None:
    """The conversation and its documents."""
    c["conv"] = gr.State([])  # this session's conversation (finspace.ui.chat turns)
    c["chatbot"] = gr.Chatbot(
        label="Conversation",
        elem_id="chatbot",
        height=520,
        buttons=["copy", "copy_all"],
        placeholder="Ask about a balance sheet, a bond, a ratio…",
        feedback_options=None,
        group_consecutive_messages=False,
        latex_delimiters=LATEX_DELIMITERS,
    )
    c["notice"] = gr.Markdown(elem_id="chat-notice")
    c["doc"] = gr.State(None)  # the conversation's documents (a list of finspace.documents.desk.Attached states)
    c["doc_fit"] = gr.Markdown(elem_id="doc-fit")
    c["doc_list"] = gr.CheckboxGroup(
        [],
        value=[],
        visible=False,
        elem_id="doc-list",
        interactive=True,
        label="Documents in this conversation, by id (uncheck one to remove it)",
    )


def _input(c: dict[str, Any]) -> None:
    """The message box (a filing attaches here) and the buttons under it."""
    with gr.Row():
        c["msg"] = gr.MultimodalTextbox(
            placeholder="Type a question and press Enter; attach a filing (PDF, HTML, DOCX, XLSX, CSV, TXT, MD) "
            "to ask about it",
            show_label=False,
            scale=8,
            elem_id="chat-input",
            max_lines=8,
            autofocus=True,
            file_types=FILE_TYPES,
            file_count="single",
            sources=["upload"],
        )
        c["send"] = gr.Button("Send", variant="primary", scale=1, min_width=80, elem_id="send")
        c["stop"] = gr.Button("Stop", variant="stop", scale=1, min_width=80, elem_id="stop")
    with gr.Row():
        c["regen"] = gr.Button("↻ Regenerate", size="sm", elem_id="regenerate")
        c["cont"] = gr.Button("Continue ▸", size="sm", elem_id="continue", visible=False)
        c["clear"] = gr.Button("Clear", size="sm", elem_id="clear")


def _settings(c: dict[str, Any], svc: Service, default_entry: Any) -> None:
    """The Settings accordion: preset, system prompt, thinking, tools, sampling."""
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        c["preset"] = gr.Dropdown(
            label="Preset (fills the system prompt)",
            choices=svc.presets.labels(),
            value=None,
            elem_id="preset",
            interactive=True,
        )
        c["system_prompt"] = gr.Textbox(
            label="System prompt", lines=3, elem_id="system-prompt", placeholder="Empty: the model's own system prompt"
        )
        c["think"] = gr.Checkbox(
            value=True, label="Think before answering (reasoning models such as Qwen 3)", elem_id="think"
        )
        c["calculator"] = gr.Radio(
            CALCULATOR_CHOICES,
            value="auto",
            elem_id="calculator",
            label="Tools (models with a tool parser): the calculator for arithmetic; with filings "
            "attached, search and read them (forced first: a search)",
        )
        sampling = default_entry.sampling if default_entry is not None else Sampling()
        with gr.Row():
            c["temperature"] = gr.Slider(
                0.0, 2.0, value=sampling.temperature, step=0.05, label="Temperature", elem_id="temperature"
            )
            c["top_p"] = gr.Slider(0.05, 1.0, value=sampling.top_p, step=0.01, label="Top-p", elem_id="top-p")
        with gr.Row():
            c["max_tokens"] = gr.Slider(
                1,
                MAX_TOKENS_CAP,
                value=sampling.max_tokens,
                step=1,
                label="Max tokens (capped by the model's context)",
                elem_id="max-tokens",
            )
            c["seed"] = gr.Number(
                value=None, label=f"Seed (empty: random; 0 to {SEED_MAX})", precision=0, elem_id="seed"
            )
