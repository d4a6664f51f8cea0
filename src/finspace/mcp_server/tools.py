"""The MCP tools finspace offers: each one's name, its description (written for the model that will call it:
what it does, its units, its limits, an example) and the JSON schema of its arguments.

The schemas are the contract: ``arguments.check`` holds every call to them before anything runs, so a tool's
code sees only well-typed, bounded values. ``load_model`` is listed, and callable, only when the request
carries the admin token (``Authorization: Bearer <FINSPACE_ADMIN_TOKEN>``) on an app that has one.
"""

from __future__ import annotations

from typing import Any

from finspace.host.hardware import KNOWN_GPUS
from finspace.matrix.fields import FIELD_TYPES, MAX_FIELDS, MAX_INSTRUCTION_CHARS, MAX_NAME_CHARS

MAX_QUESTION_CHARS = 4000
MAX_NAME = 200
MAX_CONFIG_CHARS = 200_000


def _document(max_b64_chars: int) -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "One filing: exactly one of url, data (with filename), upload or filing (on EDGAR).",
        "properties": {
            "url": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2000,
                "description": "A public http(s) address of the filing (PDF, HTML, DOCX, XLSX, CSV, TXT or MD). "
                "Addresses of this machine, private networks and file: URLs are refused.",
            },
            "data": {
                "type": "string",
                "minLength": 1,
                "maxLength": max_b64_chars,
                "description": "The file's bytes, base64-encoded.",
            },
            "filename": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_NAME,
                "description": "The file's name with its extension (.pdf, .html, .docx, .xlsx, .csv, .txt, "
                ".md); required with data, optional otherwise.",
            },
            "upload": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1000,
                "description": "A path returned by this app's POST /gradio_api/upload (one file per upload).",
            },
            "filing": FILING,
        },
    }


FILING = {
    "type": "object",
    "additionalProperties": False,
    "required": ["company"],
    "description": "A filing on SEC's EDGAR, read from its archive: the company's latest `form` of `year` "
    "(default: the latest 10-K), or the one `accession` names; `document` an exhibit instead of "
    "the primary document. Example: {\"company\": \"AAPL\", \"form\": \"10-K\", \"year\": 2024}",
    "properties": {
        "company": {
            "type": "string",
            "minLength": 1,
            "maxLength": 120,
            "description": "A ticker (AAPL), a CIK (320193) or a name (Apple).",
        },
        "form": {"enum": ["10-K", "10-Q", "8-K", "20-F", "40-F"]},
        "year": {
            "type": "integer",
            "minimum": 1993,
            "maximum": 2100,
            "description": "The report period's year (Apple's FY2024 10-K: 2024).",
        },
        "accession": {"type": "string", "pattern": "^\\d{10}-\\d{2}-\\d{6}$"},
        "document": {
            "type": "string",
            "minLength": 1,
            "maxLength": 120,
            "description": "A file of the filing (an exhibit such as wfc-1231x2024xex13.htm).",
        },
    },
}


def tool_specs(max_documents: int, max_document_mib: float, admin: bool) -> list[dict[str, Any]]:
    """Every tool as {name, title, description, inputSchema, annotations}; ``admin`` adds load_model."""
    doc = _document(int((max_document_mib * (1 << 20)) * 4 / 3) + 4)
    specs = [
        _will_it_fit(),
        _extract_matrix(max_documents, max_document_mib, doc),
        _ask_document(max_documents, max_document_mib, doc),
        *_views(),
        *_edgar(),
    ]
    return specs + [_load_model()] if admin else specs


READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
FIELD = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "type", "instruction"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
        "type": {"enum": list(FIELD_TYPES)},
        "instruction": {"type": "string", "minLength": 1, "maxLength": MAX_INSTRUCTION_CHARS},
    },
}


