"""SiblingRivalry (Ansel et al., CGO 2012): every request races the safe configuration against a candidate.

The machine is split in two (:class:`perftune.online.Split`); each half runs a worker process group
pinned to its CPUs. A request goes to both; the first *correct* answer returns and the other worker is
killed (``SIGKILL`` of its process group) and replaced by a fresh fork. The caller never waits much
longer than the safe configuration alone would take: the difference is the racing overhead (sending
the request twice, waking up, killing and re-forking the loser), which :attr:`Racer.records` measures
per request. The price is twice the hardware per request.

Correctness: with ``check(request, answer)`` a candidate's answer is checked before it is returned;
without one, it must agree with the safe configuration's answer, so a faster candidate cannot answer
before the safe one has (it still wins the race and can be promoted; once safe, it answers).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from perftune.errors import PerftuneError
from perftune.online._core import OnlineBase, RequestError, RequestRecord, _Candidate
from perftune.online._promotion import PromotionRule
from perftune.online._shift import ShiftDetector
from perftune.online._split import Side, Split
from perftune.online._worker import Reply, Worker, Zygote, ZygoteGone, socket_wait, travel_failure

__all__ = ["Racer"]


def _agree(a: Any, b: Any, depth: int = 0) -> bool:
    """Equal answers: ``==``, with arrays compared whole, also inside tuples, lists and dicts; NaN equals
    NaN (the same missing value computed by both configurations).

    Example:
        >>> _agree([np.array([np.nan, 1.0]), float("nan")], [np.array([np.nan, 1.0]), float("nan")])
        True
    """
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        try:
            return bool(np.array_equal(x, y, equal_nan=True))
        except TypeError:  # equal_nan on values that cannot be NaN (strings, objects)
            pass
        except Exception:  # noqa: BLE001 - arrays that cannot be compared are not equal
            return False
        try:
            return bool(np.array_equal(x, y))
        except Exception:  # noqa: BLE001 - arrays that cannot be compared are not equal
            return False
    if isinstance(a, float | np.floating) and isinstance(b, float | np.floating) and math.isnan(a):
        return math.isnan(b)
    if depth < 32 and type(a) is type(b) and isinstance(a, list | tuple):
        return len(a) == len(b) and all(_agree(x, y, depth + 1) for x, y in zip(a, b, strict=True))
    if depth < 32 and type(a) is type(b) and isinstance(a, dict):
        return a.keys() == b.keys() and all(_agree(a[k], b[k], depth + 1) for k in a)
    try:
        return bool(a == b)
    except Exception:  # an answer type whose == does not give a truth value
        return False


class _CannotTravel(Exception):
    """The safe configuration's answer could not come back from its worker: the objective's answers
    cannot travel between processes (a type that does not pickle)."""


class Racer(OnlineBase):
    """Tune while serving: race a safe configuration against the search's candidates on every request.

    Args:
        objective_or_site: ``objective(config, request) -> answer``, or a
            :class:`perftune.choice.AlgorithmSite` (the configuration is then its selector, and the
            answer ``site(request)``).
        space: The :class:`perftune.space.Space` of configurations (a site's selector by default).
        safe: The configuration trusted at the start (default: the space's default).
        split: How the machine is cut in two: None (this process's CPUs in halves), two CPU lists
            (``[[0], [1]]``), two :class:`Side` values (with a hook that picks a GPU), or a :class:`Split`.
        check: ``check(request, answer) -> bool``: whether an answer is correct. Without it, a
            candidate's answer must equal the safe one (``equal``).
        equal: ``equal(a, b) -> bool`` for that agreement (default ``==``, ``numpy.array_equal`` for arrays;
            NaN equals NaN).
        rule: When a candidate is promoted (:class:`PromotionRule`: a sequential sign test on its wins).
        detector: The :class:`ShiftDetector` that re-opens exploration; False: never.
        budget: Candidates per exploration epoch (the tuner's budget).
        store: A store or store URL: each epoch is a run there (``perftune show``).
        name: Name of the first epoch's run; later epochs add ``-shiftN``.
        seed: Seed of the search (epoch ``k`` uses ``seed + k``).
        technique: The search technique (any registered name).
        timeout_s: The longest a request may take; past it the request raises :class:`RequestError`.
        history_n: Requests kept in :attr:`records`.

    An answer travels back from its worker pickled, at most :attr:`max_answer_bytes` of it (64 MiB; set
    the attribute to change it): a candidate's larger answer fails the candidate, unread. Calls from
    several threads are served one at a time.

    Example:
        >>> from perftune.space import Int, Space
        >>> space = Space({"k": Int(1, 4, default=1)})
        >>> with Racer(lambda c, x: x * 2, space, check=lambda x, y: y == 2 * x) as racer:
        ...     answers = [racer(x) for x in range(10)]
        >>> answers[:4], len(racer.records)
        ([0, 2, 4, 6], 10)
    """

    mode = "race"

    def __init__(
        self,
        objective_or_site: Any,
        space: Any = None,
        *,
        safe: Mapping[str, Any] | None = None,
        split: Split | Sequence[Sequence[int]] | Sequence[Side] | None = None,
        check: Callable[[Any, Any], bool] | None = None,
        equal: Callable[[Any, Any], bool] | None = None,
        rule: PromotionRule | None = None,
        detector: ShiftDetector | None | bool = None,
        budget: int = 40,
        store: Any = None,
        name: str | None = None,
        seed: int | None = None,
        technique: str = "default",
        timeout_s: float | None = None,
        history_n: int = 100_000,
    ) -> None:
        self._workers: list[Worker] = []
        the_split = Split.of(split)  # before any run is created: a bad split writes nothing
        if equal is not None and not callable(equal):
            raise PerftuneError(f"Racer: equal must be a function equal(a, b), got {equal!r}")
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                                      or not math.isfinite(timeout_s) or timeout_s <= 0):
            raise PerftuneError(f"Racer: timeout_s must be a positive number of seconds, got {timeout_s!r}")
        super().__init__(objective_or_site, space, safe=safe, check=check, rule=rule, detector=detector,
                         budget=budget, store=store, name=name, seed=seed, technique=technique,
                         history_n=history_n)
        self.split = the_split
        self.equal = equal or _agree
        self.timeout_s = timeout_s
        self.n_killed = 0
        self.kill_s: list[float] = []  # seconds on the request's path to kill a loser and swap in a spare
        self.respawn_s: list[float] = []  # seconds to ask for spares, overlapped with the request's work
        self._zygote = Zygote(the_split.sides, self._run)
        self._workers = [Worker(self._zygote, i) for i in (0, 1)]
        # A spare worker per side takes a killed loser's place at once; the zygote forks the next spare
        # while the workers compute the following request, off the request's path.
        self._spares: list[Worker | None] = [Worker(self._zygote, i) for i in (0, 1)]
        self._asked = [False, False]  # a spare for this side is being forked
        for i, worker in enumerate(self._workers):
            why = worker.setup_failure()
            if why is not None:  # the side, not a configuration: said now, and no candidate blamed
                self._close("failed", f"split side {i}: {why}")
                raise PerftuneError(f"Racer: split side {i} ({list(the_split.sides[i].cpus)}) {why}")

    def _stop_workers(self) -> None:
        zygote = self.__dict__.get("_zygote")
        if zygote is None:  # never started (bad arguments), or stopped already
            return
        with contextlib.suppress(ZygoteGone):
            self._collect()
        workers, self._workers = self._workers, []
        spares, self._spares = self._spares, []
        for w in [*workers, *(s for s in spares if s is not None)]:
            w.close()
        del self._zygote
        zygote.close()

    def _collect(self) -> None:
        """Take the spares the zygote forked since the last request."""
        if not any(self._asked):
            return
        made = iter(self._zygote.collect())
        for i in (0, 1):
            if self._asked[i]:
                self._spares[i] = Worker(self._zygote, i, next(made))
                self._asked[i] = False

    def _refill(self) -> None:
        """Ask the zygote for the missing spares (it forks them while this request runs)."""
        t0 = time.perf_counter()
        for i, spare in enumerate(self._spares):
            if spare is None and not self._asked[i]:
                self._zygote.request_spawn(i)
                self._asked[i] = True
        self.respawn_s.append(time.perf_counter() - t0)

    def _cancel(self, worker: Worker) -> None:
        """Kill a worker for real (SIGKILL of its process group) and put the side's spare in its place."""
        t0 = time.perf_counter()
        worker.kill()
        self._put_spare(worker)
        self.kill_s.append(time.perf_counter() - t0)
        self.n_killed += 1

    def _put_spare(self, gone: Worker) -> None:
        i = self._workers.index(gone)
        if self._spares[i] is None:
            self._collect()
        spare, self._spares[i] = self._spares[i], None
        self._workers[i] = spare if spare is not None else Worker(self._zygote, i)

    def _serve(self, request: Any, seq: int, t0: float) -> Any:
        if self._no_workers is None and self._zygote.gone():
            self._lose_workers("the zygote (the process that forks workers) died")
        cand = self._candidate()
        if self._no_workers is not None or (cand is None and self.timeout_s is None):
            return self._inline(request, seq, t0)
        payload = self._pickled(request, seq)
        if payload is None:
            return self._inline(request, seq, t0)
        safe_side = seq % 2  # the two configurations swap halves every request: no half is favoured
        try:
            if cand is None:  # a worker, so that timeout_s can be enforced
                return self._alone(payload, request, seq, t0, self._workers[safe_side])
            return self._race(payload, request, seq, t0, cand, self._workers[safe_side],
                              self._workers[1 - safe_side])
        except (ZygoteGone, _CannotTravel) as exc:
            self._lose_workers(str(exc))
            return self._inline(request, seq, t0)

    def _inline(self, request: Any, seq: int, t0: float) -> Any:
        answer, safe_s = self._run_inline(request, seq)
        epoch = self.epoch
        self._observe_safe(seq, safe_s)  # its store writes are the request's latency too
        latency = time.perf_counter() - t0
        self.records.append(RequestRecord(seq, latency, "alone", safe_s, None, "", None, epoch))
        return answer

    def _deadline(self, t0: float) -> float | None:
        return None if self.timeout_s is None else t0 + self.timeout_s

    def _wait(self, socks: list[Any], deadline: float | None) -> list[Any]:
        timeout = None if deadline is None else max(0.0, deadline - time.perf_counter())
        return socket_wait(socks, timeout)

    def _reply(self, worker: Worker, seq: int, reply: Reply | None) -> tuple[Reply | None, str | None]:
        """A worker's reply to request ``seq`` (from ``take``), or (None, why it died); a dead worker is
        replaced, and so is one whose answer was refused unread.

        A reply to an earlier request (one that an exception cut short before its worker was replaced)
        is never taken for this one's: the worker is replaced and the reply is "out of step".
        """
        if reply is None:
            why = worker.death()
            self._put_spare(worker)
            return None, why
        if reply[0] != seq:
            self._cancel(worker)
            return None, f"was out of step (it answered request {reply[0]} during request {seq})"
        if worker.refused:  # the rest of its answer is still on the way: the connection is out of step
            self._cancel(worker)
        return reply, None

    def _no_answer(self, seq: int, t0: float, why: str, cand: _Candidate | None = None, outcome: str = "",
                   cand_reply: Reply | None = None) -> Exception:
        """The error of a request the safe configuration did not answer (recorded), or ``_CannotTravel``
        when its answer could not come back from the worker: the request is then served in this process."""
        if travel_failure(why) and not why.startswith("its answer is "):
            return _CannotTravel(f"the safe configuration's {why.removeprefix('its ')}")
        self._unanswered(seq, t0, None, None if cand_reply is None else cand_reply[3], outcome, cand)
        if travel_failure(why):  # over the size limit: the caller's to raise
            what = why.removeprefix("its ")
            return PerftuneError(f"Racer: request {seq}: the safe configuration's {what}; raise "
                                 "racer.max_answer_bytes")
        return RequestError(f"request {seq}: the safe configuration {why}")

    def _alone(self, payload: bytes, request: Any, seq: int, t0: float, worker: Worker) -> Any:
        try:
            return self._alone_in(payload, request, seq, t0, worker)
        except BaseException:
            self._cancel_busy([worker])
            raise

    def _cancel_busy(self, workers: Sequence[Worker]) -> None:
        """After an exception cut a request short (an alarm, Ctrl-C, a failing hook): the workers still
        holding it are killed and replaced, so that no later request reads an answer meant for this one."""
        for w in workers:
            if w in self._workers and w.pid:
                with contextlib.suppress(Exception):
                    self._cancel(w)

    def _alone_in(self, payload: bytes, request: Any, seq: int, t0: float, worker: Worker) -> Any:
        worker.send(seq, self.safe, payload)
        self._refill()
        while True:
            while True:
                if not self._wait([worker.sock], self._deadline(t0)):
                    self._cancel(worker)
                    raise self._no_answer(seq, t0, f"took longer than timeout_s={self.timeout_s}")
                done, got = worker.take(self.max_answer_bytes)
                if done:
                    break
            reply, died = self._reply(worker, seq, got)
            if reply is None or not reply[1]:
                raise self._no_answer(seq, t0, died or str(reply and reply[2]))
            wrong = self._safe_wrong(request, reply[2])
            if wrong is None:
                break
            # A promoted configuration's rare wrong answer: never returned. It is demoted, and the request
            # runs again with the configuration it replaced (on the same worker, within timeout_s).
            self._demote(seq, wrong)
            worker.send(seq, self.safe, payload)
        epoch = self.epoch
        self._observe_safe(seq, reply[3])
        latency = time.perf_counter() - t0
        self.records.append(RequestRecord(seq, latency, "alone", reply[3], None, "", None, epoch))
        return reply[2]

    def _race(self, payload: bytes, request: Any, seq: int, t0: float, cand: _Candidate, ws: Worker,
              wc: Worker) -> Any:
        try:
            return self._race_in(payload, request, seq, t0, cand, ws, wc)
        except BaseException:
            self._cancel_busy([ws, wc])
            raise

    def _race_in(self, payload: bytes, request: Any, seq: int, t0: float, cand: _Candidate, ws: Worker,
                 wc: Worker) -> Any:
        ws.send(seq, self.safe, payload)
        wc.send(seq, cand.trial.config, payload)
        self._refill()
        deadline = self._deadline(t0)
        safe: Reply | None = None
        cand_reply: Reply | None = None
        safe_failed: str | None = None
        cand_failed: str | None = None
        safe_running, cand_running = True, True
        answer: Any = None
        answered_by = ""
        while not answered_by:
            socks = [w.sock for w, running in ((ws, safe_running), (wc, cand_running)) if running]
            ready = self._wait(socks, deadline) if socks else []
            if not ready:
                for w, running in ((ws, safe_running), (wc, cand_running)):
                    if running:
                        self._cancel(w)
                outcome = ""
                if cand_failed is not None:  # it answered wrongly (or failed) before the time ran out
                    if not travel_failure(cand_failed):  # only blamed when the safe answer travelled
                        self._fail(cand, cand_failed)
                        outcome = "wrong" if cand_failed.startswith("wrong") else "failed"
                elif cand_running:
                    self._result(seq, cand, False, time.perf_counter() - t0, finished=False)
                    outcome = "loss"
                why = safe_failed or f"took longer than timeout_s={self.timeout_s}"
                raise self._no_answer(seq, t0, why, cand, outcome)
            # An answer is read as it arrives: a large one does not hold up the other side's.
            if ws.sock in ready and (got := ws.take(self.max_answer_bytes))[0]:
                safe_running = False
                safe, died = self._reply(ws, seq, got[1])
                if safe is None or not safe[1]:
                    safe_failed, safe = died or (str(safe[2]) if safe else "failed"), None
                elif (wrong := self._safe_wrong(request, safe[2])) is not None:
                    # A promoted configuration's rare wrong answer: never returned; it is demoted.
                    self._demote(seq, wrong)
                    safe_failed, safe = f"(promoted, now demoted) gave a {wrong}", None
            if wc.sock in ready and (got := wc.take(self.max_answer_bytes))[0]:
                cand_running = False
                cand_reply, died = self._reply(wc, seq, got[1])
                if cand_reply is None or not cand_reply[1]:
                    cand_failed = died or (str(cand_reply[2]) if cand_reply else "failed")
                    cand_reply = None
                elif self.check is not None:
                    cand_failed = self._checked(request, cand_reply[2])
                    if cand_failed is not None:
                        cand_reply = None
            # Both read in the same wake-up: the one that spent less time in the objective finished first.
            cand_first = cand_reply is not None and (safe is None or cand_reply[3] <= safe[3])
            if cand_first and self.check is not None:
                answer, answered_by = cand_reply[2], "candidate"  # type: ignore[index]
            elif safe is not None:
                answer, answered_by = safe[2], "safe"
            elif safe_failed is not None:
                # The request fails as it would without racing: a candidate still running is not waited
                # for (it might hang), and without check= there is nothing to check its answer against.
                break
        outcome, won, sample, finished, why = self._judge(cand, safe, cand_reply, cand_failed, t0)
        for w, running in ((ws, safe_running), (wc, cand_running)):
            if running:
                # The loser (or an answer still on its way when the other one is in): killed for real, and
                # a fresh worker put in its place.
                self._cancel(w)
        if outcome in ("wrong", "failed"):
            self._fail(cand, why)
        elif outcome:
            self._result(seq, cand, won, sample, finished)
        if not answered_by:
            raise self._no_answer(seq, t0, str(safe_failed), cand, outcome, cand_reply)
        # Killed because the candidate answered first, the safe configuration took at least as long
        # as the candidate (they started together): a lower bound, which the shift detector can use.
        killed_after = None
        if safe is None and safe_running and answered_by == "candidate" and cand_reply is not None:
            killed_after = cand_reply[3]
        epoch = self.epoch
        # Before the latency is taken: a shift it detects closes a run and opens one (the caller waits).
        self._observe_safe(seq, None if safe is None else safe[3], killed_after)
        latency = time.perf_counter() - t0
        self.records.append(RequestRecord(
            seq, latency, answered_by, None if safe is None else safe[3],
            None if cand_reply is None else cand_reply[3], outcome, cand.trial.id, epoch))
        return answer

    def _judge(self, cand: _Candidate, safe: Reply | None, cand_reply: Reply | None,
               cand_failed: str | None, t0: float) -> tuple[str, bool, float, bool, str]:
        """(outcome, won, sample for the search, whether the candidate finished, why it failed)."""
        if cand_failed is not None and travel_failure(cand_failed) and safe is None:
            # Its answer could not travel (a type that does not pickle, a size over the limit), and the
            # safe configuration gave none: the objective's answers may not travel at all; not blamed.
            return "", False, 0.0, False, ""
        if cand_failed is not None:
            return ("wrong" if cand_failed.startswith("wrong") else "failed"), False, 0.0, False, cand_failed
        if cand_reply is None:
            if safe is None:
                return "", False, 0.0, False, ""  # the safe configuration failed: no race to count
            # Killed when the safe configuration answered: it takes at least as long.
            return "loss", False, safe[3], False, ""
        if safe is None:
            if self.check is None:
                return "", False, 0.0, False, ""  # nothing to compare its answer with
            return "win", True, cand_reply[3], True, ""
        if self.check is None:
            try:
                same = bool(self.equal(cand_reply[2], safe[2]))
            except Exception as exc:  # noqa: BLE001 - the candidate's answer is what equal cannot read
                return ("wrong", False, 0.0, False,
                        f"wrong answer (equal raised {type(exc).__name__}: {exc})".splitlines()[0])
            if not same:
                return "wrong", False, 0.0, False, "wrong answer (differs from the safe configuration's)"
        won = cand_reply[3] <= safe[3]
        return ("win" if won else "loss"), won, cand_reply[3], True, ""
