"""INCREA: tune on a ladder of input sizes, small first, seeding each size with the survivors of the last.

Measuring at the full input size is expensive; most bad configurations are already bad at a small
size. The ladder explores broadly at the smallest size (where a measurement is cheap, so noise is
resolved there by re-measuring close competitors), then carries a shrinking set of survivors up the
ladder. Each rung above the first also grows the population a little: mutants of the current leaders
are tried first at the rung below (cheaply) and promoted only if they beat the survivors there.

Every rung also measures the previous rung's best and any *baselines* given (``tune_sites`` gives
the declared defaults), whatever their rank one rung down: a candidate ranked at a smaller size can
differ from its parent only above that size (an untested extrapolation that ties there by noise), so
without these references a rung could end with nothing but such candidates and no way to see that
all of them are slower than the default. A rung whose settings leave no room for a candidate beyond
the references says so in :attr:`LadderResult.notes`.

Example:
    >>> from perftune.space import Int, Space
    >>> space = Space({"x": Int(0, 100)})
    >>> result = increa(lambda c, n: (c["x"] - 40) ** 2 + n, space, sizes=[1, 10, 100], seed=1)
    >>> abs(result.best["x"] - 40) <= 5
    True
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perftune.targets.choice._file import ChoiceError

__all__ = ["LadderResult", "LadderSettings", "Rung", "increa"]


def check_int(value: Any, what: str, low: int) -> int:
    """``value`` as an int ``>= low``; ChoiceError (one line, ``what`` names it) for anything else."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ChoiceError(f"{what} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_callable(value: Any, what: str) -> None:
    """ChoiceError (one line) unless ``value`` can be called."""
    if not callable(value):
        raise ChoiceError(f"{what} must be a function, got {type(value).__name__} {value!r:.60}")


