"""On a CUDA GPU (never in CI): tune_compile with CUDA-event timing, a crash on the GPU recorded with its
reason, and the placement site choosing between numpy and torch-on-cuda."""

from __future__ import annotations

import os
import signal

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    # torch warns about its own torch.jit use when Inductor loads in this process (not the user's code).
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    # Inductor's cudagraph trees capture an empty warm-up graph when the winner uses cudagraphs.
    pytest.mark.filterwarnings("ignore:The CUDA Graph is empty:UserWarning"),
]

from perftune.trial import Status  # noqa: E402


class CudaMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + x


@torch._dynamo.disable
def _abort() -> None:
    os.kill(os.getpid(), signal.SIGABRT)


class AbortsWhenCompiled(CudaMLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            _abort()
        return super().forward(x)


@pytest.mark.timeout(400)
def test_tune_compile_on_cuda() -> None:
    from perftune.torch import TimingPlan, tune_compile

    model = CudaMLP().cuda().eval()
    x = torch.randn(64, 256, device="cuda")
    result = tune_compile(model, (x,), budget=3, timeout_s=180,
                          final_plan=TimingPlan(n_warmup=3, n_rounds=10, min_sample_s=5e-4))
    assert result.device == "cuda"
    assert [vt.status for vt in result.final] == [Status.OK] * len(result.final)
    assert result.speedup_vs_default is not None and result.speedup_vs_max_autotune is not None
    with torch.no_grad():
        assert torch.allclose(result.compiled(x), model(x), rtol=1e-3, atol=1e-3)


@pytest.mark.timeout(300)
def test_a_crash_on_the_gpu_is_a_failure_with_its_signal() -> None:
    from perftune.torch import Job, TimingPlan, run_job

    x = torch.randn(8, 256, device="cuda")
    [vt] = run_job(Job(AbortsWhenCompiled().cuda(), (x,), (("plain", {}),), "cuda", TimingPlan(n_rounds=2)),
                   timeout_s=200)
    assert vt.status is Status.FAILED and "SIGABRT" in (vt.reason or "")


@pytest.mark.timeout(120)
def test_placement_uses_both_devices() -> None:
    from perftune.choice import ChoicesFile, available_devices, use_choices
    from perftune.examples.gpu.placement import matmul_site, tune

    use_choices(ChoicesFile())
    assert "cuda" in available_devices()
    result = tune(sizes=(8, 2048), n_rounds=3)
    assert set(result.rows[0].median_s) == {"numpy", "torch-cuda"}
    assert result.rows[0].winner == "numpy" and result.rows[-1].winner == "torch-cuda"
    result.apply(matmul_site)
    assert matmul_site.choose(8) == "numpy" and matmul_site.choose(4096) == "torch-cuda"
