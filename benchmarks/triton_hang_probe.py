"""Diagnostic for the GPU machine: a timeline of the benchmark process while a tuning meets a faulting,
a hanging and a wrong configuration (tests/triton/test_triton_gpu.py).

A pytest plugin: it wraps the benchmark process's start, prepare, sample and kill and prints when each
began, how long it took and how it ended. Usage, at the repository root:
    PYTHONPATH=src:benchmarks python3 -m pytest tests/triton/test_triton_gpu.py -m gpu -k faulting -s \
        -p triton_hang_probe
"""

from __future__ import annotations

import time
from typing import Any

from perftune.targets.triton import _bench

T0 = time.perf_counter()


def _logged(name: str) -> None:
    original = getattr(_bench.BenchProcess, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter() - T0
        shown = [a if isinstance(a, str | int | float) else type(a).__name__ for a in args[:2]]
        try:
            out = original(self, *args, **kwargs)
        except Exception as exc:
            line = f"  {start:7.2f}+{time.perf_counter() - T0 - start:5.2f} s {name}{shown}: {exc}"
            print(line[:220], flush=True)
            raise
        print(f"  {start:7.2f}+{time.perf_counter() - T0 - start:5.2f} s {name}{shown}: ok", flush=True)
        return out

    setattr(_bench.BenchProcess, name, wrapper)


for _name in ("_start", "prepare", "sample", "kill"):
    _logged(_name)
