"""How often the surrogate model refits early in a run (ModelSettings.refit_growth)."""

from __future__ import annotations

import pytest

from perftune.errors import PerftuneError
from perftune.search import ModelBased, ModelSettings
from perftune.space import Choice, Int, Space
from perftune.trial import Status, Trial


def _space() -> Space:
    return Space({"x": Int(0, 60), "y": Int(0, 30), "c": Choice(["a", "b", "c"])})


def _loss(config) -> float:  # type: ignore[no-untyped-def]
    return float((config["x"] - 40) ** 2 + (config["y"] - 3) ** 2 + "abc".index(config["c"]))


def _fits_over_a_short_run(settings: ModelSettings, n: int = 64) -> int:
    """Ask one proposal, tell its result, n times (the model is asked after every new result)."""
    tech = ModelBased(_space(), seed=5, settings=settings)
    for i in range(n):
        (config,) = tech.ask(1)
        loss = _loss(config)
        tech.tell([Trial(id=i, config=config, status=Status.OK, value=loss, loss=loss)])
    return tech.n_fits


def test_the_default_refits_after_every_new_result_for_the_first_32() -> None:
    settings = ModelSettings(p_random=0.0)
    assert settings.refit_growth == 32
    # min_points = 8 random proposals, then one fit per ask while fewer than 32 results are known, then
    # one every second result: 24 + 16 fits (a tolerance of one for the first fit's timing).
    assert 39 <= _fits_over_a_short_run(settings) <= 41


def test_a_faster_growth_refits_less_often_early() -> None:
    default = _fits_over_a_short_run(ModelSettings(p_random=0.0))
    lean = _fits_over_a_short_run(ModelSettings(p_random=0.0, refit_growth=8, refit_every_max=16))
    # Interval 1 + n // 8 results: 2 from the first fit (8 results), 3 from 16, 4 from 24...: 13 fits in 64.
    assert lean <= default // 2
    assert lean >= 10  # it still refits as results arrive


def test_refit_growth_must_be_positive() -> None:
    with pytest.raises(PerftuneError, match="ModelSettings.refit_growth"):
        ModelSettings(refit_growth=0)
