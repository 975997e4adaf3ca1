"""Replay recorded tuning data: benchmark-hub T1 spaces and T4 results as perftune problems.

A T1 file describes the tuning parameters and their ``Conditions``; those become a
:class:`perftune.space.Space` with constraints. A T4 file holds the measured results of (usually all)
configurations; the replay objective looks a configuration up instead of running it. A configuration
that satisfies the constraints but failed, or is missing from the T4 results, is a failed measurement
(a hidden constraint): the objective raises :class:`ReplayFailure` with the reason.

Any perftune run can be written back as a T4 file with :func:`export_t4` / :func:`export_run_t4`, so
that it can be compared with the autotuning-methodology tools.

Every file is read through a size cap, ``$PERFTUNE_INPUT_MAX_MB`` (default 512) MiB once
decompressed, and checked when it is loaded: a malformed file is one line naming it and the problem.

Kernel Tuner cache files (``*.kt.json(.gz)``) load with :func:`load_kt`, with a T1 file for their
restrictions, into the same kind of problem (``CompilationFailedConfig`` and the other failure strings
become failed measurements with that string as the reason; times are Kernel Tuner's milliseconds, and
an objective that is a rate, such as ``GFLOP/s``, is maximised: ``problem.goal``); :func:`export_kt` /
:func:`export_run_kt` write any run as a cache that ``kernel_tuner.tune_kernel(...,
simulation_mode=True, cache=...)`` replays, with its times in milliseconds.

Example:
    >>> import perftune
    >>> from perftune.targets import replay
    >>> problem = replay.load("data/benchmark_hub/convolution_milo.T1.json",
    ...                       "data/benchmark_hub/convolution_milo.A4000.T4.json.gz")  # doctest: +SKIP
    >>> result = perftune.tune(problem.objective, problem.space, budget=50, seed=1)  # doctest: +SKIP
    >>> result.best.value / problem.optimum  # doctest: +SKIP
    1.0
    >>> replay.export_t4(result.trials, "run.T4.json.gz", space=problem.space)  # doctest: +SKIP
"""

from __future__ import annotations

from perftune.targets.replay._export import export_run_t4, export_t4, t4_document
from perftune.targets.replay._ktcache import (
    KT_ERRORS,
    TIME_UNITS,
    export_kt,
    export_run_kt,
    kt_cache_document,
    load_kt,
)
from perftune.targets.replay._load import (
    INPUT_LIMIT_ENV,
    ReplayFailure,
    ReplayObjective,
    ReplayProblem,
    dev_problem_files,
    input_limit_bytes,
    load,
    read_json,
    space_from_t1,
)

__all__ = [
    "INPUT_LIMIT_ENV",
    "KT_ERRORS",
    "TIME_UNITS",
    "ReplayFailure",
    "ReplayObjective",
    "ReplayProblem",
    "dev_problem_files",
    "export_kt",
    "export_run_kt",
    "export_run_t4",
    "export_t4",
    "input_limit_bytes",
    "kt_cache_document",
    "load",
    "load_kt",
    "read_json",
    "space_from_t1",
    "t4_document",
]
