"""A calculator for the model to call: decimal arithmetic over a syntax tree, bounded, never ``eval``.

``calculate("(1,234.5 - 1,100) / 1,100 * 100")`` -> ``"12.2272727272727"``. The expression is
read by ``ast.parse(mode="eval")`` after a few finance spellings are rewritten (``12%`` is 0.12, thousands
commas, ``$``, ``×``, ``÷``, ``^``), and only a whitelist of nodes is evaluated, in ``decimal`` at 28 digits:
numbers, + - * / ** (and unary signs), parentheses, and abs / round / min / max / sqrt. Every bound is checked
before any work: the text's length, its nesting depth, the tree's size, each number's magnitude, each exponent.
A bad expression raises ``CalculatorError`` (a ``BadInput``) whose message says what to change.
"""

from __future__ import annotations

import ast
import decimal
import re
from decimal import Decimal

from finspace.errors import BadInput

MAX_CHARS = 500
MAX_DEPTH = 30  # parentheses and calls nested
MAX_NODES = 200
MAX_EXPONENT = 1000  # |b| in a ** b
MAX_MAGNITUDE = Decimal("1e100")  # any number or intermediate result
PRECISION = 28
SHOWN_DIGITS = 15

_FUNCTIONS = ("abs", "round", "min", "max", "sqrt")
_REWRITES = (
    (re.compile(r"(?<=\d),(?=\d{3}(?!\d))"), ""),
    (re.compile(r"[$€£]"), ""),
    (re.compile(r"(?<=[\d)\s])[×x](?=\s*[\d(.])"), "*"),
    (re.compile("÷"), "/"),
    (re.compile(r"\^"), "**"),
    (re.compile(r"−"), "-"),
)
_PERCENT = re.compile(r"%")


class CalculatorError(BadInput):
    """An expression the calculator refuses: the message names the fix."""


def _context() -> decimal.Context:
    return decimal.Context(
        prec=PRECISION, Emax=999, Emin=-999, traps=[decimal.Overflow, decimal.DivisionByZero, decimal.InvalidOperation]
    )


def _rewrite(expression: str) -> str:
    text = expression
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    # 12% is 12/100 (a percentage, never a remainder): a postfix operator, bound to the operand before it
    return _PERCENT.sub("*(1/100)", text) if "%" in text else text


def _depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]":
            depth -= 1
    return deepest


def parse(expression: object) -> ast.expr:
    """The checked tree of ``expression`` (CalculatorError for anything outside the whitelist or the bounds)."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError("the expression must be non-empty text, such as \"(125.3 - 98.1) / 98.1 * 100\"")
    if len(expression) > MAX_CHARS:
        raise CalculatorError(
            f"the expression is {len(expression):,} characters; the limit is {MAX_CHARS}. Split it into steps"
        )
    text = _rewrite(expression.strip())
    if _depth(text) > MAX_DEPTH:
        raise CalculatorError(f"the expression nests parentheses deeper than {MAX_DEPTH} levels; split it into steps")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CalculatorError(
            f"cannot read {expression[:80]!r} as arithmetic; use numbers, + - * / ** %, "
            f"parentheses and {', '.join(_FUNCTIONS)}"
        ) from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise CalculatorError(f"the expression has {nodes} parts; the limit is {MAX_NODES}. Split it into steps")
    return tree.body


def calculate(expression: object) -> str:
    """The value of ``expression``, as decimal text (at most 15 significant digits), or CalculatorError."""
    tree = parse(expression)
    with decimal.localcontext(_context()):
        try:
            value = _eval(tree)
        except decimal.DivisionByZero:
            raise CalculatorError("division by zero; check the divisor") from None
        except decimal.Overflow:
            raise CalculatorError(f"the result is too large; the calculator works up to {MAX_MAGNITUDE:.0E}") from None
        except decimal.InvalidOperation:
            raise CalculatorError("the operation is undefined (0/0, or a root of a negative number)") from None
    return show(value)


def show(value: Decimal) -> str:
    """``value`` rounded to 15 significant digits, in plain notation, without trailing zeros."""
    if value.is_zero():
        return "0"
    with decimal.localcontext(_context()) as ctx:
        ctx.prec = SHOWN_DIGITS
        rounded = (+value).normalize()
    text = format(rounded, "f")
    return text


def _check(value: Decimal) -> Decimal:
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError(
            f"{show(value) if abs(value) < Decimal('1e120') else 'a number'} is out of range; "
            f"the calculator works with magnitudes up to {MAX_MAGNITUDE:.0E}"
        )
    return value


def _number(node: ast.Constant) -> Decimal:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculatorError(f"{str(value)[:40]!r} is not a number; the calculator takes numbers only")
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        raise CalculatorError(
            f"a number is out of range (over 1e308); the calculator works with magnitudes up to {MAX_MAGNITUDE:.0E}"
        )
    return _check(Decimal(repr(value)) if isinstance(value, float) else Decimal(value))


def _power(base: Decimal, exponent: Decimal) -> Decimal:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"the exponent {show(exponent)} is too large; use exponents up to {MAX_EXPONENT}")
    if base.is_zero() and exponent < 0:
        raise decimal.DivisionByZero
    if exponent == exponent.to_integral_value():
        return base ** int(exponent)
    if base < 0:
        raise CalculatorError("a negative number to a fractional power is not a real number")
    return base**exponent


_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: _power,
}


def _eval(node: ast.expr) -> Decimal:
    if isinstance(node, ast.Constant):
        return _number(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _check(_BINARY[type(node.op)](_eval(node.left), _eval(node.right)))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _check(_call(node.func.id, [_eval(a) for a in node.args]))
    what = type(node).__name__
    if isinstance(node, ast.BinOp):
        what = f"the operator {type(node.op).__name__}"
    elif isinstance(node, (ast.Name, ast.Call)):
        what = "names and functions other than " + ", ".join(_FUNCTIONS)
    raise CalculatorError(
        f"{what} is not arithmetic the calculator does; use numbers, + - * / ** %, "
        f"parentheses and {', '.join(_FUNCTIONS)}"
    )


def _call(name: str, args: list[Decimal]) -> Decimal:
    if name in ("min", "max"):
        if not args:
            raise CalculatorError(f"{name}() needs at least one number")
        return min(args) if name == "min" else max(args)
    if name == "round":
        if len(args) not in (1, 2) or (len(args) == 2 and not (0 <= args[1] <= 20 and args[1] == int(args[1]))):
            raise CalculatorError("round(x) or round(x, digits) with digits a whole number from 0 to 20")
        places = int(args[1]) if len(args) == 2 else 0
        return args[0].quantize(Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_EVEN)
    if len(args) != 1:
        raise CalculatorError(f"{name}() takes one number")
    if name == "abs":
        return abs(args[0])
    if args[0] < 0:
        raise CalculatorError("sqrt() of a negative number is not a real number")
    return args[0].sqrt()
