"""A reply, scored as its set defines it.

The answer is read from the reply's last ``Answer:`` line (markdown and a closing period stripped); with no
such line, from its last non-empty line. Then:

- FinQA (its evaluate.py compares the executed answer, rounded to 5 decimals, for equality): the first
  number of the answer (the last number of the reply when it has no Answer line) is correct when it equals
  the gold after rounding to 5 decimals, or lies within FINQA_REL_TOL (1%) of it: a model writes rounded
  figures, the reference's programs do not. "12.5%" is read as 0.125 (as evaluate.py's str_to_num reads
  it) and also as 12.5; a bare number is also read as a percentage when the question asks for one.
  Commas, $ and (parentheses) negatives are handled; yes/no golds need the same word.
- TAT-QA: exact match and F1 with scale, as tatqa_eval.py (tatqa_metric.py). A number's trailing scale
  word (thousand, million, billion, percent) or % is the prediction's scale; for a multi-span gold the
  answer is split at ';' (as the prompt asks), else at ', ' and ' and '. Where the gold is one number and the
  answer a sentence ("Revenue in 2024 was 1,148 thousand dollars"), the prediction is the sentence's last
  figure (a year skipped when another figure is there) with the scale word after it: "1,148 thousand".
  correct = exact match; f1 = the reference's F1.
- FinanceBench (its authors grade by hand; this is a proxy): a gold that is one figure is matched by the
  answer's first figure (a year beside it skipped) within FINANCEBENCH_REL_TOL (1%; a percentage also as
  its fraction and back); a gold that starts with Yes or No needs the same word first in the answer; any
  other gold needs FINANCEBENCH_KEYWORD_RECALL (60%) of its keywords in the answer, and the answer at least
  FINANCEBENCH_KEYWORD_PRECISION (15%) gold keywords (a pasted page is not an answer). f1: token F1.

A reply that declines ("I cannot", "not enough information", ...) and is not correct is a refusal:
refused=True, correct=False, counted apart by summarize().
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable

from finspace.errors import BadInput
from finspace.scoreboard import tatqa_metric
from finspace.scoreboard.formats import EvalItem

FINQA_REL_TOL = 0.01
FINANCEBENCH_REL_TOL = 0.01
FINANCEBENCH_KEYWORD_RECALL = 0.6
FINANCEBENCH_KEYWORD_PRECISION = 0.15
MAX_REPLY_CHARS = 100_000
MAX_ANSWER_CHARS = 2_000  # an answer line is short; past this it is cut (and a 2,000-digit "number" is wrong)

_ANSWER = re.compile(r"^[\s>*_#`-]*(?:final\s+)?answer\s*[:：]\s*(.*)$", re.I | re.M)
_NUMBER = re.compile(
    r"(?P<sign>[-−–])?\s*(?P<open>\()?\s*[$€£¥]?\s*(?P<num>\d[\d,]*(?:\.\d+)?|\.\d+)"
    r"(?:\s*(?P<close>\)))?(?:\s*(?P<pct>%|percent\b|per cent\b))?",
    re.I,
)
_SCALE_TAIL = re.compile(r"^(?P<num>.*\d)\s*(?P<scale>%|percent|per cent|thousands?|millions?|billions?)\W*$", re.I)
_REFUSAL = re.compile(
    r"\b(i\s+(?:cannot|can\s*not|can't|can’t|am\s+unable|'m\s+unable|do\s+not\s+know|don't\s+know)|unable\s+to"
    r"|not\s+(?:enough|sufficient)\s+information|insufficient\s+(?:information|data)|cannot\s+be\s+determined"
    r"|(?:does|do)\s+not\s+(?:provide|contain|include|mention|specify|state)|not\s+(?:provided|available|"
    r"mentioned|specified)\s+in\s+the\s+(?:context|text|table)|no\s+information)\b",
    re.I,
)
_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?", re.I)
_STOP = frozenset(
    "the a an and or of in on at to for from by with as is are was were be been being this that these those it "
    "its their there which what who whom how when where why than then so such not no yes also into over under "
    "per company company's fy during year years based about has have had do does did can could would should "
    "will may might more most less very".split()
)


@dataclass(frozen=True)
class ItemScore:
    """One reply's score: ``extracted`` is the answer read from it (None when none was found)."""

    correct: bool
    f1: float | None
    refused: bool
    extracted: str | None


