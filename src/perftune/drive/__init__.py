"""The driver: the ask/tell Tuner, ``tune()``, budgets and executors.

Example:
    >>> import perftune
    >>> from perftune.space import Int, Space
    >>> result = perftune.tune(lambda c: abs(c["n"] - 7), Space({"n": Int(0, 20)}), budget=25, seed=3)
    >>> result.best.config["n"]
    7
"""

from __future__ import annotations

from perftune.drive._attach import Worker, WorkSummary
from perftune.drive._budget import Budget, Countdown, parse_budget
from perftune.drive._context import EvalContext, Incumbent
from perftune.drive._evaluate import Outcome, evaluate, interpret
from perftune.drive._executors import Executor, InlineExecutor, ProcessExecutor, ThreadExecutor
from perftune.drive._fidelity import ASHA, Fidelity, RunningTrial
from perftune.drive._progress import ProgressLine, ProgressSettings
from perftune.drive._tuner import DEFAULT_LAG, Result, Tuner, tune
from perftune.drive._warmstart import Prior, WarmStart

__all__ = [
    "ASHA",
    "DEFAULT_LAG",
    "Budget",
    "Countdown",
    "EvalContext",
    "Executor",
    "Fidelity",
    "Incumbent",
    "InlineExecutor",
    "Outcome",
    "Prior",
    "ProcessExecutor",
    "ProgressLine",
    "ProgressSettings",
    "Result",
    "RunningTrial",
    "ThreadExecutor",
    "Tuner",
    "WarmStart",
    "WorkSummary",
    "Worker",
    "evaluate",
    "interpret",
    "parse_budget",
    "tune",
]
