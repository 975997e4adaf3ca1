"""A bf16 Triton matmul tuned by perftune over a large constrained space (tiles, GROUP_M, warps,
stages, split-K for skinny shapes).

``matmul_space()`` is the perftune Space (about a thousand valid configurations after its shared-memory
and register constraints); ``matmul_configs()`` the same points as a ``triton.Config`` list, for
``triton.autotune`` and for the drop-in ``perftune.triton.autotune(configs=...)``. Run it on a GPU::

    python -m perftune.examples.gpu.triton_matmul 4096 4096 4096
"""

from __future__ import annotations

import sys
from typing import Any

import triton
import triton.language as tl

import perftune.triton
from perftune.space import Choice, Pow2, Space

#: Hopper's shared memory per block (227 KiB) and what one thread may hold as fp32 accumulators.
SHARED_MEMORY_BYTES = 232_448
ACCUMULATORS_PER_THREAD = 128


def matmul_space() -> Space:
    """Tiles, group size, warps, stages and split-K, with shared-memory and register constraints."""
    return Space(
        {
            "BLOCK_M": Pow2(16, 256, default=128),
            "BLOCK_N": Pow2(64, 256, default=128),
            "BLOCK_K": Pow2(32, 128, default=64),
            "GROUP_M": Choice([1, 8], default=8),
            "SPLIT_K": Pow2(1, 4, default=1),
            "num_warps": Choice([4, 8], default=4),
            "num_stages": Choice([3, 4, 5], default=3),
        },
        constraints=[
            f"num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 <= {SHARED_MEMORY_BYTES}",
            f"BLOCK_M * BLOCK_N <= {ACCUMULATORS_PER_THREAD} * 32 * num_warps",
            "SPLIT_K == 1 or BLOCK_M <= 64",  # split-K pays only when M alone gives too few tiles
            "BLOCK_M * BLOCK_N >= 16 * 64 * num_warps / 4",  # 8 warps on a tiny tile only idle
        ],
    )


def matmul_configs() -> list[Any]:
    """Every valid point of :func:`matmul_space` as a ``triton.Config`` (the default first)."""
    space = matmul_space()
    points = [space.default(), *[c for c in space.enumerate() if c != space.default()]]
    return [perftune.triton.to_triton_config(dict(p)) for p in points]


def prune_for_shape(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
    """Triton's ``early_config_prune``: the kernel needs K to split evenly into BLOCK_K steps."""
    k = named_args["K"]
    kept = [c for c in configs if k % (c.kwargs["BLOCK_K"] * c.kwargs["SPLIT_K"]) == 0]
    return kept or configs[:1]


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    """C = A @ B (bf16 in, fp32 accumulation); SPLIT_K > 1 adds partial sums into a zeroed C."""
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # Grouped ordering: GROUP_M row-tiles share the same B columns while they are in L2.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    k_per_split = K // SPLIT_K
    offs_k = pid_k * k_per_split + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, k_per_split // BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptrs, c, mask=mask)
    else:
        tl.atomic_add(c_ptrs, c, mask=mask, sem="relaxed")


def grid(meta: dict[str, Any]) -> tuple[int, int]:
    return (
        triton.cdiv(meta["M"], meta["BLOCK_M"]) * triton.cdiv(meta["N"], meta["BLOCK_N"]),
        meta["SPLIT_K"],
    )


#: The kernel tuned by perftune over the whole space: the search measures about a tenth of it.
tuned_matmul = perftune.triton.autotune(
    configs=matmul_configs(),
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": prune_for_shape},
    reset_to_zero=["c_ptr"],
)(matmul_kernel)


def matmul(a: Any, b: Any, kernel: Any = tuned_matmul) -> Any:
    """``a @ b`` for bf16 CUDA tensors with the tuned kernel (C is zeroed: split-K adds into it)."""
    import torch

    m, k = a.shape
    _, n = b.shape
    c = torch.zeros((m, n), device=a.device, dtype=a.dtype)
    kernel[grid](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)
    )
    return c


def main(argv: list[str]) -> None:
    import torch

    m, n, k = (int(x) for x in (argv or ["4096", "4096", "4096"]))
    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    c = matmul(a, b)
    report = tuned_matmul.last_report
    assert report is not None
    print(
        f"best {tuned_matmul.best_config} at {report.best_ms:.4f} ms; measured {report.n_measured} of "
        f"{report.n_candidates} in {report.wall_s:.1f} s; "
        f"max error vs torch {float((c - a @ b).abs().max()):.3g}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
