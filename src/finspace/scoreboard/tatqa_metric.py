"""TAT-QA's exact match and F1, as its reference evaluator computes them.

The reference is ``tatqa_eval.py`` / ``tatqa_metric.py`` / ``tatqa_utils.py`` in NExTplusplus/TAT-QA
(commit 870accc, MIT License, Copyright (c) 2021 Fengbin Zhu). This module is written for finspace and
reproduces that evaluator's behaviour for one question (``TaTQAEmAndF1.__call__``), quirks included, so
finspace's TAT-QA figures are the set's own: tests/test_eval_scoring.py checks it against the reference's
own test table and, where the reference can be imported, against the reference itself.

What the reference does, in short:
- an answer (a list of spans, or one number) becomes one string: spans sorted, each number written as
  ``%.4f`` of its value times the scale (thousand, million, billion, percent), text spans followed by the
  scale word, all joined by spaces;
- that string is normalized word by word (lower case; punctuation dropped unless the word is a number;
  numbers rewritten through their value; articles dropped);
- exact match: the normalized strings are equal; F1: the bag-of-words F1 of the two, rounded to 2 places
  (for arithmetic and count answers F1 is the exact match);
- a prediction without a scale that is a bare number is also tried as ``%.4f`` of its own value, so
  0.2212 matches 22.12 percent.
"""

from __future__ import annotations

import math
import re
import string
from typing import Any

SCALES = ("", "thousand", "million", "billion", "percent")
_SCALE_WORDS = (("hundred", 100), ("thousand", 1000), ("million", 1000000), ("billion", 1000000000), ("percent", 0.01))
_NUM_DROP = set("'\"\\$€£¥%(),[]")
_FIRST_NUM = re.compile(r"([+-]?\d+(\.\d+)?)|([+-]?\.\d+)")
_NEG_PARENS = re.compile(r"(\([\d.\s]+\))")
_PERCENT = re.compile(r"([\d.\s]+%)")
_WORD_SCALE = re.compile(r"([\d.]+\s?[a-zA-Z]+)")
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def scale_factor(scale: str) -> float | int:
    """The multiplier a scale word stands for (the first of hundred/thousand/million/billion/percent found
    in it), 1 when none."""
    low = scale.lower()
    for word, factor in _SCALE_WORDS:
        if word in low:
            return factor
    return 1


def _strip_num_chars(text: Any) -> str:
    return "".join(ch for ch in str(text) if ch not in _NUM_DROP)


def first_number(text: str) -> int | float | None:
    """The first number in ``text`` once quotes, currency signs, %, parentheses and commas are gone: an int
    when written without a decimal point; None when there is none (or it starts with a bare '.')."""
    match = _FIRST_NUM.search(_strip_num_chars(text))
    if match is None or not match.group(1):
        return None
    return float(match.group(1)) if "." in match.group(1) else int(match.group(1))


def is_number(text: str) -> bool:
    """True when the first word parses as a number and a second word, if any, is a scale word."""
    words = " ".join(_strip_num_chars(w) for w in text.split()).split()
    if not words:
        return False
    try:
        value = float(words[0])
    except ValueError:
        return False
    if math.isnan(value):
        return False
    return len(words) < 2 or scale_factor(words[1]) != 1


def to_number(text: str) -> int | float | None:
    """The value ``text`` writes: its first number times a scale word right after a number, negated by
    (parentheses), divided by 100 after a %; rounded to 4 places."""
    num = first_number(text)
    if num is None:
        return None
    word = _WORD_SCALE.search(text)
    scale = scale_factor(word.group(0).lower()) if word else 1
    sign = -1 if _NEG_PARENS.findall(text.strip()) else 1
    percent = 0.01 if _PERCENT.findall(text.strip()) else 1
    return round(num * scale * sign * percent, 4)


def _normalize_word(word: str) -> str:
    word = word.lower()
    if not is_number(word):
        word = "".join(ch for ch in word if ch not in _PUNCT)
    if is_number(word):
        word = str(to_number(word))
    return " ".join(_ARTICLES.sub(" ", word).split())


def normalize_answer(text: str) -> str:
    """Lower case, punctuation off (numbers kept), numbers through their value, articles off, one space."""
    parts = [_normalize_word(word) for word in text.split(" ")]
    return " ".join(part for part in parts if part.strip()).strip()


def answer_string(answers: list, scale: str) -> str:
    """One string for a list of answers and their scale, as the reference writes gold and prediction alike."""
    out = []
    for answer in sorted(answers):
        text = str(answer)
        value = to_number(text) if is_number(text) else None
        if value is None:
            out.append(f"{text} {scale}" if scale else text)
        elif "%" in text:
            out.append("%.4f" % value)
        else:
            out.append("%.4f" % (round(value, 2) * scale_factor(scale)))
    return " ".join(out)


def _bag_f1(predicted: set[str], gold: set[str]) -> float:
    common = len(gold & predicted)
    precision = common / len(predicted) if predicted else 1.0
    recall = common / len(gold) if gold else 1.0
    if precision == 0.0 and recall == 0.0:
        return 0.0
    return (2 * precision * recall) / (precision + recall)


def _em_f1(predicted: str, gold: str) -> tuple[float, float]:
    pred_norm, gold_norm = normalize_answer(predicted), normalize_answer(gold)
    em = 1.0 if pred_norm == gold_norm else 0.0
    f1 = _bag_f1(set(pred_norm.split()), set(gold_norm.split()))
    return em, round(f1 * 100) / 100  # numpy's round(x, 2): half to even on x * 100


def gold_answers(gold: dict) -> list[str]:
    """The gold answers as the reference lists them: the spans, or the one value as a string."""
    kind, answer = gold["answer_type"], gold["answer"]
    if kind in ("span", "multi-span"):
        if not isinstance(answer, list):
            raise ValueError(f"a {kind} answer is a list, not {answer!r}")
        return list(answer)
    if kind == "count":
        return [str(int(answer))]
    return [str(answer)]


def em_and_f1(gold: dict, prediction: str | list | None, pred_scale: str = "") -> tuple[float, float]:
    """Exact match and F1 of one prediction (a string or a list of spans) with its scale, against one gold
    question ({'answer', 'answer_type', 'scale'}), as TaTQAEmAndF1 scores it."""
    if not prediction:
        return 0.0, 0.0
    answers = gold_answers(gold)
    if not answers:
        return 0.0, 0.0
    gold_string = answer_string(answers, gold["scale"])
    preds = prediction if isinstance(prediction, list) else [prediction]
    candidates = [answer_string(preds, pred_scale)]
    if len(preds) == 1 and not pred_scale and "%" not in str(preds[0]) and is_number(str(preds[0])):
        value = to_number(str(preds[0]))
        if value is not None:
            candidates.append("%.4f" % value)
    em, f1 = max(_em_f1(candidate, gold_string) for candidate in candidates)
    if gold["answer_type"] in ("arithmetic", "count"):
        f1 = em
    return em, f1
