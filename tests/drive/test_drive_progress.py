"""The progress line: trials of N with an ETA from the measured rate, or the time left; best; failures."""

from __future__ import annotations

import io
import time

import pytest

from perftune.drive import ProgressLine, ProgressSettings
from perftune.space import Int, Space


class Clock:
    """A clock the test moves by hand (the line reads time through it)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_every_interval_with_an_eta_from_the_rate() -> None:
    clock, out = Clock(), io.StringIO()
    line = ProgressLine(evals=100, settings=ProgressSettings(every_s=5.0, tty=False), stream=out, clock=clock)
    for n in range(1, 41):
        clock.now += 0.25  # 4 trials a second
        line.update(n, best=f"{10 - n / 10:.6g}", failures=n // 10)
    lines = out.getvalue().splitlines()
    # 10 s of updates, one line every 5 s; the ETA is what is left at the rate measured so far.
    assert lines == ["perftune: 20/100 trials, 2 failed, best 8, 0:05 elapsed, ETA 0:20, 4.0/s",
                     "perftune: 40/100 trials, 4 failed, best 6, 0:10 elapsed, ETA 0:15, 4.0/s"]
    clock.now += 0.25
    line.update(41, best="5.9", failures=4)
    line.close()
    last = out.getvalue().splitlines()[-1]
    assert last == "perftune: 41/100 trials, 4 failed, best 5.9, 0:10 elapsed, ETA 0:15, 4.0/s"


def test_a_time_budget_says_the_time_left() -> None:
    clock, out = Clock(), io.StringIO()
    line = ProgressLine(seconds=60.0, settings=ProgressSettings(every_s=1.0, tty=False), stream=out,
                        clock=clock)
    clock.now += 12.0
    line.update(7, best=None, failures=0)
    assert out.getvalue() == "perftune: 7 trials, 0 failed, no success yet, 0:12 elapsed, 0:48 left, 0.58/s\n"
    # Both budgets: the ETA is whichever ends the run first.
    both = ProgressLine(evals=10, seconds=60.0, settings=ProgressSettings(tty=False, every_s=1.0),
                        stream=out, clock=clock)
    clock.now += 30.0
    both.update(5, best="1", failures=1)
    assert out.getvalue().splitlines()[-1].endswith("0:30 elapsed, 0:30 left, ETA 0:30, 0.17/s")


def test_a_terminal_gets_one_line_rewritten_in_place() -> None:
    clock, out = Clock(), io.StringIO()
    line = ProgressLine(evals=4, settings=ProgressSettings(tty=True), stream=out, clock=clock)
    for n in range(1, 5):
        clock.now += 1.0
        line.update(n, best="2", failures=0)
    line.close()
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") == 5
    last = text.rstrip("\n").split("\r")[-1].strip()
    assert last == "perftune: 4/4 trials, 0 failed, best 2, 0:04 elapsed, ETA 0:00, 1.0/s"


def test_a_short_run_off_a_terminal_prints_nothing_more_than_its_result() -> None:
    clock, out = Clock(), io.StringIO()
    line = ProgressLine(evals=5, settings=ProgressSettings(tty=False), stream=out, clock=clock)
    clock.now += 1.0
    line.update(5, best="1", failures=0)
    line.close()
    assert out.getvalue() == ""


def test_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        ProgressSettings(every_s=0)


def test_the_python_api_is_silent_by_default_and_reports_with_progress(
        capfd: pytest.CaptureFixture[str]) -> None:
    import perftune

    space = Space({"x": Int(0, 50)})
    perftune.tune(lambda c: float(c["x"]), space, budget=10, seed=0)
    assert capfd.readouterr().err == ""
    def slow(config: dict[str, int]) -> float:
        time.sleep(0.01)
        return float(config["x"])

    perftune.tune(slow, space, budget=10, seed=0, progress=ProgressSettings(every_s=0.001, tty=False))
    err = capfd.readouterr().err.splitlines()
    assert err and err[-1].startswith("perftune: 10/10 trials, 0 failed, best ")


def test_a_resumed_run_counts_where_it_was_but_its_rate_is_this_sessions() -> None:
    out = io.StringIO()
    line = ProgressLine(evals=110, settings=ProgressSettings(every_s=1.0, tty=False), stream=out,
                        clock=iter([0.0, 1.0]).__next__, done_before=100)
    line.update(102, best="1.5", failures=0)
    # 2 trials in 1 s: 2.0/s, 8 left: ETA 0:04 (it said 100/s and ETA 0:00, counting the 100 before).
    assert out.getvalue() == "perftune: 102/110 trials, 0 failed, best 1.5, 0:01 elapsed, ETA 0:04, 2.0/s\n"


def test_cancelled_trials_are_not_counted_as_done(tmp_path) -> None:  # noqa: ANN001
    import perftune

    db = f"sqlite:///{tmp_path / 'p.db'}"
    space = Space({"x": Int(0, 50)})

    def slow(config: dict[str, int]) -> float:
        time.sleep(0.3)
        return float(config["x"])

    perftune.tune(slow, space, budget="1s", seed=0, workers=2, store=db, name="timed")
    tuner = perftune.Tuner.resume("timed", db)
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        tuner.run(slow, tuner.n_trials + 2, progress=ProgressSettings(every_s=0.001, tty=False))
    last = err.getvalue().splitlines()[-1]
    done, total = last.split()[1].split("/")
    assert int(done) == int(total)  # it said 14/12 when cancelled trials were counted
