"""Size and time of one checkpoint of the default technique, JSON format against a pickle of the same state.

The driver writes a checkpoint every 50 trials and every 30 s; this measures what one costs after N
trials of the default ensemble on the conformance suite's mixed space (ask/tell, no store).

Usage:
    python benchmarks/checkpoint_cost.py [--trials 1500]
"""

from __future__ import annotations

import argparse
import pickle
import platform
import time

from perftune import Tuner
from perftune.drive import _checkpoint
from perftune.testing.techniques import mixed_objective, mixed_space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1500)
    args = parser.parse_args()
    space = mixed_space()
    tuner = Tuner(space, seed=1)
    for _ in range(args.trials):
        trial = tuner.ask()
        assert trial is not None
        tuner.tell(trial, mixed_objective(trial.config))
    payload = tuner._checkpoint_payload()
    t0 = time.perf_counter()
    blob = _checkpoint.encode(payload, space)
    t1 = time.perf_counter()
    _checkpoint.decode(blob, space)
    t2 = time.perf_counter()
    pickled = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    t3 = time.perf_counter()
    print(f"{platform.node()} {time.strftime('%Y-%m-%d')}: {args.trials} trials, default technique")
    print(f"json:   {len(blob):>9} bytes  encode {t1 - t0:.3f} s  decode {t2 - t1:.3f} s")
    print(f"pickle: {len(pickled):>9} bytes  dumps  {t3 - t2:.3f} s")


if __name__ == "__main__":
    main()
