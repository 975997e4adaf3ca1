"""Simulated annealing with reheats.

Proposes mutations of the current configuration, with a mutation scale that shrinks with the
temperature. A result of its own proposal is accepted by the Metropolis rule on the *relative* change of
the loss (so the temperature does not depend on the objective's units). When the temperature falls below
``t_min`` it reheats from the best configuration found so far.

Example:
    >>> from perftune.space import Int, Space
    >>> tech = SimulatedAnnealing(Space({"x": Int(0, 100)}), seed=0)
    >>> len(tech.ask(2))
    2
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

from perftune.search._base import BaseTechnique, BoundedDict, check_settings

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["AnnealingSettings", "SimulatedAnnealing"]


@dataclasses.dataclass(frozen=True)
class AnnealingSettings:
    """Settings of simulated annealing.

    Attributes:
        t_start: Initial temperature (a relative loss increase of ``t`` is accepted with probability 1/e).
        t_min: Reheat below this temperature.
        cooling: Temperature multiplier per result of an own proposal.
        scale_max: Mutation scale at ``t_start`` (fraction of the range).
        scale_min: Mutation scale at ``t_min``.
        rate: Per-parameter mutation rate.
    """

    t_start: float = 0.2
    t_min: float = 1e-3
    cooling: float = 0.95
    scale_max: float = 0.3
    scale_min: float = 0.01
    rate: float = 0.3

    def __post_init__(self) -> None:
        check_settings(
            "AnnealingSettings.t_min",
            0 < self.t_min < self.t_start,
            f"need 0 < t_min < t_start, got {self.t_min}",
        )
        check_settings(
            "AnnealingSettings.cooling", 0 < self.cooling < 1, f"must be in (0, 1), got {self.cooling}"
        )
        check_settings(
            "AnnealingSettings.scale_min",
            0 < self.scale_min <= self.scale_max,
            f"need 0 < scale_min <= scale_max, got {self.scale_min}, {self.scale_max}",
        )
        check_settings("AnnealingSettings.rate", 0 < self.rate <= 1, f"must be in (0, 1], got {self.rate}")


class SimulatedAnnealing(BaseTechnique):
    """Simulated annealing with temperature-dependent mutation scale and reheats from the best."""

    name: ClassVar[str] = "annealing"
    Settings: ClassVar[type] = AnnealingSettings
    settings: AnnealingSettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self.temperature = self.settings.t_start
        self._current: Config | None = None
        self._current_f: float | None = None
        self._mine: BoundedDict = BoundedDict(256)
        self.n_reheats = 0
        self._fails = 0  # own proposals failed in a row

    def _scale(self) -> float:
        s = self.settings
        frac = math.log(self.temperature / s.t_min) / math.log(s.t_start / s.t_min)
        return s.scale_min + (s.scale_max - s.scale_min) * min(1.0, max(0.0, frac))

    def _propose(self) -> Config | None:
        current = self._current
        if current is not None and (
            self._fails >= 8 or (current in self._known and self._known[current] is None)
        ):
            # The current point failed, or everything around it does: jump to the best (or anywhere).
            self._current, self._current_f = self.best_config, self.best_loss
            self._fails = 0
            if self._current is None:
                return self.space.sample(self.rng, 1)[0]
        if self._current is None:
            if self.n_asked == 0 or self.best_config is not None:
                self._current = self.start_config()
                self._current_f = self.best_loss
            else:
                return self.space.sample(self.rng, 1)[0]
        child = self.space.mutate(self._current, self.rng, rate=self.settings.rate, scale=self._scale())
        self._mine[child] = True
        return child

    def _judge(self, config: Config, loss: float | None) -> None:
        if self._mine.pop(config, None) is None:
            return
        s = self.settings
        self._fails = self._fails + 1 if loss is None else 0
        if loss is not None:
            cur = self._current_f
            if cur is None or loss <= cur:
                accept = True
            else:
                rel = (loss - cur) / max(abs(cur), 1e-12)
                accept = self.rng.random() < math.exp(-rel / self.temperature)
            if accept:
                self._current, self._current_f = config, loss
        self.temperature *= s.cooling
        if self.temperature < s.t_min:
            self.temperature = s.t_start
            self.n_reheats += 1
            self._current, self._current_f = self.best_config, self.best_loss

    def _on_known(self, config: Config, loss: float | None) -> None:
        self._judge(config, loss)

    def _learn(self, trial: Trial, loss: float | None) -> None:
        if self._current is None and loss is not None:
            self._current, self._current_f = trial.config, loss
        self._judge(trial.config, loss)
