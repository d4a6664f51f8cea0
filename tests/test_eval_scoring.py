"""The eval sets' scoring, against each set's reference scorer, and the loaders.

TAT-QA: finspace's tatqa_metric must give the reference's EM and F1. The table REFERENCE_CASES is the
reference's own test table (tatqa_metric_test.py in NExTplusplus/TAT-QA at 870accc; MIT License, Copyright (c)
2021 Fengbin Zhu), asserted here as data. Where the reference can be imported (a checkout of TAT-QA named by
FINSPACE_TATQA_REPO, or the git mirror this machine keeps), test_tatqa_matches_the_reference_itself runs it
and finspace on the same inputs and asserts they agree, case by case.
FinQA: its evaluate.py compares the executed answer rounded to 5 decimals and reads "12.5%" as 0.125
(str_to_num); with the reference importable, the number parsing is compared to str_to_num.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from finspace.errors import BadInput, DataUnavailable
from finspace.scoreboard import asking as prompt, fetched, sets, tatqa_metric
from finspace.scoreboard.formats import EvalItem
from finspace.scoreboard.score import ItemScore, final_answer, score, summarize, tatqa_prediction

TATQA_MIRROR = Path("/work/.mirror/NExTplusplus+TAT-QA/repo")
FINQA_MIRROR = Path("/work/.mirror/czyssrs+FinQA/repo")

# The reference's own examples: (gold question, prediction, prediction's scale, EM, F1).
REFERENCE_CASES = [
    ({'answer_type': 'span', 'answer': ['here is, a test'], 'scale': ''}, 'here is, a test', '', 1, 1),
    ({'answer_type': 'span', 'answer': ['1234.1'], 'scale': 'million'}, '1234.1', 'thousand', 0, 0),
    ({'answer_type': 'span', 'answer': ['1234.1'], 'scale': 'million'}, '123', 'thousand', 0, 0),
    ({'answer_type': 'span', 'answer': ['12314.1'], 'scale': 'million'}, '12314.1', 'million', 1, 1),
    (
        {'answer_type': 'multi-span', 'answer': ['singapore', 'china', 'usa'], 'scale': ''},
        ['singapore', 'china', 'usa'],
        '',
        1,
        1,
    ),
    (
        {'answer_type': 'multi-span', 'answer': ['singapore', 'china', 'usa'], 'scale': ''},
        ['china', 'singapore', 'usa'],
        '',
        1,
        1,
    ),
    (
        {'answer_type': 'multi-span', 'answer': ['singapore', 'china', 'usa'], 'scale': ''},
        ['china', 'singapore'],
        '',
        0,
        0.8,
    ),
    ({'answer_type': 'arithmetic', 'answer': 123.2, 'scale': 'million'}, 123.2, '', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 123.2, 'scale': 'million'}, 123200000, '', 1, 1),
    ({'answer_type': 'arithmetic', 'answer': 123.2, 'scale': 'million'}, 123.2, 'thousand', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 123.2, 'scale': ''}, 123.2, '', 1, 1),
    ({'answer_type': 'arithmetic', 'answer': 123.22, 'scale': ''}, 123.2, '', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 123.2, 'scale': ''}, 123.2010, '', 1, 1),
    ({'answer_type': 'count', 'answer': 5, 'scale': ''}, 5, '', 1, 1),
    ({'answer_type': 'arithmetic', 'answer': 22.12, 'scale': 'percent'}, 0.2212, '', 1, 1),
    ({'answer_type': 'arithmetic', 'answer': 22.12, 'scale': 'percent'}, 0.22121, 'percent', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 22.12, 'scale': 'percent'}, 22.1231, '', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 22.12, 'scale': 'percent'}, 22.1231, 'percent', 1, 1),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': 'million'}, '22.12', 'million', 1, 1),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': 'million'}, '22.12', '', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 22.12, 'scale': 'million'}, 'test', '', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 22.12, 'scale': 'million'}, ["1", "2"], '', 0, 0),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': 'percent'}, "-22.12", '', 0, 0),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': 'percent'}, "22.12%", '', 1, 1),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': ''}, "22.12%", '', 0, 0),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': 'million'}, "$22.12", '', 0, 0),
    ({'answer_type': 'arithmetic', 'answer': 22.12, 'scale': 'million'}, "$22.12", '', 0, 0),
    ({'answer_type': 'span', 'answer': ["22.12"], 'scale': 'percent'}, ["-22.12"], '', 0, 0),
    ({'answer_type': 'span', 'answer': ['$1.0 million'], 'scale': ''}, ["['$1.0 million']"], '', 1, 1),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': ''}, "$22.12", '', 1, 1),
    ({'answer_type': 'span', 'answer': [22.12], 'scale': 'percent'}, "22.12%", 'percent', 1, 1),
    ({'answer_type': 'multi-span', 'answer': ['$23,234', '$234.12'], 'scale': ''}, ['234.12', '23,234'], '', 1, 1),
    ({'answer_type': 'multi-span', 'answer': ['$35,120', '$24,159'], 'scale': ''}, ['$24,159', '$35,120'], '', 1, 1),
    ({'answer_type': 'arithmetic', 'answer': ['34.12'], 'scale': 'percent'}, ['0.3412'], '', 1, 1),
    (
        {
            'answer_type': 'span',
            'answer': [
                'wages and salaries, social security costs, pension and other costs and '
                'share-based payments, see note 10 of the Financial Statements'
            ],
            'scale': '',
        },
        ['wages and salaries, social security costs, pension and other costs and share - based payments,'],
        '',
        0,
        0.67,
    ),
    ({'answer_type': 'arithmetic', 'answer': ['34.12%'], 'scale': 'percent'}, ['0.3412'], '', 1, 1),
]

# The reference's tatqa_utils_test.py examples: normalize_answer and to_number.
NORMALIZE_CASES = [("-134.12", "-134.12"), ("134.12", "134.12"), ("(134.12)", "-134.12"), ("18.3%", "0.183")]
TO_NUMBER_CASES = [
    ("2.3 million", 2300000),
    ("-2.3 thousand", -2300),
    ("205 billion", 205000000000),
    ("-1,210 million", -1210000000),
]


@pytest.mark.parametrize("gold, prediction, pred_scale, em, f1", REFERENCE_CASES)
def test_tatqa_reference_examples(gold, prediction, pred_scale, em, f1):
    assert tatqa_metric.em_and_f1(gold, prediction, pred_scale) == (em, f1)


@pytest.mark.parametrize("text, want", NORMALIZE_CASES)
def test_tatqa_normalize_answer(text, want):
    assert tatqa_metric.normalize_answer(text) == want


@pytest.mark.parametrize("text, want", TO_NUMBER_CASES)
def test_tatqa_to_number(text, want):
    assert tatqa_metric.to_number(text) == want


# ---- the reference itself, where it can be imported -------------------------------------------------------


def _reference_source(names: list[str], tmp: Path, env: str, mirror: Path) -> Path | None:
    """A folder holding the reference's files: FINSPACE_* names a checkout; else the machine's git mirror."""
    given = os.environ.get(env)
    if given and all((Path(given) / n).is_file() for n in names):
        return Path(given)
    if not mirror.is_dir():
        return None
    for name in names:
        out = subprocess.run(["git", f"--git-dir={mirror}", "show", f"HEAD:{name}"], capture_output=True)
        if out.returncode != 0:
            return None
        (tmp / Path(name).name).write_bytes(out.stdout)
    return tmp


@pytest.fixture(scope="module")
def tatqa_reference(tmp_path_factory):
    folder = _reference_source(
        ["tatqa_metric.py", "tatqa_utils.py"], tmp_path_factory.mktemp("tatqa_ref"), "FINSPACE_TATQA_REPO", TATQA_MIRROR
    )
    if folder is None:
        pytest.skip("TAT-QA's reference scorer is not on this machine (set FINSPACE_TATQA_REPO to a checkout)")
    pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    if "scipy" not in sys.modules:  # the reference aligns one bag with one bag: the assignment is trivial
        stub = types.ModuleType("scipy")
        stub.optimize = types.ModuleType("scipy.optimize")
        stub.optimize.linear_sum_assignment = _tiny_assignment
        sys.modules.update({"scipy": stub, "scipy.optimize": stub.optimize})
    sys.path.insert(0, str(folder))
    try:
        import tatqa_metric as reference  # noqa: PLC0415 - the reference, imported from its own files
    finally:
        sys.path.remove(str(folder))
    return reference


def _tiny_assignment(cost):
    import itertools

    import numpy as np

    rows, cols = cost.shape
    best = min(
        itertools.permutations(range(cols), min(rows, cols)),
        key=lambda perm: sum(cost[r, c] for r, c in zip(range(rows), perm)),
    )
    return np.arange(len(best)), np.array(best)


def _reference_em_f1(reference, gold, prediction, pred_scale):
    metric = reference.TaTQAEmAndF1()
    metric(dict(gold), prediction, pred_scale)
    em, f1, _, _ = metric.get_overall_metric()
    return float(em), float(f1)


def _variants(gold: dict) -> list[tuple]:
    answer, scale = gold["answer"], gold["scale"]
    first = str(answer[0] if isinstance(answer, list) else answer)
    out = [
        (first, scale),
        (first, ""),
        (f"{first} {scale}".strip(), ""),
        (first + "%", ""),
        ("(" + first + ")", ""),
        (first.upper(), ""),
        ("the " + first, scale),
        (first[: max(1, len(first) // 2)], scale),
        ("n/a", ""),
    ]
    if isinstance(answer, list):
        out += [(list(answer), scale), (list(reversed(answer)), ""), (answer[:-1] or answer, scale)]
    for factor, word in ((1000, "thousand"), (1e6, "million"), (0.01, "percent")):
        value = tatqa_metric.to_number(first)
        if value is not None:
            out += [(str(value * factor), ""), (str(value), word)]
    return out


def _gold_questions(tmp: Path) -> list[dict]:
    cases = [g for g, *_ in REFERENCE_CASES]
    dev = (
        _dev_file()
        or (_reference_source(["dataset_raw/tatqa_dataset_dev.json"], tmp, "FINSPACE_TATQA_REPO", TATQA_MIRROR) or tmp)
        / "tatqa_dataset_dev.json"
    )
    dev = dev if dev.is_file() else None
    if dev is not None:
        for record in json.loads(dev.read_text(encoding="utf-8"))[:40]:
            cases += [{k: q[k] for k in ("answer", "answer_type", "scale")} for q in record["questions"]]
    return cases


def _dev_file() -> Path | None:
    for folder in sets.placed_dirs(os.environ.get("FINSPACE_EVALSETS_DIR")):
        if (folder / "tatqa" / "tatqa_dataset_dev.json").is_file():
            return folder / "tatqa" / "tatqa_dataset_dev.json"
    return None


def test_tatqa_matches_the_reference_itself(tatqa_reference, tmp_path):
    checked = 0
    for gold, prediction, pred_scale, *_ in REFERENCE_CASES:
        assert tatqa_metric.em_and_f1(gold, prediction, pred_scale) == _reference_em_f1(
            tatqa_reference, gold, prediction, pred_scale
        ), (gold, prediction, pred_scale)
        checked += 1
    for gold in _gold_questions(tmp_path):
        for prediction, pred_scale in _variants(gold):
            ours = tatqa_metric.em_and_f1(gold, prediction, pred_scale)
            assert ours == _reference_em_f1(tatqa_reference, gold, prediction, pred_scale), (
                gold,
                prediction,
                pred_scale,
            )
            checked += 1
    assert checked > 300


# ---- TAT-QA through score(): the answer read from a reply, its scale, multi-span ---------------------------


def _item(gold, question="q?", context="c") -> EvalItem:
    return EvalItem(id="x", question=question, context=context, gold=gold, meta={})


MILLION_SPAN = {"answer": ["$1,496.5"], "answer_type": "span", "scale": "million"}
PERCENT_ARITH = {"answer": -22.22, "answer_type": "arithmetic", "scale": "percent"}
SPANS = {
    "answer": ["fixed-price type", "cost-plus type", "time-and-material type"],
    "answer_type": "multi-span",
    "scale": "",
}
TEXT_SPAN = {"answer": ["By comparison against the FTSE pension liability index"], "answer_type": "span", "scale": ""}


@pytest.mark.parametrize(
    "gold, reply, correct, f1, refused",
    [
        (MILLION_SPAN, "Total sales were $1,496.5 million.\nAnswer: $1,496.5 million", True, 1.0, False),
        (MILLION_SPAN, "**Answer:** 1,496.5 million.", True, 1.0, False),
        (MILLION_SPAN, "Answer: 1,496.5", False, 0.0, False),  # no scale: TAT-QA counts it wrong
        (MILLION_SPAN, "Answer: 1,496.5 thousand", False, 0.0, False),
        (PERCENT_ARITH, "Answer: -22.22%", True, 1.0, False),
        (PERCENT_ARITH, "Answer: -22.22 percent", True, 1.0, False),
        (PERCENT_ARITH, "Answer: -0.2222", True, 1.0, False),  # a bare fraction matches a percent (the reference)
        (PERCENT_ARITH, "Answer: -22.2%", False, 0.0, False),
        (SPANS, "Answer: fixed-price type, cost-plus type and time-and-material type", True, 1.0, False),
        (SPANS, "Answer: cost-plus type; fixed-price type", False, 0.86, False),
        (TEXT_SPAN, "Answer: by comparison against the FTSE pension liability index.", True, 1.0, False),
        (TEXT_SPAN, "Answer: the FTSE index", False, 0.44, False),
        # a sentence for a one-number gold: its last figure (a year skipped) with the scale word after it
        (MILLION_SPAN, "Total sales in 2019 were approximately 1,496.5 million dollars.", True, 1.0, False),
        (MILLION_SPAN, "Total sales in 2019 were $1,496.5.", False, 0.0, False),  # the scale is still needed
        (MILLION_SPAN, "Total sales were 1,496.5 million in 2019", True, 1.0, False),
        (PERCENT_ARITH, "The change from 2018 to 2019 is -22.22%.", True, 1.0, False),
        (TEXT_SPAN, "I cannot tell from the context.", False, 0.0, True),
        (TEXT_SPAN, "", False, 0.0, False),
    ],
)
def test_tatqa_scores_a_reply(gold, reply, correct, f1, refused):
    got = score("tatqa", _item(gold), reply)
    assert (got.correct, got.f1, got.refused) == (correct, f1, refused)


def test_tatqa_prediction_takes_the_scale_off_a_number():
    assert tatqa_prediction("$5,686 million", MILLION_SPAN) == ("$5,686", "million")
    assert tatqa_prediction("12.5%", PERCENT_ARITH) == ("12.5", "percent")
    assert tatqa_prediction("2 billions", MILLION_SPAN) == ("2", "billion")
    assert tatqa_prediction("cost-plus type", TEXT_SPAN) == ("cost-plus type", "")


# ---- FinQA -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gold, question, reply, correct",
    [
        (94.0, "what is the net change in net revenue?", "5829 - 5735 = 94\nAnswer: 94", True),
        (94.0, "what is the net change?", "Answer: $94 million", True),
        (94.0, "what is the net change?", "Answer: 95", False),
        (94.0, "what is the net change?", "The change is 94.", True),  # no Answer line: the reply's last number
        (94.0, "what is the net change?", "It is 94, from 5735 to 5829", False),
        (0.14464, "what percentage of total facilities are leased?", "Answer: 14.5%", True),
        (0.14464, "what percentage of total facilities are leased?", "Answer: 14.46", True),
        (0.14464, "what percentage of total facilities are leased?", "Answer: 0.14464", True),
        (0.14464, "what percentage of total facilities are leased?", "Answer: 12%", False),
        (14.1, "what was the growth rate in percent?", "Answer: 14.1%", True),  # a gold already in percent
        (-1210.0, "what was the change in cash?", "Answer: (1,210)", True),
        (-1210.0, "what was the change in cash?", "Answer: -1,210", True),
        (-1210.0, "what was the change in cash?", "Answer: 1,210", False),
        (3.8, "what is the ratio?", "Answer: 4", False),  # 1% tolerance, not the reply's rounding
        (3.8, "what is the ratio?", "Answer: 3.81", True),
        (0.0, "what is the change?", "Answer: 0", True),
        (0.0, "what is the change?", "Answer: 0.01", False),
        ("yes", "did revenue grow?", "Revenue grew.\nAnswer: Yes", True),
        ("yes", "did revenue grow?", "Answer: no", False),
        ("no", "did revenue grow?", "Answer: No, it fell", True),
        (94.0, "what is the net change?", "I cannot answer from the context.", False),
    ],
)
def test_finqa_scores_a_reply(gold, question, reply, correct):
    got = score("finqa", _item(gold, question), reply)
    assert got.correct is correct, got
    assert got.f1 is None


def test_finqa_counts_a_refusal_apart():
    got = score("finqa", _item(94.0), "The context does not provide the 2015 figure.\nAnswer: not enough information")
    assert (got.correct, got.refused) == (False, True)
    assert score("finqa", _item(94.0), "Answer: 93").refused is False


@pytest.fixture(scope="module")
def finqa_reference(tmp_path_factory):
    folder = _reference_source(
        ["code/evaluate/evaluate.py"], tmp_path_factory.mktemp("finqa_ref"), "FINSPACE_FINQA_REPO", FINQA_MIRROR
    )
    if folder is None:
        pytest.skip("FinQA's evaluate.py is not on this machine (set FINSPACE_FINQA_REPO to a checkout)")
    for module in ("sympy", "tqdm", "numpy"):
        pytest.importorskip(module)
    sys.path.insert(0, str(folder))
    try:
        import evaluate as reference  # noqa: PLC0415 - FinQA's own evaluate.py
    finally:
        sys.path.remove(str(folder))
    return reference


@pytest.mark.parametrize("text", ["94", "5,829", "14.1%", "-3.5", "0.14464", "1,234.5%", "12%", "100"])
def test_finqa_reads_numbers_as_its_evaluate_does(finqa_reference, text):
    """FinQA's str_to_num: commas out, a % divides by 100. The scorer's first reading is the same number."""
    from finspace.scoreboard.score import numbers

    num = numbers(text)[0]
    ours = num.value / 100 if num.percent else num.value
    assert ours == pytest.approx(finqa_reference.str_to_num(text), abs=0)
    gold = round(finqa_reference.str_to_num(text), 5)
    assert score("finqa", _item(gold), f"Answer: {text}").correct


# ---- FinanceBench ------------------------------------------------------------------------------------------

LONG_GOLD = (
    "No, the company is managing its CAPEX and Fixed Assets pretty efficiently, which is evident from "
    "below key metrics: CAPEX/Revenue Ratio: 5.1%"
)
KEYWORD_GOLD = "The operating margin fell because of higher restructuring charges and weaker volume in Europe"


@pytest.mark.parametrize(
    "gold, reply, correct, refused",
    [
        ("$1577.00", "Capital expenditure was $1,577 million.\nAnswer: $1,577 million", True, False),
        ("$1577.00", "Answer: 1577", True, False),
        ("$1577.00", "Answer: $1,373 million in FY2018", False, False),
        ("$1577.00", "Answer: FY2018 capex: $1,577 million", True, False),  # the year is skipped
        ("$1577.00", "Answer: " + " ".join(str(i) for i in range(1, 3000)), False, False),  # a list of figures
        ("$8.70", "Answer: $8.738 billion", True, False),  # within 1%
        ("$8.70", "Answer: $8.9 billion", False, False),
        ("65.4%", "Answer: 0.654", True, False),
        ("65.4%", "Answer: 65.4% in 2022", True, False),
        ("2022", "Answer: 2022", True, False),
        (LONG_GOLD, "Answer: No, capex is about 5% of revenue", True, False),
        (LONG_GOLD, "Answer: Yes, it is capital intensive", False, False),
        (
            KEYWORD_GOLD,
            "Answer: higher restructuring charges and weaker volume in Europe cut the operating margin",
            True,
            False,
        ),
        (KEYWORD_GOLD, "Answer: the margin rose on strong demand", False, False),
        (KEYWORD_GOLD, "Answer: " + KEYWORD_GOLD + " " + " ".join(f"word{i}" for i in range(200)), False, False),
        ("$1577.00", "I cannot find the capital expenditure in the context provided.", False, True),
        ("$1577.00", "Answer: Not enough information in the context", False, True),
        ("$1577.00", "", False, False),
    ],
)
def test_financebench_scores_a_reply(gold, reply, correct, refused):
    got = score("financebench", _item(gold), reply)
    assert (got.correct, got.refused) == (correct, refused), got
    assert got.f1 is not None and 0.0 <= got.f1 <= 1.0


@pytest.mark.parametrize(
    "name, gold",
    [
        ("tatqa", {"answer": ["a b"], "answer_type": "multi-span", "scale": ""}),
        ("tatqa", {"answer": 1.0, "answer_type": "arithmetic", "scale": "million"}),
        ("finqa", 7.0),
        ("financebench", "The margin fell on costs and volume in Europe"),
        ("financebench", "$7.00"),
    ],
)
def test_hostile_replies_are_scored_wrong_quickly(name, gold):
    item = _item(gold)
    for reply in (
        "Answer: " + "1 " * 50_000,
        "Answer: " + "1," * 50_000 + "x",
        "Answer: " + "(" * 100_000,
        "Answer: " + "9" * 100_000 + " million",
        " and " * 20_000,
        "Answer: " + "a; " * 30_000,
        "Answer: " + "9" * 1_500 + "%",
        "Answer: 1e999",
        "Answer: nan",
        "Answer: inf million",
    ):
        # the scorer's own CPU time (this thread's): what a hostile reply could blow up, whatever else the machine
        # runs; the wall time under a busy machine's load is shown beside it
        started, cpu_started = time.monotonic(), time.thread_time()
        got = score(name, item, reply)
        cpu, wall = time.thread_time() - cpu_started, time.monotonic() - started
        assert got.correct is False and cpu < 2.0, (reply[:30], got, f"{cpu:.2f} s of CPU ({wall:.2f} s wall)")


def test_final_answer_is_the_last_answer_line():
    assert final_answer("Answer: 1\nmore thinking\nFinal answer: **2**.") == "2"
    assert final_answer("no line here\n\nlast line 7\n") == "last line 7"
    assert final_answer("") is None


def test_summarize_counts_correct_f1_and_refusals_apart():
    scores = [
        ItemScore(True, 1.0, False, "a"),
        ItemScore(False, 0.5, False, "b"),
        ItemScore(False, None, True, None),
        ItemScore(False, 0.0, True, "c"),
    ]
    assert summarize(scores) == {"n": 4, "correct": 1, "score": 0.25, "f1": 0.5, "refusals": 2}
    assert summarize([]) == {"n": 0, "correct": 0, "score": 0.0, "f1": None, "refusals": 0}


def test_score_refuses_an_unknown_set():
    with pytest.raises(BadInput, match="finqa, tatqa, financebench"):
        score("mmlu", _item(1.0), "Answer: 1")


def test_a_reply_that_copies_the_context_gets_no_credit():
    """demo's replies are random text: a reply of context words and stray numbers must not score."""
    item = _item(MILLION_SPAN, context="Total sales | $1,496.5 | $1,202.9")
    assert not score("tatqa", item, "Total sales 1,202.9 1,107.7 sales sales Fixed Price").correct
    assert not score("finqa", _item(94.0), "5829 5735 187 revenue 2015").correct


