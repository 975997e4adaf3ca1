"""Build a program with a set of compiler options, run it, check its output, and time it.

Each candidate is built in its own scratch directory. Builds may run in parallel (``--workers``);
timing runs are serialised by a lock so that two timed runs never share the machine. A binary that is
byte-identical to one already measured is not measured again (most flags leave most programs alone),
and an option the compiler rejected once is avoided from then on.

Example:
    >>> program = Program(sources=("prog.c",), run_args=("100",))  # doctest: +SKIP
    >>> ev = Evaluator(program, discover("gcc"), workdir="/tmp/x")  # doctest: +SKIP
    >>> ev.measure(["-O3", "-funroll-loops"]).value  # doctest: +SKIP
    0.21
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import statistics
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from perftune.errors import PerftuneError
from perftune.targets.flags._discover import CompilerInfo, remember_rejected
from perftune.targets.flags._runner import compare_outputs, run_step

__all__ = ["Measurement", "Program", "Evaluator"]


@dataclass(frozen=True)
class Program:
    """A program to tune: its sources, how to build and run it, and how to check its output.

    Attributes:
        sources: C/C++ source files (absolute or relative to ``cwd``).
        run_args: Arguments of the built program (no shell).
        link_args: Options after the sources (libraries), e.g. ``("-lm",)``.
        compile_args: Options that are not tuned (``-I``, ``-D``), before the tuned ones.
        rel_tol: Relative tolerance for numbers in the output (0: exact comparison).
        abs_tol: Absolute tolerance for numbers in the output.
        cwd: Directory the program runs in (inputs named in ``run_args`` are found there).
        run_timeout_s: Upper limit of one run; the actual limit follows the baseline's time.
        compile_timeout_s: Limit of one build.

    Example:
        >>> Program(sources=("a.c",), run_args=("10",)).link_args
        ('-lm',)
    """

    sources: tuple[str, ...]
    run_args: tuple[str, ...] = ()
    link_args: tuple[str, ...] = ("-lm",)
    compile_args: tuple[str, ...] = ()
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    cwd: str = "."
    run_timeout_s: float = 60.0
    compile_timeout_s: float = 120.0


@dataclass
class Measurement:
    """What one candidate's build and runs gave.

    Attributes:
        status: ``"ok"``, ``"compile-error"``, ``"compiler-crash"``, ``"rejected"``, ``"run-error"``,
            ``"timeout"`` or ``"wrong-output"``.
        value: Median run time in seconds when ``status == "ok"``.
        samples: The timed runs in seconds.
        reason: Why it failed.
        binary_hash: SHA-256 of the built binary (identical binaries share one measurement).
        cached: True when the measurement was reused from an identical binary.
    """

    status: str
    value: float | None = None
    samples: list[float] = field(default_factory=list)
    reason: str | None = None
    binary_hash: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        """True when the candidate built, ran and gave the reference output."""
        return self.status == "ok"


_REJECTED_OPTION = re.compile(
    r"(?:unrecognized command[- ]line option|invalid --param (?:name|value)|"
    r"argument to '?(-[^' ]+)'? should be|invalid argument|not supported)[^'\"]*['\"‘]?([^'\"’]+)?",
)
_OPTION_IN_MESSAGE = re.compile(r"['‘\"](--param[= ]?[\w.-]+(?:=\S+?)?|-[fmO][\w.+=-]*)['’\"]")


class Evaluator:
    """Builds, runs, checks and times candidates of one program.

    Args:
        program: The program.
        info: The compiler (from :func:`discover`).
        workdir: Where scratch directories go (a temporary directory when None).
        min_runs: Timed runs of a candidate that may beat the best so far.
        max_runs: Upper limit of timed runs of one candidate.
        memory_mb: Address-space limit of one run.
    """

    def __init__(
        self,
        program: Program,
        info: CompilerInfo,
        *,
        workdir: str | None = None,
        min_runs: int = 3,
        max_runs: int = 5,
        memory_mb: int | None = 4096,
    ) -> None:
        self.program = program
        self.info = info
        self._own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="perftune-flags-")
        os.makedirs(self.workdir, exist_ok=True)
        self.min_runs = min_runs
        self.max_runs = max_runs
        self.memory_mb = memory_mb
        self.reference: str | None = None
        self.best_s: float | None = None
        self.baseline_s: float | None = None
        self._time_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._by_hash: dict[str, Measurement] = {}
        self._counter = 0
        self.n_builds = 0
        self.n_cache_hits = 0

    # ----------------------------------------------------------------- building

    def compile_command(self, options: Sequence[str], output: str = "prog") -> list[str]:
        """The full compiler command line for ``options``."""
        return [
            self.info.path, *self.program.compile_args, *options, *self.program.sources, "-o", output,
            *self.program.link_args,
        ]

    def _scratch(self) -> str:
        with self._state_lock:
            self._counter += 1
            n = self._counter
        path = os.path.join(self.workdir, f"c{n:06d}")
        os.makedirs(path, exist_ok=True)
        return path

    def build(self, options: Sequence[str], scratch: str) -> tuple[str | None, Measurement | None]:
        """Compile into ``scratch``; returns the binary path, or a failed measurement."""
        for opt in options:
            if opt in self.info.rejected:
                return None, Measurement("rejected", reason=f"avoided {opt}: rejected earlier ({self.info.rejected[opt]})")
        binary = os.path.join(scratch, "prog")
        sources = [os.path.join(os.path.abspath(self.program.cwd), s) for s in self.program.sources]
        cmd = [self.info.path, *self.program.compile_args, *options, *sources, "-o", binary, *self.program.link_args]
        step = run_step(cmd, timeout_s=self.program.compile_timeout_s, cwd=scratch, memory_mb=None)
        with self._state_lock:
            self.n_builds += 1
        if step.timed_out:
            return None, Measurement("compile-error", reason=f"compile {step.why()}")
        if step.ok:
            return binary, None
        text = step.stderr
        if "internal compiler error" in text or (step.returncode is not None and step.returncode < 0) or (
            "Please submit a full bug report" in text
        ):
            line = next((ln.strip() for ln in text.splitlines() if "internal compiler error" in ln), step.why())
            return None, Measurement("compiler-crash", reason=f"compiler crashed: {line[:300]}")
        offending = self._rejected_option(text, options)
        if offending is not None:
            first = next((ln.strip() for ln in text.splitlines() if "error" in ln), step.why())
            remember_rejected(self.info, offending, first[:200])
            return None, Measurement("rejected", reason=f"compiler rejected {offending}: {first[:300]}")
        first = next((ln.strip() for ln in text.splitlines() if "error" in ln), step.why())
        return None, Measurement("compile-error", reason=f"compile failed: {first[:300]}")

    @staticmethod
    def _rejected_option(stderr: str, options: Sequence[str]) -> str | None:
        for line in stderr.splitlines():
            if "error" not in line or not _REJECTED_OPTION.search(line):
                continue
            for m in _OPTION_IN_MESSAGE.finditer(line):
                named = m.group(1)
                for opt in options:
                    if opt == named or opt.startswith(named) or named.startswith(opt.split("=")[0]):
                        return opt
            for opt in options:  # the message names the option without quotes
                if opt in line:
                    return opt
        return None

    # ----------------------------------------------------------------- running

    def run_once(self, binary: str, timeout_s: float | None = None) -> tuple[float | None, str | None, str]:
        """Run ``binary`` once: ``(seconds or None, failure reason or None, stdout)``."""
        limit = timeout_s if timeout_s is not None else self.program.run_timeout_s
        step = run_step([binary, *self.program.run_args], timeout_s=limit, cwd=os.path.abspath(self.program.cwd),
                        memory_mb=self.memory_mb)
        if step.timed_out:
            return None, f"run {step.why()}", step.stdout
        if not step.ok:
            return None, f"run failed: {step.why()}", step.stdout
        return step.wall_s, None, step.stdout

    def _timeout(self) -> float:
        # Hopeless candidates stop early: three times the best time so far (and at least a second).
        if self.best_s is None:
            return self.program.run_timeout_s
        return min(self.program.run_timeout_s, max(1.0, 3.0 * self.best_s + 0.5))

    def measure(
        self, options: Sequence[str], *, n_runs: int | None = None, keep: bool = False, same_as: str | None = None
    ) -> Measurement:
        """Build with ``options``, run, check the output against the reference, and time it.

        Args:
            options: Tuned compiler options (``-O3 -funroll-loops ...``).
            n_runs: Fixed number of timed runs (default: adaptive between min_runs and max_runs).
            keep: Keep the scratch directory (for inspection).
            same_as: A binary hash; a build that gives this very binary is not run again (its
                measurement comes back with ``value=None`` and ``cached=True``).
        """
        scratch = self._scratch()
        try:
            binary, failure = self.build(options, scratch)
            if failure is not None:
                return failure
            assert binary is not None
            with open(binary, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            if same_as is not None and digest == same_as:
                return Measurement("ok", binary_hash=digest, cached=True)
            if n_runs is None:
                with self._state_lock:
                    known = self._by_hash.get(digest)
                if known is not None:
                    with self._state_lock:
                        self.n_cache_hits += 1
                    return Measurement(known.status, known.value, list(known.samples), known.reason, digest, cached=True)
            result = self._time(binary, n_runs)
            result.binary_hash = digest
            if n_runs is None:
                with self._state_lock:
                    self._by_hash.setdefault(digest, result)
                    if result.ok and result.value is not None and (self.best_s is None or result.value < self.best_s):
                        self.best_s = result.value
            return result
        finally:
            if not keep:
                shutil.rmtree(scratch, ignore_errors=True)

    def _time(self, binary: str, n_runs: int | None) -> Measurement:
        with self._time_lock:
            seconds, why, out = self.run_once(binary, self._timeout())
            if why is not None:
                return Measurement("timeout" if "timed out" in why else "run-error", reason=why)
            if self.reference is not None:
                diff = compare_outputs(self.reference, out, rel_tol=self.program.rel_tol, abs_tol=self.program.abs_tol)
                if diff is not None:
                    return Measurement("wrong-output", reason=f"output differs from the -O2 build: {diff}")
            assert seconds is not None
            samples = [seconds]
            target = n_runs if n_runs is not None else self.min_runs
            # A candidate far slower than the best needs no further runs to be ranked.
            hopeless = n_runs is None and self.best_s is not None and seconds > 1.5 * self.best_s
            while not hopeless and len(samples) < target:
                s, why, _ = self.run_once(binary, self._timeout())
                if why is not None:
                    return Measurement("timeout" if "timed out" in why else "run-error", reason=f"{why} (on a repeat)")
                assert s is not None
                samples.append(s)
                if n_runs is None and len(samples) == target and target < self.max_runs and self.best_s is not None:
                    # Close to the best: measure more before ranking it.
                    if statistics.median(samples) < 1.03 * self.best_s:
                        target = self.max_runs
            return Measurement("ok", value=statistics.median(samples), samples=samples)

    def set_reference(self, options: Sequence[str]) -> None:
        """Build and run with ``options`` (the -O2 build) and keep its output as the reference.

        Raises:
            PerftuneError: The program does not build or does not run with these options.
        """
        scratch = self._scratch()
        try:
            binary, failure = self.build(options, scratch)
            srcs = " ".join(self.program.sources)
            if failure is not None:
                raise PerftuneError(f"{srcs} does not compile with {' '.join(options)}: {failure.reason}")
            assert binary is not None
            _, why, out = self.run_once(binary)
            if why is not None:
                args = " ".join(self.program.run_args)
                raise PerftuneError(f"the run of {srcs} {args!s} fails when built with {' '.join(options)}: {why}")
            self.reference = out
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def close(self) -> None:
        """Remove the scratch area when this evaluator created it."""
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
