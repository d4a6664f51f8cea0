"""The chat's tools over its filings, for Service (every door reaches them through it): which tools a reply
offers, how their calls run (finspace.grounding.calls), how many tokens a result may take, and what goes before
the documents' block (their ids, and for a long context their outlines, so the first call can already aim).

The filing tools (outline, search, read_page, filer_facts) are offered beside the calculator when documents are
attached, the model has a tool parser, and its context holds their results (``FILING_TOOLS_MIN_CONTEXT``); a
smaller model keeps the one-shot passages, unless its first round is forced ("always": the first call is a
search).
"""

from __future__ import annotations

from typing import Any

from finspace.documents import desk as docs
from finspace.engine import tool_loop
from finspace.engine.api import EngineAPI, ServingState
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.grounding.calls import runner
from finspace.grounding.library import approx_tokens
from finspace.grounding.outline import outline
from finspace.tools import filing
from finspace.tools import registry

FILING_TOOLS_MIN_CONTEXT = 4096  # a model with a shorter context keeps the one-shot passages (unless forced)
OUTLINES_MIN_CONTEXT = 16384  # with the filing tools, a context this long gets the outlines in the system prompt
RESULT_SHARE = 8  # a tool result may take 1/8 of the context
RESULT_TOKENS = (128, 1_500)  # within these bounds


def filing_tools(engine: ServingState, calculator: str, documents: Any) -> bool:
    """Whether a reply offers the filing tools (see the module's docstring)."""
    return (
        bool(documents)
        and calculator in ("auto", "always")
        and tool_loop.offered(engine)
        and (calculator == "always" or (engine.max_model_len or 0) >= FILING_TOOLS_MIN_CONTEXT)
    )


def result_tokens(engine: ServingState) -> int:
    """The tokens one filing tool's result may take: an eighth of the context, within ``RESULT_TOKENS``."""
    lo, hi = RESULT_TOKENS
    return max(lo, min(hi, (engine.max_model_len or 0) // RESULT_SHARE))


def counter(engine: ServingState):
    """Tokens of a text in the serving model's tokenizer (a table's digits cost more than 4 characters a token),
    else about four characters a token (a remote endpoint)."""
    tok = getattr(engine, "tokenizer", None)
    if tok is None:
        return approx_tokens
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def chat_tools(engine: ServingState, calculator: str = "off", documents: Any = None) -> tuple[dict, ...] | None:
    """The tool specs a reply offers (None: none): the calculator, and the filing tools when offered."""
    if calculator in ("auto", "always") and tool_loop.offered(engine):
        more = filing.specs() if filing_tools(engine, calculator, documents) else []
        return (*registry.builtin_specs(), *more)
    return None


def preamble(engine: ServingState, documents: list) -> str:
    """Before the documents' block: the documents' ids for the tools, and for a context of
    ``OUTLINES_MIN_CONTEXT`` or more each filing's outline."""
    text = (
        "Tools over the documents: outline, search, read_page, filer_facts; the documents' ids: "
        + ", ".join(a.ident for a in documents)
        + "."
    )
    ctx = engine.max_model_len or 0
    if ctx >= OUTLINES_MIN_CONTEXT:
        each = max(100, min(600, ctx // (8 * len(documents))))
        text += "\n\n" + "\n\n".join(outline(a.doc, a.ident).render(each) for a in documents)
    return text


def chat_parts(
    engine: EngineAPI,
    messages: Any,
    settings: ChatSettings,
    info: ChatInfo,
    *,
    calculator: str = "off",
    documents: Any = None,
    max_rounds: int = tool_loop.MAX_ROUNDS,
):
    """The reply's (thinking, answer) deltas, with the tools ``chat_tools`` offers run between rounds."""
    if not (calculator in ("auto", "always") and tool_loop.offered(engine)):
        return engine.chat_parts(messages, settings, info)
    atts = list(documents or ())
    on = filing_tools(engine, calculator, atts)
    run = runner({a.ident: a.doc for a in atts}, result_tokens(engine), counter(engine)) if on else None
    return tool_loop.calculator_rounds(
        engine,
        messages,
        settings,
        info,
        force=calculator == "always",
        specs=chat_tools(engine, calculator, atts),
        run=run,
        first=filing.SEARCH if on else None,
        max_rounds=max_rounds,
    )


SOURCE_CHARS = 6_000  # a cited page's text kept for the Sources panel


def checked(answer: str, documents: Any) -> dict:
    """The answer's figures checked against the pages they cite (finspace.grounding.check) and the cited pages'
    text for the Sources panel: {"checks": [FigureCheck.to_json()], "sources": [{document, page, label, text}]}."""
    from finspace.grounding.check import check_answer

    lib = {a.ident: a.doc for a in documents or ()}
    if not lib or not answer:
        return {"checks": [], "sources": []}
    checks = check_answer(answer, lib)
    sources, seen = [], set()
    for c in checks:
        key = (c.document, c.page)
        if c.document in lib and c.page and 1 <= c.page <= len(lib[c.document].pages) and key not in seen:
            seen.add(key)
            page = lib[c.document].pages[c.page - 1]
            sources.append(
                {
                    "document": c.document,
                    "page": c.page,
                    "label": page.label or f"page {c.page}",
                    "text": page.text[:SOURCE_CHARS],
                }
            )
    return {"checks": [c.to_json() for c in checks], "sources": sources}


async def with_documents(
    desk: docs.DocumentDesk,
    engine: EngineAPI,
    attached: Any,
    messages: Any,
    settings: ChatSettings,
    calculator: str = "off",
) -> tuple[ChatSettings, str]:
    """``settings`` carrying the attached documents (finspace.documents.desk), their budget set after all else the
    prompt holds (system prompt, conversation, reply, the tools ``chat_parts`` offers with ``calculator`` or the
    request's ``settings.tools``, a filing tool result and the outlines)."""
    atts = list(attached) if isinstance(attached, (list, tuple)) else [attached]
    filing = filing_tools(engine, calculator, atts)
    return await desk.with_document(
        atts,
        messages,
        settings,
        tools=chat_tools(engine, calculator, atts),
        reserve=result_tokens(engine) if filing else 0,
        preamble=preamble(engine, atts) if filing else "",
    )
