"""Online tuning without racing, for programs that cannot run a request twice.

A candidate serves a bounded fraction of the requests (request ``k`` explores when
``floor((k + 1) * explore_fraction) > floor(k * explore_fraction)``, so after ``n`` requests at most
``floor(n * explore_fraction)`` have explored). The regression guard bounds what an explored request
can cost: the candidate is killed once it has run ``guard`` times the safe configuration's median
latency (plus the median round trip to its worker process), and a candidate that fails, is killed or
answers wrongly has the request served again by the safe configuration (in the caller's process, as
every request that does not explore). So an explored request takes at most ``(guard + 1)`` times the
safe time plus the round trip and the kill (a spare worker takes the killed one's place: no fork on the
request's path), and on average the extra cost is at most ``explore_fraction * guard``.

Promotion compares the candidate's latencies with the safe configuration's by the sequential Welch
test of :func:`perftune.measure.compare` (log scale, Bonferroni over the looks of the rule), like with
like: the request after each explored one runs the safe configuration in the same worker process, and
only those times are compared with the candidate's (the caller's process is another environment: its
threads, heap and caches make it slower or faster than a worker for reasons of its own).
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from perftune.errors import PerftuneError
from perftune.online._core import _BASELINE_N, OnlineBase, RequestRecord, _Candidate
from perftune.online._promotion import PromotionRule
from perftune.online._shift import ShiftDetector
from perftune.online._split import Side
from perftune.online._worker import (
    Reply,
    Worker,
    Zygote,
    ZygoteGone,
    cannot_read,
    cannot_send,
    socket_wait,
    too_large,
    travel_failure,
)

__all__ = ["Explorer"]

_MIN_SAFE_SAMPLES = 5  # the guard needs a safe latency to be relative to


class Explorer(OnlineBase):
    """Tune while serving, one run per request: explore on a bounded fraction, with a regression guard.

    Args:
        objective_or_site: ``objective(config, request) -> answer`` or a choice site (as :class:`Racer`).
        space: The space of configurations.
        safe: The configuration trusted at the start (default: the space's default).
        check: ``check(request, answer) -> bool`` (required: with one run per request there is no
            safe answer to compare a candidate's with).
        explore_fraction: Most fraction of requests a candidate serves, in (0, 0.5].
        guard: A candidate is killed after ``guard`` times the safe median latency (> 1).
        cpus: CPUs of the worker (default: all of this process's).
        rule: Its ``min_races``/``max_races``/``confidence`` bound the candidate's requests and the
            test that promotes it.
        detector, budget, store, name, seed, technique, history_n: As for :class:`Racer`.

    A candidate's answer travels back from its worker pickled, at most :attr:`max_answer_bytes` of it
    (as for :class:`Racer`).

    Example:
        >>> from perftune.space import Int, Space
        >>> space = Space({"k": Int(1, 4, default=1)})
        >>> with Explorer(lambda c, x: x + 1, space, check=lambda x, y: y == x + 1,
        ...               explore_fraction=0.1) as ex:
        ...     answers = [ex(x) for x in range(50)]
        >>> answers[:3], ex.n_explored <= 5
        ([1, 2, 3], True)
    """

    mode = "explore"

    def __init__(
        self,
        objective_or_site: Any,
        space: Any = None,
        *,
        safe: Mapping[str, Any] | None = None,
        check: Callable[[Any, Any], bool] | None = None,
        explore_fraction: float = 0.05,
        guard: float = 1.5,
        cpus: tuple[int, ...] | None = None,
        rule: PromotionRule | None = None,
        detector: ShiftDetector | None | bool = None,
        budget: int = 40,
        store: Any = None,
        name: str | None = None,
        seed: int | None = None,
        technique: str = "default",
        history_n: int = 100_000,
    ) -> None:
        self._worker: Worker | None = None
        if check is None:
            raise PerftuneError("Explorer: give check=check(request, answer): with one run per request "
                                "there is no safe answer to compare a candidate's with")
        if (isinstance(explore_fraction, bool) or not isinstance(explore_fraction, int | float)
                or not 0 < explore_fraction <= 0.5):
            raise PerftuneError(f"Explorer: explore_fraction must be in (0, 0.5], got {explore_fraction!r}")
        if isinstance(guard, bool) or not isinstance(guard, int | float) or not 1 < guard < math.inf:
            raise PerftuneError(
                f"Explorer: guard must be a number > 1 (times the safe latency), got {guard!r}")
        available = os.sched_getaffinity(0)
        if cpus is not None and (isinstance(cpus, str) or not isinstance(cpus, Iterable)
                                 or not all(isinstance(c, int) and not isinstance(c, bool) for c in cpus)):
            raise PerftuneError(f"Explorer: cpus must be a list of CPU numbers, got {cpus!r}")
        the_cpus = tuple(sorted(available)) if cpus is None else tuple(cpus)
        if not the_cpus or not set(the_cpus) <= available:
            raise PerftuneError(f"Explorer: cpus {cpus!r} are not all available to this process")
        super().__init__(objective_or_site, space, safe=safe, check=check, rule=rule, detector=detector,
                         budget=budget, store=store, name=name, seed=seed, technique=technique,
                         history_n=history_n)
        self.explore_fraction = float(explore_fraction)
        self.guard = float(guard)
        self.n_explored = 0
        self.n_guarded = 0  # candidates killed by the guard
        self._zygote: Zygote | None = Zygote([Side(the_cpus)], self._run)
        self._worker = Worker(self._zygote, 0)
        # A spare takes a killed worker's place at once; the zygote forks the next one off the request's path.
        self._spare: Worker | None = Worker(self._zygote, 0)
        self._asked = False
        # The guard's clock runs from sending the request, so it allows for the round trip to the worker
        # (a few ms on a loaded machine: more than a short request itself).
        self._round_trip_s: deque[float] = deque((self._worker.round_trip_s() for _ in range(3)), maxlen=30)
        # The safe configuration's times in the worker, as (configuration, epoch, seconds): what a
        # candidate's times there are compared with.
        self._worker_safe_s: deque[tuple[Any, int, float]] = deque(maxlen=60)
        # The next request that does not explore runs the safe configuration in the worker, unless the last
        # one did (every other one at most: the caller's own latencies go on coming in, for the detector).
        self._pair = False
        self._paired_last = False
        from perftune.measure import compare

        compare([1.0, 1.1], [1.0, 1.2])  # its imports now, not on the request that first decides

    def _stop_workers(self) -> None:
        workers = [getattr(self, "_worker", None), getattr(self, "_spare", None)]
        self._worker = self._spare = None
        for worker in workers:
            if worker is not None:
                worker.close()
        zygote, self._zygote = getattr(self, "_zygote", None), None
        if zygote is not None:
            zygote.close()

    def _decide(self, cand: _Candidate) -> Any:
        from perftune.measure import Decision, TimingSettings, compare

        rule = self.rule
        if cand.races < rule.min_races:
            return Decision.UNDECIDED
        settings = TimingSettings(min_runs=rule.min_races, max_runs=rule.max_races,
                                  confidence=rule.confidence)
        safe = [s for config, epoch, s in self._worker_safe_s if config == self.safe and epoch == self.epoch]
        decision = Decision.UNDECIDED
        if len(safe) >= 2:
            decision = compare(cand.samples, safe, confidence=settings.per_look_confidence)
        # At max_races, undecided: not faster. (While the worker's safe times are still fewer than
        # min_races, as at the start of an epoch, the candidate runs on until there are that many.)
        if decision is Decision.UNDECIDED and cand.races >= rule.max_races and len(safe) >= rule.min_races:
            return Decision.SAME
        return decision

    def _explores(self, seq: int) -> bool:
        f = self.explore_fraction
        return math.floor((seq + 1) * f) > math.floor(seq * f)

    def _replace(self) -> None:
        """Kill the worker and put the spare in its place; the zygote forks the next spare."""
        assert self._zygote is not None and self._worker is not None
        self._worker.kill()
        if self._spare is None and self._asked:
            (made,) = self._zygote.collect()
            self._spare, self._asked = Worker(self._zygote, 0, made), False
        self._worker = self._spare if self._spare is not None else Worker(self._zygote, 0)
        self._spare = None
        self._zygote.request_spawn(0)
        self._asked = True

    def _run_once(
        self, seq: int, config: Any, payload: bytes, timeout_s: float | None
    ) -> tuple[Any, float | str]:
        """(answer, seconds in the objective) or (None, why it failed), run in the worker."""
        try:
            return self._run_once_in(seq, config, payload, timeout_s)
        except BaseException:
            if self._worker is not None and self._worker.pid:  # cut short: no later request reads its answer
                with contextlib.suppress(Exception):
                    self._replace()
            raise

    def _run_once_in(
        self, seq: int, config: Any, payload: bytes, timeout_s: float | None
    ) -> tuple[Any, float | str]:
        assert self._worker is not None
        w = self._worker
        w.send(seq, config, payload)
        deadline = None if timeout_s is None else time.perf_counter() + timeout_s
        reply: Reply | None = None
        while True:
            left = None if deadline is None else max(0.0, deadline - time.perf_counter())
            if not socket_wait([w.sock], left):
                self._replace()
                return None, f"killed by the regression guard after {timeout_s * 1e3:.3g} ms"  # type: ignore[operator]
            done, reply = w.take(self.max_answer_bytes)
            if done:
                break
        if reply is None:  # within the guard's time: a worker that runs on after closing it is killed then
            why = w.death(0.05 if deadline is None else min(0.05, max(0.0, deadline - time.perf_counter())))
            self._replace()
            return None, why
        if w.refused or reply[0] != seq:
            self._replace()
            if reply[0] != seq:
                return None, f"was out of step (it answered request {reply[0]} during request {seq})"
        if not reply[1]:
            return None, str(reply[2])
        return reply[2], reply[3]

    def _travels(self, answer: Any) -> str | None:
        """Why an answer could not come back from a worker (as the worker and the caller say it), or None."""
        try:
            data = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - any failure to pickle is the reason
            return cannot_send(exc)
        if len(data) > self.max_answer_bytes:
            return too_large(len(data), self.max_answer_bytes)
        try:
            pickle.loads(data)
        except Exception as exc:  # noqa: BLE001 - any failure to unpickle is the reason
            return cannot_read(exc)
        return None

    def _serve(self, request: Any, seq: int, t0: float) -> Any:
        """Serve one request, with the safe configuration or (on a bounded fraction) a candidate."""
        if self._no_workers is None and self._zygote is not None and self._zygote.gone():
            self._lose_workers("the zygote (the process that forks workers) died")
        usable = self._no_workers is None
        explores = usable and self._explores(seq) and len(self._safe_samples) >= _MIN_SAFE_SAMPLES
        cand = self._candidate() if explores else None
        # Not while the safe configuration's trial waits for its latencies in this process (the baseline).
        pairs = (cand is None and usable and self._pair and not self._paired_last
                 and (not self._safe_trials or len(self._safe_samples) >= _BASELINE_N))
        self._paired_last = False
        payload = self._pickled(request, seq) if cand is not None or pairs else None
        if payload is None:  # it cannot reach a worker (or need not): served here, and nothing is explored
            cand = None
        outcome, cand_s, travel = "", None, None
        try:
            if cand is not None:
                assert isinstance(payload, bytes)
                self.n_explored += 1
                self._pair = True
                limit = (self.guard * statistics.median(self._safe_samples)
                         + statistics.median(self._round_trip_s))
                t_sent = time.perf_counter()
                answer, got = self._run_once(seq, cand.trial.config, payload, limit)
                if not isinstance(got, str):
                    self._round_trip_s.append(max(0.0, time.perf_counter() - t_sent - got))
                why = got if isinstance(got, str) else self._checked(request, answer)
                if why is None:
                    assert not isinstance(got, str)
                    cand_s = got
                    self._result(seq, cand, True, got, finished=True)
                    latency = time.perf_counter() - t0
                    self.records.append(RequestRecord(seq, latency, "candidate", None, got, "win",
                                                      cand.trial.id, self.epoch))
                    return answer
                if why.startswith("killed by the regression guard"):
                    self.n_guarded += 1
                    outcome = "loss"
                    self._result(seq, cand, False, limit, finished=False)
                elif travel_failure(why):
                    travel = why  # blamed below only if the safe configuration's answer could travel
                else:
                    outcome = "wrong" if why.startswith("wrong") else "failed"
                    self._fail(cand, why)
            elif pairs and isinstance(payload, bytes):
                epoch, safe = self.epoch, self.safe
                answer, got = self._run_once(seq, safe, payload, None)
                wrong = None if isinstance(got, str) else self._safe_wrong(request, answer)
                if wrong is not None:
                    self._demote(seq, wrong)  # a promoted one answered wrongly: never returned
                elif not isinstance(got, str):
                    self._pair, self._paired_last = False, True
                    self._worker_safe_s.append((safe, epoch, got))
                    latency = time.perf_counter() - t0
                    self.records.append(RequestRecord(seq, latency, "alone", got, None, "", None, epoch))
                    return answer
                # It failed in the worker, or was demoted: the request runs here, as any other.
        except ZygoteGone as exc:
            self._lose_workers(str(exc))
        answer, safe_s = self._run_inline(request, seq)
        if travel is not None and cand is not None and self._cand is cand:
            safe_why = self._travels(answer)
            if safe_why is None:  # its answer could not travel, the safe one's could: the candidate's fault
                outcome = "failed"
                self._fail(cand, travel)
            elif not safe_why.startswith("its answer is "):
                self._lose_workers(f"the safe configuration's {safe_why.removeprefix('its ')}, from a worker")
        epoch = self.epoch
        self._observe_safe(seq, safe_s)  # its store writes are the request's latency too
        latency = time.perf_counter() - t0
        self.records.append(RequestRecord(seq, latency, "alone" if cand is None else "safe", safe_s, cand_s,
                                          outcome, None if cand is None else cand.trial.id, epoch))
        return answer
