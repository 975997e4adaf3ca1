"""A kernel module that refuses to load in a child process (as a script with side effects might)."""

from __future__ import annotations

import multiprocessing
import os

if multiprocessing.parent_process() is not None:
    raise ImportError("this module does not load in a child process")

_BEFORE = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"  # while the kernels below are decorated (restored at the end)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import perftune.triton  # noqa: E402


@triton.jit
def triple_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, 3.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


triple = perftune.triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (32, 64)], key=["n"],
                                  store=None)(triple_kernel)


# Only this module's kernels are the interpreter's: a variable left set would make every kernel decorated
# later in the process (the GPU tests') interpreted, and every process spawned later inherit it.
if _BEFORE is None:
    del os.environ["TRITON_INTERPRET"]
else:
    os.environ["TRITON_INTERPRET"] = _BEFORE
