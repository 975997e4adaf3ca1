"""LLVM 14 pass ordering: CompilerGym-style Gymnasium environments, datasets and a pass-sequence tuner.

Parts:

- the action space (:data:`ACTIONS`, CompilerGym's passes on LLVM 14's new pass manager);
- engines that hold a module and apply passes (:class:`HelperEngine`, a persistent C++ process
  built on first use against the system libLLVM-14; :class:`OptEngine`, one ``opt`` per step);
- benchmarks (:func:`get_benchmark`: csmith, llvm-stress, bundled programs, your files);
- :class:`LlvmEnv`, the Gymnasium environment (``import perftune.gym`` registers its ids);
- :func:`tune_passes`, a pass-sequence search with perftune's ensemble (its space is one
  :class:`perftune.space.PassSequence`, re-exported here).

Example:
    >>> from perftune.targets.llvm import LlvmEnv
    >>> env = LlvmEnv(benchmark="generator://csmith-v0/1")  # doctest: +SKIP
    >>> obs, info = env.reset()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perftune.space import PassSequence
from perftune.targets.llvm._actions import (
    ACTIONS,
    COMPILERGYM_FLAGS,
    UNMAPPED,
    Action,
    action_index,
    pipeline_of,
)
from perftune.targets.llvm._cli import llvm_passes
from perftune.targets.llvm._datasets import (
    BUNDLED_PROGRAMS,
    Benchmark,
    bundled_uris,
    csmith_uris,
    get_benchmark,
)
from perftune.targets.llvm._engine import Engine, EngineCrash, HelperEngine, OptEngine, make_engine
from perftune.targets.llvm._errors import ActionError, BenchmarkError, LlvmError, StepError, ToolMissingError
from perftune.targets.llvm._taskfile import task_file_text

if TYPE_CHECKING:
    from perftune.targets.llvm._env import ActionSpace, LlvmEnv
    from perftune.targets.llvm._tune import PassTuneResult, tune_passes
    from perftune.targets.llvm._validate import ValidationResult

# gymnasium is an optional dependency: the environment is imported on first use.
_LAZY = {
    "ActionSpace": "perftune.targets.llvm._env",
    "LlvmEnv": "perftune.targets.llvm._env",
    "ValidationResult": "perftune.targets.llvm._validate",
    "PassTuneResult": "perftune.targets.llvm._tune",
    "tune_passes": "perftune.targets.llvm._tune",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perftune.targets.llvm' has no attribute {name!r}")


__all__ = [
    "ACTIONS",
    "BUNDLED_PROGRAMS",
    "Benchmark",
    "ActionSpace",
    "LlvmEnv",
    "PassTuneResult",
    "ValidationResult",
    "bundled_uris",
    "csmith_uris",
    "get_benchmark",
    "llvm_passes",
    "task_file_text",
    "tune_passes",
    "COMPILERGYM_FLAGS",
    "UNMAPPED",
    "Action",
    "ActionError",
    "BenchmarkError",
    "Engine",
    "EngineCrash",
    "HelperEngine",
    "LlvmError",
    "OptEngine",
    "PassSequence",
    "StepError",
    "ToolMissingError",
    "action_index",
    "make_engine",
    "pipeline_of",
]
