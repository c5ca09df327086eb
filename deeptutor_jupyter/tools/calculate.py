"""``calculate``: exact, safe arithmetic so a tutor checks numbers instead of guessing them.

The expression is parsed with ``ast`` and walked over a whitelist; nothing is ever passed to
``eval``. Integer powers and factorials are bounded before they run, because Python will happily
spend hours on ``9**9**9``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from deeptutor_jupyter.errors import DeepTutorError
from deeptutor_jupyter.lazy_model import LazyModel
from deeptutor_jupyter.tools.base import Tool, ToolContext, ToolResult

Number = int | float

MAX_EXPRESSION_CHARS = 1000
# Results stay well below Python's 4300-digit int-to-str limit.
MAX_INT_BITS = 4096
MAX_FACTORIAL = 500

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


class CalculationError(DeepTutorError):
    code = "calculation"

    """An expression the calculator refuses, worded for the model."""


def _factorial(n: Number) -> int:
    if isinstance(n, float):
        if not n.is_integer():
            raise CalculationError("factorial() needs a whole number")
        n = int(n)
    if n < 0 or n > MAX_FACTORIAL:
        raise CalculationError(f"factorial() accepts 0 to {MAX_FACTORIAL}")
    return math.factorial(n)


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "log": _log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "factorial": _factorial,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "degrees": math.degrees,
    "radians": math.radians,
}


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression, or ``CalculationError`` saying what is refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise CalculationError(f"not a valid expression ({exc.__class__.__name__})") from None
    try:
        result = _eval(tree.body)
    except ZeroDivisionError:
        raise CalculationError("division by zero") from None
    except OverflowError:
        raise CalculationError("the result is too large for a floating-point number") from None
    except ValueError as exc:  # math domain errors: sqrt(-1), log(0)
        raise CalculationError(f"math error: {exc}") from None
    if isinstance(result, float) and not math.isfinite(result):
        raise CalculationError("the result is not a finite number")
    return result


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        return _number(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculationError(f"unknown name {node.id!r}; constants: {', '.join(_CONSTANTS)}")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp):
        return _binary(node)
    if isinstance(node, ast.Call):
        return _call(node)
    raise CalculationError(f"{type(node).__name__} is not allowed; use numbers and + - * / ** ( )")


def _number(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculationError(f"only numbers are allowed, not {value!r}")
    return _checked(value)


def _binary(node: ast.BinOp) -> Number:
    if isinstance(node.op, ast.BitXor):
        raise CalculationError("'^' is not a power here; write ** (2**3 is 8)")
    left, right = _eval(node.left), _eval(node.right)
    if isinstance(node.op, ast.Pow):
        return _power(left, right)
    function = _BINARY.get(type(node.op))
    if function is None:
        raise CalculationError(f"operator {type(node.op).__name__} is not allowed")
    return _checked(function(left, right))


def _power(base: Number, exponent: Number) -> Number:
    if _int_power_bits(base, exponent) > MAX_INT_BITS:
        raise CalculationError("the power is too large to compute exactly")
    result = operator.pow(base, exponent)
    if isinstance(result, complex):
        raise CalculationError("the result is not a real number")
    return _checked(result)


def _int_power_bits(base: Number, exponent: Number) -> float:
    """Size of an exact integer power, known before computing it; float powers overflow fast."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        return exponent * math.log2(abs(base))
    return 0.0


def _call(node: ast.Call) -> Number:
    name = node.func.id if isinstance(node.func, ast.Name) else ""
    if name not in _FUNCTIONS:
        raise CalculationError(
            f"function {name or ast.unparse(node.func)!r} is not allowed; "
            f"available: {', '.join(_FUNCTIONS)}"
        )
    if node.keywords:
        raise CalculationError(f"{name}() takes positional arguments only")
    args = [_eval(arg) for arg in node.args]
    try:
        return _checked(_FUNCTIONS[name](*args))
    except TypeError as exc:
        raise CalculationError(f"{name}(): {exc}") from None


def _checked(value: Any) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculationError("the result is too large to compute exactly")
    return value  # type: ignore[no-any-return]


def format_number(value: Number) -> str:
    if isinstance(value, float):
        # 15 significant digits hide binary noise such as 0.1 + 0.2 = 0.30000000000000004.
        return format(value, ".15g")
    return str(value)


class CalculateArgs(LazyModel):
    model_config = ConfigDict(extra="forbid")

    expression: str = Field(
        description="Arithmetic in Python syntax, e.g. '(3/4) * 12' or 'sqrt(2)**2' or '2**10'.",
        min_length=1,
    )


class CalculateTool(Tool[CalculateArgs]):
    name: ClassVar[str] = "calculate"
    description: ClassVar[str] = (
        "Evaluate an arithmetic expression exactly. Use it to check any arithmetic instead of "
        "computing in your head. Supports numbers, + - * / // % **, parentheses, the constants "
        "pi, e, tau and the functions " + ", ".join(_FUNCTIONS) + " (angles in radians)."
    )
    Args: ClassVar[type[BaseModel]] = CalculateArgs

    async def run(self, args: CalculateArgs, ctx: ToolContext) -> ToolResult:
        expression = args.expression.strip()
        try:
            value = evaluate(expression)
        except CalculationError as exc:
            message = str(exc)
            return ToolResult(
                content=f"Cannot evaluate {expression!r}: {message}",
                is_error=True,
                data={"expression": expression, "error": message},
                summary=f"{expression}: {message}",
            )
        text = format_number(value)
        return ToolResult(
            content=f"{expression} = {text}",
            data={"expression": expression, "result": text},
            summary=f"{expression} = {text}",
        )
