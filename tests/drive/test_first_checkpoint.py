"""A run is never stored without a checkpoint: the first one goes in with the run, in one transaction.

Before, a driver created its run and then wrote the first checkpoint; a SIGKILL between the two (the
encoding takes a few tenths of a second on a cold start) left a run that ``Tuner.resume`` refused ("has no
checkpoint to resume from"), which tests/drive/test_fault_injection.py hit once in CI.
"""

from __future__ import annotations

import subprocess
import sys

from perftune import Tuner
from perftune.space import Float, Int, Space
from perftune.store import open_store

SPACE = Space({"x": Int(0, 9), "y": Float(0.0, 1.0)})


def test_create_run_writes_the_checkpoint_it_is_given_in_the_same_transaction(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    with_one = store.create_run("a", SPACE, {}, "min", None, checkpoint=b"first")
    without = store.create_run("b", SPACE, {}, "min", None)
    assert store.load_checkpoint(with_one.id) == (0, b"first")
    assert store.load_checkpoint(without.id) is None


def test_a_tuner_run_has_its_checkpoint_the_moment_it_exists(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 't.db'}")
    seen: list[object] = []
    real = store.create_run

    def create_run(*args, **kwargs):
        info = real(*args, **kwargs)
        # Nothing else has happened yet: a kill here must leave a run that can be resumed.
        seen.append(store.load_checkpoint(info.id))
        return info

    store.create_run = create_run  # type: ignore[method-assign]
    Tuner(SPACE, seed=1, store=store, name="now").close()
    assert len(seen) == 1 and seen[0] is not None and seen[0][0] == 0


def test_a_driver_that_dies_right_after_creating_its_run_can_be_resumed(tmp_path):
    url = f"sqlite:///{tmp_path / 'dies.db'}"
    code = (
        "import os, sys\n"
        "from perftune import Tuner\n"
        "from perftune.space import Float, Int, Space\n"
        "SPACE = Space({'x': Int(0, 9), 'y': Float(0.0, 1.0)})\n"
        "Tuner(SPACE, seed=1, store=sys.argv[1], name='dies')\n"
        "os._exit(9)  # no close, no atexit: as a SIGKILL would leave it\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    tuner = Tuner.resume("dies", url, space=SPACE)
    result = tuner.run(lambda c: (c["x"] - 3) ** 2 + c["y"], 12)
    assert len(result.trials) == 12
