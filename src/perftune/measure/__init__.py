"""Measuring candidates: sandboxed steps, noise-aware timing and budgeted verification.

* :class:`Sandbox` runs one step of an untrusted candidate (its own session, scratch directory,
  limits, namespaces, timeout) and reports a :class:`StepResult` with a one-line reason;
  :func:`doctor` says which protections this machine offers.
* :func:`measure_adaptively` repeats a measurement until a sequential test separates the
  candidate from the incumbent; :func:`speedup_ci` reports a speedup with its interval.
* :class:`BudgetedVerifier` spends an expensive check on the riskiest candidates.
* For targets that run candidates themselves: :func:`executable_by` and :class:`Stage` (a read-only
  copy of what the sandbox user cannot reach), :func:`read_for_candidate` and
  :func:`size_for_candidate` (a file a candidate wrote, read with the candidate's rights).

Example:
    >>> from perftune.measure import Limits, Sandbox
    >>> sandbox = Sandbox(Limits(memory_mb=512))
"""

from __future__ import annotations

from perftune.measure._candidate_files import CandidateFileError, read_for_candidate, size_for_candidate
from perftune.measure._limits import Capabilities, Limits, capabilities, doctor
from perftune.measure._sandbox import Sandbox, Scratch, StepResult, executable_by
from perftune.measure._stage import Stage, StageError
from perftune.measure._timing import (
    Decision,
    MeasureResult,
    SpeedupCI,
    TimingSettings,
    compare,
    is_constant,
    measure_adaptively,
    speedup_ci,
)
from perftune.measure._verify import FEATURES, BudgetedVerifier, RiskModel

__all__ = [
    "FEATURES",
    "BudgetedVerifier",
    "CandidateFileError",
    "Capabilities",
    "Decision",
    "Limits",
    "MeasureResult",
    "RiskModel",
    "Sandbox",
    "Scratch",
    "SpeedupCI",
    "Stage",
    "StageError",
    "StepResult",
    "TimingSettings",
    "capabilities",
    "compare",
    "doctor",
    "executable_by",
    "is_constant",
    "measure_adaptively",
    "read_for_candidate",
    "size_for_candidate",
    "speedup_ci",
]