def _will_it_fit() -> dict:
    return {
        "name": "will_it_fit",
        "title": "Will this model fit on a GPU?",
        "description": (
            "Plan a large language model on NVIDIA GPUs before downloading it, with the same memory planner that "
            "serves models here (vLLM's own accounting): weights, activations, CUDA graphs, and the KV cache that "
            "decides the longest context. Give exactly one of `config_json` (the model's config.json, as text or "
            "as the JSON object) or `repo` (a catalogue key such as qwen-3-8b-fin, from the models tool, planned "
            "from its bundled config.json; or a Hugging Face repo id OWNER/NAME, read from the Hub when this "
            "server reaches it). Returns fits (true/false), reason, "
            "max_model_len (tokens of context that fit), a step-by-step breakdown in GiB, ranked fixes "
            "(quantize, shorter context, more GPUs) and the plan as JSON. Memory is in GiB (2^30 bytes), context "
            "in tokens. GPUs: " + ", ".join(KNOWN_GPUS) + " (default: this machine's, else l40s); gpus: 1-64. "
            "Limits: config_json up to 200,000 characters, max_model_len up to 33,554,432. Example: "
            "{\"repo\": \"qwen-3-8b-fin\", \"gpu\": \"l40s\", \"max_model_len\": 32768}"
        ),
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "config_json": {
                    "type": ["string", "object"],
                    "minLength": 2,
                    "maxLength": MAX_CONFIG_CHARS,
                    "description": "The model's config.json: its text, or the JSON object.",
                },
                "repo": {
                    "type": "string",
                    "minLength": 2,
                    "maxLength": MAX_NAME,
                    "description": "A catalogue key (qwen-3-8b-fin; the models tool lists them) or OWNER/NAME "
                    "on the Hub.",
                },
                "gpu": {"enum": list(KNOWN_GPUS), "description": "The GPU model key."},
                "gpus": {"type": "integer", "minimum": 1, "maximum": 64, "description": "How many GPUs (default 1)."},
                "max_model_len": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 33_554_432,
                    "description": "Context length to plan for, in tokens (default: the model's).",
                },
                "dtype": {"type": "string", "maxLength": 20, "description": "auto, bfloat16, float16 or float32."},
                "quantization": {"type": "string", "maxLength": 40, "description": "fp8, awq, gptq... (optional)."},
                "gpu_memory_utilization": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": 1,
                    "description": "Share of each GPU's memory vLLM may use (default 0.9).",
                },
            },
        },
        "annotations": {**READ_ONLY, "openWorldHint": True},
    }


def _extract_matrix(max_documents: int, max_document_mib: float, doc: dict) -> dict:
    return {
        "name": "extract_matrix",
        "title": "Extract the same fields from several filings",
        "description": (
            "The Filing Matrix: read several financial filings (10-K, 10-Q, annual reports; PDF, HTML, DOCX, XLSX, "
            "CSV, TXT or MD) with the loaded model and extract the same fields from each. Each cell comes back "
            "with its value, the page it was found on, a verbatim quote from that page, and a check mark: "
            "verified (the quote is on that page and holds the value), not_on_page, value_not_in_quote, "
            "not_found or cut (the reply hit its token bound). Trust only verified cells. "
            f"documents: 1-{max_documents} filings, each by url, base64 data or upload, each at most "
            f"{max_document_mib:g} MiB. fields: a preset name (income-statement, balance-sheet, guidance, auditor, "
            f"risk-factors) or up to {MAX_FIELDS} fields {{name, type, instruction}}, type one of "
            f"{', '.join(FIELD_TYPES)} (percent: 12.5 means 12.5%; money: {{amount, currency, scale}}). "
            "documents x fields is bounded too (FINSPACE_MATRIX_MAX_CELLS). It can take minutes on a CPU. "
            "Returns {state, provenance (model, revision), fields, rows: [{document, pages, error, cells: [{found, "
            "value, page, quote, check}]}]}. Example: {\"documents\": [{\"url\": "
            "\"https://example.com/10-k.pdf\"}], \"fields\": [{\"name\": \"Revenue\", \"type\": \"money\", "
            "\"instruction\": \"Total net revenue for the fiscal year\"}]}"
        ),
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["documents"],
            "properties": {
                "documents": {"type": "array", "minItems": 1, "maxItems": max_documents, "items": doc},
                "fields": {
                    "oneOf": [
                        {"type": "string", "minLength": 1, "maxLength": 80},
                        {"type": "array", "minItems": 1, "maxItems": MAX_FIELDS, "items": FIELD},
                    ],
                    "description": "A preset name, or the fields (default: income-statement).",
                },
            },
        },
        "annotations": READ_ONLY,
    }


def _ask_document(max_documents: int, max_document_mib: float, doc: dict) -> dict:
    return {
        "name": "ask_document",
        "title": "Ask a question about one filing or several",
        "description": (
            "Answer a question about a financial filing (document) or several (documents, each known by its file "
            "name without the extension) with the loaded model, citing pages as (page 7), or [id p. 7] with "
            "several. The whole documents are read when they fit the model's context, else the passages most "
            "relevant to the question from each. Returns {answer, citations (the page numbers cited that exist "
            "in the document), document (what was read: the pages of each), ids, pages, model, steps (tool calls), "
            "checks (each cited figure against its page: mark verified / differs / not_on_page / uncited ..., "
            "with the quote or what the page prints)}. Each document: "
            f"url, base64 data (with filename) or upload, at most {max_document_mib:g} MiB; at most "
            f"{max_documents} documents; the question: up to {MAX_QUESTION_CHARS:,} characters. "
            "Example: {\"question\": \"What was total net sales in fiscal 2024?\", \"document\": {\"url\": "
            "\"https://example.com/aapl-10-k.htm\"}}"
        ),
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["question"],
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
                "document": doc,
                "documents": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": max_documents,
                    "items": doc,
                    "description": "Several filings instead of document.",
                },
                "max_tokens": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 4096,
                    "description": "Longest answer in tokens (default: the model's).",
                },
            },
        },
        "annotations": READ_ONLY,
    }


