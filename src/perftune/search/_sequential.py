"""Adapter for procedural (batch-at-a-time) searches such as Nelder-Mead and pattern search.

A subclass implements ``_advance(losses)``: given the losses of the previous batch (``None`` at the
start; ``inf`` for failures), return the next batch of configurations to evaluate. The adapter turns that
into ask/tell:

* results already known (told earlier, by any technique) are used at once, without a proposal, so on
  discrete spaces the procedure advances through repeated points for free;
* while the batch is in flight, extra asks get *filler* proposals (perturbations of the best
  configuration) instead of waiting, so the driver always has work; with ``fill_while_waiting =
  False`` (set on the members of an :class:`~perftune.search.AUCBandit` whose
  ``BanditSettings.fill_while_waiting`` is False, as in the default search on finite spaces) the
  technique proposes nothing instead, and the ensemble gives the turn to another member;
* a proposal whose result never arrives (dropped by the driver, or refused by an ensemble) is treated
  as failed after ``stall_asks`` further asks, so the procedure never hangs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import BaseTechnique
from perftune.search._de import reflect

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["SequentialTechnique"]


class SequentialTechnique(BaseTechnique):
    """Base of techniques written as a procedure over batches (see the module docstring)."""

    stall_asks: ClassVar[int] = 64
    max_steps: ClassVar[int] = 64

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._batch: list[Config] = []
        self._results: dict[Config, float] = {}
        self._queue: list[Config] = []
        self._waiting_since = 0  # asks (n_asked + n_waits) when the last batch point was proposed
        self._started = False
        self.n_restarts = 0
        #: False: while the batch is in flight, propose nothing rather than fillers (in an ensemble).
        self.fill_while_waiting = True
        self.n_waits = 0  # asks answered with nothing while waiting (fill_while_waiting False)

    # ------------------------------------------------------------------ for subclasses
    def _advance(self, losses: list[float] | None) -> list[Config]:
        raise NotImplementedError

    # ------------------------------------------------------------------ machinery
    def _propose(self) -> Config | None:
        for _ in range(self.max_steps):
            if self._queue:
                config = self._queue.pop(0)
                if config in self._results:
                    continue
                if config in self._known:
                    loss = self._known[config]
                    self._results[config] = math.inf if loss is None else loss
                    continue
                if config in self._pending:
                    continue  # in flight already; its result will arrive through tell
                self._waiting_since = self.n_asked + self.n_waits
                return config
            if all(c in self._results for c in self._batch):
                losses = [self._results[c] for c in self._batch] if self._started else None
                self._started = True
                batch = self._advance(losses)
                self._batch = list(batch)
                self._results = {}
                self._queue = list(dict.fromkeys(batch))
                continue
            if self.n_asked + self.n_waits - self._waiting_since > self.stall_asks:
                for c in self._batch:
                    self._results.setdefault(c, math.inf)
                continue
            if not self.fill_while_waiting:
                self.n_waits += 1
                return None
            return self._filler()
        return self._filler()

    def _learn(self, trial: Trial, loss: float | None) -> None:
        config = trial.config
        if config not in self._results and config in self._batch:
            self._results[config] = math.inf if loss is None else loss

    def _filler(self) -> Config:
        """A proposal made while the procedure waits: a small random perturbation of the best."""
        if self.best_config is None or self.space.n_dims == 0:
            return self.space.sample(self.rng, 1)[0]
        vec = np.asarray(self.space.encode(self.best_config), dtype=float)
        sigma = math.exp(self.rng.uniform(math.log(1e-3), math.log(0.3)))
        mask = self.rng.random(vec.size) < 0.3
        if not mask.any():
            mask[int(self.rng.integers(vec.size))] = True
        vec[mask] += self.rng.normal(0.0, sigma, int(mask.sum()))
        return self.from_vector(reflect(vec))

    def _restart_center(self, first_step: float) -> tuple[np.ndarray, float]:
        """Where a (re)start begins and with which step: the start config, then best or random."""
        self.n_restarts += 1
        if self.n_restarts == 1:
            config = self.start_config()
            step = first_step
        elif self.best_config is not None and self.rng.random() < 0.5:
            config = self.best_config
            step = float(np.exp(self.rng.uniform(np.log(0.01), np.log(first_step))))
        else:
            config = self.space.sample(self.rng, 1)[0]
            step = first_step
        if self.space.n_dims == 0:
            return np.zeros(0), step
        return np.asarray(self.space.encode(config), dtype=float), step
