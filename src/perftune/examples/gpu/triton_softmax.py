"""A fused row softmax in Triton, tuned by perftune over a constrained space (block, rows, warps, stages).

One program normalises one or more rows, a block of columns at a time; the space says how wide a block
is, how many rows a program takes, how many warps share a block and how deep the load pipeline is. Run it on a
GPU (or anywhere with ``TRITON_INTERPRET=1`` and a CPU tensor, slowly)::

    python -m perftune.examples.gpu.triton_softmax 4096 8192
"""

from __future__ import annotations

import sys
from typing import Any

import triton
import triton.language as tl

import perftune.triton
from perftune.space import Choice, Pow2, Space


def softmax_space() -> Space:
    """Block width, rows per program, warps and stages; enough columns per warp to keep it busy."""
    return Space(
        {
            "BLOCK": Pow2(256, 8192, default=1024),
            "ROWS": Pow2(1, 4, default=1),
            "num_warps": Pow2(2, 16, default=4),
            "num_stages": Choice([1, 2, 3], default=2),
        },
        # Enough columns per warp to keep it busy, and a bounded unrolled body (compile time, registers).
        constraints=["BLOCK >= 32 * num_warps", "BLOCK * ROWS <= 16384"],
    )


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    """out[r] = softmax(in[r]) for ROWS rows per program, BLOCK columns at a time (any BLOCK is exact:
    an online max and sum over the chunks, then one normalising pass)."""
    first = tl.program_id(0) * ROWS
    cols = tl.arange(0, BLOCK)
    for i in tl.static_range(ROWS):
        row = first + i
        if row < n_rows:
            base = in_ptr + row * stride
            m = tl.full((BLOCK,), -float("inf"), tl.float32)
            total = tl.zeros((BLOCK,), tl.float32)
            for start in tl.range(0, n_cols, BLOCK):
                x = tl.load(base + start + cols, mask=start + cols < n_cols, other=-float("inf")).to(
                    tl.float32
                )
                new_m = tl.maximum(m, x)
                total = total * tl.exp(m - new_m) + tl.exp(x - new_m)
                m = new_m
            row_max = tl.max(m, axis=0)
            row_sum = tl.sum(total * tl.exp(m - row_max), axis=0)
            for start in tl.range(0, n_cols, BLOCK):
                mask = start + cols < n_cols
                x = tl.load(base + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
                y = tl.exp(x - row_max) / row_sum
                tl.store(out_ptr + row * stride + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def make_softmax(budget: int | str = 12) -> Any:
    """The softmax kernel under ``perftune.triton.autotune(space=...)`` with this budget."""
    return perftune.triton.autotune(space=softmax_space(), key=["n_rows", "n_cols"], budget=budget)(
        softmax_kernel
    )


#: Tuned per (rows, columns, dtype).
tuned_softmax = make_softmax()


def softmax(x: Any, kernel: Any = tuned_softmax) -> Any:
    """Row softmax of a 2-D tensor with the tuned kernel."""
    import torch

    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    kernel[lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)](out, x, n_rows, n_cols, x.stride(0))
    return out


def main(argv: list[str]) -> None:
    import torch

    n_rows, n_cols = (int(v) for v in (argv or ["4096", "8192"]))
    x = torch.randn((n_rows, n_cols), device="cuda", dtype=torch.float16)
    y = softmax(x)
    report = tuned_softmax.last_report
    assert report is not None
    error = float((y.float() - torch.softmax(x.float(), dim=1)).abs().max())
    print(
        f"best {tuned_softmax.best_config} ({report.n_measured} measured of {report.n_candidates}); "
        f"max error {error:.2e}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
