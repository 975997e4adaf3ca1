"""Fresh-process compile jobs: a good variant is timed; a crash, a hang, a wrong output and a compile
error each become a failure with a reason, and the caller goes on. Real torch.compile, C++ backend."""

from __future__ import annotations

import os
import signal
import time

import pytest

torch = pytest.importorskip("torch")

from perftune.torch import Job, TimingPlan, run_job  # noqa: E402
from perftune.trial import Status  # noqa: E402

PLAN = TimingPlan(n_warmup=1, n_rounds=3, min_sample_s=1e-4)


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


@torch._dynamo.disable
def _segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


@torch._dynamo.disable
def _hang() -> None:
    time.sleep(3600)


class CrashesWhenCompiled(Tiny):
    # Dynamo traces is_compiling() as True: eager runs fine, the compiled call kills its process.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            _segfault()
        return super().forward(x)


class HangsWhenCompiled(Tiny):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            _hang()
        return super().forward(x)


class WrongWhenCompiled(Tiny):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y + 1.0 if torch.compiler.is_compiling() else y


def _x() -> torch.Tensor:
    return torch.randn(4, 8)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_good_variants_are_timed_interleaved_and_bad_options_fail_alone() -> None:
    variants = (("eager", None), ("plain", {}), ("bogus", {"no_such_inductor_option": True}))
    eager, plain, bogus = run_job(Job(Tiny(), (_x(),), variants, "cpu", PLAN), timeout_s=300)
    for vt in (eager, plain):
        assert vt.status is Status.OK, vt.reason
        assert len(vt.samples_s) == PLAN.n_rounds and all(s > 0 for s in vt.samples_s)
        assert vt.rel_error is not None and vt.rel_error <= 1e-4
    assert plain.compile_s is not None and plain.compile_s > eager.compile_s  # type: ignore[operator]
    assert bogus.status is Status.FAILED and "no_such_inductor_option" in (bogus.reason or "")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_crash_fails_the_job_with_the_signal() -> None:
    [vt] = run_job(Job(CrashesWhenCompiled(), (_x(),), (("plain", {}),), "cpu", PLAN), timeout_s=240)
    assert vt.status is Status.FAILED
    assert "crashed" in (vt.reason or "") and "SIGSEGV" in (vt.reason or "")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_hang_is_a_timeout_and_the_process_is_killed() -> None:
    t0 = time.monotonic()
    [vt] = run_job(Job(HangsWhenCompiled(), (_x(),), (("plain", {}),), "cpu", PLAN), timeout_s=45)
    assert vt.status is Status.TIMEOUT and "timeout 45 s" in (vt.reason or "")
    assert time.monotonic() - t0 < 120


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_wrong_output_is_caught_against_eager() -> None:
    [vt] = run_job(Job(WrongWhenCompiled(), (_x(),), (("plain", {}),), "cpu", PLAN), timeout_s=240)
    assert vt.status is Status.FAILED and "relative error" in (vt.reason or "")
    assert not vt.samples_s


def test_a_model_that_cannot_travel_is_one_line() -> None:
    from perftune.errors import PerftuneError
    from perftune.torch import tune_compile

    with pytest.raises(PerftuneError, match="cannot be sent to a fresh process"):
        tune_compile(lambda x: x * 2, (_x(),), budget=2)
    with pytest.raises(PerftuneError, match="hold no tensor"):
        tune_compile(Tiny(), (3,), budget=2)
    with pytest.raises(PerftuneError, match="timeout_s"):
        tune_compile(Tiny(), (_x(),), budget=2, timeout_s=0)
