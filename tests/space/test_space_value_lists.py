"""Constant value-list expressions (T1 ``Values``): list literals, ``range`` and comprehensions, safely."""

from __future__ import annotations

import pytest

from perftune.errors import ExpressionError
from perftune.space import Expression, evaluate_constant


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[32 * i for i in range(1, 32)]", tuple(32 * i for i in range(1, 32))),
        ("[1] + [2 * i for i in range(1, 11)]", (1, *range(2, 21, 2))),
        ("[2 ** i for i in range(10) if i % 2 == 0]", (1, 4, 16, 64, 256)),
        ("[i * j for i in range(1, 4) for j in range(i, 4)]", (1, 2, 3, 4, 6, 9)),
        ("[(i, j) for i in range(3) for j in range(i)]", ((1, 0), (2, 0), (2, 1))),
        ("[1, 2, 3]", (1, 2, 3)),
        ("['a', 'b']", ("a", "b")),
        ("range(0, 10, 3)", (0, 3, 6, 9)),
        ("[max(4, i) for i in range(6)]", (4, 4, 4, 4, 4, 5)),
        ("[-1.5, 0.5]", (-1.5, 0.5)),
    ],
)
def test_value_lists_evaluate(text: str, expected: tuple) -> None:
    assert evaluate_constant(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[().__class__ for i in range(2)]", "attribute access"),
        ("[c.__subclasses__() for c in range(1)]", "attribute access"),
        ("__import__('os').system('true')", "not allowed"),
        ("[__builtins__ for i in range(1)]", "not allowed"),
        ("[i for __i in range(3)]", "plain name"),
        ("[a for (a, b) in range(3)]", "plain name"),
        ("range(10 ** 12)", "too large"),
        ("[0 for i in range(100000) for j in range(100000)]", "more than 100000 steps"),
        ("[0] * 100000 * 100000", "too large"),
        ("range(1.5)", "integers"),
        ("[x for x in values]", "must be constant, but names values"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("{i: i for i in range(3)}", "comprehensions are not allowed"),
        ("(i for i in range(3))", "comprehensions are not allowed"),
        ("[i for i in range(3)", "syntax error"),
    ],
)
def test_hostile_or_unbounded_value_lists_are_refused(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate_constant(text)
    assert message in str(info.value)
    assert text in str(info.value)  # the message names the expression


def test_a_comprehension_variable_does_not_leak_into_the_names() -> None:
    # Inside a constraint comprehensions stay refused; only value lists may build sequences.
    with pytest.raises(ExpressionError, match="comprehensions are not allowed"):
        Expression("x in [i for i in range(4)]")
    with pytest.raises(ExpressionError, match="unknown function 'range'"):
        Expression("x in range(4)")
    assert Expression("range > 1").names == frozenset({"range"})  # a parameter may still be called range


def test_list_literals_in_constraints_keep_their_meaning() -> None:
    e = Expression("x in [1, 2] and (x, y) != [1, 2]")
    assert e.evaluate({"x": 1, "y": 3}) is True
    assert e.evaluate({"x": 1, "y": 2}) is False
