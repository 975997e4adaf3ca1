"""Hostile expressions: every operation that could take unbounded time or memory is refused up front.

Constraints and value lists come from files that others wrote (T1 ``Conditions`` and ``Values``, the
constraints saved in a store) and constant parts are computed when the text is parsed, so a refusal
must come *before* the work: each test asserts the refusal, none relies on timing.
"""

from __future__ import annotations

import pytest

from perftune.errors import ExpressionError
from perftune.space import Expression, Int, Space, evaluate_constant


def _refused(text: str, message: str, *, constant: bool = False) -> str:
    with pytest.raises(ExpressionError) as info:
        evaluate_constant(text) if constant else Expression(text)
    error = str(info.value)
    assert message in error
    assert "\n" not in error
    assert error.startswith("expression ")
    return error


# -- ** : the result's size, not the exponent alone ---------------------------------------------------


@pytest.mark.parametrize("text", ["x < (10**10000)**10000", "x < (10**1000)**100", "x < 10**5000",
                                  "x < 9**9**9", "x < 0x10 ** 2000"])
def test_a_power_with_a_huge_result_is_refused_before_it_is_computed(text: str) -> None:
    error = _refused(text, "power would have more than 4096 bits")
    assert text in error  # the message names the expression


def test_a_huge_power_at_evaluation_raises_instead_of_computing() -> None:
    e = Expression("a ** b > 0")
    with pytest.raises(ValueError, match="4096 bits"):
        e.evaluate({"a": 10**100, "b": 100})
    assert e.evaluate({"a": 2, "b": 64}) is True
    assert Expression("(-1) ** (2 ** 4000) == 1").evaluate({}) is True  # a base of -1, 0 or 1 stays small
    assert Expression("2 ** -2 == 0.25").evaluate({}) is True


def test_a_complex_power_is_refused() -> None:
    _refused("x < (-8) ** 0.5", "complex")


# -- round(x, ndigits) --------------------------------------------------------------------------------


def test_round_with_a_huge_ndigits_is_refused() -> None:
    # int.__round__(-10**9) would compute 10**(10**9).
    _refused("x < round(1, -10**9)", "ndigits")
    with pytest.raises(ValueError, match="ndigits"):
        Expression("round(x, n) == 0").evaluate({"x": 1, "n": -(10**8)})
    assert Expression("round(x, 1) == 2.5").evaluate({"x": 2.46}) is True
    assert Expression("round(x, -2) == 1200").evaluate({"x": 1234}) is True


# -- % on strings: printf-style formatting ------------------------------------------------------------


def test_string_formatting_is_refused() -> None:
    _refused("'%0500000000d' % 1 == x", "string formatting")
    _refused("'%0500000000d' % x == ''", "string formatting")
    with pytest.raises(ValueError, match="string formatting"):
        Expression("s % x == ''").evaluate({"s": "%0500000000d", "x": 1})
    assert Expression("x % 32 == 16").evaluate({"x": 48}) is True


def test_string_formatting_is_refused_in_value_lists() -> None:
    _refused("['%0500000000d' % 1]", "string formatting", constant=True)


# -- * and + on sequences and strings -----------------------------------------------------------------


@pytest.mark.parametrize("text", ["x == 'a' * 10**6", "x in (0,) * 5000 * 5000", "x == 'ab' * 6000"])
def test_repetition_beyond_the_size_cap_is_refused(text: str) -> None:
    _refused(text, "too large")


def test_repetition_and_concatenation_at_evaluation_are_bounded() -> None:
    with pytest.raises(ValueError, match="too large"):
        Expression("len(s * n) > 0").evaluate({"s": "abc", "n": 10**6})
    with pytest.raises(ValueError, match="more than 10000 items"):
        Expression("len(s + s) > 0").evaluate({"s": "x" * 6000})
    assert Expression("len(s * 2 + s) == 9").evaluate({"s": "abc"}) is True
    assert Expression("(x, y) + (1,) == (0, 0, 1)").evaluate({"x": 0, "y": 0}) is True


def test_nested_repetition_counts_the_items_of_nested_tuples() -> None:
    # Each level is only 1,000 long, but the whole is 10**9 items: hashing or comparing it never ends.
    _refused("((((1,)*1000,)*1000,)*1000)", "too large", constant=True)


def test_concatenation_doubling_in_a_comprehension_chain_is_refused() -> None:
    # Each clause doubles the string: 1,000 characters times 2**10 without any repetition operator.
    loops = " ".join(f"for v{k} in [v{k - 1} + v{k - 1}]" for k in range(1, 11))
    _refused(f"[v10 for v0 in ['x' * 1000] {loops}]", "more than 1000000 items", constant=True)
    assert evaluate_constant("[v2 for v0 in ['ab'] for v1 in [v0 + v0] for v2 in [v1 + v1]]") == ("ab" * 4,)


# -- big integers -------------------------------------------------------------------------------------


def test_products_of_big_integers_are_bounded() -> None:
    _refused("x < 2**4000 * 2**4000", "more than 4096 bits")
    with pytest.raises(ValueError, match="4096 bits"):
        Expression("a * b > 0").evaluate({"a": 2**3000, "b": 2**3000})
    assert Expression("a * b == 2**64").evaluate({"a": 2**32, "b": 2**32}) is True