def as_list(value: Any, what: str) -> list[Any]:
    """A list, inputs, sizes or targets given as any iterable (a generator is read once, here); one
    ChoiceError line for a single number or string given where a list belongs."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ChoiceError(f"{what} must be a list, got {type(value).__name__} {value!r:.60}")
    return list(value)


def as_configs(configs: Iterable[Any], space: Any) -> tuple[list[Any], list[str]]:
    """Seed configurations as the space's own: a plain dict (what a tuned table stores, a selector in its
    ``{"cutoffs", "choices"}`` form) becomes a hashable :class:`perftune.space.Config`. Returns the valid
    ones and, for every other, what is wrong with it in words."""
    from perftune.errors import PerftuneError
    from perftune.space import Config

    valid: list[Any] = []
    problems: list[str] = []
    for c in configs:
        if not isinstance(c, Mapping):
            problems.append(f"seed {c!r:.80} is not a configuration (a dict of parameter values)")
            continue
        try:
            config = c if isinstance(c, Config) else Config.from_json(dict(c))
            ok = space.is_valid(config)
        except (PerftuneError, TypeError, ValueError) as e:
            problems.append(f"seed {dict(c)} cannot be read: {e}")
            continue
        if not ok:
            why = space.why_invalid(config) if hasattr(space, "why_invalid") else None
            problems.append(f"seed {dict(c)} is not valid in the space ({why or 'rejected'})")
            continue
        valid.append(config)
    return valid, problems


@dataclass(frozen=True)
class LadderSettings:
    """How the ladder spends its measurements.

    Attributes:
        population: Candidates explored at the smallest size (seeds included).
        generations: Rounds of mutation and selection at the smallest size.
        keep: Fraction of the candidates that survive from one rung to the next (the population shrinks).
        min_keep: Never carry fewer than this many survivors.
        grow: New candidates (mutants of the leaders) tried at each rung above the first.
        resolve: Extra samples given to close competitors at the smallest size, to beat noise cheaply.
        final_samples: Samples per candidate at the largest size.
    """

    population: int = 24
    generations: int = 4
    keep: float = 0.35
    min_keep: int = 3
    grow: int = 8
    resolve: int = 3
    final_samples: int = 3

    def __post_init__(self) -> None:
        for name, low in (("population", 2), ("generations", 0), ("min_keep", 1), ("grow", 0), ("resolve", 0),
                          ("final_samples", 1)):
            check_int(getattr(self, name), f"LadderSettings: {name}", low)
        keep = self.keep
        if isinstance(keep, bool) or not isinstance(keep, numbers.Real) or not 0 < keep <= 1:
            raise ChoiceError(f"LadderSettings: keep must be a fraction in (0, 1], got {keep!r}")


@dataclass
class Rung:
    """What happened at one size of the ladder."""

    size: Any
    n_measurements: int = 0
    cost_s: float = 0.0
    n_candidates: int = 0
    best_value: float | None = None
    #: Median value of the first baseline (the default configuration) at this size; None if it failed.
    baseline_value: float | None = None


@dataclass
class LadderResult:
    """Outcome of :func:`increa`.

    Attributes:
        best: The best configuration at the largest size.
        value: Its median value there.
        rungs: One report per size.
        cost_s: Total measurement cost (wall seconds of the objective, or the ``cost`` model).
        n_measurements: Objective calls, all sizes included.
        failures: ``(config, size, reason)`` of every call that raised.
        survivors: Final candidates with their median values, best first (the baselines included).
        baselines: The configurations measured at every rung for comparison (the default first).
        notes: What the ladder could not do with its settings (say, a rung with room for no candidate
            beyond the baselines and the previous best), in words.
    """

    best: Any
    value: float
    rungs: list[Rung]
    cost_s: float
    n_measurements: int
    failures: list[tuple[Any, Any, str]] = field(default_factory=list)
    survivors: list[tuple[Any, float]] = field(default_factory=list)
    baselines: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Samples:
    """Measurements of configurations at sizes; medians on demand."""

    def __init__(
        self,
        objective: Callable[[Any, Any], float],
        cost: Callable[[Any, Any, float], float] | None,
        sign: float,
    ) -> None:
        self.objective = objective
        self.cost = cost
        self.sign = sign
        self.data: dict[tuple[Any, Any], list[float]] = {}
        self.failed: dict[tuple[Any, Any], str] = {}
        self.failures: list[tuple[Any, Any, str]] = []

    def measure(self, config: Any, size: Any, rung: Rung) -> None:
        key = (config, size)
        if key in self.failed:
            return
        t0 = time.perf_counter()
        try:
            value = float(self.objective(config, size))
            ok = math.isfinite(value)
            reason = None if ok else f"objective returned {value!r}"
        except Exception as e:  # the user's objective failing is an outcome, not a crash
            value, ok, reason = math.nan, False, f"{type(e).__name__}: {e}"
        elapsed = time.perf_counter() - t0
        rung.cost_s += self.cost(config, size, value) if self.cost is not None and ok else elapsed
        rung.n_measurements += 1
        if not ok:
            self.failed[key] = reason or "failed"
            self.failures.append((config, size, self.failed[key]))
            return
        self.data.setdefault(key, []).append(self.sign * value)

    def loss(self, config: Any, size: Any) -> float:
        s = self.data.get((config, size))
        return float(np.median(s)) if s else math.inf

    def n(self, config: Any, size: Any) -> int:
        return len(self.data.get((config, size), ()))

    def ranked(self, configs: Iterable[Any], size: Any) -> list[Any]:
        ok = [c for c in dict.fromkeys(configs) if (c, size) in self.data]
        return sorted(ok, key=lambda c: self.loss(c, size))


def increa(
    objective: Callable[[Any, Any], float],
    space: Any,
    sizes: Sequence[Any],
    *,
    settings: LadderSettings | None = None,
    seed: int | None = None,
    seeds: Sequence[Any] = (),
    goal: str = "min",
    cost: Callable[[Any, Any, float], float] | None = None,
    propose: Callable[[Any, Any, Any, np.random.Generator], list[Any]] | None = None,
    technique: str | None = None,
    baselines: Sequence[Any] | None = None,
    carry: Callable[[Any, Any], Any] | None = None,
) -> LadderResult:
    """Tune ``objective(config, size)`` on a ladder of sizes, smallest first.

    Args:
        objective: Measures one configuration at one input size; returns the value (e.g. seconds).
            Raising marks that (config, size) failed; the ladder goes on without it.
        space: A :class:`perftune.space.Space`.
        sizes: Increasing input sizes; the result is for the last one.
        settings: Population, survival and noise-resolution settings.
        seed: Seed of the random generator.
        seeds: Configurations to start from (e.g. the current tuned choices).
        goal: ``"min"`` or ``"max"``.
        cost: Optional cost model ``cost(config, size, value) -> seconds`` used for accounting
            instead of the measured wall time (for simulated objectives).
        propose: Optional hook ``propose(config, smaller_size, size, rng) -> configs`` giving
            domain-specific extensions of a survivor when moving up (e.g. a new top selector level).
        technique: Explore the smallest size with this perftune search technique (e.g. ``"bandit"``,
            through :class:`perftune.Tuner`) instead of the built-in mutation/selection rounds; it gets
            the same number of measurements.
        baselines: Configurations measured at every rung (with the samples the rung gives its
            candidates) and kept among the candidates up to the largest size, so that the result is
            compared with them there; default: none. Each costs a measurement at every size, the
            largest included (``tune_sites`` passes the declared defaults: its result is never slower
            than them where it was measured). The previous rung's best is always carried up.
        carry: Optional ``carry(config, size) -> config``: the previous rung's best as that rung
            tested it (say, without the parts its size never exercised); it is carried up to the next
            rung like the baselines, so an untested extension of the best cannot push it out.

    Returns:
        A :class:`LadderResult`.
    """
    st = settings or LadderSettings()
    if not isinstance(st, LadderSettings):
        raise ChoiceError(f"increa: settings must be a LadderSettings, got {type(st).__name__}")
    check_callable(objective, "increa: objective")
    sizes = as_list(sizes, "increa: sizes")
    if len(sizes) == 0:
        raise ChoiceError("increa: sizes is empty; give at least one input size")
    try:
        increasing = all(a < b for a, b in zip(sizes, sizes[1:], strict=False))
    except TypeError:
        increasing = False
    if not increasing:  # the ladder tunes for its last size: a decreasing list would tune for the smallest
        raise ChoiceError(f"increa: sizes must be strictly increasing, got {sizes}")
    if goal not in ("min", "max"):
        raise ChoiceError(f"increa: goal must be 'min' or 'max', got {goal!r}")
    rng = np.random.default_rng(seed)
    rec = _Samples(objective, cost, 1.0 if goal == "min" else -1.0)
    rungs = [Rung(size=s) for s in sizes]
    seeds, problems = as_configs(as_list(seeds, "increa: seeds"), space)
    notes: list[str] = [f"{p}; not measured" for p in problems]
    refs: list[Any] = []
    for c in as_configs(as_list(baselines or (), "increa: baselines"), space)[0]:
        if c not in refs:
            refs.append(c)

    def usable(c: Any) -> bool:
        # A reference that failed somewhere (say, a default that is wrong at some size) is not carried.
        return not any(key[0] == c for key in rec.failed)

    # ---- the smallest size: broad exploration, then noise resolution ------------------------------
    s0, r0 = sizes[0], rungs[0]
    pop: list[Any] = []
    for c in [*seeds, space.default(), *refs]:
        if space.is_valid(c) and c not in pop:
            pop.append(c)
    n_parents = max(2, st.population // 2)
    if technique is not None:
        pop = _explore_with_tuner(
            rec,
            space,
            s0,
            r0,
            pop,
            technique,
            seed,
            goal,
            st.population + st.generations * (st.population - n_parents),
        )
    elif len(pop) < st.population:
        pop.extend(c for c in space.sample(rng, n=st.population - len(pop)) if c not in pop)
    for c in pop:
        if rec.n(c, s0) == 0:
            rec.measure(c, s0, r0)
    for _ in range(0 if technique is not None else st.generations):
        parents = rec.ranked(pop, s0)[:n_parents]
        if not parents:
            break
        children: list[Any] = []
        for i in range(st.population - len(parents)):
            a = parents[min(int(rng.exponential(len(parents) / 3)), len(parents) - 1)]
            if i % 3 == 2 and len(parents) > 1:
                b = parents[int(rng.integers(len(parents)))]
                child = space.crossover(a, b, rng)
            else:
                child = space.mutate(a, rng)
            if child not in parents and child not in children:
                children.append(child)
        for c in children:
            if rec.n(c, s0) == 0:
                rec.measure(c, s0, r0)
        pop = parents + children
    ranked0 = rec.ranked(pop, s0)
    if ranked0:  # a cheap local pass around the leader
        for c in _some_neighbors(space, ranked0[0], 2 * st.grow, rng):
            if rec.n(c, s0) == 0:
                rec.measure(c, s0, r0)
                pop.append(c)
    n_keep = max(st.min_keep, math.ceil(st.population * st.keep))
    contenders = rec.ranked(pop, s0)[: 2 * n_keep]
    for _ in range(st.resolve):
        for c in contenders:
            rec.measure(c, s0, r0)
    survivors = rec.ranked(contenders, s0)[:n_keep]
    for c in refs:
        if rec.n(c, s0) == 0:
            rec.measure(c, s0, r0)
    r0.n_candidates = len(rec.ranked(pop, s0))
    r0.best_value = rec.sign * rec.loss(survivors[0], s0) if survivors else None
    r0.baseline_value = _value(rec, refs, s0)

    # ---- each larger size: grow a little one rung down, promote, shrink -------------------------
    for k in range(1, len(sizes)):
        if not survivors:
            break
        below, size, rung = sizes[k - 1], sizes[k], rungs[k]
        last = k == len(sizes) - 1
        # Grow: the one-parameter neighbours of the leader (a local step that tracks an optimum that
        # drifts with size), plus a few random mutants of the two leaders.
        new = [c for c in _some_neighbors(space, survivors[0], st.grow, rng) if c not in survivors]
        for i in range(max(1, st.grow // 2)):
            child = space.mutate(survivors[i % min(len(survivors), 2)], rng)
            if child not in survivors and child not in new:
                new.append(child)
        if propose is not None:
            for c in survivors[:2]:
                for child in propose(c, below, size, rng):
                    if space.is_valid(child) and child not in survivors and child not in new:
                        new.append(child)
        for c in new:
            if rec.n(c, below) == 0:
                rec.measure(c, below, rungs[k - 1])
        n_keep = (
            max(st.min_keep, math.ceil(len(survivors) * st.keep))
            if last
            else max(st.min_keep, len(survivors))
        )
        previous_best = [survivors[0]]
        if carry is not None:
            tested = carry(survivors[0], below)
            if tested != survivors[0] and space.is_valid(tested):
                previous_best.append(tested)
        promoted = rec.ranked(survivors + new, below)[: max(st.min_keep, len(survivors))]
        if last:
            promoted = promoted[: max(st.min_keep, n_keep)]
        # The references: the previous rung's best and the baselines are measured here whatever their
        # rank one rung down, so this rung can always be compared with them.
        fresh = [c for c in promoted if c not in previous_best and c not in refs]
        for c in [*previous_best, *refs]:
            if c not in promoted and usable(c):
                promoted.append(c)
        if not fresh:
            notes.append(
                f"size {size!r}: the settings left room for no candidate beyond the previous best"
                f"{' and the baselines' if refs else ''} (LadderSettings keep={st.keep}, "
                f"min_keep={st.min_keep}); raise them to tune this size"
            )
        n_samples = st.final_samples if last else 1
        for c in promoted:
            for _ in range(n_samples):
                rec.measure(c, size, rung)
        survivors = rec.ranked(promoted, size)
        if not survivors:
            # Every promoted candidate failed here (say, an algorithm wrong only at sizes the smaller
            # rungs never ran): walk down the ranking of what worked one rung down until some work here.
            for c in rec.ranked([c for (c, at) in rec.data if at == below], below):
                if c in promoted:
                    continue
                promoted.append(c)
                for _ in range(n_samples):
                    rec.measure(c, size, rung)
                if len(rec.ranked(promoted, size)) >= st.min_keep:
                    break
            survivors = rec.ranked(promoted, size)
        if not last:
            survivors = survivors[: max(st.min_keep, math.ceil(len(survivors) * max(st.keep, 0.6)))]
        rung.n_candidates = len(promoted)
        rung.best_value = rec.sign * rec.loss(survivors[0], size) if survivors else None
        rung.baseline_value = _value(rec, refs, size)

    top = sizes[-1]
    final = [c for c in survivors if (c, top) in rec.data]
    if not final:
        reasons = (
            "; ".join(sorted({r for _, _, r in rec.failures})[:3]) or "no candidate reached the largest size"
        )
        raise ChoiceError(f"increa: no configuration could be measured at size {top!r}: {reasons}")
    return LadderResult(
        best=final[0],
        value=rec.sign * rec.loss(final[0], top),
        rungs=rungs,
        cost_s=sum(r.cost_s for r in rungs),
        n_measurements=sum(r.n_measurements for r in rungs),
        failures=rec.failures,
        survivors=[(c, rec.sign * rec.loss(c, top)) for c in final],
        baselines=refs,
        notes=notes,
    )


def _value(rec: _Samples, refs: Sequence[Any], size: Any) -> float | None:
    """Median value of the first baseline at ``size``; None without baselines or measurements."""
    if not refs or rec.n(refs[0], size) == 0:
        return None
    return rec.sign * rec.loss(refs[0], size)


def _explore_with_tuner(
    rec: _Samples,
    space: Any,
    size: Any,
    rung: Rung,
    seeds: list[Any],
    technique: str,
    seed: int | None,
    goal: str,
    n: int,
) -> list[Any]:
    from perftune.drive import Tuner

    tuner = Tuner(space, goal=goal, seed=seed, technique=technique, seeds=[dict(c) for c in seeds], budget=n)
    seen: list[Any] = []
    while (trial := tuner.ask()) is not None:
        rec.measure(trial.config, size, rung)
        key = (trial.config, size)
        if key in rec.failed:
            tuner.tell(trial, error=rec.failed[key])
        else:
            tuner.tell(trial, rec.sign * rec.data[key][-1])
            seen.append(trial.config)
    return list(dict.fromkeys(seen))


def _some_neighbors(space: Any, config: Any, limit: int, rng: np.random.Generator) -> list[Any]:
    try:
        near = list(space.neighbors(config))
    except Exception:  # a space without a neighbourhood (or a huge one) just skips the local step
        return []
    if len(near) > limit:
        near = [near[i] for i in rng.choice(len(near), size=limit, replace=False)]
    return near
