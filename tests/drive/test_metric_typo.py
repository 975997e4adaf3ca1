"""metric= that names what the objective never returns (a typo) stops the run after a few trials with one
line that names the metrics there are, instead of spending the whole budget on failures."""

from __future__ import annotations

import pytest

import perftune
from perftune.space import Int, Space
from perftune.store import open_store

SPACE = Space({"x": Int(0, 99)})


def timed(config):
    return {"wall_time": 1.0 + config["x"], "max_rss": 5.0}


def test_a_misspelt_metric_stops_after_three_trials_and_keeps_them(tmp_path):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with pytest.raises(perftune.PerftuneError) as err:
        perftune.tune(timed, SPACE, budget=50, seed=0, metric="wal_time", store=db, name="typo")
    message = str(err.value)
    assert "\n" not in message and "stopped after 3 trials" in message and "run 'typo' keeps them" in message
    assert "no numeric metric 'wal_time' (has: max_rss, wall_time); did you mean 'wall_time'?" in message
    with open_store(db) as st:
        info = st.get_run("typo")
        assert len(st.trials(info.id)) == 3  # measured, kept


def test_the_run_goes_on_once_a_result_had_the_metric():
    # Only some results lack it (a failing configuration reports what it can): that is the space, not a typo.
    def partial(config):
        return {"t": 1.0 + config["x"]} if config["x"] % 4 == 0 else {"error_code": 3.0}

    result = perftune.tune(partial, SPACE, budget=30, seed=0, metric="t", seeds=[{"x": 0}])
    assert len(result.trials) == 30 and result.best is not None and result.stop_reason != "metric missing"


def test_the_tuner_api_stops_with_the_reason():
    tuner = perftune.Tuner(SPACE, seed=0, metric="walltime")
    result = tuner.run(timed, 40)
    assert [t.status.value for t in result.trials] == ["failed"] * 3
    assert result.stop_reason.startswith("metric missing: objective's result has no numeric metric 'walltime")