def test_integer_literals_are_bounded() -> None:
    _refused("x < 0x" + "f" * 5000, "integer literal of more than 4096 bits")
    _refused("x == 1" + "0" * 5000, "syntax error")  # Python's own limit on decimal literals


def test_int_of_a_long_string_is_refused() -> None:
    _refused("x < int('9' * 2000)", "int() of a string longer than")
    assert Expression("int('42') == x").evaluate({"x": 42}) is True


# -- comprehensions: one cap for the whole evaluation -------------------------------------------------


def test_nested_comprehensions_share_one_step_budget() -> None:
    # 1,000 outer steps, each running an inner comprehension of 1,000 steps: 1,001,000 steps in all.
    _refused("[[i + j for j in range(1000)] for i in range(1000)]", "more than 100000 steps", constant=True)
    _refused("[[j for j in range(100000)] for i in range(3000)]", "more than 100000 steps", constant=True)
    _refused("[[[k for k in range(i)] for j in range(100)] for i in range(100)]", "more than 100000 steps",
             constant=True)


def test_nested_comprehensions_read_the_outer_variables() -> None:
    assert evaluate_constant("[[i * j for j in range(3)] for i in range(3)]") == (
        (0, 0, 0), (0, 1, 2), (0, 2, 4))
    assert evaluate_constant("[[j for j in range(i)] for i in range(3)]") == ((), (0,), (0, 1))
    assert evaluate_constant("[[i for i in range(2)] for i in range(2)]") == ((0, 1), (0, 1))  # shadowing


def test_the_work_of_one_evaluation_is_bounded() -> None:
    # 100,000 steps (the cap) that each read a 1,000,000-character constant: 10**11 character reads.
    _refused("[1 for c in 'ab' * 50000 if c in 'x' * 999999]", "units of work", constant=True)
    # 100,000 steps that each divide a 4,000-bit integer.
    _refused("[(3**2500) % (i + 7) for i in range(100000)]", "units of work", constant=True)


def test_nesting_that_doubles_at_each_clause_is_bounded() -> None:
    # (v, v) doubles the items reached from a value without any + or *: 2**40 after 40 clauses.
    loops = " ".join(f"for v{k} in [(v{k - 1}, v{k - 1})]" for k in range(1, 41))
    _refused(f"[v40 for v0 in [(1,)] {loops}]", "units of work", constant=True)


def test_legit_value_lists_still_evaluate() -> None:
    assert evaluate_constant("[32 * i for i in range(1, 32)]") == tuple(32 * i for i in range(1, 32))
    assert len(evaluate_constant("[(i, j) for i in range(300) for j in range(300)]")) == 90_000
    assert len(evaluate_constant("range(100000)")) == 100_000
    assert evaluate_constant("['a', 'b'] + ['c'] * 2") == ("a", "b", "c", "c")


# -- the text itself ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x + " * 260_000 + "x", "longer than 1000000 characters"),
        (" or ".join(["x"] * 160_000), "more than 300000 syntax nodes"),
        ("+".join(["x"] * 200), "nested more than 100 levels deep"),
        ("-" * 40_000 + "x", "cannot parse it"),
        ("not " * 10_000 + "x", "cannot parse it"),
        ("x\x00 == 1", "null bytes"),
    ],
)
def test_oversized_or_deeply_nested_text_is_refused(text: str, message: str) -> None:
    error = _refused(text, message)
    assert len(error) < 500  # one short line, even for a huge text


def test_value_lists_may_be_longer_but_are_bounded_too() -> None:
    assert len(evaluate_constant(repr([f"v{i}" for i in range(20_000)]))) == 20_000
    _refused("[" + "1," * 600_000 + "]", "longer than 1000000 characters", constant=True)


# -- where it matters: constraints are parsed when a space is built -----------------------------------


@pytest.mark.parametrize("constraint", ["level < round(1, -10**9)", "level < (10**10000)**10000",
                                        "level < len('%0500000000d' % 1)"])
def test_a_hostile_stored_constraint_fails_fast_when_the_space_is_built(constraint: str) -> None:
    with pytest.raises(ExpressionError) as info:
        Space({"level": Int(1, 9)}, constraints=[constraint])
    assert constraint in str(info.value)


def test_a_long_membership_constraint_as_perftune_writes_for_triton_configs_is_taken() -> None:
    # perftune.triton's space: one constraint, membership in the kernel's list of configurations (the
    # GPU energy test's list is 25,000 characters; 6,000 configurations of 7 parameters are 140,000).
    import itertools

    from perftune.space import Int, Space

    names = ["A", "B", "C", "D", "E", "F", "G"]
    points = list(itertools.islice(itertools.product(range(16), range(16), range(4), range(4), range(2),
                                                     range(4), range(3)), 6000))
    membership = f"({', '.join(names)},) in {{{', '.join(repr(p) for p in points)}}}"
    space = Space({n: Int(0, 15) for n in names}, constraints=[membership])
    assert space.is_valid(dict.fromkeys(names, 0)) and not space.is_valid(dict.fromkeys(names, 15))
