"""Measuring candidates: sandboxed steps, noise-aware timing and budgeted verification.

Example:
    >>> from perftune.measure import Limits, Sandbox
    >>> sandbox = Sandbox(Limits(memory_mb=512))
"""

from __future__ import annotations

from perftune.measure._limits import Capabilities, Limits, capabilities, doctor
from perftune.measure._verify import FEATURES, BudgetedVerifier, RiskModel
from perftune.measure._timing import (
    Decision,
    MeasureResult,
    SpeedupCI,
    TimingSettings,
    compare,
    measure_adaptively,
    speedup_ci,
)
from perftune.measure._sandbox import Sandbox, Scratch, StepResult

__all__ = ["Capabilities", "Limits", "Sandbox", "Scratch", "StepResult", "capabilities", "doctor"]
