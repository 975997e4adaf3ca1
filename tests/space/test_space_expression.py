"""Expressions: the safe subset, chained comparisons, benchmark-hub conditions, rejected syntax."""

from __future__ import annotations

import pickle

import pytest

from perftune.errors import ExpressionError
from perftune.space import Expression, Int, Space


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("32 <= block_x * block_y <= 1024", {"block_x": 32, "block_y": 8}, True),
        ("32 <= block_x * block_y <= 1024", {"block_x": 32, "block_y": 64}, False),
        ("32 <= block_x * block_y <= 1024", {"block_x": 1, "block_y": 8}, False),
        ("use_padding==0 or block_x % 32 != 0", {"use_padding": 1, "block_x": 64}, False),
        ("use_padding==0 or block_x % 32 != 0", {"use_padding": 0, "block_x": 64}, True),
        ("use_padding==0 or block_x % 32 != 0", {"use_padding": 1, "block_x": 48}, True),
        (
            "use_shmem == 0 or (((bx*tx+(fw-1)))*((by*ty+(fh-1)))) < 12*1024",
            {"use_shmem": 1, "bx": 64, "tx": 2, "by": 4, "ty": 2, "fw": 15, "fh": 15},
            True,
        ),
        ("tile_size_x > 1 or tile_stride_x == 0", {"tile_size_x": 1, "tile_stride_x": 1}, False),
        ("a // b + a % b", {"a": 17, "b": 5}, 5),
        ("a ** 2 - -a", {"a": 3}, 12),
        ("a / 2", {"a": 3}, 1.5),
        ("not a and b", {"a": False, "b": True}, True),
        ("a and b and c", {"a": 1, "b": 2, "c": 3}, 3),
        ("a or b or c", {"a": 0, "b": 0, "c": 0}, 0),
        ("min(a, b, 3) + max(a, b) + abs(-a)", {"a": 5, "b": 7}, 3 + 7 + 5),
        ("int(x) + round(x) + float(a) + round(x, 1)", {"x": 2.46, "a": 1}, 2 + 2 + 1.0 + 2.5),
        ("len(order) == 3 and 'a' in order", {"order": ("a", "b", "c")}, True),
        ("algo in ('quick', 'merge')", {"algo": "merge"}, True),
        ("algo not in ['quick', 'merge']", {"algo": "merge"}, False),
        ("x in (a, b)", {"x": 3, "a": 1, "b": 3}, True),
        ("a if a > b else b", {"a": 2, "b": 9}, 9),
        ("a < b > c", {"a": 1, "b": 5, "c": 2}, True),
        ("1 < 2 < 3", {}, True),
        ("flag == True", {"flag": True}, True),
        ("x != None", {"x": 1}, True),
        ("(a + b) * (a - b)", {"a": 5, "b": 3}, 16),
    ],
)
def test_evaluates_the_python_subset(text: str, env: dict[str, object], expected: object) -> None:
    assert Expression(text).evaluate(env) == expected


def test_names_are_the_parameters_read() -> None:
    e = Expression("min(a, b) <= 4 and c in (1, 2) and abs(d) > 0")
    assert e.names == frozenset({"a", "b", "c", "d"})
    assert Expression("1 + 2 == 3").names == frozenset()


def test_chained_comparison_short_circuits() -> None:
    # b is never read once a < b fails, as in Python.
    e = Expression("a < 0 < b")
    assert e.evaluate({"a": 5}) is False


def test_missing_name_raises_key_error() -> None:
    with pytest.raises(KeyError):
        Expression("a + b").evaluate({"a": 1})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os')", "__import__"),
        ("__import__('os').system('true')", "not allowed"),
        ("x.real", "attribute access"),
        ("().__class__", "attribute access"),
        ("a[0]", "subscripts"),
        ("lambda: 1", "lambda"),
        ("open('f')", "unknown function 'open'"),
        ("eval('1')", "unknown function 'eval'"),
        ("[x for x in y]", "comprehensions"),
        ("{'a': 1}", "dict literals"),
        ("(x := 3)", "assignment"),
        ("a is None", "comparison Is"),
        ("min", "must be called"),
        ("max(a, key=b)", "keyword"),
        ("abs(a, b)", "abs() takes 1"),
        ("a +", "syntax error"),
        ("x = 1", "syntax error"),
        ("", "empty expression"),
        ("1 / 0 < a", "cannot compute"),
        ("a & b", "operator BitAnd"),
        ("b'x' == a", "literal"),
        ("f'{a}'", "f-strings"),
        ("__builtins__", "not allowed"),
    ],
)
def test_rejects_unsafe_or_unknown_syntax(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        Expression(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_huge_power_is_refused_at_evaluation() -> None:
    e = Expression("a ** b > 0")
    with pytest.raises(ValueError):
        e.evaluate({"a": 10, "b": 10**9})
    assert e.evaluate({"a": 2, "b": 10}) is True


def test_expression_pickles_and_compares_by_text() -> None:
    e = Expression("a * 2 < b")
    e2 = pickle.loads(pickle.dumps(e))
    assert e2 == e and hash(e2) == hash(e)
    assert e2.evaluate({"a": 1, "b": 3}) is True
    assert str(e) == "a * 2 < b"


def test_unknown_names_are_reported_at_space_construction() -> None:
    with pytest.raises(
        ExpressionError, match=r"constraint 'block_x \* block_z <= 8': unknown parameter 'block_z'"
    ):
        Space({"block_x": Int(1, 8), "block_y": Int(1, 8)}, constraints=["block_x * block_z <= 8"])
    with pytest.raises(ExpressionError, match="did you mean 'block_y'"):
        Space({"block_x": Int(1, 8), "block_y": Int(1, 8)}, constraints=["block_yy < 3"])
    with pytest.raises(ExpressionError, match="when='flag' names unknown parameter 'flag'"):
        Space({"x": Int(1, 8, when="flag")})


def test_whitespace_and_newlines_are_fine() -> None:
    assert Expression("  a <= 3\n").evaluate({"a": 2}) is True
