"""Build a program with a set of compiler options, run it, check its output, and time it.

Each candidate is built and run in its own scratch directory through the sandbox of
:mod:`perftune.measure` (process group, timeout, cgroup/rlimit limits, namespaces where available;
the build keeps the user's identity so that it can read the user's headers, the run drops to an
unprivileged user when perftune runs as root). Builds may run in parallel (``--workers``); a timed run
has the machine to itself (a reader/writer lock: builds share it, a timed run waits for the builds in
flight and holds back new ones, and two timed runs never overlap), and is repeated adaptively with the
sequential test of :func:`perftune.measure.measure_adaptively` against the best so far.

Every candidate's output is checked against the -O2 build's: all of stdout (its SHA-256, whatever its
size) when the comparison is exact, its numbers within the tolerance otherwise; and stderr too, when the
-O2 build prints the same stderr twice. A binary that is
byte-identical to one already measured is not measured again (most flags leave most programs alone),
and an option the compiler rejected once is avoided from then on.

Example:
    >>> program = Program(sources=("prog.c",), run_args=("100",))  # doctest: +SKIP
    >>> ev = Evaluator(program, discover("gcc"), workdir="/tmp/x")  # doctest: +SKIP
    >>> ev.measure(["-O3", "-funroll-loops"]).value  # doctest: +SKIP
    0.21
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from perftune.errors import PerftuneError
from perftune.measure import Decision, Limits, Sandbox, TimingSettings, measure_adaptively
from perftune.targets.flags._compare import compare_outputs
from perftune.targets.flags._discover import CompilerInfo, cxx_sources, remember_rejected
from perftune.targets.flags._size import code_size
from perftune.trial import Status

__all__ = ["TIME_BUDGET_REACHED", "Measurement", "Program", "Evaluator", "link_args_for"]

TIME_BUDGET_REACHED = "time budget reached"
"""The reason of a step that the time budget (:attr:`Evaluator.time_left`) stopped (``"cancelled"``)."""

# The most of a run's stdout kept as text; beyond it only its SHA-256 is known (the sandbox hashes it all).
_STDOUT_KEPT_BYTES = 4 << 20
# What the sandbox keeps of stderr: its last 4 KiB.
_STDERR_KEPT_BYTES = 4096


def link_args_for(compiler: str, sources: Sequence[str], link_args: Sequence[str]) -> tuple[str, ...]:
    """``link_args``, with ``-lstdc++`` added when C++ sources are linked by a C driver (``gcc``, ``cc``).

    ``g++`` links the C++ runtime by itself; ``gcc`` compiles a ``.cpp`` file as C++ but links it as C,
    which fails on every use of the C++ library (``undefined reference to operator delete``).

    Example:
        >>> link_args_for("gcc", ["a.cpp"], ["-lm"]), link_args_for("g++", ["a.cpp"], ["-lm"])
        (('-lm', '-lstdc++'), ('-lm',))
    """
    out = tuple(link_args)
    driver = os.path.basename(compiler)
    if cxx_sources(sources) and "++" not in driver and "-lstdc++" not in out:
        out += ("-lstdc++",)
    return out


@dataclass(frozen=True)
class _Output:
    """What a run printed, as far as it can be compared (the sandbox keeps the head of a long stdout and
    the hash of all of it, and the last 4 KiB of stderr)."""

    stdout: str = ""
    stdout_sha256: str = ""
    stdout_truncated: bool = False
    stderr: str = ""


class _MachineShare:
    """Builds share the machine with each other; a timed run has it to itself.

    A reader/writer lock that favours the writer: a timed run waits for the builds in flight to end, and
    new builds wait while a timed run waits or runs, so that a candidate's timing is never slowed by
    another one's compiler.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._n_building = 0
        self._n_waiting_runs = 0
        self._running = False

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._running and not self._n_waiting_runs)
            self._n_building += 1
        try:
            yield
        finally:
            with self._cond:
                self._n_building -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        with self._cond:
            self._n_waiting_runs += 1
            try:
                self._cond.wait_for(lambda: not self._running and not self._n_building)
            finally:
                self._n_waiting_runs -= 1
            self._running = True
        try:
            yield
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()


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
        clock: ``"wall"`` (wall-clock time of a run) or ``"cpu"`` (user + system CPU time of the run and
            its children: steadier on a shared machine, but blind to parallelism and to waiting).

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
    clock: str = "wall"


@dataclass
class Measurement:
    """What one candidate's build and runs gave.

    Attributes:
        status: ``"ok"``, ``"compile-error"``, ``"compiler-crash"``, ``"rejected"``, ``"run-error"``,
            ``"timeout"``, ``"wrong-output"`` or ``"cancelled"`` (stopped by the time budget,
            :attr:`Evaluator.time_left`).
        value: Median run time in seconds when ``status == "ok"``.
        samples: The timed runs in seconds.
        reason: Why it failed.
        binary_hash: SHA-256 of the built binary (identical binaries share one measurement).
        cached: True when the measurement was reused from an identical binary.
        decision: How the sequential test against the incumbent ended (None for fixed repeats).
        size_bytes: Bytes of machine code of the built binary (:func:`code_size`), once it built.
    """

    status: str
    value: float | None = None
    samples: list[float] = field(default_factory=list)
    reason: str | None = None
    binary_hash: str | None = None
    cached: bool = False
    decision: Decision | None = None
    size_bytes: int | None = None

    @property
    def ok(self) -> bool:
        """True when the candidate built, ran and gave the reference output."""
        return self.status == "ok"

    @property
    def trial_status(self) -> Status:
        """The trial's status for the driver: ``status`` keeps the flags' own finer failure kinds."""
        return _TRIAL_STATUS.get(self.status, Status.FAILED)


_TRIAL_STATUS = {"ok": Status.OK, "timeout": Status.TIMEOUT, "cancelled": Status.CANCELLED}


_REJECTED_OPTION = re.compile(
    r"(?:unrecognized command[- ]line option|invalid --param (?:name|value)|"
    r"argument to '?(-[^' ]+)'? should be|invalid argument|not supported)[^'\"]*['\"‘]?([^'\"’]+)?",
)
_OPTION_IN_MESSAGE = re.compile(r"['‘\"](--param[= ]?[\w.-]+(?:=\S+?)?|-[fmO][\w.+=-]*)['’\"]")


class _RunFailed(Exception):
    def __init__(self, measurement: Measurement) -> None:
        super().__init__(measurement.reason)
        self.measurement = measurement


class Evaluator:
    """Builds, runs, checks and times candidates of one program.

    Args:
        program: The program.
        info: The compiler (from :func:`discover`).
        workdir: Where scratch directories go (the sandbox's default when None).
        timing: Repeats, tie threshold and confidence of the sequential timing test.
        memory_mb: Memory limit of one run (the build gets twice as much).

    Example:
        >>> ev = Evaluator(Program(sources=("prog.c",)), discover("gcc"))  # doctest: +SKIP
        >>> ev.set_reference(["-O2"]); ev.measure(["-O3"]).ok  # doctest: +SKIP
        True
    """

    def __init__(
        self,
        program: Program,
        info: CompilerInfo,
        *,
        workdir: str | None = None,
        timing: TimingSettings | None = None,
        memory_mb: int = 4096,
    ) -> None:
        self.program = program
        self.info = info
        self.timing = timing or TimingSettings(min_runs=2, max_runs=8, warmup_runs=0, first_runs=5, tie=0.01)
        if workdir is not None:
            os.makedirs(workdir, exist_ok=True)
        # The compiler is the user's own tool: it keeps the user's identity (headers stay readable) but
        # gets the limits, the timeout and a read-only file system outside its scratch directory.
        self.build_sandbox = Sandbox(
            Limits(memory_mb=2 * memory_mb, disk_mb=2048), drop_user=False, scratch_root=workdir
        )
        self.run_sandbox = Sandbox(Limits(memory_mb=memory_mb, disk_mb=1024), scratch_root=workdir)
        self.reference: str | None = None  # the -O2 build's stdout (its text)
        self._reference: _Output | None = None
        # Whether candidates' stderr is checked: the -O2 build printed the same stderr twice.
        self.check_stderr = False
        # One line each on what the output check cannot see (tune_flags puts them in its notes).
        self.warnings: list[str] = []
        self.best_s: float | None = None
        self.best_samples: list[float] | None = None
        self.baseline_s: float | None = None
        # The driver's clock of the time budget (Tuner.remaining_s, Countdown.remaining_s): no build
        # or run goes past what it has left (a step it cuts short is "cancelled", not a timeout of the
        # candidate). None, or a clock that answers None: no time budget.
        self.time_left: Callable[[], float | None] | None = None
        self.build_s: float | None = None  # wall time of the last successful build (for planning)
        self._machine = _MachineShare()
        self._state_lock = threading.Lock()
        self._by_hash: dict[str, Measurement] = {}
        self.n_builds = 0
        self.n_cache_hits = 0

    def _limit(self, limit_s: float) -> tuple[float, bool]:
        """The timeout of a step: ``limit_s``, or what is left of the time budget when that is less.

        Returns ``(timeout, cut)``; ``cut`` is True when the time budget, not ``limit_s``, sets it.
        """
        left = None if self.time_left is None else self.time_left()
        if left is None:
            return limit_s, False
        return (left, True) if left < limit_s else (limit_s, False)

    # ----------------------------------------------------------------- building

    def compile_command(self, options: Sequence[str], output: str = "prog") -> list[str]:
        """The full compiler command line for ``options``."""
        p = self.program
        return [self.info.path, *p.compile_args, *options, *p.sources, "-o", output, *p.link_args]

    def scratch(self) -> Any:
        """A fresh scratch directory (a context manager that removes it)."""
        return self.run_sandbox.scratch(prefix="flags-")

    def build(self, options: Sequence[str], scratch: Any) -> tuple[str | None, Measurement | None]:
        """Compile into ``scratch``; returns the binary path, or a failed measurement."""
        for opt in options:
            if opt in self.info.rejected:
                why = f"avoided {opt}: rejected earlier ({self.info.rejected[opt]})"
                return None, Measurement("rejected", reason=why)
        binary = os.path.join(os.fspath(scratch), "prog")
        cwd = os.path.abspath(self.program.cwd)
        sources = [os.path.join(cwd, s) for s in self.program.sources]
        p = self.program
        cmd = [self.info.path, *p.compile_args, *options, *sources, "-o", binary, *p.link_args]
        with self._machine.building():
            limit, cut = self._limit(p.compile_timeout_s)
            if limit <= 0:
                return None, Measurement("cancelled", reason=TIME_BUDGET_REACHED)
            started = time.monotonic()
            step = self.build_sandbox.run(cmd, scratch=scratch, cwd=cwd, timeout_s=limit)
        with self._state_lock:
            self.n_builds += 1
        if step.ok:
            self.build_s = time.monotonic() - started
            return binary, None
        if step.status is Status.TIMEOUT and cut:
            return None, Measurement("cancelled", reason=TIME_BUDGET_REACHED)
        if step.status is Status.TIMEOUT or step.limit_hit:
            return None, Measurement("compile-error", reason=f"compile: {step.reason}")
        text = step.stderr_tail
        if (
            "internal compiler error" in text
            or step.signal is not None
            or "Please submit a full bug report" in text
        ):
            line = next(
                (ln.strip() for ln in text.splitlines() if "internal compiler error" in ln), step.reason or ""
            )
            return None, Measurement("compiler-crash", reason=f"compiler crashed: {line[:300]}")
        offending = self._rejected_option(text, options)
        # The linker's own line says what is wrong ("cannot find -lfoo", "undefined reference to");
        # collect2's "ld returned 1 exit status" only that it failed.
        lines = [ln.strip() for ln in text.splitlines()
                 if "error" in ln or "cannot find" in ln or "undefined reference" in ln]
        first = next((ln for ln in lines if not ln.startswith("collect2:")), lines[0] if lines else
                     step.reason or "failed")
        if offending is not None:
            remember_rejected(self.info, offending, first[:200])
            return None, Measurement("rejected", reason=f"compiler rejected {offending}: {first[:300]}")
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

    def timed_runs(self) -> contextlib.AbstractContextManager[None]:
        """Hold the machine for timed runs: no build runs meanwhile, nor another timed run."""
        return self._machine.timing()

    def run_once(
        self, binary: str, scratch: Any, timeout_s: float | None = None
    ) -> tuple[float | None, str | None, _Output]:
        """Run ``binary`` once: ``(seconds or None, failure reason or None, what it printed)``."""
        limit, cut = self._limit(timeout_s if timeout_s is not None else self.program.run_timeout_s)
        if limit <= 0:
            return None, TIME_BUDGET_REACHED, _Output()
        step = self.run_sandbox.run(
            [binary, *self.program.run_args], scratch=scratch, cwd=self._run_cwd(), timeout_s=limit,
            stdout_max_bytes=_STDOUT_KEPT_BYTES,
        )
        out = _Output(step.text(), step.stdout_sha256, step.stdout_truncated, step.stderr_tail)
        if step.status is Status.TIMEOUT:
            return None, TIME_BUDGET_REACHED if cut else f"run timed out after {limit:.1f} s", out
        if not step.ok:
            return None, f"run failed: {step.reason}", out
        return (step.cpu_s if self.program.clock == "cpu" else step.wall_s), None, out

    def _run_cwd(self) -> str:
        """The directory runs start in: the program's, or a read-only copy of it when the user the
        runs are sandboxed as cannot reach it (root working in a 0700 folder)."""
        from perftune.measure import StageError

        try:
            return self.run_sandbox.reachable(self.program.cwd, needed=self.program.run_args)
        except StageError as error:
            raise PerftuneError(str(error)) from None

    def _timeout(self) -> float:
        # Hopeless candidates stop early: three times the best time so far (and at least a second).
        # The limit is wall-clock time: with the CPU clock, a busy machine stretches wall time far
        # beyond CPU time, so the factor is wider.
        if self.best_s is None:
            return self.program.run_timeout_s
        factor = 3.0 if self.program.clock == "wall" else 20.0
        return min(self.program.run_timeout_s, max(1.0, factor * self.best_s + 0.5))

    def measure(
        self,
        options: Sequence[str],
        *,
        n_runs: int | None = None,
        same_as: str | None = None,
        against: Sequence[float] | None = None,
    ) -> Measurement:
        """Build with ``options``, run, check the output against the reference, and time it.

        Args:
            options: Tuned compiler options (``-O3 -funroll-loops ...``).
            n_runs: Fixed number of timed runs (default: the sequential test against the best so far).
            same_as: A binary hash; a build that gives this very binary is not run again (its
                measurement comes back with ``value=None`` and ``cached=True``).
            against: Samples to run the sequential test against instead of the best so far.
        """
        with self.scratch() as scratch:
            binary, failure = self.build(options, scratch)
            if failure is not None:
                return failure
            assert binary is not None
            with open(binary, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            size = code_size(binary)
            if same_as is not None and digest == same_as:
                return Measurement("ok", binary_hash=digest, cached=True, size_bytes=size)
            if n_runs is None and against is None:
                with self._state_lock:
                    known = self._by_hash.get(digest)
                if known is not None:
                    with self._state_lock:
                        self.n_cache_hits += 1
                    return Measurement(
                        known.status, known.value, list(known.samples), known.reason, digest, cached=True,
                        size_bytes=size,
                    )
            try:
                result = self._time(binary, scratch, n_runs, against)
            except _RunFailed as failed:
                result = failed.measurement
            result.binary_hash = digest
            result.size_bytes = size
            if n_runs is None and against is None and result.trial_status is not Status.CANCELLED:
                with self._state_lock:
                    self._by_hash.setdefault(digest, result)
                    if (
                        result.ok
                        and result.value is not None
                        and (self.best_s is None or result.value < self.best_s)
                    ):
                        self.best_s = result.value
                        self.best_samples = list(result.samples)
            return result

    def _time(
        self, binary: str, scratch: Any, n_runs: int | None, against: Sequence[float] | None
    ) -> Measurement:
        checked = [False]

        def run_once() -> float:
            seconds, why, out = self.run_once(binary, scratch, self._timeout())
            if why == TIME_BUDGET_REACHED:
                raise _RunFailed(Measurement("cancelled", reason=why))
            if why is not None:
                status = "timeout" if "timed out" in why else "run-error"
                raise _RunFailed(
                    Measurement(status, reason=why if not checked[0] else f"{why} (on a repeat)")
                )
            if not checked[0]:
                diff = self.output_difference(out)
                if diff is not None:
                    raise _RunFailed(
                        Measurement("wrong-output", reason=f"output differs from the -O2 build: {diff}")
                    )
            checked[0] = True
            assert seconds is not None
            return seconds

        with self.timed_runs():
            if n_runs is not None:
                samples = [run_once() for _ in range(n_runs)]
                return Measurement("ok", value=statistics.median(samples), samples=samples)
            incumbent = list(against) if against is not None else self.best_samples
            outcome = measure_adaptively(run_once, incumbent, self.timing)
            m = Measurement("ok", value=statistics.median(outcome.samples), samples=list(outcome.samples))
            m.decision = outcome.decision
            return m

    def output_difference(self, out: _Output) -> str | None:
        """None when ``out`` (what a run printed: :meth:`run_once`) matches the reference output (or when
        there is no reference yet), else the first difference in one line."""
        if self._reference is None:
            return None
        return self._difference(self._reference, out, stderr=self.check_stderr)

    def _tolerant(self) -> bool:
        return self.program.rel_tol > 0 or self.program.abs_tol > 0

    def _difference(self, reference: _Output, out: _Output, *, stderr: bool) -> str | None:
        """None when ``out`` matches ``reference`` (stderr too when ``stderr``), else the first difference.

        Exact: all of stdout, by its SHA-256 (the sandbox hashes what it does not keep). With a tolerance:
        the numbers of stdout's text (which is all of it: a longer reference is refused beforehand).
        """
        p = self.program
        if not self._tolerant():
            if out.stdout_sha256 != reference.stdout_sha256:
                diff = compare_outputs(reference.stdout, out.stdout)
                if diff is not None:
                    return diff
                if reference.stdout_truncated or out.stdout_truncated:
                    return (f"stdout differs after its first {_STDOUT_KEPT_BYTES >> 20} MiB "
                            "(the SHA-256 of all of it differs)")
                return "stdout differs in white space"
        elif out.stdout_truncated:
            return (f"stdout is longer than {_STDOUT_KEPT_BYTES >> 20} MiB, the reference's "
                    f"{len(reference.stdout.encode())} bytes")
        else:
            diff = compare_outputs(reference.stdout, out.stdout, rel_tol=p.rel_tol, abs_tol=p.abs_tol)
            if diff is not None:
                return diff
        if stderr and out.stderr != reference.stderr:
            diff = compare_outputs(reference.stderr, out.stderr, rel_tol=p.rel_tol, abs_tol=p.abs_tol)
            if diff is not None or not self._tolerant():
                return f"stderr: {diff or 'differs in white space'}"
        return None

    def set_reference(self, options: Sequence[str]) -> None:
        """Build and run with ``options`` (the -O2 build) and keep its output as the reference.

        The run is repeated once: a program whose stdout changes from run to run cannot be checked. Its
        stderr is checked too when it is the same on both runs; what the check cannot see is said in
        :attr:`warnings` (one line each): a stderr that changes from run to run, one longer than 4 KiB,
        an -O2 build that prints nothing at all (only the exit code is checked then).

        Raises:
            PerftuneError: The program does not build, does not run, prints different stdout twice, or
                prints more than 4 MiB with a tolerance (which only the first 4 MiB could be checked by).
        """
        srcs = " ".join(self.program.sources)
        args = " ".join(self.program.run_args)
        with self.scratch() as scratch:
            binary, failure = self.build(options, scratch)
            if failure is not None:
                raise PerftuneError(f"{srcs} does not compile with {' '.join(options)}: {failure.reason}")
            assert binary is not None
            outputs = []
            for _ in range(2):
                _, why, out = self.run_once(binary, scratch)
                if why is not None:
                    raise PerftuneError(
                        f"the run of {srcs} {args} fails when built with {' '.join(options)}: {why}"
                    )
                outputs.append(out)
        first, second = outputs
        if self._tolerant() and first.stdout_truncated:
            raise PerftuneError(
                f"the output of {srcs} {args} is more than {_STDOUT_KEPT_BYTES >> 20} MiB: more than "
                f"{_STDOUT_KEPT_BYTES >> 20} MiB cannot be checked within a tolerance (rel_tol, abs_tol); "
                "print less, or compare exactly"
            )
        diff = self._difference(first, second, stderr=False)
        if diff is not None:
            raise PerftuneError(
                f"the output of {srcs} {args} changes from run to run ({diff}): "
                "it cannot be checked; print only deterministic results"
            )
        warnings = []
        long_stderr = len(first.stderr.encode()) >= _STDERR_KEPT_BYTES
        if self._difference(first, second, stderr=True) is not None:
            self.check_stderr = False
            warnings.append(f"the stderr of {srcs} {args} changes from run to run at -O2: only stdout is "
                            "checked")
        elif long_stderr and self._tolerant():
            self.check_stderr = False
            warnings.append(f"{srcs} {args} prints more than 4 KiB to stderr: with a tolerance, only stdout "
                            "is checked")
        else:
            self.check_stderr = True
            if long_stderr:
                warnings.append(f"{srcs} {args} prints more than 4 KiB to stderr: only its last 4 KiB are "
                                "checked")
        if not first.stdout and not first.stderr:
            warnings.append(f"{srcs} {args} prints nothing at -O2: nothing but the exit code of candidates "
                            "is checked")
        self.warnings = warnings
        self._reference = first
        self.reference = first.stdout

    def close(self) -> None:
        """Nothing to release (scratch directories are removed as candidates finish)."""
