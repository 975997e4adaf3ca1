"""LLVM 14 pass ordering: CompilerGym-style Gymnasium environments, datasets and a pass-sequence tuner."""

from __future__ import annotations

from perftune.targets.llvm._actions import ACTIONS, COMPILERGYM_FLAGS, UNMAPPED, Action, action_index, pipeline_of
from perftune.targets.llvm._engine import Engine, EngineCrash, HelperEngine, OptEngine, make_engine
from perftune.targets.llvm._errors import ActionError, BenchmarkError, LlvmError, StepError, ToolMissingError

__all__ = [
    "ACTIONS",
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
    "StepError",
    "ToolMissingError",
    "action_index",
    "make_engine",
    "pipeline_of",
]
