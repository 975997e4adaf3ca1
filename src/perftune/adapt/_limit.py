"""Stop an in-process run that is already far slower than the best one on the same input.

Measuring every landmark on every input (and every configuration on every test input) means running
the quadratic insertion sort a nearly-sorted cluster chose on a large random input too: one such pair
can cost more than the rest of the training together. The run is stopped once it has taken ``limit_s``
(a multiple of the fastest time on that input), by a timer signal that raises inside the running
Python code; the measurement is then a status ("stopped"), not a time. Only the main thread can take
signals: elsewhere (and on platforms without ``setitimer``) the run is not limited.

Example:
    >>> seconds, out, stopped = run_limited(lambda: sum(range(10)), 1.0)
    >>> out, stopped
    (45, False)
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["run_limited"]

#: With a CPU-time limit, a run is stopped by the wall clock too once it has taken this many times the
#: limit (a loaded machine runs a process at a fraction of a core; a hung run computes nothing).
_WALL_BACKSTOP = 20.0


class _Stopped(BaseException):
    """Raised by the timer inside the run (a BaseException, so the run's own handlers let it pass)."""


def _raise(signum: int, frame: Any) -> None:
    raise _Stopped


def run_limited(
    fn: Callable[[], Any], limit_s: float, timer: Callable[[], float] = time.perf_counter
) -> tuple[float, Any, bool]:
    """Run ``fn``; ``(seconds, output, stopped)``, where a stopped run has no output.

    ``seconds`` is read from ``timer``. With a CPU clock (``time.thread_time``, or ``time.process_time``)
    the limit is CPU time too (``ITIMER_PROF``): on a loaded machine a wall-clock limit would stop a run
    that is only waiting for a core, and call it hopeless. Time such runs with ``time.thread_time``: while
    a process CPU timer is armed (and for a while after), Linux reads the process's clock from the timer's
    tick-updated sum, so ``time.process_time`` then moves in steps of a scheduler tick (4 ms here) and a
    short run reads as 0; the calling thread's own clock stays exact.
    """
    cpu = timer is time.process_time or timer is time.thread_time
    usable = (
        math.isfinite(limit_s)
        and limit_s > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        t0 = timer()
        out = fn()
        return timer() - t0, out, False
    # A CPU limit alone would never stop a run that hangs without computing (waiting on a lock, a
    # sleep): the wall clock stays a backstop, far enough not to stop a run that only waits for a core.
    timers = [(signal.SIGALRM, signal.ITIMER_REAL, limit_s * (_WALL_BACKSTOP if cpu else 1.0))]
    if cpu:
        timers.append((signal.SIGPROF, signal.ITIMER_PROF, limit_s))
    previous = [(which, signal.signal(which, _raise)) for which, _, _ in timers]
    t0 = timer()
    try:
        for _, kind, seconds in timers:
            signal.setitimer(kind, seconds)
        try:
            out = fn()
        finally:
            for _, kind, _ in timers:
                signal.setitimer(kind, 0)
        return timer() - t0, out, False
    except _Stopped:
        return timer() - t0, None, True
    finally:
        for which, handler in previous:
            signal.signal(which, handler)
