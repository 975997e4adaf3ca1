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


def _sleepy(config):
    import time

    time.sleep(30 if config["x"] == 0 else 0.6)
    return float(config["x"])


def test_timeout_s_kills_the_evaluation_on_its_worker_and_counts_from_its_start(tmp_path):
    import time

    # x = 0 (the default, first) hangs: it is killed at 2 s on its worker, which then serves the others;
    # two evaluations in flight on one worker wait in Dask's queue, and that wait is not theirs.
    t0 = time.monotonic()
    result = perftune.tune(_sleepy, space(), budget=5, workers=2, executor="dask", scheduler="local:1",
                           timeout_s=2, seed=0)
    took = time.monotonic() - t0
    statuses = [t.status for t in result.trials]
    assert statuses[0] is Status.TIMEOUT and "ran past the 2 s timeout (killed)" in result.trials[0].reason
    assert statuses[1:] == [Status.OK] * 4
    assert took < 25  # the hanging one (30 s) did not run to its end on the only worker


class _Locked:
    def __init__(self):
        import threading

        self.lock = threading.Lock()

    def __call__(self, config):
        return 1.0


@pytest.mark.parametrize("make, message", [
    (lambda: perftune.tune(_Locked(), space(), budget=2, executor="dask", scheduler="local:1"),
     "the objective cannot be sent to Dask workers (TypeError: cannot pickle '_thread.lock' object)"),
    (lambda: perftune.tune(lambda c: 1.0, space(), budget=2, executor="dask",
                           scheduler="tpc://127.0.0.1:8786"),
     "--scheduler 'tpc://127.0.0.1:8786': unknown address scheme 'tpc'"),
    (lambda: perftune.tune(lambda c: 1.0, space(), budget=2, executor="dask", scheduler="tcp://127.0.0.1"),
     "missing port number"),
])
def test_dask_setup_mistakes_are_one_line(make, message):
    with pytest.raises(PerftuneError) as err:
        make()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_port_that_is_not_a_scheduler_is_an_error_not_a_hang():
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held = []
    # It accepts the connection and never says a word, as a dashboard or another service's port would not
    # answer Dask's handshake.
    threading.Thread(target=lambda: held.append(server.accept()), daemon=True).start()
    port = server.getsockname()[1]
    try:
        with pytest.raises(PerftuneError, match=f"no Dask scheduler answered at tcp://127.0.0.1:{port}"):
            perftune.tune(lambda c: 1.0, space(), budget=2, executor="dask",
                          scheduler=f"tcp://127.0.0.1:{port}")
    finally:
        for conn, _ in held:
            conn.close()
        server.close()
