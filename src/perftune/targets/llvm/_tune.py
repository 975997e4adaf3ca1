"""Pass-sequence search: perftune's ensemble, and CompilerGym's random and greedy baselines.

The perftune search has two phases. First the AUC-bandit ensemble of :mod:`perftune.search`
searches sequences of up to ``length`` passes (a
:class:`~perftune.space.PassSequence` parameter) through :class:`perftune.Tuner`,
starting from sequences shaped like LLVM's own -Oz pipeline, written with the action space. Then
a local search walks the single edits (insert, replace, delete, swap) of the ensemble's best,
cut down to the passes that matter (:func:`_local_search`).

Time is the driver's: the command starts one :class:`perftune.drive.Countdown`, and every phase
(the ensemble's Tuner budget, the local search, the greedy extension, the baselines, the validation
of the winner) runs on that clock or its share of it, with no clock of its own. A number budget
(``evals``) is the evaluator's: :attr:`SequenceEvaluator.max_evaluations` caps every evaluation,
whichever phase makes it.

Evaluations keep in-memory snapshots of the module after common prefixes (one every
``_SNAPSHOT_EVERY`` passes), so a sequence that differs from earlier ones only near its end
costs only its tail.

Baselines (as CompilerGym's examples and leaderboard define them):

- ``random``: episodes of uniformly random actions, each ending after ``patience`` actions
  without a new best in that episode; the best episode prefix wins;
- ``greedy``: at each step try every action and keep the one that reduces the instruction count
  most; stop when none does.

Example:
    >>> from perftune.targets.llvm import tune_passes
    >>> result = tune_passes("benchmark://perftune-v0/crc32", seconds=10)  # doctest: +SKIP
    >>> result.reward > 1.0, result.commandline  # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from perftune.drive import Countdown
from perftune.search import AUCBandit, BanditSettings
from perftune.targets.llvm._actions import ACTIONS, action_index, pipeline_of
from perftune.targets.llvm._datasets import Benchmark, get_benchmark
from perftune.targets.llvm._engine import Engine, EngineCrash, HelperEngine, PipelineError, make_engine
from perftune.targets.llvm._errors import LlvmError

__all__ = [
    "DEFAULT_LENGTH",
    "OZ_LIKE_SEQUENCE",
    "SEQUENCE_PORTFOLIO",
    "PassSequenceBandit",
    "PassTuneResult",
    "SequenceEvaluator",
    "SequenceTooSlow",
    "tune_passes",
]

#: LLVM 14's -Oz pipeline, approximated with the action space (flag names). Its passes run one
#: after another here, while -Oz interleaves inlining with per-function cleanup.
OZ_LIKE_SEQUENCE: tuple[str, ...] = (
    "-forceattrs",
    "-inferattrs",
    "-lower-expect",
    "-simplifycfg",
    "-sroa",
    "-early-cse",
    "-ipsccp",
    "-called-value-propagation",
    "-globalopt",
    "-mem2reg",
    "-deadargelim",
    "-instcombine",
    "-simplifycfg",
    "-inline",
    "-functionattrs",
    "-sroa",
    "-early-cse-memssa",
    "-speculative-execution",
    "-jump-threading",
    "-correlated-propagation",
    "-simplifycfg",
    "-instcombine",
    "-tailcallelim",
    "-simplifycfg",
    "-reassociate",
    "-loop-instsimplify",
    "-loop-simplifycfg",
    "-licm",
    "-loop-rotate",
    "-licm",
    "-simple-loop-unswitch",
    "-simplifycfg",
    "-instcombine",
    "-loop-idiom",
    "-indvars",
    "-loop-deletion",
    "-sroa",
    "-mldst-motion",
    "-gvn",
    "-sccp",
    "-bdce",
    "-instcombine",
    "-jump-threading",
    "-correlated-propagation",
    "-adce",
    "-memcpyopt",
    "-dse",
    "-licm",
    "-simplifycfg",
    "-instcombine",
    "-globalopt",
    "-globaldce",
    "-elim-avail-extern",
    "-rpo-functionattrs",
    "-float2int",
    "-lower-constant-intrinsics",
    "-loop-rotate",
    "-loop-deletion",
    "-loop-load-elim",
    "-instcombine",
    "-simplifycfg",
    "-instcombine",
    "-licm",
    "-alignment-from-assumptions",
    "-loop-sink",
    "-instsimplify",
    "-div-rem-pairs",
    "-simplifycfg",
    "-globaldce",
    "-constmerge",
)

#: Positions of the perftune search's sequence: room for the -Oz-like sequence twice.
DEFAULT_LENGTH = 160
_SNAPSHOT_EVERY = 6
_MAX_CANDIDATES = 8
_MAX_REPAIRS = 4
_MAX_SNAPSHOTS = 48
_NONE = "none"
# Share of the perftune search's time (and of its evaluations, when they are capped) that goes to
# the ensemble; the rest goes to the local search around the ensemble's best. (0.2 and 0.4 gave
# the same geomean on the 30 benchmarks of benchmarks/llvm.py at 20 s per benchmark.)
_ENSEMBLE_SHARE = 0.4
# An evaluation slower than _SLOW_FACTOR times the median of the last _SLOW_WINDOW ones (and than
# _SLOW_MIN_S) is stopped and told as a failed trial, once _SLOW_AFTER evaluations have run.
_SLOW_FACTOR = 5.0
_SLOW_MIN_S = 0.5
_SLOW_WINDOW = 50
_SLOW_AFTER = 4
#: The local search extends the ensemble's best greedily before anything else on modules of at
#: least this many instructions (before optimisation). There every evaluation is slow (30-90 ms
#: for a sequence; 600-1700 of them in 60 s), the walk covers little of its neighbourhood, and an
#: action appended at the end may be one it never reaches (csmith 4: ``attributor``, 3056 -> 2908
#: instructions at 60 s; csmith 20: 91 -> 80). On small modules the walk reaches the same moves
#: anyway, and starting it from the extended sequence gave raytrace (857 instructions) 430, 415 and
#: 421 with seeds 0-2 instead of 415, 415 and 420.
_EXTEND_FIRST = 5000


@dataclass
class PassTuneResult:
    """Outcome of :func:`tune_passes`.

    Attributes:
        benchmark: URI of the benchmark.
        search: ``"perftune"``, ``"random"`` or ``"greedy"``.
        actions: The best sequence found (action indices).
        count_start: Instruction count of the unoptimised module.
        count_result: Instruction count after ``actions``.
        count_oz: Instruction count after ``opt -Oz``.
        n_evaluations: Evaluations made, all that ``evals`` counts: instruction counts of a sequence
            (the search's, the removal of passes that do not help, the repairs), of one more pass
            (the greedy extension and search) or of one more action (random search). Validating
            candidates is not one of them.
        elapsed_s: Wall time of the search.
        validation: The replay check of the winning sequence, when requested.
    """

    benchmark: str
    search: str
    actions: list[int]
    count_start: int
    count_result: int
    count_oz: int
    n_evaluations: int
    elapsed_s: float
    validation: Any = None
    history: list[tuple[float, int]] = field(default_factory=list)  # (seconds, best count) improvements
    benchmark_path: str = ""
    compile_command: str | None = None
    n_removed: int = 0
    n_rejected: int = 0  # better candidates that failed validation
    rejections: list[str] = field(default_factory=list)  # why they failed, one line each
    notes: list[str] = field(default_factory=list)  # what the time budget cut short

    @property
    def reward(self) -> float:
        """CompilerGym's IrInstructionCountOz episode reward: (C0 - C) / max(C0 - C_Oz, 1)."""
        return (self.count_start - self.count_result) / max(self.count_start - self.count_oz, 1)

    @property
    def flags(self) -> list[str]:
        return [ACTIONS[i].flag for i in self.actions]

    @property
    def pipeline(self) -> str:
        return pipeline_of(self.actions) if self.actions else "verify"

    @property
    def commandline(self) -> str:
        if self.validation is not None:
            return str(self.validation.commandline)
        from perftune.targets.llvm._env import opt_commandline

        return opt_commandline(self.actions, self.benchmark_path)

    def to_json(self) -> dict[str, Any]:
        """The fields ``perftune llvm-passes --json`` prints."""
        validation = self.validation
        return {
            "benchmark": self.benchmark,
            "search": self.search,
            "pipeline": self.pipeline,
            "flags": self.flags,
            "commandline": self.commandline,
            "compile_command": self.compile_command,
            "instruction_count": {
                "start": self.count_start,
                "result": self.count_result,
                "oz": self.count_oz,
            },
            "reward_ir_instruction_count_oz": self.reward,
            "n_evaluations": self.n_evaluations,
            "elapsed_s": self.elapsed_s,
            "validated": None if validation is None else bool(validation.ok),
            "validation_errors": [] if validation is None else list(validation.errors),
            "rejected_candidates": self.n_rejected,
            "rejections": list(self.rejections),
            "notes": list(self.notes),
        }


class SequenceTooSlow(LlvmError):
    """An evaluation passed its time limit (:meth:`SequenceEvaluator.count`)."""


class EvaluationsSpent(LlvmError):
    """An evaluation was asked for past :attr:`SequenceEvaluator.max_evaluations`.

    The searches ask :meth:`SequenceEvaluator.left` first, so this is never raised by them: it only
    guards the cap.
    """


class SequenceEvaluator:
    """Instruction count after a pass sequence, reusing snapshots of common prefixes.

    Example:
        >>> ev = SequenceEvaluator(get_benchmark("benchmark://perftune-v0/crc32"))  # doctest: +SKIP
        >>> ev.count([action_index("-mem2reg"), action_index("-instcombine")])  # doctest: +SKIP
    """

    def __init__(self, bench: Benchmark, *, engine: str | Engine = "helper", timeout_s: float = 60.0) -> None:
        self.bench = bench
        self.engine = make_engine(engine, timeout_s=timeout_s) if isinstance(engine, str) else engine
        self.count_start = self.engine.load(bench.bitcode)
        self.count_oz = self.engine.trial("default<Oz>")
        self._snapshots: OrderedDict[tuple[int, ...], str] = OrderedDict()
        self._serial = 0
        self._fast = isinstance(self.engine, HelperEngine)
        self.n_evaluations = 0
        self.n_failed = 0
        self.best_count: int | None = None
        #: Cap on :attr:`n_evaluations` (None: no cap); :func:`tune_passes` sets it from ``evals``.
        self.max_evaluations: int | None = None
        #: Called after every evaluation (the command's progress line reads the counters above).
        self.on_evaluation: Callable[[], None] | None = None

    def left(self) -> int | None:
        """Evaluations left under :attr:`max_evaluations` (None when there is no cap)."""
        if self.max_evaluations is None:
            return None
        return max(0, self.max_evaluations - self.n_evaluations)

    def _spend(self) -> None:
        """Counts one evaluation, or raises EvaluationsSpent when the cap is reached."""
        if self.max_evaluations is not None and self.n_evaluations >= self.max_evaluations:
            raise EvaluationsSpent(f"no evaluation left: the cap is {self.max_evaluations}")
        self.n_evaluations += 1

    def record(self, count: int | None) -> None:
        """One evaluation ended, with its instruction count, or None when a pass failed."""
        if count is None:
            self.n_failed += 1
        elif self.best_count is None or count < self.best_count:
            self.best_count = count
        if self.on_evaluation is not None:
            self.on_evaluation()

    def count(self, actions: list[int] | tuple[int, ...], *, time_limit_s: float | None = None) -> int:
        """Instruction count after ``actions``; raises EngineCrash/PipelineError if a pass fails.

        With ``time_limit_s``, an evaluation still running after that many seconds raises
        :class:`SequenceTooSlow` between two passes (a single pass gets three times the limit
        before the engine is restarted): a pass that blows the module up makes every later pass
        slow, and one such sequence could eat a large part of a short search.

        Each call is one evaluation (:attr:`n_evaluations`); past :attr:`max_evaluations` it raises
        :class:`EvaluationsSpent` without evaluating.
        """
        self._spend()
        try:
            count = self._count(tuple(actions), time_limit_s)
        except Exception:
            self.record(None)
            raise
        self.record(count)
        return count

    def _count(self, seq: tuple[int, ...], time_limit_s: float | None) -> int:
        started = time.monotonic()
        start = 0
        count: int | None = None
        if self._fast:
            for length in range(len(seq) - len(seq) % _SNAPSHOT_EVERY, 0, -_SNAPSHOT_EVERY):
                name = self._snapshots.get(seq[:length])
                if name is not None:
                    self._snapshots.move_to_end(seq[:length])
                    try:
                        count = self.engine.mem_restore(name)  # type: ignore[attr-defined]
                    except EngineCrash:
                        self._snapshots.clear()
                        raise
                    start = length
                    break
        if count is None:
            count = self.engine.reset()
        try:
            for position in range(start, len(seq)):
                step_limit = None
                if time_limit_s is not None:
                    elapsed = time.monotonic() - started
                    if elapsed > time_limit_s:
                        raise SequenceTooSlow(
                            f"evaluation stopped after {elapsed:.2f} s (limit {time_limit_s:.2f} s) "
                            f"at pass {position} of {len(seq)}"
                        )
                    step_limit = 3.0 * time_limit_s
                count = self.engine.apply(ACTIONS[seq[position]].pipeline, timeout_s=step_limit)
                done = position + 1
                if self._fast and done % _SNAPSHOT_EVERY == 0 and seq[:done] not in self._snapshots:
                    self._remember(seq[:done])
        except EngineCrash:
            self._snapshots.clear()  # they died with the helper
            raise
        return count

    def _remember(self, prefix: tuple[int, ...]) -> None:
        self._serial += 1
        name = f"p{self._serial}"
        self.engine.mem_save(name)  # type: ignore[attr-defined]
        self._snapshots[prefix] = name
        while len(self._snapshots) > _MAX_SNAPSHOTS:
            _, old = self._snapshots.popitem(last=False)
            self.engine.mem_drop(old)  # type: ignore[attr-defined]

    def output_ok(self) -> bool:
        """Whether the current module, built and run, prints what the -O0 build prints.

        True when it cannot be checked (not runnable, or the -O0 build is too slow to run).
        """
        from perftune.targets.llvm._run import build_module, outputs_match, reference_output, run_executable

        if not self.bench.runnable:
            return True
        reference = reference_output(self.bench)
        if reference.timed_out or reference.returncode != 0:
            return True
        with tempfile.TemporaryDirectory(prefix="perftune-check-") as tmp:
            module = Path(tmp) / "module.bc"
            self.engine.write_bitcode(module)
            exe = Path(tmp) / "prog"
            try:
                build_module(module, self.bench, exe)
            except LlvmError:
                return False
            got = run_executable(
                exe, self.bench, timeout_s=max(self.bench.run_timeout_s, 5 * reference.elapsed_s)
            )
        return (
            not got.timed_out
            and got.returncode == reference.returncode
            and outputs_match(reference.stdout, got.stdout)
        )

    def trial(self, action: int, *, timeout_s: float | None = None) -> int:
        """Count after one more action on the current module, without keeping it (one evaluation)."""
        self._spend()
        try:
            count = self.engine.trial(ACTIONS[action].pipeline, timeout_s=timeout_s)
        except Exception as error:
            if isinstance(error, EngineCrash):
                self._snapshots.clear()  # they died with the helper
            self.record(None)
            raise
        self.record(count)
        return count

    def close(self) -> None:
        self.engine.close()


def _seed_sequences(length: int) -> list[tuple[str, ...]]:
    names = {a.name for a in ACTIONS}
    base = [a.lstrip("-") for a in OZ_LIKE_SEQUENCE if a.lstrip("-") in names]
    # Run as one flat sequence, the -Oz-like passes leave work behind that a second run finds
    # (-Oz interleaves inlining with per-function cleanup; a flat sequence cannot). The inliner
    # action's threshold suits speed, not size: it often grows programs with several call sites,
    # and on others it is what makes them small. So the first configurations are: the sequence
    # without the inliner twice, the whole sequence then the sequence without the inliner, and
    # each of the two alone (all cut to ``length``). On the 30 benchmarks of benchmarks/llvm.py
    # these four are worth a geomean reward of 1.050 before any search (the whole sequence alone
    # 0.987).
    no_inline = [a for a in base if a != "inline"]
    variants = [no_inline * 2, base + no_inline, base, no_inline]
    out: list[tuple[str, ...]] = []
    for v in variants:
        if tuple(v[:length]) not in out:
            out.append(tuple(v[:length]))
    return out


#: The ensemble used for pass sequences: the techniques of perftune's portfolio that work through
#: the parameter's own operators (mutation, crossover) rather than its vector encoding, plus one
#: vector technique. The default portfolio's "model" needs seconds per proposal on an 80-position
#: sequence, which a 60-second search cannot afford.
SEQUENCE_PORTFOLIO: tuple[str, ...] = ("annealing", "ga", "greedy-normal", "de")
SEQUENCE_TECHNIQUE = "pass-sequence-bandit"


def _register_sequence_technique() -> None:
    from perftune import search

    if SEQUENCE_TECHNIQUE not in search.names():
        search.register(PassSequenceBandit)


class PassSequenceBandit(AUCBandit):
    """perftune's AUC bandit over :data:`SEQUENCE_PORTFOLIO` (technique ``"pass-sequence-bandit"``)."""

    name: ClassVar[str] = SEQUENCE_TECHNIQUE

    def __init__(
        self, space: Any, *, seed: int | None = None, settings: BanditSettings | None = None
    ) -> None:
        super().__init__(space, seed=seed, settings=settings or BanditSettings(techniques=SEQUENCE_PORTFOLIO))


def _search_perftune(
    ev: SequenceEvaluator,
    search_s: float,
    length: int,
    seed: int,
    technique: str,
    max_evals: int | None,
    history: list[Any],
    clock: Countdown,
    check_output: bool = True,
    durations: list[float] | None = None,
    seeds_s: float | None = None,
) -> tuple[list[int], int]:
    """The ensemble's search: a plain ask/tell loop; the driver's budget ends it.

    Args:
        search_s: The ensemble's share of the time, in seconds from now.
        seeds_s: The seed sequences are measured within this longer limit (default ``search_s``),
            so that the local search that follows starts from the best of them at least.
        clock: The command's clock; improvements are recorded in ``history`` at its elapsed time.
    """
    from perftune.drive import Budget, Tuner
    from perftune.space import PassSequence, Space

    if technique == SEQUENCE_TECHNIQUE:
        _register_sequence_technique()
    seeds = _seed_sequences(length)
    space = Space({"passes": PassSequence([a.name for a in ACTIONS], max_length=length, default=seeds[0])})
    # Both limits count from the tuner's first ask(), which comes right away.
    seeds_budget = Budget(evals=max_evals, seconds=max(1e-3, search_s if seeds_s is None else seeds_s))
    tuner = Tuner(space, goal="min", seed=seed, technique=technique, seeds=[{"passes": s} for s in seeds[1:]],
                  budget=seeds_budget)
    best_count = ev.count_start
    best: list[int] = []
    durations = [] if durations is None else durations

    def measure(trial: Any) -> None:
        nonlocal best, best_count
        actions = [action_index(name) for name in trial.config["passes"]]
        started = time.time()
        try:
            count = _timed_count(ev, actions, durations)
        except (EngineCrash, PipelineError, SequenceTooSlow) as exc:
            tuner.tell(trial, error=str(exc), started_at=started, finished_at=time.time())
            return
        if count < best_count and check_output and not ev.output_ok():
            # Some passes miscompile; a count-only search would drift towards them. A new best
            # must still print what the -O0 build prints, or it is a failed trial.
            tuner.tell(trial, error="miscompiled: the program's output differs from its -O0 build",
                       started_at=started, finished_at=time.time())
            return
        tuner.tell(trial, float(count), started_at=started, finished_at=time.time())
        if count < best_count:
            best_count, best = count, actions
            history.append((clock.elapsed_s(), count, list(actions)))

    # The default and the seed sequences (and one more, as before) under the seeds' limit; then the
    # driver holds the search to its own share of the time.
    for _ in range(len(seeds) + 1):
        trial = tuner.ask()
        if trial is None:
            return best, best_count
        measure(trial)
    tuner.budget = Budget(evals=max_evals, seconds=max(1e-3, search_s))
    while (trial := tuner.ask()) is not None:
        measure(trial)
    return best, best_count


def _slow_limit(durations: list[float]) -> float | None:
    """Seconds after which an evaluation counts as too slow, from the evaluations so far."""
    if len(durations) < _SLOW_AFTER:
        return None
    return max(_SLOW_MIN_S, _SLOW_FACTOR * float(np.median(durations[-_SLOW_WINDOW:])))


def _timed_count(ev: SequenceEvaluator, actions: list[int], durations: list[float]) -> int:
    """``ev.count`` with the slow-evaluation limit derived from the evaluations so far."""
    limit = _slow_limit(durations)
    started = time.monotonic()
    try:
        return ev.count(actions, time_limit_s=limit)
    finally:
        durations.append(time.monotonic() - started)


def _edits(seq: list[int], rng: np.random.Generator) -> list[tuple[str, int, int]]:
    """Every single edit of SEQ (insert, replace, delete, adjacent swap), in random order."""
    n_actions = len(ACTIONS)
    moves = [("insert", p, a) for p in range(len(seq) + 1) for a in range(n_actions)]
    moves += [("replace", p, a) for p in range(len(seq)) for a in range(n_actions) if a != seq[p]]
    moves += [("delete", p, -1) for p in range(len(seq))]
    moves += [("swap", p, -1) for p in range(len(seq) - 1) if seq[p] != seq[p + 1]]
    order = rng.permutation(len(moves))
    return [moves[int(i)] for i in order]


def _apply_edit(seq: list[int], move: tuple[str, int, int]) -> list[int]:
    kind, p, a = move
    if kind == "insert":
        return seq[:p] + [a] + seq[p:]
    if kind == "replace":
        return seq[:p] + [a] + seq[p + 1 :]
    if kind == "delete":
        return seq[:p] + seq[p + 1 :]
    return seq[:p] + [seq[p + 1], seq[p]] + seq[p + 2 :]


def _affordable(ev: SequenceEvaluator, reserve: int = 0) -> bool:
    """Whether one more evaluation still leaves ``reserve`` of them under the evaluator's cap."""
    left = ev.left()
    return left is None or left > reserve


def _loads(ev: SequenceEvaluator, actions: list[int]) -> bool:
    """Makes ACTIONS' module the engine's current one (one evaluation); False if a pass fails."""
    try:
        ev.count(actions)
    except (EngineCrash, PipelineError):
        return False
    return True


@dataclass
class _Reduction:
    """How far :func:`_reduce` got on ``original``: what is left of it, and the next position to try."""

    original: tuple[int, ...]
    actions: list[int]
    count: int
    removed: int = 0
    position: int = -1  # the next position to try (they are tried last first); -1: all were tried
    loaded: bool = False  # the last evaluation of the latest call was of ``actions`` (the engine holds it)

    @property
    def todo(self) -> int:
        """Evaluations that finishing the reduction takes (one per position not tried yet)."""
        return self.position + 1


def _reduce(
    ev: SequenceEvaluator,
    actions: list[int],
    count: int,
    clock: Countdown,
    *,
    max_evals: int | None = None,
    resume: _Reduction | None = None,
) -> _Reduction:
    """Removes passes, last first, whose removal does not increase the instruction count.

    One evaluation per position tried, while ``clock`` lasts, ``max_evals`` allows and the evaluator
    has evaluations left; the removals found by then stand (each one kept or lowered the count of
    a sequence that was evaluated, so a reduction cut short is still a correct count, only a
    longer sequence). ``resume``, an earlier reduction of the same sequence, goes on from where it
    stopped (it is updated in place).
    """
    red = resume if resume is not None else _Reduction(
        tuple(actions), list(actions), count, position=len(actions) - 1
    )
    red.loaded = False
    n = 0
    while red.position >= 0 and not clock.expired() and (max_evals is None or n < max_evals):
        if not _affordable(ev):
            break
        candidate = red.actions[: red.position] + red.actions[red.position + 1 :]
        n += 1
        try:
            new: int | None = ev.count(candidate)
        except (EngineCrash, PipelineError):
            new = None
        if new is not None and new <= red.count:
            red.actions, red.count = candidate, new
            red.removed += 1
            red.loaded = True
        else:
            red.loaded = False
        red.position -= 1
    return red


def _local_search(
    ev: SequenceEvaluator,
    start: list[int],
    start_count: int,
    clock: Countdown,
    seed: int,
    max_evals: int | None,
    history: list[Any],
    check_output: bool,
    durations: list[float],
    reductions: dict[tuple[int, ...], _Reduction] | None = None,
) -> tuple[list[int], int]:
    """First-improvement local search over single edits of the (shortened) best sequence.

    The ensemble's best sequence is first cut down to the passes that matter (the ones whose
    removal would raise the count), which leaves 10 to 30 passes; its neighbourhood (every
    insertion, replacement, deletion and adjacent swap, about 240 per position) is then small
    enough to walk, and short sequences are cheap to evaluate. Moves are tried in random order;
    the first one that lowers the count (or keeps it with fewer passes) is taken and the
    neighbourhood of the new sequence is walked. At a local optimum with a new best (and, on large
    modules, before all this: :data:`_EXTEND_FIRST`), the best sequence is extended
    greedily (:func:`_extend_greedily`). When a whole neighbourhood brings nothing, the search
    restarts from the best sequence with two random edits.

    It runs until ``clock`` (the driver's :class:`~perftune.drive.Countdown`, the search's share of
    the budget) has expired, or ``max_evals`` evaluations have been made (all of them: the
    reduction, the walk, the extensions and the kicks), or, under the evaluator's cap
    (:attr:`SequenceEvaluator.max_evaluations`), when one more evaluation would leave fewer than
    the final reduction of the best sequence takes (:func:`tune_passes` reduces its answer). The
    reduction of the start is recorded in ``reductions`` (by the start), for that final step to
    go on from.
    """
    rng = np.random.default_rng(seed + 7919)
    reductions = {} if reductions is None else reductions
    best, best_count = list(start), start_count
    begun = ev.n_evaluations

    def own_left() -> int | None:
        return None if max_evals is None else max(0, max_evals - (ev.n_evaluations - begun))

    def reserve(seq: list[int]) -> int:
        """Evaluations the final reduction of SEQ would take."""
        known = reductions.get(tuple(seq))
        return len(seq) if known is None else known.todo

    def room() -> bool:
        left = own_left()
        return (left is None or left > 0) and _affordable(ev, reserve(best))

    if ev.count_start >= _EXTEND_FIRST:
        # Large modules: every evaluation is slow and the walk covers little of the neighbourhood;
        # the greedy extension first, which costs one pass per candidate.
        extended = _extend_greedily(
            ev, best, best_count, clock, own_left(), history, check_output, durations, reserve=reserve
        )
        best, best_count = extended.actions, extended.count
    reduction = _reduce(ev, best, best_count, clock, max_evals=own_left())
    reductions[tuple(best)] = reduction
    current, current_count = list(reduction.actions), reduction.count
    if current_count < best_count:  # a removal lowered the count: a new best, if it runs right
        runs_right = True
        if check_output:
            if not reduction.loaded:  # the engine must hold the sequence to build it
                left = own_left()
                runs_right = (left is None or left > 0) and _affordable(ev) and _loads(ev, current)
            runs_right = runs_right and ev.output_ok()
        if runs_right:
            best, best_count = list(current), current_count
            history.append((clock.elapsed_s(), best_count, list(best)))
        else:
            # Miscompiled (or not checked: no evaluation left): the answer must not be this reduction.
            reductions[tuple(best)] = _Reduction(tuple(best), list(best), best_count)
            current, current_count = list(best), best_count
    extended_from = tuple(best)  # the extension of this best has been tried (or is equivalent)
    rejected: set[tuple[int, ...]] = set()
    while not clock.expired() and room():
        improved = False
        for move in _edits(current, rng):
            if clock.expired() or not room():
                break
            candidate = _apply_edit(current, move)
            if tuple(candidate) in rejected:
                continue
            try:
                count = _timed_count(ev, candidate, durations)
            except (EngineCrash, PipelineError, SequenceTooSlow):
                continue
            if count > current_count or (count == current_count and len(candidate) >= len(current)):
                continue
            if count < best_count and check_output and not ev.output_ok():
                rejected.add(tuple(candidate))  # miscompiled: never the new best
                continue
            current, current_count = candidate, count
            if count < best_count:
                best, best_count = list(candidate), count
                history.append((clock.elapsed_s(), count, list(candidate)))
            improved = True
            break
        if not improved and not clock.expired() and room():
            # A local optimum. First try to extend the best sequence pass by pass (cheap: one pass
            # per candidate); when that brings nothing, kick the best sequence with two random
            # edits and walk on from there.
            if tuple(best) != extended_from:
                extended = _extend_greedily(
                    ev, best, best_count, clock, own_left(), history, check_output, durations, reserve=reserve
                )
                extended_from = tuple(best)
                if extended.count < best_count:
                    best, best_count = extended.actions, extended.count
                    current, current_count = list(best), best_count
                    extended_from = tuple(best)
                    continue
                if not room():
                    break
            kicked = list(best)
            for _ in range(2):
                edits = _edits(kicked, rng)
                kicked = _apply_edit(kicked, edits[0])
            try:
                current, current_count = kicked, _timed_count(ev, kicked, durations)
            except (EngineCrash, PipelineError, SequenceTooSlow):
                current, current_count = list(best), best_count
    return best, best_count


@dataclass
class _Extension:
    actions: list[int]
    count: int
    n_evaluated: int


def _extend_greedily(
    ev: SequenceEvaluator,
    start: list[int],
    start_count: int,
    clock: Countdown,
    max_evals: int | None,
    history: list[Any],
    check_output: bool,
    durations: list[float],
    *,
    reserve: Callable[[list[int]], int] | None = None,
) -> _Extension:
    """Appends to START, one pass at a time, the action that lowers the count most (CompilerGym's
    greedy search, but from START's module instead of the unoptimised one).

    Each candidate costs one pass on the module that START leaves, so a step is cheap even where
    whole sequences are expensive: on 10k-instruction modules the local search's neighbourhood
    is far too large to walk in a minute, and an action appended at the end (csmith 4:
    ``attributor``, -118 instructions) may be among the moves it never reaches. Stops at the
    first step without improvement, when ``clock`` has expired, when ``max_evals`` evaluations
    are spent (the rebuilds of the module count) or one more would leave fewer than
    ``reserve(sequence so far)`` under the evaluator's cap, or when an improvement miscompiles.
    """
    seq, count = list(start), start_count
    begun = ev.n_evaluations

    def used() -> int:
        return ev.n_evaluations - begun

    def room() -> bool:
        if max_evals is not None and used() >= max_evals:
            return False
        return _affordable(ev, 0 if reserve is None else reserve(seq))

    if not room():
        return _Extension(seq, count, 0)
    try:
        ev.count(seq)
    except (EngineCrash, PipelineError, SequenceTooSlow):
        return _Extension(seq, count, used())
    # One pass gets what a single pass of a whole sequence gets (see SequenceEvaluator.count).
    sequence_limit = _slow_limit(durations)
    limit = None if sequence_limit is None else 3.0 * sequence_limit
    while not clock.expired() and room():
        best_action, best_count = None, count
        for action in range(len(ACTIONS)):
            if clock.expired() or not room():
                break
            try:
                trial_count = ev.trial(action, timeout_s=limit)
            except (EngineCrash, PipelineError):
                if not room():
                    return _Extension(seq, count, used())  # no evaluation left to rebuild the module
                try:
                    ev.count(seq)  # the engine restarted: rebuild the module
                except (EngineCrash, PipelineError):
                    return _Extension(seq, count, used())  # what was appended so far stands
                continue
            if trial_count < best_count:
                best_action, best_count = action, trial_count
        if best_action is None:
            break
        try:
            new_count = ev.engine.apply(ACTIONS[best_action].pipeline)  # known: its trial was counted
        except (EngineCrash, PipelineError):
            break
        if check_output and not ev.output_ok():
            break  # the cheapest next step miscompiles: leave it to the local search's checks
        seq, count = [*seq, best_action], new_count
        history.append((clock.elapsed_s(), count, list(seq)))
    return _Extension(seq, count, used())


def _search_random(
    ev: SequenceEvaluator,
    clock: Countdown,
    seed: int,
    patience: int,
    max_evals: int | None,
    history: list[Any],
) -> list[int]:
    """CompilerGym's random search: episodes of random actions until ``clock`` or ``max_evals`` (or
    the evaluator's cap) runs out. Each action is one evaluation (the count of the episode so far)."""
    rng = np.random.default_rng(seed)
    best_count, best = ev.count_start, []
    n = 0

    def room() -> bool:
        return (max_evals is None or n < max_evals) and _affordable(ev)

    while not clock.expired() and room():
        ev.engine.reset()
        episode: list[int] = []
        episode_best, since = ev.count_start, 0
        while since < patience and not clock.expired() and room():
            action = int(rng.integers(len(ACTIONS)))
            n += 1
            ev._spend()
            try:
                count = ev.engine.apply(ACTIONS[action].pipeline)
            except (EngineCrash, PipelineError):
                ev.record(None)
                break
            ev.record(count)
            episode.append(action)
            if count < episode_best:
                episode_best, since = count, 0
                if count < best_count:
                    best_count, best = count, list(episode)
                    history.append((clock.elapsed_s(), count, list(best)))
            else:
                since += 1
    return best


def _search_greedy(ev: SequenceEvaluator, clock: Countdown, history: list[Any]) -> list[int]:
    """CompilerGym's greedy search: the greedy extension of the empty sequence, without output checks."""
    return _extend_greedily(ev, [], ev.count_start, clock, None, history, False, []).actions


def _drop_useless(
    ev: SequenceEvaluator, actions: list[int], count: int, clock: Countdown
) -> tuple[list[int], int, int]:
    """Removes passes, last first, whose removal does not increase the instruction count
    (:func:`_reduce`): the shorter sequence, its count and the number of passes removed.

    Tries the positions while ``clock`` lasts and the evaluator has evaluations left; the removals
    found by then stand.
    """
    red = _reduce(ev, actions, count, clock)
    return red.actions, red.count, red.removed


def _remaining_s(clock: Countdown) -> float:
    """Seconds left on a clock that has a limit (every clock of :func:`tune_passes` has one)."""
    left = clock.remaining_s()
    assert left is not None, "tune_passes always starts its clock with a time budget"
    return left


def tune_passes(
    benchmark: str | Benchmark | os.PathLike[str],
    *,
    seconds: float = 60.0,
    evals: int | None = None,
    search: str = "perftune",
    length: int = DEFAULT_LENGTH,
    seed: int = 0,
    technique: str = SEQUENCE_TECHNIQUE,
    engine: str = "helper",
    patience: int = 25,
    validate: bool = True,
    run: bool = True,
    on_evaluation: Callable[[int, int | None, int], None] | None = None,
) -> PassTuneResult:
    """Searches a pass sequence that minimises the instruction count of a benchmark.

    Args:
        benchmark: URI or file (see :func:`~perftune.targets.llvm.get_benchmark`).
        seconds: Wall-clock budget of the search.
        evals: Optional cap on the evaluations, all of them (``n_evaluations`` of the result, which
            never exceeds it; docs/llvm-actions.md says what counts). The perftune search gives 40%
            of them to the ensemble, and stops its local search where what is left is what dropping
            useless passes from its best takes.
        search: ``"perftune"`` (the ensemble, then a local search around its best), ``"random"`` or
            ``"greedy"``.
        length: Number of positions of the sequence (perftune search).
        seed: Seed of the search.
        technique: perftune technique (default: the bandit ensemble over :data:`SEQUENCE_PORTFOLIO`;
            ``"bandit"`` is perftune's general default portfolio).
        engine: ``"helper"`` or ``"opt"``.
        patience: Random search: actions without improvement that end an episode.
        validate: Replay the winner with ``opt`` (and, with ``run``, check the program output).
        run: With ``validate``, also build and run the winner and compare its output with -O0's.
        on_evaluation: Called after every evaluation with the number of evaluations so far, the
            lowest instruction count seen (None before the first success) and the number of
            evaluations that failed (a pass crashed or was refused); ``perftune llvm-passes``
            draws its progress line from it. It must return quickly: it runs inside the search.

    Raises:
        LlvmError: Bad arguments, benchmark problems, missing tools.
    """
    if search not in ("perftune", "random", "greedy"):
        raise LlvmError(f"unknown search {search!r}: expected 'perftune', 'random' or 'greedy'")
    if seconds <= 0:
        raise LlvmError(f"seconds must be positive, got {seconds!r}")
    if evals is not None and (isinstance(evals, bool) or not isinstance(evals, int) or evals < 1):
        raise LlvmError(f"evals must be a positive integer, got {evals!r}")
    if length < 1:
        raise LlvmError(f"length must be at least 1, got {length!r}")
    bench = get_benchmark(benchmark)
    ev = SequenceEvaluator(bench, engine=engine)
    if ev.count_start == 0:
        ev.engine.close()
        raise LlvmError(f"{bench.uri}: the module has no instructions: there is nothing to optimise")
    # Every evaluation of the command, whichever phase makes it, counts against ``evals``.
    ev.max_evaluations = evals
    if on_evaluation is not None:
        def notify() -> None:
            on_evaluation(ev.n_evaluations, ev.best_count, ev.n_failed)

        ev.on_evaluation = notify
    if validate and run and bench.runnable:
        from perftune.targets.llvm._run import reference_output

        # The -O0 build's output, which candidates are checked against, is part of preparing the
        # benchmark (like the -Oz count), not of the search: build and run it before the clock
        # starts (a slow program would otherwise spend up to its run limit of the budget). A program
        # that does not build or run cleanly at -O0 cannot check any candidate: said now, not after
        # the search.
        reference = reference_output(bench)
        if not reference.timed_out and reference.returncode != 0:
            raise LlvmError(f"{bench.uri}: the -O0 reference build does not run cleanly (exit status "
                            f"{reference.returncode}), so no candidate's output can be checked against it; "
                            "fix the program, or search without running it (--no-run / run=False)")
    # One clock for the whole command; each phase runs on its share of it. perftune: the ensemble,
    # then a local search around its best; the last twentieth of the time goes to validating the
    # winner and dropping passes that do not help (a shorter command line). With ``evals``, the
    # ensemble gets its share of them, and the local search stops where what is left is what the
    # final reduction of its best takes (so that a budget is used exactly, and a larger one never
    # makes fewer evaluations).
    clock = Countdown(seconds)
    search_clock = clock.share(0.95) if search == "perftune" else clock
    history: list[Any] = []  # (seconds, count, actions) at every improvement
    reductions: dict[tuple[int, ...], _Reduction] = {}  # the local search's, for the final one
    validation = None
    n_removed = 0
    try:
        if search == "perftune":
            check = validate and run
            durations: list[float] = []
            ensemble_evals = None if evals is None else max(1, round(_ENSEMBLE_SHARE * evals))
            best, best_count = _search_perftune(
                ev, _remaining_s(clock.share(_ENSEMBLE_SHARE)), length, seed, technique,
                ensemble_evals, history, clock, check, durations, seeds_s=_remaining_s(search_clock),
            )
            if best:
                _local_search(
                    ev, best, best_count, search_clock, seed, None, history, check, durations, reductions
                )
        elif search == "random":
            _search_random(ev, search_clock, seed, patience, evals, history)
        else:
            _search_greedy(ev, search_clock, history)
        # Candidates, best first, with their counts. The search optimises the count only, and some
        # passes miscompile (LLVM 14's -attributor does on some csmith programs): the winner is the
        # best candidate that validates (opt replay, and the program's output against -O0 when it
        # is runnable). Validating is not an evaluation: the counts are the search's.
        candidates: list[tuple[list[int], int]] = []
        for _, found, actions in sorted(history, key=lambda h: h[1]):
            if all(actions != seen for seen, _ in candidates):
                candidates.append((list(actions), found))
        candidates = candidates[:_MAX_CANDIDATES]
        from perftune.targets.llvm._validate import validate_actions

        best: list[int] | None = None
        rejections: list[str] = []
        notes: list[str] = []
        count = ev.count_start
        first: list[int] = []
        for i, (actions, actions_count) in enumerate(candidates):
            if i > 0 and clock.expired():
                # The best candidate is always validated (within its own run limits); the next
                # ones only while the budget lasts.
                notes.append(f"{len(candidates) - i} more candidate(s) not validated: "
                             "the time budget ran out")
                break
            tries = [(actions, actions_count, 0)]
            if i == 0:
                # Passes that do not help are dropped from the best candidate (a shorter command
                # line), going on from the local search's reduction of it when there is one.
                reduction = _reduce(ev, actions, actions_count, clock, resume=reductions.get(tuple(actions)))
                first = reduction.actions
                if reduction.todo:
                    spent = "time" if clock.expired() else "evaluation"
                    notes.append(f"{reduction.todo} of the best sequence's passes not tried for removal: "
                                 f"the {spent} budget ran out")
                if reduction.removed:
                    # Without the removals next: a reduction that does not validate does not lose
                    # the candidate.
                    tries.insert(0, (reduction.actions, reduction.count, reduction.removed))
            for j, (tried, tried_count, removed) in enumerate(tries):
                if j > 0 and clock.expired():
                    notes.append("the best candidate with all its passes not validated: "
                                 "the time budget ran out")
                    break
                if validate:
                    validation = validate_actions(bench, tried, tried_count, run=run)
                    if not validation.ok:
                        rejections.append("; ".join(validation.errors))
                        continue
                best, count, n_removed = tried, tried_count, removed
                break
            if best is not None:
                break
        if best is None and first:
            # Every candidate failed: they usually share the culprit. Try the best one without all
            # occurrences of one of its passes, most promising first.
            repairs = []
            for action in dict.fromkeys(first):
                if not _affordable(ev):
                    notes.append("no more repairs of the best candidate tried: the evaluation budget ran out")
                    break
                repaired = [a for a in first if a != action]
                try:
                    repairs.append((ev.count(repaired), repaired))
                except (EngineCrash, PipelineError):
                    continue
            for repaired_count, repaired in sorted(repairs, key=lambda r: r[0])[:_MAX_REPAIRS]:
                if clock.expired():
                    notes.append("no more repairs of the best candidate tried: the time budget ran out")
                    break
                count = repaired_count
                validation = validate_actions(bench, repaired, count, run=run)
                if validation.ok:
                    best = repaired
                    break
                rejections.append("; ".join(validation.errors))
        if best is None:
            best, count = [], ev.count_start
            validation = validate_actions(bench, best, count, run=run) if validate else None
        elapsed = clock.elapsed_s()
        result = PassTuneResult(
            benchmark=bench.uri,
            search=search,
            actions=best,
            count_start=ev.count_start,
            count_result=count,
            count_oz=ev.count_oz,
            n_evaluations=ev.n_evaluations,
            elapsed_s=elapsed,
            history=[(t, c) for t, c, _ in history],
            benchmark_path=str(bench.bitcode),
            compile_command=bench.compile_command,
            n_removed=n_removed,
            validation=validation,
            n_rejected=len(rejections),
            rejections=rejections,
            notes=notes,
        )
    finally:
        ev.close()
    return result
