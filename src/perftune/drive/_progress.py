"""Progress of a run that tells the truth: trials done of N and an ETA, or the time left; best; failures.

In a terminal, one line rewritten in place (at most 5 times a second). Anywhere else (a pipe, a log, CI),
one plain line every ``every_s`` seconds, and a last one at the end, so that a long run in CI is never
silent. The ETA comes from the measured rate (trials finished per second of this run so far).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

__all__ = ["ProgressLine", "ProgressSettings", "format_duration"]


@dataclass(frozen=True)
class ProgressSettings:
    """How a run reports its progress (``Tuner.run(progress=ProgressSettings(...))``).

    Attributes:
        every_s: When the output is not a terminal: seconds between two plain lines.
        tty: Rewrite one line in place (a terminal); None asks the stream.

    Example:
        >>> ProgressSettings(every_s=30.0).every_s
        30.0
    """

    every_s: float = 10.0
    tty: bool | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.every_s, int | float) and math.isfinite(self.every_s) and self.every_s > 0):
            raise ValueError(f"progress every_s must be a positive number of seconds, got {self.every_s!r}")


def format_duration(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03``.

    Example:
        >>> format_duration(7.2), format_duration(750), format_duration(3723)
        ('0:07', '12:30', '1:02:03')
    """
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressLine:
    """Reports a run's progress on a stream (stderr by default).

    Args:
        evals: The evaluation budget (trials), or None.
        seconds: The time budget, or None.
        settings: How often and in which form.
        stream: Where to write (default: ``sys.stderr``).
        clock: The clock (None: ``time.monotonic``); the run's start is when the line is made.
        label: What the line starts with.
        unit: What is counted (``"trials"``; ``perftune adapt`` also counts ``"inputs"``).
        show_best: Say the best so far (or that there is no success yet); off where the count is of
            work that has no best (measuring every landmark on every input).
        done_before: What the count already was when the line was made (a resumed run): the rate and
            the ETA are this session's.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> line = ProgressLine(evals=10, settings=ProgressSettings(every_s=1.0, tty=False), stream=out,
        ...                     clock=iter([0.0, 2.0]).__next__)
        >>> line.update(4, best="1.5", failures=1)
        >>> out.getvalue()
        'perftune: 4/10 trials, 1 failed, best 1.5, 0:02 elapsed, ETA 0:03, 2.0/s\\n'
    """

    def __init__(self, *, evals: int | None = None, seconds: float | None = None,
                 settings: ProgressSettings | None = None, stream: IO[str] | None = None,
                 clock: Callable[[], float] | None = None, label: str = "perftune", unit: str = "trials",
                 show_best: bool = True, done_before: int = 0) -> None:
        self.evals = evals
        self.seconds = seconds
        self.settings = settings or ProgressSettings()
        self._stream = stream if stream is not None else sys.stderr
        tty = self.settings.tty
        if tty is None:
            isatty = getattr(self._stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self._clock = clock if clock is not None else time.monotonic
        self._label = label
        self._unit = unit
        self._show_best = show_best
        self._done_before = done_before  # counted before this line's start (a resume): not in the rate
        self._t0 = self._clock()
        # In place, the line shows at once; as plain lines, the first comes after every_s (a short run
        # prints nothing more than its result).
        self._last_write = -math.inf if tty else self._t0
        self._state: tuple[int, str | None, int | None] = (0, None, 0)
        self._width = 0
        self._closed = False
        self._wrote = False

    def text(self, now: float | None = None) -> str:
        """The line as it reads now."""
        now = self._clock() if now is None else now
        n, best, failures = self._state
        elapsed = max(0.0, now - self._t0)
        parts = [f"{n}/{self.evals} {self._unit}" if self.evals else f"{n} {self._unit}"]
        if failures is not None:
            parts.append(f"{failures} failed")
        if self._show_best:
            parts.append(f"best {best}" if best is not None else "no success yet")
        parts.append(f"{format_duration(elapsed)} elapsed")
        eta: float | None = None
        ran = n - self._done_before  # what this session did: the rate and the ETA are its own
        if self.evals and ran > 0:
            eta = max(0.0, (self.evals - n) * elapsed / ran)
        if self.seconds is not None:
            left = max(0.0, self.seconds - elapsed)
            parts.append(f"{format_duration(left)} left")
            eta = left if eta is None else min(eta, left)
            if self.evals and ran > 0:
                parts.append(f"ETA {format_duration(eta)}")
        elif self.evals:
            parts.append("ETA " + ("-" if eta is None else format_duration(eta)))
        if ran > 0 and elapsed > 0:
            parts.append(_rate_text(ran / elapsed))
        return f"{self._label}: " + ", ".join(parts)

    def update(self, n_trials: int, *, best: str | None, failures: int | None) -> None:
        """Record the run's state; writes when it is time to (never more often than it should)."""
        self._state = (n_trials, best, failures)
        now = self._clock()
        if self.tty:
            if now - self._last_write >= 0.2:
                self._write_tty(now)
        elif now - self._last_write >= self.settings.every_s:
            self._write_plain(now)

    def _write_tty(self, now: float) -> None:
        text = self.text(now)
        pad = " " * max(0, self._width - len(text))
        self._stream.write("\r" + text + pad)
        self._stream.flush()
        self._width = len(text)
        self._last_write = now

    def _write_plain(self, now: float) -> None:
        self._stream.write(self.text(now) + "\n")
        self._stream.flush()
        self._last_write = now
        self._wrote = True

    def close(self) -> None:
        """The last line (the final state), then the line ends."""
        if self._closed:
            return
        self._closed = True
        now = self._clock()
        if self.tty:
            self._write_tty(now)
            self._stream.write("\n")
            self._stream.flush()
        elif self._wrote:
            self._write_plain(now)  # the end state, after the periodic lines


def _rate_text(per_s: float) -> str:
    """Trials per second as a user reads it: two or three digits, per minute when under 0.1/s."""
    if per_s >= 10:
        return f"{per_s:.0f}/s"
    if per_s >= 1:
        return f"{per_s:.1f}/s"
    if per_s >= 0.1:
        return f"{per_s:.2f}/s"
    return f"{per_s * 60:.2g}/min"
