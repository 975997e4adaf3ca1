"""The AUC-bandit meta-technique (OpenTuner's AUCBanditMetaTechnique), cost-aware.

A portfolio of techniques shares one run. Each proposal comes from the technique with the highest score

    score(t) = AUC(t) + C * sqrt(2 * log2(len(window)) / uses(t))

over a sliding window of (technique, was_new_best) outcomes: AUC(t) is the area under the curve of t's
recent outcomes, weighting recent new-best results more (``sum(pos_i * o_i) * 2 / (u * (u + 1))`` with
positions 1..u oldest to newest), and the second term explores techniques used less. A technique earns
credit when its proposal becomes a new global best. Ties are broken at random (seeded). Every technique
learns from every proposer's results, so population and model techniques use each other's finds; the
results are queued and told to a technique right before its next ask (all of its own, the latest
``tell_window`` of the others', and the best), so a technique that is rarely chosen costs O(1) per trial.

Cost awareness: the bandit times each technique's ``ask`` (deciding time per proposal, averaged over its
last calls) and compares it with the measurement time of the trials (``finished_at - started_at``).
A technique whose deciding time ``d`` exceeds ``cost_fraction * measurement + free_decide_s`` is used
only with probability ``(cost_fraction * measurement + free_decide_s) / d``, so its expected deciding
time per trial stays within that allowance: on a trivial objective the surrogate model proposes rarely,
on a one-second objective it runs freely. This reads clocks, so a seeded driver calls
``set_deterministic(True)`` and the bandit charges counted work instead (``work_done`` of
:class:`~perftune.search._base.CountsWork`: candidates generated, points fitted and scored; one unit per
``ask`` for a technique that does not count). The first ``free_proposals`` asks of each technique are
free; after them each technique may spend ``free_work`` units plus ``work_per_result`` units per result
told so far, and is skipped while it is over that budget; the free asks also end once
``free_until_results`` results are known (they are for short runs). The free part is counted in asks,
not units, because what a short run needs is a number of proposals from each technique, whatever one
costs on the space: a model proposal costs ~2,000 units on gemm's 15 parameters and ~250 on the 6 of
``benchmarks/overhead.py``, and the former free lump of 60,000 units let the cheap space's model make
300 proposals (2.4 s of a 10k-trial run on a trivial objective). Short runs (200 results on the twelve
development spaces: at most 99 model asks over 20 seeds) leave every technique free, long runs on a
cheap objective hold the model to a small share of the proposals, and the proposals depend only on the
seed and the results, never on how long anything took.

Proposals are de-duplicated against every configuration the bandit proposed or was told (bounded
memory): a technique that repeats itself is asked again a few times, then the next one, and finally
a random configuration is sampled.

Example:
    >>> from perftune.space import Int, Space
    >>> bandit = AUCBandit(Space({"x": Int(0, 100)}), seed=0)
    >>> len(bandit.ask(3))
    3
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import BoundedDict, PreloadsImports, Stateful, check_settings, loss_of
from perftune.search._seeding import BANDIT_GATE_KEY, derive_rng, derive_seed
from perftune.search._sequential import SequentialTechnique
from perftune.trial import Status

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["DEFAULT_PORTFOLIO", "AUCBandit", "BanditSettings"]

#: The default portfolio, chosen on the replayed GPU tuning spaces (benchmark hub, development set) and
#: 2-D Rosenbrock: a surrogate model for sample efficiency, greedy mutation, annealing and a genetic
#: algorithm for breadth, coordinate descent for the multiplicative structure of kernel parameters,
#: pattern search for continuous refinement, and uniform random as a safety net.
DEFAULT_PORTFOLIO: tuple[str, ...] = (
    "model",
    "greedy-uniform",
    "annealing",
    "ga",
    "coordinate-descent",
    "pattern-search",
    "random",
)

_RANDOM = "random"


@dataclasses.dataclass(frozen=True)
class BanditSettings:
    """Settings of the AUC bandit.

    Attributes:
        techniques: Names of the techniques in the portfolio (no duplicates, not "bandit").
        exploration: The exploration constant C of the score.
        window: Length of the sliding window of outcomes.
        cost_aware: Throttle techniques whose deciding time is large relative to the measurement time.
        cost_fraction: Share of the measurement time a technique may spend deciding, per proposal,
            before it is throttled.
        free_decide_s: Deciding time per proposal that is never throttled (seconds).
        free_proposals: Asks of each technique that are never charged, in a seeded (deterministic)
            run: the model asks at most 99 times in 200 trials on the twelve development spaces (20
            seeds each), so runs of that length are never throttled.
        free_until_results: The free asks end once this many results have been told (seeded runs):
            they are for short runs; later every ask is charged, so a long run on a cheap objective
            does not spend its free asks refitting the model hundreds of trials in.
        free_work: Counted work (``CountsWork`` units) each technique may spend after its free asks
            before the per-result budget applies, in a seeded run (~25 us of CPU per unit for the model).
        work_per_result: Counted work each technique's budget grows by per result told, in a seeded
            run. The unseeded run uses the clock (``cost_fraction``, ``free_decide_s``) instead.
        max_retries: How many times a technique that proposed a duplicate is asked again.
        tell_window: Results of other proposers kept for a technique until its next ask (it is always
            told the results of its own proposals, and the best result). A technique learns when it is
            asked, so one that is rarely chosen costs O(1) per trial, not a full ``tell`` per trial.
        technique_settings: Settings per technique name (a mapping, stored as sorted pairs).
        fill_while_waiting: Whether a procedural member (pattern search, coordinate descent, ...)
            whose batch is still in flight proposes fillers (perturbations of the best); ``False``:
            it proposes nothing and the bandit asks the next member. It matters only when results
            arrive late (a seeded run's lag, several workers); the default search's portfolio for
            finite spaces sets it ``False`` (benchmarks/results/lag.md).
    """

    techniques: tuple[str, ...] = DEFAULT_PORTFOLIO
    exploration: float = 0.05
    window: int = 500
    cost_aware: bool = True
    cost_fraction: float = 0.05
    free_decide_s: float = 5e-5
    free_proposals: int = 100
    free_until_results: int = 256
    free_work: float = 0.0
    work_per_result: float = 1.0
    max_retries: int = 3
    tell_window: int = 64
    technique_settings: Any = ()
    fill_while_waiting: bool = True

    def __post_init__(self) -> None:
        techniques = tuple(self.techniques)
        object.__setattr__(self, "techniques", techniques)
        check_settings("BanditSettings.techniques", len(techniques) >= 1, "needs at least one technique")
        check_settings(
            "BanditSettings.techniques",
            len(set(techniques)) == len(techniques),
            f"duplicate names in {list(techniques)}",
        )
        check_settings(
            "BanditSettings.techniques",
            not {"bandit", "default"} & set(techniques),
            "the bandit cannot contain itself",
        )
        check_settings(
            "BanditSettings.exploration", self.exploration >= 0, f"must be >= 0, got {self.exploration}"
        )
        check_settings("BanditSettings.window", self.window >= 1, f"must be >= 1, got {self.window}")
        check_settings(
            "BanditSettings.cost_fraction", self.cost_fraction > 0, f"must be > 0, got {self.cost_fraction}"
        )
        check_settings(
            "BanditSettings.free_decide_s", self.free_decide_s >= 0, f"must be >= 0, got {self.free_decide_s}"
        )
        check_settings(
            "BanditSettings.free_proposals",
            self.free_proposals >= 0,
            f"must be >= 0, got {self.free_proposals}",
        )
        check_settings(
            "BanditSettings.free_until_results",
            self.free_until_results >= 0,
            f"must be >= 0, got {self.free_until_results}",
        )
        check_settings("BanditSettings.free_work", self.free_work >= 0, f"must be >= 0, got {self.free_work}")
        check_settings(
            "BanditSettings.work_per_result",
            self.work_per_result >= 0,
            f"must be >= 0, got {self.work_per_result}",
        )
        check_settings(
            "BanditSettings.max_retries", self.max_retries >= 1, f"must be >= 1, got {self.max_retries}"
        )
        ts = self.technique_settings
        pairs = tuple(sorted(ts.items())) if isinstance(ts, Mapping) else tuple(ts)
        for name, _ in pairs:
            check_settings(
                "BanditSettings.technique_settings",
                name in techniques,
                f"{name!r} is not in the portfolio {list(techniques)}",
            )
        object.__setattr__(self, "technique_settings", pairs)


class _AUCWindow:
    """Sliding window of (technique index, was_new_best) with O(1) AUC updates per technique."""

    def __init__(self, n: int, size: int) -> None:
        self.size = size
        self.history: deque[tuple[int, int]] = deque()
        self.uses = [0] * n
        self.s0 = [0] * n  # sum of outcomes in the window
        self.s1 = [0] * n  # sum of position * outcome (positions 1..uses, oldest first)
        self._per: list[deque[int]] = [deque() for _ in range(n)]

    def add(self, t: int, outcome: bool) -> None:
        o = 1 if outcome else 0
        self.history.append((t, o))
        self.uses[t] += 1
        self.s1[t] += self.uses[t] * o
        self.s0[t] += o
        self._per[t].append(o)
        if len(self.history) > self.size:
            old_t, _ = self.history.popleft()
            first = self._per[old_t].popleft()
            # Removing position 1 shifts every other position down by one.
            self.s1[old_t] -= self.s0[old_t]
            self.s0[old_t] -= first
            self.uses[old_t] -= 1

    def auc(self, t: int) -> float:
        u = self.uses[t]
        return self.s1[t] * 2.0 / (u * (u + 1.0)) if u else 0.0

    def exploration(self, t: int) -> float:
        u = self.uses[t]
        if u == 0:
            return math.inf
        n = len(self.history)
        return math.sqrt(2.0 * math.log2(n) / u) if n > 1 else 0.0


class _CostMeter:
    """Mean deciding time per proposal over the last few asks of one technique (running sums)."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self.items: deque[tuple[float, int]] = deque()
        self.seconds = 0.0
        self.proposals = 0

    def add(self, seconds: float, n_proposals: int) -> None:
        self.items.append((seconds, n_proposals))
        self.seconds += seconds
        self.proposals += n_proposals
        if len(self.items) > self.size:
            old_s, old_n = self.items.popleft()
            self.seconds -= old_s
            self.proposals -= old_n

    def per_proposal(self) -> float | None:
        if not self.items:
            return None
        return max(0.0, self.seconds) / max(1, self.proposals)


class AUCBandit(Stateful):
    """AUC-bandit ensemble over a portfolio of techniques (the default technique, ``"default"``).

    Args:
        space: The search space.
        seed: Seed (each sub-technique gets its own seed derived from it).
        settings: :class:`BanditSettings`.

    Attributes:
        counts: Proposals made per technique (``"random"`` also counts the de-duplication fallback).
        wins: Proposals per technique that became a new global best.
        deciding_time_s: Seconds spent in each technique's ask and tell.
        work_spent: Counted work charged to each technique (``CountsWork`` units, see the module; the
            free asks are not charged).
        n_asks: Asks made of each technique (the first ``free_proposals`` are free in a seeded run).
        best_loss: Best loss told so far.

    Example:
        >>> from perftune.space import Float, Space
        >>> bandit = AUCBandit(Space({"x": Float(-1, 1)}), seed=1,
        ...                    settings=BanditSettings(techniques=("de", "random"), exploration=0.1))
        >>> sorted(bandit.credits())
        ['de', 'random']
    """

    name: ClassVar[str] = "bandit"
    Settings: ClassVar[type] = BanditSettings

    def __init__(
        self, space: Space, *, seed: int | None = None, settings: BanditSettings | None = None
    ) -> None:
        from perftune.errors import PerftuneError
        from perftune.search._registry import create

        if settings is None:
            settings = BanditSettings()
        elif not isinstance(settings, BanditSettings):
            raise PerftuneError(
                f"technique 'bandit': settings must be BanditSettings, got {type(settings).__name__}"
            )
        self.space = space
        self.settings = settings
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self._gate_rng = derive_rng(seed or 0, BANDIT_GATE_KEY)
        root = int(seed) if seed is not None else int(self.rng.integers(2**31 - 1))
        overrides = dict(settings.technique_settings)
        self.names: list[str] = list(settings.techniques)
        self.techniques: list[Any] = []
        for i, name in enumerate(self.names):
            sub_seed = derive_seed(root, i + 1)
            technique = create(name, space, seed=sub_seed, settings=overrides.get(name))
            if isinstance(technique, SequentialTechnique):
                technique.fill_while_waiting = bool(settings.fill_while_waiting)
            self.techniques.append(technique)
        self._index = {name: i for i, name in enumerate(self.names)}
        self._window = _AUCWindow(len(self.names), settings.window)
        self._ask_cost = [_CostMeter() for _ in self.names]
        self.counts: dict[str, int] = dict.fromkeys(self.names, 0)
        self.wins: dict[str, int] = dict.fromkeys(self.names, 0)
        self.deciding_time_s: dict[str, float] = dict.fromkeys(self.names, 0.0)
        self.work_spent: dict[str, float] = dict.fromkeys(self.names, 0.0)
        self.n_asks: dict[str, int] = dict.fromkeys(self.names, 0)
        self.n_results = 0  # results told (not cancelled): what the counted-work budget grows with
        self.n_fallback = 0
        self.best_loss: float | None = None
        self.best_config: Config | None = None
        self.deterministic = False
        self.parallelism = 1  # evaluations in flight, told by the driver (set_parallelism)
        self._measure_s: deque[float] = deque(maxlen=64)
        self._measure_sum = 0.0
        # Results waiting to be told to each technique: its own (all of them) and others' (the latest).
        self._inbox_own: list[list[Trial]] = [[] for _ in self.names]
        self._inbox_other: list[deque[Trial]] = [deque(maxlen=settings.tell_window) for _ in self.names]
        self._evicted = [False] * len(self.names)
        self.best_trial: Trial | None = None
        self._proposer: BoundedDict = BoundedDict(65_536)  # config -> technique index (in flight)
        self._in_flight = [0] * len(self.names)
        self._seen: BoundedDict = BoundedDict(262_144)  # configs proposed or told

    # ------------------------------------------------------------------ introspection
    def credits(self) -> dict[str, float]:
        """The AUC credit (exploitation term) of every technique, in [0, 1]."""
        return {name: self._window.auc(i) for i, name in enumerate(self.names)}

    def scores(self) -> dict[str, float]:
        """The full bandit score (credit + exploration) of every technique."""
        return {name: self._score(i) for i, name in enumerate(self.names)}

    def decide_s_per_proposal(self) -> dict[str, float | None]:
        """Recent mean deciding time per proposal of every technique (None before its first ask)."""
        return {name: self._ask_cost[i].per_proposal() for i, name in enumerate(self.names)}

    def measurement_s(self) -> float | None:
        """Mean measurement time of recent trials (None when no trial carried timestamps)."""
        if not self._measure_s:
            return None
        return self._measure_sum / len(self._measure_s)

    def proposer_of(self, config: Config) -> str | None:
        """Which technique proposed ``config`` (while it is in flight), for labelling trials."""
        i = self._proposer.get(config)
        if i is None:
            return None
        return _RANDOM if i < 0 else self.names[i]

    def set_parallelism(self, n_in_flight: int) -> None:
        """With ``n`` evaluations in flight the driver must propose ``n`` times as fast: the deciding
        allowance per proposal shrinks accordingly (called by the driver)."""
        self.parallelism = max(1, int(n_in_flight))

    def preload_imports(self) -> None:
        """Pass the driver's :class:`~perftune.search.PreloadsImports` call on to the portfolio."""
        for technique in self.techniques:
            if isinstance(technique, PreloadsImports):
                technique.preload_imports()

    def set_deterministic(self, flag: bool = True) -> None:
        """Turn clock-based throttling off (``True``) so that a seeded run is reproducible."""
        self.deterministic = bool(flag)

    @property
    def n_errors(self) -> int:
        """Internal errors caught by the sub-techniques (a bug if not 0)."""
        return sum(int(getattr(t, "n_errors", 0)) for t in self.techniques)

    # ------------------------------------------------------------------ choosing
    def _score(self, i: int) -> float:
        window = self._window
        ue = window.uses[i] + self._in_flight[i]
        if ue == 0:
            return math.inf
        n_hist = len(window.history) + sum(self._in_flight)
        log_term = 2.0 * math.log2(n_hist) if n_hist > 1 else 0.0
        return window.auc(i) + self.settings.exploration * math.sqrt(log_term / ue)

    def _order(self) -> list[int]:
        n = len(self.names)
        tiebreak = self.rng.permutation(n).tolist()
        window = self._window
        c = self.settings.exploration
        in_flight = self._in_flight
        n_hist = len(window.history) + sum(in_flight)
        log_term = 2.0 * math.log2(n_hist) if n_hist > 1 else 0.0
        keys = []
        for i in range(n):
            u = window.uses[i]
            # Proposals still in flight count as uses for exploration (not for credit), so that with
            # several evaluations in flight the choices spread instead of repeating one technique.
            ue = u + in_flight[i]
            if ue == 0:
                score = math.inf
            else:
                auc = window.s1[i] * 2.0 / (u * (u + 1.0)) if u else 0.0
                score = auc + c * math.sqrt(log_term / ue)
            keys.append((-score, tiebreak[i], i))
        keys.sort()
        return [k[2] for k in keys]

    def _allowance(self) -> float | None:
        """Deciding time per proposal a technique may use unthrottled (None: no throttling)."""
        s = self.settings
        if not s.cost_aware or self.deterministic:
            return None
        m = self.measurement_s()
        if m is None:
            return None
        # With several evaluations in flight the driver must propose that many times as fast.
        return s.cost_fraction * m / getattr(self, "parallelism", 1) + s.free_decide_s

    def work_budget(self) -> float:
        """Counted work each technique may have spent by now (seeded runs, see the module)."""
        s = self.settings
        return s.free_work + s.work_per_result * self.n_results

    def _free_ask(self, name: str) -> bool:
        """Whether the next ask of technique ``name`` is free of charge (seeded runs, see the module)."""
        s = self.settings
        return self.n_asks.get(name, 0) < s.free_proposals and self.n_results < s.free_until_results

    def _allowed(self, i: int, allowance: float | None) -> bool:
        if self.deterministic:
            if not self.settings.cost_aware:
                return True
            name = self.names[i]
            if self._free_ask(name):
                return True
            return self.work_spent[name] <= self.work_budget()
        if allowance is None:
            return True
        d = self._ask_cost[i].per_proposal()
        if d is None:
            d = getattr(self.techniques[i], "decide_cost_hint_s", None)
        if d is None or d <= allowance:
            return True
        return bool(self._gate_rng.random() < allowance / d)

    def ask(self, n: int) -> list[Config]:
        """Up to ``n`` new valid configurations, each from the technique with the best score."""
        out: list[Config] = []
        for _ in range(max(0, int(n))):
            config = self._ask_one()
            if config is None:
                break
            out.append(config)
        return out

    def _ask_one(self) -> Config | None:
        seen = self._seen
        allowance = self._allowance()
        for i in self._order():
            if not self._allowed(i, allowance):
                continue
            technique = self.techniques[i]
            name = self.names[i]
            for _ in range(self.settings.max_retries):
                t0 = time.perf_counter()
                w0 = getattr(technique, "work_done", None)
                self._deliver(i)
                proposals = technique.ask(1)
                dt = time.perf_counter() - t0
                w1 = getattr(technique, "work_done", None)
                self._ask_cost[i].add(dt, len(proposals))
                self.deciding_time_s[name] += dt
                counted = isinstance(w0, int | float) and isinstance(w1, int | float)
                free = self._free_ask(name)
                self.n_asks[name] = self.n_asks.get(name, 0) + 1
                if not free:
                    self.work_spent[name] += max(0.0, float(w1) - float(w0)) if counted else 1.0  # type: ignore[arg-type]
                if not proposals:
                    break
                config = proposals[0]
                if config not in seen:
                    return self._issue(config, i)
        # Every technique repeated itself (or had nothing): fall back to uniform random sampling.
        for _ in range(16):
            config = self.space.sample(self.rng, 1)[0]
            if config not in seen:
                self.n_fallback += 1
                return self._issue(config, -1)
        return None

    def _issue(self, config: Config, i: int) -> Config:
        self._seen[config] = True
        self._proposer[config] = i
        if i >= 0:
            self._in_flight[i] += 1
        name = _RANDOM if i < 0 else self.names[i]
        if name in self.counts:
            self.counts[name] += 1
        else:
            self.counts[name] = 1
        return config

    # ------------------------------------------------------------------ learning
    def tell(self, trials: Sequence[Trial]) -> None:
        """Credit the proposers of new bests, record measurement times, queue the results for every technique.

        Each technique is told its queued results right before its next ``ask`` (or on :meth:`flush`).
        """
        trials = [t for t in trials if t.status is not Status.PENDING]
        if not trials:
            return
        for trial in trials:
            self._seen[trial.config] = True
            i = self._proposer.pop(trial.config, None)
            if i is not None and i >= 0 and self._in_flight[i] > 0:
                self._in_flight[i] -= 1
            if trial.status is Status.CANCELLED:
                if i is not None and i >= 0:
                    self._inbox_own[i].append(trial)  # its proposer may be waiting for it
                continue
            self.n_results += 1
            new_best = self._credit(trial)
            if i is not None and i >= 0:
                self._window.add(i, new_best)
                if new_best:
                    self.wins[self.names[i]] += 1
            duration = trial.duration_s
            if duration is not None and duration >= 0:
                if len(self._measure_s) == self._measure_s.maxlen:
                    self._measure_sum -= self._measure_s[0]
                self._measure_s.append(duration)
                self._measure_sum += duration
            for j in range(len(self.techniques)):
                if j == i:
                    self._inbox_own[j].append(trial)
                else:
                    inbox = self._inbox_other[j]
                    if len(inbox) == inbox.maxlen:
                        self._evicted[j] = True
                    inbox.append(trial)
            if new_best:
                self.best_trial = trial

    def _credit(self, trial: Trial) -> bool:
        """Whether ``trial`` earns its proposer credit: here, a new best loss (updates ``best_loss``).

        The multi-objective ensemble (:class:`~perftune.search.MOBandit`) overrides this hook with
        "the trial entered the Pareto front" (a positive hypervolume improvement).
        """
        loss = loss_of(trial)
        new_best = loss is not None and (self.best_loss is None or loss < self.best_loss)
        if new_best:
            self.best_loss = loss
            self.best_config = trial.config
        return new_best

    def _deliver(self, i: int) -> None:
        """Tell technique ``i`` what happened since its last ask (bounded, see ``tell_window``)."""
        own, other = self._inbox_own[i], self._inbox_other[i]
        if not own and not other:
            return
        batch: list[Trial] = []
        best = self.best_trial
        # By ticket, not identity: a checkpoint restores the best trial and the inboxes as separate objects
        # (by identity, a resumed run told the best twice, and its seeded history diverged).
        if self._evicted[i] and best is not None and all(t.id != best.id for t in (*other, *own)):
            batch.append(best)  # the best result always reaches everyone
        batch.extend(other)
        batch.extend(own)
        other.clear()
        own.clear()
        self._evicted[i] = False
        self.techniques[i].tell(batch)

    def flush(self) -> None:
        """Tell every technique all pending results now (they are otherwise told when next asked)."""
        for i, name in enumerate(self.names):
            t0 = time.perf_counter()
            self._deliver(i)
            self.deciding_time_s[name] += time.perf_counter() - t0

    def __repr__(self) -> str:
        return f"AUCBandit(seed={self.seed}, techniques={self.names})"
