"""User-facing errors of perftune.

Every exception derived from :class:`PerftuneError` describes a *user* mistake (bad input, bad
configuration, unreachable service). The CLI prints ``str(error)`` as one line, without a traceback.
Programming errors inside perftune stay ordinary Python exceptions.

Example:
    >>> from perftune.errors import SpaceError
    >>> raise SpaceError("Int(5, 1): empty range")  # doctest: +SKIP
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ExpressionError",
    "PerftuneError",
    "RunWarning",
    "SpaceError",
    "StoreError",
    "TaskError",
    "UnsatisfiableError",
]


class PerftuneError(Exception):
    """Base class of every error caused by user input; printed as one line by the CLI."""


class SpaceError(PerftuneError):
    """A parameter, space or constraint definition is wrong."""


class ExpressionError(SpaceError):
    """A constraint or ``when=`` expression cannot be parsed or names something unknown."""


class UnsatisfiableError(SpaceError):
    """No valid configuration could be found within a bounded effort."""


class StoreError(PerftuneError):
    """The results store cannot be opened, is incompatible, or lacks the requested run."""


class TaskError(PerftuneError):
    """A task file is malformed; the message names the file and the key or line."""


class BudgetError(PerftuneError):
    """A budget is empty or cannot be parsed."""


class RunWarning(UserWarning):
    """A run finished but its result is not what the caller likely expects (every trial failed)."""
