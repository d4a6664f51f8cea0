"""Each set's published records, turned into EvalItems (question, context as plain text, gold, meta).

Context is what the prompt shows: the table first, as pipe rows (so that cutting a long context keeps the
numbers), then the text. A record that lacks a field the scoring needs raises ValueError naming the
record and the field; sets.py turns it into BadInput naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class EvalItem:
    """One question: ``gold`` is what score.py compares against (FinQA: the executed answer, a float or
    "yes"/"no"; TAT-QA: {"answer", "answer_type", "scale"}; FinanceBench: the answer text)."""

    id: str
    question: str
    context: str
    gold: Any
    meta: Mapping


def table_text(rows: list) -> str:
    """A table as pipe rows, one per line; empty rows left out."""
    lines = []
    for row in rows:
        cells = [" ".join(str(cell).split()) for cell in row]
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _context(table: str, text: str) -> str:
    parts = []
    if table:
        parts.append("Table:\n" + table)
    if text:
        parts.append("Text:\n" + text)
    return "\n\n".join(parts)


def _need(record: Mapping, key: str, where: str) -> Any:
    if not isinstance(record, Mapping) or key not in record:
        raise ValueError(f"{where} has no {key!r}")
    return record[key]


def _sentences(lines: Any) -> str:
    if not isinstance(lines, list):
        return ""
    kept = [" ".join(str(line).split()) for line in lines]
    return "\n".join(line for line in kept if line and line != ".")


def finqa_items(records: Any) -> list[EvalItem]:
    """FinQA's published format (dataset/{train,dev,test}.json): a list of {id, pre_text, post_text, table,
    qa: {question, program, exe_ans, ...}}. Gold: qa.exe_ans, as FinQA's evaluate.py compares it."""
    if not isinstance(records, list):
        raise ValueError("the file is not a JSON list of FinQA records")
    items = []
    for i, rec in enumerate(records):
        where = f"record {i + 1}"
        qa = _need(rec, "qa", where)
        item_id = str(_need(rec, "id", where))
        gold = _need(qa, "exe_ans", f"{where} ({item_id}) qa")
        if not isinstance(gold, (int, float, str)) or isinstance(gold, bool):
            raise ValueError(f"{where} ({item_id}) has an exe_ans that is not a number or yes/no: {gold!r}")
        text = "\n".join(t for t in (_sentences(rec.get("pre_text")), _sentences(rec.get("post_text"))) if t)
        items.append(
            EvalItem(
                id=item_id,
                question=str(_need(qa, "question", f"{where} ({item_id}) qa")),
                context=_context(table_text(_need(rec, "table", where)), text),
                gold=gold,
                meta={"answer": qa.get("answer"), "program": qa.get("program"), "filename": rec.get("filename")},
            )
        )
    return items


def tatqa_items(records: Any) -> list[EvalItem]:
    """TAT-QA's published format (dataset_raw/tatqa_dataset_*.json): a list of {table: {uid, table},
    paragraphs: [{order, text}], questions: [{uid, question, answer, answer_type, scale, ...}]}; one item a
    question, in file order. Gold: answer, answer_type and scale, as tatqa_eval.py reads them."""
    if not isinstance(records, list):
        raise ValueError("the file is not a JSON list of TAT-QA records")
    items = []
    for i, rec in enumerate(records):
        where = f"record {i + 1}"
        table = _need(_need(rec, "table", where), "table", f"{where} table")
        paragraphs = sorted(_need(rec, "paragraphs", where), key=lambda p: p.get("order", 0))
        context = _context(table_text(table), "\n".join(" ".join(str(p.get("text", "")).split()) for p in paragraphs))
        for q in _need(rec, "questions", where):
            qid = str(_need(q, "uid", f"{where} question"))
            gold = {key: _need(q, key, f"question {qid}") for key in ("answer", "answer_type", "scale")}
            if gold["answer_type"] in ("span", "multi-span") and not isinstance(gold["answer"], list):
                raise ValueError(f"question {qid}: a {gold['answer_type']} answer must be a list")
            items.append(
                EvalItem(
                    id=qid,
                    question=str(_need(q, "question", f"question {qid}")),
                    context=context,
                    gold=gold,
                    meta={
                        "answer_from": q.get("answer_from"),
                        "derivation": q.get("derivation"),
                        "table_uid": rec["table"].get("uid"),
                    },
                )
            )
    return items


def _evidence_text(evidence: Any) -> str:
    if not isinstance(evidence, list):
        return ""
    return "\n\n".join(" ".join(str(e.get("evidence_text", "")).split()) for e in evidence if isinstance(e, Mapping))


def financebench_items(records: Any) -> list[EvalItem]:
    """FinanceBench's open set (data/financebench_open_source.jsonl: one JSON object a line with
    financebench_id, company, doc_name, question, answer, evidence: [{evidence_text, evidence_page_num}]).
    Context: the evidence texts (the filing pages the answer rests on). Gold: the answer text."""
    if not isinstance(records, list):
        raise ValueError("the file is not JSON lines of FinanceBench records")
    items = []
    for i, rec in enumerate(records):
        where = f"line {i + 1}"
        item_id = str(_need(rec, "financebench_id", where))
        evidence = rec.get("evidence") or []
        items.append(
            EvalItem(
                id=item_id,
                question=str(_need(rec, "question", f"{where} ({item_id})")),
                context=_evidence_text(evidence),
                gold=str(_need(rec, "answer", f"{where} ({item_id})")),
                meta={
                    "company": rec.get("company"),
                    "doc_name": rec.get("doc_name"),
                    "question_type": rec.get("question_type"),
                    "question_reasoning": rec.get("question_reasoning"),
                    "evidence_pages": [e.get("evidence_page_num") for e in evidence if isinstance(e, Mapping)],
                },
            )
        )
    return items
