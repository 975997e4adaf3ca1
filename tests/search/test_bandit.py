"""The AUC bandit: credit assignment, exploration, cost awareness, de-duplication, introspection."""

from __future__ import annotations

import pickle
import time
from typing import ClassVar

import pytest

from perftune.errors import PerftuneError
from perftune.search import AUCBandit, BanditSettings, RandomSearch, create, register
from perftune.search import _registry as registry
from perftune.search._bandit import _AUCWindow
from perftune.space import Choice, Float, Int, Space
from perftune.testing.techniques import (
    AskTellLoop,
    mixed_objective,
    mixed_space,
    smooth_objective,
    smooth_space,
)
from perftune.trial import Status, Trial


class SlowRandom(RandomSearch):
    """Random search that takes 4 ms to decide each proposal (stands in for an expensive model)."""

    name: ClassVar[str] = "test-slow-random"

    def _propose(self):  # type: ignore[no-untyped-def]
        time.sleep(0.004)
        return super()._propose()


class CostlyRandom(RandomSearch):
    """Random search that counts 1000 units of deciding work per proposal (and takes no time)."""

    name: ClassVar[str] = "test-costly-random"

    def _propose(self):  # type: ignore[no-untyped-def]
        self.work_done += 999.0  # the base class counts one unit per proposal
        return super()._propose()


@pytest.fixture(scope="module", autouse=True)
def _slow_registered():
    register(SlowRandom)
    register(CostlyRandom)
    yield
    registry._registered.pop(SlowRandom.name, None)
    registry._registered.pop(CostlyRandom.name, None)


def auc_reference(outcomes: list[int]) -> float:
    """OpenTuner's definition, computed from scratch."""
    score = sum((pos + 1) * o for pos, o in enumerate(outcomes))
    n = len(outcomes)
    return score * 2.0 / (n * (n + 1.0)) if n else 0.0


def test_auc_window_matches_the_definition_while_sliding() -> None:
    window = _AUCWindow(2, size=7)
    history: list[tuple[int, int]] = []
    pattern = [(0, 1), (1, 0), (0, 0), (0, 1), (1, 1), (1, 0), (0, 1), (0, 0), (1, 1), (0, 1), (1, 0), (0, 0)]
    for t, o in pattern * 3:
        window.add(t, bool(o))
        history.append((t, o))
        recent = history[-7:]
        for k in (0, 1):
            assert window.auc(k) == pytest.approx(auc_reference([o for tt, o in recent if tt == k]))
            assert window.uses[k] == sum(1 for tt, _ in recent if tt == k)


def test_unused_technique_is_explored_first() -> None:
    window = _AUCWindow(3, size=10)
    window.add(0, True)
    window.add(1, False)
    assert window.exploration(2) == float("inf")


def test_credit_goes_to_the_technique_whose_proposals_become_new_bests() -> None:
    space = Space({"x": Int(0, 10_000)})
    bandit = AUCBandit(space, seed=1, settings=BanditSettings(techniques=("random", "greedy-normal")))
    loop = AskTellLoop(bandit, _minus_x)  # every larger x is a new best: greedy climbs, random rarely wins
    loop.run(120)
    credits = bandit.credits()
    assert set(credits) == {"random", "greedy-normal"}
    assert all(0.0 <= c <= 1.0 for c in credits.values())
    assert bandit.wins["greedy-normal"] > bandit.wins["random"]
    assert bandit.counts["greedy-normal"] > bandit.counts["random"]
    assert sum(bandit.counts.values()) == 120


def _minus_x(config):  # type: ignore[no-untyped-def]
    return -float(config["x"])


def test_trials_it_did_not_propose_update_the_best_but_earn_no_credit() -> None:
    space = Space({"x": Float(0, 1)})
    bandit = AUCBandit(space, seed=2, settings=BanditSettings(techniques=("random", "de")))
    seed_trial = Trial(
        id=0, config=space.default(), status=Status.OK, value=-5.0, loss=-5.0, technique="seed"
    )
    bandit.tell([seed_trial])
    assert bandit.best_loss == -5.0
    assert sum(bandit.wins.values()) == 0
    assert bandit.credits() == {"random": 0.0, "de": 0.0}


def test_proposer_of_labels_configurations_in_flight() -> None:
    bandit = create("bandit", smooth_space(), seed=3)
    configs = bandit.ask(5)
    names = {bandit.proposer_of(c) for c in configs}
    assert names <= set(bandit.names) | {"random"}
    assert None not in names


