"""The Dask executor on a real local cluster, including a worker killed mid-evaluation."""

from __future__ import annotations

import os
import signal

import pytest

import perftune
from perftune import Status
from perftune.errors import PerftuneError
from perftune.space import Float, Int, Space

pytest.importorskip("distributed")

pytestmark = pytest.mark.slow


def space() -> Space:
    return Space({"x": Int(-10, 10, default=0), "y": Float(0.0, 1.0, default=0.5)})


def test_dask_local_cluster_runs_the_budget():
    result = perftune.tune(lambda c: (c["x"] - 2) ** 2 + c["y"], space(), budget=16, workers=2,
                           executor="dask", scheduler="local:2", seed=3)
    assert len(result.trials) == 16
    assert all(t.ok for t in result.trials)
    # Evaluated on Dask worker processes, not in the driver.
    assert all(not t.worker.endswith(f":{os.getpid()}") for t in result.trials)


def test_worker_killed_mid_evaluation_is_rescheduled(tmp_path):
    marker = tmp_path / "killed-once"

    def objective(config):
        if config["x"] == 7 and not marker.exists():
            marker.write_text("x")
            os.kill(os.getpid(), signal.SIGKILL)  # the Dask worker process dies mid-evaluation
        return abs(config["x"] - 7) + config["y"]

    result = perftune.tune(objective, space(), budget=10, workers=2, executor="dask", scheduler="local:2",
                           seeds=[{"x": 7, "y": 0.0}], seed=1)
    assert marker.exists(), "the worker was killed"
    assert len(result.trials) == 10
    victim = next(t for t in result.trials if t.technique == "seed")
    assert victim.status is Status.OK and victim.value == 0.0  # re-run on a live worker, not lost
    assert len({t.id for t in result.trials}) == 10


def test_unreachable_scheduler_is_one_clear_error():
    with pytest.raises(PerftuneError, match="cannot reach the Dask scheduler"):
        perftune.tune(lambda c: 1.0, space(), budget=3, executor="dask", scheduler="tcp://127.0.0.1:1")


def test_the_local_cluster_example_runs(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).parents[2] / "examples" / "dask_local" / "tune_on_dask.py"
    proc = subprocess.run([sys.executable, str(example), "local:2", f"sqlite:///{tmp_path / 'd.db'}"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "30 trials on Dask workers" in proc.stdout
