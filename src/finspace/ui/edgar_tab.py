"""Companies on EDGAR in the page and the Gradio API (through ``Service.edgar``, finspace.edgar).

The "Companies" tab: a ticker in, its filings listed, one picked and asked about (the loaded model answers from
it, citing pages); a figure over the years for one or several companies, as a chart (Gradio's LinePlot), a
table and a CSV. The Gradio API: ``/company_filings``, ``/company_facts``, ``/ask_filing`` and ``/filing_matrix``
("AAPL, NVDA: latest 10-K" into the Filing Matrix).
"""

import re

import gradio as gr
import pandas as pd

from finspace.documents import desk as docs
from finspace.documents.desk import upload_folder
from finspace.matrix.table import to_json
from finspace.service import Service
from finspace.ui.api import user_error
from finspace.ui.documents import doc_list, fit_view
from finspace.ui.exports import Exports

FORMS = ["any", "10-K", "10-Q", "8-K", "20-F", "40-F"]
FILING_COLUMNS = ["form", "period", "filed", "accession", "document"]


class EdgarEndpoints:
    def __init__(self, svc: Service):
        self.svc = svc
        self.provenance = svc.provenance

    async def company_filings(
        self, company: str, form: str | None = None, year: int | None = None, older: bool = False, limit: int = 100
    ) -> dict:
        """A company's filings on SEC's EDGAR, newest first. company: ticker, CIK or name; form: 10-K, 10-Q, 8-K,
        20-F, 40-F or null; year: the report period's. Returns {company, filings: [{form, period, filed, accession,
        document, url}]}."""
        try:
            found, filings = await self.svc.edgar.filings(company, form, year, older, limit)
            return {"company": found.to_json(), "filings": [f.to_json() for f in filings]}
        except Exception as exc:  # noqa: BLE001 - the boundary
            raise user_error(self.svc, exc) from None

    async def company_facts(self, companies: str, field: str, period: str = "annual") -> dict:
        """A reported figure by fiscal year (or quarter) for one or several companies ("AAPL, NVDA"): field is a
        Matrix field (revenue, net income, diluted EPS, total assets, cash ...) or a concept (us-gaap:Revenues).
        Each point names its filing (form, accession, filed); csv holds the table."""
        try:
            return await self.svc.edgar.facts(companies, field, period)
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None

    async def ask_filing(
        self,
        company: str,
        question: str,
        form: str | None = "10-K",
        year: int | None = None,
        accession: str | None = None,
        request: gr.Request = None,
    ) -> dict:
        """Ask about a company's filing, read from EDGAR's archive: the latest `form` of `year`, or `accession`.
        Returns {answer, citations (pages), document, pages, filing, url}."""
        try:
            picked = await self.svc.edgar.pick(company, accession, form, year)
            return await self.svc.edgar.ask(picked, question, self.svc.client_of(request))
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None

    async def filing_matrix(self, filings: str, fields: str = "income-statement", request: gr.Request = None) -> dict:
        """The Filing Matrix over filings on EDGAR: "AAPL, MSFT, NVDA: latest 10-K" (or "...: 10-Q 2025"). Yields
        {"done", "total", "state", "matrix"} as /matrix does."""
        try:
            async for r in self.svc.edgar.fill_matrix(filings, fields, self.svc.client_of(request), self.provenance()):
                yield {"done": r.done, "total": r.total, "state": r.state, "matrix": to_json(r)}
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None


def register_edgar_api(svc: Service) -> None:
    api = EdgarEndpoints(svc)
    for fn, name, limit in (
        (api.company_filings, "company_filings", 8),
        (api.company_facts, "company_facts", 8),
        (api.ask_filing, "ask_filing", 4),
        (api.filing_matrix, "filing_matrix", 4),
    ):
        gr.api(fn, api_name=name, concurrency_limit=limit)


