"""Pass-sequence search: perftune's ensemble, and CompilerGym's random and greedy baselines.

The perftune search treats a pass sequence as ``length`` positions, each a
:class:`~perftune.space.Choice` among the 118 actions and ``"none"`` (an empty slot, so that
sequences can shrink). The AUC-bandit ensemble of :mod:`perftune.search` searches that space
through :class:`perftune.Tuner`; the first configurations tried are a sequence shaped like LLVM's
own -Oz pipeline, written with the action space, and some variants of it.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from perftune.search import AUCBandit, BanditSettings
from perftune.targets.llvm._actions import ACTIONS, action_index, pipeline_of
from perftune.targets.llvm._datasets import Benchmark, get_benchmark
from perftune.targets.llvm._engine import Engine, EngineCrash, HelperEngine, PipelineError, make_engine
from perftune.targets.llvm._errors import LlvmError

__all__ = [
    "OZ_LIKE_SEQUENCE",
    "SEQUENCE_PORTFOLIO",
    "PassSequenceBandit",
    "PassTuneResult",
    "SequenceEvaluator",
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

_SNAPSHOT_EVERY = 6
_MAX_CANDIDATES = 8
_MAX_REPAIRS = 4
_MAX_SNAPSHOTS = 48
_NONE = "none"


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
        n_evaluations: Sequences (perftune, random) or single-pass trials (greedy) evaluated.
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
        }


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

    def count(self, actions: list[int] | tuple[int, ...]) -> int:
        """Instruction count after ``actions``; raises EngineCrash/PipelineError if a pass fails."""
        self.n_evaluations += 1
        seq = tuple(actions)
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
                count = self.engine.apply(ACTIONS[seq[position]].pipeline)
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

    def trial(self, action: int) -> int:
        """Count after one more action on the current module, without keeping it."""
        self.n_evaluations += 1
        return self.engine.trial(ACTIONS[action].pipeline)

    def close(self) -> None:
        self.engine.close()


def _seed_sequences(length: int) -> list[tuple[str, ...]]:
    names = {a.name for a in ACTIONS}
    base = [a.lstrip("-") for a in OZ_LIKE_SEQUENCE if a.lstrip("-") in names]
    # The -Oz-like sequence, and variants: without the inliner (the action's default threshold
    # suits speed, not size, so it often grows programs with several call sites), and its first
    # half twice (cleanups find more after inlining).
    variants = [base, [a for a in base if a != "inline"], base[: len(base) // 2] * 2]
    return [tuple(v[:length]) for v in variants]


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
    deadline: float,
    length: int,
    seed: int,
    technique: str,
    max_evals: int | None,
    history: list[Any],
    t0: float,
    check_output: bool = True,
) -> list[int]:
    from perftune.drive import Tuner
    from perftune.space import Space
    from perftune.targets.llvm._sequence import PassSequence

    if technique == SEQUENCE_TECHNIQUE:
        _register_sequence_technique()
    seeds = _seed_sequences(length)
    space = Space({"passes": PassSequence([a.name for a in ACTIONS], max_length=length, default=seeds[0])})
    tuner = Tuner(space, goal="min", seed=seed, technique=technique, seeds=[{"passes": s} for s in seeds[1:]])
    best_count = ev.count_start
    best: list[int] = []
    n = 0
    while time.monotonic() < deadline and (max_evals is None or n < max_evals):
        trial = tuner.ask()
        if trial is None:
            break
        n += 1
        actions = [action_index(name) for name in trial.config["passes"]]
        try:
            count = ev.count(actions)
        except (EngineCrash, PipelineError) as exc:
            tuner.tell(trial, error=str(exc))
            continue
        if count < best_count and check_output and not ev.output_ok():
            # Some passes miscompile; a count-only search would drift towards them. A new best
            # must still print what the -O0 build prints, or it is a failed trial.
            tuner.tell(trial, error="miscompiled: the program's output differs from its -O0 build")
            continue
        tuner.tell(trial, float(count))
        if count < best_count:
            best_count, best = count, actions
            history.append((time.monotonic() - t0, count, list(actions)))
    return best


def _search_random(
    ev: SequenceEvaluator,
    deadline: float,
    seed: int,
    patience: int,
    max_evals: int | None,
    history: list[Any],
    t0: float,
) -> list[int]:
    rng = np.random.default_rng(seed)
    best_count, best = ev.count_start, []
    n = 0
    while time.monotonic() < deadline and (max_evals is None or n < max_evals):
        ev.engine.reset()
        episode: list[int] = []
        episode_best, since = ev.count_start, 0
        while since < patience and time.monotonic() < deadline:
            action = int(rng.integers(len(ACTIONS)))
            n += 1
            ev.n_evaluations += 1
            try:
                count = ev.engine.apply(ACTIONS[action].pipeline)
            except (EngineCrash, PipelineError):
                break
            episode.append(action)
            if count < episode_best:
                episode_best, since = count, 0
                if count < best_count:
                    best_count, best = count, list(episode)
                    history.append((time.monotonic() - t0, count, list(best)))
            else:
                since += 1
    return best


def _search_greedy(ev: SequenceEvaluator, deadline: float, history: list[Any], t0: float) -> list[int]:
    ev.engine.reset()
    current = ev.count_start
    chosen: list[int] = []
    while time.monotonic() < deadline:
        best_action, best_count = None, current
        for action in range(len(ACTIONS)):
            if time.monotonic() >= deadline:
                break
            try:
                count = ev.trial(action)
            except (EngineCrash, PipelineError):
                ev.count(chosen)  # the engine restarted: rebuild the current module
                continue
            if count < best_count:
                best_action, best_count = action, count
        if best_action is None:
            break
        current = ev.engine.apply(ACTIONS[best_action].pipeline)
        chosen.append(best_action)
        history.append((time.monotonic() - t0, current, list(chosen)))
    return chosen


def _drop_useless(
    ev: SequenceEvaluator, actions: list[int], count: int, deadline: float
) -> tuple[list[int], int, int]:
    """Removes passes, last first, whose removal does not increase the instruction count."""
    seq = list(actions)
    removed = 0
    position = len(seq) - 1
    while position >= 0 and time.monotonic() < deadline:
        candidate = seq[:position] + seq[position + 1 :]
        try:
            new = ev.count(candidate)
        except (EngineCrash, PipelineError):
            new = count + 1
        if new <= count:
            seq, count = candidate, new
            removed += 1
        position -= 1
    if removed:
        count = ev.count(seq)
    return seq, count, removed


def tune_passes(
    benchmark: str | Benchmark | os.PathLike[str],
    *,
    seconds: float = 60.0,
    evals: int | None = None,
    search: str = "perftune",
    length: int = 80,
    seed: int = 0,
    technique: str = SEQUENCE_TECHNIQUE,
    engine: str = "helper",
    patience: int = 25,
    validate: bool = True,
    run: bool = True,
) -> PassTuneResult:
    """Searches a pass sequence that minimises the instruction count of a benchmark.

    Args:
        benchmark: URI or file (see :func:`~perftune.targets.llvm.get_benchmark`).
        seconds: Wall-clock budget of the search.
        evals: Optional cap on the number of evaluated sequences.
        search: ``"perftune"`` (the ensemble), ``"random"`` or ``"greedy"``.
        length: Number of positions of the sequence (perftune search).
        seed: Seed of the search.
        technique: perftune technique (default: the bandit ensemble over :data:`SEQUENCE_PORTFOLIO`;
            ``"bandit"`` is perftune's general default portfolio).
        engine: ``"helper"`` or ``"opt"``.
        patience: Random search: actions without improvement that end an episode.
        validate: Replay the winner with ``opt`` (and, with ``run``, check the program output).

    Raises:
        LlvmError: Bad arguments, benchmark problems, missing tools.
    """
    if search not in ("perftune", "random", "greedy"):
        raise LlvmError(f"unknown search {search!r}: expected 'perftune', 'random' or 'greedy'")
    if seconds <= 0:
        raise LlvmError(f"seconds must be positive, got {seconds!r}")
    if length < 1:
        raise LlvmError(f"length must be at least 1, got {length!r}")
    bench = get_benchmark(benchmark)
    ev = SequenceEvaluator(bench, engine=engine)
    t0 = time.monotonic()
    # The last tenth of the time goes to dropping passes that do not help (a shorter command line).
    deadline = t0 + (0.9 * seconds if search == "perftune" else seconds)
    history: list[Any] = []  # (seconds, count, actions) at every improvement
    validation = None
    n_removed = 0
    try:
        if search == "perftune":
            _search_perftune(ev, deadline, length, seed, technique, evals, history, t0, validate and run)
        elif search == "random":
            _search_random(ev, deadline, seed, patience, evals, history, t0)
        else:
            _search_greedy(ev, deadline, history, t0)
        # Candidates, best first. The search optimises the count only, and some passes miscompile
        # (LLVM 14's -attributor does on some csmith programs): the winner is the best candidate
        # that validates (opt replay, and the program's output against -O0 when it is runnable).
        candidates: list[list[int]] = []
        for _, _, actions in sorted(history, key=lambda h: h[1]):
            if actions not in candidates:
                candidates.append(actions)
        candidates = candidates[:_MAX_CANDIDATES]
        from perftune.targets.llvm._validate import validate_actions

        best: list[int] | None = None
        rejections: list[str] = []
        count = ev.count_start
        i = 0
        first: list[int] = []
        for i, actions in enumerate(candidates):
            count = ev.count(actions)
            if i == 0:
                actions, count, n_removed = _drop_useless(ev, actions, count, t0 + seconds)
                first = actions
            if not validate:
                best = actions
                break
            validation = validate_actions(bench, actions, count, run=run)
            if validation.ok:
                best = actions
                break
            rejections.append("; ".join(validation.errors))
            n_removed = 0
        if best is None and first:
            # Every candidate failed: they usually share the culprit. Try the best one without all
            # occurrences of one of its passes, most promising first.
            repairs = []
            for action in dict.fromkeys(first):
                repaired = [a for a in first if a != action]
                try:
                    repairs.append((ev.count(repaired), repaired))
                except (EngineCrash, PipelineError):
                    continue
            for repaired_count, repaired in sorted(repairs, key=lambda r: r[0])[:_MAX_REPAIRS]:
                i += 1
                count = repaired_count
                validation = validate_actions(bench, repaired, count, run=run)
                if validation.ok:
                    best = repaired
                    break
                rejections.append("; ".join(validation.errors))
        if best is None:
            best, count = [], ev.count_start
            validation = validate_actions(bench, best, count, run=run) if validate else None
            i += 1
        elapsed = time.monotonic() - t0
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
            n_rejected=i,
            rejections=rejections,
        )
    finally:
        ev.close()
    return result