def test_cost_aware_throttles_an_expensive_technique_on_a_trivial_objective() -> None:
    settings = BanditSettings(techniques=("test-slow-random", "random"), exploration=1.0)
    bandit = AUCBandit(smooth_space(), seed=4, settings=settings)
    loop = AskTellLoop(bandit, smooth_objective, duration_s=0.0)
    bandit.set_deterministic(False)  # the loop sets it, like a seeded driver; this test needs the clock
    loop.run(300)
    assert bandit.counts["test-slow-random"] < 30  # about 1% expected; unthrottled it would get ~50%
    assert bandit.deciding_time_s["test-slow-random"] > 0
    assert bandit.decide_s_per_proposal()["test-slow-random"] is not None


def test_cost_aware_lets_an_expensive_technique_run_on_a_slow_objective() -> None:
    settings = BanditSettings(techniques=("test-slow-random", "random"), exploration=1.0)
    bandit = AUCBandit(smooth_space(), seed=4, settings=settings)
    loop = AskTellLoop(bandit, smooth_objective, duration_s=1.0)  # trials say they took 1 s to measure
    bandit.set_deterministic(False)
    loop.run(60)
    assert bandit.measurement_s() == pytest.approx(1.0)
    assert bandit.counts["test-slow-random"] >= 15


def test_deterministic_mode_ignores_the_clock() -> None:
    runs = []
    for _ in range(2):
        settings = BanditSettings(techniques=("test-slow-random", "random", "greedy-normal"))
        bandit = AUCBandit(smooth_space(), seed=5, settings=settings)
        loop = AskTellLoop(bandit, smooth_objective, duration_s=0.0)  # sets deterministic mode
        loop.run(40)
        runs.append(loop.proposals)
    assert runs[0] == runs[1]


def _seeded_run(
    technique: str, duration_s: float, lag: int = 0, free_proposals: int = 0
) -> tuple[AUCBandit, AskTellLoop]:
    settings = BanditSettings(
        techniques=(technique, "random"), exploration=1.0, free_proposals=free_proposals, free_work=5000.0,
        work_per_result=10.0,
    )
    bandit = AUCBandit(smooth_space(), seed=4, settings=settings)
    loop = AskTellLoop(bandit, smooth_objective, duration_s=duration_s, lag=lag)  # deterministic mode
    loop.run(300)
    return bandit, loop


def test_seeded_run_is_cost_aware_in_counted_work() -> None:
    cheap, _ = _seeded_run("greedy-normal", duration_s=0.0)
    costly, _ = _seeded_run("test-costly-random", duration_s=0.0)
    assert cheap.counts["greedy-normal"] > 100  # within its budget: chosen about half the time
    # 1000 units a proposal against a budget of 5000 + 10 per result: at most 5 + 3 (+1 over) in 300.
    assert costly.counts["test-costly-random"] <= 9
    assert costly.counts["test-costly-random"] >= 5  # used while its budget lasts, not banned
    assert costly.work_spent["test-costly-random"] <= costly.work_budget() + 1000.0
    assert costly.work_spent["random"] == costly.counts["random"]  # one unit per proposal


def test_the_first_asks_of_each_technique_are_free() -> None:
    costly, _ = _seeded_run("test-costly-random", duration_s=0.0, free_proposals=20)
    # 20 free asks, then 1000 units an ask against 5000 + 10 per result: 5 + 3 (+1 over) more in 300.
    assert 25 <= costly.counts["test-costly-random"] <= 29
    assert costly.n_asks["test-costly-random"] >= 25
    # The free asks are not charged: only the ones after them.
    assert costly.work_spent["test-costly-random"] == 1000.0 * (costly.n_asks["test-costly-random"] - 20)
    assert costly.work_spent["random"] == max(0, costly.n_asks["random"] - 20)


def test_the_free_asks_end_after_free_until_results_results() -> None:
    settings = BanditSettings(
        techniques=("test-costly-random", "random"), exploration=1.0, free_proposals=1000,
        free_until_results=40, free_work=5000.0, work_per_result=10.0,
    )
    bandit = AUCBandit(smooth_space(), seed=4, settings=settings)
    loop = AskTellLoop(bandit, smooth_objective, duration_s=0.0)  # deterministic mode
    loop.run(40)
    free = bandit.counts["test-costly-random"]
    assert free >= 10  # chosen about half the time while its asks are free
    assert bandit.work_spent["test-costly-random"] == 0.0
    loop.run(260)
    # Then 1000 units an ask against 5000 + 10 per result: at most 5 + 3 (+1 over) more in 300 results.
    later = bandit.counts["test-costly-random"] - free
    assert 5 <= later <= 9
    assert bandit.work_spent["test-costly-random"] == 1000.0 * later


