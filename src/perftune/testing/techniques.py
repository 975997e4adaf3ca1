"""Conformance suite for search techniques, and a small ask/tell loop that mimics the driver.

Any technique's tests subclass :class:`TechniqueConformance` and name the technique::

    from perftune.testing.techniques import TechniqueConformance

    class TestMyTechnique(TechniqueConformance):
        technique_name = "my-technique"        # as registered (perftune.search.register or entry point)

To run the suite over several techniques, override the ``conformance_technique`` fixture with
``params=[...]`` (perftune's own tests do that over ``perftune.search.names()``).

What the suite checks: the settings are a frozen dataclass; every proposal is valid on a mixed space
(constraints, ``when=``, permutations, schedules, selectors), with a callable constraint, and on
integers wider than 64 bits (with no internal error); an
evaluation budget of B ends with exactly B trials; failures, timeouts and cancellations are handled;
asks before tells and results out of order or from other proposers are accepted; the same seed gives
the same proposals; a technique restored from a checkpoint (``state_dict``/``load_state_dict`` through
the JSON checkpoint format) continues exactly like the original; it beats uniform random
search on a smooth function; it terminates on an exhausted space; and (when the driver is installed)
it runs through :class:`perftune.Tuner`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

from perftune.search._base import ClockAware
from perftune.space import (
    Bool,
    Choice,
    Config,
    Float,
    Int,
    LogFloat,
    Ordinal,
    Permutation,
    Pow2,
    Schedule,
    Selector,
    Space,
)
from perftune.trial import Status, Trial

__all__ = [
    "AskTellLoop",
    "TechniqueConformance",
    "callable_objective",
    "callable_space",
    "failing_objective",
    "mixed_objective",
    "mixed_space",
    "smooth_objective",
    "smooth_space",
    "wide_objective",
    "wide_space",
]


# ---------------------------------------------------------------------------------------------- spaces
def _tile_unroll_small(config: Config) -> bool:
    # A callable constraint (module level, so that spaces and techniques pickle).
    return bool(config["tile"] * config["unroll"] <= 24)


def callable_space() -> Space:
    """A small space with a callable constraint (and an expression one)."""
    return Space(
        {
            "block": Pow2(16, 1024),
            "unroll": Int(1, 8),
            "tile": Ordinal([1, 2, 3, 4, 6, 8]),
            "algo": Choice(["naive", "tiled", "strassen"]),
        },
        constraints=["block * unroll <= 2048", _tile_unroll_small],
    )


def callable_objective(config: Config) -> float:
    """An objective over :func:`callable_space`."""
    v = (
        abs(math.log2(config["block"]) - 7.0)
        + abs(config["unroll"] - 4) * 0.5
        + abs(config["tile"] - 4) * 0.3
    )
    return v + {"naive": 2.0, "tiled": 0.0, "strassen": 1.0}[config["algo"]]


def mixed_space() -> Space:
    """A space with every kind of parameter, a `when=` and expression constraints."""
    return Space(
        {
            "block": Pow2(16, 1024),
            "unroll": Int(1, 8),
            "tile": Ordinal([1, 2, 3, 4, 6, 8]),
            "algo": Choice(["naive", "tiled", "strassen"]),
            "alpha": Float(0.0, 1.0),
            "lr": LogFloat(1e-4, 1e-1),
            "vector": Bool(),
            "width": Pow2(2, 16, when="vector"),
            "order": Permutation(["i", "j", "k"]),
            "passes": Schedule(["a", "b", "c", "d"], after={"c": ["a"], "d": ["b"]}),
            "sort": Selector(["insertion", "merge", "quick"], max_levels=3, size_range=(1, 10_000)),
        },
        constraints=[
            "block * unroll <= 2048",
            "algo != 'strassen' or tile >= 2",
            "tile * unroll <= 24",
        ],
    )


def mixed_objective(config: Config) -> float:
    """A deterministic objective over :func:`mixed_space` (lower is better, always > 0)."""
    v = abs(math.log2(config["block"]) - 7.0) + abs(config["unroll"] - 4) * 0.5
    v += abs(config["tile"] - 4) * 0.3 + {"naive": 2.0, "tiled": 0.0, "strassen": 1.0}[config["algo"]]
    v += (config["alpha"] - 0.3) ** 2 + abs(math.log10(config["lr"]) + 2.0) * 0.2
    if config["vector"]:
        v += abs(math.log2(config["width"]) - 3.0) * 0.2 - 0.5
    v += 0.3 * sum(1 for a, b in zip(config["order"], ("k", "i", "j"), strict=True) if a != b)
    v += 0.1 * config["passes"].index("d")
    v += 0.2 * len(config["sort"].cutoffs)
    return v + 1.0


def wide_space() -> Space:
    """Integers wider than numpy's int64 (one of them active only under a ``when=``) and a divisibility
    constraint on a wide range."""
    return Space(
        {
            "n": Int(1, 2**20),
            "big": Bool(),
            "huge": Int(0, 10**30, when="big"),
            "offset": Int(-(10**25), 10**25),
        },
        constraints=["n % 4096 == 0"],
    )


def wide_objective(config: Config) -> float:
    """An objective over :func:`wide_space` (lower is better)."""
    v = abs(config["n"] - 300_000) / 4096 + abs(config["offset"]) / 10**25
    return v + (config["huge"] / 10**30 if config["big"] else 0.5)


def failing_objective(config: Config) -> float:
    """Like :func:`mixed_objective` but raises (a failed measurement) in a region of the space.

    The region includes the default configuration (the smallest block), where many techniques start.
    """
    if (
        config["block"] <= 32
        or config["block"] >= 512
        or (config["algo"] == "naive" and config["unroll"] > 4)
    ):
        raise RuntimeError("launch failed: too many resources requested")
    return mixed_objective(config)


def smooth_space() -> Space:
    """A small numeric space for behaviour checks."""
    return Space({"x": Float(-5.0, 5.0), "y": Float(-5.0, 5.0), "n": Int(0, 60)})


def smooth_objective(config: Config) -> float:
    """A smooth bowl with its minimum 0 at x=1.5, y=-2, n=37."""
    return (config["x"] - 1.5) ** 2 + (config["y"] + 2.0) ** 2 + ((config["n"] - 37) / 10.0) ** 2


def _tiny_space() -> Space:
    return Space({"a": Choice(["x", "y", "z"])})


def _tiny_objective(config: Config) -> float:
    return {"x": 3.0, "y": 1.0, "z": 2.0}[config["a"]]


# ---------------------------------------------------------------------------------------------- the loop
class AskTellLoop:
    """A minimal driver: ask, de-duplicate, evaluate, tell (picklable, so runs can be checkpointed).

    It mimics :class:`perftune.Tuner`: a configuration proposed again is answered from the cache (told
    again, not counted); an invalid one is never evaluated; an objective that raises gives a FAILED trial.
    Trials carry ``started_at``/``finished_at`` with a simulated measurement time ``duration_s``.

    Args:
        technique: The technique under test.
        objective: A module-level function of a config returning a float (raising = failure).
        batch: How many proposals to ask for at a time.
        lag: Results are told this many evaluations late (asynchronous workers).
        shuffle: Tell delayed results in a random order instead of ticket order.
        duration_s: Simulated measurement time of every trial.
        seed: Seed of the loop's own randomness (shuffling).

    Example:
        >>> from perftune.search import create
        >>> space = smooth_space()
        >>> loop = AskTellLoop(create("random", space, seed=1), smooth_objective)
        >>> len(loop.run(10))
        10
    """

    def __init__(
        self,
        technique: Any,
        objective: Callable[[Config], float],
        *,
        batch: int = 1,
        lag: int = 0,
        shuffle: bool = False,
        duration_s: float = 0.05,
        seed: int = 0,
    ) -> None:
        self.technique = technique
        self.space = technique.space
        self.objective = objective
        self.batch = batch
        self.lag = lag
        self.shuffle = shuffle
        self.duration_s = duration_s
        self.rng = np.random.default_rng(seed)
        self.trials: list[Trial] = []
        self.proposals: list[Config] = []
        self.invalid: list[Config] = []
        self.too_many = 0
        self.n_repeats = 0
        self.cache: dict[Config, Trial] = {}
        self._untold: list[Trial] = []
        self._clock = 1_000_000.0
        if isinstance(technique, ClockAware):
            technique.set_deterministic(True)  # what a seeded driver does

    def _evaluate(self, config: Config) -> Trial:
        start = self._clock
        self._clock += self.duration_s
        trial = Trial(id=len(self.trials), config=config, started_at=start, finished_at=self._clock)
        try:
            value = float(self.objective(config))
        except Exception as exc:
            trial.status = Status.FAILED
            trial.reason = f"{type(exc).__name__}: {exc}"
        else:
            trial.status = Status.OK
            trial.value = value
            trial.loss = value
            trial.samples = [value]
        return trial

    def _flush(self, keep: int) -> None:
        while len(self._untold) > keep:
            if self.shuffle and len(self._untold) > 1:
                k = int(self.rng.integers(len(self._untold) - keep))
            else:
                k = 0
            self.technique.tell([self._untold.pop(k)])

    def run(self, budget: int, *, max_idle: int = 50) -> list[Trial]:
        """Run until ``budget`` trials in total, or until ``max_idle`` asks in a row bring nothing new.

        Returns:
            All trials so far, in ticket order.
        """
        idle = 0
        while len(self.trials) < budget and idle < max_idle:
            want = min(self.batch, budget - len(self.trials))
            proposals = self.technique.ask(want)
            if len(proposals) > want:
                self.too_many += 1
            new = False
            for config in proposals:
                self.proposals.append(config)
                if not self.space.is_valid(config):
                    self.invalid.append(config)
                    continue
                known = self.cache.get(config)
                if known is not None:
                    self.n_repeats += 1
                    if known not in self._untold:
                        self.technique.tell([known])
                    continue
                if len(self.trials) >= budget:
                    continue
                trial = self._evaluate(config)
                self.cache[config] = trial
                self.trials.append(trial)
                self._untold.append(trial)
                new = True
            self._flush(self.lag)
            if not proposals and self._untold:
                self._flush(0)  # nothing to propose until results arrive: let them arrive
            idle = 0 if new else idle + 1
        self._flush(0)
        return self.trials

    def best(self) -> float | None:
        """Best loss found so far (None when every trial failed)."""
        losses = [t.loss for t in self.trials if t.loss is not None]
        return min(losses) if losses else None


def _best_of(
    name: str,
    space_fn: Callable[[], Space],
    objective: Callable[[Config], float],
    budget: int,
    seed: int,
    settings: Any = None,
) -> float:
    from perftune.search import create

    loop = AskTellLoop(create(name, space_fn(), seed=seed, settings=settings), objective)
    loop.run(budget)
    best = loop.best()
    return math.inf if best is None else best


def _loop_copy(loop: AskTellLoop, technique: Any) -> AskTellLoop:
    """A loop driving ``technique`` that continues from where ``loop`` is (the loop's own state copied)."""
    copy = AskTellLoop(technique, loop.objective, batch=loop.batch, lag=loop.lag, shuffle=loop.shuffle,
                       duration_s=loop.duration_s)
    copy.rng.bit_generator.state = loop.rng.bit_generator.state
    copy.trials = list(loop.trials)
    copy.proposals = list(loop.proposals)
    copy.invalid = list(loop.invalid)
    copy.too_many, copy.n_repeats = loop.too_many, loop.n_repeats
    copy.cache = dict(loop.cache)
    copy._untold = list(loop._untold)
    copy._clock = loop._clock
    return copy


# ---------------------------------------------------------------------------------------------- the suite
class TechniqueConformance:
    """Base class of a technique's conformance tests (see the module docstring).

    Attributes:
        technique_name: Registered name of the technique under test.
        technique_settings: Settings to create it with (None: its defaults).
        improvement_budget: Evaluations of the "beats random" check.
        improvement_seeds: Seeds of that check (the medians are compared).
    """

    technique_name: ClassVar[str] = ""
    technique_settings: ClassVar[Any] = None
    improvement_budget: ClassVar[int] = 80
    improvement_seeds: ClassVar[tuple[int, ...]] = (1, 2, 3)

    @pytest.fixture
    def conformance_technique(self) -> str:
        """The technique under test (override with ``params=`` to test several)."""
        if not self.technique_name:
            pytest.skip("set technique_name on the TechniqueConformance subclass")
        return self.technique_name

    # -------------------------------------------------------------------------------- helpers
    def make(self, name: str, space: Space, seed: int = 0) -> Any:
        from perftune.search import create

        return create(name, space, seed=seed, settings=self._settings_for(name))

    @staticmethod
    def assert_healthy(technique: Any) -> None:
        errors = getattr(technique, "n_errors", 0)
        assert errors == 0, f"{errors} internal error(s), last: {getattr(technique, 'last_error', None)}"
        for sub in getattr(technique, "techniques", ()):
            TechniqueConformance.assert_healthy(sub)

    # -------------------------------------------------------------------------------- tests
    def test_registered_with_settings_dataclass(self, conformance_technique: str) -> None:
        from perftune.errors import PerftuneError
        from perftune.search import get

        cls = get(conformance_technique)
        assert cls.name == conformance_technique
        settings_cls = getattr(cls, "Settings", None)
        assert settings_cls is not None and dataclasses.is_dataclass(settings_cls)
        settings = settings_cls()
        assert settings_cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        technique = cls(smooth_space(), seed=0, settings=settings)
        assert technique.ask(1)
        with pytest.raises(PerftuneError):
            cls(smooth_space(), seed=0, settings=object())

    def test_proposals_valid_on_mixed_space(self, conformance_technique: str) -> None:
        space = mixed_space()
        technique = self.make(conformance_technique, space, seed=3)
        loop = AskTellLoop(technique, mixed_objective, batch=3, lag=2)
        loop.run(45)
        assert loop.invalid == [], f"invalid proposals: {loop.invalid[:3]}"
        assert loop.too_many == 0, "ask(n) returned more than n proposals"
        assert all(isinstance(c, Config) for c in loop.proposals)
        assert len(loop.trials) == 45
        self.assert_healthy(technique)

    def test_proposals_valid_with_a_callable_constraint(self, conformance_technique: str) -> None:
        space = callable_space()
        technique = self.make(conformance_technique, space, seed=4)
        loop = AskTellLoop(technique, callable_objective, batch=2)
        loop.run(30)
        assert loop.invalid == [], f"invalid proposals: {loop.invalid[:3]}"
        assert len(loop.trials) == 30
        self.assert_healthy(technique)

    def test_proposals_valid_on_wide_integers(self, conformance_technique: str) -> None:
        space = wide_space()
        technique = self.make(conformance_technique, space, seed=6)
        loop = AskTellLoop(technique, wide_objective, batch=2)
        loop.run(30)
        assert loop.invalid == [], f"invalid proposals: {loop.invalid[:3]}"
        assert len(loop.trials) == 30
        assert len({t.config["n"] for t in loop.trials}) > 1, "every proposal has the same n"
        self.assert_healthy(technique)

    def test_budget_gives_exactly_b_trials(self, conformance_technique: str) -> None:
        for budget in (1, 7, 40):
            technique = self.make(conformance_technique, mixed_space(), seed=budget)
            loop = AskTellLoop(technique, mixed_objective)
            trials = loop.run(budget)
            assert len(trials) == budget
            assert len({t.config for t in trials}) == budget
            assert [t.id for t in trials] == list(range(budget))

    def test_failures_are_handled(self, conformance_technique: str) -> None:
        technique = self.make(conformance_technique, mixed_space(), seed=5)
        loop = AskTellLoop(technique, failing_objective, batch=2, lag=1)
        trials = loop.run(50)
        assert len(trials) == 50
        assert any(t.status is Status.FAILED for t in trials)
        assert any(t.ok for t in trials)
        # Timeouts and cancellations are told too, and must not break anything.
        extra = []
        for i, config in enumerate(mixed_space().sample(np.random.default_rng(9), 6)):
            status = (Status.TIMEOUT, Status.CANCELLED, Status.FAILED)[i % 3]
            extra.append(Trial(id=1000 + i, config=config, status=status, reason="test"))
        technique.tell(extra)
        space = mixed_space()
        assert all(space.is_valid(c) for c in technique.ask(4))
        self.assert_healthy(technique)

    def test_all_failures(self, conformance_technique: str) -> None:
        technique = self.make(conformance_technique, smooth_space(), seed=2)
        loop = AskTellLoop(technique, _always_fails)
        assert len(loop.run(25)) == 25
        self.assert_healthy(technique)

    def test_asks_before_tells_and_foreign_results(self, conformance_technique: str) -> None:
        space = mixed_space()
        technique = self.make(conformance_technique, space, seed=7)
        # Results of configurations it never proposed, before its first ask.
        rng = np.random.default_rng(11)
        foreign = []
        for i, config in enumerate(space.sample(rng, 8)):
            value = mixed_objective(config)
            foreign.append(
                Trial(id=i, config=config, status=Status.OK, value=value, loss=value, technique="seed")
            )
        technique.tell(foreign[::-1])
        asked: list[Config] = []
        for _ in range(3):
            got = technique.ask(4)
            assert len(got) <= 4
            asked.extend(got)
        assert asked, "no proposal at all after foreign results"
        assert all(space.is_valid(c) for c in asked)
        assert len(set(asked)) == len(asked), "the same configuration proposed twice while in flight"
        done = []
        for i, config in enumerate(reversed(asked)):
            value = mixed_objective(config)
            done.append(Trial(id=100 + i, config=config, status=Status.OK, value=value, loss=value))
        technique.tell(done)
        technique.tell(done[:2])  # told again (a cache hit in the driver)
        assert all(space.is_valid(c) for c in technique.ask(3))
        self.assert_healthy(technique)

    def test_same_seed_same_proposals(self, conformance_technique: str) -> None:
        runs = []
        for _ in range(2):
            technique = self.make(conformance_technique, mixed_space(), seed=42)
            loop = AskTellLoop(technique, failing_objective, batch=2, lag=3, shuffle=True, seed=1)
            loop.run(40)
            runs.append(loop.proposals)
        assert runs[0] == runs[1]

    def test_checkpoint_round_trip_continues_identically(self, conformance_technique: str) -> None:
        # Through the checkpoint format (JSON, no pickle): a technique rebuilt by its constructor and
        # loaded with the decoded state proposes exactly what the original proposes.
        from perftune.drive._checkpoint import decode, encode

        technique = self.make(conformance_technique, mixed_space(), seed=8)
        loop = AskTellLoop(technique, failing_objective, lag=2)
        loop.run(30)
        blob = encode({"technique": technique.state_dict()}, technique.space)
        copy = _loop_copy(loop, self.make(conformance_technique, mixed_space(), seed=8))
        copy.technique.load_state_dict(decode(blob, copy.space)["technique"])
        assert json.loads(blob)["format"] == "perftune-checkpoint"
        loop.run(55)
        copy.run(55)
        assert copy.proposals == loop.proposals
        assert [t.config for t in copy.trials] == [t.config for t in loop.trials]
        self.assert_healthy(copy.technique)

    def test_terminates_on_exhausted_space(self, conformance_technique: str) -> None:
        technique = self.make(conformance_technique, _tiny_space(), seed=1)
        loop = AskTellLoop(technique, _tiny_objective)
        trials = loop.run(10, max_idle=30)
        assert len(trials) == 3
        assert loop.best() == 1.0
        self.assert_healthy(technique)

    def test_beats_random_on_smooth_function(self, conformance_technique: str) -> None:
        if conformance_technique == "random":
            pytest.skip("random search is the reference")
        budget = self.improvement_budget
        mine = [
            _best_of(
                conformance_technique,
                smooth_space,
                smooth_objective,
                budget,
                s,
                self._settings_for(conformance_technique),
            )
            for s in self.improvement_seeds
        ]
        ref = [_best_of("random", smooth_space, smooth_objective, budget, s) for s in self.improvement_seeds]
        assert float(np.median(mine)) < float(np.median(ref)), (
            f"{conformance_technique}: {mine} vs random {ref}"
        )

    def test_through_the_tuner(self, conformance_technique: str) -> None:
        drive = pytest.importorskip("perftune.drive")
        result = drive.tune(
            failing_objective, mixed_space(), budget=30, seed=4, technique=conformance_technique
        )
        assert len(result.trials) == 30
        space = mixed_space()
        assert all(space.is_valid(t.config) for t in result.trials)
        assert result.best is not None
        tuner = drive.Tuner(mixed_space(), seed=None, technique=conformance_technique, budget=12)
        while (trial := tuner.ask()) is not None:
            tuner.tell(trial, mixed_objective(trial.config))
        assert len(tuner.trials) == 12

    def _settings_for(self, name: str) -> Any:
        return self.technique_settings if name == self.technique_name else None


def _always_fails(config: Config) -> float:
    raise RuntimeError("always fails")