# ---- loaders: published formats, placed / cached / given files, bad files, no network ---------------------
# Records below are made up for these tests, in each set's published format.


def _finqa_records(n: int) -> list[dict]:
    return [
        {
            "pre_text": [f"revenue rose in year {i} .", "."],
            "post_text": ["see note 4 ."],
            "filename": f"X/2020/p{i}.pdf",
            "table": [["", "2020", "2019"], ["net revenue", f"$ {5000 + i}", "$ 4900"]],
            "qa": {
                "question": f"what is the change in net revenue {i}?",
                "program": f"subtract({5000 + i}, 4900)",
                "exe_ans": float(100 + i),
                "answer": str(100 + i),
            },
            "id": f"X/2020/p{i}.pdf-1",
        }
        for i in range(n)
    ]


def _tatqa_records(n_tables: int, per_table: int) -> list[dict]:
    return [
        {
            "table": {"uid": f"t{t}", "table": [["", "2019", "2018"], ["Sales", f"{t},100", "900"]]},
            "paragraphs": [
                {"uid": f"p{t}", "order": 2, "text": "Second."},
                {"uid": f"q{t}", "order": 1, "text": "First."},
            ],
            "questions": [
                {
                    "uid": f"t{t}-q{k}",
                    "order": k,
                    "question": f"What were sales {k}?",
                    "answer": [f"{t},100"],
                    "derivation": "",
                    "answer_type": "span",
                    "answer_from": "table",
                    "rel_paragraphs": [],
                    "req_comparison": False,
                    "scale": "thousand",
                }
                for k in range(per_table)
            ],
        }
        for t in range(n_tables)
    ]


