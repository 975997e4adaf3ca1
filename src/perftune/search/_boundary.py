"""Boundary-biased proposals and neighbourhoods of distinct elites.

Tuning spaces of kernels and compilers often have their optimum at a boundary of some ordered
parameters (the smallest block height, the largest tile, a feature switched off), and local search
from the single best configuration stalls on plateaus where the optimum lies one move away from a
point that looked worse. These two techniques address both; found on the replayed benchmark-hub
spaces as a whole (``benchmarks/quality.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from perftune.search._base import BaseTechnique, check_settings, enumerate_within

__all__ = [
    "CORNER_SETTINGS",
    "DESIGN_SETTINGS",
    "ELITE_SETTINGS",
    "Boundary",
    "BoundarySettings",
    "EliteNeighbours",
    "EliteNeighboursSettings",
    "distinct_elites",
    "keep_best",
    "next_new_move",
    "ordered_values",
    "ranks_failures_last",
    "result_trends",
]


def ordered_values(param: Any) -> list[Any] | None:
    """The values of a finite, ordered parameter (Int, Pow2, Ordinal, Bool...), else None.

    Example:
        >>> from perftune.space import Pow2
        >>> ordered_values(Pow2(1, 8))
        [1, 2, 4, 8]
    """
    from perftune.space import Choice, Ordinal

    if isinstance(param, Choice) and not isinstance(param, Ordinal):
        return None
    try:
        values = param.values()
    except (AttributeError, TypeError, ValueError):
        return None
    if values is None or len(values) < 2:
        return None
    return list(values)


@dataclasses.dataclass(frozen=True)
class BoundarySettings:
    """Settings of :class:`Boundary`.

    Attributes:
        p_from_random: Probability that a proposal starts from a random configuration (else the best).
        p_move_random: From a random start, the probability that each ordered parameter moves to an
            extreme (1.0: a random corner of the ordered parameters).
        p_move_best: From the best configuration, the probability that each ordered parameter moves.
        p_flip: Share of proposals (once something succeeded) that flip one ordered parameter of an
            elite to its other extreme: a local search on the lattice of corners, which crosses
            plateaus where the optimum is a corner one flip away from a corner that looked worse.
        n_elites: How many distinct elites the flips start from.
        min_distance: Elites differ from every better elite in at least this many parameters.
        lean: How far the chance of an ordered parameter's upper extreme leans, once ``trend_after``
            results are in, to the side its results favour: the correlation between the parameter's
            position in its range and the rank of the results (failures last) moves the chance from 0.5
            by up to ``lean`` (0: a fair coin, whatever the results).
        boost: Parameters with a trend also move more often: the move chance grows by ``boost`` times
            the trend's absolute correlation.
        trend_after: Results before trends count (and values of a parameter seen, at least).
        nearest_repair: Once there are trends, a proposal that breaks the space's constraints moves to
            the nearest valid configuration (the fewest steps over the ordered parameters' value
            indices, any other parameter one step when it differs), ties broken to the side the trends
            favour, then at random; before that, and on spaces of more than ``enumerate_limit`` valid
            configurations, the usual repair (:meth:`BaseTechnique.valid`).
        enumerate_limit: Most valid configurations the nearest repair enumerates (once per instance).
    """

    p_from_random: float = 0.6
    p_move_random: float = 0.5
    p_move_best: float = 0.25
    p_flip: float = 0.3
    n_elites: int = 4
    min_distance: int = 3
    lean: float = 0.0
    boost: float = 0.0
    trend_after: int = 6
    nearest_repair: bool = False
    enumerate_limit: int = 50_000

    def __post_init__(self) -> None:
        for field in ("p_from_random", "p_move_random", "p_move_best", "p_flip"):
            value = getattr(self, field)
            check_settings(f"BoundarySettings.{field}", 0 <= value <= 1, f"must be in [0, 1], got {value}")
        check_settings("BoundarySettings.n_elites", self.n_elites >= 1, f"must be >= 1, got {self.n_elites}")
        check_settings(
            "BoundarySettings.min_distance", self.min_distance >= 1, f"must be >= 1, got {self.min_distance}"
        )
        lean = self.lean
        check_settings("BoundarySettings.lean", 0 <= lean <= 0.5, f"must be in [0, 0.5], got {lean}")
        check_settings("BoundarySettings.boost", self.boost >= 0, f"must be >= 0, got {self.boost}")
        check_settings(
            "BoundarySettings.trend_after", self.trend_after >= 2, f"must be >= 2, got {self.trend_after}"
        )
        check_settings(
            "BoundarySettings.enumerate_limit",
            self.enumerate_limit >= 1,
            f"must be >= 1, got {self.enumerate_limit}",
        )

    @property
    def learns(self) -> bool:
        """Whether the extremes depend on the results (a lean or a boost)."""
        return self.lean > 0 or self.boost > 0


#: The settings of the default search's initial design: half the ordered parameters of a random
#: configuration at an extreme, no flips. On spaces of more than seven ordered parameters the default
#: search moves fewer of them (:func:`design_settings`). From the 6th result each extreme leans to the
#: side the results favour (a chance of 0.15-0.85 instead of a fair coin) and parameters with a trend
#: move more often. Adopted by the leave-one-kernel-out rule on 200 seeds, each half of 100 passing it
#: on its own (benchmarks/results/cv_notes.md, decision 6). From then on, a design point that breaks
#: the constraints moves to the nearest valid configuration, ties to the side the trends favour, as
#: Kernel Tuner repairs its initial population but with the side learned (decision 7).
DESIGN_SETTINGS = BoundarySettings(p_flip=0.0, lean=0.35, boost=0.5, nearest_repair=True)
#: Ordered parameters the initial design moves to an extreme per proposal, on average, at most: what
#: ``DESIGN_SETTINGS`` moves on the spaces it was chosen on (6-7 ordered parameters, p = 0.5).
DESIGN_MOVES = 3.5


def design_settings(space: Any) -> BoundarySettings:
    """The initial design's settings for ``space``: ``DESIGN_SETTINGS`` with ``p_move_random`` at most
    ``DESIGN_MOVES / n_ordered``, so that a design point moves about as many parameters to an extreme
    whatever the space's size (whole-space corners of many parameters are rarely near the optimum: on
    gemm's 10 ordered parameters, 0.35; benchmarks/results/cv.md).

    Example:
        >>> from perftune.space import Int, Space
        >>> design_settings(Space({f"p{i}": Int(1, 4) for i in range(10)})).p_move_random
        0.35
        >>> design_settings(Space({"a": Int(1, 4)})).p_move_random
        0.5
    """
    n_ordered = sum(1 for p in space.params.values() if ordered_values(p) is not None)
    p = DESIGN_SETTINGS.p_move_random
    if n_ordered and DESIGN_MOVES / n_ordered < p:
        p = DESIGN_MOVES / n_ordered
    return dataclasses.replace(DESIGN_SETTINGS, p_move_random=p)
#: The settings of the boundary arm of the default search's bandit: random proposals are whole
#: corners, and a third of the proposals are flips of distinct elites. Chosen on the replayed
#: development spaces as a whole (benchmarks/results/quality.md): on convolution W6600 the default
#: search crosses the plateau in 33 of 40 seeds within 200 measurements (18 of 40 before).
CORNER_SETTINGS = BoundarySettings(p_move_random=1.0)


class Boundary(BaseTechnique):
    """Proposals that put ordered parameters at their smallest or largest value.

    Three kinds of proposal: a random corner (every finite ordered parameter of a random
    configuration at its minimum or maximum, see :class:`BoundarySettings`), the best configuration
    with a few ordered parameters moved to an extreme, and, once results are in, one ordered parameter
    of one of several distinct elites flipped to its other extreme (a local search on the corners).
    With ``lean`` or ``boost`` (the default search's design), which extreme a parameter moves to, and how
    often it moves, follow the trend of the results so far (:meth:`_trends`).

    Example:
        >>> from perftune.space import Int, Space
        >>> tech = Boundary(Space({"x": Int(0, 100), "y": Int(0, 100)}), seed=1)
        >>> len(tech.ask(2))
        2
    """

    name: ClassVar[str] = "boundary"
    Settings: ClassVar[type] = BoundarySettings
    settings: BoundarySettings
    pool_size: ClassVar[int] = 32
    #: Results the lean learns from, at most (the most recent).
    history_limit: ClassVar[int] = 256

    #: The valid configurations as value indices: derived from the space, rebuilt when first needed.
    state_exclude: ClassVar[frozenset[str]] = BaseTechnique.state_exclude | {"_valid_index", "_codes"}

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._ordered = {name: v for name, p in space.params.items() if (v := ordered_values(p)) is not None}
        self._top: list[tuple[float, Any]] = []  # the best successes, bounded
        self._hist: list[tuple[Any, float | None]] = []  # told results, when the settings learn from them
        self._now: dict[str, float] = {}  # the trends the proposal being made leans on
        self._valid_index: tuple[list[Any], np.ndarray] | None = None  # for the nearest repair
        self._codes: dict[str, dict[str, int]] = {}
        self._index_counted = False  # the enumeration's work is counted once, not again after a resume

    def _after_load(self) -> None:
        self._valid_index, self._codes = None, {}

    def _learn(self, trial: Any, loss: float | None) -> None:
        if self.settings.learns:
            self._hist.append((trial.config, loss))
            if len(self._hist) > self.history_limit:
                del self._hist[0]
        if loss is None or self.settings.p_flip <= 0:
            return
        keep_best(self._top, loss, trial.config, self.pool_size)

    def _flip(self) -> Any:
        from perftune.space import Config

        elites = distinct_elites(self._top, self.settings.n_elites, self.settings.min_distance)
        parent = elites[int(self.rng.integers(len(elites)))]
        names = [n for n in self._ordered if n in parent]
        if not names:
            return None
        name = names[int(self.rng.integers(len(names)))]
        values = self._ordered[name]
        lo, hi = values[0], values[-1]
        current = parent[name]
        target = hi if current == lo else lo if current == hi else (lo if self.rng.random() < 0.5 else hi)
        base = dict(parent)
        base[name] = target
        return Config(base)

    def _propose(self) -> Any:
        from perftune.space import Config

        if self.settings.learns:
            self._now = self._trends()
        if self._top and self.rng.random() < self.settings.p_flip:
            flipped = self._flip()
            if flipped is not None:
                return self._repaired(flipped, ())
        st = self.settings
        from_random = self.best_config is None or self.rng.random() < st.p_from_random
        start: Any = self._random_start() if from_random else self.best_config
        base = dict(start)
        p = st.p_move_random if from_random else st.p_move_best
        moved: list[str] = []
        for name in self._ordered:
            if name not in base:
                continue
            values = self._ordered[name]
            if self.rng.random() < self._move_chance(name, p):
                base[name] = values[0] if self.rng.random() < self._low_chance(name) else values[-1]
                moved.append(name)
        if not moved:
            return start if from_random else None
        return self._repaired(Config(base), moved)

    def _repaired(self, config: Any, moved: Sequence[str]) -> Any:
        """``config`` (``moved``: the parameters this proposal moved to an extreme), or with
        ``nearest_repair`` and trends, the nearest valid configuration to it (see
        :class:`BoundarySettings`); an invalid configuration left as it is gets the usual repair."""
        if not self.settings.nearest_repair or not self._now or self.space.is_valid(config):
            return config
        return self._nearest_valid(config, self._now)

    def _nearest_valid(self, config: Any, trends: dict[str, float]) -> Any:
        """The valid configuration the fewest steps from ``config`` (see :class:`BoundarySettings`), ties
        to the side ``trends`` favour, then at random; ``config`` itself on a space too large to
        enumerate."""
        index = self._enumerated_index()
        if index is None:
            return config
        valid, rows = index
        names = list(self.space.params)
        point = np.array([self._value_code(n, config.get(n)) for n in names])
        ordered = np.array([n in self._ordered for n in names])
        steps = np.abs(rows - point)
        distance = np.where(ordered, steps, steps > 0).sum(axis=1)
        ties = np.flatnonzero(distance == distance.min())
        self.work_done += len(valid) * len(names) / 64.0
        if len(ties) > 1:
            # Lower is better: a positive trend means larger values rank worse.
            score = np.zeros(len(ties))
            for j, name in enumerate(names):
                trend = trends.get(name)
                if trend is not None:
                    score += trend * rows[ties, j] / max(1, len(self._ordered[name]) - 1)
            ties = ties[score == score.min()]
        return valid[int(ties[int(self.rng.integers(len(ties)))])]

    def _enumerated_index(self) -> tuple[list[Any], np.ndarray] | None:
        """Every valid configuration and its row of value codes, or None for a space too large (or
        infinite) to enumerate within ``enumerate_limit``."""
        if self._valid_index is None:
            valid, n_enumerated = enumerate_within(self.space, self.settings.enumerate_limit)
            if not self._index_counted:
                self.work_done += n_enumerated
                self._index_counted = True
            if not valid:
                self._valid_index = ([], np.zeros((0, 0)))
            else:
                names = list(self.space.params)
                rows = np.array([[self._value_code(n, c.get(n)) for n in names] for c in valid], dtype=float)
                self._valid_index = (valid, rows)
        return self._valid_index if self._valid_index[0] else None

    def _value_code(self, name: str, value: Any) -> float:
        """An ordered parameter's value index; for any other parameter a number that only equality
        reads (each value's number in the order first seen)."""
        values = self._ordered.get(name)
        if values is not None and value in values:
            return float(values.index(value))
        codes = self._codes.setdefault(name, {})
        return float(codes.setdefault(repr(value), len(codes)))

    def _random_start(self) -> Any:
        """The configuration a random proposal moves parameters of (uniform over the valid ones)."""
        return self.space.sample(self.rng, 1)[0]

    def _move_chance(self, name: str, p: float) -> float:
        """The chance that ordered parameter ``name`` moves to an extreme (``p``: from the settings;
        more for a parameter with a trend, by ``boost``)."""
        trend = self._now.get(name)
        return p if trend is None else min(1.0, p + self.settings.boost * abs(trend))

    def _low_chance(self, name: str) -> float:
        """The chance that a move of ``name`` goes to its smallest value rather than its largest (a fair
        coin, leaning by up to ``lean`` to the side the results favour)."""
        trend = self._now.get(name)
        return 0.5 if trend is None else 0.5 + self.settings.lean * max(-1.0, min(1.0, 2.0 * trend))

    def _trends(self) -> dict[str, float]:
        """:func:`result_trends` of the results told so far (empty before ``trend_after``)."""
        if len(self._hist) < self.settings.trend_after:
            return {}
        self.work_done += len(self._hist) * len(self._ordered) / 64.0
        return result_trends(self._hist, self._ordered, self.settings.trend_after)


def ranks_failures_last(losses: Iterable[float | None]) -> Any:
    """The rank of each loss (0 for the best), failures (None) ranked after every success, ties in order.

    Example:
        >>> ranks_failures_last([3.0, None, 1.0]).tolist()
        [1.0, 2.0, 0.0]
    """
    values = list(losses)
    worst = max((v for v in values if v is not None), default=0.0)
    filled = np.array([worst + 1.0 if v is None else v for v in values])
    return filled.argsort(kind="stable").argsort().astype(float)


def result_trends(
    history: list[tuple[Any, float | None]], ordered: dict[str, list[Any]], least: int
) -> dict[str, float]:
    """Per ordered parameter (``ordered``: its values in order), the correlation between its position in
    its range and the rank of the results in ``history`` (``(config, loss)``, failures ranked last):
    > 0 when larger values rank worse. Parameters seen in fewer than ``least`` results, or at one value
    only, have no trend."""
    if len(history) < least:
        return {}
    ranks = ranks_failures_last(v for _, v in history)
    out: dict[str, float] = {}
    for name, values in ordered.items():
        index = {v: i for i, v in enumerate(values)}
        pos = np.array([index.get(c.get(name), np.nan) / (len(values) - 1) for c, _ in history])
        ok = ~np.isnan(pos)
        if ok.sum() < least or pos[ok].std() == 0:
            continue
        trend = float(np.corrcoef(pos[ok], ranks[ok])[0, 1])
        if math.isfinite(trend):
            out[name] = trend
    return out


def keep_best(top: list[tuple[float, Any]], loss: float, config: Any, limit: int) -> None:
    """Add ``(loss, config)`` to ``top`` (kept sorted by loss) and drop all but the ``limit`` best."""
    top.append((loss, config))
    top.sort(key=lambda t: t[0])
    del top[limit:]


def distinct_elites(top: list[tuple[float, Any]], n: int, min_distance: int) -> list[Any]:
    """Up to ``n`` of the best configurations (``top`` is sorted by loss), each differing from every
    better one chosen in at least ``min_distance`` parameters, so that several basins are represented."""
    chosen: list[Any] = []
    for _, config in top:
        if all(sum(config.get(k) != e.get(k) for k in set(config) | set(e)) >= min_distance for e in chosen):
            chosen.append(config)
            if len(chosen) >= n:
                break
    return chosen


@dataclasses.dataclass(frozen=True)
class EliteNeighboursSettings:
    """Settings of :class:`EliteNeighbours`.

    Attributes:
        widen_after: Once this many results in a row brought no new best (and at least
            ``widen_min_results`` results are known), the neighbourhoods widen:
            parameters of at most ``widen_max_values`` values also move to their non-adjacent values
            (tried first), and the ``n_close`` best configurations are elites too, however close to each
            other (0: never). A runner-up one move from the best is where a second move starts: on the
            pnpoly RTX Titan replay the optimum is one move of ``between_method`` (0 -> 2, not adjacent)
            from the third-best configuration, itself one move from the best.
        widen_min_results: Results known before the neighbourhoods may widen (late in a run: the
            wider moves cost proposals that a run which still improves needs).
        widen_max_values: Parameters with at most this many values take every value once widened.
        n_close: The best configurations that are elites once widened.
    """

    widen_after: int = 0
    widen_min_results: int = 0
    widen_max_values: int = 8
    n_close: int = 3

    def __post_init__(self) -> None:
        for field in ("widen_after", "widen_min_results", "widen_max_values", "n_close"):
            value = getattr(self, field)
            check_settings(f"EliteNeighboursSettings.{field}", value >= 0, f"must be >= 0, got {value}")


class EliteNeighbours(BaseTechnique):
    """Unmeasured one-parameter neighbours of several *distinct* elites, best elite first.

    Elites are the best configurations that differ from every better elite in at least
    ``min_distance`` parameters, so that every basin among the best few is probed. With
    ``EliteNeighboursSettings.widen_after``, a run that stops improving widens the neighbourhoods
    (non-adjacent values of parameters of few values, and the best few configurations as elites).

    Example:
        >>> from perftune.space import Int, Space
        >>> tech = EliteNeighbours(Space({"x": Int(0, 100)}), seed=1)
        >>> len(tech.ask(1))
        1
    """

    name: ClassVar[str] = "elite-neighbours"
    Settings: ClassVar[type] = EliteNeighboursSettings
    settings: EliteNeighboursSettings
    n_elites: ClassVar[int] = 4
    min_distance: ClassVar[int] = 3
    pool_size: ClassVar[int] = 64

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._top: list[tuple[float, Any]] = []  # the best successes, bounded
        self._neighbours: dict[Any, list[Any]] = {}
        self._n_told_at_best = 0
        self._widened = False

    def _learn(self, trial: Any, loss: float | None) -> None:
        if loss is not None:
            keep_best(self._top, loss, trial.config, self.pool_size)
        after = self.settings.widen_after
        if not after:
            return
        if self.improved:
            self._n_told_at_best = self.n_told
        late = self.n_told >= self.settings.widen_min_results
        widened = late and self.n_told - self._n_told_at_best >= after
        if widened != self._widened:
            self._widened = widened
            self._neighbours.clear()  # the same elites have other moves now

    def _elites(self) -> list[Any]:
        far = distinct_elites(self._top, self.n_elites, self.min_distance)
        if not self._widened:
            return far
        close = [c for _, c in self._top[: self.settings.n_close]]
        rank = {c: i for i, (_, c) in enumerate(self._top)}
        return sorted(dict.fromkeys([*close, *far]), key=lambda c: rank.get(c, len(rank)))

    def _wider(self, elite: Any, usual: set[Any]) -> list[Any]:
        """The moves of parameters of few values to their non-adjacent values."""
        from perftune.space import Config

        out: list[Any] = []
        for name, param in self.space.params.items():
            if name not in elite:
                continue
            try:
                values = param.values()
            except (AttributeError, TypeError, ValueError):
                continue
            if values is None or len(values) > self.settings.widen_max_values:
                continue
            for v in values:
                if v == elite[name]:
                    continue
                data = dict(elite)
                data[name] = v
                config = Config(data)
                if config not in usual and self.space.is_valid(config):
                    out.append(config)
        return out

    def _elite_moves(self, elite: Any) -> list[Any]:
        """The moves around ``elite``, shuffled (once widened, the wider moves come first)."""
        found = list(self.space.neighbors(elite))
        self.rng.shuffle(found)
        if self._widened:
            wider = self._wider(elite, set(found))
            self.rng.shuffle(wider)
            found += wider  # popped from the end: the wider moves first
        return found

    def _propose(self) -> Any:
        config = next_new_move(self, self._neighbours, self._elites(), self._elite_moves)
        return self.space.sample(self.rng, 1)[0] if config is None else config


def next_new_move(
    technique: BaseTechnique,
    cache: dict[Any, list[Any]],
    elites: Iterable[Any],
    moves: Callable[[Any], list[Any]],
) -> Any | None:
    """The next configuration new to ``technique`` among the moves around each of ``elites`` in turn:
    ``moves(elite)`` is made once per elite (``cache`` remembers at most 256 elites) and popped from its
    end. None when the moves of every elite are used up."""
    for elite in elites:
        if elite not in cache:
            cache[elite] = moves(elite)
            if len(cache) > 256:
                cache.pop(next(iter(cache)))
        pending = cache[elite]
        while pending:
            config = pending.pop()
            if technique.is_new(config):
                return config
    return None


#: The settings of the ``elite-neighbours`` arm of the default search: after 100 results, once 32 in a row
#: brought no new best, parameters of at most 8 values also move to their non-adjacent values around
#: the three best configurations and the distinct elites. Adopted by the leave-one-kernel-out rule
#: (benchmarks/results/cv.md, decision 3): pnpoly RTX Titan at 200 measurements 1.062 -> 1.000 (its
#: optimum found in 12 of 20 seeds instead of 3); the first 100 measurements of every run are unchanged.
ELITE_SETTINGS = EliteNeighboursSettings(widen_after=32, widen_min_results=100)
