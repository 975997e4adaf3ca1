"""Building and running runnable benchmarks: the -O0 reference and optimised modules."""

from __future__ import annotations

import functools
import math
import re
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from perftune.targets.llvm._datasets import Benchmark, _csmith_include
from perftune.targets.llvm._errors import LlvmError
from perftune.targets.llvm._tools import find_tool

__all__ = ["RunOutput", "build_module", "outputs_match", "reference_output", "run_executable", "runtime_s"]


@dataclass(frozen=True)
class RunOutput:
    """What a run of a program produced."""

    stdout: str
    returncode: int
    timed_out: bool = False
    elapsed_s: float = 0.0


def _compile_flags(bench: Benchmark) -> list[str]:
    if bench.uri.startswith("generator://csmith-v0/"):
        return ["-I", _csmith_include()]
    return []


def build_module(bitcode: Path, bench: Benchmark, exe: Path) -> None:
    """Links an (optimised) module into an executable without optimising its IR again.

    ``llc-14 -O2`` generates the code, ``clang-14`` links it.

    Raises:
        LlvmError: Code generation or linking failed.
    """
    obj = exe.with_suffix(".o")
    result = subprocess.run(
        [find_tool("llc"), "-O2", "-filetype=obj", "--relocation-model=pic", str(bitcode), "-o", str(obj)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise LlvmError(f"{bench.uri}: llc-14 failed: {_first_line(result.stderr)}")
    result = subprocess.run(
        [find_tool("clang"), str(obj), "-o", str(exe), *bench.link_flags],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise LlvmError(f"{bench.uri}: linking failed: {_first_line(result.stderr)}")


def run_executable(exe: Path, bench: Benchmark, *, timeout_s: float | None = None) -> RunOutput:
    """Runs a built benchmark once with its arguments and time limit (default: the benchmark's)."""
    start = time.perf_counter()
    limit = bench.run_timeout_s if timeout_s is None else timeout_s
    try:
        proc = subprocess.run([str(exe), *bench.run_args], capture_output=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return RunOutput("", -1, timed_out=True, elapsed_s=time.perf_counter() - start)
    return RunOutput(
        proc.stdout.decode(errors="replace"), proc.returncode, elapsed_s=time.perf_counter() - start
    )


@functools.lru_cache(maxsize=256)
def reference_output(bench: Benchmark) -> RunOutput:
    """Output of the program compiled from source at -O0 (cached per benchmark)."""
    if bench.source is None:
        raise LlvmError(f"{bench.uri}: not runnable (no C source)")
    with tempfile.TemporaryDirectory(prefix="perftune-ref-") as tmp:
        exe = Path(tmp) / "ref"
        result = subprocess.run(
            [
                find_tool("clang"),
                "-O0",
                "-w",
                *_compile_flags(bench),
                str(bench.source),
                "-o",
                str(exe),
                *bench.link_flags,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise LlvmError(f"{bench.uri}: building the -O0 reference failed: {_first_line(result.stderr)}")
        return run_executable(exe, bench)


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def outputs_match(expected: str, actual: str, *, rel_tol: float = 1e-9) -> bool:
    """Exact match, or the same text with floating-point numbers equal within ``rel_tol``.

    Optimisations may legally change the last bits of floating-point results (e.g. by
    contracting a multiply and an add); integers must match exactly.
    """
    if expected == actual:
        return True
    a_tokens, b_tokens = expected.split(), actual.split()
    if len(a_tokens) != len(b_tokens):
        return False
    for a, b in zip(a_tokens, b_tokens, strict=True):
        if a == b:
            continue
        if not (_NUMBER.fullmatch(a) and _NUMBER.fullmatch(b)) or (
            "." not in a + b and "e" not in (a + b).lower()
        ):
            return False
        if not math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=1e-12):
            return False
    return True


def runtime_s(bitcode: Path, bench: Benchmark, *, repeats: int = 3) -> float:
    """Median wall time of ``repeats`` runs of the module (built as in :func:`build_module`).

    Raises:
        LlvmError: The benchmark is not runnable, does not build, fails or times out.
    """
    if not bench.runnable:
        raise LlvmError(f"{bench.uri}: not runnable, no runtime")
    with tempfile.TemporaryDirectory(prefix="perftune-rt-") as tmp:
        exe = Path(tmp) / "prog"
        build_module(bitcode, bench, exe)
        times = []
        for _ in range(repeats):
            out = run_executable(exe, bench)
            if out.timed_out or out.returncode != 0:
                raise LlvmError(f"{bench.uri}: the program failed (exit status {out.returncode})")
            times.append(out.elapsed_s)
        return statistics.median(times)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"