def _financebench_lines(n: int) -> str:
    rows = [
        {
            "financebench_id": f"financebench_id_{i:05d}",
            "company": "ACME",
            "doc_name": "ACME_2022_10K",
            "question_type": "metrics-generated",
            "question_reasoning": "Information extraction",
            "question": f"What is FY2022 capex {i}?",
            "answer": f"${1000 + i}.00",
            "justification": "",
            "dataset_subset_label": "OPEN_SOURCE",
            "evidence": [
                {
                    "evidence_text": "Purchases of PP&E \n \n(1,577)",
                    "doc_name": "ACME_2022_10K",
                    "evidence_page_num": 59,
                    "evidence_text_full_page": "...",
                }
            ],
        }
        for i in range(n)
    ]
    return "\n".join(json.dumps(r) for r in rows) + "\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "test.json").write_text(json.dumps(_finqa_records(60), indent=2))
    (tmp_path / "tatqa_dataset_dev.json").write_text(json.dumps(_tatqa_records(12, 6), indent=2))
    (tmp_path / "financebench_open_source.jsonl").write_text(_financebench_lines(150))
    return tmp_path


@pytest.fixture
def placed(tmp_path, monkeypatch, files):
    """The published files placed under evalsets/<set>/ (a folder of this test's own)."""
    root = tmp_path / "evalsets"
    for name, file in (
        ("finqa", "test.json"),
        ("tatqa", "tatqa_dataset_dev.json"),
        ("financebench", "financebench_open_source.jsonl"),
    ):
        (root / name).mkdir(parents=True)
        (root / name / file).write_bytes((files / file).read_bytes())
    monkeypatch.setattr(sets, "REPO_ROOT", tmp_path / "no-checkout")  # only this test's folder is looked in
    return root


