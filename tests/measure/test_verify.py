"""Budgeted, risk-ranked verification."""

from __future__ import annotations

import numpy as np

from perftune.measure import BudgetedVerifier


def test_budget_is_respected() -> None:
    v = BudgetedVerifier(0.1, seed=0)
    rng = np.random.default_rng(0)
    n = sum(v.should_check(v.features(rng.random(3), speedup=1.0)) for _ in range(500))
    assert 40 <= n <= 51


def test_neighbours_of_a_caught_candidate_rank_higher() -> None:
    v = BudgetedVerifier(0.1, seed=0)
    bad = np.array([0.3, 0.3, 0.3])
    v.record(bad, bad=True, x=v.features(bad), checked=True)
    near = v.model.score(v.features(bad + 0.02))
    far = v.model.score(v.features(np.array([0.5, 0.5, 0.6])))
    assert near > 2 * far


def test_state_round_trips_through_a_dict() -> None:
    v = BudgetedVerifier(0.2, seed=0)
    for i in range(20):
        x = v.features(np.array([i / 20]), technique="ga")
        v.should_check(x)
        v.record(np.array([i / 20]), bad=i % 5 == 0, x=x, checked=True, technique="ga")
    w = BudgetedVerifier.from_dict(v.to_dict())
    x = v.features(np.array([0.5]), technique="ga")
    assert w.model.score(w.features(np.array([0.5]), technique="ga")) == v.model.score(x)
    assert w.n_checked == v.n_checked and w.credit == v.credit