def test_a_long_seeded_run_of_the_default_portfolio_holds_the_model_to_its_free_asks() -> None:
    # A cheap space (6 parameters): a model ask costs a few hundred units. A free lump of units let the
    # model make ~260 proposals of a 10k-trial run; counted in asks, the lump is 100 proposals.
    bandit = AUCBandit(smooth_space(), seed=3)
    AskTellLoop(bandit, smooth_objective, duration_s=0.0).run(1200)  # deterministic mode
    settings = bandit.settings
    assert settings.free_proposals == 100
    assert bandit.n_asks["model"] >= settings.free_proposals  # the model was wanted beyond its free asks
    charged = bandit.n_asks["model"] - settings.free_proposals
    # After them it is charged: a few hundred units an ask against 1 unit per result.
    assert bandit.work_spent["model"] > 0
    assert charged <= 1 + (settings.free_work + settings.work_per_result * bandit.n_results) / 100


def test_seeded_cost_awareness_does_not_depend_on_timings() -> None:
    fast_bandit, fast = _seeded_run("test-costly-random", duration_s=0.0)
    slow_bandit, slow = _seeded_run("test-costly-random", duration_s=1.0)
    assert fast.proposals == slow.proposals
    assert fast_bandit.counts == slow_bandit.counts
    again_bandit, again = _seeded_run("test-costly-random", duration_s=0.0)
    assert again.proposals == fast.proposals


def test_a_resumed_seeded_run_keeps_its_counted_work_budget() -> None:
    settings = BanditSettings(
        techniques=("test-costly-random", "random"), exploration=1.0, free_proposals=10, free_work=5000.0,
        work_per_result=10.0,
    )
    loop = AskTellLoop(AUCBandit(smooth_space(), seed=4, settings=settings), smooth_objective, duration_s=0.0)
    loop.run(150)
    resumed = pickle.loads(pickle.dumps(loop))
    assert resumed.technique.work_spent == loop.technique.work_spent
    assert resumed.technique.n_asks == loop.technique.n_asks
    loop.run(150)
    resumed.run(150)
    assert resumed.proposals == loop.proposals
    assert resumed.technique.counts == loop.technique.counts


def test_seeded_cost_awareness_can_be_switched_off() -> None:
    settings = BanditSettings(
        techniques=("test-costly-random", "random"), exploration=1.0, free_proposals=0, free_work=5000.0,
        work_per_result=10.0, cost_aware=False,
    )
    bandit = AUCBandit(smooth_space(), seed=4, settings=settings)
    AskTellLoop(bandit, smooth_objective, duration_s=0.0).run(300)
    assert bandit.counts["test-costly-random"] > 100


def test_duplicates_fall_back_to_other_techniques_then_random() -> None:
    space = Space({"a": Choice(["x", "y", "z", "w"]), "b": Int(0, 3)})
    bandit = AUCBandit(space, seed=6, settings=BanditSettings(techniques=("coordinate-descent",)))
    loop = AskTellLoop(bandit, _sum_ab)
    trials = loop.run(16)
    assert len({t.config for t in trials}) == 16  # the whole space, no repeats
    assert loop.n_repeats == 0
    assert bandit.ask(1) == []  # exhausted: nothing new to propose


def _sum_ab(config):  # type: ignore[no-untyped-def]
    return "xyzw".index(config["a"]) + config["b"]


def test_counts_credits_and_times_survive_pickling() -> None:
    bandit = create("bandit", mixed_space(), seed=7)
    loop = AskTellLoop(bandit, mixed_objective)
    loop.run(30)
    copy = pickle.loads(pickle.dumps(bandit))
    assert copy.counts == bandit.counts
    assert copy.credits() == bandit.credits()
    assert copy.deciding_time_s == bandit.deciding_time_s
    assert sum(copy.counts.values()) == 30


def test_default_portfolio_and_alias() -> None:
    bandit = create("bandit", smooth_space(), seed=0)
    assert isinstance(bandit, AUCBandit)
    assert {"model", "ga", "coordinate-descent", "random"} <= set(bandit.names)


def test_technique_settings_reach_the_sub_techniques() -> None:
    from perftune.search import DESettings

    settings = BanditSettings(
        techniques=("de", "random"), technique_settings={"de": DESettings(population=6)}
    )
    bandit = AUCBandit(smooth_space(), seed=0, settings=settings)
    assert bandit.techniques[0].population == 6


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"techniques": ()}, "at least one"),
        ({"techniques": ("de", "de")}, "duplicate"),
        ({"techniques": ("bandit",)}, "itself"),
        ({"exploration": -1.0}, "exploration"),
        ({"window": 0}, "window"),
        ({"free_proposals": -1}, "free_proposals"),
        ({"free_until_results": -1}, "free_until_results"),
        ({"technique_settings": {"pso": None}}, "not in the portfolio"),
    ],
)
def test_bad_settings_are_one_line_errors(kwargs, text) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PerftuneError, match=text) as info:
        BanditSettings(**kwargs)
    assert "\n" not in str(info.value)


