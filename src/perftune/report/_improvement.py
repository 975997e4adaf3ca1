"""One definition of a run's improvement, shared by ``run``, ``show``, ``report``, ``flags`` and ``--json``.

The improvement is the speedup of the final answer over the baseline with a confidence interval: the
ratio of the geometric means of their samples, Welch's interval on the log scale
(:func:`perftune.measure.speedup_ci`). Every view prints it with :meth:`Improvement.text`, so the
words, the digits and the interval are the same everywhere.

The final answer is not always the best trial of the search: a winner can fail its check, and a flag
set can fail to confirm against -O3. The command that ends a run records its :class:`FinalAnswer` in
the store, and the views of a stored run read it back (:func:`final_answer`).

Example:
    >>> imp = Improvement(4.0, 3.9, 4.1)
    >>> imp.text()
    'improvement over the default configuration: 4.000x (95% CI 3.900x to 4.100x)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perftune.trial import infeasible

__all__ = [
    "FinalAnswer",
    "Improvement",
    "answer_of",
    "answer_value",
    "final_answer",
    "format_factor",
    "improvement_of",
    "infeasible",
    "record_final_answer",
    "trial_speedup",
]

DEFAULT_BASELINE = "the default configuration"
_DIGITS = 3  # the printed digits, and those of the JSON numbers, so that the views agree to the digit


def format_factor(value: float, ratio: bool = True) -> str:
    """One number of an improvement as every view prints it: ``3.871x``, or ``+100.0%`` where a value is 0
    or below and there is no ratio (the report's views.js formats it the same way).

    Example:
        >>> format_factor(3.87123), format_factor(2.0, ratio=False)
        ('3.871x', '+100.0%')
    """
    return f"{value:.{_DIGITS}f}x" if ratio else f"{(value - 1) * 100:+.1f}%"


@dataclass(frozen=True)
class Improvement:
    """Speedup of the final answer over the baseline (``> 1`` is better) with its interval.

    Attributes:
        estimate: Ratio of geometric means of the samples.
        low: Lower end of the confidence interval.
        high: Upper end of the confidence interval.
        confidence: Level of the interval.
        baseline: What the answer is compared with, as printed ("the default configuration", "-O3").
        is_baseline: The final answer is the baseline itself (the estimate is 1 by definition).
        interval: False when a side has a single measurement: there is no noise to bound then.
        ratio: False when a value is 0 or negative (no ratio exists): the numbers are then 1 plus the
            relative improvement, and the text prints that improvement in percent.

    Example:
        >>> Improvement(1.0, 1.0, 1.0, baseline="-O3", is_baseline=True).text()
        'improvement over -O3: 1.000x (the final answer is -O3 itself)'
    """

    estimate: float
    low: float
    high: float
    confidence: float = 0.95
    baseline: str = DEFAULT_BASELINE
    is_baseline: bool = False
    interval: bool = True
    ratio: bool = True

    def _number(self, value: float) -> str:
        return format_factor(value, self.ratio)

    def text(self) -> str:
        """The one line every view prints."""
        head = f"improvement over {self.baseline}: {self._number(self.estimate)}"
        if not self.ratio:
            # A value of 0 or below has no ratio (a best of 0 read as "2.000x" before).
            head += " (relative to its value: a value is 0 or below, so there is no ratio)"
        if self.is_baseline:
            return f"{head} (the final answer is {self.baseline} itself)"
        if not self.interval:
            return f"{head} (one measurement each: no confidence interval)"
        ci = f"{self.confidence:.0%} CI {self._number(self.low)} to {self._number(self.high)}"
        if round(self.low, _DIGITS) < 1.0 < round(self.high, _DIGITS):  # as printed: the same after JSON
            # The noise allows no improvement at all: say so where the number is.
            return f"{head} ({ci}: within the noise, not shown to be better)"
        return f"{head} ({ci})"

    def to_json(self) -> dict[str, Any]:
        """The numbers as printed (rounded to the printed digits) and the printed line."""
        return {
            "estimate": round(self.estimate, _DIGITS),
            "low": round(self.low, _DIGITS),
            "high": round(self.high, _DIGITS),
            "confidence": self.confidence,
            "baseline": self.baseline,
            "is_baseline": self.is_baseline,
            "interval": self.interval,
            "ratio": self.ratio,
            "text": self.text(),
        }

    @classmethod
    def from_json(cls, data: Any) -> Improvement | None:
        """Read :meth:`to_json` back; None for anything else (an older or damaged record)."""
        if not isinstance(data, Mapping):
            return None
        try:
            numbers = [float(data[k]) for k in ("estimate", "low", "high", "confidence")]
        except (KeyError, TypeError, ValueError):
            return None
        if not all(math.isfinite(x) for x in numbers):
            return None
        return cls(*numbers, baseline=str(data.get("baseline") or DEFAULT_BASELINE),
                   is_baseline=bool(data.get("is_baseline", False)),
                   interval=bool(data.get("interval", True)), ratio=bool(data.get("ratio", True)))


@dataclass(frozen=True)
class FinalAnswer:
    """What a run finally answered: its improvement, the winning trial or command line, and why.

    Attributes:
        improvement: The improvement over the baseline, or None (no baseline, no successful trial).
        trial: The trial of the final answer, when it is one of the run's trials.
        config: The final configuration (a mapping), when there is one.
        command_line: The final command line (the flags kind), when there is one.
        note: One line on why the final answer is not the best of the search (a fallback), or None.
        value: The final answer's value in the run's units, when it was measured apart from its trial
            (a flags run's final option set, a Triton kernel's final interleaved comparison); None:
            the value of ``trial``.

    Example:
        >>> FinalAnswer(None, note="no verified winner").lines()
        ['no verified winner']
    """

    improvement: Improvement | None
    trial: int | None = None
    config: dict[str, Any] | None = None
    command_line: str | None = None
    note: str | None = None
    value: float | None = None

    def lines(self) -> list[str]:
        """The improvement line and the note, as every view prints them."""
        out = [] if self.improvement is None else [self.improvement.text()]
        return out + ([self.note] if self.note else [])

    def to_json(self) -> dict[str, Any]:
        """A JSON-able record (what the store keeps and ``--json`` prints)."""
        return {
            "improvement": None if self.improvement is None else self.improvement.to_json(),
            "trial": self.trial,
            "config": self.config,
            "command_line": self.command_line,
            "note": self.note,
            "value": self.value,
        }

    @classmethod
    def from_json(cls, data: Any) -> FinalAnswer | None:
        """Read :meth:`to_json` back; None for anything else."""
        if not isinstance(data, Mapping):
            return None
        trial = data.get("trial")
        config = data.get("config")
        command_line = data.get("command_line")
        note = data.get("note")
        value = data.get("value")
        try:
            number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        except OverflowError:  # an integer no float holds (a store edited by hand)
            number = False
        return cls(
            Improvement.from_json(data.get("improvement")),
            trial=trial if isinstance(trial, int) and not isinstance(trial, bool) else None,
            config=dict(config) if isinstance(config, Mapping) else None,
            command_line=command_line if isinstance(command_line, str) else None,
            note=note if isinstance(note, str) and note else None,
            value=float(value) if number else None,
        )


def _samples(trial: Any) -> list[float]:
    """A trial's samples; a trial without samples counts its value as its one sample."""
    values = list(trial.samples or ())
    if not values and trial.value is not None:
        values = [trial.value]
    return [float(v) for v in values]


def trial_speedup(best: Any, default: Any, *, goal: str = "min", confidence: float = 0.95) -> Any:
    """Speedup of trial ``best`` over trial ``default`` from their samples (a :class:`SpeedupCI`).

    Raises:
        ValueError: a trial has neither samples nor a value, or the values cannot be compared.
    """
    from perftune.measure import speedup_ci

    return speedup_ci(_samples(default), _samples(best), confidence=confidence, goal=goal)


def improvement_of(best: Any, default: Any, *, goal: str = "min", confidence: float = 0.95,
                   baseline: str = DEFAULT_BASELINE) -> Improvement | None:
    """The :class:`Improvement` of trial ``best`` over trial ``default``; None when it is not defined.

    Example:
        >>> from perftune.space import Config
        >>> from perftune.trial import Status, Trial
        >>> a = Trial(0, Config({"x": 0}), Status.OK, value=2.0, samples=[2.0, 2.1, 1.9])
        >>> b = Trial(1, Config({"x": 1}), Status.OK, value=1.0, samples=[1.0, 1.05, 0.95])
        >>> round(improvement_of(b, a).estimate, 1)
        2.0
    """
    if best is None or default is None or not default.ok or not best.ok or infeasible(default):
        return None
    try:
        ci = trial_speedup(best, default, goal=goal, confidence=confidence)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    if not all(math.isfinite(x) for x in (ci.estimate, ci.lo, ci.hi)):
        return None
    return Improvement(ci.estimate, ci.lo, ci.hi, ci.confidence, baseline=baseline,
                       is_baseline=best.id == default.id,
                       interval=min(len(_samples(best)), len(_samples(default))) >= 2,
                       ratio=getattr(ci, "ratio", True))


def answer_of(best: Any, default: Any, *, goal: str = "min", note: str | None = None) -> FinalAnswer:
    """The :class:`FinalAnswer` of a run whose final answer is trial ``best`` (None: no answer)."""
    if best is None:
        return FinalAnswer(None, note=note)
    import json

    return FinalAnswer(improvement_of(best, default, goal=goal), trial=best.id,
                       config=json.loads(best.config.to_json()), note=note)


def answer_value(store: Any, info: Any, answer: FinalAnswer, best: Any) -> float | None:
    """The value every view prints as a run's best: its final answer's (:attr:`FinalAnswer.value`, else
    the value of the answer's trial), else that of ``best``, the run's best trial (``store.best``).

    ``runs``, ``show``, the report and the dashboard print this number, so that the best they print is
    the value of the configuration that ``perftune best`` answers, not that of another trial.
    """
    if answer.value is not None:
        return answer.value
    if answer.trial is not None and (best is None or best.id != answer.trial):
        _, found = store.trial_page(info.id, trial_ids=[answer.trial], limit=1, count=False)
        if found:
            return found[0].value
    return None if best is None else best.value


def record_final_answer(store: Any, run_id: int | None, answer: FinalAnswer) -> None:
    """Keep ``answer`` with the run, for ``show`` and ``report``; a store without runs is skipped."""
    record = getattr(store, "record_result", None)
    if record is not None and run_id is not None:
        record(run_id, answer.to_json())


def final_answer(store: Any, info: Any, trials: Any = None) -> FinalAnswer:
    """The final answer of a stored run: the recorded one, else the best trial against the default.

    Args:
        store: An open store.
        info: The run (a :class:`perftune.store.RunInfo`).
        trials: The run's trials, when the caller has read them already.
    """
    recorded = FinalAnswer.from_json((getattr(info, "settings", None) or {}).get("result"))
    if recorded is not None:
        return recorded
    if trials is None:
        trials = store.trials(info.id)
    default = next((t for t in trials if t.technique == "default"), None)
    return answer_of(store.best(info.id), default, goal=getattr(info, "goal", "min") or "min")
