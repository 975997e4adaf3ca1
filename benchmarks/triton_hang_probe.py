"""Diagnostic for the GPU machine: what a hanging Triton configuration does to the ones measured after it.

Runs perftune.triton.autotune on the kernel of tests/triton/test_triton_gpu.py with lists of configurations
in a fixed order (one per tuning, budget = all of them) and prints each tuning's failures, in the order they
were measured, with the time each tuning took. Usage: python3 benchmarks/triton_hang_probe.py
"""

from __future__ import annotations

import os
import tempfile
import time

import torch
import triton
import triton.language as tl

import perftune.triton


@triton.jit
def probe_kernel(x_ptr, y_ptr, flag_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if MODE == 1:
        x = x + 1.0
    if MODE == 2:
        x += tl.load(x_ptr + offs + (1 << 36))
    if MODE == 3:
        while tl.load(flag_ptr, volatile=True) == 0:
            pass
    tl.store(y_ptr + offs, 2.0 * x, mask=mask)


def probe(pairs: list[tuple[int, int]]) -> None:
    os.environ[perftune.triton.CACHE_ENV_VAR] = tempfile.mkdtemp()
    configs = [triton.Config({"BLOCK": b, "MODE": m}, num_warps=4, num_stages=2) for m, b in pairs]
    tune = perftune.triton.autotune(configs=configs, key=["n"], timeout_s=5, budget=len(configs))
    kernel = tune(probe_kernel)
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    flag = torch.zeros(1, device="cuda", dtype=torch.int32)
    t0 = time.perf_counter()
    try:
        kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, flag, n)
        torch.cuda.synchronize()
        outcome = f"ok, best {kernel.best_config.kwargs}, correct {bool(torch.equal(y, 2 * x))}"
    except Exception as exc:  # noqa: BLE001 - a diagnostic prints what happened
        outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
    took = time.perf_counter() - t0
    print(f"configs (MODE, BLOCK) {pairs}: {took:.1f} s: {outcome}", flush=True)
    for report in kernel.reports.values():
        for cfg, status, reason in report.failures:
            print(f"   {dict(cfg)} {status}: {reason[:120]}", flush=True)


if __name__ == "__main__":
    probe([(0, 128)])
    probe([(2, 256), (0, 128)])
    probe([(3, 256), (0, 128), (0, 256)])
    probe([(0, 128), (0, 256), (1, 256), (2, 256), (3, 256)])
