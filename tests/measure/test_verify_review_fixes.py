"""BudgetedVerifier spends its whole budget: a budget b checks a fraction b of the candidates."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.measure import BudgetedVerifier


def _checked(verifier: BudgetedVerifier, n: int, *, seed: int) -> int:
    """How many of ``n`` candidates (a stream with mixed risks, none found wrong) get the check."""
    rng = np.random.default_rng(seed)
    n_checked = 0
    for i in range(n):
        # Mostly alike candidates in the middle of the space, some at its edges.
        enc = rng.uniform(0.0, 1.0, size=3) if i % 7 == 0 else rng.uniform(0.3, 0.7, size=3)
        x = verifier.features(enc, speedup=float(rng.lognormal(0.0, 0.3)))
        check = verifier.should_check(x)
        n_checked += check
        verifier.record(enc, bad=False, x=x if check else None, checked=check)
    return n_checked


@pytest.mark.parametrize("budget", [0.0, 0.1, 0.3, 0.5, 0.75, 0.9, 1.0])
def test_a_budget_checks_that_fraction_of_the_candidates(budget: float) -> None:
    v = BudgetedVerifier(budget, seed=0)
    n = 600
    n_checked = _checked(v, n, seed=1)
    # The contract in BudgetedVerifier's docstring: in (n * budget - max(reserve, 1), n * budget].
    assert n * budget - max(v.reserve, 1.0) < n_checked <= n * budget + 1e-6
    assert v.n_checked == n_checked


def test_budget_one_checks_every_candidate() -> None:
    v = BudgetedVerifier(1.0, seed=0)
    assert _checked(v, 300, seed=2) == 300


def test_unspent_credit_stays_under_the_reserve() -> None:
    v = BudgetedVerifier(0.9, seed=0)
    highest = 0.0
    rng = np.random.default_rng(3)
    for _ in range(2000):
        enc = rng.uniform(0.3, 0.7, size=3)
        x = v.features(enc, speedup=1.0)
        v.should_check(x)
        highest = max(highest, v.credit)
    assert highest < v.reserve + 1.0  # (it may reach reserve + budget just before it is spent)
    assert v.credit < v.reserve


def test_credit_saved_by_an_old_state_is_capped_when_loaded() -> None:
    v = BudgetedVerifier(0.7, seed=0)
    state = v.to_dict()
    state["credit"] = 431.0  # what 1000 candidates at budget 1.0 left unspent before the fix
    w = BudgetedVerifier.from_dict(state)
    assert w.credit <= w.reserve
    assert _checked(w, 100, seed=4) <= 70 + w.reserve
