"""The filing tools' specs: what a model that calls tools is shown to navigate the conversation's filings.

``outline(document)``, ``search(query, document?)``, ``read_page(document, page)`` and ``filer_facts(document,
query, period?)``, beside ``calculate``. Specs only (the chat's tool loop offers them); finspace.grounding.calls
runs them over the conversation's library (finspace.grounding), each result bounded in tokens.
"""

from __future__ import annotations

OUTLINE, SEARCH, READ_PAGE, FILER_FACTS = "outline", "search", "read_page", "filer_facts"
NAMES = (OUTLINE, SEARCH, READ_PAGE, FILER_FACTS)

# short maxLengths: a forced call (structured outputs) then ends even for a small model that repeats itself, and
# each bounded string position costs the grammar (finspace.structured.cost: 200 for a query is within its limit,
# 300 is not); the runner bounds what a free call sends (finspace.grounding.lookup.MAX_QUERY_CHARS)
_DOC = {"type": "string", "maxLength": 80, "description": "the document's id, as listed (file name without extension)"}


def _spec(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


SPECS: tuple[dict, ...] = (
    _spec(
        OUTLINE,
        "The filing's map: each page's label with its printed number, the Items and headings on it, "
        "the financial statements' pages, and whether it has XBRL facts.",
        {"document": _DOC},
        ["document"],
    ),
    _spec(
        SEARCH,
        "The best pages for a query over one document or all, each with document, page and an excerpt. "
        "Example: {\"query\": \"total net sales 2024\"}.",
        {"query": {"type": "string", "maxLength": 200, "description": "words to look for"}, "document": _DOC},
        ["query"],
    ),
    _spec(
        READ_PAGE,
        "One page's text, whole up to a bound: read the table a search found.",
        {"document": _DOC, "page": {"type": "integer", "minimum": 1, "description": "the page, 1 for the first"}},
        ["document", "page"],
    ),
    _spec(
        FILER_FACTS,
        "The filer's own tagged (XBRL) values matching a concept or words (\"revenue\", "
        "\"us-gaap:Revenues\"), each with period, unit, scale, value and page.",
        {
            "document": _DOC,
            "query": {"type": "string", "maxLength": 200},
            "period": {"type": "string", "maxLength": 20, "description": "a fiscal year (2024) or an end date"},
        },
        ["document", "query"],
    ),
)


def specs() -> list[dict]:
    return list(SPECS)