@pytest.mark.parametrize("name, n", [("finqa", 50), ("tatqa", 50), ("financebench", 150)])
def test_a_placed_set_loads_its_default_subset(placed, tmp_path, name, n):
    loaded = sets.load_set(name, data_dir=tmp_path / "data", evalsets_dir=placed)
    assert loaded.n == n and len({i.id for i in loaded.items}) == n
    assert loaded.name == name and loaded.license and loaded.source
    assert loaded.version.startswith(f"{name} ") and f"first-{n} sha256:" in loaded.version
    assert all(i.question and i.context for i in loaded.items)
    assert sets.load_set(name, limit=7, data_dir=tmp_path / "data", evalsets_dir=placed).items == loaded.items[:7]
    assert not (tmp_path / "data").exists()  # nothing fetched, nothing cached


def test_each_format_gives_question_context_and_gold(placed, tmp_path):
    finqa = sets.load_set("finqa", data_dir=tmp_path, evalsets_dir=placed).items[3]
    assert (finqa.id, finqa.gold, finqa.question) == ("X/2020/p3.pdf-1", 103.0, "what is the change in net revenue 3?")
    assert finqa.context.index("Table:\n | 2020 | 2019\nnet revenue | $ 5003 | $ 4900") < finqa.context.index("Text:")
    assert "\n.\n" not in finqa.context  # FinQA's "." filler lines dropped
    tatqa = sets.load_set("tatqa", data_dir=tmp_path, evalsets_dir=placed).items[7]
    assert tatqa.gold == {"answer": ["1,100"], "answer_type": "span", "scale": "thousand"}
    assert tatqa.context.endswith("Text:\nFirst.\nSecond.")  # paragraphs in their order
    bench = sets.load_set("financebench", data_dir=tmp_path, evalsets_dir=placed).items[0]
    assert (bench.gold, bench.meta["evidence_pages"]) == ("$1000.00", [59])
    assert "Purchases of PP&E (1,577)" in bench.context


