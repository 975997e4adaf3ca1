"""Measuring candidates: sandboxed steps, noise-aware timing and budgeted verification.

* :class:`Sandbox` runs one step of an untrusted candidate (its own session, scratch directory,
  limits, namespaces, timeout) and reports a :class:`StepResult` with a one-line reason;
  :func:`doctor` says which protections this machine offers.
* :func:`measure_adaptively` repeats a measurement until a sequential test separates the
  candidate from the incumbent; :func:`speedup_ci` reports a speedup with its interval.
* :class:`BudgetedVerifier` spends an expensive check on the riskiest candidates.

Example:
    >>> from perftune.measure import Limits, Sandbox
    >>> sandbox = Sandbox(Limits(memory_mb=512))
"""

from __future__ import annotations

from perftune.measure._limits import Capabilities, Limits, capabilities, doctor
from perftune.measure._sandbox import Sandbox, Scratch, StepResult
from perftune.measure._timing import (
    Decision,
    MeasureResult,
    SpeedupCI,
    TimingSettings,
    compare,
    measure_adaptively,
    speedup_ci,
)
from perftune.measure._verify import FEATURES, BudgetedVerifier, RiskModel

__all__ = [
    "FEATURES",
    "BudgetedVerifier",
    "Capabilities",
    "Decision",
    "Limits",
    "MeasureResult",
    "RiskModel",
    "Sandbox",
    "Scratch",
    "SpeedupCI",
    "StepResult",
    "TimingSettings",
    "capabilities",
    "compare",
    "doctor",
    "measure_adaptively",
    "speedup_ci",
]