def final_answer(reply: str) -> str | None:
    """The text after the reply's last ``Answer:`` line, else its last non-empty line; None for no text."""
    text = (reply or "")[-MAX_REPLY_CHARS:]
    found = _ANSWER.findall(text)
    answer = found[-1] if found else next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
    answer = re.sub(r"[\s*_`.]+$", "", re.sub(r"^[\s*_`]+", "", answer[:MAX_ANSWER_CHARS]))  # markdown, period
    return answer or None


@dataclass(frozen=True)
class _Num:
    value: float
    percent: bool


def numbers(text: str) -> list[_Num]:
    """Every number in ``text``: commas, currency and spaces dropped, (parentheses) or a minus sign negative,
    and whether a % (or "percent") follows."""
    out = []
    for m in _NUMBER.finditer(text or ""):
        try:
            value = float(m.group("num").replace(",", ""))
        except ValueError:
            continue
        if m.group("sign") or (m.group("open") and m.group("close")):
            value = -value
        out.append(_Num(value, bool(m.group("pct"))))
    return out


def _close(a: float, b: float, rel_tol: float) -> bool:
    if round(a, 5) == round(b, 5):
        return True
    return b != 0 and math.isfinite(a) and abs(a - b) <= rel_tol * abs(b)


def _yes_no(text: str | None) -> str | None:
    m = re.search(r"\b(yes|no)\b", text or "", re.I)
    return m.group(1).lower() if m else None


def _refused(answer: str | None, reply: str) -> bool:
    return bool(_REFUSAL.search(answer or "") or (not answer and _REFUSAL.search(reply or "")))


def _finqa_candidates(num: _Num, question: str) -> list[float]:
    if num.percent:
        return [num.value / 100, num.value]
    asks_percent = re.search(r"percent|%|proportion|portion|rate\b|ratio", question, re.I)
    return [num.value, num.value / 100] if asks_percent else [num.value]


def score_finqa(item: EvalItem, reply: str) -> ItemScore:
    answer = final_answer(reply)
    gold = item.gold
    if isinstance(gold, str) and gold.strip().lower() in ("yes", "no"):
        said = _yes_no(answer)
        correct = said == gold.strip().lower()
        return ItemScore(correct, None, not correct and _refused(answer, reply), said or answer)
    has_line = bool(_ANSWER.search((reply or "")[-MAX_REPLY_CHARS:]))
    found = numbers(answer or "") if has_line else numbers((reply or "")[-MAX_REPLY_CHARS:])[-1:]
    num = found[0] if found else None
    correct = False
    if num is not None and isinstance(gold, (int, float)):
        correct = any(_close(c, float(gold), FINQA_REL_TOL) for c in _finqa_candidates(num, item.question))
    extracted = answer if has_line else (f"{num.value:g}{'%' if num.percent else ''}" if num else answer)
    return ItemScore(correct, None, not correct and _refused(answer, reply), extracted)


def tatqa_prediction(answer: str, gold: dict) -> tuple[str | list[str], str]:
    """The reply's answer as TAT-QA's evaluator takes it: (prediction, scale)."""
    if gold.get("answer_type") == "multi-span":
        sep = ";" if ";" in answer else r",\s+|\s+and\s+"  # the prompt asks for '; ' between answers
        parts = [p.strip().strip("*_`\"'").strip() for p in re.split(sep, answer)]
        split = [_scaled(p) for p in parts if p]
        scales = [scale for _, scale in split if scale]
        return [text for text, _ in split], scales[-1] if scales else ""  # "1,200; 900 thousand": both
    return _scaled(answer)


def _scaled(answer: str) -> tuple[str, str]:
    """A number's trailing scale word or % taken off as its scale: ("1,496.5", "million")."""
    m = _SCALE_TAIL.match(answer)
    if m and tatqa_metric.is_number(m.group("num").strip()):
        word = m.group("scale").lower()
        return m.group("num").strip(), "percent" if word in ("%", "percent", "per cent") else word.rstrip("s")
    return answer, ""


_FIGURE = re.compile(
    r"[-−(]?\s*[$€£¥]?\s*\d[\d,]*(?:\.\d+)?\)?(?:\s*(?:%|percent\b|per cent\b|thousands?\b|"
    r"millions?\b|billions?\b))?",
    re.I,
)
_YEAR = re.compile(r"^(?:19|20)\d\d$")


def _numeric_gold(gold: dict) -> bool:
    answer = gold.get("answer")
    if gold.get("answer_type") in ("arithmetic", "count"):
        return True
    return (
        gold.get("answer_type") == "span"
        and isinstance(answer, list)
        and len(answer) == 1
        and tatqa_metric.is_number(str(answer[0]))
    )