def test_unknown_technique_in_portfolio() -> None:
    with pytest.raises(PerftuneError, match="unknown technique 'nope'"):
        AUCBandit(smooth_space(), seed=0, settings=BanditSettings(techniques=("nope",)))


def test_proposals_in_flight_spread_over_the_portfolio() -> None:
    bandit = create("bandit", smooth_space(), seed=8)
    configs = bandit.ask(len(bandit.names))  # nothing told yet: every technique is unexplored
    assert sorted(bandit.proposer_of(c) for c in configs) == sorted(bandit.names)
    late = create("bandit", smooth_space(), seed=9)
    loop = AskTellLoop(late, smooth_objective, lag=10)  # results arrive ten evaluations late
    loop.run(len(late.names))
    assert all(count == 1 for count in late.counts.values() if count), late.counts


def test_parallelism_shrinks_the_deciding_allowance() -> None:
    bandit = AUCBandit(smooth_space(), seed=1, settings=BanditSettings(techniques=("random", "de")))
    loop = AskTellLoop(bandit, smooth_objective, duration_s=0.5)
    loop.run(5)
    bandit.set_deterministic(False)
    one = bandit._allowance()
    bandit.set_parallelism(8)
    eight = bandit._allowance()
    assert one is not None and eight is not None and eight < one


def test_default_search_starts_with_a_boundary_design_then_the_bandit() -> None:
    from perftune.search import StagedBandit, StagedSettings
    from perftune.space import Int, Pow2, Space

    space = Space({"block": Pow2(1, 1024), "unroll": Int(1, 64), "tile": Int(4, 40)})
    tech = create("default", space, seed=5)
    assert isinstance(tech, StagedBandit)
    design = tech.ask(16)
    assert {tech.proposer_of(c) for c in design} == {"boundary"}
    # Boundary-biased: far more parameter values at a bound than uniform sampling would give.
    at_bound = sum(c["unroll"] in (1, 64) for c in design) + sum(c["tile"] in (4, 40) for c in design)
    assert at_bound >= 8
    after = tech.ask(4)
    assert all(tech.proposer_of(c) in tech.bandit.names or tech.proposer_of(c) == "random" for c in after)
    # Continuous parameters bring pattern search into the portfolio.
    assert "pattern-search" not in tech.bandit.names
    continuous = StagedBandit(Space({"x": Float(-1.0, 1.0)}), seed=1, settings=StagedSettings(n_design=2))
    assert "pattern-search" in continuous.bandit.names


def test_default_search_picks_its_portfolio_by_the_kinds_of_parameters() -> None:
    from perftune.search import CONTINUOUS_PORTFOLIO, DEFAULT_PORTFOLIO, STAGED_PORTFOLIO, StagedBandit
    from perftune.space import Choice, Int, LogFloat, Pow2, Space

    reals = StagedBandit(Space({"x": Float(-1.0, 1.0), "lr": LogFloat(1e-5, 1e-1)}), seed=0)
    assert tuple(reals.bandit.names) == CONTINUOUS_PORTFOLIO and reals.n_design == 0
    mixed = StagedBandit(Space({"x": Float(-1.0, 1.0), "algo": Choice(["a", "b"])}), seed=0)
    assert tuple(mixed.bandit.names) == DEFAULT_PORTFOLIO and mixed.n_design == 0
    kernel = StagedBandit(Space({"block": Pow2(1, 1024), "unroll": Int(1, 8)}), seed=0)
    assert tuple(kernel.bandit.names) == STAGED_PORTFOLIO and kernel.n_design == 16
    # The bandit chooses among all of them on a real-valued problem, and every proposal is legal.
    proposed = reals.ask(40)
    assert len(set(proposed)) == 40
    assert all(-1.0 <= c["x"] <= 1.0 and 1e-5 <= c["lr"] <= 1e-1 for c in proposed)


def test_default_search_converges_on_a_smooth_real_valued_problem() -> None:
    import perftune

    space = Space({"x": Float(-100.0, 100.0), "y": Float(-100.0, 100.0), "z": Float(-100.0, 100.0)})

    def f(c: dict) -> float:  # a rotated ellipsoid away from the centre of the box
        u, v, w = c["x"] - 31.7, c["y"] + 12.9, c["z"] - 55.1
        return (u + v) ** 2 + 30 * (u - v) ** 2 + 1000 * w**2

    tuner = perftune.Tuner(space, seed=3, lag=0)
    for _ in range(200):
        trial = tuner.ask()
        tuner.tell(trial, f(trial.config))
    assert tuner.best.value < 1e-6
