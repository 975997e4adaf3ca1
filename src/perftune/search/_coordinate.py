"""Coordinate descent with multiplicative neighbourhoods, as TorchInductor tunes block sizes.

For one parameter at a time, evaluate its neighbours of the current configuration: for numbers ``x2``
and ``/2`` (when legal) plus the parameter's own neighbourhood (``+-1``, adjacent ordinal values, other
choices, permutation moves...). Move to the best neighbour if it improves and keep going along the same
parameter; otherwise go on to the next parameter. A sweep over all parameters without improvement is a
local optimum: restart from a mutation of the best or a random configuration.

Example:
    >>> from perftune.space import Pow2, Space
    >>> tech = CoordinateDescent(Space({"block": Pow2(16, 1024)}), seed=0)
    >>> len(tech.ask(1))
    1
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

from perftune.search._base import check_settings
from perftune.search._sequential import SequentialTechnique

if TYPE_CHECKING:
    from perftune.space import Config, Space

__all__ = ["CoordinateDescent", "CoordinateDescentSettings", "multiplicative_neighbors"]


@dataclasses.dataclass(frozen=True)
class CoordinateDescentSettings:
    """Settings of coordinate descent.

    Attributes:
        max_neighbors: Most neighbours tried per parameter and step (a random subset beyond that).
        restart_rate: Per-parameter mutation rate of the restart point derived from the best.
        restart_scale: Mutation scale of that restart point.
    """

    max_neighbors: int = 8
    restart_rate: float = 0.3
    restart_scale: float = 0.3

    def __post_init__(self) -> None:
        check_settings(
            "CoordinateDescentSettings.max_neighbors",
            self.max_neighbors >= 1,
            f"must be >= 1, got {self.max_neighbors}",
        )


def multiplicative_neighbors(param: Any, value: Any) -> list[Any]:
    """``value * 2`` and ``value / 2`` (integer division for ints) when the parameter contains them."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    if isinstance(value, int):
        cands: list[Any] = [value * 2, value // 2]
    else:
        if not math.isfinite(value):
            return []
        cands = [value * 2.0, value / 2.0]
    out = []
    for c in cands:
        try:
            if c != value and param.contains(c):
                out.append(c)
        except Exception:  # a parameter that cannot judge a foreign type simply has no such neighbour
            continue
    return out


class CoordinateDescent(SequentialTechnique):
    """TorchInductor-style coordinate descent (x2, /2 and local neighbours), with restarts."""

    name: ClassVar[str] = "coordinate-descent"
    Settings: ClassVar[type] = CoordinateDescentSettings
    settings: CoordinateDescentSettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._center: Config | None = None
        self._center_f = math.inf
        self._param_i = 0
        self._improved = False
        self._cands: list[Config] = []
        self._phase = "restart"

    def _restart_point(self) -> Config:
        self.n_restarts += 1
        if self.n_restarts == 1:
            return self.start_config()
        if self.best_config is not None and self.n_restarts % 2 == 0:
            s = self.settings
            return self.space.mutate(self.best_config, self.rng, rate=s.restart_rate, scale=s.restart_scale)
        return self.space.sample(self.rng, 1)[0]

    def _neighbors(self, name: str) -> list[Config]:
        center = self._center
        assert center is not None
        if name not in center:
            return []
        param = self.space.params[name]
        value = center[name]
        values = list(dict.fromkeys([*multiplicative_neighbors(param, value), *param.neighbors(value)]))
        out: list[Config] = []
        for v in values:
            config = self.valid(center.replace(**{name: v}))
            if config != center and config not in out:
                out.append(config)
        k = self.settings.max_neighbors
        if len(out) > k:
            idx = self.rng.choice(len(out), size=k, replace=False)
            out = [out[int(i)] for i in sorted(idx)]
        return out

    def _next_batch(self) -> list[Config]:
        names = self.space.names
        for _ in range(2 * len(names) + 1):
            if self._param_i >= len(names):
                if not self._improved:
                    break
                self._param_i = 0
                self._improved = False
            cands = self._neighbors(names[self._param_i])
            if cands:
                self._cands = cands
                self._phase = "param"
                return cands
            self._param_i += 1
        self._phase = "restart"
        return self._advance(None)

    def _advance(self, losses: list[float] | None) -> list[Config]:
        if losses is None or self._phase == "restart":
            self._center = self._restart_point()
            self._phase = "center"
            return [self._center]
        if self._phase == "center":
            self._center_f = losses[0]
            self._param_i = 0
            self._improved = False
            return self._next_batch()
        j = min(range(len(losses)), key=losses.__getitem__)
        best = self.best_loss
        if best is not None and self.best_config is not None and best < min(self._center_f, losses[j]):
            # Another technique found better: continue the descent from there.
            self._center = self.best_config
            self._center_f = best
            self._improved = True
        elif losses[j] < self._center_f:
            self._center = self._cands[j]
            self._center_f = losses[j]
            self._improved = True
        else:
            self._param_i += 1
        return self._next_batch()
