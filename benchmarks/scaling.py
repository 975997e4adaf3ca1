"""Throughput of parallel evaluation: 1 to 16 workers on a 0.2 s sleep objective.

Local worker processes and a local Dask cluster. Parallel efficiency at N workers is
throughput(N) / (N / 0.2 s), the ideal, so every overhead counts against it; the driver's own CPU time per trial (ask, tell, store, executor
bookkeeping; not the workers') is measured with ``time.process_time()`` in the driver process.
Runs are unseeded (a seeded run keeps at most lag + 1 evaluations in flight; see the README), plus
one seeded run at 16 workers with ``lag=16``.

Usage:
    python benchmarks/scaling.py [--rounds 8] [--out benchmarks/results/scaling.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from pathlib import Path

from perftune import Tuner
from perftune.space import Float, Int, Space

SLEEP_S = 0.2
SPACE = Space({"x": Int(0, 10_000), "y": Float(0.0, 1.0)})


def sleepy(config) -> float:
    time.sleep(SLEEP_S)
    return config["x"] * config["y"]


def measure(workers: int, rounds: int, executor: str, seed: int | None = None, lag: int | None = None,
            db: str = "sqlite://") -> dict:
    n = workers * rounds
    tuner = Tuner(SPACE, seed=seed, lag=lag, store=db)
    # Start the workers outside the timed region: the time of interest is steady-state throughput.
    if executor == "dask":
        from perftune.drive._dask import DaskExecutor

        ex: object = DaskExecutor(sleepy, None, workers, f"local:{workers}")
    else:
        from perftune.drive import ProcessExecutor

        ex = ProcessExecutor(sleepy, None, workers)
    for i in range(workers):
        ex.submit(-1 - i, SPACE.default())  # type: ignore[attr-defined]
    n_warm = 0
    while n_warm < workers:
        n_warm += len(ex.collect(5.0))  # type: ignore[attr-defined]
    cpu0, t0 = time.process_time(), time.perf_counter()
    tuner.run(sleepy, n, workers=workers, executor=ex)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return {"trials": n, "wall_s": wall, "throughput": n / wall, "driver_cpu_ms_per_trial": cpu / n * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=16, help="trials per worker")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "scaling.md"))
    args = parser.parse_args()
    rows = []
    for executor in ("local", "dask"):
        for workers in (1, 2, 4, 8, 16):
            r = measure(workers, args.rounds, executor)
            r["efficiency"] = r["throughput"] * SLEEP_S / workers
            rows.append((executor, workers, "unseeded", r))
            print(executor, workers, r, flush=True)
    r = measure(16, args.rounds, "local", seed=1, lag=16)
    r["efficiency"] = r["throughput"] * SLEEP_S / 16
    rows.append(("local", 16, "seed=1, lag=16", r))
    lines = [
        "# Parallel scaling on a 0.2 s sleep objective",
        "",
        f"Command: `python benchmarks/scaling.py --rounds {args.rounds}` (workers started before timing)  ",
        f"Machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}  ",
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        f"Each run: workers x {args.rounds} trials, in-memory SQLite store; ideal throughput is {1 / SLEEP_S:g} trials/s per worker.",
        "",
        "| executor | workers | mode | trials | wall s | trials/s | parallel efficiency | driver CPU ms/trial |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for executor, workers, mode, r in rows:
        lines.append(f"| {executor} | {workers} | {mode} | {r['trials']} | {r['wall_s']:.2f} | {r['throughput']:.2f} | "
                     f"{r['efficiency']:.3f} | {r['driver_cpu_ms_per_trial']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
