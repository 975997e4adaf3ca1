"""tune_flags reads its budget argument with the driver's parser: one grammar for every command."""

from __future__ import annotations

import pytest

from perftune import Budget
from perftune.errors import BudgetError
from perftune.targets.flags._tune import _as_budget


@pytest.mark.parametrize(("given", "expected"), [
    (None, Budget(seconds=300.0)),
    ([], Budget(seconds=300.0)),
    ("2m", Budget(seconds=120.0)),
    ("90S", Budget(seconds=90.0)),
    (50, Budget(evals=50)),
    (50.0, Budget(evals=50)),
    (["40", "90s"], Budget(evals=40, seconds=90.0)),
    (("200", "100", "1h", "10m"), Budget(evals=100, seconds=600.0)),
])
def test_flag_budgets_become_driver_budgets(given, expected) -> None:  # type: ignore[no-untyped-def]
    assert _as_budget(given) == expected


@pytest.mark.parametrize("given", [True, "0", "soon", "-5s", 0])
def test_bad_flag_budgets_are_refused(given) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BudgetError):
        _as_budget(given)