def chart_frame(points: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(
        points, columns=["company", "period", "end", "value", "unit", "form", "accession", "filed", "url"]
    )
    df["end"] = pd.to_datetime(df["end"])
    return df


def build_edgar_tab(svc: Service, chat: dict | None = None) -> dict:
    """The tab's components and events; ``chat``: the Chat tab's components, whose document "Open in Chat" sets."""
    api = EdgarEndpoints(svc)
    exports = Exports(upload_folder(svc.settings))  # bounded per client, removed when the app stops
    svc.on_close.append(exports.clear)
    gr.Markdown(
        "Find a company on SEC's EDGAR by ticker or name, pick a filing and ask about it; chart what it "
        "reported over the years. "
        + ("" if svc.settings.edgar.enabled else f"**Off on this Space:** {svc.edgar.off_message}")
    )
    f = _filings_panel(chat is not None)
    c = _chart_panel(svc)
    if chat is not None:  # the events in the order they always had (their fn_index)
        _wire_open_in_chat(svc, f, chat)
    _wire_filings(api, f)
    _wire_chart(svc, api, exports, c)
    return {"plot": c["plot"]}


def _filings_panel(with_chat: bool) -> dict:
    """Find a company's filings, pick one, ask about it (or open it in the Chat tab)."""
    with gr.Row():
        company = gr.Textbox(label="Company (ticker or name)", placeholder="AAPL", elem_id="edgar-company", scale=2)
        form = gr.Dropdown(FORMS, value="10-K", label="Form", elem_id="edgar-form", scale=1)
        year = gr.Number(label="Year (report period)", precision=0, elem_id="edgar-year", scale=1)
        find = gr.Button("Find filings", elem_id="edgar-find", scale=1)
    who = gr.Markdown(elem_id="edgar-who")
    table = gr.Dataframe(headers=FILING_COLUMNS, interactive=False, elem_id="edgar-filings")
    pick = gr.Dropdown([], label="Filing", elem_id="edgar-pick", allow_custom_value=False)
    question = gr.Textbox(label="Question about the filing", elem_id="edgar-question")
    with gr.Row():
        ask = gr.Button("Ask", elem_id="edgar-ask")
        to_chat = gr.Button("Open in Chat", elem_id="edgar-to-chat", visible=with_chat)
    answer = gr.Markdown(elem_id="edgar-answer")
    return dict(
        company=company, form=form, year=year, find=find, who=who, table=table, pick=pick, question=question,
        ask=ask, to_chat=to_chat, answer=answer,
    )  # fmt: skip


def _chart_panel(svc: Service) -> dict:
    """Chart one figure of several companies over the years, with the facts and a CSV of them."""
    with gr.Row():
        companies = gr.Textbox(label="Companies", placeholder="AAPL, NVDA", elem_id="edgar-companies", scale=2)
        field = gr.Dropdown(svc.edgar.field_names(), value="Revenue", label="Figure", elem_id="edgar-field", scale=1)
        period = gr.Radio(["annual", "quarterly"], value="annual", label="Period", scale=1)
        chart_btn = gr.Button("Chart", elem_id="edgar-chart-btn", scale=1)
    notes = gr.Markdown(elem_id="edgar-notes")
    plot = gr.LinePlot(
        chart_frame([]),
        x="end",
        y="value",
        color="company",
        elem_id="edgar-chart",
        tooltip=["company", "period", "value", "form", "accession", "filed"],
    )
    facts_table = gr.Dataframe(interactive=False, elem_id="edgar-facts")
    csv_file = gr.File(label="CSV", elem_id="edgar-csv")
    return dict(
        companies=companies, field=field, period=period, chart_btn=chart_btn, notes=notes, plot=plot,
        facts_table=facts_table, csv_file=csv_file,
    )  # fmt: skip


def _wire_filings(api: EdgarEndpoints, f: dict) -> None:
    async def list_filings(q, form, y):
        out = await api.company_filings(q, None if form == "any" else form, int(y) if y else None)
        rows = [[x[c] for c in FILING_COLUMNS] for x in out["filings"]]
        c = out["company"]
        choices = [
            (f"{x['form']} {x['period'] or ''} filed {x['filed']} ({x['accession']})", x["accession"])
            for x in out["filings"]
        ]
        return (
            f"**{c['name']}** ({c['ticker']}, CIK {c['cik']}): {len(rows)} filing(s)",
            pd.DataFrame(rows, columns=FILING_COLUMNS),
            gr.update(choices=choices, value=choices[0][1] if choices else None),
        )

    async def ask_it(q, acc, text, request: gr.Request):
        out = await api.ask_filing(q, text, None, None, acc, request)
        cites = ", ".join(f"page {p}" for p in out["citations"]) or "none"
        return (
            f"{out['answer']}\n\n*Cited: {cites}. Source: [{out['filing']['form']} filed "
            f"{out['filing']['filed']}]({out['url']})*"
        )

    found = [f["who"], f["table"], f["pick"]]
    f["find"].click(list_filings, [f["company"], f["form"], f["year"]], found, api_visibility="private")
    f["company"].submit(list_filings, [f["company"], f["form"], f["year"]], found, api_visibility="private")
    f["ask"].click(ask_it, [f["company"], f["pick"], f["question"]], [f["answer"]], api_visibility="private")


def _wire_chart(svc: Service, api: EdgarEndpoints, exports: Exports, c: dict) -> None:
    async def chart(cs, fld, per, request: gr.Request):
        out = await api.company_facts(cs, fld, per)
        name = re.sub(r"[^A-Za-z0-9-]+", "-", out["field"])[:40] + ".csv"
        try:
            [path] = exports.write_files(svc.client_of(request), {name: out["csv"].encode()}, "chart fewer companies")
        except Exception as exc:  # noqa: BLE001 - the boundary
            raise user_error(svc, exc) from None
        df = chart_frame(out["points"])
        units = ", ".join(out["units"])
        return (
            f"**{out['field']}** ({units}); each point names its filing (form, accession, filed). "
            + " ".join(out["notes"]),
            df,
            df.assign(end=df["end"].dt.date.astype(str)),
            path,
        )

    c["chart_btn"].click(
        chart,
        [c["companies"], c["field"], c["period"]],
        [c["notes"], c["plot"], c["facts_table"], c["csv_file"]],
        api_visibility="private",
    )


def _wire_open_in_chat(svc: Service, f: dict, chat: dict) -> None:
    async def open_in_chat(q, acc, doc_state, request: gr.Request):  # joins the chat's documents, as an attach does
        have = docs.attached_list(doc_state)
        try:
            svc.documents.check_count(len(have) + 1)
            picked = await svc.edgar.pick(q, acc)
            att = docs.with_id(await svc.edgar.attach(picked, svc.client_of(request)), have)
        except Exception as exc:  # noqa: BLE001 - the boundary
            raise user_error(svc, exc) from None
        filing, atts = picked.filing, [*have, att]
        return (
            [a.to_state() for a in atts],
            fit_view(svc, atts),
            doc_list(atts),
            f"{picked.company.ticker} "
            f"{filing.form} filed {filing.filed} is attached to the **Chat** tab as `{att.ident}`: ask there.",
        )

    f["to_chat"].click(
        open_in_chat,
        [f["company"], f["pick"], chat["doc"]],
        [chat["doc"], chat["doc_fit"], chat["doc_list"], f["answer"]],
        api_visibility="private",
    )
