"""Kernels of the interpreter-mode tests, at module level so that benchmark processes can import them.

Importing this module turns on Triton's interpreter (the kernels run on the CPU with torch tensors),
so only tests that run kernels import it.
"""

from __future__ import annotations

import os

_BEFORE = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"  # read by triton.jit when each kernel is decorated

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    """y = 2 x. MODE 1 computes a wrong result, 2 reads far out of bounds (the process dies of
    SIGSEGV), 3 never ends."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if MODE == 1:
        x = x + 1.0
    if MODE == 2:
        x = tl.load(x_ptr + offs + (1 << 40))
    if MODE == 3:
        while MODE == 3:
            pass
    tl.store(y_ptr + offs, 2.0 * x, mask=mask)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x + y."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out += x, in place (every launch adds again: reset_to_zero or restore_value keeps timing honest)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask), mask=mask)


def expected_scale(x, y, n, **_):  # noqa: ANN001, ANN003 - the kernel's own signature
    """The reference of scale_kernel: what a correct configuration writes into its arguments."""
    y.copy_(2.0 * x)


def grid_1d(n: int):  # noqa: ANN201
    """A grid over META, as Triton users write them (the interpreter passes scalars as tensors, so the
    size comes from the closure)."""
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


# Only this module's kernels are the interpreter's: a variable left set would make every kernel decorated
# later in the process (the GPU tests') interpreted, and every process spawned later inherit it.
if _BEFORE is None:
    del os.environ["TRITON_INTERPRET"]
else:
    os.environ["TRITON_INTERPRET"] = _BEFORE
