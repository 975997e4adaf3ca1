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
# Subpackages reached as attributes after a bare `import perftune` (`perftune.drive.ASHA(...)`, as the
# docs write them), imported on first use. The heavy ones with extras (torch, triton) are not here:
# they are imported by name.
_SUBPACKAGES = {"adapt", "choice", "drive", "measure", "online", "report", "search", "space", "store",
                "targets"}


def __getattr__(name: str) -> Any:
    # The driver pulls in numpy, SQLAlchemy and the techniques; keep `import perftune` fast.
    if name in _LAZY:
        from perftune import drive

        return getattr(drive, name)
    if name in _SUBPACKAGES:
        import importlib

        return importlib.import_module(f"perftune.{name}")
    raise AttributeError(f"module 'perftune' has no attribute {name!r}")
