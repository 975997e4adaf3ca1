"""The bundled example programs of the flags target (C sources written for perftune).

Example:
    >>> sorted(bundled())[:2]
    ['fft', 'graph']
    >>> bundled()["matmul"].source.name
    'matmul.c'
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BundledProgram", "bundled"]

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class BundledProgram:
    """One bundled program: its source, its benchmark and test inputs, and its output tolerance."""

    name: str
    description: str
    source: Path
    args: tuple[str, ...]
    small_args: tuple[str, ...]
    rel_tol: float


def bundled() -> dict[str, BundledProgram]:
    """All bundled programs by name."""
    data = tomllib.loads((_HERE / "programs.toml").read_text())
    return {
        name: BundledProgram(
            name,
            t["description"],
            _HERE / t["source"],
            tuple(t["args"]),
            tuple(t["small_args"]),
            float(t["rel_tol"]),
        )
        for name, t in data.items()
    }
