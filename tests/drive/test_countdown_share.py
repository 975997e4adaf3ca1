"""``Countdown.share``: a phase's part of one clock starts with the whole and ends before it."""

from __future__ import annotations

import time

import pytest

from perftune.drive import Countdown


def test_a_share_starts_with_the_whole_clock_and_runs_out_first() -> None:
    clock = Countdown(0.2)
    time.sleep(0.05)
    half = clock.share(0.5)  # made late, but counts from the whole clock's start
    assert half.remaining_s() is not None and half.remaining_s() <= 0.05
    time.sleep(0.06)
    assert half.expired() and not clock.expired()
    assert half.elapsed_s() == pytest.approx(clock.elapsed_s(), abs=0.01)


def test_a_share_of_no_budget_never_expires_and_bad_fractions_are_refused() -> None:
    assert Countdown(None).share(0.5).remaining_s() is None
    with pytest.raises(ValueError, match="fraction"):
        Countdown(10.0).share(0.0)
    with pytest.raises(ValueError, match="fraction"):
        Countdown(10.0).share(1.5)
