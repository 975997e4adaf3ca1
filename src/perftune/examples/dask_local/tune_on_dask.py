"""Tune on a Dask cluster: a local one here, the same code on SLURM or PBS through dask-jobqueue.

    python examples/dask_local/tune_on_dask.py                      # local cluster of 2 workers
    python examples/dask_local/tune_on_dask.py tcp://host:8786      # an existing scheduler
    python examples/dask_local/tune_on_dask.py local:2 perftune.db  # and store the run

Every evaluation runs as a Dask task on a worker; if a worker dies mid-evaluation, Dask runs the task
again on another one. Without a second argument the run is kept in memory only; with a store (a file
such as perftune.db, or a database URL) it is stored there: `perftune show` and `perftune report` read
it, and `perftune.Tuner.resume(run, store)` continues it.
"""

from __future__ import annotations

import sys
import time

import perftune
from perftune.space import Choice, Int, Pow2, Space

SPACE = Space(
    {"block": Pow2(8, 256, default=16), "unroll": Int(1, 8, default=1), "layout": Choice(["row", "col"])},
    constraints=["block * unroll <= 1024"],
)


def cost(config) -> float:
    """A stand-in for a real measurement (a kernel, a build and a run)."""
    time.sleep(0.05)
    penalty = 0.0 if config["layout"] == "row" else 0.3
    return abs(config["block"] - 64) / 64 + abs(config["unroll"] - 4) / 4 + penalty


def main() -> None:
    scheduler = sys.argv[1] if len(sys.argv) > 1 else "local:2"
    result = perftune.tune(cost, SPACE, budget=30, workers=2, executor="dask", scheduler=scheduler, seed=1,
                           store=sys.argv[2] if len(sys.argv) > 2 else None)
    print(f"best {result.best.value:.3f} with {dict(result.best.config)} "
          f"({len(result.trials)} trials on Dask workers)")


if __name__ == "__main__":
    main()
