"""Comparing a candidate's output with the reference output, exactly or within a numeric tolerance.

Example:
    >>> compare_outputs("pi 3.14159", "pi 3.14160", rel_tol=1e-5) is None
    True
"""

from __future__ import annotations

import math
import re

__all__ = ["compare_outputs"]


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b", re.IGNORECASE)


def compare_outputs(reference: str, output: str, *, rel_tol: float = 0.0, abs_tol: float = 0.0) -> str | None:
    """None when ``output`` matches ``reference``, else a one-line description of the first difference.

    With both tolerances 0 the comparison is exact. Otherwise the texts are split into tokens; numbers
    must agree within ``max(rel_tol * |reference|, abs_tol)``, and everything else exactly.

    Example:
        >>> compare_outputs("x 1.0000001", "x 1.0", rel_tol=1e-6) is None
        True
        >>> compare_outputs("x 1", "x 2")
        "token 2: expected '1', got '2'"
    """
    if reference == output:
        return None
    ref_tokens, out_tokens = reference.split(), output.split()
    if len(ref_tokens) != len(out_tokens):
        return f"output has {len(out_tokens)} tokens, the reference has {len(ref_tokens)}"
    for i, (a, b) in enumerate(zip(ref_tokens, out_tokens, strict=True), start=1):
        if a == b:
            continue
        if (rel_tol > 0 or abs_tol > 0) and _NUMBER.fullmatch(a) and _NUMBER.fullmatch(b):
            x, y = float(a), float(b)
            if math.isnan(x) and math.isnan(y):
                continue
            if abs(x - y) <= max(rel_tol * abs(x), abs_tol):
                continue
            return f"token {i}: expected {a}, got {b} (beyond the tolerance)"
        return f"token {i}: expected {a!r}, got {b!r}"
    return None
