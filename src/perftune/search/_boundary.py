"""Boundary-biased proposals and neighbourhoods of distinct elites.

Tuning spaces of kernels and compilers often have their optimum at a boundary of some ordered
parameters (the smallest block height, the largest tile, a feature switched off), and local search
from the single best configuration stalls on plateaus where the optimum lies one move away from a
point that looked worse. These two techniques address both; found on the replayed benchmark-hub
spaces as a whole (``benchmarks/quality.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from perftune.search._base import BaseTechnique, NoSettings

__all__ = ["Boundary", "EliteNeighbours", "ordered_values"]


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


class Boundary(BaseTechnique):
    """Proposals that put ordered parameters at their smallest or largest value.

    From a random configuration (or, less often, the best so far), each finite ordered parameter moves
    to its minimum or maximum with some probability.

    Example:
        >>> from perftune.space import Int, Space
        >>> tech = Boundary(Space({"x": Int(0, 100), "y": Int(0, 100)}), seed=1)
        >>> len(tech.ask(2))
        2
    """

    name: ClassVar[str] = "boundary"
    Settings: ClassVar[type] = NoSettings
    p_from_random: ClassVar[float] = 0.6
    p_move_random: ClassVar[float] = 0.5
    p_move_best: ClassVar[float] = 0.25

    def _propose(self) -> Any:
        from perftune.space import Config

        from_random = self.best_config is None or self.rng.random() < self.p_from_random
        start: Any = self.space.sample(self.rng, 1)[0] if from_random else self.best_config
        base = dict(start)
        p = self.p_move_random if from_random else self.p_move_best
        moved = False
        for name, param in self.space.params.items():
            if name not in base:
                continue
            values = ordered_values(param)
            if values is None:
                continue
            if self.rng.random() < p:
                base[name] = values[0] if self.rng.random() < 0.5 else values[-1]
                moved = True
        if not moved:
            return start if from_random else None
        return Config(base)


class EliteNeighbours(BaseTechnique):
    """Unmeasured one-parameter neighbours of several *distinct* elites, best elite first.

    Elites are the best configurations that differ from every better elite in at least
    ``min_distance`` parameters, so that every basin among the best few is probed.

    Example:
        >>> from perftune.space import Int, Space
        >>> tech = EliteNeighbours(Space({"x": Int(0, 100)}), seed=1)
        >>> len(tech.ask(1))
        1
    """

    name: ClassVar[str] = "elite-neighbours"
    Settings: ClassVar[type] = NoSettings
    n_elites: ClassVar[int] = 4
    min_distance: ClassVar[int] = 3
    pool_size: ClassVar[int] = 64

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._top: list[tuple[float, Any]] = []  # the best successes, bounded
        self._neighbours: dict[Any, list[Any]] = {}

    def _learn(self, trial: Any, loss: float | None) -> None:
        if loss is None:
            return
        self._top.append((loss, trial.config))
        self._top.sort(key=lambda t: t[0])
        del self._top[self.pool_size :]

    def _elites(self) -> list[Any]:
        chosen: list[Any] = []
        for _, config in self._top:
            if all(sum(config.get(k) != e.get(k) for k in set(config) | set(e)) >= self.min_distance
                   for e in chosen):
                chosen.append(config)
                if len(chosen) >= self.n_elites:
                    break
        return chosen

    def _propose(self) -> Any:
        for elite in self._elites():
            if elite not in self._neighbours:
                found = list(self.space.neighbors(elite))
                self.rng.shuffle(found)
                self._neighbours[elite] = found
                if len(self._neighbours) > 256:
                    self._neighbours.pop(next(iter(self._neighbours)))
            pending = self._neighbours[elite]
            while pending:
                config = pending.pop()
                if self.is_new(config):
                    return config
        return self.space.sample(self.rng, 1)[0]
