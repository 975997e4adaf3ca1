"""A tuning run that the fault-injection test kills with SIGKILL and resumes (run as a script).

Usage: python fault_driver.py STORE_URL WORKERS BUDGET
Starts run "fault" in the store, or resumes it when it exists, and tunes until BUDGET trials.
"""

from __future__ import annotations

import sys
import time

from perftune import Tuner
from perftune.errors import StoreError
from perftune.space import Choice, Float, Int, Space

SPACE = Space({"x": Int(-20, 20, default=0), "y": Float(-1.0, 1.0, default=0.0),
               "k": Choice(["a", "b", "c"])})


def objective(config) -> float:
    time.sleep(0.01)
    return (config["x"] - 5) ** 2 + (config["y"] - 0.3) ** 2 + {"a": 0.0, "b": 1.0, "c": 2.0}[config["k"]]


def main() -> None:
    url, workers, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        tuner = Tuner.resume("fault", url, space=SPACE)
    except StoreError:
        tuner = Tuner(SPACE, seed=42, store=url, name="fault", checkpoint_every=3, checkpoint_interval_s=0.2)
    tuner.run(objective, budget, workers=workers)
    print("done", flush=True)


if __name__ == "__main__":
    main()
