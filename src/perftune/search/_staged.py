"""The default search: a boundary-biased initial design, then an AUC bandit over a lean portfolio.

Chosen on the six replayed development spaces as a whole (``benchmarks/quality.py``; the variants
that were compared are in ``benchmarks/quality_variants.py``): the first ``n_design`` proposals come
from :class:`~perftune.search._boundary.Boundary`, so that every technique of the bandit starts
from configurations at the corners where kernel and compiler spaces often have their optimum (about
3.5 ordered parameters at an extreme per proposal, :func:`~perftune.search._boundary.design_settings`;
adopted by the leave-one-kernel-out rule, ``benchmarks/results/cv.md``; from the 6th result on, each
parameter's extreme leans to the side its results favour, decision 6 of ``cv_notes.md``, and a point
that breaks the constraints moves to the nearest valid configuration on that side, decision 7); then
the AUC bandit chooses among ``boundary`` (whole corners and flips of distinct elites to their
other extreme, :data:`~perftune.search._boundary.CORNER_SETTINGS`), the surrogate ``model``, ``ga``,
``parzen`` (per-parameter densities of the good and the other results, TPE's idea; in place of
``greedy-uniform`` since leave-one-kernel-out decision 5), ``coordinate-descent`` and
``elite-neighbours`` (whose neighbourhoods widen late in a run that stopped improving,
:data:`~perftune.search._boundary.ELITE_SETTINGS`; leave-one-kernel-out decision 3). A run stuck on a
plateau (results tying the best exactly, no new best for long) gets uniform random proposals among the
bandit's (``StagedSettings.stuck_patience``; decision 8). Spaces with continuous
parameters skip the design: spaces of real numbers only use :data:`CONTINUOUS_PORTFOLIO` (methods for
smooth functions: pattern search, a quadratic trust region, CMA-ES and Nelder-Mead, with a genetic
algorithm for breadth); mixed spaces with some real numbers use the general portfolio
(:data:`~perftune.search.DEFAULT_PORTFOLIO`, with pattern search and annealing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from perftune.errors import PerftuneError
from perftune.search._bandit import DEFAULT_PORTFOLIO, AUCBandit, BanditSettings
from perftune.search._base import Stateful, check_settings, loss_of
from perftune.search._boundary import CORNER_SETTINGS, ELITE_SETTINGS, Boundary, design_settings
from perftune.search._model import ModelSettings
from perftune.search._parzen import counts_any
from perftune.search._seeding import STUCK_EXPLORE_KEY, Stream, derive_rng, fresh_seed, stream_seed
from perftune.trial import Status

__all__ = ["CONTINUOUS_PORTFOLIO", "STAGED_PORTFOLIO", "StagedBandit", "StagedSettings"]

#: The surrogate's settings in the default search: it refits less often early in a run (the interval
#: between refits grows by one every 8 results, up to 16) than the ``model`` technique alone (every 32,
#: up to 8). Adopted by the leave-one-kernel-out rule (benchmarks/results/cv.md: no family worse by more
#: than 1%, overall 1.0494 against 1.0526, 20 seeds); a seeded 10k-trial run on a trivial objective makes
#: 17 fits instead of 59 (benchmarks/results/overhead.md).
STAGED_MODEL_SETTINGS = ModelSettings(refit_growth=8, refit_every_max=16)

STAGED_PORTFOLIO: tuple[str, ...] = (
    "boundary",
    "model",
    "ga",
    "parzen",
    "coordinate-descent",
    "elite-neighbours",
)

#: The portfolio for spaces whose parameters are all real numbers (:class:`~perftune.space.Float`,
#: :class:`~perftune.space.LogFloat`). Chosen on 13 test functions of 2 to 10 dimensions, 300
#: evaluations and 20 seeds each (``benchmarks/continuous.py``; shifted, rotated, noisy and
#: multimodal ones among them): against the general portfolio it reaches a lower median on 12 of
#: the 13, by orders of magnitude on most; it is behind on shifted 2-D Rastrigin (0.5-1.0 against
#: 0.02-0.04), where the general portfolio's breadth finds the global basin more often.
CONTINUOUS_PORTFOLIO: tuple[str, ...] = (
    "pattern-search",
    "trust-region",
    "cma-es",
    "nelder-mead",
    "ga",
)


@dataclasses.dataclass(frozen=True)
class StagedSettings:
    """Settings of the default search.

    Attributes:
        n_design: Boundary-biased proposals before the bandit takes over (on spaces without
            continuous parameters, when ``techniques`` is None).
        techniques: The bandit's portfolio (None: :data:`STAGED_PORTFOLIO`; with continuous
            parameters :data:`CONTINUOUS_PORTFOLIO` when every parameter is a real number, else the
            general ``DEFAULT_PORTFOLIO``).
        exploration: The bandit's exploration constant.
        window: The bandit's sliding window.
        stuck_patience: The run is *stuck on a plateau* once this many results in a row, and at least
            ``stuck_share`` of all its results, brought no new best, and at least ``stuck_ties`` of
            them tied the best exactly; while it is stuck, every ``stuck_every``-th proposal is a
            uniform random configuration (labelled ``random``) instead of the bandit's. On a plateau no
            technique of the portfolio earns credit and each stays near what was measured, so without
            it a run can stay there for good. Runs that stall without ties (measured times) are left
            to the bandit: uniform proposals there cost the late finds of the development spaces
            (benchmarks/results/cv_notes.md, decision 8). 0: off; always off on spaces with real-number
            parameters (their portfolios were chosen without it).
        stuck_share: See ``stuck_patience``.
        stuck_ties: See ``stuck_patience``.
        stuck_every: See ``stuck_patience``.
    """

    n_design: int = 16
    techniques: tuple[str, ...] | None = None
    exploration: float = BanditSettings.exploration
    window: int = BanditSettings.window
    stuck_patience: int = 32
    stuck_share: float = 0.5
    stuck_ties: int = 8
    stuck_every: int = 2

    def __post_init__(self) -> None:
        check_settings("StagedSettings.n_design", self.n_design >= 0, f"must be >= 0, got {self.n_design}")
        check_settings("StagedSettings.stuck_patience", self.stuck_patience >= 0,
                       f"must be >= 0, got {self.stuck_patience}")
        check_settings("StagedSettings.stuck_share", 0.0 <= self.stuck_share <= 1.0,
                       f"must be in [0, 1], got {self.stuck_share}")
        check_settings("StagedSettings.stuck_ties", self.stuck_ties >= 0,
                       f"must be >= 0, got {self.stuck_ties}")
        check_settings("StagedSettings.stuck_every", self.stuck_every >= 1,
                       f"must be >= 1, got {self.stuck_every}")


def _has_continuous(space: Any) -> bool:
    from perftune.space import Float

    return any(isinstance(p, Float) for p in space.params.values())


def _all_continuous(space: Any) -> bool:
    from perftune.space import Float

    return bool(space.params) and all(isinstance(p, Float) for p in space.params.values())


class StagedBandit(Stateful):
    """An initial design of boundary-biased proposals, then the AUC bandit (the ``"default"`` search).

    Every result is told to both stages, so the bandit's model and local searches start from the
    design. Everything else (credits, proposers, deciding times, cost awareness) is the bandit's.

    Example:
        >>> from perftune.space import Int, Pow2, Space
        >>> tech = StagedBandit(Space({"block": Pow2(16, 1024), "unroll": Int(1, 8)}), seed=0)
        >>> len(tech.ask(3))
        3
    """

    name: ClassVar[str] = "staged"
    Settings: ClassVar[type] = StagedSettings

    def __init__(
        self, space: Any, *, seed: int | None = None, settings: StagedSettings | None = None
    ) -> None:
        if settings is not None and not isinstance(settings, StagedSettings):
            raise PerftuneError(
                f"technique 'staged': settings must be StagedSettings, got {type(settings).__name__}"
            )
        self.space = space
        self.settings = settings or StagedSettings()
        techniques = self.settings.techniques
        self.n_design = self.settings.n_design
        if techniques is None:
            # The boundary design and the lean portfolio are for finite ordered spaces (kernels,
            # compilers). Real numbers only: methods for smooth functions (benchmarks/results/
            # continuous.md). Some real numbers among other types: the general portfolio, with its
            # continuous-domain methods (benchmarks/results/quality.md, the mixed problem).
            techniques = STAGED_PORTFOLIO
            if _all_continuous(space):
                techniques, self.n_design = CONTINUOUS_PORTFOLIO, 0
            elif _has_continuous(space):
                techniques, self.n_design = DEFAULT_PORTFOLIO, 0
            elif not counts_any(space):
                # Only permutations or sequences: the Parzen search could only sample them at random
                # (tsp20 of benchmarks/quality.py: 4% behind greedy-uniform at 200 measurements).
                techniques = tuple("greedy-uniform" if t == "parzen" else t for t in techniques)
        self.design = Boundary(space, seed=seed, settings=design_settings(space))
        overrides: dict[str, Any] = {"boundary": CORNER_SETTINGS} if "boundary" in techniques else {}
        if "model" in techniques:
            overrides["model"] = STAGED_MODEL_SETTINGS
        if "elite-neighbours" in techniques:
            overrides["elite-neighbours"] = ELITE_SETTINGS
        self.bandit = AUCBandit(
            space,
            seed=None if seed is None else stream_seed(seed, Stream.STAGED_BANDIT),
            settings=BanditSettings(
                techniques=techniques,
                exploration=self.settings.exploration,
                window=self.settings.window,
                technique_settings=overrides,
                # Coordinate descent waiting for late results gives its turn to the others (lag 8:
                # geomean 1.073 -> 1.060 at 50 measurements, no family worse by more than 0.3%;
                # benchmarks/results/lag.md). Measured on this portfolio only: on real numbers the
                # procedures' fillers were worth keeping (shifted Ackley 18 -> 10 of 20 seeds without).
                fill_while_waiting=techniques != STAGED_PORTFOLIO,
            ),
        )
        self.n_designed = 0
        self._designed: set[Any] = set()
        # While the run is stuck (settings.stuck_patience), every stuck_every-th proposal is uniform.
        # Measured on finite spaces only (benchmarks/results/cv_notes.md, decision 8): real numbers keep
        # their portfolios as they were chosen.
        self.stuck_patience = 0 if _has_continuous(space) else self.settings.stuck_patience
        self._stuck_rng = derive_rng(fresh_seed() if seed is None else seed, STUCK_EXPLORE_KEY)
        self.n_told = 0
        self.since_best = 0
        self.ties_since_best = 0  # results since the last new best that tied it exactly
        self._best_loss: float | None = None
        self._n_stuck_asks = 0

    def stuck(self) -> bool:
        """Whether the run is stuck on a plateau (see :class:`StagedSettings`)."""
        patience, s = self.stuck_patience, self.settings
        return (bool(patience) and self.ties_since_best >= s.stuck_ties
                and self.since_best >= max(patience, s.stuck_share * self.n_told))

    def ask(self, n: int) -> list[Any]:
        """Proposals from the design first, then from the bandit (uniform ones among them while stuck)."""
        if self.n_designed < self.n_design:
            out = self.design.ask(min(n, self.n_design - self.n_designed))
            self.n_designed += len(out)
            self._designed.update(out)
            return out
        if not self.stuck_patience:
            return self.bandit.ask(n)
        proposals: list[Any] = []
        for _ in range(max(0, int(n))):
            config = None
            if self.stuck():
                self._n_stuck_asks += 1
                if self._n_stuck_asks % self.settings.stuck_every == 0:
                    config = self._uniform()
            if config is None:
                got = self.bandit.ask(1)
                if not got:
                    break
                config = got[0]
            proposals.append(config)
        return proposals

    def _uniform(self) -> Any:
        """A uniform random configuration the run has not seen, issued as the bandit's ``random``."""
        config = self.space.sample(self._stuck_rng, 1)[0]
        if config in self.bandit._seen:
            return None
        return self.bandit._issue(config, -1)

    def tell(self, trials: Sequence[Any]) -> None:
        """The bandit learns from every result; the design only while it still proposes."""
        if self.n_designed < self.n_design:
            self.design.tell(trials)  # once its proposals are out it is never asked again
        self.bandit.tell(trials)
        for trial in trials:
            self._designed.discard(trial.config)
            if trial.status in (Status.PENDING, Status.CANCELLED):
                continue
            self.n_told += 1
            loss = loss_of(trial)
            if loss is not None and (self._best_loss is None or loss < self._best_loss):
                self._best_loss, self.since_best, self.ties_since_best = loss, 0, 0
            else:
                self.since_best += 1
                self.ties_since_best += loss is not None and loss == self._best_loss

    def proposer_of(self, config: Any) -> str | None:
        """``"boundary"`` for design proposals, else the bandit's technique."""
        if config in self._designed:
            return "boundary"
        return self.bandit.proposer_of(config)

    def set_deterministic(self, flag: bool = True) -> None:
        self.bandit.set_deterministic(flag)

    def set_parallelism(self, n_in_flight: int) -> None:
        self.bandit.set_parallelism(n_in_flight)

    def preload_imports(self) -> None:
        self.bandit.preload_imports()

    def credits(self) -> dict[str, float]:
        return self.bandit.credits()

    @property
    def counts(self) -> Any:
        return self.bandit.counts

    @property
    def deciding_time_s(self) -> Any:
        return self.bandit.deciding_time_s

    @property
    def n_errors(self) -> int:
        return int(self.design.n_errors) + int(self.bandit.n_errors)
