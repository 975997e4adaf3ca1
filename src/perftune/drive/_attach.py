"""Shared runs: any number of processes, on any machines, pull the trials of one run from its store.

The store is the meeting point. Two kinds of lease live there:

* **Trial leases** (``trial_leases``): the proposer issues a trial (``pending``); a worker claims it
  atomically (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, an ``UPDATE ... WHERE status = 'pending'`` under
  SQLite's write lock), heartbeats while it measures, and records its result in the same transaction
  that closes the claim, which succeeds only while the claim is still its own. A claim whose heartbeat
  is older than ``timeout_s`` (or whose process is gone, on the claimer's host) is issued once more; a
  trial whose second holder dies too is recorded as FAILED with both workers named.
* **The run lease** (one per run, as for any driver): whichever worker holds it is the *proposer*. It
  keeps the one search state of the run: it asks the technique for trials, issues them, reads the
  results the workers stored, tells the technique, and checkpoints. The other workers only measure.
  When the proposer dies, its lease goes stale; the first worker to see it takes the lease, resumes the
  search from the last checkpoint and adopts the trials issued since (their tickets are in the table).

The proposer counts the trials it issued against the budget (like the driver counts those in flight),
so the run never has more trials than its budget, and every trial has one accepted result.

Determinism: a seeded run issues ticket ``k`` only when the results of tickets ``< k - lag`` are in, and
the search learns them in ticket order, so its proposals are the same given the same measurements,
whatever the number of workers or the order results arrive in. An unseeded run learns each result as
the proposer reads it: its proposals depend on that order, which shared workers do not fix.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perftune.drive._budget import Budget
from perftune.drive._context import EvalContext, Incumbent, takes_context
from perftune.drive._evaluate import Outcome, check_metrics, evaluate
from perftune.errors import PerftuneError, StoreError
from perftune.trial import Status, Trial

if TYPE_CHECKING:
    from perftune.drive._tuner import Result, Tuner
    from perftune.search import Objectives
    from perftune.space import Space
    from perftune.store import Lease, RunInfo, Store, TrialLease

__all__ = ["WorkSummary", "Worker"]

#: How often the proposer looks for results and refills the queue: at once again after a step that found
#: something, then less and less often up to the slowest, while nothing happens.
_PROPOSER_POLL_S = (0.01, 0.1)
#: How often the background thread of a worker that does not propose wakes (heartbeats, the role).
_WATCH_POLL_S = 0.05
#: How often an idle worker looks for a trial to claim.
_IDLE_POLL_S = 0.02
#: How often an idle worker reads whether the run is over.
_RUN_CHECK_S = 0.25


@dataclass
class WorkSummary:
    """What one worker did in :meth:`Worker.work`.

    Attributes:
        run_name: The run.
        worker: ``host:pid`` of this worker.
        trials: The trials it measured whose results were accepted, in the order it measured them.
        n_reissued: How many of those a dead worker had held before.
        n_discarded: Measurements it finished after its claim had been issued to another worker (it
            looked dead: no heartbeat within the timeout); not recorded.
        proposed: Whether it held the proposer role at some point.
        stop_reason: ``"budget"`` (the run's budget is spent and every trial is in), ``"time"``,
            ``"space exhausted"``, ``"max_trials"`` (this worker's own limit) or ``"interrupted"``.

    Example:
        >>> WorkSummary("demo", "host:1", stop_reason="budget").n_measured
        0
    """

    run_name: str
    worker: str
    trials: list[Trial] = field(default_factory=list)
    n_reissued: int = 0
    n_discarded: int = 0
    proposed: bool = False
    stop_reason: str = ""

    @property
    def n_measured(self) -> int:
        """Trials this worker measured and recorded."""
        return len(self.trials)


def _check_timings(heartbeat_s: Any, timeout_s: Any) -> None:
    for name, value in (("heartbeat_s", heartbeat_s), ("timeout_s", timeout_s)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise PerftuneError(f"attach(): {name} must be a positive number of seconds, got {value!r}")
    if timeout_s < 2 * heartbeat_s:
        raise PerftuneError(f"attach(): timeout_s ({timeout_s:g}) must be at least twice heartbeat_s "
                            f"({heartbeat_s:g}), or live workers would look dead")


def _stored_budget(info: RunInfo) -> Budget:
    stored = info.settings.get("budget") or {}
    if not isinstance(stored, Mapping) or not any(v is not None for v in stored.values()):
        raise PerftuneError(f"attach(): run {info.name!r} has no budget; a shared run needs one "
                            "(create it with budget=, or perftune work RUN --task TASK --budget N)")
    return Budget(**{k: v for k, v in stored.items() if v is not None})


class _Proposer:
    """The proposer role, held by the worker that holds the run's lease (run by its background thread)."""

    def __init__(self, tuner: Tuner, store: Store, info: RunInfo, budget: Budget, heartbeat_s: float,
                 prefetch: int | None) -> None:
        self.tuner = tuner
        self._store = store
        self._info = info
        self._budget = budget
        self._heartbeat_s = heartbeat_s
        self._prefetch = prefetch
        self._last_heartbeat = time.monotonic()
        self.exhausted = False
        self.done = False
        self._n_done_seen = -1
        self.busy = False  # whether the last step found results or issued trials
        self._adopt()
        from perftune.search import PreloadsImports

        if isinstance(tuner._technique, PreloadsImports):
            # The model's slow first import overlaps with the first measurements instead of stopping
            # every worker at the first fit.
            tuner._technique.preload_imports()
        if budget.seconds is not None:
            # The clock of a time budget started at the first trial issued, whoever issued it.
            # Issue times are the store's clock (the database server's): the time left is judged by it.
            issued = store.trial_leases(info.id)
            now = store.clock()
            start = min((t.created_at for t in issued), default=now)
            tuner._deadline = time.monotonic() + (start + budget.seconds - now)

    def _adopt(self) -> None:
        """Take over what an earlier proposer issued: its tickets are in the table, maybe not in the
        checkpoint."""
        t = self.tuner
        issued = self._store.trial_leases(self._info.id)
        in_table = {item.trial_id for item in issued}
        if not t.deterministic:
            # A seeded run re-derives them instead (the same tickets, the same configurations). A ticket
            # recorded ("done") between the resume's read of the stored trials and this read of the
            # table is in neither: adopted too, the first step reads its result, so the budget counts it
            # (else the run got one trial more than its budget). _adopt skips the tickets it knows.
            for item in issued:
                t._adopt(item.trial_id, item.config, item.technique or "")
        # Tickets in flight at the checkpoint that are in the table are issued (again) by the table.
        t._reissue = [ticket for ticket in t._reissue if ticket not in in_table]

    def step(self) -> None:
        """Read the results that came in, refill the queue of pending trials, heartbeat, checkpoint."""
        t = self.tuner
        if time.monotonic() - self._last_heartbeat >= self._heartbeat_s:
            t._heartbeat(force=True)  # LeaseError: another worker took the role over
            self._last_heartbeat = time.monotonic()
        counts = self._store.count_trial_leases(self._info.id)
        waiting = sorted(t._pending)
        self.busy = counts["done"] != self._n_done_seen
        if waiting and self.busy:  # a trial was recorded since the last look
            self._n_done_seen = counts["done"]
            _, finished = self._store.trial_page(self._info.id, trial_ids=waiting, limit=None, count=False)
            for stored in finished:
                t._accept_stored(stored)
        # Enough pending trials that the workers finishing theirs claim the next at once, between two
        # looks of the proposer (which measures too); more would be proposed on older knowledge.
        claimed = counts["claimed"]
        want = self._prefetch if self._prefetch is not None else max(2, claimed + (claimed + 1) // 2)
        reason = t._budget_reason(self._budget)
        if reason is not None:  # also with a full queue: a time budget must cancel what is pending
            t._stop_reason, self.exhausted = reason, True
        issue: list[Trial] = []
        while not self.exhausted and counts["pending"] + len(issue) < want:
            trial = t._take_reissue()
            if trial is None:
                if not t._ready():
                    break
                trial = t._next_trial(self._budget)
            if trial is None:
                # None with a stop reason: the budget is spent (or the space); else results are awaited.
                self.exhausted = bool(t._stop_reason)
                break
            issue.append(trial)
        if issue:
            self._store.issue_trials(self._info.id, issue)
            self.busy = True
        if t._stop_reason == "time" and counts["pending"]:
            # No trial starts after a time budget: those not claimed yet are cancelled (not counted).
            self._store.cancel_pending(self._info.id, "time budget reached")
        if self.exhausted and t.n_in_flight == 0:
            self.done = True
        t._maybe_checkpoint()

    def close(self, *, finished: bool) -> None:
        """End the role: with the run over, mark it finished; otherwise hand the role on (checkpointed)."""
        t = self.tuner
        if finished:
            t.close("finished")
            return
        try:
            t.checkpoint()
        finally:
            t._release_lease()


class Worker:
    """One process's part of a shared run: :meth:`work` claims trials, measures them and records them.

    Made by :meth:`perftune.Tuner.attach` (see it for the arguments). At most one worker per process
    works at a time (a claim is held by ``host:pid``).

    Example:
        >>> from perftune.space import Int, Space
        >>> import perftune
        >>> worker = perftune.Tuner.attach("doc-worker", store="sqlite://", space=Space({"x": Int(0, 9)}),
        ...                                budget=4, seed=0, heartbeat_s=0.5, timeout_s=5)
        >>> worker.work(lambda c: c["x"], max_trials=3).stop_reason
        'max_trials'
        >>> worker.work(lambda c: c["x"]).n_measured, worker.result().counts()
        (1, {'ok': 4})
    """

    def __init__(self, tuner_cls: type[Tuner], run: str | int, store: Store | str | None, *,
                 space: Space | None, budget: Budget | int | str | None, heartbeat_s: float,
                 timeout_s: float, create: Mapping[str, Any], prefetch: int | None = None) -> None:
        _check_timings(heartbeat_s, timeout_s)
        if prefetch is not None and (isinstance(prefetch, bool) or not isinstance(prefetch, int)
                                     or prefetch < 1):
            raise PerftuneError(f"attach(): prefetch must be a positive integer, got {prefetch!r}")
        from perftune.store import open_store

        self._tuner_cls = tuner_cls
        self._store: Store = store if store is not None and not isinstance(store, str) else open_store(store)
        self.heartbeat_s = float(heartbeat_s)
        self.timeout_s = float(timeout_s)
        self._prefetch = prefetch
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self._proposer: _Proposer | None = None
        self._lock = threading.Lock()
        self._info = self._find_or_create(run, space, budget, create)
        if space is not None and self._info.space_fingerprint not in (None, space.fingerprint()):
            raise PerftuneError(f"attach(): run {self._info.name!r} was made with a different space")
        self.budget = _stored_budget(self._info)
        settings = self._info.settings
        from perftune.search import Objectives

        raw = settings.get("objectives")
        self.objectives: Objectives = (Objectives.from_dict(raw) if isinstance(raw, Mapping)
                                       else Objectives((self._info.metric or "value",), (self._info.goal,)))
        self._metric: str | None = settings.get("metric")
        self._checks_metrics = self.objectives.is_multi or bool(self.objectives.constraints)
        self._shared: dict[str, Any] = {}
        self._clock_start: float | None = None  # time.monotonic() of the first issue (store clock -> here)

    # ------------------------------------------------------------------ the run

    def _find_or_create(self, run: str | int, space: Space | None, budget: Any,
                        create: Mapping[str, Any]) -> RunInfo:
        try:
            return self._store.get_run(run)
        except StoreError:
            if space is None:
                raise PerftuneError(f"attach(): store {self._store.location} has no run {run!r}; give "
                                    "space= (and budget=) to create it") from None
        if Budget.coerce(budget) is None:
            raise PerftuneError(f"attach(): give a budget to create run {run!r}")
        if not isinstance(run, str):
            raise PerftuneError(f"attach(): a new run needs a name, got {run!r}")
        try:
            tuner = self._tuner_cls(space, store=self._store, name=run, budget=budget, **create)
        except StoreError as error:
            if "already exists" not in str(error):
                raise
            return self._store.get_run(run)  # another process created it first
        info = self._store.get_run(run)
        # The creator proposes first; its lease is re-taken with the shared run's short timeout.
        assert tuner._lease is not None
        self._store.release_lease(tuner._lease)
        tuner._lease = None
        with contextlib.suppress(StoreError):
            lease = self._store.acquire_lease(info.id, promise_s=self.timeout_s)
            tuner._lease = lease
            tuner._last_heartbeat_t = time.monotonic()
            self._proposer = _Proposer(tuner, self._store, info, _stored_budget(info), self.heartbeat_s,
                                       self._prefetch)
        return info

    @property
    def run_name(self) -> str:
        return self._info.name

    @property
    def run_id(self) -> int:
        return self._info.id

    @property
    def store(self) -> Store:
        return self._store

    def result(self) -> Result:
        """The run's result as the store holds it now (every worker's trials)."""
        info = self._store.get_run(self._info.id)
        return self._tuner_cls._stored_result(self._store, info, info.status)

    def _lease_is_free(self, lease: Lease | None) -> bool:
        if lease is None:
            return True
        from perftune.store import LEASE_TIMEOUT_S

        limit = lease.timeout_s if lease.timeout_s is not None else LEASE_TIMEOUT_S
        if self._store.clock() - lease.heartbeat_at > limit:
            return True
        if lease.host == socket.gethostname():
            try:
                os.kill(lease.pid, 0)
            except ProcessLookupError:
                return True
            except (PermissionError, OverflowError):
                return False
        return False

    def _try_propose(self) -> None:
        """Take the proposer role when nobody holds it (or its holder is dead)."""
        from perftune.store import LeaseError

        if not self._lease_is_free(self._store.get_lease(self._info.id)):
            return
        try:
            lease = self._store.acquire_lease(self._info.id, promise_s=self.timeout_s)
        except LeaseError:
            return  # another worker was quicker
        try:
            tuner = self._tuner_cls.resume(self._info.id, self._store, lease=lease)
            proposer = _Proposer(tuner, self._store, self._info, self.budget, self.heartbeat_s,
                                 self._prefetch)
        except BaseException:
            with contextlib.suppress(Exception):
                self._store.release_lease(lease)
            raise
        self._proposer = proposer

    def _run_over(self) -> bool:
        info = self._store.get_run(self._info.id)
        if info.status != "finished":
            return False
        counts = self._store.count_trial_leases(self._info.id)
        return counts["pending"] + counts["claimed"] == 0 and self._lease_is_free(
            self._store.get_lease(self._info.id))

    # ------------------------------------------------------------------ the background thread

    def _background(self, stop: threading.Event, state: dict[str, Any]) -> None:
        """Heartbeats of the claim in hand; the proposer's work, or watching for its role to free up."""
        from perftune.store import LeaseError

        last_claim_beat = last_lease_look = 0.0
        beating: TrialLease | None = None
        wait_s = backoff_s = _PROPOSER_POLL_S[0]
        try:
            while not stop.wait(wait_s):
                now = time.monotonic()
                claim = state.get("claim")
                if claim is not beating:  # a new claim: its heartbeat is the claim itself
                    beating, last_claim_beat = claim, now
                elif claim is not None and now - last_claim_beat >= self.heartbeat_s:
                    # False once the claim is no longer ours: its result will be refused, nothing to do.
                    self._store.renew_claim(claim)
                    last_claim_beat = now
                proposer = self._proposer
                wait_s = _WATCH_POLL_S
                if proposer is not None:
                    try:
                        proposer.step()
                    except LeaseError:
                        self._proposer = None  # this process looked dead: another took the role over
                        continue
                    fastest, slowest = _PROPOSER_POLL_S
                    backoff_s = fastest if proposer.busy else min(slowest, backoff_s * 1.5)
                    wait_s = backoff_s
                    if proposer.done:
                        proposer.close(finished=True)
                        self._proposer = None
                        state["finished"] = proposer.tuner._stop_reason or "budget"
                elif now - last_lease_look >= (_RUN_CHECK_S if state.get("idle") else self.heartbeat_s):
                    last_lease_look = now
                    self._try_propose()
                    if self._proposer is not None:
                        state["proposed"] = True
        except BaseException as error:  # noqa: BLE001 - handed to the main thread, which raises it
            state["error"] = error

    # ------------------------------------------------------------------ work

    def _context(self, claim: TrialLease, objective: Callable[..., Any]) -> EvalContext | None:
        if not takes_context(objective):
            return None
        best = self._store.best(self._info.id)
        incumbent = None
        if best is not None and best.value is not None:
            incumbent = Incumbent(trial_id=best.id, value=best.value,
                                  samples=tuple(best.samples) or (best.value,), metrics=dict(best.metrics))
        return EvalContext(trial_id=claim.trial_id, technique=claim.technique, incumbent=incumbent,
                           shared=dict(self._shared))

    def _trial_of(self, claim: TrialLease, outcome: Outcome) -> Trial:
        """The trial as the driver would record it (value, loss by the goal, samples, metric checks)."""
        trial = Trial(id=claim.trial_id, config=claim.config, technique=claim.technique,
                      status=outcome.status, reason=outcome.reason, metrics=dict(outcome.metrics),
                      samples=list(outcome.samples),
                      worker=outcome.worker or self.worker, started_at=outcome.started_at,
                      finished_at=outcome.finished_at)
        if outcome.status is Status.OK:
            assert outcome.value is not None
            trial.value = outcome.value
            trial.loss = outcome.value if self._info.goal == "min" else -outcome.value
            if not trial.samples:
                trial.samples = [outcome.value]
            if self._checks_metrics:
                check_metrics(self.objectives, trial)
        return trial

    def work(self, objective: Callable[..., Any], *, max_trials: int | None = None) -> WorkSummary:
        """Claim, measure and record trials of the run until its budget is spent (or ``max_trials``).

        ``objective(config)`` returns a number or a mapping of metrics, as for :func:`perftune.tune`;
        an exception is a FAILED trial. It runs in this process (a thread heartbeats meanwhile), so
        one worker measures one trial at a time: start as many workers as you want evaluations in
        flight. An objective that declares ``context`` gets the run's incumbent; what it publishes is
        seen by this worker's later evaluations only.

        Returns once the run is over (its budget spent and every trial recorded, by whichever
        worker), at ``max_trials`` trials of this worker, or, with a time budget, once no trial may
        start any more. Ctrl-C gives the trial in hand back to the run unmeasured and raises
        KeyboardInterrupt.
        """
        if max_trials is not None and (isinstance(max_trials, bool) or not isinstance(max_trials, int)
                                       or max_trials < 1):
            raise PerftuneError(f"work(): max_trials must be a positive integer, got {max_trials!r}")
        summary = WorkSummary(self._info.name, self.worker, proposed=self._proposer is not None)
        state: dict[str, Any] = {}
        stop = threading.Event()
        thread = threading.Thread(target=self._background, args=(stop, state), name="perftune-worker",
                                  daemon=True)
        thread.start()
        claim: TrialLease | None = None
        last_run_check = last_reclaim = 0.0
        claim_misses = 0
        try:
            while True:
                if "error" in state:
                    raise state["error"]
                if max_trials is not None and summary.n_measured >= max_trials:
                    summary.stop_reason = "max_trials"
                    break
                # After a time budget no trial starts; the proposer cancels those still pending. Dead
                # workers' trials are looked for once per heartbeat (or when idle), not at every claim.
                now = time.monotonic()
                reclaim = claim_misses > 0 or now - last_reclaim >= self.heartbeat_s
                if reclaim:
                    last_reclaim = now
                if claim is None and not self._out_of_time():
                    claim = self._store.claim_trial(self._info.id, timeout_s=self.timeout_s, reclaim=reclaim)
                if claim is None:
                    claim_misses += 1
                    state["idle"] = True
                    now = time.monotonic()
                    if "finished" in state:
                        summary.stop_reason = state["finished"]
                        break
                    if now - last_run_check >= _RUN_CHECK_S and self._proposer is None:
                        last_run_check = now
                        if self._run_over():
                            summary.stop_reason = self._stop_reason_of_run()
                            break
                    time.sleep(_IDLE_POLL_S)
                    continue
                claim_misses = 0
                state["idle"] = False
                state["claim"] = claim
                outcome = evaluate(objective, claim.config, self._metric, self._context(claim, objective))
                self._shared.update(outcome.published)
                trial = self._trial_of(claim, outcome)
                state["claim"] = None
                done, claim = claim, None
                wants_more = max_trials is None or summary.n_measured + 1 < max_trials
                reclaim_due = time.monotonic() - last_reclaim >= self.heartbeat_s
                if wants_more and not reclaim_due and not self._out_of_time():
                    # The next claim in the same transaction: one round trip less between two trials.
                    accepted, claim = self._store.finish_and_claim(done, trial, timeout_s=self.timeout_s)
                else:
                    accepted = self._store.finish_claim(done, trial)
                if accepted:
                    summary.trials.append(trial)
                    summary.n_reissued += done.n_issues > 1
                else:
                    summary.n_discarded += 1
        except KeyboardInterrupt:
            summary.stop_reason = "interrupted"
            raise
        finally:
            if claim is not None:  # claimed, not measured: back to the run for another worker
                with contextlib.suppress(Exception):
                    self._store.release_claim(claim)
            stop.set()
            thread.join()
            summary.proposed = summary.proposed or bool(state.get("proposed"))
            proposer, self._proposer = self._proposer, None
            if proposer is not None:
                # The run goes on without this worker: the next one to look takes the role over.
                with contextlib.suppress(StoreError):
                    proposer.close(finished=False)
        return summary

    def _out_of_time(self) -> bool:
        """Whether a time budget is spent; its clock starts at the run's first issued trial."""
        if self.budget.seconds is None:
            return False
        if self._clock_start is None:
            issued = self._store.trial_leases(self._info.id)
            if not issued:
                return False
            # The store's clock, as the issue times: this machine's own may disagree with the server's.
            start = min(t.created_at for t in issued)
            self._clock_start = time.monotonic() + (start - self._store.clock())
        return time.monotonic() >= self._clock_start + self.budget.seconds

    def _stop_reason_of_run(self) -> str:
        """Why the run ended, as a worker that did not propose can tell from the store."""
        counted = sum(1 for t in self._store.trial_summaries(self._info.id) if t.status != "cancelled")
        if self.budget.evals is not None and counted >= self.budget.evals:
            return "budget"
        return "time" if self.budget.seconds is not None else "finished"
