"""The Tuner: the ask/tell loop, the budget, de-duplication, tickets, checkpoints and resume.

The driver owns the loop and the budget (docs/architecture.md, rule 1). Techniques only propose and learn.

Tickets and determinism: every trial gets a ticket (its ``id``) in issue order. With a seed, results
are applied to the search in ticket order with a fixed lag ``L``: the proposal for ticket ``k`` depends
only on the results of tickets ``< k - L``. The proposals are then the same whatever the number of
workers and however long each evaluation takes (given the same measurements), at the cost of the
search learning each result ``L`` tickets late. Up to ``L + 1`` evaluations can be in flight without
waiting. Wall-clock limits (``Budget.seconds``) and timeouts depend on the clock and are outside
that promise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perftune.drive import _checkpoint
from perftune.drive._budget import Budget
from perftune.drive._context import EvalContext, Incumbent, takes_context
from perftune.drive._evaluate import (
    MISSING_METRIC,
    NotFinite,
    Outcome,
    RepeatedObjective,
    _finite,
    check_metrics,
    interpret,
)
from perftune.drive._executors import Executor, InlineExecutor, ProcessExecutor
from perftune.drive._fidelity import ASHA, Fidelity, takes_trial
from perftune.drive._progress import ProgressLine, ProgressSettings
from perftune.drive._warmstart import Prior, WarmStart
from perftune.errors import PerftuneError, SpaceError
from perftune.trial import Status, Trial, failure_key, infeasible

if TYPE_CHECKING:
    from perftune.drive._attach import Worker
    from perftune.measure import SpeedupCI, TimingSettings
    from perftune.search import Objectives, Technique
    from perftune.space import Config, Space
    from perftune.store import Lease, RunInfo, Store

__all__ = ["DEFAULT_LAG", "Result", "Tuner", "tune"]

DEFAULT_LAG = 8
"""Lag of deterministic (seeded) runs: enough for 9 evaluations in flight without waiting."""

_MAX_ASK_ATTEMPTS = 16
_LEASE_HEARTBEAT_S = 5.0
#: While evaluations run in worker processes, the driver wakes this often to renew its lease: an evaluation
#: longer than the lease's timeout must not let another machine take a live run over.
_LEASE_WAKE_S = 30.0
_MAX_RANDOM_ATTEMPTS = 64
#: A run stops once this many trials in a row, and no trial before them, lacked the metric named by metric=.
MISSING_METRIC_TRIALS = 3
#: How ``Result.stop_reason`` starts for that stop.
STOP_MISSING_METRIC = "metric missing"
#: A run stops once its first this many trials all failed with one and the same reason (an objective that
#: raises the same error whatever the configuration: a bug in it, not a property of the space).
SAME_FAILURE_TRIALS = 20
#: How ``Result.stop_reason`` starts for that stop.
STOP_SAME_FAILURE = "every trial failed the same way"
#: ``Result.stop_reason`` when every valid configuration of the space was tried.
STOP_EXHAUSTED = "space exhausted"
#: ``Result.stop_reason`` when neither the search nor random samples found a configuration not tried yet,
#: in a space too large (or infinite) to list its valid configurations and know that none is left.
STOP_NOTHING_NEW = "no new configuration found"


@dataclass
class Result:
    """The outcome of a tuning run.

    Attributes:
        best: The best successful trial, or None when every trial failed.
        trials: Every finished trial, in ticket order.
        default: The trial of the default configuration (the baseline), when it was measured.
        run_id: Numeric id of the run in the store (None without a store).
        run_name: Name of the run in the store.
        stop_reason: Why the run ended ("budget", "time", "patience", "target", "space exhausted": every
            valid configuration was tried, "no new configuration found": none untried was found in a space
            too large to list, ...).
        goal: The primary objective's goal, ``"min"`` or ``"max"``.
        objectives: The run's objectives and constraints (:class:`perftune.search.Objectives`); with
            several, ``best`` is the best on the first (primary) one and :attr:`pareto` is the front.

    Example:
        >>> from perftune.space import Int, Space
        >>> space = Space({"n": Int(0, 5, default=4)})
        >>> result = tune(lambda c: (c["n"] - 1) ** 2 + 1, space, budget=6, seed=0)
        >>> (result.best.config["n"], result.default.value, result.improvement)
        (1, 10.0, 10.0)
        >>> result.counts()
        {'ok': 6}
    """

    best: Trial | None
    trials: list[Trial]
    default: Trial | None = None
    run_id: int | None = None
    run_name: str | None = None
    stop_reason: str = ""
    goal: str = "min"
    objectives: Objectives | None = None

    @property
    def pareto(self) -> list[Trial]:
        """The Pareto front: the successful, feasible trials that no other such trial dominates.

        Each is a :class:`~perftune.trial.Trial` with its ``config`` and its ``metrics`` (every
        objective's value), in ticket order; a configuration measured twice appears once. With a single
        objective, the trials that share the best value.

        Example:
            >>> from perftune.space import Int, Space
            >>> space = Space({"n": Int(0, 4)})
            >>> r = tune(lambda c: {"time": 5 - c["n"], "size": c["n"] ** 2}, space, budget=5, seed=0,
            ...          goal={"time": "min", "size": "min"})
            >>> sorted((t.metrics["time"], t.metrics["size"]) for t in r.pareto)
            [(1.0, 16.0), (2.0, 9.0), (3.0, 4.0), (4.0, 1.0), (5.0, 0.0)]
        """
        from perftune.search import Objectives

        objectives = self.objectives or Objectives(("value",), (self.goal,))
        return objectives.pareto(self.trials)

    def hypervolume(self, reference: Mapping[str, float]) -> float:
        """The hypervolume of :attr:`pareto` up to ``reference`` (a value per objective, in its units).

        A point counts where it is better than the reference in every objective.

        Example:
            >>> from perftune.space import Int, Space
            >>> r = tune(lambda c: {"time": 5 - c["n"], "size": c["n"]}, Space({"n": Int(0, 4)}), budget=5,
            ...          seed=0, goal={"time": "min", "size": "min"})
            >>> r.hypervolume({"time": 6, "size": 5})
            15.0
        """
        from perftune.search import Objectives, hypervolume

        objectives = self.objectives or Objectives(("value",), (self.goal,))
        names = objectives.names
        if not isinstance(reference, Mapping):
            raise PerftuneError(f"hypervolume(): expected a mapping {{objective: value}} with a value for "
                                f"each of {', '.join(names)}; got {type(reference).__name__} {reference!r}")
        unknown = [str(k) for k in reference if k not in names]
        missing = [n for n in names if n not in reference]
        if missing or unknown:
            others = ", ".join(map(repr, unknown))
            if not missing:  # only names too many: nothing is missing
                what = f"names {others}, which {'is' if len(unknown) == 1 else 'are'} not an objective"
            else:
                what = f"has no value for {', '.join(missing)}" + (
                    f"; not an objective: {others}" if unknown else "")
            raise PerftuneError(f"hypervolume(): reference {what} (the objectives: {', '.join(names)})")
        bad = [f"{n}={reference[n]!r}" for n in names if isinstance(reference[n], bool)
               or not isinstance(reference[n], numbers.Real) or not math.isfinite(reference[n])]
        if bad:
            raise PerftuneError(f"hypervolume(): the reference must be a finite number for each objective, "
                                f"got {', '.join(bad)}")
        ref = tuple(float(reference[n]) if g == "min" else -float(reference[n])
                    for n, g in zip(objectives.names, objectives.goals, strict=True))
        points = [v for v in (objectives.losses(t) for t in self.pareto) if v is not None]
        return hypervolume(points, ref)

    @property
    def improvement(self) -> float | None:
        """How many times better the best is than the default configuration (>1 is better).

        The ratio of the geometric means of their samples: the number ``perftune show``, the report and
        ``--json`` (``improvement_over_default``) print for the run (:meth:`speedup`'s estimate; with one
        sample each, the ratio of the values). Defined for positive values (times, sizes, rates). None
        when there is no baseline or a value is 0 or below: there is no ratio then, and ``show`` prints
        the relative change instead (:meth:`speedup` has it, with ``ratio`` False). None too when the
        default configuration broke a constraint (docs/multiobjective.md): an infeasible trial is no baseline.
        """
        if not self._has_baseline():
            return None
        assert self.best is not None and self.default is not None
        b, d = self.best.value, self.default.value
        assert b is not None and d is not None
        low, high = (b, d) if self.goal == "min" else (d, b)
        if low <= 0 or high <= 0:
            return None
        if len(self.best.samples) <= 1 and len(self.default.samples) <= 1:
            return high / low  # one value each: their ratio is the geometric means' ratio, exactly
        try:
            ci = self.speedup()
        except (ValueError, ZeroDivisionError, OverflowError):
            ci = None  # samples that a geometric mean cannot take: the values' ratio
        if ci is not None and ci.ratio and math.isfinite(ci.estimate) and ci.estimate > 0:
            return ci.estimate
        return high / low  # a sample of 0 or below: no geometric mean, the values' ratio

    def speedup(self, confidence: float = 0.95) -> SpeedupCI | None:
        """Speedup of the best over the default configuration with its interval, from their samples.

        A :class:`perftune.measure.SpeedupCI` (``estimate > 1``: the best is better), or None without
        a successful baseline. The interval is only as good as the samples: measure with
        ``tune(..., repeats="auto")`` (or several repeats) for one that means something.

        Example:
            >>> from perftune.space import Int, Space
            >>> r = tune(lambda c: 2.0 / (1 + c["n"]), Space({"n": Int(0, 3, default=0)}), budget=4,
            ...          seed=0, repeats=2)
            >>> str(r.speedup())
            '4.000x [4.000, 4.000] at 95%'
        """
        if not self._has_baseline():
            return None
        assert self.best is not None and self.default is not None
        from perftune.measure import speedup_ci

        def samples(t: Trial) -> list[float]:
            return list(t.samples) or ([t.value] if t.value is not None else [])

        return speedup_ci(samples(self.default), samples(self.best), confidence=confidence, goal=self.goal)

    def _has_baseline(self) -> bool:
        """A best trial and a default one that succeeded and kept the constraints (an infeasible default is
        measured, so OK, but no baseline: ``perftune.report.improvement_of`` says the same)."""
        default = self.default
        return self.best is not None and default is not None and default.ok and not infeasible(default)

    def counts(self) -> dict[str, int]:
        """Number of trials by status."""
        out: dict[str, int] = {}
        for t in self.trials:
            out[t.status.value] = out.get(t.status.value, 0) + 1
        return out


@dataclass
class _Ticket:
    config: Config
    technique: str


@dataclass
class _State:
    """Everything needed to continue a run; stored as a JSON checkpoint (``_checkpoint``), never a pickle."""

    fingerprint: str
    goal: str
    metric: str | None
    technique_name: str
    technique_seed: int | None
    seed: int | None
    lag: int
    technique: Technique
    rng: Mapping[str, Any]
    next_id: int
    applied_upto: int
    queue: list[tuple[Config, str]]
    pending: dict[int, _Ticket]
    n_since_best: int
    extras: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[list[int]]:
    """Hold Ctrl-C and SIGTERM while the block runs (the signals that came are in the list it gives).

    For the end of a run: a second Ctrl-C while the checkpoint, the run's status and the lease are
    written must not leave the run half ended. Only the main thread can set signal handlers; elsewhere
    nothing is held.
    """
    import signal
    import threading

    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, _frame: Any) -> None:
        held.append(signum)

    before: dict[signal.Signals, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):
            before[signum] = signal.signal(signum, hold)
    try:
        yield held
    finally:
        for signum, handler in before.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _check_run_args(workers: Any, executor: Any, timeout_s: Any) -> None:
    """Refuse bad run arguments before anything is created or written."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise PerftuneError(f"workers must be a positive integer, got {workers!r}")
    if isinstance(executor, str) and executor not in ("local", "dask"):
        raise PerftuneError(f"executor must be 'local' or 'dask', got {executor!r}")
    if timeout_s is not None and not (isinstance(timeout_s, int | float) and timeout_s > 0):
        raise PerftuneError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")


def _technique_spec(technique: Any) -> tuple[str, Any]:
    """``(name, settings)`` from ``technique=``: a name, or a name and its settings dataclass."""
    if isinstance(technique, str):
        return technique, None
    if isinstance(technique, tuple) and len(technique) == 2 and isinstance(technique[0], str):
        name, settings = technique
        if settings is not None and (isinstance(settings, type) or not dataclasses.is_dataclass(settings)):
            raise PerftuneError(
                f"technique=({name!r}, ...): the settings must be an instance of the technique's settings "
                f"dataclass, such as BanditSettings(exploration=0.1), got {_shorten(repr(settings))}")
        return name, settings
    raise PerftuneError(
        "technique must be a technique name or a pair (name, settings) such as "
        f"('bandit', BanditSettings(...)), got {_shorten(repr(technique))}")


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _create_technique(name: str, space: Space, seed: int, deterministic: bool,
                      objectives: Objectives | None = None, settings: Any = None) -> Technique:
    """The technique ``name`` (with ``settings``, its settings dataclass, or its defaults), told not to read
    clocks when the run is deterministic, and told the objectives when it searches for a Pareto front."""
    from perftune import search
    from perftune.search._base import ClockAware

    if settings is not None:
        expected = getattr(search.get(name), "Settings", None)
        if isinstance(expected, type) and not isinstance(settings, expected):
            raise PerftuneError(f"technique {name!r}: its settings are {expected.__name__}, "
                                f"got {type(settings).__name__}")
    technique: Technique = search.create(name, space, seed=seed, settings=settings)
    if deterministic and isinstance(technique, ClockAware):
        technique.set_deterministic(True)
    if objectives is not None and isinstance(technique, search.MultiObjectiveAware):
        technique.set_objectives(objectives)
    return technique


def _settings_data(settings: Any) -> Any:
    """A technique's settings as checkpoint data: each settings dataclass (nested ones too, as in
    ``BanditSettings.technique_settings``) becomes ``{"settings_of": "module:Class", "fields": {...}}``."""
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        kind = type(settings)
        return {"settings_of": f"{kind.__module__}:{kind.__qualname__}",
                "fields": {f.name: _settings_data(getattr(settings, f.name))
                           for f in dataclasses.fields(settings) if f.init}}
    if isinstance(settings, tuple | list):
        return type(settings)(_settings_data(v) for v in settings)
    if isinstance(settings, dict):
        return {k: _settings_data(v) for k, v in settings.items()}
    return settings


def _settings_from(data: Any, name: str) -> Any:
    """The inverse of :func:`_settings_data`. A class is rebuilt only when it is the settings class of a
    registered technique: the checkpoint names it, it never picks what is imported or called."""
    from perftune import search

    classes: dict[str, type] = {}

    def settings_class(key: Any) -> type:
        if not classes:
            for candidate in dict.fromkeys([name, *search.names()]):
                try:
                    kind = getattr(search.get(candidate), "Settings", None)
                except PerftuneError:  # a plug-in that fails to load: not the one named, or the error says so
                    continue
                if isinstance(kind, type) and dataclasses.is_dataclass(kind):
                    classes.setdefault(f"{kind.__module__}:{kind.__qualname__}", kind)
        kind = classes.get(key) if isinstance(key, str) else None
        if kind is None:
            raise ValueError(f"technique_settings: {key!r} is not the settings class of a registered "
                             "technique")
        return kind

    def rebuild(v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"settings_of", "fields"} and isinstance(v["fields"], dict):
            return settings_class(v["settings_of"])(**{k: rebuild(x) for k, x in v["fields"].items()})
        if isinstance(v, tuple | list):
            return type(v)(rebuild(x) for x in v)
        if isinstance(v, dict):
            return {k: rebuild(x) for k, x in v.items()}
        return v

    return None if data is None else rebuild(data)


def _objectives_of(goal: Any, metric: str | None, metrics: Sequence[str] | None,
                   constraints: Sequence[str] | None, where: str) -> Objectives:
    """The run's objectives from the user's ``goal=``/``metric=``/``metrics=``/``constraints=``."""
    from perftune.search import Objectives

    if isinstance(goal, str) and goal not in ("min", "max"):
        raise PerftuneError(f"goal must be 'min' or 'max', got {goal!r}")
    if metric is not None and not isinstance(metric, str):
        raise PerftuneError(f"metric must be a metric name, got {metric!r}")
    return Objectives.coerce(goal, metric, metrics, constraints, where=where)


def _multi_pruning_error(objectives: Objectives, where: str) -> PerftuneError:
    # The rungs rank one value per trial: ranking the primary alone would prune the trade-offs of the
    # front (Optuna refuses trial.report in multi-objective studies for the same reason).
    return PerftuneError(
        f"{where}: cannot prune a run of {len(objectives.names)} objectives ({', '.join(objectives.names)}): "
        "ASHA ranks one value per trial and would prune the front's trade-offs; pass pruner=False to record "
        "the reports without pruning (a task file: drop the fidelity levels, or keep one metric)")


def _is_space(obj: Any) -> bool:
    return hasattr(obj, "is_valid") and hasattr(obj, "sample") and hasattr(obj, "params")


class Tuner:
    """Ask/tell tuner over a search space.

    Args:
        space: The :class:`perftune.space.Space` to search.
        goal: ``"min"`` or ``"max"``; or, for several objectives, a mapping ``{"time": "min", "size":
            "min"}`` (the first is the primary: ``trial.value``, ``best`` and ``improvement`` are its;
            the run searches for the Pareto front, ``Result.pareto``; see docs/multiobjective.md).
        seed: Makes the run reproducible; with a seed, results reach the search in ticket order with
            a fixed ``lag``, so the run is the same for any number of workers.
        store: None (keep results in memory only), a :class:`perftune.store.Store`, or a store URL.
        technique: Name of a registered technique; ``"default"`` (a boundary-biased initial design, then
            the AUC-bandit ensemble; see :class:`perftune.search.StagedBandit`). Or a name and its
            settings: ``("bandit", BanditSettings(exploration=0.1))`` (kept in the run's checkpoints).
        seeds: Configurations (mappings) to try early, right after the default configuration.
        metric: When the objective returns a mapping of metrics, the one to optimise.
        metrics: Several objectives by name, the primary first, with ``goal`` one goal for all or a
            list of goals (the same as ``goal={name: goal, ...}``).
        constraints: Bounds on metrics the objective reports, like ``["accuracy >= 0.99"]``: a trial
            that breaks one is measured (OK) but infeasible: it has no ``loss``, is never the best nor on
            the front, and the search learns it as a failure.
        name: Name of the run in the store (generated when None).
        budget: A number of trials or a :class:`Budget`; ``ask()`` returns None once it is spent.
        lag: Lag of seeded runs (default :data:`DEFAULT_LAG`); 0 gives strictly sequential learning.
        include_default: Measure the default configuration first, as the baseline.
        checkpoint_every: Write a checkpoint every this many trials (with a store).
        checkpoint_interval_s: ... and at least this often in seconds.
        warm_start: Results on the same space measured elsewhere (other hardware, an older program): a
            list of sources (a Result, trials, a store, ``(store, run)``, a T4 or Kernel Tuner file) or a
            :class:`perftune.drive.WarmStart`. Their best-ranked configurations (by mean percentile rank,
            not by value) are measured early, after ``seeds``, labelled ``"seed"``; the search learns
            only from this run's measurements, so the prior never outweighs them. A source with other
            parameters is refused; one with other ranges or constraints keeps its valid configurations.

    Example:
        >>> from perftune.space import Int, Space
        >>> tuner = Tuner(Space({"x": Int(0, 10)}), seed=1, budget=5)
        >>> while (trial := tuner.ask()) is not None:
        ...     _ = tuner.tell(trial, (trial.config["x"] - 4) ** 2)
        >>> len(tuner.trials)
        5
    """

    def __init__(
        self,
        space: Space,
        *,
        goal: str | Mapping[str, str] | Sequence[str] = "min",
        seed: int | None = None,
        store: Store | str | None = None,
        technique: str | tuple[str, Any] = "default",
        seeds: Iterable[Mapping[str, Any]] = (),
        metric: str | None = None,
        metrics: Sequence[str] | None = None,
        constraints: Sequence[str] | None = None,
        name: str | None = None,
        budget: Budget | int | str | None = None,
        lag: int | None = None,
        include_default: bool = True,
        checkpoint_every: int = 50,
        checkpoint_interval_s: float = 30.0,
        settings: Mapping[str, Any] | None = None,
        environment: Mapping[str, Any] | None = None,
        warm_start: WarmStart | Sequence[Any] | None = None,
        _resume_state: _State | None = None,
        _resume_run: RunInfo | None = None,
    ) -> None:
        if not _is_space(space):
            raise SpaceError(f"Tuner: expected a perftune.space.Space, got {type(space).__name__}")
        objectives = _objectives_of(goal, metric, metrics, constraints, "Tuner")
        if lag is not None and (not isinstance(lag, int) or lag < 0):
            raise PerftuneError(f"lag must be a non-negative integer, got {lag!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise PerftuneError(f"seed must be a non-negative integer, got {seed!r}")
        from perftune.search._seeding import Stream, fresh_seed, stream_seed

        self.space = space
        self.objectives = objectives
        self.goal = objectives.goal
        # The primary objective is what the evaluators extract as the trial's value.
        self.metric = None if metric is None and objectives.primary == "value" else objectives.primary
        # The checks of _record (metrics present, constraints) only where there is something to check.
        self._checks_metrics = objectives.is_multi or bool(objectives.constraints)
        self._front: list[int] = []  # tickets of the Pareto front (feasible, non-dominated), kept live
        self._front_configs: dict[Config, int] = {}  # config -> ticket of its trial that may be on the front
        self.seed = seed
        # A seeded run is deterministic: results reach the search in ticket order with a fixed lag and
        # no decision reads a clock. An unseeded one tells the search every result as it arrives.
        self.deterministic = seed is not None
        self.budget = Budget.coerce(budget)
        self.checkpoint_every = checkpoint_every
        self.checkpoint_interval_s = checkpoint_interval_s
        self._store = self._open_store(store)
        self._run: RunInfo | None = None
        self._trials: dict[int, Trial] = {}  # finished trials by ticket
        self._by_config: dict[Config, int] = {}  # config -> ticket of its (first) trial
        self._best: Trial | None = None
        # What objectives published through their EvalContext; sent with every later submission.
        self._shared: dict[str, Any] = {}
        self._shared_warned: set[str] = set()  # published keys a checkpoint cannot hold (warned once)
        self._default_id: int | None = None
        self._n_counted = 0  # finished trials that count against the budget (cancelled ones don't)
        self._status_counts: dict[str, int] = {}
        self._last_checkpoint_t = time.monotonic()
        self._last_checkpoint_n = 0
        self._stop_reason = ""
        self._exhausted = False  # the last proposal that found nothing knew every valid configuration tried
        self._resume_pending: set[int] = set()
        self._stored_after: dict[int, Trial] = {}
        self._reissue: list[int] = []
        # The run's status in the store as this tuner left it; a run that ended (a resumed one, a second
        # run()) is marked running again once driven, and release() gives it back its status before
        # (_status_before) when nothing was recorded since (_n_trials_at_mark).
        self._run_status: str | None = None
        self._status_before: str | None = None
        self._n_trials_at_mark = 0
        # Whether self.budget is a resumed run's stored one (a budget given to run() replaces it).
        self._budget_from_store = False
        self._budget_stored: dict[str, Any] | None = None  # the budget _remember_budget stored last
        self._random_starts_queued = False  # ASHA's random starts were drawn already (a resume did it)
        self.deciding_s = 0.0  # time spent in technique.ask/tell
        self._started_at: float | None = None  # when the clock of a time budget started
        self._deadline: float | None = None  # the deadline of run() while it runs
        self._lease: Lease | None = None  # this driver's lease on the run (one driver per run at a time)
        self._lease_lost = False
        self._last_heartbeat_t = 0.0
        self._stop_requested: str | None = None  # stop(): no new trial is issued
        self._n_missing_metric = 0  # trials whose result lacked metric=, while none has succeeded
        self._same_failure: tuple[str, int] | None = ("", 0)  # (reason, count) while every trial failed so
        self._fidelity: Fidelity | None = None  # while run() drives an objective that reports (a pruner)
        # The run's pruner: its ASHA settings, False (reports recorded, never pruned), None (not known yet).
        self._pruner: ASHA | bool | None = None

        if _resume_state is not None:
            st = _resume_state
            self._technique_name = st.technique_name
            self._technique_seed = st.technique_seed
            self._technique_settings = st.extras.get("technique_settings")
            self._technique = st.technique
            self._rng = np.random.default_rng()
            self._rng.bit_generator.state = st.rng
            self.lag = st.lag
            self._next_id = st.next_id
            self._applied_upto = st.applied_upto
            self._queue: deque[tuple[Config, str]] = deque(st.queue)
            self._pending: dict[int, _Ticket] = dict(st.pending)
            self._n_since_best = st.n_since_best
            self._default_id = st.extras.get("default_id")
            self._shared = dict(st.extras.get("shared") or {})
            self._run = _resume_run
            return

        technique, technique_settings = _technique_spec(technique)
        if technique == "default" and objectives.is_multi and technique_settings is None:
            technique = "mo-bandit"  # the default search with several objectives (docs/multiobjective.md)
        self._technique_name = technique
        self._technique_settings = technique_settings
        self.lag = (DEFAULT_LAG if lag is None else lag) if self.deterministic else 0
        technique_seed = seed if seed is not None else fresh_seed()
        self._rng = np.random.default_rng(stream_seed(technique_seed, Stream.DRIVER))
        self._technique_seed = technique_seed
        self._technique = _create_technique(technique, space, technique_seed, self.deterministic, objectives,
                                            technique_settings)
        self._next_id = 0
        self._applied_upto = 0
        self._queue = deque()
        self._pending = {}
        self._n_since_best = 0

        # Fail before anything is written when no configuration satisfies the constraints.
        space.sample(np.random.default_rng(0), 1)
        if include_default:
            default = space.default()
            if space.is_valid(default):
                self._queue.append((default, "default"))
            else:
                self.default_problem = space.why_invalid(default)
        for i, raw in enumerate(seeds):
            config = self._as_config(raw, f"seeds[{i}]")
            if all(config != c for c, _ in self._queue):
                self._queue.append((config, "seed"))
        warm = WarmStart.coerce(warm_start)
        warm_settings: dict[str, Any] = {}
        if warm is not None and warm.n_propose > 0:
            prior = Prior.from_sources(warm.sources, space)
            queued = {c for c, _ in self._queue}
            # n_propose new measurements: a prior configuration already queued (the default) is not one.
            for config in [c for c in prior.ranked if c not in queued][: warm.n_propose]:
                self._queue.append((config, "seed"))
            # skipped: runs of a whole store left out, having no successful configuration in this space.
            warm_settings = {"warm_start": {"n_sources": prior.n_sources, "n_propose": warm.n_propose,
                                            "skipped": list(prior.skipped)}}

        if self._store is not None:
            run_settings = {
                "goal": self.goal, "seed": seed, "technique": technique, "lag": self.lag,
                "metric": self.metric,
                "budget": None if self.budget is None else self.budget.__dict__, **warm_settings,
                **(settings or {}),
            }
            if self._checks_metrics:
                run_settings["objectives"] = objectives.to_dict()
            # The first checkpoint goes in with the run, in one transaction: a driver killed at any
            # moment after this line leaves a run that can be resumed (before, a kill between creating
            # the run and writing its checkpoint left one that could not).
            first = _checkpoint.encode(self._checkpoint_payload(), self.space)
            self._run = self._store.create_run(name, space, run_settings, self.goal, self.metric,
                                               environment=environment, checkpoint=first)
            self._run_status = "running"
            self._take_lease()

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _open_store(store: Store | str | None) -> Store | None:
        if store is None or not isinstance(store, str):
            return store
        from perftune.store import open_store

        return open_store(store)

    def _as_config(self, raw: Mapping[str, Any], where: str) -> Any:
        from perftune.space import Config

        if not isinstance(raw, Mapping):
            raise PerftuneError(f"{where}: expected a mapping of parameter values, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(self.space.params))
        if unknown:
            raise PerftuneError(f"{where}: unknown parameter(s) {', '.join(unknown)}")
        config = raw if isinstance(raw, Config) else Config(dict(raw))
        if not self.space.is_valid(config):
            raise PerftuneError(f"{where}: invalid configuration: {self.space.why_invalid(config)}")
        return config

    @property
    def run_id(self) -> int | None:
        return None if self._run is None else self._run.id

    @property
    def run_name(self) -> str | None:
        return None if self._run is None else self._run.name

    @property
    def technique(self) -> Any:
        """The search technique (for inspection: credits, deciding times)."""
        return self._technique

    @property
    def trials(self) -> list[Trial]:
        """Finished trials in ticket order."""
        return [self._trials[i] for i in sorted(self._trials)]

    @property
    def best(self) -> Trial | None:
        """The best successful trial so far."""
        return self._best

    @property
    def default_trial(self) -> Trial | None:
        return None if self._default_id is None else self._trials.get(self._default_id)

    @property
    def n_trials(self) -> int:
        """Trials that count against the budget: finished ones, cancelled excluded, plus those in flight."""
        # A seeded resume takes the stored trials in ticket order; any it could not re-derive yet count too.
        uncounted = (Status.CANCELLED, Status.PRUNED)
        later = sum(1 for t in self._stored_after.values() if t.status not in uncounted)
        return self._n_counted + len(self._pending) + later

    @property
    def n_in_flight(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ stopping

    def _budget_reason(self, budget: Budget | None) -> str | None:
        if self._stop_requested is not None:
            return self._stop_requested
        if budget is None:
            return None
        if budget.evals is not None and self.n_trials >= budget.evals:
            return "budget"
        if budget.seconds is not None and self._seconds_left(budget) <= 0:
            return "time"
        if budget.patience is not None and self._n_since_best >= budget.patience:
            return "patience"
        if budget.target is not None and self._best is not None and self._best.value is not None:
            best = self._best.value
            reached = best <= budget.target if self.goal == "min" else best >= budget.target
            if reached:
                return "target"
        return None

    def _seconds_left(self, budget: Budget) -> float:
        """Seconds left of ``budget.seconds``: run() has its own deadline; otherwise the clock starts at
        the first proposal."""
        if self._deadline is not None:
            return self._deadline - time.monotonic()
        assert budget.seconds is not None
        if self._started_at is None:
            self._started_at = time.monotonic()
        return self._started_at + budget.seconds - time.monotonic()

    def remaining_s(self) -> float | None:
        """Seconds left of the time budget (None without one); the clock starts at the first ``ask()``.

        A target that evaluates outside :meth:`run` bounds what it has in flight by this, so that the
        driver's clock, not the target's, ends the run.

        Example:
            >>> from perftune.space import Int, Space
            >>> tuner = Tuner(Space({"x": Int(0, 10)}), budget="60s")
            >>> trial = tuner.ask()
            >>> 59 < tuner.remaining_s() <= 60
            True
        """
        if self._deadline is not None:
            return max(0.0, self._deadline - time.monotonic())
        if self.budget is None or self.budget.seconds is None:
            return None
        return max(0.0, self._seconds_left(self.budget))

    # ------------------------------------------------------------------ habits of other tuners

    def enqueue(self, config: Mapping[str, Any]) -> None:
        """Measure ``config`` next (after what is already queued); missing parameters take their defaults.

        Unlike ``seeds=``, a *partial* configuration is fine: ``tuner.enqueue({"block": 64})``. Its trial
        is labelled ``"enqueued"``. A configuration already measured or queued is not measured again.

        Raises:
            PerftuneError: an unknown parameter, or a completed configuration that breaks a constraint.

        Example:
            >>> from perftune.space import Int, Space
            >>> tuner = Tuner(Space({"a": Int(0, 9, default=1), "b": Int(0, 9, default=2)}), seed=0)
            >>> tuner.enqueue({"b": 7})
            >>> first, second = tuner.ask(), tuner.ask()  # the default first, then the enqueued one
            >>> dict(second.config), second.technique
            ({'a': 1, 'b': 7}, 'enqueued')
        """
        from perftune.space import Config

        if not isinstance(config, Mapping):
            raise PerftuneError("enqueue(): expected a mapping of parameter values, "
                                f"got {type(config).__name__}")
        unknown = sorted(set(config) - set(self.space.params))
        if unknown:
            raise PerftuneError(f"enqueue(): unknown parameter(s) {', '.join(unknown)}")
        merged = {**self.space.default(), **config}
        full = self._as_config(Config(merged), "enqueue()")
        if not self._known(full) and all(full != c for c, _ in self._queue):
            self._queue.append((full, "enqueued"))

    def add_trial(
        self,
        config: Mapping[str, Any],
        value: float | Mapping[str, Any] | None = None,
        *,
        metrics: Mapping[str, float] | None = None,
        samples: Sequence[float] | None = None,
        error: str | None = None,
    ) -> Trial:
        """Record a result measured elsewhere: the search learns from it and it is stored like any trial.

        ``add_trial(config, 1.23)``, ``add_trial(config, {"time": 1.2, "size": 300})``, or
        ``add_trial(config, error="crashed")``. It gets the next ticket, is labelled ``"added"``, counts
        against the budget and is never proposed again.

        Raises:
            PerftuneError: an unknown parameter, an invalid or already measured configuration.

        Example:
            >>> from perftune.space import Int, Space
            >>> tuner = Tuner(Space({"x": Int(0, 9)}), seed=0)
            >>> tuner.add_trial({"x": 3}, 0.5).technique, tuner.best.config["x"]
            ('added', 3)
        """
        full = self._as_config(config, "add_trial()")
        self._mark_running()
        known = self._by_config.get(full)
        if known is not None:
            raise PerftuneError(f"add_trial(): {full.to_json()} is already trial {known} of this run")
        queued = [item for item in self._queue if item[0] == full]
        for item in queued:  # measured elsewhere: no need to measure it here
            self._queue.remove(item)
        ticket = self._next_id
        self._next_id += 1
        self._by_config[full] = ticket
        self._pending[ticket] = _Ticket(full, "added")
        try:
            told = self._tell(ticket, value, metrics=metrics, samples=samples, error=error)
        except PerftuneError:
            # A bad value: record nothing, and give the ticket back (a seeded run needs no gaps).
            self._pending.pop(ticket, None)
            self._by_config.pop(full, None)
            self._next_id = ticket
            raise
        self._maybe_checkpoint()
        return told

    def stop(self, reason: str = "stopped") -> None:
        """Issue no new trial: ``ask()`` returns None and ``run()`` ends once what is in flight finished.

        For a callback of :func:`tune` that decides the run is done (``result.stop_reason`` is
        ``reason``).
        """
        self._stop_requested = str(reason)

    # ------------------------------------------------------------------ ask

    def _timed(self, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.deciding_s += time.perf_counter() - t0

    def _wait_for_told(self) -> None:
        """Wait a little for a result the next ticket needs, or fail at once when none can come."""
        need = self._next_id - self.lag
        lost = [i for i in range(self._applied_upto, need)
                if i not in self._trials and i not in self._pending]
        if lost:
            raise PerftuneError(
                f"run {self.run_name!r}: ticket {lost[0]} was issued but its result was never stored (a "
                "store write failed in an earlier version of perftune), and a seeded run cannot go on "
                "without it; start the run again under another name")
        time.sleep(0.01)

    def _ready(self) -> bool:
        """Whether the next ticket may be issued now (deterministic runs wait for old results)."""
        if not self.deterministic:
            return True
        need = self._next_id - self.lag
        return all(i in self._trials for i in range(self._applied_upto, need))

    def _apply_ready(self) -> None:
        """Tell the technique, in ticket order, every result the next ticket may depend on."""
        if not self.deterministic:
            return  # results were told as they arrived
        need = self._next_id - self.lag
        batch = []
        while self._applied_upto < need:
            trial = self._trials[self._applied_upto]
            if trial.status is not Status.CANCELLED:
                batch.append(trial)
            self._applied_upto += 1
        if batch:
            self._timed(self._technique.tell, batch)

    def _known(self, config: Any) -> bool:
        return config in self._by_config

    def _proposer_hook(self) -> Callable[[Any], str | None] | None:
        """The technique's ``proposer_of``, looked up once per technique: an ``isinstance`` on a runtime
        protocol costs about as much as a cheap technique's whole proposal (benchmarks/overhead.py)."""
        cached = getattr(self, "_proposer_cache", None)
        if cached is None or cached[0] is not self._technique:
            from perftune.search._base import LabelsProposals

            hook = self._technique.proposer_of if isinstance(self._technique, LabelsProposals) else None
            cached = (self._technique, hook)
            self._proposer_cache = cached
        return cached[1]

    def _propose(self) -> tuple[Any, str] | None:
        while self._queue:
            config, origin = self._queue.popleft()
            if not self._known(config):
                return config, origin
        proposer = self._proposer_hook()
        for _ in range(_MAX_ASK_ATTEMPTS):
            proposals = self._timed(self._technique.ask, 1)
            if not proposals:
                break
            config = proposals[0]
            if not self.space.is_valid(config):
                continue  # never measured, never counted
            ticket = self._by_config.get(config)
            if ticket is None:
                origin = (proposer(config) if proposer is not None else None) or self._technique_name
                return config, origin
            # A repeat: answer from the cache (when its result may already be known to the search).
            known = self._trials.get(ticket)
            if known is not None and (not self.deterministic or ticket < self._applied_upto):
                self._timed(self._technique.tell, [known])
        for _ in range(_MAX_RANDOM_ATTEMPTS):
            try:
                (config,) = self.space.sample(self._rng, 1)
            except SpaceError:
                return None
            if not self._known(config):
                return config, "random"
        return self._unmeasured()

    def _unmeasured(self) -> tuple[Any, str] | None:
        """A random configuration not tried yet, once random samples keep finding tried ones: drawn from
        every valid configuration, where the space can list them cheaply (at most 50,000 of them; the
        space lists them once). None when every one is tried (:attr:`_exhausted`), or when the space
        cannot list them (then the search only found nothing new: STOP_NOTHING_NEW)."""
        enumeration = getattr(self.space, "_enumeration", None)
        valid = enumeration() if callable(enumeration) else None
        self._exhausted = valid is not None
        if not valid:
            return None
        left = [c for c in valid if c not in self._by_config]
        if not left:
            return None
        return left[int(self._rng.integers(len(left)))], "random"

    def ask(self) -> Trial | None:
        """Issue the next trial, or None when the budget is spent or the space is exhausted.

        A resumed run first hands out again the trials that were in flight when it stopped (under their
        tickets); trials it stored after its last checkpoint are never handed out again.

        Raises:
            PerftuneError: in a seeded run, when the result of an older ticket is needed first.
        """
        self._rederive_stored()
        again = self._take_reissue()  # in flight when the run stopped: issued already, counted already
        if again is not None:
            self._mark_running()
            return again
        reason = self._budget_reason(self.budget)
        if reason is not None:
            self._stop_reason = reason
            return None
        if not self._ready():
            need = self._next_id - self.lag
            waiting = [i for i in range(self._applied_upto, need) if i not in self._trials]
            raise PerftuneError(
                f"ask(): this seeded run applies results in ticket order (lag {self.lag}); "
                f"tell the result of trial {waiting[0]} first")
        trial = self._issue()
        if trial is not None:
            self._mark_running()
        return trial

    def _issue(self) -> Trial | None:
        self._apply_ready()
        proposal = self._propose()
        if proposal is None:
            self._stop_reason = STOP_EXHAUSTED if self._exhausted else STOP_NOTHING_NEW
            return None
        config, origin = proposal
        ticket = self._next_id
        self._next_id += 1
        self._by_config[config] = ticket
        self._pending[ticket] = _Ticket(config, origin)
        if origin == "default" and self._default_id is None:
            self._default_id = ticket
        return Trial(id=ticket, config=config, technique=origin)

    # ------------------------------------------------------------------ tell

    def tell(
        self,
        trial: Trial | int,
        value: float | Mapping[str, Any] | None = None,
        *,
        error: str | None = None,
        status: Status | None = None,
        metrics: Mapping[str, float] | None = None,
        samples: Sequence[float] | None = None,
        started_at: float | None = None,
        finished_at: float | None = None,
    ) -> Trial:
        """Report the outcome of a trial issued by :meth:`ask`.

        ``tell(trial, 1.23)`` reports success; ``tell(trial, error="reason")`` or
        ``tell(trial, status=Status.TIMEOUT)`` a failure; ``tell(trial, {"time": 1.2, "size": 300})``
        a mapping of metrics (``metric=`` of the tuner names the optimised one). A NaN or infinite
        value (or sample) is a failed trial with that reason, as an objective's is in :func:`tune`; a
        value or samples together with ``error=`` or a failing ``status=`` are refused (``metrics=`` are
        kept with a failure).

        ``started_at`` and ``finished_at`` (``time.time()`` instants) are when the evaluation ran, as
        measured by whoever ran it; they are stored with the trial. Both default to the time of this
        call.

        With a store, a checkpoint is written every ``checkpoint_every`` trials and at least every
        ``checkpoint_interval_s`` seconds, as :meth:`run` does.

        Example:
            >>> from perftune.space import Int, Space
            >>> tuner = Tuner(Space({"x": Int(0, 3)}), budget=1)
            >>> trial = tuner.ask()
            >>> told = tuner.tell(trial, 2.0, started_at=100.0, finished_at=101.5)
            >>> (told.started_at, told.finished_at, tuner.ask())
            (100.0, 101.5, None)
        """
        told = self._tell(trial, value, error=error, status=status, metrics=metrics, samples=samples,
                          started_at=started_at, finished_at=finished_at)
        self._maybe_checkpoint()
        return told

    def _tell(
        self,
        trial: Trial | int,
        value: float | Mapping[str, Any] | None = None,
        *,
        error: str | None = None,
        status: Status | None = None,
        metrics: Mapping[str, float] | None = None,
        samples: Sequence[float] | None = None,
        started_at: float | None = None,
        finished_at: float | None = None,
    ) -> Trial:
        """:meth:`tell` without the checkpoint."""
        ticket = trial if isinstance(trial, int) else trial.id
        if ticket not in self._pending:
            raise PerftuneError(f"tell(): trial {ticket} was not issued by this tuner, or was already told")
        if isinstance(trial, Trial) and trial.config != self._pending[ticket].config:
            raise PerftuneError(f"tell(): trial {ticket} was not issued by this tuner (its configuration "
                                f"{dict(trial.config)} is not the one this tuner's trial {ticket} holds, "
                                f"{dict(self._pending[ticket].config)}); tell a trial to the tuner that "
                                "asked for it")
        now = time.time()
        finished = now if finished_at is None else float(finished_at)
        started = finished if started_at is None else float(started_at)
        if started > finished:
            raise PerftuneError(f"tell(): started_at {started} is after finished_at {finished}")
        failed = error is not None or (status is not None and status is not Status.OK)
        if failed and (value is not None or samples):
            raise PerftuneError("tell(): a value (or samples=) and a failure (error=, status=) at once: "
                                "give one or the other (metrics= may go with a failure)")
        if failed:
            st = status if status is not None and status is not Status.OK else Status.FAILED
            try:
                kept = {str(k): float(v) for k, v in (metrics or {}).items()}
            except (TypeError, ValueError) as exc:
                raise PerftuneError(f"tell(): metrics must be numbers ({exc})") from None
            outcome = Outcome(st, reason=error or st.value, metrics=kept, started_at=started,
                              finished_at=finished)
        else:
            raw: Any = value
            if raw is None and metrics is not None:
                raw = dict(metrics)
            elif isinstance(raw, int | float) and metrics:
                raw = {**metrics, "__value__": raw}
            if raw is None and samples:
                raw = statistics.median(samples)  # a trial's value is the median of its samples
            if raw is None:
                raise PerftuneError("tell(): give a value, metrics=, samples=, error= or status=")
            try:
                if isinstance(raw, Mapping) and "__value__" in raw:
                    v = _finite(float(raw["__value__"]))
                    ms = {k: float(x) for k, x in raw.items() if k != "__value__"}
                else:
                    v, ms, _ = interpret(raw, self.metric)
                for s in samples or ():
                    _finite(float(s), "sample")
            except NotFinite as exc:
                # As an objective's NaN is in tune() (and Optuna's tell): a failed trial with its reason.
                outcome = Outcome(Status.FAILED, reason=str(exc), started_at=started, finished_at=finished)
            except ValueError as exc:
                raise PerftuneError(f"tell(): {exc}") from None
            else:
                outcome = Outcome(Status.OK, value=v, metrics=ms, samples=list(samples or []),
                                  started_at=started, finished_at=finished)
        self._heartbeat()  # an ask/tell run keeps its lease alive too
        return self._record(ticket, outcome)

    def _record(self, ticket: int, outcome: Outcome) -> Trial:
        # The ticket stays pending until the store has the trial: a write that fails (a lost database
        # connection) leaves it in the crash checkpoint, and a resume measures it again.
        issued = self._pending[ticket]
        trial = Trial(id=ticket, config=issued.config, technique=issued.technique, status=outcome.status,
                      reason=outcome.reason, metrics=dict(outcome.metrics), samples=list(outcome.samples),
                      worker=outcome.worker, started_at=outcome.started_at, finished_at=outcome.finished_at,
                      intermediate=dict(outcome.intermediate))
        if outcome.status is Status.OK:
            assert outcome.value is not None
            trial.value = outcome.value
            trial.loss = outcome.value if self.goal == "min" else -outcome.value
            if not trial.samples:
                trial.samples = [outcome.value]
            if self._checks_metrics:
                self._check_metrics(trial)
        if self._store is not None and self._run is not None:
            self._store.add_trial(self._run.id, trial)
        del self._pending[ticket]
        self._shared.update(outcome.published)
        self._absorb(trial)
        if (self._best is None and trial.status is Status.FAILED
                and (trial.reason or "").removeprefix("ValueError: ").startswith(MISSING_METRIC)):
            # metric= names what the objective never returns (a typo, most often): stop after a few trials
            # rather than spend the whole budget on failures (they are kept, in the store too).
            self._n_missing_metric += 1
            if self._n_missing_metric >= MISSING_METRIC_TRIALS and self._stop_requested is None:
                self.stop(f"{STOP_MISSING_METRIC}: {(trial.reason or '').removeprefix('ValueError: ')}")
        self._count_same_failure(trial)
        if not self.deterministic and trial.status is not Status.CANCELLED:
            self._timed(self._technique.tell, [trial])
        return trial

    def _count_same_failure(self, trial: Trial) -> None:
        """Stop a run whose first :data:`SAME_FAILURE_TRIALS` trials all failed with one reason."""
        if self._same_failure is None or trial.status is Status.CANCELLED:
            return
        if trial.status is not Status.FAILED or not trial.reason:
            self._same_failure = None  # a success, or another kind of outcome: the objective can run
            return
        reason, count = self._same_failure
        if count and trial.reason != reason:
            self._same_failure = None
            return
        count += 1
        self._same_failure = (trial.reason, count)
        if count >= SAME_FAILURE_TRIALS and self._stop_requested is None:
            first = trial.reason.splitlines()[0][:200]
            self.stop(f"{STOP_SAME_FAILURE}: {count} trials in a row, none before them succeeded: {first}")

    def _check_metrics(self, trial: Trial) -> None:
        check_metrics(self.objectives, trial)

    def _update_front(self, trial: Trial) -> None:
        """Keep the tickets of the Pareto front as results arrive (one comparison per front member).

        The front of :meth:`Objectives.pareto` over the same trials, so that ``tuner.pareto`` is
        ``result.pareto``: equal vectors all stay, a configuration counts once (its first ticket that can
        be on the front), and a single objective's front is the trials that share the best value.
        """
        from perftune.search import dominates

        objectives = self.objectives
        vector = objectives.losses(trial) if trial.loss is not None else None
        if vector is None or not objectives.feasible(trial.metrics):
            return
        first = self._front_configs.get(trial.config)
        if first is not None and first < trial.id:
            return  # the configuration is there already, under its earlier ticket
        self._front_configs[trial.config] = trial.id
        if first is not None:
            # Measured twice, and the earlier ticket finished later: rare enough to recompute the front.
            self._front = [t.id for t in objectives.pareto(self._trials.values())]
            return
        members = [(i, objectives.losses(self._trials[i])) for i in self._front]
        if any(v is not None and dominates(v, vector) for _, v in members):
            return
        self._front = [i for i, v in members if v is not None and not dominates(vector, v)]
        self._front.append(trial.id)

    @property
    def pareto(self) -> list[Trial]:
        """The current Pareto front (see :attr:`Result.pareto`), kept as results arrive."""
        return [self._trials[i] for i in sorted(self._front)]

    def _absorb(self, trial: Trial) -> None:
        """Account for a finished trial: results, best, patience and counts."""
        self._trials[trial.id] = trial
        if trial.technique == "default" and self._default_id is None:
            # The baseline taken from the store (an unseeded resume whose checkpoint predates it).
            self._default_id = trial.id
        self._status_counts[trial.status.value] = self._status_counts.get(trial.status.value, 0) + 1
        if trial.status is Status.CANCELLED:
            # Cancelled evaluations are not counted; their configuration may be proposed again later.
            if self._by_config.get(trial.config) == trial.id:
                del self._by_config[trial.config]
            return
        self._by_config.setdefault(trial.config, trial.id)
        if trial.status is Status.PRUNED:
            # Stopped early: not a full evaluation, so neither the budget nor the patience counts it
            # (docs/fidelity.md); it stays known, so that its configuration is not proposed again.
            return
        self._n_counted += 1
        self._update_front(trial)
        if trial.loss is not None and (self._best is None or trial.loss < self._best.loss):  # type: ignore[operator]
            self._best = trial
            self._n_since_best = 0
        else:
            self._n_since_best += 1

    # ------------------------------------------------------------------ checkpoints

    def _checkpoint_payload(self) -> dict[str, Any]:
        from perftune.search._base import state_of

        driver = {
            "fingerprint": self.space.fingerprint(), "goal": self.goal, "metric": self.metric,
            "technique_name": self._technique_name, "technique_seed": self._technique_seed,
            "seed": self.seed, "lag": self.lag, "rng": self._rng.bit_generator.state,
            "next_id": self._next_id, "applied_upto": self._applied_upto,
            "queue": [list(item) for item in self._queue],
            "pending": [[ticket, p.config, p.technique] for ticket, p in self._pending.items()],
            "n_since_best": self._n_since_best, "default_id": self._default_id,
        }
        if self._checks_metrics:
            driver["objectives"] = self.objectives.to_dict()
        if self._technique_settings is not None:
            driver["technique_settings"] = _settings_data(self._technique_settings)
        return {"driver": driver, "technique": state_of(self._technique), "shared": self._shared_data()}

    def _shared_data(self) -> dict[str, Any]:
        """What objectives published (a verifier's risk model, ...) that a checkpoint can hold as data.

        A value it cannot hold (an object) is left out, with one warning per key, rather than failing the run.
        """
        kept: dict[str, Any] = {}
        for key, value in self._shared.items():
            problem = _checkpoint.data_problem(value, self.space, f"shared[{key!r}]")
            if problem is None:
                kept[key] = value
                continue
            if key not in self._shared_warned:
                self._shared_warned.add(key)
                import warnings

                from perftune.errors import RunWarning

                warnings.warn(f"{problem}: the published value {key!r} is not kept in the run's checkpoint "
                              "(a resumed run starts without it); publish plain data", RunWarning,
                              stacklevel=2)
        return kept

    @staticmethod
    def _state_from(payload: dict[str, Any], space: Any, what: str) -> _State:
        """Rebuild the driver state and the technique from a decoded checkpoint."""
        from perftune.search._base import load_state

        try:
            d = payload["driver"]
            Tuner._check_driver(d, space, what)
            deterministic = d["seed"] is not None
            from perftune.search import Objectives

            objectives = None if d.get("objectives") is None else Objectives.from_dict(d["objectives"])
            technique_settings = _settings_from(d.get("technique_settings"), d["technique_name"])
            technique = _create_technique(d["technique_name"], space, d["technique_seed"], deterministic,
                                          objectives, technique_settings)
            load_state(technique, payload["technique"])
            np.random.default_rng().bit_generator.state = d["rng"]  # a bad state fails here, not later
            from perftune.space import Config

            pending = {int(ticket): _Ticket(config, str(origin)) for ticket, config, origin in d["pending"]}
            queue = [(config, str(origin)) for config, origin in d["queue"]]
            configs = [*(p.config for p in pending.values()), *(c for c, _ in queue)]
            if not all(isinstance(c, Config) for c in configs):
                raise ValueError("a queued or pending ticket holds no configuration")
            return _State(
                fingerprint=str(d["fingerprint"]), goal=d["goal"], metric=d["metric"],
                technique_name=d["technique_name"], technique_seed=d["technique_seed"], seed=d["seed"],
                lag=int(d["lag"]), technique=technique, rng=d["rng"], next_id=int(d["next_id"]),
                applied_upto=int(d["applied_upto"]),
                queue=queue, pending=pending,
                n_since_best=int(d["n_since_best"]),
                extras={"default_id": d["default_id"], "objectives": objectives,
                        "shared": Tuner._shared_from(payload.get("shared")),
                        "technique_settings": technique_settings},
            )
        except _checkpoint.CheckpointError:
            raise
        except PerftuneError as exc:
            raise _checkpoint.CheckpointError(f"{what} does not fit this perftune: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise _checkpoint.CheckpointError(f"{what} is corrupt: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _shared_from(shared: Any) -> dict[str, Any]:
        """The published values of a checkpoint (none in one written before they were kept)."""
        if shared is None:
            return {}
        if not isinstance(shared, dict) or not all(isinstance(k, str) for k in shared):
            raise ValueError(f"shared: expected an object of published values, got {type(shared).__name__}")
        return dict(shared)

    @staticmethod
    def _check_driver(d: Any, space: Any, what: str) -> None:
        """Check every field of a checkpoint's driver state: its type, its range, and that its tickets agree
        with each other (a checkpoint is input from whoever could write the store: ``lag = -1`` would make
        the resumed run wait for ever, ``next_id = -100`` would store trials under negative tickets).

        Raises:
            CheckpointError: ``WHAT is corrupt: driver.FIELD: ...``, naming the field.
        """
        # The fields _checkpoint_payload writes ("objectives" only with several objectives), and the
        # largest ticket or count accepted: 2**53, what every JSON reader keeps exact.
        keys = ("fingerprint", "goal", "metric", "technique_name", "technique_seed", "seed", "lag", "rng",
                "next_id", "applied_upto", "queue", "pending", "n_since_best", "default_id")
        most = 2**53

        def corrupt(detail: str) -> _checkpoint.CheckpointError:
            return _checkpoint.CheckpointError(f"{what} is corrupt: {detail}")

        def bad(key: str, expected: str) -> _checkpoint.CheckpointError:
            return corrupt(f"driver.{key}: expected {expected}, got {repr(d.get(key))[:60]}")

        def integer(key: str, low: int, high: int, *, optional: bool = False) -> int:
            value = d.get(key)
            if value is None and optional:
                return low
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise bad(key, f"an integer from {low} to {high}" + (" or null" if optional else ""))
            return value

        def text(key: str, *, optional: bool = False) -> None:
            value = d.get(key)
            if not (isinstance(value, str) and value) and not (optional and value is None):
                raise bad(key, "a non-empty string" + (" or null" if optional else ""))

        def rows(key: str, n: int) -> list[Any]:
            value = d.get(key)
            if not isinstance(value, list | tuple) or not all(
                    isinstance(item, list | tuple) and len(item) == n and isinstance(item[-1], str)
                    for item in value):
                shape = "[configuration, origin] pairs" if n == 2 else "[ticket, config, origin] triples"
                raise bad(key, f"a list of {shape}")
            return list(value)

        if not isinstance(d, Mapping):
            raise corrupt(f"driver: expected an object, got {type(d).__name__}")
        missing = [k for k in keys if k not in d]
        if missing:
            raise corrupt(f"driver: no {', '.join(missing)}")
        text("fingerprint")
        if space is not None and d["fingerprint"] != space.fingerprint():
            raise corrupt("driver.fingerprint: it was written for another search space than the run's")
        if d["goal"] not in ("min", "max"):
            raise bad("goal", "'min' or 'max'")
        text("metric", optional=True)
        text("technique_name")
        for key in ("seed", "technique_seed"):
            value = d[key]
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise bad(key, "an integer or null")
        if not isinstance(d["rng"], Mapping):
            raise bad("rng", "an object")
        next_id = integer("next_id", 0, most)
        integer("lag", 0, most)
        integer("applied_upto", 0, next_id)
        integer("n_since_best", 0, most)
        if d["default_id"] is not None:
            if next_id == 0:
                raise bad("default_id", "null before any ticket is issued")
            integer("default_id", 0, next_id - 1)
        rows("queue", 2)
        tickets = [item[0] for item in rows("pending", 3)]
        for ticket in tickets:
            if isinstance(ticket, bool) or not isinstance(ticket, int) or not 0 <= ticket < next_id:
                raise corrupt(f"driver.pending: ticket {repr(ticket)[:40]} is not one issued before "
                              f"driver.next_id ({next_id})")
        if len(set(tickets)) != len(tickets):
            raise corrupt("driver.pending: a ticket is pending twice")
        objectives = d.get("objectives")
        if objectives is not None and not isinstance(objectives, Mapping):
            raise bad("objectives", "an object or null")

    # ------------------------------------------------------------------ the lease

    def _take_lease(self) -> None:
        """Become the run's only driver (StoreError naming the holder when another one drives it)."""
        if self._store is None or self._run is None or self._lease is not None:
            return
        acquire = getattr(self._store, "acquire_lease", None)
        if acquire is None:
            return  # a store object without leases (a test double)
        self._lease = acquire(self._run.id)
        self._lease_lost = False
        self._last_heartbeat_t = time.monotonic()

    def _heartbeat(self, *, force: bool = False) -> None:
        if self._lease is None or self._store is None:
            return
        if not force and time.monotonic() - self._last_heartbeat_t < _LEASE_HEARTBEAT_S:
            return
        from perftune.store import LeaseError

        try:
            self._store.renew_lease(self._lease)
        except LeaseError:
            # Another driver took the run over (this one looked dead): stop writing its state.
            self._lease, self._lease_lost = None, True
            raise
        self._last_heartbeat_t = time.monotonic()

    @property
    def holds_lease(self) -> bool:
        """Whether this tuner holds its run's lease (it drives the run: ``run()`` not ended, or not begun)."""
        return self._lease is not None

    @property
    def n_waiting(self) -> int:
        """Tickets of a resumed run that were in flight when it stopped, waiting to be measured again."""
        return len(getattr(self, "_reissue", ()))

    def release(self) -> None:
        """Give the run's lease back without ending the run (a driver that stops before its loop begins):
        another driver may then resume it. ``run()`` and :meth:`close` give it back themselves.

        A resumed run that recorded nothing since gets back the status it had (``finished``, ...); one
        that recorded trials stays ``running``, which ``perftune runs`` shows as "running (no driver)".
        """
        before, self._status_before = self._status_before, None
        if (before is not None and self._lease is not None and self._store is not None
                and self._run is not None and len(self._trials) == self._n_trials_at_mark):
            with contextlib.suppress(Exception):  # the lease is given back whatever happens here
                self._store.finish_run(self._run.id, before)
                self._run_status = before
        self._release_lease()

    def _mark_running(self) -> None:
        """A run that had ended (resumed, or run again) is driven again: marked running, so that `perftune
        runs` shows it so (with "no driver" once this driver dies). A resume that measures nothing leaves
        the run as it was."""
        if (self._run_status in (None, "running") or self._store is None or self._run is None
                or self._lease is None):
            return
        self._store.finish_run(self._run.id, "running")
        self._status_before, self._run_status = self._run_status, "running"
        self._n_trials_at_mark = len(self._trials)

    def _ended(self, status: str) -> None:
        """The run is stored as ``status`` (finish_run): what a later run() or resume starts from."""
        self._run_status, self._status_before = status, None

    def _release_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None and self._store is not None:
            with contextlib.suppress(Exception):  # a dead store must not hide why the run ended
                self._store.release_lease(lease)

    def checkpoint(self) -> None:
        """Write the whole driver state to the store atomically (no-op without a store)."""
        if self._store is None or self._run is None or self._lease_lost:
            return
        self._heartbeat(force=True)
        blob = _checkpoint.encode(self._checkpoint_payload(), self.space)
        self._store.save_checkpoint(self._run.id, len(self._trials), blob)
        self._last_checkpoint_t = time.monotonic()
        self._last_checkpoint_n = len(self._trials)

    def _maybe_checkpoint(self) -> None:
        if self._store is None:
            return
        self._heartbeat()
        if (len(self._trials) - self._last_checkpoint_n >= self.checkpoint_every
                or time.monotonic() - self._last_checkpoint_t >= self.checkpoint_interval_s):
            self.checkpoint()

    @classmethod
    def resume(
        cls,
        run: str | int,
        store: Store | str | None = None,
        *,
        space: Space | None = None,
        lease: Lease | None = None,
    ) -> Tuner:
        """Continue a stored run from its last checkpoint.

        Trials that finished after the checkpoint are taken from the store (never measured twice) and
        count at once (:attr:`n_trials`, :meth:`result`, the budget); a seeded run re-derives their
        tickets here, checking that each gives the stored configuration. Evaluations that were in flight
        when the run stopped are issued again under their tickets, first (by ``run()`` and ``ask()``).
        :attr:`budget` is the run's stored budget; one given to ``run()`` replaces it. The run is marked
        running once it is driven again (``run()``, ``ask()``); :meth:`release` before that leaves it as
        it was.
        The tuner holds the run's lease (no other driver may drive it) until ``run()`` ends, is
        interrupted, or ``close()`` is called; a lease of a dead driver on this host, or one whose
        heartbeat is older than ``perftune.store.LEASE_TIMEOUT_S``, is taken over.

        Args:
            run: Run name, numeric id or ``"latest"``.
            store: Store or URL (default: ``$PERFTUNE_STORE`` or ``./perftune.db``).
            space: Optional space to check against the stored one (must be the same).
            lease: The run's lease when the caller took it already (``store.acquire_lease``), e.g.
                before preparing a task, which measures; else it is taken here.

        Raises:
            LeaseError: another driver drives the run ("run X is being driven by host:pid since T").
            CheckpointError: the checkpoint is of another format or perftune version, or corrupt.
            PerftuneError: a stored ticket re-derives another configuration than the stored one.
        """
        from perftune.space import Space
        from perftune.store import open_store

        st_store = store if store is not None and not isinstance(store, str) else open_store(store)
        info = st_store.get_run(run)
        stored_space = Space.from_dict(info.space or {})  # {} fails like None: "expected ... 'params'"
        if space is not None and space.fingerprint() != stored_space.fingerprint():
            raise PerftuneError(f"resume: run {info.name!r} was made with a different space")
        loaded = st_store.load_checkpoint(info.id)
        if loaded is None:
            raise PerftuneError(f"resume: run {info.name!r} has no checkpoint to resume from")
        # Taken before anything is decoded or measured: a second driver of this run stops here.
        if lease is None and hasattr(st_store, "acquire_lease"):
            lease = st_store.acquire_lease(info.id)
        elif lease is not None and lease.run_id != info.id:
            raise PerftuneError(f"resume: the lease given is for run {lease.run_id}, not {info.name!r}")
        try:
            _, blob = loaded
            what = f"resume: the checkpoint of run {info.name!r}"
            run_space = space if space is not None else stored_space
            state = cls._state_from(_checkpoint.decode(blob, run_space, what=what), run_space, what)
            objectives = state.extras.get("objectives")
            goal: Any = state.goal if objectives is None else dict(zip(objectives.names, objectives.goals,
                                                                         strict=True))
            tuner = cls(run_space, goal=goal, seed=state.seed,
                        store=st_store, technique=state.technique_name,
                        metric=state.metric if objectives is None or not objectives.is_multi else None,
                        constraints=None if objectives is None else [str(c) for c in objectives.constraints],
                        _resume_state=state, _resume_run=info)
            tuner._lease = lease
            tuner._last_heartbeat_t = time.monotonic()
            tuner._resume_pending = set(state.pending)
            pruner = (info.settings or {}).get("pruner")
            if pruner is not None:
                try:
                    tuner._pruner = False if pruner is False else ASHA.from_dict(pruner)
                except PerftuneError as exc:
                    raise PerftuneError(f"resume: run {info.name!r}: settings.pruner: {exc}") from None
            tuner._replay_store(st_store.trials(info.id))
            budget = (info.settings or {}).get("budget")
            if isinstance(budget, Mapping) and any(v is not None for v in budget.values()):
                try:
                    tuner.budget = Budget(**{k: v for k, v in budget.items() if v is not None})
                except (TypeError, PerftuneError) as exc:
                    raise PerftuneError(f"resume: run {info.name!r}: settings.budget: {exc}") from None
                tuner._budget_from_store = True
            if tuner._stored_after:
                if (tuner._next_id == 0 and isinstance(tuner._pruner, ASHA)
                        and tuner._pruner.random_starts):
                    # A checkpoint from before the run's first trial: its first run() drew these first.
                    tuner._queue_random_starts(tuner._pruner.random_starts)
                    tuner._random_starts_queued = True
                # Every stored trial counts now (n_trials, result(), budgets), not once run() re-derived it.
                tuner._rederive_stored()
            tuner._run_status = info.status  # marked running once driven (_mark_running)
        except BaseException:
            if lease is not None:
                with contextlib.suppress(Exception):
                    st_store.release_lease(lease)
            raise
        return tuner

    def _replay_store(self, stored: list[Trial]) -> None:
        """Bring the resumed state in line with what the store holds."""
        checkpoint_next = self._next_id
        self._stored_after = {}
        for trial in sorted(stored, key=lambda t: t.id):
            if self.deterministic and trial.id >= checkpoint_next:
                # Issued and finished after the checkpoint: a seeded run re-derives the same proposal for
                # this ticket and then takes the stored result instead of measuring it again.
                self._stored_after[trial.id] = trial
                continue
            self._pending.pop(trial.id, None)  # finished after the checkpoint: keep it, don't re-measure
            self._absorb(trial)
            if not self.deterministic and (trial.id >= checkpoint_next or trial.id in self._resume_pending):
                self._technique.tell([trial])
        if not self.deterministic and stored:
            self._next_id = max(self._next_id, max(t.id for t in stored) + 1)
        # Tickets in flight at the checkpoint that never finished are issued again, first.
        self._reissue = sorted(self._pending)
        for ticket in self._reissue:
            self._by_config[self._pending[ticket].config] = ticket

    @classmethod
    def attach(
        cls,
        run: str | int,
        store: Store | str | None = None,
        *,
        space: Space | None = None,
        budget: Budget | int | str | None = None,
        heartbeat_s: float = 5.0,
        timeout_s: float = 60.0,
        **create: Any,
    ) -> Worker:
        """A worker of a shared run: ``Tuner.attach("conv", store=url).work(objective)``.

        Any number of processes, on any machines, attach to one run of a PostgreSQL store (or a SQLite
        file on one machine) and each pulls trials from it: a trial is claimed by one worker, which
        heartbeats while it measures; the trial of a dead worker is issued again once, and a result is
        accepted only from the trial's current holder, so nothing is measured twice and the budget is
        met exactly. Whichever worker holds the run's lease proposes for all of them (the others only
        measure); when it dies, another takes the role over from the stored state. See
        docs/running-at-scale.md (what determinism means then).

        Args:
            run: The run's name or id.
            store: Store or URL (default: ``$PERFTUNE_STORE`` or ``./perftune.db``).
            space: With a run that does not exist yet, create it on this space (the first of the
                processes that start together wins, the others attach to it); with one that exists,
                it must be the same space.
            budget: The budget of a run created here (required then): trials or a duration.
            heartbeat_s: How often a worker signs of life while it measures (and the proposer).
            timeout_s: A worker (or the proposer) silent for this long is dead: its trial is issued
                again (the proposer role moves). On one host a dead process is seen at once.
            **create: Further arguments of :class:`Tuner` for a run created here (``seed``, ``goal``,
                ``technique``, ``metric``, ``seeds``, ...).

        Raises:
            PerftuneError: no such run and no ``space``; a different space; bad timings.

        Example:
            >>> from perftune.space import Int, Space
            >>> worker = Tuner.attach("doc-shared", store="sqlite://", space=Space({"x": Int(0, 9)}),
            ...                       budget=6, seed=0, heartbeat_s=0.5, timeout_s=5)
            >>> summary = worker.work(lambda c: (c["x"] - 3) ** 2)
            >>> summary.n_measured, summary.stop_reason, worker.result().best.config["x"]
            (6, 'budget', 3)
        """
        from perftune.drive._attach import Worker

        return Worker(cls, run, store, space=space, budget=budget, heartbeat_s=heartbeat_s,
                      timeout_s=timeout_s, create=create)

    @staticmethod
    def _stored_result(store: Store, info: RunInfo, stop_reason: str) -> Result:
        """The result of a run as its store holds it (a shared run has no single driver to ask)."""
        from perftune.search import Objectives

        trials = store.trials(info.id)
        raw = info.settings.get("objectives")
        objectives = Objectives.from_dict(raw) if isinstance(raw, Mapping) else None
        default = next((t for t in trials if t.technique == "default"), None)
        return Result(best=store.best(info.id), trials=trials, default=default, run_id=info.id,
                      run_name=info.name, stop_reason=stop_reason, goal=info.goal, objectives=objectives)

    def _adopt(self, ticket: int, config: Config, technique: str) -> None:
        """Take over a ticket that a shared run's earlier proposer issued after its last checkpoint."""
        if ticket in self._trials or ticket in self._pending:
            return
        self._pending[ticket] = _Ticket(config, technique)
        self._by_config[config] = ticket
        self._next_id = max(self._next_id, ticket + 1)

    def _accept_stored(self, trial: Trial) -> None:
        """A result a shared run's worker stored: account for it, tell the search (never store it twice)."""
        if self._pending.pop(trial.id, None) is None:
            return
        self._absorb(trial)
        if not self.deterministic and trial.status is not Status.CANCELLED:
            self._timed(self._technique.tell, [trial])

    # ------------------------------------------------------------------ the loop

    def _take_reissue(self) -> Trial | None:
        while self._reissue:
            ticket = self._reissue.pop(0)
            pending = self._pending.get(ticket)
            if pending is not None:
                return Trial(id=ticket, config=pending.config, technique=pending.technique)
        return None

    def _next_trial(self, budget: Budget | None) -> Trial | None:
        self._rederive_stored()
        again = self._take_reissue()
        if again is not None:
            return again
        reason = self._budget_reason(budget)
        if reason is not None:
            self._stop_reason = reason
            return None
        if not self._ready():
            return None  # a stored ticket waits for the result of one in flight
        return self._issue()

    def _rederive_stored(self) -> None:
        """Seeded resume: take, in ticket order, the trials stored after the last checkpoint.

        Each ticket is issued again, as the run that stopped issued it (the same proposal, checked to be
        the stored configuration), and its stored result is taken instead of measuring it again. A
        ticket in between that the store lacks was in flight when the run stopped: it is issued here
        too, and handed out again first (``_reissue``), as the checkpoint's are. Stops where the next
        stored ticket needs a result still to come (its trials count meanwhile: :attr:`n_trials`).
        """
        stored_after = self._stored_after
        while stored_after and self._ready():
            stored = stored_after.pop(self._next_id, None)
            if stored is None:
                lost = self._issue()  # in flight when the run stopped: measured again
                if lost is None:
                    raise PerftuneError(f"resume: ticket {self._next_id} cannot be issued again (the space "
                                        "is exhausted); the search is not deterministic")
                self._reissue.append(lost.id)
                continue
            self._take_stored(stored)

    def _take_stored(self, stored: Trial) -> None:
        """Issue ticket ``stored.id`` again and account for its stored result (see _rederive_stored)."""
        ticket = stored.id
        assert ticket == self._next_id
        head = self._queue[0][0] if self._queue else None
        if stored.technique in ("added", "enqueued") and head != stored.config:
            # Given by the caller after the checkpoint (add_trial, enqueue): not a proposal to derive.
            if stored.technique == "enqueued":
                self._apply_ready()  # as ask() did before it took the configuration from the queue
            for item in [item for item in self._queue if item[0] == stored.config]:
                self._queue.remove(item)
            self._next_id += 1
            self._by_config[stored.config] = ticket
        else:
            trial = self._issue()
            self._pending.pop(ticket, None)
            if trial is None or trial.config != stored.config:
                raise PerftuneError(f"resume: ticket {ticket} re-derived a different configuration; "
                                    "the search is not deterministic")
        if self._fidelity is not None and stored.intermediate:
            # Its reports go on the rungs where the run that crashed put them: before the next ticket.
            # (Re-derived before run() began, they are replayed when its rungs are made.)
            from perftune.drive._fidelity import replay

            replay(self._fidelity, stored.id, stored.intermediate)
        self._absorb(stored)

    def run(
        self,
        objective: Callable[[Any], Any],
        budget: Budget | int | str | None = None,
        *,
        workers: int = 1,
        timeout_s: float | None = None,
        executor: Executor | str | None = None,
        scheduler: str | None = None,
        progress: bool | ProgressSettings = False,
        on_trial: Callable[[Trial], None] | None = None,
        pruner: ASHA | bool | None = None,
    ) -> Result:
        """Tune until the budget is spent; evaluations run on ``workers`` local processes.

        ``executor="dask"`` with ``scheduler="tcp://host:8786"`` (or ``"local:N"``) runs them on a
        Dask cluster instead; ``workers`` stays the number of evaluations in flight.

        A time budget (``"20s"``, ``Budget(seconds=...)``) is the driver's: no evaluation starts after
        it, and the evaluations in flight when it runs out are stopped and recorded as CANCELLED with
        the reason ``"time budget reached"`` (they do not count as trials; what finished is kept).
        So that a hanging objective can be stopped, a time budget runs even ``workers=1`` in a worker
        process (forked: closures work, but side effects of the objective stay in that process);
        pass ``executor=InlineExecutor(objective, metric)`` to evaluate in this process instead (an
        objective that cannot run in a fork, e.g. one using a GPU context made here), at the price of
        a budget that cannot interrupt an evaluation.

        Ctrl-C stops cleanly: evaluations in flight are cancelled, a checkpoint is written, and
        KeyboardInterrupt propagates; the run can be resumed. ``on_trial(trial)`` is called in the
        driver after each finished trial.

        ``progress=True`` reports on stderr: trials done of the budget with an ETA from the measured
        rate, or the time left, the best so far and the failures; one line rewritten in place in a
        terminal, else a plain line every 10 s (:class:`~perftune.drive.ProgressSettings` changes that).
        Silent by default.

        An objective that declares a ``context`` parameter is called as ``objective(config,
        context=...)`` with the :class:`~perftune.drive.EvalContext` of :meth:`context_for`, in
        whichever process or Dask worker it runs.

        An objective that declares a ``trial`` parameter (after the configuration) reports intermediate
        values, ``trial.report(step, value)``, and stops when ``trial.should_prune()`` says so (or by
        raising :class:`perftune.Pruned`): ``pruner`` decides, an :class:`~perftune.drive.ASHA` (None
        or True: the objective's own ``pruner`` attribute if it has one, such as a task file with a
        fidelity parameter, else the run's own, stored with it when a ``run()`` first pruned (so a
        resumed run prunes as before; another ASHA is refused), else ``ASHA()``, eta 3 from step 1, 9
        random configurations first; False: record, never prune). A pruned
        trial is PRUNED with the reason and does not count against the budget's evaluations (see
        docs/fidelity.md). A run of several objectives is not pruned: give ``pruner=False``.
        """
        limit = Budget.coerce(budget)
        if limit is None:
            limit = self.budget
        elif not self._budget_from_store:
            limit = limit.merged(self.budget)
        # (A resumed run's stored budget gives way to the one given here: run(f, 150) extends it.)
        if limit is None:
            raise PerftuneError("run(): give a budget (a number of trials, a duration or a perftune.Budget)")
        _check_run_args(workers, executor, timeout_s)
        if pruner is not None and not isinstance(pruner, ASHA | bool):
            raise PerftuneError(f"pruner must be a perftune.drive.ASHA, True or False, got {pruner!r}")
        reports, prune_with = self._pruner_of(objective, pruner)  # before anything starts or is measured
        self._take_lease()  # again, when an earlier run() of this tuner gave the run back
        self._mark_running()
        self._remember_budget(limit)
        if reports:
            self._remember_pruner(prune_with)
        if executor == "dask":
            from perftune.drive._dask import DaskExecutor

            executor = DaskExecutor(objective, self.metric, workers, scheduler or "local:2", timeout_s)
        elif isinstance(executor, str) and executor != "local":
            raise PerftuneError(f"executor must be 'local' or 'dask', got {executor!r}")
        if executor is None or isinstance(executor, str):  # "local": any other name was refused above
            # In this process nothing can stop an evaluation that hangs: a time budget needs a worker.
            if workers == 1 and timeout_s is None and limit.seconds is None:
                executor = InlineExecutor(objective, self.metric)
            else:
                executor = ProcessExecutor(objective, self.metric, workers, timeout_s)
        from perftune.search._base import ParallelismAware, PreloadsImports

        if isinstance(self._technique, ParallelismAware):
            self._technique.set_parallelism(executor.capacity)
        if isinstance(executor, InlineExecutor) and isinstance(self._technique, PreloadsImports):
            # Nothing forks this process during the run: the model's slow first import can overlap
            # with the first measurements instead of stopping the run at the first fit.
            self._technique.preload_imports()
        deadline = None if limit.seconds is None else time.monotonic() + limit.seconds
        self._deadline = deadline
        settings = (progress if isinstance(progress, ProgressSettings)
                    else ProgressSettings() if progress else None)
        bar = _Progress(self, limit, settings) if settings is not None else None
        self._stop_reason = ""
        in_flight: set[int] = set()
        self._fidelity = self._start_fidelity(prune_with) if reports else None  # removed below
        try:
            self._loop(executor, limit, deadline, in_flight, bar, on_trial)
        except KeyboardInterrupt:
            # In-flight tickets stay pending in the checkpoint, so that a resume issues them again. A
            # second Ctrl-C waits until the run is stored as interrupted and its lease given back.
            with _interrupts_held():
                executor.cancel_all("interrupted")
                self._stop_reason = "interrupted"
                self._finish(executor, bar, "interrupted")
            if self._store is not None and self._run is not None:
                import sys

                exc = sys.exception()
                if exc is not None:  # printed under the traceback
                    url = self._store.url
                    where = "STORE_URL" if "***" in url else repr(url)  # its password is not printed
                    exc.add_note(
                        f"perftune: run {self._run.name!r} was interrupted after {len(self.trials)} trials; "
                        f"continue it with perftune.Tuner.resume({self._run.name!r}, {where})"
                        ".run(objective, budget)")
            raise
        except BaseException:
            with _interrupts_held():
                self._finish(executor, bar, "crashed")
            raise
        finally:
            self._deadline = None
            self._stop_fidelity()
        with _interrupts_held() as held:
            self._finish(executor, bar, "finished")
        if held:
            raise KeyboardInterrupt  # pressed while the run ended: it ended, stored as finished
        return self.result()

    def _pruner_of(self, objective: Any, pruner: ASHA | bool | None) -> tuple[bool, ASHA | None]:
        """Whether the objective reports, and the ASHA settings that judge it (None: record, never prune).

        Without ``pruner`` (None or True), a run that pruned before (a resumed run, a second ``run()``)
        keeps its settings, which the store keeps with it (``settings["pruner"]``).

        Raises:
            PerftuneError: another ASHA than the run's, or pruning a run of several objectives.
        """
        if not takes_trial(objective):
            return False, None
        # A task file's objective says what its rungs are (its fidelity levels), or None without levels.
        own = getattr(objective, "pruner", False)
        if own is None and pruner is None:
            return False, None  # an objective that says it has no levels to report (a task file without any)
        if pruner is False:
            return True, None
        stored = self._pruner
        asha = pruner if isinstance(pruner, ASHA) else own if isinstance(own, ASHA) else None
        if asha is not None and isinstance(stored, ASHA) and asha != stored:
            raise PerftuneError(f"run(): this run prunes with {stored!r} (stored with it), not {asha!r}; "
                                "give the same pruner, or none to keep the run's")
        if asha is None:
            asha = stored if isinstance(stored, ASHA) else None if stored is False else ASHA()
        if asha is not None and self.objectives.is_multi:
            raise _multi_pruning_error(self.objectives, "run()")
        return True, asha

    def _remember_budget(self, limit: Budget) -> None:
        """Store the budget run() works to with the run (``settings["budget"]``), so that every view shows
        progress against it and a resumed run continues to it (a budget given to tune() or run() only,
        not to the Tuner, was not stored before)."""
        stored = dict(limit.__dict__)
        if stored == self._budget_stored:
            return
        update = getattr(self._store, "update_settings", None)  # a store object without it: a test double
        if update is not None and self._run is not None:
            update(self._run.id, {"budget": stored})
            self._budget_stored = stored

    def _remember_pruner(self, asha: ASHA | None) -> None:
        """Store the run's pruner with it (``settings["pruner"]``: the ASHA settings, or false), so that a
        resumed run prunes as it did."""
        setting: ASHA | bool = False if asha is None else asha
        if setting == self._pruner:
            return
        self._pruner = setting
        update = getattr(self._store, "update_settings", None)  # a store object without it: a test double
        if update is not None and self._run is not None:
            update(self._run.id, {"pruner": False if asha is None else asha.to_dict()})

    def _start_fidelity(self, settings: ASHA | None) -> Fidelity:
        """The rungs of a run whose objective reports, with what earlier trials of the run reported."""
        import tempfile

        board = tempfile.mkdtemp(prefix="perftune-rungs-")
        fidelity = Fidelity(settings, self.goal, board)
        from perftune.drive._fidelity import replay

        for trial in self.trials:  # a resumed run, or a second run() of this tuner
            if trial.intermediate:
                replay(fidelity, trial.id, trial.intermediate)
        if settings is not None and settings.random_starts and self._next_id == 0 \
                and not self._random_starts_queued:
            self._queue_random_starts(settings.random_starts)
        return fidelity

    def _queue_random_starts(self, n: int) -> None:
        """Put ``n`` distinct random configurations at the front of the queue (a fresh pruning run: see
        ``ASHA.random_starts``); drawn from the driver's generator, so a seeded run stays reproducible."""
        queued = {c for c, _ in self._queue}
        starts: list[Any] = []
        for _ in range(20 * n):  # a small or constrained space may not hold n new ones
            if len(starts) == n:
                break
            try:
                (config,) = self.space.sample(self._rng, 1)
            except SpaceError:
                break
            if config not in queued and not self._known(config):
                queued.add(config)
                starts.append(config)
        self._queue.extendleft((c, "random") for c in reversed(starts))

    def _stop_fidelity(self) -> None:
        fidelity, self._fidelity = self._fidelity, None
        if fidelity is not None and fidelity.board is not None:
            import shutil

            shutil.rmtree(fidelity.board, ignore_errors=True)

    def context_for(self, trial: Trial) -> EvalContext:
        """What the driver tells the objective evaluating ``trial``: the incumbent, who proposed it, and
        the values earlier evaluations published.

        ``run()`` sends it with each submission; an ask/tell loop can pass it to its objective.

        Example:
            >>> from perftune.space import Int, Space
            >>> tuner = Tuner(Space({"n": Int(0, 9)}), seed=0)
            >>> first = tuner.ask()
            >>> _ = tuner.tell(first, 4.0)
            >>> ctx = tuner.context_for(tuner.ask())
            >>> ctx.incumbent.value, ctx.incumbent.trial_id == first.id
            (4.0, True)
        """
        best = self._best
        incumbent = None
        if best is not None and best.value is not None:
            incumbent = Incumbent(trial_id=best.id, value=best.value,
                                  samples=tuple(best.samples) or (best.value,), metrics=dict(best.metrics))
        return EvalContext(trial_id=trial.id, technique=trial.technique, incumbent=incumbent,
                           shared=dict(self._shared), fidelity=self._fidelity)

    def _loop(self, executor: Executor, limit: Budget, deadline: float | None, in_flight: set[int],
              bar: _Progress | None, on_trial: Callable[[Trial], None] | None) -> None:
        """Keep the executor busy until the budget is spent; at the deadline, cancel what is in flight."""
        # An executor written before contexts existed takes (ticket, config) only.
        with_context = takes_context(executor.submit)

        def out_of_time() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        while True:
            exhausted = False
            while len(in_flight) < executor.capacity and not out_of_time():
                trial = self._take_reissue()  # issued before a crash: needs no readiness
                if trial is None:
                    if not self._ready():
                        break
                    trial = self._next_trial(limit)
                if trial is None:
                    exhausted = bool(self._stop_reason)  # else a result in flight is awaited first
                    break
                in_flight.add(trial.id)
                if with_context:
                    executor.submit(trial.id, trial.config, context=self.context_for(trial))
                else:
                    executor.submit(trial.id, trial.config)
            if not in_flight:
                if out_of_time() and not self._stop_reason:
                    self._stop_reason = "time"
                elif not exhausted and not self._stop_reason:
                    # Nothing in flight and the next ticket waits for earlier results (a seeded run):
                    # only a ticket told from elsewhere (ask/tell in another thread) can end the wait.
                    self._wait_for_told()
                    continue
                return
            wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._lease is not None:
                wait_s = _LEASE_WAKE_S if wait_s is None else min(wait_s, _LEASE_WAKE_S)
            for ticket, outcome in executor.collect(wait_s):
                in_flight.discard(ticket)
                finished = self._record(ticket, outcome)
                if on_trial is not None:
                    on_trial(finished)
            if out_of_time():
                # Nothing already measured is lost: what finished was recorded above; the rest is
                # recorded as cancelled, with the reason, and does not count against the budget.
                for ticket, outcome in executor.cancel_all("time budget reached"):
                    in_flight.discard(ticket)
                    self._record(ticket, outcome)
                self._stop_reason = "time"
                return
            if bar is not None:
                bar.update()
            self._maybe_checkpoint()

    def _finish(self, executor: Executor, bar: _Progress | None, status: str) -> None:
        with contextlib.suppress(Exception):
            executor.close()
        if bar is not None:
            bar.close()
        if self._store is not None and self._run is not None and not self._lease_lost:
            try:
                try:
                    self.checkpoint()
                finally:
                    # The status before the lease goes: never 'running' with no driver and no lease (but
                    # nothing is written for a run that another driver took over).
                    if not self._lease_lost:
                        self._store.finish_run(self._run.id, status)
                        self._ended(status)
            finally:
                self._release_lease()
                self._fold_log()

    def _fold_log(self) -> None:
        """The store's file holds every trial by itself once a run ends (a copy of it alone is whole)."""
        fold = getattr(self._store, "fold_log", None)
        if fold is not None:
            with contextlib.suppress(Exception):
                fold()

    def result(self) -> Result:
        """The run's result so far."""
        return Result(best=self._best, trials=self.trials, default=self.default_trial, run_id=self.run_id,
                      run_name=self.run_name, stop_reason=self._stop_reason, goal=self.goal,
                      objectives=self.objectives)

    def close(self, status: str = "finished") -> None:
        """End an ask/tell run: write a final checkpoint and mark the run ``status`` in the store.

        A closed run can still be resumed (``Tuner.resume``) or extended.
        """
        with _interrupts_held() as held:
            try:
                self.checkpoint()
            finally:  # the status even when the checkpoint failed, unless another driver took the run
                if self._store is not None and self._run is not None and not self._lease_lost:
                    try:
                        self._store.finish_run(self._run.id, status)
                        self._ended(status)
                    finally:
                        self._release_lease()
                        self._fold_log()
        if held:
            raise KeyboardInterrupt  # pressed while the run was closed: it is closed, as asked


class _Progress:
    """The run's :class:`ProgressLine`, fed from the tuner; written from the driver's thread only, so that
    no thread runs while workers fork."""

    def __init__(self, tuner: Tuner, budget: Budget, settings: ProgressSettings) -> None:
        self._tuner: Tuner = tuner
        self._line = ProgressLine(evals=budget.evals, seconds=budget.seconds, settings=settings,
                                  done_before=self._done())

    def _done(self) -> int:
        """What the budget counts: every trial of the run (a resume starts where it was) but the pruned
        and the cancelled ones (docs/fidelity.md), as :attr:`Tuner.n_trials` does."""
        return self._tuner._n_counted

    def update(self) -> None:
        t = self._tuner
        failed = sum(1 for trial in t._trials.values() if trial.status in (Status.FAILED, Status.TIMEOUT))
        best = None if t.best is None or t.best.value is None else f"{t.best.value:.6g}"
        self._line.update(self._done(), best=best, failures=failed)  # the rate and ETA: this session's

    def close(self) -> None:
        self.update()
        self._line.close()


def tune(
    objective: Callable[[Any], Any],
    space: Space,
    *,
    budget: Budget | int | str,
    seed: int | None = None,
    store: Store | str | None = None,
    workers: int = 1,
    goal: str | Mapping[str, str] | Sequence[str] = "min",
    metric: str | None = None,
    metrics: Sequence[str] | None = None,
    constraints: Sequence[str] | None = None,
    seeds: Iterable[Mapping[str, Any]] = (),
    technique: str | tuple[str, Any] = "default",
    name: str | None = None,
    timeout_s: float | None = None,
    lag: int | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    progress: bool | ProgressSettings = False,
    repeats: int | str | TimingSettings | None = None,
    warm_start: WarmStart | Sequence[Any] | None = None,
    callbacks: Sequence[Callable[[Tuner, Trial], Any]] = (),
    pruner: ASHA | bool | None = None,
) -> Result:
    """Tune ``objective`` over ``space`` and return the result.

    Args:
        objective: ``objective(config) -> float`` (or a mapping of metrics); raising marks the trial FAILED.
        space: The search space.
        budget: Number of trials, a duration string ("90s", "10m") or a :class:`Budget`.
        seed: Makes the run reproducible (see :class:`Tuner` for what that costs).
        store: None (memory only), a store or a store URL such as ``"perftune.db"``.
        workers: Evaluations in flight, each in its own local process.
        goal: ``"min"`` or ``"max"``, or ``{"time": "min", "size": "min"}`` for several objectives
            (the objective returns a mapping with each; :attr:`Result.pareto` is the front).
        metric: The metric to optimise when the objective returns a mapping. A name that the first
            results lack (a typo) stops the run after 3 trials with a ``PerftuneError`` naming the metrics
            they have (with a "did you mean"); the failed trials are kept in the store. So does a metric
            of ``goal`` or ``metrics`` that no result has.
        metrics: Several objectives by name (primary first), with ``goal`` one goal or a list of goals.
        constraints: Bounds on reported metrics, like ``["accuracy >= 0.99"]`` (see :class:`Tuner`).
        seeds: Configurations to try early.
        technique: Search technique (default: the AUC-bandit ensemble), or a name and its settings:
            ``("bandit", BanditSettings(exploration=0.1))``.
        name: Run name in the store.
        timeout_s: Kill an evaluation after this long (it runs in a worker process); TIMEOUT.
        lag: Lag of seeded runs.
        executor: ``"local"`` (worker processes on this machine) or ``"dask"``.
        scheduler: For Dask: ``"tcp://host:8786"`` or ``"local:N"``.
        progress: Report progress on stderr (trials of N and an ETA, or the time left; best; failures).
        repeats: None (default): the objective is called once per configuration. ``"auto"``: as
            often as its noise needs, as for task files: a sequential test against the best so far
            (few calls for a configuration that cannot win, more for one that might), and once per
            configuration when the first one measured returns the same value twice (a deterministic
            objective). An int: exactly that many calls. A :class:`perftune.measure.TimingSettings`:
            the sequential test with those settings. A trial's value is the median of its samples;
            ``timeout_s`` applies to the whole trial; :meth:`Result.speedup` gives the interval.
        warm_start: A prior from results on the same space measured elsewhere (see :class:`Tuner`).
        callbacks: Called in the driver as ``callback(tuner, trial)`` after each finished trial, in
            order; ``tuner.stop()`` ends the run early (Optuna's ``study.stop()``), and
            ``tuner.pareto``/``tuner.best`` are the results so far.
        pruner: For an objective ``objective(config, trial)`` that calls ``trial.report(step, value)``:
            an :class:`~perftune.drive.ASHA` (default ``ASHA()``: eta 3, rungs at steps 1, 3, 9, ...,
            9 random configurations first; ``ASHA(max_steps=N)`` adds Hyperband-style brackets),
            or False to record the reports without pruning. Pruned trials are PRUNED, with a reason,
            and do not count against ``budget`` (docs/fidelity.md). With several objectives only
            False is accepted (the rungs rank one value).

    Example:
        >>> from perftune.space import Float, Space
        >>> r = tune(lambda c: (c["x"] - 0.3) ** 2, Space({"x": Float(0, 1)}), budget=40, seed=0)
        >>> r.best.value < 0.01
        True
    """
    limit = Budget.coerce(budget)
    if limit is None:
        raise PerftuneError("tune(): give a budget (a number of trials, a duration or a perftune.Budget)")
    _check_run_args(workers, executor, timeout_s)
    objectives = _objectives_of(goal, metric, metrics, constraints, "tune()")
    if repeats is not None and takes_trial(objective):
        raise PerftuneError("tune(): repeats= measures a configuration several times; an objective that "
                            "reports intermediate values (a 'trial' parameter) cannot be repeated")
    if objectives.is_multi and takes_trial(objective) and pruner is not False \
            and not (pruner is None and getattr(objective, "pruner", False) is None):
        raise _multi_pruning_error(objectives, "tune()")  # before a run is made in the store
    if repeats is not None:
        primary = None if metric is None and objectives.primary == "value" else objectives.primary
        try:
            objective = RepeatedObjective(objective, primary, objectives.goal, repeats)
        except ValueError as error:
            raise PerftuneError(f"tune(): {error}") from None
    hooks = list(callbacks) if not callable(callbacks) else None
    if hooks is None or not all(callable(cb) for cb in hooks):
        raise PerftuneError("tune(): callbacks must be a list of functions callback(tuner, trial)")
    tuner = Tuner(space, goal=goal, seed=seed, store=store, technique=technique, seeds=seeds,
                  warm_start=warm_start, metric=metric, metrics=metrics, constraints=constraints, name=name,
                  lag=lag)

    def on_trial(trial: Trial) -> None:
        for callback in hooks:
            callback(tuner, trial)

    result = tuner.run(objective, limit, workers=workers, timeout_s=timeout_s, executor=executor,
                       scheduler=scheduler, progress=progress, on_trial=on_trial if hooks else None,
                       pruner=pruner)
    if result.stop_reason.startswith(STOP_MISSING_METRIC):
        kept = f" (run {result.run_name!r} keeps them)" if result.run_name else ""
        reason = result.stop_reason.split(": ", 1)[-1]
        raise PerftuneError(f"tune(): stopped after {len(result.trials)} trials whose results all lack a "
                            f"metric the run optimises{kept}: {reason}")
    _warn_if_all_failed(result)
    return result


def _warn_if_all_failed(result: Result) -> None:
    """One warning when ``tune`` measured trials and none succeeded: ``result.best`` is None, and the
    reason the trials failed is what the caller needs (an objective that raises on every configuration
    is far more often a bug in the caller's code than a property of the space)."""
    done = [t for t in result.trials if t.status.value != "cancelled"]
    if not done or any(t.ok for t in done):
        return
    reasons: dict[str, int] = {}
    for t in done:
        key = failure_key(t.reason) or t.status.value  # grouped as show and the report group them
        reasons[key] = reasons.get(key, 0) + 1
    reason, count = max(reasons.items(), key=lambda kv: kv[1])
    import warnings

    from perftune.errors import RunWarning

    stopped = (f"; the run stopped there: its first {len(done)} trials all failed the same way"
               if result.stop_reason.startswith(STOP_SAME_FAILURE) else "")
    warnings.warn(f"every trial failed ({len(done)}), so result.best is None; the most common reason "
                  f"({count} of {len(done)}): {reason}{stopped}", RunWarning, stacklevel=3)
