"""tune_compile end to end on the CPU (Inductor's C++ backend, gcc): baselines first, failures recorded
with reasons, the winner confirmed interleaved against plain torch.compile and max-autotune."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perftune.space import Bool, Choice, Space  # noqa: E402
from perftune.torch import TimingPlan, options_of, tune_compile  # noqa: E402
from perftune.trial import Status  # noqa: E402


class SmallMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + x


@pytest.mark.slow
@pytest.mark.timeout(900)
# torch 2.13 on Python 3.11 warns about its own torch.jit use when Inductor loads in this process.
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_tune_compile_on_cpu_records_failures_and_confirms_the_winner(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = SmallMLP().eval()
    x = torch.randn(16, 32)
    # A real setting that fails here: Inductor's Halide backend is not installed, so compiling fails.
    space = Space({"cpu_backend": Choice(["cpp", "halide"]), "max_autotune": Bool()})
    lines: list[str] = []
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    # Two workers: the candidates compile in parallel processes first; the halide ones fail there.
    result = tune_compile(model, (x,), budget=4, space=space, timeout_s=400, progress=lines.append,
                          workers=2, store=store,
                          plan=TimingPlan(n_warmup=1, n_rounds=5, min_sample_s=5e-4),
                          final_plan=TimingPlan(n_warmup=2, n_rounds=8, min_sample_s=5e-4))
    assert result.device == "cpu"
    trials = result.trials
    assert len(trials) == 4
    assert options_of(trials[0].config) == {}, "plain torch.compile is measured first"
    assert options_of(trials[1].config) == {"max_autotune": True}, "then max-autotune"
    for t in trials:
        if t.status is Status.OK:  # the objective is the median time per call, compile time a metric
            assert t.value == pytest.approx(statistics.median(t.samples)) and len(t.samples) == 5
            assert t.metrics["compile_s"] > t.value
    failed = [t for t in trials if t.status is not Status.OK]
    assert {t.config["cpu_backend"] for t in failed} == {"halide"} and len(failed) == 2
    assert all(t.reason and "halide" in t.reason.lower() for t in failed)
    assert len(result.failures) == 2 and len(lines) >= 5
    from perftune.store import open_store

    assert result.run_id is not None
    stored = open_store(store).trials(result.run_id)
    assert sorted(t.status.value for t in stored) == sorted(t.status.value for t in trials)

    labels = {vt.label: vt for vt in result.final}
    assert {"eager", "torch.compile", "max-autotune"} <= set(labels)
    assert all(vt.status is Status.OK and len(vt.samples_s) == 8 for vt in labels.values())
    for ci in (result.speedup_vs_default, result.speedup_vs_max_autotune, result.speedup_vs_eager):
        assert ci is not None and ci.lo <= ci.estimate <= ci.hi
    # Never a setting that is not surely faster than plain torch.compile.
    assert result.best_settings == {} or result.speedup_vs_default.lo > 1.0  # type: ignore[union-attr]
    assert result.best_settings.get("cpu_backend", "cpp") == "cpp"
    with torch.no_grad():
        y = result.compiled(x)
        ref = model(x)
    assert torch.allclose(y, ref, rtol=1e-4, atol=1e-5)
    assert "best settings (cpu)" in result.summary()