def test_a_file_placed_beside_src_is_found(monkeypatch, files, tmp_path):
    for folder in ("evalsets", "shared/evalsets"):
        root = tmp_path / folder.replace("/", "-")
        (root / folder / "finqa").mkdir(parents=True)
        (root / folder / "finqa" / "test.json").write_bytes((files / "test.json").read_bytes())
        monkeypatch.setattr(sets, "REPO_ROOT", root)
        assert sets.load_set("finqa", data_dir=tmp_path / "data").n == 50
    assert not (tmp_path / "data").exists()


def test_the_version_pins_the_items_not_the_copy(placed, files, tmp_path):
    """The same items from a pre-cut copy or from the whole published file: the same sha256."""
    whole = sets.load_set("tatqa", path=files / "tatqa_dataset_dev.json", limit=50)
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(_tatqa_records(12, 6)[:9], separators=(",", ":")))  # 54 questions
    assert sets.load_set("tatqa", path=cut, limit=50).version.split()[-1] == whole.version.split()[-1]
    assert (
        sets.load_set("tatqa", data_dir=tmp_path, evalsets_dir=placed).version.split()[-1] == whole.version.split()[-1]
    )
    assert sets.load_set("tatqa", path=cut, limit=49).version.split()[-1] != whole.version.split()[-1]


