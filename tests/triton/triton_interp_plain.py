"""A kernel module as a user writes one: it does not set ``TRITON_INTERPRET`` itself, so its kernel is the
interpreter's only when the variable was set when the module was first imported (a test sets it)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def negate_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, -tl.load(x_ptr + offs, mask=mask), mask=mask)