def _views() -> list[dict]:
    return [
        {
            "name": "models",
            "title": "The models this app serves",
            "description": (
                "The catalogue of finance models this app can serve, each with whether it is loaded, whether it fits "
                "this machine (the planner's verdict and reason), its longest context in tokens (max_model_len), KV "
                "cache tokens, and fixes when it does not fit. No arguments. Example: {}"
            ),
            "inputSchema": {"type": "object", "additionalProperties": False, "properties": {}},
            "annotations": READ_ONLY,
        },
        {
            "name": "health",
            "title": "Is the app ready?",
            "description": (
                "The app's state: ready (true when a model answers), the loaded model, the engine's stage while "
                "loading, GPU memory per device (MiB) or host RAM, uptime in seconds, versions. Call it before "
                "extract_matrix or ask_document when they answer 'not ready'. No arguments. Example: {}"
            ),
            "inputSchema": {"type": "object", "additionalProperties": False, "properties": {}},
            "annotations": READ_ONLY,
        },
        {
            "name": "scores",
            "title": "The Scoreboard's results",
            "description": (
                "The Scoreboard: each model's stored accuracy on finance question sets (FinQA, TAT-QA, FinanceBench), "
                "per set and prompt format, with the run's date, item count and score from 0 to 1. No arguments. "
                "Example: {}"
            ),
            "inputSchema": {"type": "object", "additionalProperties": False, "properties": {}},
            "annotations": READ_ONLY,
        },
    ]


def _edgar() -> list[dict]:
    company = {
        "type": "string",
        "minLength": 1,
        "maxLength": 120,
        "description": "A ticker (AAPL), a CIK (320193) or a name (Apple); a near miss is answered with the "
        "closest ones.",
    }
    return [
        {
            "name": "company_filings",
            "title": "A company's filings on SEC's EDGAR",
            "description": (
                "List a US-listed company's filings from SEC's EDGAR, newest first: form, period (the report "
                "period's end), filed date, accession and primary document, with the document's URL. Filter by "
                "form (10-K, 10-Q, 8-K, 20-F, 40-F) and year (the report period's); older: also read SEC's older "
                "pages. Pass a filing's company, form, year or accession as a document's `filing` to ask_document "
                "or extract_matrix. Example: {\"company\": \"AAPL\", \"form\": \"10-K\"}"
            ),
            "inputSchema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["company"],
                "properties": {
                    "company": company,
                    "form": FILING["properties"]["form"],
                    "year": FILING["properties"]["year"],
                    "older": {"type": "boolean"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
            },
            "annotations": {**READ_ONLY, "openWorldHint": True},
        },
        {
            "name": "company_facts",
            "title": "A company's reported figures over the years",
            "description": (
                "The values companies reported in XBRL for one figure (revenue, operating income, net income, "
                "diluted EPS, total assets, total liabilities, cash, shares outstanding, or a concept such as "
                "us-gaap:Revenues), by fiscal year (annual) or quarter, from SEC's company-facts API: one value per "
                "period, the latest filing's (its form, accession and filed date given). Up to 12 companies, "
                "comma-separated. Returns {field, units, points: [{company, period, end, value, unit, concept, form, "
                "accession, filed}], notes, csv}. Values are in the unit given (USD, not millions). Example: "
                "{\"companies\": \"AAPL, NVDA\", \"field\": \"revenue\"}"
            ),
            "inputSchema": {
                "type": "object",
                "additionalProperties": False,
                "required": ["companies", "field"],
                "properties": {
                    "companies": {"type": "string", "minLength": 1, "maxLength": 400},
                    "field": {"type": "string", "minLength": 1, "maxLength": 160},
                    "period": {"enum": ["annual", "quarterly"]},
                },
            },
            "annotations": {**READ_ONLY, "openWorldHint": True},
        },
    ]


def _load_model() -> dict:
    return {
        "name": "load_model",
        "title": "Switch the served model (admin)",
        "description": (
            "Switch this app to another catalogue model (a key from the models tool, never a repo id or "
            "path) and wait until it is ready; everyone's chats then use it. Refused when the planner says "
            "it does not fit, or while another switch or a Scoreboard run goes. Loading takes from seconds "
            "to minutes. Returns health. Example: {\"model\": \"llama-open-finance-8b\"}"
        ),
        "inputSchema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["model"],
            "properties": {"model": {"type": "string", "minLength": 1, "maxLength": MAX_NAME}},
        },
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }
