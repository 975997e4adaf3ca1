"""Tune a program's compiler flags end to end: check, seed, search, confirm, reduce, report.

1. Check the input before tuning: the compiler exists, the sources compile at -O2, the run succeeds at
   -O2 (its output becomes the reference), and every user seed names known options.
2. Search with :class:`perftune.Tuner` (the default configuration is plain ``-O3``, the baseline; -O2
   and the user's seeds come next). Builds run in parallel on ``workers`` threads; timed runs one at a
   time.
3. Confirm: re-measure the winner and -O3 interleaved and compute the speedup with a confidence
   interval; a winner that is not faster than -O3 is replaced by -O3, so the result is never worse.
4. Reduce the winner to a minimal flag set (groups of options whose removal is not shown to slow the
   program, timed interleaved with the current set, are dropped; identical binaries cost nothing), then
   measure each remaining option's contribution the same way.

Example:
    >>> result = tune_flags(["prog.c"], ["1000"], budget="60s")  # doctest: +SKIP
    >>> print(result.command_line)  # doctest: +SKIP
    gcc -O3 -march=native -funroll-loops prog.c -o prog -lm
"""

from __future__ import annotations

import hashlib
import math
import os
import shlex
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from perftune.drive import Budget, Countdown, Outcome, ThreadExecutor, Tuner, parse_budget
from perftune.errors import BudgetError, PerftuneError, TaskError
from perftune.measure import speedup_ci
from perftune.report import FinalAnswer, Improvement, record_final_answer
from perftune.targets.flags._discover import CompilerInfo, discover, language_of
from perftune.targets.flags._evaluate import (
    TIME_BUDGET_REACHED,
    Evaluator,
    Program,
    link_args_for,
)
from perftune.targets.flags._space import build_space, config_from_flags, render
from perftune.trial import Status

__all__ = ["FlagsResult", "reduce_flags", "tune_flags"]

# With a time budget, the steps after the search (confirmation against -O3, reduction, the final
# measurement) get this share of it; the search gets the rest, less the time the checks before it took.
FINAL_SHARE = 0.25
# The fewest interleaved runs of a candidate and of -O3 that a confirmation is worth doing with.
MIN_CONFIRM_RUNS = 3


@dataclass
class FlagsResult:
    """The outcome of :func:`tune_flags`.

    Attributes:
        flags: The minimal winning option set (what to put on the command line).
        winner_flags: The best option set of the search as confirmed against -O3 (before reduction).
        command_line: The full compiler command line with ``flags``.
        speedup: Speedup of ``flags`` over plain -O3 (ratio of median run times).
        ci: Confidence interval (95%) of ``speedup``.
        baseline_s: Median run time at -O3.
        tuned_s: Median run time with ``flags``.
        contributions: Each remaining option and the slowdown (fraction) when it alone is removed.
        n_trials: Trials measured by the search.
        failures: Trials that failed, by status (``compile-error``, ``wrong-output``, ...).
        history: ``(elapsed seconds, best speedup over -O3 so far)`` after each trial.
        trace: ``(elapsed seconds, median run time, options)`` at each new best of the search.
        run_id: The run in the store, when a store was given.
        fell_back: True when the search's winner was not faster than -O3 and -O3 was kept.
        compiler: The compiler's version line.
        reasons: Unused; kept for callers that read it.
        note: One line on why the result is not the best of the search (a fallback), or None.
        pareto: With ``goal="time,size"``: the search's Pareto front of run time against code size,
            ``{"flags": [...], "time_s": ..., "size_bytes": ...}`` fastest first (empty otherwise).
    """

    flags: list[str]
    winner_flags: list[str]
    command_line: str
    speedup: float
    ci: tuple[float, float]
    baseline_s: float
    tuned_s: float
    contributions: dict[str, float] = field(default_factory=dict)
    n_trials: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    history: list[tuple[float, float]] = field(default_factory=list)
    trace: list[tuple[float, float, list[str]]] = field(default_factory=list)
    run_id: int | None = None
    fell_back: bool = False
    compiler: str = ""
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_cancelled: int = 0
    note: str | None = None
    pareto: list[dict[str, Any]] = field(default_factory=list)

    @property
    def improvement(self) -> Improvement:
        """The speedup over -O3 as every view prints it (:class:`perftune.report.Improvement`)."""
        return Improvement(self.speedup, self.ci[0], self.ci[1], 0.95, baseline="-O3",
                           is_baseline=self.flags == ["-O3"])

    def final_answer(self) -> FinalAnswer:
        """What the run answered, as recorded in the store for ``show`` and ``report``."""
        # Its value is the final option set's, as measured against -O3: the best that runs, show, the report
        # and the dashboard print (not the search's best trial, which may not be the answer).
        return FinalAnswer(self.improvement, command_line=self.command_line, note=self.note,
                           config={"flags": list(self.flags)},
                           value=self.tuned_s if math.isfinite(self.tuned_s) else None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able summary (what ``perftune flags --json`` prints)."""
        improvement = self.improvement.to_json()
        return {
            "flags": self.flags,
            "command_line": self.command_line,
            # The digits of the printed line, so that text and JSON agree.
            "speedup_over_O3": improvement["estimate"],
            "speedup_ci95": [improvement["low"], improvement["high"]],
            "improvement": improvement,
            "note": self.note,
            "baseline_O3_s": round(self.baseline_s, 6),
            "tuned_s": round(self.tuned_s, 6),
            "winner_flags": self.winner_flags,
            "contributions": {k: round(v, 4) for k, v in self.contributions.items()},
            "n_trials": self.n_trials,
            "failures": self.failures,
            "fell_back_to_O3": self.fell_back,
            "compiler": self.compiler,
            "run_id": self.run_id,
            "n_cancelled": self.n_cancelled,
            "notes": self.notes,
            **({"pareto": self.pareto} if self.pareto else {}),
        }


def _as_budget(budget: str | int | float | Sequence[str | int | float] | None) -> Budget:
    """The driver's Budget for ``tune_flags``'s argument: None is 5 minutes, a whole float a count."""
    if budget is None or (isinstance(budget, list | tuple) and not budget):
        return Budget(seconds=300.0)
    items = list(budget) if isinstance(budget, list | tuple) else [budget]
    if any(isinstance(item, bool) for item in items):
        raise BudgetError(f"cannot parse budget {budget!r}: use a number of trials, or 90s, 10m, 1h")
    # Floats are trials, as they always were here (50.0 is 50 trials); strings may be in any case.
    texts = [str(int(item)) if isinstance(item, float) and item >= 1 else str(item).strip().lower()
             for item in items]
    return parse_budget(texts)


def _split_seed(seed: str | Sequence[str]) -> list[str]:
    """A seed's options: a string split as a shell would, or a list as it is.

    Raises:
        PerftuneError: A string a shell could not split (an unclosed quote).
    """
    if not isinstance(seed, str):
        return list(seed)
    try:
        return shlex.split(seed)
    except ValueError as error:
        raise PerftuneError(f"seed: {str(error).lower()} in {seed!r}") from None


def tune_flags(
    sources: Sequence[str],
    run_args: Sequence[str] | str = (),
    *,
    compiler: str = "gcc",
    budget: str | int | float | Sequence[str | int | float] | None = "5m",
    workers: int = 1,
    seeds: Sequence[str | Sequence[str]] = (),
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    link_args: Sequence[str] = ("-lm",),
    compile_args: Sequence[str] = (),
    cwd: str = ".",
    store: Any = None,
    seed: int | None = None,
    technique: str = "bandit",
    reduce: bool = True,
    confirm_runs: int = 10,
    n_finalists: int = 3,
    run_timeout_s: float = 60.0,
    clock: str = "wall",
    include_params: bool = True,
    heuristic_seeds: bool = True,
    workdir: str | None = None,
    info: CompilerInfo | None = None,
    on_trial: Callable[[int, float | None], None] | None = None,
    name: str | None = None,
    goal: str = "time",
    seeds_key: str | None = None,
    lag: int | None = None,
) -> FlagsResult:
    """Tune the compiler options of a C/C++ program for speed.

    Args:
        sources: Source files.
        run_args: Arguments of the program (a list, or a string split like a shell would).
        compiler: The compiler (name on PATH or path).
        budget: Trials (``200``) or wall time (``"90s"``, ``"5m"``). A wall-time budget covers the whole
            call: the checks before the search, the search (the driver's clock: candidates in flight
            when it runs out are cancelled) and the steps after it, which get :data:`FINAL_SHARE` of
            it and are cut down to fit (fewer confirmation runs, no reduction; said in ``notes``).
        workers: Candidates built in parallel.
        seeds: Option sets to try early (``"-O2 -funroll-loops"``); unknown options are an error.
        rel_tol: Relative tolerance for numbers in the output (floating-point programs).
        abs_tol: Absolute tolerance for numbers in the output.
        link_args: Options after the sources.
        compile_args: Untuned options before the tuned ones (``-I``, ``-D``).
        cwd: Directory the program runs in.
        store: A perftune store (or URL) to record the trials in.
        seed: Seed of the search.
        technique: Search technique (registered name).
        reduce: Reduce the winner to a minimal flag set.
        confirm_runs: Interleaved runs of winner and -O3 for the final comparison.
        n_finalists: The best option sets of the search that are confirmed against -O3.
        run_timeout_s: Upper limit of one run.
        clock: ``"wall"`` or ``"cpu"`` (user + system time; steadier on a busy machine, for programs
            that run on one thread).
        include_params: Tune ``--param``s as well.
        heuristic_seeds: Also seed ``-O3 -march=native`` (with and without ``-funroll-loops``) and
            ``-O2 -march=native`` when the machine offers ``native``.
        workdir: Scratch area (a temporary directory when None).
        info: Pre-discovered compiler information (default: :func:`discover`).
        on_trial: Called after each trial with ``(n_trials, best speedup over -O3 or None)``.
        name: Name of the run in the store (generated when None).
        goal: ``"time"`` (the fastest) or ``"time,size"``: also the smallest code (bytes of executable
            ELF sections, :func:`code_size`); the search then looks for the Pareto front of the two
            (``FlagsResult.pareto``), and the confirmation and the reduction are those of its fastest.
        seeds_key: Where ``seeds`` come from, for messages: a seed that names an unknown option is
            reported as ``{seeds_key}[i]: ...`` (a task file's ``FILE: key target.seeds``).
        lag: The search's lag (:class:`perftune.Tuner`; None: its default): a seeded run keeps at most
            ``lag + 1`` candidates in flight.

    Raises:
        PerftuneError: Missing compiler, sources not compiling or program not running at -O2, a seed
            naming an unknown option, a bad budget: one line, before tuning starts.
    """
    from perftune.trial import Status

    limit = _as_budget(budget)
    seconds = limit.seconds
    # The whole command's time budget, kept by the driver's clock: the checks, the search (whose own
    # share the Tuner keeps) and the steps after it all read it.
    command_clock = Countdown(seconds)
    if clock not in ("wall", "cpu"):
        raise PerftuneError(f"clock must be 'wall' or 'cpu', got {clock!r}")
    goals = [g.strip() for g in goal.split(",")] if isinstance(goal, str) else []
    if goals not in (["time"], ["time", "size"]):
        raise PerftuneError(f"goal must be 'time' or 'time,size', got {goal!r}")
    with_size = goals == ["time", "size"]
    if workers < 1:
        raise PerftuneError(f"workers must be at least 1, got {workers}")
    if isinstance(run_args, str):
        run_args = shlex.split(run_args)
    if not sources:
        raise PerftuneError("no source files given")
    for src in sources:
        path = os.path.join(cwd, src)
        if not os.path.isfile(path):
            raise PerftuneError(f"source file {src!r} not found")
    info = info or discover(compiler, language=language_of(compiler, sources))
    program = Program(
        sources=tuple(sources),
        run_args=tuple(run_args),
        link_args=link_args_for(compiler, sources, link_args),
        compile_args=tuple(compile_args),
        rel_tol=rel_tol,
        abs_tol=abs_tol,
        cwd=cwd,
        run_timeout_s=run_timeout_s,
        clock=clock,
    )
    evaluator = Evaluator(program, info, workdir=workdir)
    try:
        space = build_space(info, include_params=include_params)
        seed_configs = []
        for index, text in enumerate(seeds):
            try:
                seed_configs.append(config_from_flags(_split_seed(text), info, space))
            except PerftuneError as error:
                if seeds_key is None:
                    raise
                raise TaskError(f"{seeds_key}[{index}]: {str(error).removeprefix('seed: ')}") from None
        o2 = config_from_flags(["-O2"], info, space)
        # Seeds that often win on the machine at hand: the host's own ISA, with and without unrolling.
        extra = []
        if heuristic_seeds and "native" in info.march:
            for opts in (
                ["-O3", "-march=native"],
                ["-O3", "-march=native", "-funroll-loops"],
                ["-O2", "-march=native"],
            ):
                if all(info.flag(o) is not None for o in opts if o.startswith("-f")):
                    extra.append(config_from_flags(opts, info, space))
        evaluator.time_left = command_clock.remaining_s  # the checks before the search count too
        try:
            evaluator.set_reference(["-O2"])
        except PerftuneError:
            if command_clock.expired():
                raise PerftuneError(f"the {seconds:g} s budget ran out while checking the program at -O2 "
                                    "(a build and two runs): give a longer --budget") from None
            raise
        checks_s = command_clock.elapsed_s()
        # The search's share of the budget is the Tuner's: its clock ends the search, and every build
        # and run of a candidate is bounded by what that clock has left, so that nothing in flight
        # outlives it (the driver records those as cancelled).
        left = command_clock.remaining_s()
        search_s = None if left is None or seconds is None else max(0.001, left - FINAL_SHARE * seconds)
        tuner = Tuner(
            space,
            goal={"time": "min", "size": "min"} if with_size else "min",
            seed=seed,
            store=store,
            # With two objectives the bandit is the multi-objective one (docs/multiobjective.md).
            technique="mo-bandit" if with_size and technique == "bandit" else technique,
            seeds=[o2, *seed_configs, *extra],
            name=name,
            lag=lag,
            budget=Budget(evals=limit.evals, seconds=search_s),
            settings={
                "target": "flags",
                "sources": list(sources),
                "run": list(run_args),
                "compiler": info.version_line,
            },
        )
        evaluator.time_left = tuner.remaining_s
        search_clock = Countdown(None)
        history: list[tuple[float, float]] = []
        trace: list[tuple[float, float, list[str]]] = []
        finished: list[tuple[float, Any]] = []
        failures: dict[str, int] = {}
        baseline: list[float | None] = [None]
        best: list[tuple[float, Any] | None] = [None]
        # The -O3 trial and the fastest one so far: an interrupted run's answer (_record_interrupted).
        default_trial: list[Any] = [None]
        best_trial: list[Any] = [None]
        counts = {"done": 0}

        def evaluate(config: Any) -> Outcome:
            m = evaluator.measure(render(config, info))
            if m.ok:
                assert m.value is not None
                metrics = {"cached": float(m.cached)}
                if with_size and m.size_bytes is not None:
                    metrics.update(time=m.value, size=float(m.size_bytes))
                return Outcome(Status.OK, value=m.value, samples=list(m.samples), metrics=metrics)
            if m.trial_status is Status.CANCELLED:  # a step cut by the search's time budget
                return Outcome(Status.CANCELLED, reason=m.reason)
            return Outcome(m.trial_status, reason=f"{m.status}: {m.reason}")

        def record(trial: Any) -> None:
            if trial.status is Status.CANCELLED:
                return  # in flight when the search's time ran out: recorded by the driver, not counted
            if trial.ok:
                if trial.technique == "default":
                    baseline[0] = trial.value
                    evaluator.baseline_s = trial.value
                    default_trial[0] = trial
                finished.append((trial.value, trial.config))
                if best[0] is None or trial.value < best[0][0]:
                    best[0] = (trial.value, trial.config)
                    best_trial[0] = trial
                    trace.append((search_clock.elapsed_s(), trial.value, render(trial.config, info)))
            else:
                kind = (trial.reason or "").split(":", 1)[0]
                failures[kind] = failures.get(kind, 0) + 1
            counts["done"] += 1
            base = baseline[0]
            speed = base / best[0][0] if base is not None and best[0] is not None else None
            if speed is not None:
                history.append((search_clock.elapsed_s(), speed))
            if on_trial is not None:
                on_trial(counts["done"], speed)

        # Threads, not worker processes: every build and run is already a sandboxed subprocess, and
        # the evaluator's cache of binaries and its lock for timed runs are shared by all candidates.
        try:
            searched = tuner.run(evaluate, executor=ThreadExecutor(evaluate, None, workers), on_trial=record)
        except KeyboardInterrupt:
            _record_interrupted(tuner, evaluator, info, compiler, default_trial[0], best_trial[0])
            raise
        evaluator.time_left = command_clock.remaining_s  # the steps after the search: what is left
        n_done, n_cancelled = counts["done"], searched.counts().get(Status.CANCELLED.value, 0)

        # The few best option sets of the search go to the confirmation: under noise the single
        # best-measured one is often a lucky draw (the winner's curse).
        finalists: list[list[str]] = []
        for _, config in sorted(finished, key=lambda vc: vc[0]):
            flags = render(config, info)
            if flags != ["-O3"] and flags not in finalists:
                finalists.append(flags)
            if len(finalists) >= n_finalists:
                break
        notes: list[str] = list(evaluator.warnings)  # what the output check cannot see
        if n_done + n_cancelled == 0 and seconds is not None:
            notes.append(f"the checks before the search took {checks_s:.1f} s of the "
                         f"{seconds:g} s budget: no time was left to search")
        if n_cancelled:
            notes.append(f"{n_cancelled} candidate(s) in flight when the search's time ran out "
                         "were cancelled")
        try:
            result = _confirm_and_reduce(
                evaluator,
                info,
                finalists,
                reduce=reduce,
                confirm_runs=confirm_runs,
                compiler_name=compiler,
                search_speedup=history[-1][1] if history else None,
                notes=notes,
            )
        except KeyboardInterrupt:
            _record_interrupted(tuner, evaluator, info, compiler, default_trial[0], best_trial[0])
            raise
        result.notes = notes
        result.n_cancelled = n_cancelled
        result.n_trials = n_done
        result.failures = failures
        result.history = history
        result.trace = trace
        result.run_id = getattr(tuner, "run_id", None)
        if with_size:
            result.pareto = sorted(({"flags": render(t.config, info), "time_s": t.metrics["time"],
                                     "size_bytes": int(t.metrics["size"])} for t in searched.pareto),
                                   key=lambda p: (p["time_s"], p["size_bytes"]))
        # show and report print what the run answered, not the best of the search.
        record_final_answer(getattr(tuner, "_store", None), result.run_id, result.final_answer())
        return result
    finally:
        evaluator.close()


def _record_interrupted(tuner: Any, evaluator: Evaluator, info: CompilerInfo, compiler_name: str,
                        default_trial: Any, best_trial: Any) -> None:
    """Record an interrupted run's answer: the search's fastest option set, as flags and a command line
    (what a finished run records), against -O3 as the search measured them, said to be unconfirmed."""
    if best_trial is None:
        return
    flags = render(best_trial.config, info)
    improvement = None
    if default_trial is not None:
        base = list(default_trial.samples or [default_trial.value])
        cand = list(best_trial.samples or [best_trial.value])
        estimate, lo, hi = _speedup(base, cand) if flags != ["-O3"] else (1.0, 1.0, 1.0)
        improvement = Improvement(estimate, lo, hi, 0.95, baseline="-O3", is_baseline=flags == ["-O3"],
                                  interval=len(base) > 1 and len(cand) > 1)
    note = ("interrupted: the search's fastest option set as the search measured it, neither confirmed "
            "against -O3 nor reduced")
    answer = FinalAnswer(improvement, command_line=_command_line(evaluator, compiler_name, flags), note=note,
                         config={"flags": flags}, value=best_trial.value)
    record_final_answer(getattr(tuner, "_store", None), getattr(tuner, "run_id", None), answer)


def _command_line(evaluator: Evaluator, compiler_name: str, flags: Sequence[str]) -> str:
    """The compiler command line of ``flags``, which works pasted into any folder."""
    p = evaluator.program
    cmd = [
        _absolute_program(compiler_name),
        *_absolute_options(p.compile_args, p.cwd),
        *flags,
        *(os.path.abspath(os.path.join(p.cwd, src)) for src in p.sources),
        "-o",
        "prog",
        *_absolute_options(p.link_args, p.cwd),
    ]
    return shlex.join(cmd)


class _OutOfTime(Exception):
    """A step after the search was stopped by the time budget (the evaluator's ``time_left``)."""


def _interleaved(
    evaluator: Evaluator, a: Sequence[str], b: Sequence[str], n_runs: int
) -> tuple[list[float], list[float]]:
    """Time two option sets in alternation (drift in machine load hits both alike).

    Raises:
        _OutOfTime: The time budget stopped a build or a run.
    """
    ta: list[float] = []
    tb: list[float] = []
    with evaluator.scratch() as scratch_a, evaluator.scratch() as scratch_b:
        bin_a, fail_a = evaluator.build(list(a), scratch_a)
        bin_b, fail_b = evaluator.build(list(b), scratch_b)
        failed = fail_a or fail_b
        if failed is not None:
            if failed.trial_status is Status.CANCELLED:
                raise _OutOfTime(failed.reason)
            raise RuntimeError(f"confirmation build failed: {failed.reason}")
        assert bin_a is not None and bin_b is not None
        with evaluator.timed_runs():
            for _ in range(n_runs):
                for binary, scratch, sink in ((bin_a, scratch_a, ta), (bin_b, scratch_b, tb)):
                    seconds, why, _ = evaluator.run_once(binary, scratch)
                    if why == TIME_BUDGET_REACHED:
                        raise _OutOfTime(why)
                    if why is not None or seconds is None:
                        raise RuntimeError(f"confirmation run failed: {why}")
                    sink.append(seconds)
    return ta, tb


def _speedup(base_s: Sequence[float], cand_s: Sequence[float]) -> tuple[float, float, float]:
    ci = speedup_ci(base_s, cand_s)
    return ci.estimate, ci.lo, ci.hi


class _Plan:
    """What still fits in the time budget, from the run and build times seen so far."""

    def __init__(self, evaluator: Evaluator) -> None:
        self._evaluator = evaluator

    def left_s(self) -> float:
        clock = self._evaluator.time_left
        left = None if clock is None else clock()
        return float("inf") if left is None else left

    def _run_s(self) -> float:
        ev = self._evaluator
        # -O3 is the slower of a pair as a rule; a little more for starting each run in its sandbox.
        return (ev.baseline_s or ev.best_s or 1.0) + 0.05

    def _build_s(self) -> float:
        return self._evaluator.build_s or 1.0

    def pair_runs(self, wanted: int) -> int | None:
        """Interleaved runs of two option sets that fit (at most ``wanted``); None if too few fit."""
        left = self.left_s()
        if left == float("inf"):
            return wanted
        n = int((left - 2 * self._build_s()) / (2 * self._run_s()))
        return None if n < min(wanted, MIN_CONFIRM_RUNS) else min(wanted, n)

    def reduction_fits(self, n_options: int, runs: int, keep_s: float) -> bool:
        """Whether reducing ``n_options`` options fits and leaves ``keep_s``: at most ``3n + 3`` reduced
        sets and ``n + 1`` single options, each a build and ``runs`` interleaved pairs of runs."""
        cost = (4 * n_options + 4) * (self._build_s() + 2 * runs * self._run_s())
        return cost + keep_s <= self.left_s()

    def pair_s(self, runs: int) -> float:
        return 2 * self._build_s() + 2 * runs * self._run_s()


def _confirm_and_reduce(
    evaluator: Evaluator,
    info: CompilerInfo,
    finalists: list[list[str]],
    *,
    reduce: bool,
    confirm_runs: int,
    compiler_name: str = "gcc",
    notes: list[str] | None = None,
    search_speedup: float | None = None,
) -> FlagsResult:
    """Confirm the finalists against -O3, reduce the best confirmed one, and measure the result.

    Never worse than -O3: a finalist must beat -O3 in its interleaved confirmation to be kept; a
    reduced set that then measures slower than -O3 falls back to the unreduced winner, and that to -O3.
    Every fallback is said in the result's ``note``, with the numbers that caused it.

    With a time budget (the evaluator's ``time_left``, the driver's clock), every step is sized to fit
    what is left: fewer confirmation runs, fewer finalists, no reduction, and the confirmation's own
    samples instead of a final measurement; each cut is said in ``notes``. A finalist that could not
    be confirmed is not kept.
    """
    notes = [] if notes is None else notes
    plan = _Plan(evaluator)
    baseline = ["-O3"]
    winner: list[str] = list(baseline)
    best_estimate = 1.0
    best_confirmed: float | None = None
    confirmed: dict[tuple[str, ...], tuple[list[float], list[float]]] = {}
    for index, flags in enumerate(finalists):
        runs = plan.pair_runs(confirm_runs)
        try:
            if runs is None:
                raise _OutOfTime(TIME_BUDGET_REACHED)
            base_s, cand_s = _interleaved(evaluator, baseline, flags, runs)
        except _OutOfTime:
            notes.append(f"{len(finalists) - index} of {len(finalists)} finalist(s) not confirmed against "
                         "-O3: the time budget ran out")
            break
        if runs < confirm_runs:
            notes.append(f"{' '.join(flags)} confirmed against -O3 with {runs} runs each "
                         f"(of {confirm_runs}) to fit the time budget")
        confirmed[tuple(flags)] = (base_s, cand_s)
        estimate, _, _ = _speedup(base_s, cand_s)
        best_confirmed = estimate if best_confirmed is None else max(best_confirmed, estimate)
        if estimate > best_estimate:
            winner, best_estimate = list(flags), estimate
    fell_back = bool(finalists) and winner == baseline
    note: str | None = None
    if not finalists:
        note = "the search measured no working flag set other than -O3: the answer is -O3"
    elif fell_back and not confirmed:
        note = "no flag set could be confirmed against -O3 in the time budget: the answer is -O3"
    elif fell_back:
        searched = "" if search_speedup is None else f": {search_speedup:.3f}x in the search did not confirm"
        best = "" if best_confirmed is None else f" (best in the confirmation: {best_confirmed:.3f}x)"
        note = f"no flag set beat -O3 in the interleaved confirmation{searched}{best}"
    contributions: dict[str, float] = {}
    final = list(winner)
    if reduce and final != baseline:
        keep_s = plan.pair_s(min(confirm_runs, MIN_CONFIRM_RUNS))
        if not plan.reduction_fits(len(final), 6, keep_s):
            notes.append("the winner was not reduced to fewer options: not enough of the time budget left")
        else:
            reduced, contributions = reduce_flags(evaluator, final)
            if plan.left_s() <= 0:
                notes.append("the reduction of the winner was cut short by the time budget; "
                             "the winner is kept")
                contributions = {}
            else:
                final = reduced
                if final == baseline:
                    note = (f"the confirmed winner ({best_estimate:.3f}x in the confirmation) reduced to "
                            "plain -O3: none of its options made a difference beyond the noise")
    speed = lo = hi = 1.0
    fin_s: list[float] = []
    base_s = []
    for choice in [final, winner] if final != winner else [final]:
        if choice == baseline:
            break
        runs = plan.pair_runs(confirm_runs)
        try:
            if runs is None:
                raise _OutOfTime(TIME_BUDGET_REACHED)
            base_s, fin_s = _interleaved(evaluator, baseline, choice, runs)
        except _OutOfTime:
            # No time for a fresh measurement: the winner's confirmation stands for it.
            base_s, fin_s = confirmed[tuple(winner)]
            if choice is final and final != winner:
                notes.append("the reduced option set could not be measured in the time budget; "
                             "the unreduced winner is kept")
                final, contributions = list(winner), {}
            notes.append("the speedup is the confirmation's: no time left for a final measurement")
            speed, lo, hi = _speedup(base_s, fin_s)
            break
        speed, lo, hi = _speedup(base_s, fin_s)
        if speed >= 1.0:
            if choice is winner and final != winner:
                contributions = {}  # the reduced set lost its edge: the full winner stands
                note = "the reduced flag set measured slower than -O3: the unreduced winner is kept"
            final = list(choice)
            break
    else:
        note = (f"the winner ({best_estimate:.3f}x in the confirmation) measured slower than -O3 in the "
                f"final measurement ({speed:.3f}x): the answer is -O3")
        final, fell_back, contributions = list(baseline), True, {}
    if final == baseline:
        m = evaluator.measure(baseline, n_runs=max(2, confirm_runs // 2))
        if not m.samples:
            notes.append("-O3 was not measured again: the time budget ran out")
        base_s = m.samples or [evaluator.baseline_s if evaluator.baseline_s is not None else float("nan")]
        speed, lo, hi, fin_s = 1.0, 1.0, 1.0, base_s

    return FlagsResult(
        flags=final,
        winner_flags=list(winner),
        command_line=_command_line(evaluator, compiler_name, final),
        speedup=speed,
        ci=(lo, hi),
        baseline_s=statistics.median(base_s),
        tuned_s=statistics.median(fin_s),
        contributions=contributions,
        fell_back=fell_back,
        compiler=info.version_line,
        note=note,
    )


# Options whose argument is a path (joined, like -Iinclude, or the next word, like -I include).
_PATH_OPTIONS = ("-I", "-L", "-isystem", "-iquote", "-idirafter", "-include", "-imacros")


def _absolute_program(program: str) -> str:
    """A compiler named by a relative path (``./cc``) made absolute; a bare name stays a PATH lookup."""
    return os.path.abspath(program) if os.sep in program and not os.path.isabs(program) else program


def _absolute_options(options: Sequence[str], cwd: str) -> list[str]:
    """``options`` with relative path arguments made absolute against ``cwd``, so that the printed
    command line works pasted into any folder."""
    out: list[str] = []
    expect_path = False
    for opt in options:
        if expect_path:
            out.append(opt if os.path.isabs(opt) else os.path.abspath(os.path.join(cwd, opt)))
            expect_path = False
            continue
        if opt in _PATH_OPTIONS:
            out.append(opt)
            expect_path = True
            continue
        prefix = next((p for p in _PATH_OPTIONS if opt.startswith(p) and len(opt) > len(p)), None)
        if prefix is not None and not os.path.isabs(opt[len(prefix):]):
            out.append(prefix + os.path.abspath(os.path.join(cwd, opt[len(prefix):])))
        elif not opt.startswith("-") and not os.path.isabs(opt) and os.path.exists(os.path.join(cwd, opt)):
            out.append(os.path.abspath(os.path.join(cwd, opt)))  # an object file or library given by path
        else:
            out.append(opt)
    return out


def reduce_flags(
    evaluator: Evaluator, options: Sequence[str], *, runs: int = 6
) -> tuple[list[str], dict[str, float]]:
    """Drop the options whose removal does not make the program slower beyond the noise.

    Every reduced set is timed against the current one interleaved (``runs`` runs each, in alternating
    order, so that drift in the machine's load hits both alike); a group of options is kept only when the
    95% confidence interval of the slowdown without it lies above 1, i.e. when removing it is shown to be
    worse. The ``-O`` level is tried first (removing it means -O3); then groups of options, halving as in
    delta debugging, so that a winner with many irrelevant options is reduced with few builds. A build
    that gives the very same binary costs no runs; a set whose output differs from the reference, or that
    fails, is refused. Last, each remaining option is measured alone in the same way: one whose removal is
    not shown to be worse is dropped too, so that every option kept has the slowdown it is listed with.

    Returns:
        ``(minimal options, {option: slowdown fraction when it alone is removed; NaN when the output
        changes or the program fails without it})``.
    """
    level = options[0] if options and options[0].startswith("-O") else "-O3"
    rest = [o for o in options if not o.startswith("-O")]
    with evaluator.scratch() as current_scratch:
        current_binary, failure = evaluator.build([level, *rest], current_scratch)
        if failure is not None or current_binary is None:
            return list(options), {}

        def slowdown_without(opts: list[str]) -> float | None:
            """How much slower ``opts`` is than the current set when that is shown beyond the noise
            (NaN: its output differs or it fails), else None (it may replace the current set)."""
            with evaluator.scratch() as scratch:
                binary, failed = evaluator.build(opts, scratch)
                if failed is not None or binary is None:
                    return math.nan
                if _same_file(binary, current_binary):
                    return None  # the very same program: nothing to time
                reduced_s: list[float] = []
                current_s: list[float] = []
                with evaluator.timed_runs():
                    for i in range(2 * runs):
                        first = (i // 2 + i) % 2 == 0  # reduced, current / current, reduced / ...
                        which, where, sink = ((binary, scratch, reduced_s) if first
                                              else (current_binary, current_scratch, current_s))
                        seconds, why, out = evaluator.run_once(which, where)
                        if why is not None or seconds is None:
                            return math.nan
                        if which is binary and len(reduced_s) == 0 and evaluator.output_difference(out):
                            return math.nan
                        sink.append(seconds)
                worse = speedup_ci(reduced_s, current_s)  # the current set's speedup over the reduced one
                if worse.lo > 1.0:
                    return statistics.median(reduced_s) / statistics.median(current_s) - 1.0
                shutil.copyfile(binary, current_binary)  # the reduced set is the current one from now on
                return None

        kept = list(rest)
        if level != "-O3" and slowdown_without(["-O3", *kept]) is None:
            level = "-O3"

        def shrink(group: list[str]) -> None:
            nonlocal kept
            trial_keep = [o for o in kept if o not in group]
            if slowdown_without([level, *trial_keep]) is None:
                kept = trial_keep
                return
            if len(group) > 1:
                mid = len(group) // 2
                shrink(group[:mid])
                shrink(group[mid:])

        if kept:
            shrink(list(kept))
        # Each option left alone, in the final context: kept with its slowdown, or dropped after all.
        contributions: dict[str, float] = {}
        for opt in [level, *kept]:
            if opt == "-O3":
                continue
            without = ["-O3", *kept] if opt.startswith("-O") else [level, *(o for o in kept if o != opt)]
            slowdown = slowdown_without(without)
            if slowdown is None:
                if opt.startswith("-O"):
                    level = "-O3"
                else:
                    kept.remove(opt)
                continue
            contributions[opt] = slowdown
    return [level, *kept], contributions


def _same_file(a: str, b: str) -> bool:
    """Whether two built binaries are byte for byte the same."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return hashlib.sha256(fa.read()).digest() == hashlib.sha256(fb.read()).digest()
