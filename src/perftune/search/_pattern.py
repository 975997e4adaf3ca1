"""Pattern (compass) search on the unit-cube encoding, with restarts.

Polls the points ``center +- step * e_i`` in a random order, a few at a time; moves to the first chunk's
best point that improves on the center (opportunistic), halves the step when a full poll fails, and
restarts (around the best, or at random) when the step falls below ``min_step``.

Example:
    >>> from perftune.space import Float, Space
    >>> tech = PatternSearch(Space({"x": Float(-5, 5)}), seed=0)
    >>> len(tech.ask(1))
    1
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import check_settings
from perftune.search._sequential import SequentialTechnique

if TYPE_CHECKING:
    from perftune.space import Config, Space

__all__ = ["PatternSearch", "PatternSearchSettings"]


@dataclasses.dataclass(frozen=True)
class PatternSearchSettings:
    """Settings of pattern search.

    Attributes:
        initial_step: First step (fraction of the range).
        min_step: Restart when the step falls below this.
        chunk: How many poll points are proposed together (parallel-friendly) before deciding.
        expand: Step multiplier after a successful move (1: keep the step).
    """

    initial_step: float = 0.25
    min_step: float = 1e-7
    chunk: int = 4
    expand: float = 2.0

    def __post_init__(self) -> None:
        check_settings(
            "PatternSearchSettings.initial_step",
            0 < self.initial_step <= 1,
            f"must be in (0, 1], got {self.initial_step}",
        )
        check_settings(
            "PatternSearchSettings.min_step",
            0 < self.min_step < self.initial_step,
            f"must be in (0, initial_step), got {self.min_step}",
        )
        check_settings("PatternSearchSettings.chunk", self.chunk >= 1, f"must be >= 1, got {self.chunk}")
        check_settings("PatternSearchSettings.expand", self.expand >= 1, f"must be >= 1, got {self.expand}")


class PatternSearch(SequentialTechnique):
    """Opportunistic compass search with step halving and restarts."""

    name: ClassVar[str] = "pattern-search"
    Settings: ClassVar[type] = PatternSearchSettings
    settings: PatternSearchSettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._center = np.zeros(space.n_dims)
        self._center_f = np.inf
        self._step = self.settings.initial_step
        self._polls: list[np.ndarray] = []
        self._chunk: list[np.ndarray] = []
        self._phase = "restart"

    def _make_polls(self) -> None:
        d = self.space.n_dims
        polls = []
        for i in range(d):
            for sign in (1.0, -1.0):
                p = self._center.copy()
                p[i] = np.clip(p[i] + sign * self._step, 0.0, 1.0)
                if p[i] != self._center[i]:
                    polls.append(p)
        order = self.rng.permutation(len(polls))
        self._polls = [polls[int(k)] for k in order]

    def _next_chunk(self) -> list[Config]:
        self._chunk = self._polls[: self.settings.chunk]
        del self._polls[: self.settings.chunk]
        self._phase = "poll"
        return [self.from_vector(p) for p in self._chunk]

    def _advance(self, losses: list[float] | None) -> list[Config]:
        s = self.settings
        if self.space.n_dims == 0:
            return [self.start_config()]
        if losses is None or self._phase == "restart":
            self._center, self._step = self._restart_center(s.initial_step)
            self._phase = "center"
            return [self.from_vector(self._center)]
        if self._phase == "center":
            self._center_f = losses[0]
        else:
            j = int(np.argmin(losses))
            if losses[j] < self._center_f:
                self._center = self._chunk[j]
                self._center_f = losses[j]
                self._step = min(s.initial_step, self._step * s.expand)
            elif self._polls:
                return self._next_chunk()
            else:
                self._step /= 2.0
                if self._step < s.min_step:
                    self._phase = "restart"
                    return self._advance(None)
        self._make_polls()
        if not self._polls:
            self._phase = "restart"
            return self._advance(None)
        return self._next_chunk()