def test_a_given_path_reads_every_item(files):
    assert sets.load_set("finqa", path=files / "test.json").n == 60
    assert sets.load_set("tatqa", path=files / "tatqa_dataset_dev.json").n == 72
    assert sets.load_set("financebench", path=str(files / "financebench_open_source.jsonl"), limit=3).n == 3


@pytest.mark.parametrize("name", ["mmlu", "", None, "finqa;rm", 3])
def test_an_unknown_set_is_refused_naming_the_known_ones(name):
    with pytest.raises(BadInput, match="unknown eval set .*: choose one of finqa, tatqa, financebench"):
        sets.load_set(name)


@pytest.mark.parametrize("limit", [0, -1, 2.5, "10", True])
def test_a_bad_limit_is_refused(files, limit):
    with pytest.raises(BadInput, match="limit must be a whole number"):
        sets.load_set("finqa", path=files / "test.json", limit=limit)


@pytest.mark.parametrize(
    "name, file, damage, says",
    [
        ("finqa", "test.json", lambda b: b[: len(b) // 2], "corrupted"),
        ("tatqa", "tatqa_dataset_dev.json", lambda b: b"\xff\xfe" + b, "corrupted"),
        ("financebench", "financebench_open_source.jsonl", lambda b: b + b"{not json\n", "corrupted"),
        ("finqa", "test.json", lambda b: b'{"data": []}', "not in the published finqa format"),
        ("tatqa", "tatqa_dataset_dev.json", lambda b: b'[{"table": {}}]', "not in the published tatqa format"),
        ("finqa", "test.json", lambda b: b"[]", "holds no items"),
    ],
)
def test_a_corrupted_placed_file_names_the_file_and_the_fix(placed, tmp_path, name, file, damage, says):
    target = placed / name / file
    target.write_bytes(damage(target.read_bytes()))
    with pytest.raises(BadInput) as err:
        sets.load_set(name, data_dir=tmp_path / "data", evalsets_dir=placed)
    message = str(err.value)
    assert says in message and file in message and "replace it with" in message
    assert message.startswith(f"{name}: {file} ") or message.startswith(f"{name}: no file {file}")
    assert str(tmp_path) not in message and "evalsets" not in message  # the basename, no server path


def test_a_corrupted_cached_file_says_to_delete_it(monkeypatch, tmp_path):
    monkeypatch.setattr(sets, "REPO_ROOT", tmp_path / "no-checkout")
    spec = sets._SPECS["tatqa"]
    cached = fetched.cached_path(spec.remote, tmp_path)
    cached.parent.mkdir(parents=True)
    cached.write_text("[{")
    with pytest.raises(BadInput, match="corrupted .*delete it from the data folder's evals/ to fetch it again"):
        sets.load_set("tatqa", data_dir=tmp_path)
    cached.write_text(json.dumps(_tatqa_records(10, 6)))
    assert sets.load_set("tatqa", data_dir=tmp_path).n == 50  # a good cached copy is used, no fetch


def test_a_missing_given_file_names_it(tmp_path):
    with pytest.raises(BadInput, match="no file nope.json; pass test.json as published"):
        sets.load_set("finqa", path=tmp_path / "nope.json")


def _refused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_no_network_fails_at_once_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(sets, "REPO_ROOT", tmp_path / "no-checkout")
    remote = fetched.Remote(
        "patronus-ai/financebench",
        "main",
        "data/financebench_open_source.jsonl",
        f"http://127.0.0.1:{_refused_port()}/financebench_open_source.jsonl",
    )
    monkeypatch.setitem(
        sets._SPECS,
        "financebench",
        sets._SPECS["financebench"].__class__(**{**sets._SPECS["financebench"].__dict__, "remote": remote}),
    )
    started = time.monotonic()
    with pytest.raises(DataUnavailable) as err:
        sets.load_set("financebench", data_dir=tmp_path, timeout_s=2)
    assert time.monotonic() - started < 10
    message = str(err.value)
    assert "financebench_open_source.jsonl could not be fetched" in message
    assert "FINSPACE_FINANCEBENCH_FILE" in message and "https://github.com/patronus-ai/financebench" in message
    assert not list(tmp_path.rglob("*.jsonl*"))  # nothing half-written left


def test_a_fetch_that_hangs_is_cut_by_the_timeout(tmp_path):
    """A server that accepts and never answers: the fetch gives up after timeout_s, not never."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        remote = fetched.Remote("a/b", "main", "x.json", f"http://127.0.0.1:{server.getsockname()[1]}/x.json")
        started = time.monotonic()
        with pytest.raises(DataUnavailable, match="x.json could not be fetched"):
            fetched.fetch(remote, tmp_path, timeout_s=1.5)
        assert time.monotonic() - started < 15


def test_a_fetch_is_cached_once(tmp_path):
    """A real HTTP fetch (a local server): the body lands under evals/ and the next load reads the cache."""
    import http.server
    import threading

    body = _financebench_lines(5).encode()
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        remote = fetched.Remote("a/b", "main", "data/f.jsonl", f"http://127.0.0.1:{server.server_port}/f.jsonl")
        first = fetched.fetch(remote, tmp_path, timeout_s=5)
        again = fetched.fetch(remote, tmp_path, timeout_s=5)
    finally:
        server.shutdown()
        server.server_close()
    assert first == again == tmp_path / "evals" / "a__b__f.jsonl" and first.read_bytes() == body
    assert hits == ["/f.jsonl"]


# ---- the real published subsets, where this machine has them ----------------------------------------------


def _real_file(name: str, tmp: Path) -> Path | None:
    spec = sets._SPECS[name]
    for folder in sets.placed_dirs(os.environ.get("FINSPACE_EVALSETS_DIR")):
        if (folder / name / spec.remote.filename).is_file():
            return folder / name / spec.remote.filename
    mirror = {"tatqa": TATQA_MIRROR, "finqa": FINQA_MIRROR}.get(name)
    got = _reference_source([spec.remote.file], tmp, "", mirror) if mirror else None
    return got / spec.remote.filename if got else None


@pytest.mark.parametrize("name", ["finqa", "tatqa"])
def test_the_published_subset_loads(tmp_path, name):
    real = _real_file(name, tmp_path)
    if real is None:
        pytest.skip(f"{name}'s published file is not on this machine (place it under evalsets/{name}/)")
    loaded = sets.load_set(name, path=real, limit=50)
    assert loaded.n == 50 and len({i.id for i in loaded.items}) == 50
    for item in loaded.items:
        assert item.question and item.context
        assert score(name, item, f"Answer: {item.gold if name == 'finqa' else ''}") is not None
    if name == "tatqa":  # the first dev question, as published
        assert loaded.items[1].gold == {"answer": ["$1,496.5"], "answer_type": "span", "scale": "million"}


def test_every_gold_scores_itself(tmp_path):
    """Each TAT-QA gold, written as a reply, is scored correct: the reply format and the scorer agree."""
    real = _real_file("tatqa", tmp_path)
    if real is None:
        pytest.skip("TAT-QA's dev file is not on this machine")
    for item in sets.load_set("tatqa", path=real, limit=50).items:
        gold = item.gold
        answer = "; ".join(gold["answer"]) if isinstance(gold["answer"], list) else str(gold["answer"])
        scale = {"percent": "%", "": ""}.get(gold["scale"], " " + gold["scale"])
        reply = (
            f"Answer: {answer}{scale}"
            if gold["answer_type"] != "span" or answer[:1].isdigit() or answer[:1] in "$-("
            else f"Answer: {answer}"
        )
        assert score("tatqa", item, reply).correct, (item.id, gold, reply)


# ---- the prompt --------------------------------------------------------------------------------------------


def test_messages_hold_context_question_and_the_answer_line():
    item = _item(1.0, question="what is the change?", context="Table:\na | 1\n\nText:\nhello")
    msgs = prompt.messages("finqa", item)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "Answer: <value>" in msgs[0]["content"] and "Answer: <value>" in msgs[1]["content"]
    assert "Table:\na | 1" in msgs[1]["content"] and "Question: what is the change?" in msgs[1]["content"]
    assert prompt.PROMPT_FORMAT == "finspace-eval-v1"


def test_a_long_context_is_cut_to_the_budget_at_a_line_end():
    context = "Table:\n" + "\n".join(f"row {i} | {i * 7}" for i in range(2000))
    item = _item(1.0, context=context)
    for budget in (200, 1000, 3000):
        user = prompt.messages("tatqa", item, max_context_chars=budget)[1]["content"]
        shown = user.split("Context:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        assert len(shown) <= budget and shown.startswith("Table:\nrow 0 | 0")
        assert shown.endswith(f"[context cut to {budget:,} of {len(context):,} characters]")
    assert prompt.messages("tatqa", _item(1.0, context="short"))[1]["content"].count("short") == 1
    with pytest.raises(BadInput, match="max_context_chars"):
        prompt.messages("tatqa", item, max_context_chars=10)
    with pytest.raises(BadInput, match="unknown eval set"):
        prompt.messages("nope", item)


def test_the_default_prompt_fits_the_small_models_context():
    """2,048 tokens for prompt and reply: the default budget keeps the prompt under about 1,300 tokens even
    at 3 characters a token, leaving the reply 700."""
    item = _item(1.0, question="q" * 300, context="x" * 50_000)
    total = sum(len(m["content"]) for m in prompt.messages("financebench", item))
    assert total < 3900


def _random_replies(items, seed: int) -> list[str]:
    """What a random-weight model writes: words and numbers from the context, in no order."""
    import random

    rng = random.Random(seed)
    out = []
    for item in items:
        words = item.context.split()
        out.append(
            " ".join(rng.choice(words) for _ in range(30))
            + "\nAnswer: "
            + " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        )
    return out


@pytest.mark.parametrize("name", ["finqa", "tatqa", "financebench"])
def test_random_context_words_score_near_zero(placed, tmp_path, name):
    items = sets.load_set(name, data_dir=tmp_path, evalsets_dir=placed).items
    for seed in range(3):
        result = summarize(score(name, i, r) for i, r in zip(items, _random_replies(items, seed)))
        assert result["score"] <= 0.1, result


def test_random_context_words_score_near_zero_on_the_real_subset(tmp_path):
    real = _real_file("tatqa", tmp_path)
    if real is None:
        pytest.skip("TAT-QA's dev file is not on this machine")
    items = sets.load_set("tatqa", path=real, limit=50).items
    for seed in range(5):
        result = summarize(score("tatqa", i, r) for i, r in zip(items, _random_replies(items, seed)))
        assert result["correct"] <= 3, result
