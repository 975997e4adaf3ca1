"""What the racer and the explorer share: the objective, the search epochs, candidates and records.

Each exploration epoch is one ask/tell :class:`perftune.drive.Tuner` run in the store (so ``perftune
show`` lists its candidates, their outcomes and reasons). A candidate is one trial of that run; the
requests it is tried on are its samples. A detected workload shift closes the epoch and opens the
next one, seeded with the configurations that were safe before, so a shift that reverts recovers fast.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import statistics
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np

from perftune.errors import PerftuneError, StoreError
from perftune.online._promotion import PromotionRule
from perftune.online._shift import ShiftDetector
from perftune.trial import Status, Trial

__all__ = ["OnlineBase", "Promotion", "RequestError", "RequestRecord"]

# The safe configuration's trial in a run (the first epoch's baseline) is its median over this many
# requests: one request (the first, with cold caches) made every candidate look several times faster.
_BASELINE_N = 10


class RequestError(PerftuneError):
    """A request got no answer: the safe configuration failed on it (and no candidate answered).

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune.online import Racer
        >>> with Racer(lambda c, x: 1 // x, Space({"n": Int(0, 1)})) as racer:
        ...     try:
        ...         racer(0)
        ...     except RequestError as exc:
        ...         print(exc)
        request 0: the safe configuration raised ZeroDivisionError: integer division or modulo by zero
    """


@dataclass(frozen=True)
class RequestRecord:
    """What happened to one request.

    Attributes:
        seq: The request's number (0, 1, ...).
        latency_s: What the caller waited, from the call to the answer (racing overhead included).
        answered_by: ``"safe"``, ``"candidate"``, ``"alone"`` (the safe configuration without a race), or
            ``"none"``: the request raised (the safe configuration failed, or the time ran out).
        safe_s: Seconds inside the objective for the safe configuration (None: it was killed, or it
            did not run on this request).
        candidate_s: The same for the candidate (None: killed, failed, or no candidate ran).
        outcome: For the candidate: ``"win"``, ``"loss"``, ``"wrong"``, ``"failed"``, or ``""``.
        candidate_trial: The candidate's trial id in the epoch's run (None without a candidate).
        epoch: The exploration epoch (0, then one more after every detected shift).

    Example:
        >>> r = RequestRecord(7, 0.0105, "candidate", None, 0.0100, "win", 3, 0)
        >>> round(r.overhead_s * 1e3, 3)
        0.5
    """

    seq: int
    latency_s: float
    answered_by: str
    safe_s: float | None
    candidate_s: float | None
    outcome: str
    candidate_trial: int | None
    epoch: int

    @property
    def compute_s(self) -> float | None:
        """Seconds inside the objective of the configuration whose answer was returned."""
        return self.candidate_s if self.answered_by == "candidate" else self.safe_s

    @property
    def overhead_s(self) -> float | None:
        """Latency beyond the answering configuration's own time: dispatch, waiting, killing."""
        c = self.compute_s
        return None if c is None else self.latency_s - c


@dataclass(frozen=True)
class Promotion:
    """A candidate that became the safe configuration, and the evidence.

    Example:
        >>> Promotion(seq=40, config={"n": 3}, wins=9, races=9, epoch=0).wins
        9
    """

    seq: int
    config: Mapping[str, Any]
    wins: int
    races: int
    epoch: int


@dataclass
class _Candidate:
    trial: Trial
    wins: int = 0
    races: int = 0
    samples: list[float] = field(default_factory=list)
    n_finished: int = 0


def _resolve(objective_or_site: Any, space: Any) -> tuple[Callable[[Any, Any], Any], Any]:
    """``run(config, request)`` and the space, from a callable or a choice site."""
    site = objective_or_site
    if all(hasattr(site, a) for a in ("selector", "use", "alternatives", "name")):
        # A perftune.choice.AlgorithmSite: the configuration is its selector, under the site's name.
        from perftune.space import Space

        param = site.name
        if space is None:
            space = Space({param: site.selector()})
        elif param not in space.params:
            raise PerftuneError(f"online: the space has no parameter named after site {param!r}")

        def run_site(config: Any, request: Any) -> Any:
            with site.use(config[param]):
                return site(request)

        return run_site, space
    if not callable(objective_or_site):
        raise PerftuneError(
            f"online: expected an objective(config, request) or a choice site, got "
            f"{type(objective_or_site).__name__}")
    if space is None:
        raise PerftuneError("online: an objective needs a space (Racer(objective, space, ...))")
    if not all(hasattr(space, a) for a in ("is_valid", "params", "default")):
        raise PerftuneError(f"online: expected a perftune.space.Space, got {type(space).__name__}")
    return objective_or_site, space


class OnlineBase:
    """Search epochs, candidates, promotion and shift detection; subclasses serve requests."""

    mode = ""
    #: The largest answer (pickled) a worker may send back; a candidate's larger answer fails it unread,
    #: a safe configuration's raises. Set it on the instance (or the class) to change it.
    max_answer_bytes: int = 64 << 20

    def __init__(
        self,
        objective_or_site: Any,
        space: Any = None,
        *,
        safe: Mapping[str, Any] | None = None,
        check: Callable[[Any, Any], bool] | None = None,
        rule: PromotionRule | None = None,
        detector: ShiftDetector | None | bool = None,
        budget: int = 40,
        store: Any = None,
        name: str | None = None,
        seed: int | None = None,
        technique: str = "default",
        history_n: int = 100_000,
    ) -> None:
        from perftune.space import Config

        self._run, self.space = _resolve(objective_or_site, space)
        if check is not None and not callable(check):
            raise PerftuneError(f"online: check must be a function check(request, answer), got {check!r}")
        if rule is not None and not isinstance(rule, PromotionRule):
            raise PerftuneError(f"online: rule must be a perftune.online.PromotionRule, got {rule!r}")
        if detector is not None and not isinstance(detector, ShiftDetector | bool):
            raise PerftuneError(f"online: detector must be a ShiftDetector, False or None, got {detector!r}")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise PerftuneError(f"online: budget must be a positive number of candidates, got {budget!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise PerftuneError(f"online: seed must be an integer or None, got {seed!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise PerftuneError(f"online: name must be a non-empty string, got {name!r}")
        if store is not None and not isinstance(store, str) and not hasattr(store, "create_run"):
            raise PerftuneError(f"online: store must be a store URL or a perftune.store.Store, got {store!r}")
        if isinstance(history_n, bool) or not isinstance(history_n, int) or history_n < 0:
            raise PerftuneError(f"online: history_n must be a non-negative integer, got {history_n!r}")
        if safe is None:
            safe_config = self.space.default()
        elif not isinstance(safe, Mapping):
            raise PerftuneError(
                f"online: safe must be a configuration (a mapping), got {type(safe).__name__}")
        else:
            unknown = sorted(set(safe) - set(self.space.params))
            if unknown:
                raise PerftuneError(f"online: safe has unknown parameter(s) {', '.join(unknown)}")
            safe_config = safe if isinstance(safe, Config) else Config(dict(safe))
        if not self.space.is_valid(safe_config):
            why = self.space.why_invalid(safe_config)
            raise PerftuneError(f"online: the safe configuration is invalid: {why}")
        self.check = check
        self.rule = rule or PromotionRule()
        self.detector: ShiftDetector | None = (
            ShiftDetector() if detector is None or detector is True else detector or None)
        self.budget = budget
        self.safe: Any = safe_config
        self.default = self.space.default()
        self._safe_before: list[Any] = []
        self.failed: dict[Any, str] = {}  # config -> why it can never be safe
        #: ``(request number, configuration, why)`` of each promoted configuration whose answer then failed
        #: ``check``: it was put back to the configuration it replaced.
        self.demotions: list[tuple[int, dict[str, Any], str]] = []
        self.records: deque[RequestRecord] = deque(maxlen=history_n)
        self.promotions: list[Promotion] = []
        self.shifts: list[int] = []  # request numbers at which a shift was detected
        self.run_names: list[str] = []
        self.epoch = 0
        self._seed = seed
        self._technique = technique
        self._name = name
        self._own_store = isinstance(store, str)  # opened here from a URL: closed here too
        self._store = self._open_store(store)
        self._lock = threading.Lock()  # one request at a time: calls from several threads wait their turn
        self._serving: int | None = None  # the thread serving a request
        self._no_workers: str | None = None  # why workers are no longer used (the zygote died, say)
        self._said_unpicklable = False
        self._promoted_trials: dict[Any, tuple[int, int]] = {}  # config -> (run id, trial id) promoting it
        self._run_id: int | None = None
        self._safe_samples: deque[float] = deque(maxlen=60)
        self._cand: _Candidate | None = None
        # Trials of the safe configuration, told once it has _BASELINE_N latencies (not from one request).
        self._safe_trials: list[Trial] = []
        self._seq = 0
        self._closed = False
        self._tuner: Any = None
        self._open_epoch()

    # ------------------------------------------------------------------ epochs

    @staticmethod
    def _open_store(store: Any) -> Any:
        if isinstance(store, str):
            from perftune.store import open_store

            return open_store(store)
        return store

    def _open_epoch(self) -> None:
        from perftune.drive import Tuner

        # The first epoch measures the space's default first (as the run's baseline: alone when it is
        # the safe configuration, raced otherwise); later ones retry the configurations safe before.
        seeds = [c for c in dict.fromkeys([*reversed(self._safe_before), self.default])
                 if c != self.safe and c not in self.failed and self.space.is_valid(c)] if self.epoch else []
        if self.epoch == 0:
            name = self._name
        else:
            name = f"{self.run_names[0]}-shift{self.epoch}" if self.run_names else None
        settings = {"online": {
            "mode": self.mode, "epoch": self.epoch, "safe": dict(self.safe),
            "rule": {"confidence": self.rule.confidence, "min_races": self.rule.min_races,
                     "max_races": self.rule.max_races, "min_wins": self.rule.min_wins},
        }}
        seed = None if self._seed is None else self._seed + self.epoch
        for attempt in range(1, 1000):
            try:
                self._tuner = Tuner(self.space, seed=seed, store=self._store, technique=self._technique,
                                    seeds=seeds, name=name, budget=self.budget,
                                    include_default=self.epoch == 0, settings=settings)
                break
            except StoreError as error:
                # A service restarted with the same name= (the runs of its last life are kept): NAME-2, ...
                if name is None or "already exists" not in str(error) or attempt == 999:
                    raise
                base = self._name if self.epoch == 0 else f"{self.run_names[0]}-shift{self.epoch}"
                name = f"{base}-{attempt + 1}"
        if self._tuner.run_name is not None:
            self.run_names.append(self._tuner.run_name)
        self._run_id = self._tuner.run_id  # the last epoch's run, still there once its tuner is closed

    def _close_epoch(self, status: str, why: str) -> None:
        tuner, self._tuner = self._tuner, None
        if tuner is None:
            return
        # A candidate cut short is CANCELLED: not counted, and free to be proposed again later.
        if self._cand is not None:
            tuner.tell(self._cand.trial, status=Status.CANCELLED, error=why)
            self._cand = None
        trials, self._safe_trials = self._safe_trials, []
        for trial in trials:
            if self._safe_samples:  # what there is: fewer than _BASELINE_N latencies
                tuner.tell(trial, statistics.median(self._safe_samples), samples=list(self._safe_samples),
                           metrics={"safe": 1.0})
            else:
                tuner.tell(trial, status=Status.CANCELLED, error=why)
        tuner.close(status)

    def _shifted(self, seq: int) -> None:
        self.shifts.append(seq)
        self._close_epoch("finished", "the workload shifted")
        self.epoch += 1
        self._safe_samples.clear()
        self._open_epoch()

    @property
    def tuner(self) -> Any:
        """The :class:`perftune.drive.Tuner` of the current epoch (None once its budget is spent)."""
        return self._tuner

    @property
    def exploring(self) -> bool:
        """Whether candidates are being tried (False once the epoch's budget is spent)."""
        return self._tuner is not None

    # ------------------------------------------------------------------ candidates

    def _candidate(self) -> _Candidate | None:
        """The candidate to try on the next request (asks the search when there is none)."""
        while self._cand is None and self._tuner is not None:
            trial = self._tuner.ask()
            if trial is None:
                # The budget is spent: serve with the safe configuration alone until a shift. Its
                # latencies are measured in-process from now on: a new reference for the detector.
                self._close_epoch("finished", "")
                if self.detector is not None:
                    self.detector.reset()
                return None
            if trial.config in self.failed:
                self._tuner.tell(trial, error=f"failed before: {self.failed[trial.config]}")
            elif trial.config == self.safe:
                # The search asks about the safe configuration: its latencies are measured anyway, on
                # every request it finishes; the trial is told once there are enough of them.
                self._safe_trials.append(trial)
                self._tell_safe()
            else:
                self._cand = _Candidate(trial)
        return self._cand

    def _tell_safe(self, force: bool = False) -> None:
        """Tell the safe configuration's trials its median latency, once it has _BASELINE_N (or now)."""
        if not self._safe_trials or self._tuner is None or not self._safe_samples or (
                not force and len(self._safe_samples) < _BASELINE_N):
            return
        trials, self._safe_trials = self._safe_trials, []
        samples = list(self._safe_samples)
        for trial in trials:
            self._tuner.tell(trial, statistics.median(samples), samples=samples, metrics={"safe": 1.0})

    def _observe_safe(self, seq: int, safe_s: float | None, at_least_s: float | None = None) -> None:
        """The safe configuration's time on request ``seq``: ``safe_s`` when it finished, else (killed
        because a candidate answered first) ``at_least_s``, a lower bound that only the detector uses."""
        if safe_s is None:
            if at_least_s is not None and self.detector is not None and self.detector.observe(
                    at_least_s, censored=True):
                self._shifted(seq)
            return
        self._safe_samples.append(safe_s)
        self._tell_safe()
        if self.detector is not None and self.detector.observe(safe_s):
            self._shifted(seq)

    def _run_inline(self, request: Any, seq: int) -> tuple[Any, float]:
        """Run the safe configuration in the caller's process: (answer, seconds).

        Without a candidate there is nothing to race, so the request runs as it would without
        perftune: no process hop, no racing overhead, on the whole machine. A promoted configuration's
        answer is checked (when ``check`` is given); a wrong one demotes it and the request runs again
        with the configuration it replaced.
        """
        while True:
            t0 = time.perf_counter()
            try:
                answer = self._run(self.safe, request)
            except Exception as exc:
                why = f"raised {type(exc).__name__}: {exc}".splitlines()[0]
                raise RequestError(f"request {seq}: the safe configuration {why}") from None
            took = time.perf_counter() - t0
            wrong = self._safe_wrong(request, answer)
            if wrong is None:
                return answer, took
            self._demote(seq, wrong)

    def _checked(self, request: Any, answer: Any) -> str | None:
        """None when ``check`` accepts the answer, else why not (a raising check rejects it)."""
        assert self.check is not None
        try:
            ok = self.check(request, answer)
        except Exception as exc:
            return f"wrong answer (check raised {type(exc).__name__}: {exc})".splitlines()[0]
        if not isinstance(ok, bool | np.bool_):
            # The caller's mistake, not the candidate's (an elementwise comparison, say): said at once.
            raise PerftuneError(f"online: check(request, answer) must return True or False, got "
                                f"{type(ok).__name__} (for arrays: numpy.array_equal(...))")
        return None if ok else "wrong answer (check(request, answer) is false)"

    def _safe_wrong(self, request: Any, answer: Any) -> str | None:
        """Why the safe configuration's answer is wrong, or None. Only a *promoted* configuration is
        checked: it won its races on a sample of requests, and a rare wrong answer may have escaped them;
        the configuration trusted at the start is the caller's own."""
        if self.check is None or not self._safe_before:
            return None
        return self._checked(request, answer)

    def _demote(self, seq: int, why: str) -> None:
        """A promoted configuration answered wrongly: never safe again; the one it replaced is back."""
        bad = self.safe
        self.failed[bad] = f"demoted after a {why}"
        self.demotions.append((seq, dict(bad), why))
        if self._tuner is not None:
            for trial in self._safe_trials:  # its latency as the safe configuration: not a result to keep
                self._tuner.tell(trial, error=f"demoted on request {seq}: {why}")
        self._safe_trials = []
        self.safe = self._safe_before.pop()
        self._safe_samples.clear()
        if self.detector is not None:
            self.detector.reset()
        self._record_demotion(seq, bad, why)

    def _record_demotion(self, seq: int, bad: Any, why: str) -> None:
        """Say in the store that ``bad`` is demoted, in the run that promoted it and in the current one:
        their settings list the demotion (``demoted``), and their final answer (what ``perftune show``
        prints as such, and ``perftune best``) is the configuration served."""
        from perftune.report import FinalAnswer

        if self._store is None:
            return
        promoted = self._promoted_trials.pop(bad, None)
        served = self._promoted_trials.get(self.safe)  # (run, trial) that promoted the one served now
        what = bad.to_json() if promoted is None else f"trial {promoted[1]} {bad.to_json()}"
        note = (f"{what} was promoted, then demoted on request {seq} ({why}); the configuration served is "
                f"{self.safe.to_json()}")
        run, trial_id = promoted if promoted is not None else (None, None)
        entry = {"request": seq, "config": json.loads(bad.to_json()), "why": why, "run": run,
                 "trial": trial_id}
        for run_id in dict.fromkeys(r for r in (run, self._run_id) if r is not None):
            settings = self._store.get_run(run_id).settings or {}
            self._store.update_settings(run_id, {"demoted": [*settings.get("demoted", []), entry]})
            trial = served[1] if served is not None and served[0] == run_id else None
            answer = FinalAnswer(None, trial=trial, config=json.loads(self.safe.to_json()), note=note)
            self._store.record_result(run_id, answer.to_json())

    def _fail(self, cand: _Candidate, reason: str) -> None:
        """A wrong or failing candidate: recorded with its reason, never safe, never tried again."""
        self.failed[cand.trial.config] = reason
        self._tuner.tell(cand.trial, error=reason, metrics={"wins": cand.wins, "races": cand.races + 1})
        self._cand = None

    def _result(self, seq: int, cand: _Candidate, won: bool, sample_s: float, finished: bool) -> None:
        """Account for one more request of the candidate; promote or drop it when the rule says so."""
        from perftune.measure import Decision

        cand.races += 1
        cand.wins += int(won)
        cand.samples.append(sample_s)
        cand.n_finished += int(finished)
        decision = self._decide(cand)
        if decision is Decision.UNDECIDED:
            return
        self._cand = None
        metrics = {"wins": float(cand.wins), "races": float(cand.races),
                   "promoted": float(decision is Decision.BETTER)}
        if cand.n_finished == 0:
            # It never finished before the safe configuration did: its times are only lower bounds.
            self._tuner.tell(cand.trial, status=Status.TIMEOUT, metrics=metrics,
                             error=f"killed in all {cand.races} races: never finished before the safe "
                                   f"configuration (>= {statistics.median(cand.samples) * 1e3:.3g} ms)")
        else:
            self._tuner.tell(cand.trial, statistics.median(cand.samples), samples=cand.samples,
                             metrics=metrics)
        if decision is Decision.BETTER and self._tuner.run_id is not None:
            self._promoted_trials[cand.trial.config] = (self._tuner.run_id, cand.trial.id)
        if decision is Decision.BETTER:
            self._tell_safe(force=True)  # the old safe configuration's trial, with what it has
            for trial in self._safe_trials:  # it never finished a request (killed every time)
                self._tuner.tell(trial, status=Status.CANCELLED, error="promoted away before it finished")
            self._safe_trials = []
            self._safe_before.append(self.safe)
            self.safe = cand.trial.config
            self.promotions.append(Promotion(seq, dict(self.safe), cand.wins, cand.races, self.epoch))
            self._safe_samples.clear()
            if self.detector is not None:
                self.detector.reset()

    def _decide(self, cand: _Candidate) -> Any:
        return self.rule.decide(cand.wins, cand.races)

    # ------------------------------------------------------------------ serving

    def __call__(self, request: Any) -> Any:
        """Serve one request: the answer of the safe configuration or of a candidate that beat it.

        Calls from several threads are served one at a time (in the order they get the lock).
        """
        if self._serving == threading.get_ident():
            raise PerftuneError(f"{type(self).__name__}: called again while serving a request (from the "
                                "objective, check, or a signal handler): serve one request at a time")
        with self._lock:
            self._serving = threading.get_ident()
            try:
                t0 = time.perf_counter()
                seq = self._next_seq()
                try:
                    return self._serve(request, seq, t0)
                except PerftuneError:
                    if not self.records or self.records[-1].seq != seq:  # the request is in the records too
                        self._unanswered(seq, t0)
                    raise
            finally:
                self._serving = None

    def _serve(self, request: Any, seq: int, t0: float) -> Any:
        raise NotImplementedError

    def _unanswered(self, seq: int, t0: float, safe_s: float | None = None, candidate_s: float | None = None,
                    outcome: str = "", cand: _Candidate | None = None) -> None:
        """Record a request that raised: answered by no one."""
        self.records.append(RequestRecord(seq, time.perf_counter() - t0, "none", safe_s, candidate_s, outcome,
                                          None if cand is None else cand.trial.id, self.epoch))

    def _pickled(self, request: Any, seq: int) -> bytes | None:
        """The request pickled once, for the workers; None when it cannot be: it is then served by the safe
        configuration in this process (said once, as a warning)."""
        try:
            return pickle.dumps(request, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - any failure to pickle: the request cannot travel
            if not self._said_unpicklable:
                self._said_unpicklable = True
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                warnings.warn(f"{type(self).__name__}: request {seq} cannot be sent to a worker process "
                              f"({why}): such requests are served by the safe configuration in this process, "
                              "exploring nothing (candidates run in worker processes: requests must pickle)",
                              RuntimeWarning, stacklevel=4)
            return None

    def _lose_workers(self, why: str) -> None:
        """Workers cannot be used (the zygote died, the objective's answers cannot come back from one):
        exploration stops; requests are served by the safe configuration in the caller's process from
        now on (said once, as a warning)."""
        if self._no_workers is not None:
            return
        self._no_workers = why
        limit = "; timeout_s is no longer enforced" if getattr(self, "timeout_s", None) is not None else ""
        warnings.warn(f"{type(self).__name__}: {why}: exploration stops, and requests are served by the safe "
                      f"configuration in this process{limit}", RuntimeWarning, stacklevel=4)
        self._close_epoch("finished", why)
        self.detector = None  # no new epoch: it could try no candidate
        with contextlib.suppress(Exception):
            self._stop_workers()

    # ------------------------------------------------------------------ life cycle

    def _next_seq(self) -> int:
        if self._closed:
            raise PerftuneError(f"{type(self).__name__} is closed")
        seq = self._seq
        self._seq += 1
        return seq

    def close(self) -> None:
        """Stop the workers and end the epoch's run in the store (after the request another thread is
        serving; at once when called while this thread serves one, from a signal handler, say)."""
        if self._closed:
            return
        if self._serving == threading.get_ident():
            self._close()
            return
        with self._lock:
            self._close()

    def _close(self, status: str = "finished", why: str = "the online tuner was closed") -> None:
        if self._closed:
            return
        self._closed = True
        self._stop_workers()
        self._close_epoch(status, why)
        if self._own_store and self._store is not None:
            self._store.close()

    def _stop_workers(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to clean up with
            self._stop_workers()
