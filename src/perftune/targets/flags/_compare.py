"""Comparing a candidate's output with the reference output, exactly or within a numeric tolerance.

Example:
    >>> compare_outputs("pi 3.14159", "pi 3.14160", rel_tol=1e-5) is None
    True
"""

from __future__ import annotations

import math
import re

__all__ = ["compare_outputs"]


# A number, also where it is glued to text or punctuation (``sum=1.5``, ``(1.5,``, ``1.5s``); ``inf`` and
# ``nan`` only as words of their own, so that ``banana`` or ``xinf`` hold no number.
_NUMBER = re.compile(
    r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|(?<![A-Za-z_])[-+]?(?:inf(?:inity)?|nan)(?![A-Za-z_\d])",
    re.IGNORECASE,
)


def _within(x: float, y: float, rel_tol: float, abs_tol: float) -> bool:
    """Whether ``y`` matches the reference number ``x``: an infinity only the same infinity, NaN only NaN."""
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= max(rel_tol * abs(x), abs_tol)


def _pieces(token: str) -> list[str]:
    """``token`` split into its numbers and the text around them (``"sum=1.5"`` -> ``["sum=", "1.5", ""]``):
    numbers at the odd places."""
    out: list[str] = []
    at = 0
    for m in _NUMBER.finditer(token):
        out += [token[at : m.start()], m.group()]
        at = m.end()
    return [*out, token[at:]]


def _token_difference(a: str, b: str, rel_tol: float, abs_tol: float) -> str | None:
    """None when token ``b`` matches the reference token ``a`` within the tolerance, else why not."""
    pa, pb = _pieces(a), _pieces(b)
    if len(pa) != len(pb):
        return f"expected {a!r}, got {b!r}"
    beyond = False
    for i, (x, y) in enumerate(zip(pa, pb, strict=True)):
        if x == y:
            continue
        if i % 2 == 0:  # the text around the numbers must be the same
            return f"expected {a!r}, got {b!r}"
        if not _within(float(x), float(y), rel_tol, abs_tol):
            beyond = True
    return f"expected {a}, got {b} (beyond the tolerance)" if beyond else None


def compare_outputs(reference: str, output: str, *, rel_tol: float = 0.0, abs_tol: float = 0.0) -> str | None:
    """None when ``output`` matches ``reference``, else a one-line description of the first difference.

    With both tolerances 0 the texts are compared token by token (words between white space), exactly.
    Otherwise numbers, also those glued to text or punctuation (``sum=1.5``, ``(1.5, 2.0)``), must agree
    within ``max(rel_tol * |reference|, abs_tol)`` and everything else exactly; an infinity matches only
    the same infinity, and NaN only NaN.

    Example:
        >>> compare_outputs("x 1.0000001", "x 1.0", rel_tol=1e-6) is None
        True
        >>> compare_outputs("sum=1.0000001", "sum=1.0000002", rel_tol=1e-5) is None
        True
        >>> compare_outputs("x 1", "x 2")
        "token 2: expected '1', got '2'"
        >>> compare_outputs("x inf", "x 1e300", rel_tol=1e-6)
        'token 2: expected inf, got 1e300 (beyond the tolerance)'
    """
    if reference == output:
        return None
    ref_tokens, out_tokens = reference.split(), output.split()
    if len(ref_tokens) != len(out_tokens):
        return f"output has {len(out_tokens)} tokens, the reference has {len(ref_tokens)}"
    tolerant = rel_tol > 0 or abs_tol > 0
    for i, (a, b) in enumerate(zip(ref_tokens, out_tokens, strict=True), start=1):
        if a == b:
            continue
        diff = _token_difference(a, b, rel_tol, abs_tol) if tolerant else f"expected {a!r}, got {b!r}"
        if diff is not None:
            return f"token {i}: {diff}"
    return None
