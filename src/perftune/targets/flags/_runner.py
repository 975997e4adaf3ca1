"""Thin adapter for running steps and comparing timings.

The flags target needs three things from the measuring layer: run a command in its own process group
with a wall-clock limit and resource limits, compare a program's output with a reference, and decide
whether one set of timings is faster than another with a confidence interval. This module keeps those
behind a small surface so that it can switch to :mod:`perftune.measure` (issue [2]) as it lands.

Example:
    >>> step = run_step(["true"], timeout_s=5)
    >>> step.ok
    True
"""

from __future__ import annotations

import math
import os
import re
import resource
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Step", "compare_outputs", "run_step", "speedup_ci"]

_MiB = 1024 * 1024


@dataclass
class Step:
    """Outcome of one command.

    Attributes:
        returncode: Exit status (negative: killed by that signal); None when it timed out.
        stdout: Standard output (text).
        stderr: Standard error (text).
        wall_s: Wall-clock seconds from start to exit.
        timed_out: True when the wall-clock limit killed it.
    """

    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 in time."""
        return self.returncode == 0 and not self.timed_out

    def why(self) -> str:
        """A short human-readable reason for a failed step."""
        if self.timed_out:
            return f"timed out after {self.wall_s:.1f} s"
        tail = _last_line(self.stderr)
        if self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"killed by {name}" + (f": {tail}" if tail else "")
        return f"exit code {self.returncode}" + (f": {tail}" if tail else "")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _limit_child(memory_mb: int | None) -> None:
    # Runs in the child between fork and exec: own session (so a timeout kills the whole group), no core
    # files, bounded address space.
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb is not None:
        limit = memory_mb * _MiB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_step(
    argv: Sequence[str],
    *,
    timeout_s: float,
    cwd: str | None = None,
    memory_mb: int | None = 4096,
    env: dict[str, str] | None = None,
) -> Step:
    """Run ``argv`` (no shell) in its own session; kill its whole process group at ``timeout_s``."""
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            preexec_fn=lambda: _limit_child(memory_mb),  # noqa: PLW1509 - no threads touch the child
        )
    except OSError as error:
        return Step(127, "", f"{argv[0]}: {error.strerror}", 0.0)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        wall = time.perf_counter() - start
        return Step(proc.returncode, out, err, wall)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        return Step(None, out or "", err or "", time.perf_counter() - start, timed_out=True)


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)\b", re.IGNORECASE)


def compare_outputs(reference: str, output: str, *, rel_tol: float = 0.0, abs_tol: float = 0.0) -> str | None:
    """None when ``output`` matches ``reference``, else a one-line description of the first difference.

    With both tolerances 0 the comparison is exact. Otherwise the texts are split into tokens; numbers
    must agree within ``max(rel_tol * |reference|, abs_tol)``, and everything else exactly.

    Example:
        >>> compare_outputs("x 1.0000001", "x 1.0", rel_tol=1e-6) is None
        True
        >>> compare_outputs("x 1", "x 2")
        "token 2: expected '1', got '2'"
    """
    if reference == output:
        return None
    ref_tokens, out_tokens = reference.split(), output.split()
    if len(ref_tokens) != len(out_tokens):
        return f"output has {len(out_tokens)} tokens, the reference has {len(ref_tokens)}"
    for i, (a, b) in enumerate(zip(ref_tokens, out_tokens, strict=True), start=1):
        if a == b:
            continue
        if (rel_tol > 0 or abs_tol > 0) and _NUMBER.fullmatch(a) and _NUMBER.fullmatch(b):
            x, y = float(a), float(b)
            if math.isnan(x) and math.isnan(y):
                continue
            if abs(x - y) <= max(rel_tol * abs(x), abs_tol):
                continue
            return f"token {i}: expected {a}, got {b} (beyond the tolerance)"
        return f"token {i}: expected {a!r}, got {b!r}"
    return None


def speedup_ci(
    baseline_s: Sequence[float], candidate_s: Sequence[float], *, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Speedup of ``candidate`` over ``baseline`` (ratio of medians) with a bootstrap confidence interval.

    Returns:
        ``(speedup, low, high)``; a speedup above 1 means the candidate is faster.

    Example:
        >>> s, lo, hi = speedup_ci([2.0, 2.1, 1.9, 2.0], [1.0, 1.05, 0.95, 1.0])
        >>> round(s, 2), lo > 1.5
        (2.0, True)
    """
    base = np.asarray(baseline_s, dtype=float)
    cand = np.asarray(candidate_s, dtype=float)
    point = float(np.median(base) / np.median(cand))
    if len(base) < 2 or len(cand) < 2:
        return point, point, point
    rng = np.random.default_rng(seed)
    n_boot = 2000
    b = np.median(rng.choice(base, size=(n_boot, len(base))), axis=1)
    c = np.median(rng.choice(cand, size=(n_boot, len(cand))), axis=1)
    ratios = b / c
    alpha = (1.0 - confidence) / 2
    return point, float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha))
