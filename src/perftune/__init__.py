"""perftune: autotune programs, compilers and kernels.

Example:
    >>> import perftune
    >>> from perftune.space import Int, Space
    >>> space = Space({"x": Int(-10, 10)})
    >>> result = perftune.tune(lambda c: (c["x"] - 3) ** 2, space, budget=30, seed=1)  # doctest: +SKIP
    >>> result.best.config["x"]  # doctest: +SKIP
    3
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perftune._version import __version__
from perftune.errors import PerftuneError
from perftune.trial import Pruned, Status, Trial

if TYPE_CHECKING:
    from perftune.drive import Budget, Result, Tuner, tune

__all__ = ["Budget", "PerftuneError", "Pruned", "Result", "Status", "Trial", "Tuner", "__version__", "tune"]

_LAZY = {"Budget", "Result", "Tuner", "tune"}


def __getattr__(name: str) -> Any:
    # The driver pulls in numpy, SQLAlchemy and the techniques; keep `import perftune` fast.
    if name in _LAZY:
        from perftune import drive

        return getattr(drive, name)
    raise AttributeError(f"module 'perftune' has no attribute {name!r}")
