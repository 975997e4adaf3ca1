"""Experimental technique variants for the quality benchmark (not part of perftune; ideas to pass on).

Run them with ``benchmarks/quality_explore.py perftune-exp:quality_variants:<Class>`` or through
``benchmarks/quality.py --tools perftune-exp:quality_variants:<Class>``. Each class registers under
its ``name`` when first used.
"""

from __future__ import annotations

from typing import Any, ClassVar

from perftune import search
from perftune.search import AUCBandit, BanditSettings
from perftune.search._base import BaseTechnique, NoSettings

DEFAULT = tuple(BanditSettings().techniques)


def _ordered_values(param: Any) -> list[Any] | None:
    """The values of a finite, ordered parameter (Int, Pow2, Ordinal, Bool), else None."""
    from perftune.space import Choice, Ordinal

    if isinstance(param, Choice) and not isinstance(param, Ordinal):
        return None
    try:
        values = param.values()
    except Exception:
        return None
    if values is None or len(values) < 2:
        return None
    return list(values)


class Extremes(BaseTechnique):
    """Proposals that put ordered parameters at their smallest or largest value.

    GPU and compiler tuning spaces often have their optimum at a boundary of some parameters (smallest
    block height, largest tile, a feature switched off). From the best configuration so far (or a
    random one), each ordered parameter moves to its minimum or maximum with probability ``p``.
    """

    name: ClassVar[str] = "x-extremes"
    Settings: ClassVar[type] = NoSettings
    p_from_random: ClassVar[float] = 0.6
    p_move_random: ClassVar[float] = 0.5
    p_move_best: ClassVar[float] = 0.25

    def _propose(self) -> Any:
        from_random = self.best_config is None or self.rng.random() < self.p_from_random
        base = dict(self.space.sample(self.rng, 1)[0] if from_random else self.best_config)
        p = self.p_move_random if from_random else self.p_move_best
        moved = False
        for name, param in self.space.params.items():
            if name not in base:
                continue
            values = _ordered_values(param)
            if values is None:
                continue
            if self.rng.random() < p:
                base[name] = values[0] if self.rng.random() < 0.5 else values[-1]
                moved = True
        if not moved:
            return None if not from_random else self.space.sample(self.rng, 1)[0]
        from perftune.space import Config

        return Config(base)


