"""Budgets: how long a run may go on."""

from __future__ import annotations

import math
import numbers
import re
import time
from dataclasses import dataclass
from typing import TypeVar

from perftune.errors import BudgetError

__all__ = ["Budget", "Countdown", "parse_budget"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)\s*$")
_UNIT_S = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_Limit = TypeVar("_Limit", int, float)


@dataclass(frozen=True)
class Budget:
    """Limits of a run; the first one reached ends it.

    Args:
        evals: Number of trials (measured configurations, failures included; trials pruned early by a
            reporting objective's pruner are not full evaluations and do not count, docs/fidelity.md).
        seconds: Wall-clock limit, kept by the driver: evaluations in flight at the limit are stopped
            and recorded as cancelled (not counted). It counts from the start of ``Tuner.run``, or from
            the first ``Tuner.ask()`` in an ask/tell loop.
        patience: Stop after this many trials without a new best.
        target: Stop as soon as a value at least this good is reached (in the user's units and goal).

    Example:
        >>> Budget(evals=200, seconds=600).evals
        200
    """

    evals: int | None = None
    seconds: float | None = None
    patience: int | None = None
    target: float | None = None

    def __post_init__(self) -> None:
        def integer(x: object) -> bool:  # numpy's integers too
            return isinstance(x, numbers.Integral) and not isinstance(x, bool)

        def number(x: object) -> bool:
            return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)

        if self.evals is not None and (not integer(self.evals) or self.evals <= 0):
            raise BudgetError(f"budget: evals must be a positive integer, got {self.evals!r}")
        if self.seconds is not None and not (number(self.seconds) and self.seconds > 0):
            raise BudgetError(f"budget: seconds must be a positive number, got {self.seconds!r}")
        if self.patience is not None and (not integer(self.patience) or self.patience <= 0):
            raise BudgetError(f"budget: patience must be a positive integer, got {self.patience!r}")
        if self.target is not None and not number(self.target):
            raise BudgetError(f"budget: target must be a finite number, got {self.target!r}")
        if self.evals is None and self.seconds is None and self.patience is None and self.target is None:
            raise BudgetError("budget: give at least one of evals, seconds, patience or target")

    @classmethod
    def coerce(cls, budget: Budget | int | str | None) -> Budget | None:
        """Turn ``200``, ``"90s"`` or a Budget into a Budget (None stays None)."""
        if budget is None or isinstance(budget, Budget):
            return budget
        if isinstance(budget, bool):
            raise BudgetError(f"budget: expected a number of evaluations, got {budget!r}")
        if isinstance(budget, int):
            return cls(evals=budget)
        if isinstance(budget, str):
            return parse_budget([budget])
        raise BudgetError(f"budget: expected an int, a string like '10m', or perftune.Budget; got {budget!r}")

    def merged(self, other: Budget | None) -> Budget:
        """The tighter of two budgets, limit by limit."""
        if other is None:
            return self

        def tighter(a: _Limit | None, b: _Limit | None) -> _Limit | None:
            return b if a is None else a if b is None else min(a, b)

        return Budget(
            evals=tighter(self.evals, other.evals),
            seconds=tighter(self.seconds, other.seconds),
            patience=tighter(self.patience, other.patience),
            target=self.target if self.target is not None else other.target,
        )


class Countdown:
    """The clock of a time budget, started once; everything that spends the budget reads it here.

    A target whose command has steps before or after the driver's search (checks, a confirmation)
    sizes them by this clock rather than by one of its own, so that one budget covers the whole command.

    Args:
        seconds: The time budget; None for none (then nothing is ever out of time).

    Example:
        >>> clock = Countdown(60.0)
        >>> 59 < clock.remaining_s() <= 60 and not clock.expired()
        True
        >>> Countdown(None).remaining_s() is None
        True
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._started = time.monotonic()

    def elapsed_s(self) -> float:
        """Seconds since the clock started."""
        return time.monotonic() - self._started

    def remaining_s(self) -> float | None:
        """Seconds left (never negative), or None without a time budget."""
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - self.elapsed_s())

    def expired(self) -> bool:
        """Whether the time budget is spent."""
        left = self.remaining_s()
        return left is not None and left <= 0.0

    def share(self, fraction: float) -> Countdown:
        """A clock with the same start that runs out after ``fraction`` of this one's time.

        A command whose phases split one budget (a search, then checks of its winner) gives each
        phase its share of the one clock, so that the phases' ends cannot drift apart from the whole.

        Example:
            >>> clock = Countdown(60.0)
            >>> 29 < clock.share(0.5).remaining_s() <= 30
            True
        """
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"share: fraction must be in (0, 1], got {fraction!r}")
        part = Countdown(None if self.seconds is None else fraction * self.seconds)
        part._started = self._started
        return part


def parse_budget(items: list[str] | tuple[str, ...]) -> Budget:
    """Parse CLI budgets: ``"200"`` is evaluations, ``"90s"``, ``"10m"``, ``"1h"`` wall time.

    Example:
        >>> parse_budget(["200", "10m"])
        Budget(evals=200, seconds=600.0, patience=None, target=None)
    """
    evals: int | None = None
    seconds: float | None = None
    for item in items:
        text = str(item).strip()
        if text.isdigit():
            n = int(text)
            if n <= 0:
                raise BudgetError(f"--budget {text}: must be at least 1 evaluation")
            evals = n if evals is None else min(evals, n)
            continue
        match = _DURATION.match(text)
        if not match:
            raise BudgetError(f"--budget {text!r}: expected a number of evaluations (200) "
                              "or a duration (90s, 10m, 1h)")
        s = float(match.group(1)) * _UNIT_S[match.group(2)]
        if s <= 0:
            raise BudgetError(f"--budget {text}: a duration must be positive")
        seconds = s if seconds is None else min(seconds, s)
    return Budget(evals=evals, seconds=seconds)
