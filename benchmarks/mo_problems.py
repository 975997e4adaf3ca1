"""The problems of benchmarks/multiobjective.py, shared by perftune's side and Optuna's (no perftune import).

ZDT1-3 (Zitzler, Deb, Thiele 2000; 30 variables in [0, 1], two objectives), DTLZ2 (Deb et al. 2002;
12 variables, three objectives) and a measured table of gcc flags (time and code size of two bundled
programs over a reduced flag space, written by ``multiobjective.py --measure-flags``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
FLAGS_TABLE = os.path.join(HERE, "results", "multiobjective-flags-table.json")

#: The reduced flag space of the real target: an optimisation level and eight on/off flags.
LEVELS = ("-O1", "-O2", "-O3", "-Os")
FLAGS = ("-funroll-loops", "-finline-functions", "-ftree-vectorize", "-fomit-frame-pointer", "-fpeel-loops",
         "-fipa-cp-clone", "-fno-align-functions", "-fprefetch-loop-arrays")
#: The two bundled programs and their (reduced) inputs.
PROGRAMS = {"matmul": ("matmul.c", ["384", "3"]), "hashsort": ("hashsort.c", ["300000", "2"])}


@dataclass(frozen=True)
class Problem:
    """A minimisation problem: ``kind`` "float" (n variables in [0, 1]) or "flags" (a level and bits)."""

    name: str
    kind: str
    n_objectives: int
    reference: tuple[float, ...]
    evaluate: Callable[[dict[str, Any]], tuple[float, ...]]
    n_vars: int = 0


def _zdt(n: int, h: Callable[[float, float], float]) -> Callable[[dict[str, Any]], tuple[float, ...]]:
    def f(c: dict[str, Any]) -> tuple[float, ...]:
        x = [float(c[f"x{i}"]) for i in range(n)]
        g = 1.0 + 9.0 * sum(x[1:]) / (n - 1)
        return (x[0], g * h(x[0], g))

    return f


def _dtlz2(n: int, m: int) -> Callable[[dict[str, Any]], tuple[float, ...]]:
    def f(c: dict[str, Any]) -> tuple[float, ...]:
        x = [float(c[f"x{i}"]) for i in range(n)]
        g = sum((xi - 0.5) ** 2 for xi in x[m - 1:])
        out = []
        for i in range(m):
            v = 1.0 + g
            for xj in x[: m - 1 - i]:
                v *= math.cos(xj * math.pi / 2)
            if i > 0:
                v *= math.sin(x[m - 1 - i] * math.pi / 2)
            out.append(v)
        return tuple(out)

    return f


def flags_key(config: dict[str, Any]) -> str:
    """The table's key of a flags configuration: ``"-O2 -funroll-loops ..."`` (flags in FLAGS order)."""
    return " ".join([str(config["O"]), *(flag for flag in FLAGS if config[flag])])


def _flags(program: str) -> Callable[[dict[str, Any]], tuple[float, ...]]:
    table: dict[str, Any] = {}

    def f(c: dict[str, Any]) -> tuple[float, ...]:
        if not table:
            with open(FLAGS_TABLE) as fh:
                table.update(json.load(fh)["programs"][program])
        time_s, size = table[flags_key(c)]
        return (float(time_s), float(size))

    return f


def problems(names: Sequence[str] | None = None) -> list[Problem]:
    """The benchmark's problems (all of them, or those named)."""
    zdt_n = 30
    out = [
        Problem("zdt1", "float", 2, (1.1, 11.0), _zdt(zdt_n, lambda f1, g: 1 - math.sqrt(f1 / g)), zdt_n),
        Problem("zdt2", "float", 2, (1.1, 11.0), _zdt(zdt_n, lambda f1, g: 1 - (f1 / g) ** 2), zdt_n),
        Problem("zdt3", "float", 2, (1.1, 11.0),
                _zdt(zdt_n, lambda f1, g: 1 - math.sqrt(f1 / g) - (f1 / g) * math.sin(10 * math.pi * f1)),
                zdt_n),
        Problem("dtlz2", "float", 3, (2.5, 2.5, 2.5), _dtlz2(12, 3), 12),
    ]
    if os.path.exists(FLAGS_TABLE):
        with open(FLAGS_TABLE) as fh:
            refs = json.load(fh)["reference"]
        for program in [p for p in PROGRAMS if p in refs]:
            out.append(Problem(f"flags-{program}", "flags", 2, tuple(refs[program]), _flags(program)))
    return [p for p in out if names is None or p.name in names]
