"""torch.compile tuning in short: ``perftune.torch`` is :mod:`perftune.targets.torch_compile`.

This module imports no torch itself (torch loads when a function needs it). Inside perftune, ``import
torch`` always means PyTorch: imports are absolute, so this module never shadows it.

Example:
    >>> import perftune.torch
    >>> perftune.torch.tolerance_of("torch.bfloat16")
    0.02
"""

from __future__ import annotations

from perftune.targets.torch_compile import (
    KNOBS,
    CompileResult,
    Job,
    KnobSpec,
    TimingPlan,
    VariantTiming,
    caller_state,
    compile_space,
    inductor_default,
    mode_options,
    options_of,
    run_job,
    tolerance_of,
    tune_compile,
)

__all__ = [
    "KNOBS",
    "CompileResult",
    "Job",
    "KnobSpec",
    "TimingPlan",
    "VariantTiming",
    "caller_state",
    "compile_space",
    "inductor_default",
    "mode_options",
    "options_of",
    "run_job",
    "tolerance_of",
    "tune_compile",
]
