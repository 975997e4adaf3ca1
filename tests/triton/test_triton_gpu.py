"""On a GPU: a configuration that faults (illegal address), one that hangs and one that computes a
wrong result are each recorded with a reason, and the caller's launch still works."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import perftune.triton  # noqa: E402

pytestmark = pytest.mark.gpu


@triton.jit
def gpu_scale_kernel(x_ptr, y_ptr, flag_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr):
    """y = 2 x; MODE 1 is wrong, 2 reads an unmapped address, 3 spins on a flag nobody sets."""
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


def _configs(*pairs: tuple[int, int]) -> list:
    return [triton.Config({"BLOCK": b, "MODE": m}, num_warps=4, num_stages=2) for m, b in pairs]


def _launch_scale(kernel, n: int = 1 << 20) -> tuple:  # noqa: ANN001
    """Launch ``kernel`` (gpu_scale_kernel, tuned) on n elements; it must have computed y = 2 x."""
    x = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    flag = torch.zeros(1, device="cuda", dtype=torch.int32)
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, flag, n)
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x)
    return x, y, flag


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    monkeypatch.setenv(perftune.triton.CACHE_ENV_VAR, str(tmp_path / "cache"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_faulting_hanging_and_wrong_configs_are_failures_and_the_launch_works() -> None:
    kernel = perftune.triton.autotune(
        configs=_configs((0, 128), (0, 256), (1, 256), (2, 256), (3, 256)), key=["n"], timeout_s=5
    )(gpu_scale_kernel)
    x, y, flag = _launch_scale(kernel)
    assert kernel.best_config.kwargs["MODE"] == 0
    by_mode = {cfg["MODE"]: (status, reason) for cfg, status, reason in kernel.last_report.failures}
    print(by_mode)  # the reasons, for the results file
    assert by_mode[1][0] == "failed" and by_mode[1][1].startswith("wrong result: y_ptr differs")
    assert by_mode[2][0] == "failed" and ("illegal" in by_mode[2][1].lower() or "crashed" in by_mode[2][1])
    assert by_mode[3][0] == "timeout"
    assert by_mode[3][1].startswith("timeout: the first launch took more than 5 s")
    y.zero_()
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, flag, n)  # known key: no tuning
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x) and len(kernel.reports) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_variable_set_after_the_kernel_was_built_does_not_reach_the_benchmark_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # TRITON_INTERPRET=1 set after this module's kernels were compiled for the GPU (another test module's
    # kernels set it on 2026-12-07 and every configuration here failed): a benchmark process that inherited
    # it would run the kernel in Triton's interpreter, over 5 s for its first launch on a million elements.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernel = perftune.triton.autotune(
        configs=_configs((0, 128), (0, 256)), key=["n"], timeout_s=5, store=None
    )(gpu_scale_kernel)
    _launch_scale(kernel)
    report = kernel.last_report
    assert report.isolated and report.failures == [] and report.n_measured == 2
    assert os.environ["TRITON_INTERPRET"] == "1"  # the caller's environment is as it was


@triton.jit
def gpu_add_one_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_restore_value_holds_inside_captured_timing_launches() -> None:
    # Timing launches are replayed from a CUDA graph, and the copy back is captured with them: both
    # configurations must still measure, and the caller's tensor must see exactly one launch. (That each
    # timing launch starts from the original is tested in interpreter mode, where a hook can look.)
    kernel = perftune.triton.autotune(
        configs=[triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 1024)],
        key=["n"],
        restore_value=["x_ptr"],
        store=None,
    )(gpu_add_one_kernel)
    n = 1 << 16
    x = torch.zeros(n, device="cuda")
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, n)
    torch.cuda.synchronize()
    assert torch.equal(x, torch.ones(n, device="cuda"))
    bench = kernel.last_report
    assert bench.n_measured == 2 and bench.failures == []
