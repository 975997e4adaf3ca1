"""The gcc flags target: tune a C/C++ program's optimisation flags, params, -O level and -march.

Flags, params and their ranges are discovered from the installed compiler and probed once per
compiler version (cached under ``~/.cache/perftune/flags``). The baseline is plain ``-O3``; -O2 and -O3
seed the search, every candidate's output is compared with the -O2 build's, and the winner is reduced
to a minimal flag set with each flag's contribution.

Example:
    >>> from perftune.targets.flags import tune_flags
    >>> result = tune_flags(["prog.c"], "1000", budget="2m", workers=2)  # doctest: +SKIP
    >>> result.command_line, round(result.speedup, 2)  # doctest: +SKIP
    ('gcc -O3 -march=native prog.c -o prog -lm', 1.21)
"""

from __future__ import annotations

from perftune.targets.flags._compare import compare_outputs
from perftune.targets.flags._discover import CompilerInfo, FlagInfo, ParamInfo, cache_dir, discover
from perftune.targets.flags._evaluate import Evaluator, Measurement, Program
from perftune.targets.flags._size import code_size
from perftune.targets.flags._space import build_space, config_from_flags, render
from perftune.targets.flags._task import FlagsTask, task_from_toml
from perftune.targets.flags._tune import FlagsResult, reduce_flags, tune_flags
from perftune.targets.flags.programs import BundledProgram, bundled

__all__ = [
    "BundledProgram",
    "CompilerInfo",
    "Evaluator",
    "FlagInfo",
    "FlagsResult",
    "FlagsTask",
    "Measurement",
    "ParamInfo",
    "Program",
    "build_space",
    "bundled",
    "cache_dir",
    "code_size",
    "compare_outputs",
    "config_from_flags",
    "discover",
    "reduce_flags",
    "render",
    "task_from_toml",
    "tune_flags",
]
