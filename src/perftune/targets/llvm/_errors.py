"""Errors of the LLVM target."""

from __future__ import annotations

from perftune.errors import PerftuneError

__all__ = ["ActionError", "BenchmarkError", "LlvmError", "StepError", "ToolMissingError"]


class LlvmError(PerftuneError):
    """Something the LLVM target was asked to do cannot be done (user-level problem)."""


class ToolMissingError(LlvmError):
    """A needed program (clang-14, opt, csmith, a C++ compiler, llvm-config-14) is not installed."""


class BenchmarkError(LlvmError, ValueError):
    """A benchmark URI or file is unknown, or its IR does not parse."""


class ActionError(LlvmError, ValueError):
    """An action is not part of the action space."""


class StepError(LlvmError, RuntimeError):
    """A step was requested when the environment cannot take one (e.g. after the episode ended)."""
