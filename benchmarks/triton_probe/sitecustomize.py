"""Diagnostic for the GPU machine (benchmarks/results/gpu-smoke.md): with this folder first on PYTHONPATH,
every Python process (the pytest process, the benchmark process, the compile workers) prints to stderr
when each step of perftune.triton's measuring began, how long it took and how it ended, with its pid.
``PROBE_POOL0=1`` also runs without compile workers. Usage at the repository root:
    PYTHONPATH=benchmarks/triton_probe:src python3 -m pytest tests/triton/test_triton_gpu.py \
        -m gpu -k faulting -s
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

T0 = time.time()


def _say(text: str) -> None:
    sys.stderr.write(f"[probe {os.getpid()} {time.time() - T0:7.2f}] {text}\n")
    sys.stderr.flush()


def _wrap(owner: Any, name: str) -> None:
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        shown = [a if isinstance(a, str | int | float | tuple) else type(a).__name__ for a in args[1:3]]
        shown += [f"{k}={v}" for k, v in kwargs.items() if isinstance(v, int | str)][:4]
        meta = next((a for a in args if isinstance(a, dict) and "MODE" in a), None)
        start = time.perf_counter()
        try:
            out = original(*args, **kwargs)
        except BaseException as exc:
            _say(f"{owner.__name__}.{name}{shown} MODE={meta and meta.get('MODE')} raised after "
                 f"{time.perf_counter() - start:.2f} s: {type(exc).__name__}: {str(exc)[:160]}")
            raise
        _say(f"{owner.__name__}.{name}{shown} MODE={meta and meta.get('MODE')} ok in "
             f"{time.perf_counter() - start:.2f} s")
        return out

    setattr(owner, name, wrapper)


try:
    from perftune.targets.triton import _autotuner, _bench
except Exception as exc:  # noqa: BLE001
    _say(f"probe not installed: {exc}")
else:
    for _n in ("setup", "compile", "prepare", "_graph"):
        _wrap(_bench._Bench, _n)
    for _n in ("_start", "prepare", "kill"):
        _wrap(_bench.BenchProcess, _n)
    _wrap(_autotuner._Session, "_compiled")
    if os.environ.get("PROBE_POOL0"):
        _autotuner.n_compile_workers = lambda: 0  # type: ignore[assignment]
    _say("probe installed")