def _bandit(name: str, techniques: tuple[str, ...], **kw: Any) -> type:
    def __init__(self: Any, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        AUCBandit.__init__(self, space, seed=seed, settings=settings or BanditSettings(techniques=techniques, **kw))

    return type(name, (AUCBandit,), {"name": name, "__init__": __init__})


def _register(cls: type) -> type:
    if cls.name not in search.names():  # type: ignore[attr-defined]
        search.register(cls)
    return cls


_register(Extremes)

BanditExtremes = _register(_bandit("x-bandit-extremes", (*DEFAULT, "x-extremes")))
BanditLean = _register(_bandit("x-bandit-lean", ("model", "greedy-uniform", "coordinate-descent", "x-extremes",
                                                 "random")))
BanditExplore = _register(_bandit("x-bandit-explore", DEFAULT, exploration=0.2))


class EliteNeighbours(BaseTechnique):
    """Exhaustive one-parameter neighbourhoods around several *distinct* elites, best elite first.

    Local search from the single best configuration stalls on a plateau (convolution W6600: the
    shared-memory configurations at 1.196 x optimum). The second- or third-best basin often holds the
    optimum one move away from a point that looked worse. Elites are the best configurations that
    differ from every better elite in at least ``min_distance`` parameters; the technique proposes the
    unmeasured neighbours (``space.neighbors``) of the best elite that still has any, so that every
    basin in the top ``n_elites`` is probed.
    """

    name: ClassVar[str] = "x-elite-neighbours"
    Settings: ClassVar[type] = NoSettings
    n_elites: ClassVar[int] = 4
    min_distance: ClassVar[int] = 3
    pool_size: ClassVar[int] = 64

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._top: list[tuple[float, Any]] = []  # best successes, bounded
        self._neigh: dict[Any, list[Any]] = {}

    def _learn(self, trial: Any, loss: float | None) -> None:
        if loss is None:
            return
        self._top.append((loss, trial.config))
        self._top.sort(key=lambda t: t[0])
        del self._top[self.pool_size :]

    def _elites(self) -> list[Any]:
        chosen: list[Any] = []
        for _, c in self._top:
            if all(sum(c.get(k) != e.get(k) for k in set(c) | set(e)) >= self.min_distance for e in chosen):
                chosen.append(c)
                if len(chosen) >= self.n_elites:
                    break
        return chosen

    def _propose(self) -> Any:
        for elite in self._elites():
            if elite not in self._neigh:
                ns = list(self.space.neighbors(elite))
                self.rng.shuffle(ns)
                self._neigh[elite] = ns
                if len(self._neigh) > 256:
                    self._neigh.pop(next(iter(self._neigh)))
            ns = self._neigh[elite]
            while ns:
                c = ns.pop()
                if self.is_new(c):
                    return c
        return self.space.sample(self.rng, 1)[0]


_register(EliteNeighbours)
BanditElite = _register(_bandit("x-bandit-elite", (*DEFAULT, "x-extremes", "x-elite-neighbours")))
BanditLeanElite = _register(_bandit("x-bandit-lean-elite", ("model", "ga", "greedy-uniform", "coordinate-descent",
                                                            "x-extremes", "x-elite-neighbours", "random")))


class Staged:
    """An initial design of ``n_design`` boundary-biased proposals (:class:`Extremes`), then a bandit.

    Every trial is told to both, so the bandit's model and local searches start from the design.
    """

    name: ClassVar[str] = "x-staged"
    n_design: ClassVar[int] = 16
    portfolio: ClassVar[tuple[str, ...]] = (*DEFAULT, "x-extremes", "x-elite-neighbours")

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        self.first = Extremes(space, seed=seed)
        self.rest = AUCBandit(space, seed=None if seed is None else seed + 1,
                              settings=BanditSettings(techniques=self.portfolio))
        self.n_asked = 0

    def ask(self, n: int) -> list[Any]:
        src = self.first if self.n_asked < self.n_design else self.rest
        out = src.ask(n)
        self.n_asked += len(out)
        return out

    def tell(self, trials: Any) -> None:
        self.first.tell(trials)
        self.rest.tell(trials)

    def set_deterministic(self, flag: bool = True) -> None:
        self.rest.set_deterministic(flag)

    def credits(self) -> dict[str, float]:
        return self.rest.credits()


def _staged(name: str, n_design: int, portfolio: tuple[str, ...] = Staged.portfolio) -> type:
    return type(name, (Staged,), {"name": name, "n_design": n_design, "portfolio": portfolio})


Staged16 = _register(_staged("x-staged16", 16))
Staged24 = _register(_staged("x-staged24", 24))
Staged16Default = _register(_staged("x-staged16-default", 16, DEFAULT))

SMALL = ("x-extremes", "model", "ga", "greedy-uniform", "coordinate-descent", "x-elite-neighbours")
BanditSmall = _register(_bandit("x-bandit-small", SMALL))
Staged16Small = _register(_staged("x-staged16-small", 16, SMALL))


class ExtremesLocal(Extremes):
    """:class:`Extremes` that starts from the best configuration more often (70%)."""

    name: ClassVar[str] = "x-extremes-local"
    p_from_random: ClassVar[float] = 0.3


_register(ExtremesLocal)


class ExtremesElite(Extremes):
    """:class:`Extremes` whose local moves start from one of the top distinct elites, not only the best."""

    name: ClassVar[str] = "x-extremes-elite"

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._elites = EliteNeighbours(space, seed=seed)

    def _learn(self, trial: Any, loss: float | None) -> None:
        self._elites._learn(trial, loss)

    def _propose(self) -> Any:
        elites = self._elites._elites()
        if elites:
            keep = self.best_config
            self.best_config = elites[int(self.rng.integers(len(elites)))]
            try:
                return super()._propose()
            finally:
                self.best_config = keep
        return super()._propose()


_register(ExtremesElite)
SMALL_ELITE = ("x-extremes-elite", "model", "ga", "greedy-uniform", "coordinate-descent", "x-elite-neighbours")
Staged16SmallElite = _register(_staged("x-staged16-small-elite", 16, SMALL_ELITE))

SMALL_PATTERN = (*SMALL, "pattern-search")
Staged16SmallPattern = _register(_staged("x-staged16-small-pattern", 16, SMALL_PATTERN))


# ----------------------------------------------------------------------------- surrogate features
from perftune.search._model import ModelBased, _Features  # noqa: E402


class _DivisibilityFeatures(_Features):
    """The model's features plus, for every integer parameter, its power-of-two divisibility.

    GPU kernels often run much slower when a size is not a multiple of a power of two (W6600: any
    block_size_x that is not a power of two is ~100x slower). The plain ordinal encoding hides that
    from the trees; ``trailing zero bits / 8`` exposes it in one split.
    """

    def __init__(self, space: Any) -> None:
        super().__init__(space)
        self._int_names = []
        for name, param in space.params.items():
            vals = _ordered_values(param)
            if vals and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in vals):
                self._int_names.append(name)
        self.base_width = self.width
        self.width = self.base_width + len(self._int_names)

    def rows(self, configs: list[Any]) -> Any:
        import numpy as np

        base_w = self.base_width
        self.width = base_w
        try:
            base = super().rows(configs)
        finally:
            self.width = base_w + len(self._int_names)
        extra = np.full((len(configs), len(self._int_names)), -1.0)
        for r, c in enumerate(configs):
            for j, n in enumerate(self._int_names):
                v = c.get(n)
                if isinstance(v, int) and v > 0:
                    extra[r, j] = min((v & -v).bit_length() - 1, 8) / 8.0
        return np.hstack([base, extra])

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.update(_int_names=self._int_names, base_width=self.base_width, width=self.width)
        return state


class ModelDivisibility(ModelBased):
    """The surrogate model with :class:`_DivisibilityFeatures`."""

    name: ClassVar[str] = "x-model-div"

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._features = _DivisibilityFeatures(space)


_register(ModelDivisibility)
SMALL_DIV = ("x-extremes", "x-model-div", "ga", "greedy-uniform", "coordinate-descent", "x-elite-neighbours")
Staged16SmallDiv = _register(_staged("x-staged16-small-div", 16, SMALL_DIV))

SMALL_DIV_ELITE = ("x-extremes-elite", "x-model-div", "ga", "greedy-uniform", "coordinate-descent",
                   "x-elite-neighbours")
Staged16SmallDivElite = _register(_staged("x-staged16-small-div-elite", 16, SMALL_DIV_ELITE))
Staged24SmallDiv = _register(_staged("x-staged24-small-div", 24, SMALL_DIV))