def _figure_of(answer: str) -> str:
    """A sentence's last figure with its scale word (a year skipped when another figure is there); the answer
    itself when it is a figure already or holds none."""
    if tatqa_metric.is_number(_scaled(answer)[0].strip("$€£¥ ")):
        return answer
    found = [m.group(0).strip() for m in _FIGURE.finditer(answer)]
    figures = [f for f in found if not _YEAR.match(f)] or found
    return figures[-1] if figures else answer


def score_tatqa(item: EvalItem, reply: str) -> ItemScore:
    answer = final_answer(reply)
    if not answer:
        return ItemScore(False, 0.0, _refused(answer, reply), None)
    if _numeric_gold(item.gold):
        answer = _figure_of(answer)
    prediction, scale = tatqa_prediction(answer, item.gold)
    try:
        em, f1 = tatqa_metric.em_and_f1(item.gold, prediction, scale)
    except (ValueError, OverflowError):  # a number too long to write out (the reference fails on it too)
        em, f1 = 0.0, 0.0
    correct = em == 1.0
    return ItemScore(correct, float(f1), not correct and _refused(answer, reply), answer)


def _keywords(text: str) -> list[str]:
    return [
        w for w in (t.lower() for t in _WORD.findall(text or "")) if w not in _STOP and (len(w) > 2 or w[0].isdigit())
    ]


def token_f1(predicted: str, gold: str) -> float:
    """Bag-of-words F1 of the two texts' keywords (lower case, stop words out)."""
    pred, ref = _keywords(predicted), _keywords(gold)
    if not pred or not ref:
        return 0.0
    common = sum(min(pred.count(w), ref.count(w)) for w in set(pred) & set(ref))
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return round(2 * precision * recall / (precision + recall), 4)


def _figure_gold(gold: str) -> _Num | None:
    """The gold's figure when the gold is one figure (at most 3 words beside it: "$1577.00", "65.4%")."""
    found = numbers(gold)
    rest = _NUMBER.sub(" ", gold)
    if len(found) == 1 and len(re.findall(r"[A-Za-z]+", rest)) <= 3:
        return found[0]
    return None


def _figure_match(answer: str, want: _Num) -> bool:
    """The answer's first figure (a year beside it skipped, "FY2018") against the gold's."""
    found = numbers(answer)
    if not 1900 <= want.value <= 2100:
        found = [n for n in found if not (1900 <= n.value <= 2100 and n.value.is_integer())] or found
    if not found:
        return False
    got = found[0]
    candidates = [got.value]
    if got.percent != want.percent:
        candidates += [got.value * 100, got.value / 100]
    return any(_close(c, want.value, FINANCEBENCH_REL_TOL) for c in candidates)


def score_financebench(item: EvalItem, reply: str) -> ItemScore:
    answer = final_answer(reply)
    gold = str(item.gold)
    text = answer or ""
    figure = _figure_gold(gold)
    first = re.match(r"\W*(yes|no)\b", gold, re.I)
    if figure is not None:
        correct = _figure_match(text, figure)
    elif first:
        correct = _yes_no(text) == first.group(1).lower()
    else:
        wanted = set(_keywords(gold))
        got = set(_keywords(text))
        common = len(wanted & got)
        correct = (
            bool(wanted)
            and common / len(wanted) >= FINANCEBENCH_KEYWORD_RECALL
            and common / len(got) >= FINANCEBENCH_KEYWORD_PRECISION
        )
    return ItemScore(correct, token_f1(text, gold), not correct and _refused(answer, reply), answer)


_SCORERS = {"finqa": score_finqa, "tatqa": score_tatqa, "financebench": score_financebench}


def score(evalset_name: str, item: EvalItem, reply: str) -> ItemScore:
    """Score one reply to ``item`` of set ``evalset_name`` (one of finqa, tatqa, financebench)."""
    scorer = _SCORERS.get(evalset_name)
    if scorer is None:
        raise BadInput(f"unknown eval set {str(evalset_name)[:60]!r}: choose one of {', '.join(_SCORERS)}")
    return scorer(item, reply if isinstance(reply, str) else "")


def summarize(scores: Iterable[ItemScore]) -> dict:
    """{"n", "correct", "score" (correct / n, 0..1), "f1" (mean where defined, else None), "refusals"}."""
    scores = list(scores)
    n = len(scores)
    correct = sum(1 for s in scores if s.correct)
    f1s = [s.f1 for s in scores if s.f1 is not None]
    return {
        "n": n,
        "correct": correct,
        "score": round(correct / n, 4) if n else 0.0,
        "f1": round(sum(f1s) / len(f1s), 4) if f1s else None,
        "refusals": sum(1 for s in scores if s.refused),
    }
