"""perftune.torch review fixes: NaN/inf outputs checked against eager, the caller's settings carried into
the fresh processes, failures every candidate shares stop the search, a confirmation run that fails keeps
the search's result, arguments checked first, and no process outlives a tuner ended by a signal.

Most tests replace ``run_job`` by a function (no process, no compile): they are about the loop's logic.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import perftune.torch  # noqa: E402
from perftune.errors import PerftuneError  # noqa: E402
from perftune.space import Bool, Choice, Int, Space  # noqa: E402
from perftune.targets.torch_compile import _runner, _tune  # noqa: E402
from perftune.torch import Job, TimingPlan, VariantTiming, run_job, tune_compile  # noqa: E402
from perftune.trial import Status  # noqa: E402

# torch 2.13 on Python 3.11 warns about its own torch.jit use when Inductor loads in this process.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")

NAN, INF = float("nan"), float("inf")


class Double(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def _x() -> torch.Tensor:
    return torch.ones(4, 4)


# -- H1: non-finite outputs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("got", "want"),
    [
        ([NAN, 100.0, -7.0, 1e6], [NAN, 1.0, 2.0, 3.0]),  # NaN at the same place, the rest wrong
        ([INF, 100.0, -7.0, 1e6], [INF, 1.0, 2.0, 3.0]),  # inf at the same place, the rest wrong
        ([NAN, NAN, NAN, NAN], [NAN, 1.0, 2.0, 3.0]),  # all NaN
        ([NAN, 1.0, 2.0, 3.0], [INF, 1.0, 2.0, 3.0]),  # NaN where eager has inf
        ([-INF, 1.0, 2.0, 3.0], [INF, 1.0, 2.0, 3.0]),  # inf of the other sign
        ([1.0, 1.0, 2.0, 3.0], [NAN, 1.0, 2.0, 3.0]),  # finite where eager is NaN
        ([1e300, -1e300, 1e300, 0.0], [1e-300, 0.0, 0.0, 0.0]),  # the error's norm overflows: NaN fails
    ],
)
def test_an_output_that_differs_from_eager_fails_whatever_its_nan_and_inf(got: list, want: list) -> None:
    err, problem = _runner._relative_error(torch.tensor(got, dtype=torch.float64),
                                           torch.tensor(want, dtype=torch.float64), None)
    assert problem is not None and problem.startswith("wrong output 0")
    assert err > 1e-4


def test_non_finite_elements_equal_to_eagers_pass() -> None:
    want = torch.tensor([NAN, INF, -INF, 1.0, 2.0])
    err, problem = _runner._relative_error(want.clone() * (1 + 1e-7), want, None)
    assert problem is None and err < 1e-6
    err, problem = _runner._relative_error(torch.full((3,), NAN), torch.full((3,), NAN), None)
    assert problem is None and err == 0.0


# -- L2: arguments ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"plan": 5}, "plan must be a TimingPlan"),
        ({"final_plan": "fast"}, "final_plan must be a TimingPlan"),
        ({"rtol": "abc"}, "rtol must be None or a finite number"),
        ({"rtol": -1.0}, "rtol must be None or a finite number"),
        ({"rtol": NAN}, "rtol must be None or a finite number"),
        ({"timeout_s": INF}, "timeout_s must be a positive number"),
        ({"space": Space({"not_a_real_key": Bool()})}, "'not_a_real_key' is not an Inductor config key"),
        ({"space": Space({"max_fusion_size": Choice(["64", "16"])})}, "'max_fusion_size': '64' is a str"),
        ({"space": Space({"freezing": Int(0, 1)})}, "'freezing': 0 is not a bool"),
    ],
)
def test_bad_arguments_are_one_line_before_any_process(kwargs: dict, message: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def no_process(*args: Any, **kw: Any) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(_tune, "run_job", no_process)
    with pytest.raises(PerftuneError, match=message) as info:
        tune_compile(Double(), (_x(),), budget=2, **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("plan", [dict(n_rounds=2.5), dict(n_warmup=True), dict(min_sample_s="1"),
                                  dict(min_sample_s=INF)])
def test_timing_plan_refuses_wrong_types(plan: dict) -> None:
    with pytest.raises(PerftuneError, match="TimingPlan: need integers"):
        TimingPlan(**plan)


# -- a run_job that runs nothing ----------------------------------------------------------------------


class FakeRunJob:
    """Answers run_job: each search candidate takes ``times[options_key]`` s; ``final`` answers the
    confirmation run (a function of the job's variants)."""

    def __init__(self, search: Any, final: Any = None) -> None:
        self.search, self.final = search, final
        self.jobs: list[tuple[Job, float]] = []

    def __call__(self, job: Job, *, timeout_s: float, state: Any = None) -> list[VariantTiming]:
        self.jobs.append((job, timeout_s))
        if len(job.variants) == 1:
            label, options = job.variants[0]
            return [self.search(label, dict(options or {}))]
        return [self.final(label, dict(options or {})) for label, options in job.variants]


def _ok(label: str, options: dict, time_s: float) -> VariantTiming:
    samples = [time_s * (1 + 0.001 * i) for i in range(5)]
    return VariantTiming(label, options, samples_s=samples, compile_s=1.0)


def _search_times(label: str, options: dict) -> VariantTiming:
    return _ok(label, options, 0.5e-3 if options.get("epilogue_fusion") is False else 1e-3)


SPACE = Space({"epilogue_fusion": Bool(default=True)})


# -- M3: failures every candidate shares ----------------------------------------------------------------


def test_a_model_that_fails_in_eager_stops_the_search_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def eager_fails(label: str, options: dict) -> VariantTiming:
        return VariantTiming(label, options, Status.FAILED, "the model itself fails uncompiled (eager): "
                             "ValueError: shape mismatch in my model", model_failed=True)

    fake = FakeRunJob(eager_fails)
    monkeypatch.setattr(_tune, "run_job", fake)
    with pytest.raises(PerftuneError, match=r"^tune_compile: the model itself fails uncompiled \(eager\): "
                                            "ValueError: shape mismatch"):
        tune_compile(Double(), (_x(),), budget=6, space=SPACE)
    assert len(fake.jobs) == 1


def test_plain_torch_compile_failing_stops_the_search_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunJob(lambda label, options: VariantTiming(label, options, Status.FAILED, "InductorError: x"))
    monkeypatch.setattr(_tune, "run_job", fake)
    with pytest.raises(PerftuneError, match="plain torch.compile fails on this model: InductorError: x"):
        tune_compile(Double(), (_x(),), budget=6, space=SPACE)
    assert len(fake.jobs) == 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_model_that_fails_in_eager_is_reported_by_run_job() -> None:
    job = Job(RaisesInEager(), (_x(),), (("eager", None), ("plain", {})), "cpu", TimingPlan(0, 1))
    results = run_job(job, timeout_s=240)
    assert [vt.status for vt in results] == [Status.FAILED, Status.FAILED]
    assert all(vt.model_failed for vt in results)
    assert "fails uncompiled (eager): ValueError: shape mismatch" in (results[0].reason or "")


class RaisesInEager(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("shape mismatch in my model")


# -- M1: the confirmation run -----------------------------------------------------------------------------


def test_a_confirmation_that_times_out_keeps_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    def timed_out(label: str, options: dict) -> VariantTiming:
        return VariantTiming(label, options, Status.TIMEOUT, "no result after 75 s (timeout 75 s): killed")

    fake = FakeRunJob(_search_times, timed_out)
    monkeypatch.setattr(_tune, "run_job", fake)
    plan, final_plan = TimingPlan(n_warmup=3, n_rounds=10), TimingPlan(n_warmup=5, n_rounds=20)
    result = tune_compile(Double(), (_x(),), budget=2, space=SPACE, timeout_s=75, plan=plan,
                          final_plan=final_plan)
    assert len(result.trials) == 2 and all(t.status is Status.OK for t in result.trials)
    assert result.best_settings == {"epilogue_fusion": False}  # the search's best, surely faster
    assert result.time_s == pytest.approx(0.5e-3 * 1.002)
    assert result.speedup_vs_default is not None and result.speedup_vs_default.estimate > 1.9
    assert result.note is not None and "the confirmation process timed out" in result.note
    assert "unconfirmed" in result.note and "plain torch.compile failed" not in result.note
    # The confirmation had more time than one candidate: its variants, and more calls each.
    (_job, final_limit), *_ = [(j, t) for j, t in fake.jobs if len(j.variants) > 1]
    n_variants = len(_job.variants)
    assert final_limit == pytest.approx(75 * n_variants * 25 / 13)
    assert all(t == 75 for j, t in fake.jobs if len(j.variants) == 1)


def test_plain_torch_compile_failing_only_in_the_confirmation_keeps_the_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def default_fails(label: str, options: dict) -> VariantTiming:
        if label == _tune.DEFAULT:
            return VariantTiming(label, options, Status.FAILED, "RuntimeError: flaky")
        return _ok(label, options, 1e-3)

    monkeypatch.setattr(_tune, "run_job", FakeRunJob(_search_times, default_fails))
    result = tune_compile(Double(), (_x(),), budget=2, space=SPACE)
    assert result.note is not None and "plain torch.compile failed in the confirmation run" in result.note
    assert result.best_settings == {"epilogue_fusion": False} and len(result.trials) == 2


# -- M2: the caller's settings ------------------------------------------------------------------------------


def test_the_callers_settings_are_captured_and_applied() -> None:
    import torch._inductor.config as inductor_config

    from perftune.torch import compile_space, options_of

    before, threads = inductor_config.freezing, torch.get_num_threads()
    with inductor_config.patch(freezing=True):  # the caller's own choice
        state = perftune.torch.caller_state()
        space = compile_space("cpu")
        assert space.default()["freezing"] is True and options_of(space.default()) == {}
        assert options_of({**space.default(), "freezing": False}) == {"freezing": False}
    assert state["configs"]["torch._inductor.config"] == {"freezing": True}
    assert state["threads"] == threads
    # What a fresh process does with it (here, where the setting is back at its default).
    try:
        _runner._apply_state({**state, "threads": 1})
        assert inductor_config.freezing is True and torch.get_num_threads() == 1
    finally:
        inductor_config.freezing = before
        torch.set_num_threads(threads)


class WritesItsSettings(torch.nn.Module):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            import torch._inductor.config as inductor_config

            with open(self.path, "w") as f:
                f.write(f"{inductor_config.freezing} {torch.get_num_threads()}")
        return x + 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_job_runs_with_the_callers_settings(tmp_path: Path) -> None:
    import torch._inductor.config as inductor_config

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with inductor_config.patch(freezing=True):
            model = WritesItsSettings(str(tmp_path / "seen.txt"))
            [vt] = run_job(Job(model, (_x(),), (("eager", None),), "cpu", TimingPlan(0, 1)), timeout_s=240)
    finally:
        torch.set_num_threads(threads)
    assert vt.status is Status.OK, vt.reason
    assert (tmp_path / "seen.txt").read_text() == "True 1"


# -- L1: no orphan ---------------------------------------------------------------------------------------

_TUNER = textwrap.dedent("""
    import sys, time
    import torch
    sys.path.insert(0, {here!r})
    from test_torch_compile_review_fixes import Sleeps
    from perftune.torch import Job, TimingPlan, run_job
    run_job(Job(Sleeps({pid_file!r}), (torch.ones(2),), (("eager", None),), "cpu", TimingPlan(0, 1)),
            timeout_s=600)
""")


class Sleeps(torch.nn.Module):
    def __init__(self, pid_file: str) -> None:
        super().__init__()
        self.pid_file = pid_file

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with open(self.pid_file, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)
        return x


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone too: it only waits to be reaped
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_job_process_ends_when_the_tuner_is_terminated(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = _TUNER.format(here=str(Path(__file__).parent), pid_file=str(pid_file))
    tuner = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.DEVNULL)
    child = 0
    try:
        deadline = time.monotonic() + 240
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and tuner.poll() is None, "the job never started"
            time.sleep(0.2)
        child = int(pid_file.read_text())
        assert _alive(child)
        tuner.send_signal(signal.SIGTERM)
        tuner.wait(60)
        deadline = time.monotonic() + 30
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(child), "the job's process outlived the tuner"
    finally:
        if tuner.poll() is None:
            tuner.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_confirmation_limit_is_never_below_a_candidates() -> None:
    plan = TimingPlan(n_warmup=10, n_rounds=50)
    assert _tune._confirmation_timeout_s(60.0, 3, plan, TimingPlan(n_warmup=0, n_rounds=1)) == 180.0
    assert math.isfinite(_tune._confirmation_timeout_s(60.0, 5, TimingPlan(), TimingPlan()))
