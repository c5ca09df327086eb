from __future__ import annotations

import re
from pathlib import Path

import pytest

from deeptutor_jupyter.tools import CalculateTool, ToolContext
from deeptutor_jupyter.tools.calculate import CalculateArgs, CalculationError, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2+2", 4),
        ("7 - 10", -3),
        ("6*7", 42),
        ("7/2", 3.5),
        ("7//2", 3),
        ("-7 % 3", 2),
        ("2**10", 1024),
        ("2**-1", 0.5),
        ("-(3)", -3),
        ("+4", 4),
        ("(1 + 2) * 3", 9),
        ("2 ** 3 ** 2", 512),
        ("sqrt(16)", 4.0),
        ("factorial(5)", 120),
        ("abs(-2.5)", 2.5),
        ("round(2.675, 1)", 2.7),
        ("round(3.4)", 3),
        ("log(8, 2)", 3.0),
        ("exp(0)", 1.0),
        ("floor(2.7) + ceil(2.1)", 5),
        ("cos(0) + sin(0) + tan(0)", 1.0),
        ("2**200", 2**200),
    ],
)
def test_evaluates_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == pytest.approx(value)


def test_constants() -> None:
    assert evaluate("pi") == pytest.approx(3.141592653589793)
    assert evaluate("log(e)") == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9**9**9", "too large"),
        ("2**100000", "too large"),
        ("(2**4000) * (2**4000)", "too large"),
        ("factorial(100000)", "factorial() accepts"),
        ("factorial(2.5)", "whole number"),
        ("10.0**400", "too large"),
        ("1/0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("sqrt(-1)", "math error"),
        ("(-8)**(1/3)", "not a real number"),
        ("1e308 * 10", "not a finite number"),
        ("2^3", "write **"),
        ("__import__('os')", "not allowed"),
        ("os.system('ls')", "not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("1j", "only numbers"),
        ("[1, 2]", "List is not allowed"),
        ("1 < 2", "Compare is not allowed"),
        ("(lambda: 1)()", "not allowed"),
        ("1 << 3", "not allowed"),
        ("sqrt(x=4)", "positional"),
        ("sqrt(1, 2)", "sqrt()"),
        ("2 +", "not a valid expression"),
        ("1" + "+1" * 600, "longer than"),
    ],
)
def test_refuses_with_a_clear_error(expression: str, message: str) -> None:
    with pytest.raises(CalculationError, match=re.escape(message)):
        evaluate(expression)


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(session_id="s", turn_id="t", workspace=tmp_path)


async def test_tool_result_for_the_model_and_the_card(tmp_path: Path) -> None:
    result = await CalculateTool().run(CalculateArgs(expression=" 0.1 + 0.2 "), ctx(tmp_path))
    assert not result.is_error
    assert result.content == "0.1 + 0.2 = 0.3"
    assert result.data == {"expression": "0.1 + 0.2", "result": "0.3"}
    assert result.summary == "0.1 + 0.2 = 0.3"


async def test_tool_reports_refusals_as_error_results(tmp_path: Path) -> None:
    result = await CalculateTool().run(CalculateArgs(expression="9**9**9"), ctx(tmp_path))
    assert result.is_error
    assert result.content.startswith("Cannot evaluate '9**9**9': ")
    assert "too large" in result.content


async def test_exact_big_integers(tmp_path: Path) -> None:
    result = await CalculateTool().run(CalculateArgs(expression="factorial(25)"), ctx(tmp_path))
    assert result.content == "factorial(25) = 15511210043330985984000000"
