"""Level-by-level tuning of the Poisson multigrid example: DP over levels x bins, verified cells."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.targets.choice import ChoiceError, LevelTable, level_config, tune_levels, use_choices

TARGETS = (1.0, 3.0, 5.0)
TOP = 5


@pytest.fixture(scope="module")
def poisson_table():
    import sys
    from pathlib import Path

    EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "choice"
    sys.path.insert(0, str(EXAMPLES))
    try:
        import poisson
    finally:
        sys.path.remove(str(EXAMPLES))
    table = poisson.tune(top_level=TOP, budget_per_level=20, n_train=2, n_held_out=3, seed=0, targets=TARGETS)
    yield poisson, table
    sys.modules.pop("poisson", None)


def test_table_covers_every_level_and_bin(poisson_table):
    _, table = poisson_table
    assert table.levels == list(range(2, TOP + 1))
    assert table.targets == list(TARGETS)
    for lv in table.levels:
        assert all(b.reached for b in table.rows[lv].bins), table.format()


def test_every_cell_meets_its_target_on_fresh_held_back_rhs(poisson_table):
    poisson, table = poisson_table
    rng = np.random.default_rng(2024)
    for lv in table.levels:
        fresh = [poisson.random_problem(lv, rng) for _ in range(5)]
        for j, target in enumerate(TARGETS):
            cfg = table.cell(lv, j)
            worst = min(poisson.digits(poisson.solve(lv, cfg, p.f, table), p) for p in fresh)
            assert worst >= target, (lv, target, cfg, worst)


def test_cells_only_call_lower_levels(poisson_table):
    _, table = poisson_table
    for lv in table.levels:
        for b in table.rows[lv].bins:
            if b.config["algo"] == "multigrid":
                assert table.rows[lv - 1].bins[b.config["coarse_bin"]].reached


def test_rows_are_monotone(poisson_table):
    _, table = poisson_table
    for lv in table.levels:
        times = [b.time_s for b in table.rows[lv].bins]
        assert all(a <= b for a, b in zip(times, times[1:], strict=False))


def test_round_trip_and_runtime_lookup(poisson_table, tmp_path):
    poisson, table = poisson_table
    path = table.save(tmp_path / "c.json")
    use_choices(path, strict=True)
    assert level_config("poisson", TOP, 3.0) == table.cell(TOP, 1)
    back = LevelTable.from_dict("poisson", table.to_dict())
    assert back.cell(TOP, 2) == table.cell(TOP, 2)
    solver = poisson.PoissonSolver.from_choices()
    p = poisson.random_problem(TOP, np.random.default_rng(7))
    assert poisson.digits(solver.solve(p.f, 2.5), p) >= 3.0
    with pytest.raises(ChoiceError, match="level 9 is not tuned"):
        back.cell(9, 0)


def test_levels_must_be_coarsest_first():
    with pytest.raises(ChoiceError, match="coarsest first"):
        tune_levels(
            lambda *a: None,
            lambda *a: None,
            levels=[3, 2],
            accuracy=lambda o, x: 0.0,
            targets=[1.0],
            inputs_for_level=lambda lv: [0],
        )
