"""Replay of the recorded H200 matmul timings: how often does perftune.triton's search reach 0.98x of
the exhaustive best, for a given share of the configurations measured?

The device time of a session buys one or two exhaustive sweeps, so each live run of the search is one
draw. This script replays the search many times on the timings the exhaustive sweeps recorded
(``benchmarks/results/gpu-matmul-data/exhaustive*.jsonl``: every one of the 926 configurations measured on
the H200), with the autotuner's own space (:func:`perftune.triton.space_from_configs` over the example's
list), its seeding and its pipeline (a prefetch of 16 compiles, so proposals lag results by 15), and a
multiplicative measurement noise (default 1%, the spread seen between the tune and exhaustive runs).
The final pick is the measured configuration with the lowest recorded time (the autotuner re-times its
leaders side by side before it picks, which this assumes picks the truly fastest of them).

Usage::

    python benchmarks/gpu_matmul_replay.py --seeds 20 --shares 0.10,0.15 --out benchmarks/results/gpu-matmul-replay.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "results" / "gpu-matmul-data"
sys.path.insert(0, str(HERE.parent / "src"))

os.environ.setdefault("TRITON_INTERPRET", "1")  # the example module imports triton; nothing is launched


def load_shapes() -> dict[str, dict[str, float]]:
    """Shape text -> {config id: recorded ms}, from every exhaustive record."""
    out: dict[str, dict[str, float]] = {}
    for path in sorted(DATA.glob("exhaustive*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "all_times" in rec:
                out["x".join(map(str, rec["shape"]))] = {k: float(v) for k, v in rec["all_times"].items()}
    return out


def replay(times: dict[str, float], share: float, seed: int, noise: float, technique: str) -> tuple[float, int]:
    """One search; returns (exhaustive best / found best, configurations measured)."""
    import numpy as np

    import perftune.examples.gpu.triton_matmul as mm
    from perftune import Budget, Tuner
    from perftune.triton import space_from_configs
    from perftune.targets.triton import config_id, triton_config_dict

    configs = [c for c in mm.matmul_configs() if config_id(triton_config_dict(c)) in times]
    space = space_from_configs(configs)
    n = len(configs)
    budget = Budget(evals=n if n <= 16 else max(16, math.ceil(share * n)))
    rng = np.random.default_rng(10_000 + seed)
    kwargs: dict[str, Any] = {} if technique == "default" else {"technique": technique}
    tuner = Tuner(space, seed=seed, budget=budget, lag=15, **kwargs)
    pipeline: deque[Any] = deque()
    measured: list[float] = []
    exhausted = False
    while True:
        while not exhausted and len(pipeline) < 16:
            trial = tuner.ask()
            if trial is None:
                exhausted = True
                break
            pipeline.append(trial)
        if not pipeline:
            break
        trial = pipeline.popleft()
        true = times[config_id(dict(trial.config))]
        measured.append(true)
        tuner.tell(trial, samples=[true * math.exp(noise * rng.standard_normal()) for _ in range(5)])
    tuner.close()
    return min(times.values()) / min(measured), len(measured)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--shares", default="0.10,0.15", help="shares of the configurations measured")
    ap.add_argument("--noise", type=float, default=0.01, help="log-normal sigma of each sample")
    ap.add_argument("--techniques", default="default,random")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    shapes = load_shapes()
    shares = [float(s) for s in args.shares.split(",")]
    techniques = args.techniques.split(",")
    t0 = time.time()
    load0 = os.getloadavg()[0]
    rows = []
    for shape, times in shapes.items():
        ranked = sorted(times.values())
        within = sum(1 for t in ranked if ranked[0] / t >= 0.98)
        for technique in techniques:
            for share in shares:
                ratios = []
                n_measured = 0
                for seed in range(args.seeds):
                    r, n_measured = replay(times, share, seed, args.noise, technique)
                    ratios.append(r)
                hits = sum(1 for r in ratios if r >= 0.98)
                rows.append(
                    f"| {shape} | {len(times)} | {within} | {technique} | {share:.0%} ({n_measured}) | "
                    f"{statistics.median(ratios):.3f} | {min(ratios):.3f} | {hits}/{len(ratios)} |"
                )
                print(rows[-1], flush=True)
    head = [
        "# perftune.triton's search replayed on the recorded H200 matmul timings",
        "",
        f"Command: `python benchmarks/gpu_matmul_replay.py --seeds {args.seeds} --shares {args.shares} "
        f"--noise {args.noise} --techniques {args.techniques}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} "
        f"(replay: no GPU); date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; {time.time() - t0:.0f} s.  ",
        "Data: every configuration of the example's list timed on the H200 (`gpu-matmul-data/exhaustive*.jsonl`).",
        f"Each sample is the recorded time times exp({args.noise} z); five samples per measurement; prefetch 16.",
        "",
        "| shape | configs | within 2% of best | technique | share measured (configs) | "
        "median found/best | worst | seeds >= 0.98x |",
        "|---|---:|---:|---|---|---:|---:|---:|",
    ]
    text = "\n".join(head + rows) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
