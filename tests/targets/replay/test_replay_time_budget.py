"""A time budget on a replayed space is the driver's: the run ends on time, whatever the search does.

The elapsed time of the run is the behaviour under test; the budget is one second.
"""

from __future__ import annotations

import time
from pathlib import Path

import perftune
from perftune.targets import replay

HUB = Path(__file__).resolve().parents[3] / "data" / "benchmark_hub"
ALLOWANCE_S = 3.0  # forking a worker, stopping it, on 2 shared cores


def test_time_budget_ends_a_replayed_run_on_time() -> None:
    problem = replay.load(HUB / "convolution_milo.T1.json", HUB / "convolution_milo.A6000.T4.json.gz")
    # The budget counts from run(): building the tuner (its first sample of a constrained space) is outside.
    tuner = perftune.Tuner(problem.space, seed=1)
    started = time.monotonic()
    result = tuner.run(problem.objective, "1s")
    assert time.monotonic() - started < 1.0 + ALLOWANCE_S
    assert result.stop_reason == "time" and len(result.trials) >= 2
    assert len(result.trials) < problem.space.cardinality()  # the clock, not the space, ended it
