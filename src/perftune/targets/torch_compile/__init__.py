"""torch.compile tuning: Inductor settings searched on the user's model and inputs, each in a fresh process.

* :func:`tune_compile` — search the settings, confirm the winner against plain ``torch.compile`` and
  ``mode="max-autotune"`` interleaved in one process, and return a :class:`CompileResult` with the
  settings, the compiled callable and the speedups with their confidence intervals.
* :func:`compile_space` — the space of Inductor settings for ``"cpu"`` or ``"cuda"`` on the installed torch.
* :func:`run_job` — compile, check and time ``torch.compile`` variants in a fresh process
  (:class:`Job`, :class:`TimingPlan`, :class:`VariantTiming`); a crash or hang is a status with a reason.
  The process starts from the caller's settings (:func:`caller_state`: Inductor and Dynamo config, CPU
  threads, matmul precision).

torch is imported lazily: importing this package does not import it. ``perftune.torch`` is the short name.

Example:
    >>> from perftune.targets.torch_compile import tolerance_of
    >>> tolerance_of("torch.float32")
    0.0001
"""

from __future__ import annotations

from perftune.targets.torch_compile._runner import (
    Job,
    TimingPlan,
    VariantTiming,
    caller_state,
    run_job,
    tolerance_of,
)
from perftune.targets.torch_compile._space import (
    KNOBS,
    KnobSpec,
    compile_space,
    inductor_default,
    mode_options,
    options_of,
)
from perftune.targets.torch_compile._tune import CompileResult, tune_compile

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
