"""Time against energy (perftune.examples.gpu.matmul_energy): NVML's counter read through ctypes, a clear
error without it, and on a GPU a multi-objective run whose front is made of measured, non-dominated
configurations."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from perftune.errors import PerftuneError  # noqa: E402
from perftune.examples.gpu import matmul_energy  # noqa: E402


def _nvml_or_none() -> matmul_energy.Nvml | None:
    try:
        return matmul_energy.Nvml()
    except PerftuneError:
        return None


def test_without_nvml_the_error_is_one_line_naming_nvml() -> None:
    if _nvml_or_none() is not None:
        pytest.skip("this machine has NVML (the GPU test below covers it)")
    with pytest.raises(PerftuneError) as info:
        matmul_energy.Nvml()
    message = str(info.value)
    assert message.startswith("NVML: ") and "\n" not in message


@pytest.mark.gpu
def test_time_and_energy_front_on_the_gpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or _nvml_or_none() is None:
        pytest.skip("needs a CUDA GPU with NVML")
    nvml = matmul_energy.Nvml()
    e0 = nvml.energy_j()
    result = matmul_energy.tune_time_and_energy(2048, 2048, 2048, budget=8, seed=0, window_s=0.2)
    assert nvml.energy_j() > e0  # the counter moves while the GPU works
    ok = [t for t in result.trials if t.ok]
    assert len(ok) >= 6
    assert all(t.metrics["time"] > 0 and t.metrics["energy"] > 0 for t in ok)
    front = result.pareto
    assert front
    for member in front:  # nothing measured beats a front member on both objectives
        assert not any(t.metrics["time"] < member.metrics["time"]
                       and t.metrics["energy"] < member.metrics["energy"] for t in ok)
