"""One item as chat messages: the same short prompt for every model, recorded by its PROMPT_FORMAT id.

The default CPU model has 2,048 tokens of context, so the context is cut to a character budget
(``max_context_chars``, default 3,000: about 1,000 tokens of filing text) at a line end, with a note
saying so; the table comes first in every context, so a cut keeps the numbers. Change the wording and
PROMPT_FORMAT changes too: results with different formats are not comparable.
"""

from __future__ import annotations

from finspace.errors import BadInput
from finspace.scoreboard.formats import EvalItem

PROMPT_FORMAT = "finspace-eval-v1"
# The same prompt, and the model may call the built-in calculator (finspace.engine.tool_loop) before it answers:
# stored and shown as its own rows, so the calculator's effect is measured per model.
PROMPT_FORMAT_CALC = "finspace-eval-v1+calc"
# FinanceBench over each question's whole filing (its PDF, finspace.scoreboard.pdfs), answered as the chat answers with a
# document attached (finspace.scoreboard.filings): the passages that fit the model's context, one shot; or the filing
# tools (outline, search, read_page, filer_facts, calculate) for a model with a tool parser
PROMPT_FORMAT_FILING = "finspace-eval-v1+filing"
PROMPT_FORMAT_FILING_TOOLS = "finspace-eval-v1+filing-tools"
FILING_FORMATS = (PROMPT_FORMAT_FILING, PROMPT_FORMAT_FILING_TOOLS)
FORMATS = (PROMPT_FORMAT, PROMPT_FORMAT_CALC, *FILING_FORMATS)
CALC_NOTE = " For any arithmetic, call the calculate tool and use its result."
DEFAULT_CONTEXT_CHARS = 3000
MIN_CONTEXT_CHARS = 200

SYSTEM = (
    "You are a careful financial analyst. Answer the question from the context only. "
    "Reason briefly if you need to, then end with one final line: Answer: <value>"
)

HINTS = {
    "finqa": "Give the final answer as one number (a percentage with %), or yes or no.",
    "tatqa": (
        "Give the answer as the text or number it is; after a number put its scale (thousand, "
        "million or billion) or %; separate several answers with '; '."
    ),
    "financebench": (
        "Give the figure with its unit, or a short answer. If the context does not hold the answer, say so."
    ),
}


FILING_SYSTEM = (
    "You are a careful financial analyst. Answer the question from the filing's pages given to you only, "
    "citing the page. Reason briefly if you need to, then end with one final line: Answer: <value>"
)
FILING_TOOLS_NOTE = " Use the tools to find and read the pages that hold the answer before you answer."


def filing_messages(item: EvalItem, prompt_format: str) -> list[dict]:
    """A FinanceBench item over its whole filing: the instructions as the system prompt (the filing's passages, or
    the tools' preamble, go after it) and the question alone as the user's message (what the passages are
    chosen for)."""
    if prompt_format not in FILING_FORMATS:
        raise BadInput(f"prompt format {str(prompt_format)[:60]!r} is not one of {', '.join(FILING_FORMATS)}")
    system = FILING_SYSTEM + (FILING_TOOLS_NOTE if prompt_format == PROMPT_FORMAT_FILING_TOOLS else "")
    return [
        {"role": "system", "content": f"{system} {HINTS['financebench']}"},
        {"role": "user", "content": item.question},
    ]


def trim_context(text: str, max_chars: int) -> str:
    """``text`` when it fits in ``max_chars``; else its head, cut at a line end, and a note of the cut."""
    if len(text) <= max_chars:
        return text
    note = f"\n[context cut to {max_chars:,} of {len(text):,} characters]"
    room = max(max_chars - len(note), 0)
    head = text[:room]
    cut = head.rfind("\n")
    if cut > room // 2:
        head = head[:cut]
    return head.rstrip() + note


def check_format(value: object) -> str:
    """A prompt format id (None: the plain one); BadInput naming the ones there are."""
    if value is None:
        return PROMPT_FORMAT
    if value not in FORMATS:
        raise BadInput(f"prompt format {str(value)[:60]!r} is not one of {', '.join(FORMATS)}")
    return str(value)


def messages(
    evalset_name: str,
    item: EvalItem,
    *,
    max_context_chars: int = DEFAULT_CONTEXT_CHARS,
    prompt_format: str = PROMPT_FORMAT,
) -> list[dict]:
    """System and user messages for one item: the context (cut to ``max_context_chars``), the question, and
    the instruction to end with a line ``Answer: <value>`` (with the calculator format, to use the tool)."""
    hint = HINTS.get(evalset_name)
    if hint is None:
        raise BadInput(f"unknown eval set {str(evalset_name)[:60]!r}: choose one of {', '.join(HINTS)}")
    if (
        isinstance(max_context_chars, bool)
        or not isinstance(max_context_chars, int)
        or max_context_chars < MIN_CONTEXT_CHARS
    ):
        raise BadInput(f"max_context_chars must be a whole number of at least {MIN_CONTEXT_CHARS}")
    context = trim_context(item.context, max_context_chars)
    user = f"Context:\n{context}\n\nQuestion: {item.question}\n\n{hint}\nEnd with the line: Answer: <value>"
    system = SYSTEM + (CALC_NOTE if prompt_format == PROMPT_FORMAT_CALC else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
