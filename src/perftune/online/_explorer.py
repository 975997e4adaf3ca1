"""Online tuning without racing, for programs that cannot run a request twice.

A candidate serves a bounded fraction of the requests (request ``k`` explores when
``floor((k + 1) * explore_fraction) > floor(k * explore_fraction)``, so after ``n`` requests at most
``floor(n * explore_fraction)`` have explored). The regression guard bounds what an explored request
can cost: the candidate is killed once it has run ``guard`` times the safe configuration's median
latency (plus the median round trip to its worker process), and a candidate that fails, is killed or
answers wrongly has the request served again by the safe configuration (in the caller's process, as
every request that does not explore). So an explored request takes at most ``(guard + 1)`` times the
safe time plus the round trip, and on average the extra cost is at most ``explore_fraction * guard``.

Promotion compares the candidate's latencies with the safe configuration's by the sequential Welch
test of :func:`perftune.measure.compare` (log scale, Bonferroni over the looks of the rule).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from multiprocessing.connection import wait
from typing import Any

from perftune.errors import PerftuneError
from perftune.online._core import OnlineBase, RequestRecord, _Candidate
from perftune.online._promotion import PromotionRule
from perftune.online._shift import ShiftDetector
from perftune.online._split import Side
from perftune.online._worker import Worker, Zygote

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
        # The guard's clock runs from sending the request, so it allows for the round trip to the worker
        # (a few ms on a loaded machine: more than a short request itself).
        self._round_trip_s: deque[float] = deque((self._worker.round_trip_s() for _ in range(3)), maxlen=30)

    def _stop_workers(self) -> None:
        worker, self._worker = getattr(self, "_worker", None), None
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
        decision = compare(cand.samples, list(self._safe_samples), confidence=settings.per_look_confidence)
        if decision is Decision.UNDECIDED and cand.races >= rule.max_races:
            return Decision.SAME
        return decision

    def _explores(self, seq: int) -> bool:
        f = self.explore_fraction
        return math.floor((seq + 1) * f) > math.floor(seq * f)

    def _run_once(
        self, seq: int, config: Any, request: Any, timeout_s: float | None
    ) -> tuple[Any, float | str]:
        """(answer, seconds in the objective) or (None, why it failed)."""
        assert self._worker is not None
        w = self._worker
        w.send(seq, config, request)
        if not wait([w.conn], timeout_s):
            w.replace()
            return None, f"killed by the regression guard after {timeout_s * 1e3:.3g} ms"  # type: ignore[operator]
        reply = w.receive()
        if reply is None:
            why = w.death()
            w.replace()
            return None, why
        if not reply[1]:
            return None, str(reply[2])
        return reply[2], reply[3]

    def __call__(self, request: Any) -> Any:
        """Serve one request, with the safe configuration or (on a bounded fraction) a candidate."""
        t0 = time.perf_counter()
        seq = self._next_seq()
        explores = self._explores(seq) and len(self._safe_samples) >= _MIN_SAFE_SAMPLES
        cand = self._candidate() if explores else None
        outcome, cand_s = "", None
        if cand is not None:
            self.n_explored += 1
            limit = self.guard * statistics.median(self._safe_samples) + statistics.median(self._round_trip_s)
            t_sent = time.perf_counter()
            answer, got = self._run_once(seq, cand.trial.config, request, limit)
            if not isinstance(got, str):
                self._round_trip_s.append(max(0.0, time.perf_counter() - t_sent - got))
            why = got if isinstance(got, str) else self._checked(request, answer)
            if why is None:
                assert not isinstance(got, str)
                cand_s = got
                self._result(seq, cand, True, got, finished=True)
                latency = time.perf_counter() - t0
                self.records.append(RequestRecord(seq, latency, "candidate", None, got, "win", cand.trial.id,
                                                  self.epoch))
                return answer
            if why.startswith("killed by the regression guard"):
                self.n_guarded += 1
                outcome = "loss"
                self._result(seq, cand, False, limit, finished=False)
            else:
                outcome = "wrong" if why.startswith("wrong") else "failed"
                self._fail(cand, why)
        answer, got = self._run_inline(request, seq)
        epoch = self.epoch
        self._observe_safe(seq, got)  # its store writes are the request's latency too
        latency = time.perf_counter() - t0
        self.records.append(RequestRecord(seq, latency, "alone" if cand is None else "safe", got, cand_s,
                                          outcome, None if cand is None else cand.trial.id, epoch))
        return answer
