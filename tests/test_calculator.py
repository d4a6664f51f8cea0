"""The chat's calculator: decimal arithmetic over a whitelisted syntax tree, bounded; every refusal names the fix."""

from __future__ import annotations

import time

import pytest

from finspace.errors import BadInput
from finspace.tools import registry
from finspace.tools.calculator import CalculatorError, calculate


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("1 + 2", "3"),
        ("0.1 + 0.2", "0.3"),  # decimal, not binary floating point
        ("(391035 - 383285) / 383285 * 100", "2.02199407751412"),
        ("391,035 / 1,000", "391.035"),  # thousands separators
        ("$1,234.50 * 2", "2469"),
        ("12%", "0.12"),
        ("200 * 5%", "10"),
        ("1 + 5%", "1.05"),
        ("2 ** 10", "1024"),
        ("2^10", "1024"),
        ("3 × 4", "12"),
        ("3 x 4", "12"),
        ("10 ÷ 4", "2.5"),
        ("(1.5 ** (1/5) - 1) * 100", "8.44717711976986"),  # a CAGR
        ("-(-3)", "3"),
        ("round(2.675, 2)", "2.68"),  # decimal rounding of the written number, half-even
        ("round(1234.5)", "1234"),
        ("abs(-4.5)", "4.5"),
        ("max(1, 7, 3) - min(4, 2)", "5"),
        ("sqrt(2)", "1.4142135623731"),
        ("1/3", "0.333333333333333"),
        ("1e6 / 4", "250000"),
        ("0 * 5", "0"),
        ("((((1))))", "1"),
    ],
)
def test_arithmetic(expression, expected):
    assert calculate(expression) == expected


@pytest.mark.parametrize(
    "expression, names",
    [
        ("9**9**9", "exponent"),
        ("1/0", "division by zero"),
        ("0/0", "undefined"),
        ("(" * 10_000 + "1" + ")" * 10_000, "limit is 500"),
        ("(" * 240 + "1" + ")" * 240, "nests parentheses"),
        ("1e309", "out of range"),
        ("10 ** 101", "out of range"),
        ("9 ** 1000", "out of range"),
        ("1" * 600, "limit is 500"),
        ("__import__('os').system('true')", "not arithmetic"),
        ("open('/etc/passwd')", "not arithmetic"),
        ("x + 1", "not arithmetic"),
        ("[1, 2]", "not arithmetic"),
        ("'a' * 3", "not a number"),
        ("True + 1", "not a number"),
        ("10 % 3", "cannot read"),  # % is a percentage, never a remainder
        ("1 +", "cannot read"),
        ("", "non-empty"),
        ("(-8) ** 0.5", "not a real number"),
        ("sqrt(-1)", "not a real number"),
        ("round(1, 2, 3)", "round(x"),
        ("7 // 2", "not arithmetic"),
        ("1 < 2", "not arithmetic"),
        ("+".join(["1"] * 150), "parts"),
    ],
)
def test_refusals_name_the_fix(expression, names):
    with pytest.raises(CalculatorError) as err:
        calculate(expression)
    assert names in str(err.value)
    assert isinstance(err.value, BadInput)


def test_non_text_is_refused():
    with pytest.raises(CalculatorError, match="non-empty text"):
        calculate(12)


def test_hostile_expressions_are_bounded_in_time():
    """Each bound is checked before the work: the worst inputs cost no more than a plain sum (same run's baseline)."""
    start = time.perf_counter()
    for _ in range(20):
        calculate("1 + 2")
    baseline = time.perf_counter() - start
    hostile = ["9**9**9", "(" * 10_000 + "1" + ")" * 10_000, "2 ** 999.5", "1.0000001 ** 1000", "9" * 499]
    start = time.perf_counter()
    for _ in range(4):
        for expression in hostile:
            try:
                calculate(expression)
            except CalculatorError:
                pass
    assert time.perf_counter() - start < max(baseline * 200, 0.5)


def test_registry_runs_the_calculator_and_returns_refusals_as_text():
    step = registry.run("calculate", '{"expression": "100 * 8%"}')
    assert (step.result, step.ok) == ("8", True)
    assert step.title.endswith("100 * 8%")
    bad = registry.run("calculate", {"expression": "1/0"})
    assert not bad.ok and bad.result.startswith("error: division by zero")
    shape = registry.run("calculate", '{"expr": 1}')
    assert not shape.ok and "expression" in shape.result
    with pytest.raises(BadInput, match="no built-in tool"):
        registry.run("shell", "{}")
    assert registry.builtin_specs()[0]["function"]["name"] == "calculate"
