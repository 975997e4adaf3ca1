"""Micro-benchmark of the results store's hot path: microseconds per ``Store.add_trial``.

Each size gets a fresh store and one run; every trial has a 6-parameter configuration, 3 samples and
2 metrics, and is written in its own transaction, as the driver does. Reported: the mean over all
trials (wall and CPU time of this process), the mean over the last 1,000 (does the cost grow with the store?), median and 99th
percentile of single calls, and the cost of the reads a report makes at the end.

    .venv/bin/python benchmarks/store_insert.py                       # SQLite file in a temp folder
    .venv/bin/python benchmarks/store_insert.py --sizes 1000 10000 --store postgresql://u@host/db
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from perftune.space import Choice, Float, Int, Permutation, Pow2, Space
from perftune.store import open_store
from perftune.trial import Status, Trial


def make_space() -> Space:
    return Space(
        {
            "block_x": Pow2(1, 1024),
            "block_y": Pow2(1, 1024),
            "unroll": Int(1, 16),
            "alpha": Float(0.0, 1.0),
            "algo": Choice(["naive", "tiled", "strassen"]),
            "order": Permutation(["i", "j", "k"]),
        }
    )


def make_trials(space: Space, n: int, seed: int) -> list[Trial]:
    rng = np.random.default_rng(seed)
    configs = space.sample(rng, n=n)
    trials = []
    for i, config in enumerate(configs):
        value = float(rng.random())
        trials.append(
            Trial(
                id=i,
                config=config,
                status=Status.OK if i % 10 else Status.FAILED,
                value=value if i % 10 else None,
                loss=value if i % 10 else None,
                metrics={"time_ms": value, "size": 1234.0} if i % 10 else {},
                samples=[value, value * 1.01, value * 0.99] if i % 10 else [],
                reason=None if i % 10 else "exit status 1",
                technique="random",
                worker="w0",
                started_at=1.0e9 + i,
                finished_at=1.0e9 + i + 0.1,
            )
        )
    return trials


def bench(url: str, n: int, space: Space) -> dict[str, float]:
    trials = make_trials(space, n, seed=n)
    store = open_store(url)
    run = store.create_run(None, space, {"benchmark": "store_insert"}, "min", None)
    per_call = []
    clock = time.perf_counter
    cpu_start = time.process_time()
    start = clock()
    for trial in trials:
        t0 = clock()
        store.add_trial(run.id, trial)
        per_call.append(clock() - t0)
    total = clock() - start
    cpu = time.process_time() - cpu_start
    t0 = clock()
    best = store.best(run.id)
    best_ms = (clock() - t0) * 1e3
    t0 = clock()
    count = store.count(run.id)
    count_ms = (clock() - t0) * 1e3
    t0 = clock()
    loaded = store.trials(run.id)
    trials_ms = (clock() - t0) * 1e3
    assert count == n and len(loaded) == n and best is not None
    store.close()
    tail = per_call[-1000:]
    return {
        "n": n,
        "mean_us": total / n * 1e6,
        "cpu_us": cpu / n * 1e6,
        "last1k_us": sum(tail) / len(tail) * 1e6,
        "p50_us": statistics.median(per_call) * 1e6,
        "p99_us": float(np.percentile(per_call, 99)) * 1e6,
        "best_ms": best_ms,
        "count_ms": count_ms,
        "trials_ms": trials_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--store", default=None, help="store URL (default: a new SQLite file per size)")
    args = parser.parse_args()
    space = make_space()
    print(f"# perftune store_insert: {' '.join(sys.argv)}")
    print(f"# date {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}, {platform.platform()}")
    print(f"# python {platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()}")
    header = (
        f"{'backend':<10} {'trials':>7} {'mean us':>9} {'cpu us':>7} {'last 1k us':>11} {'p50 us':>8} {'p99 us':>8} "
        f"{'best() ms':>10} {'count() ms':>11} {'trials() ms':>12}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            url = args.store or f"sqlite:///{Path(tmp) / f'bench-{n}.db'}"
            backend = "postgresql" if url.startswith("postgres") else "sqlite"
            r = bench(url, n, space)
            print(
                f"{backend:<10} {n:>7} {r['mean_us']:>9.1f} {r['cpu_us']:>7.1f} {r['last1k_us']:>11.1f} {r['p50_us']:>8.1f} "
                f"{r['p99_us']:>8.1f} {r['best_ms']:>10.2f} {r['count_ms']:>11.2f} {r['trials_ms']:>12.1f}"
            )


if __name__ == "__main__":
    main()
