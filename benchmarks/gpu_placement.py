"""CPU/GPU placement of a matrix product on host arrays: the tuned device site against CPU-only and
GPU-only over a mix of sizes (a per-size table).

The site (src/perftune/examples/gpu/placement.py) has two alternatives: numpy on the CPU, and torch on
the GPU with both transfers (operands in, product out). ``tune_placement`` measures both on a ladder of
sizes and places the cutoff; the three strategies are then timed interleaved on *other* sizes (a mix
between and beyond the ladder's), each a median of rounds.

Run (on a GPU machine; the device command is in benchmarks/gpu_torch_device.sh):
    python benchmarks/gpu_placement.py --out benchmarks/results
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from perftune.examples.gpu.placement import (
    close_enough,
    matmul_site,
    on_cpu,
    on_gpu,
    random_pair,
    tune,
)

MIX = (12, 24, 48, 96, 160, 200, 320, 384, 640, 768, 1280, 1536)


def card_state() -> str:
    fields = "name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        out = f"nvidia-smi unavailable ({exc})"
    return f"{fields}: {out}"


def median_time(fn, pair, n_rounds: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(n_rounds):
        t0 = time.perf_counter()
        fn(pair)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_placement: needs a CUDA GPU (the site would run numpy at every size)")
    args.out.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    before = card_state()
    t0 = time.monotonic()
    tuning = tune(n_rounds=args.rounds)
    tune_s = time.monotonic() - t0
    tuning.apply(matmul_site)
    rng = np.random.default_rng(7)
    strategies = {"cpu only (numpy)": on_cpu, "gpu only (torch, with transfers)": on_gpu,
                  "tuned site": matmul_site}
    rows, totals = [], dict.fromkeys(strategies, 0.0)
    for n in MIX:
        pair = random_pair(n, rng)
        for fn in strategies.values():
            assert close_enough(pair, fn(pair)), f"wrong product at n={n}"
        times = {name: [] for name in strategies}
        for r in range(args.rounds):  # interleaved, order rotated each round
            names = list(strategies)
            for name in names[r % 3:] + names[: r % 3]:
                times[name].append(median_time(strategies[name], pair, 1))
        med = {name: statistics.median(ts) for name, ts in times.items()}
        for name in strategies:
            totals[name] += med[name]
        best = min(med, key=med.__getitem__)
        rows.append(f"| {n} | " + " | ".join(f"{med[s] * 1e3:.3f}" for s in strategies)
                    + f" | {matmul_site.choose(n)} | {best} |")
    load = os.getloadavg()
    lines = [
        "# CPU/GPU placement: a tuned device site against single-device strategies", "",
        f"Command: `python benchmarks/gpu_placement.py {' '.join(sys.argv[1:])}`  ",
        f"Date: {started}; torch {torch.__version__}, numpy {np.__version__}, python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}  ",
        f"Card before: {before}  ", f"Card after: {card_state()}", "",
        "Site: `gpu-placement-matmul` (src/perftune/examples/gpu/placement.py), float32 n x n products on "
        "host arrays; the GPU alternative copies both operands in and the product out.", "",
        f"## Tuning ({tune_s:.1f} s): sizes {list(tuning.rows[i].size for i in range(len(tuning.rows)))}, "
        f"{args.rounds} interleaved rounds each", "", tuning.table(), "",
        f"Tuned selector: cutoffs {list(tuning.cutoffs)}, choices {list(tuning.choices)}", "",
        "## A mix of other sizes (median ms of interleaved rounds)", "",
        "| n | " + " | ".join(strategies) + " | site runs | fastest |", "|---" * (len(strategies) + 3) + "|",
        *rows,
        "| **total** | " + " | ".join(f"**{totals[s] * 1e3:.3f}**" for s in strategies) + " | | |", "",
        "Over the mix, the tuned site takes "
        f"{totals['tuned site'] / totals['cpu only (numpy)']:.2f}x the time of CPU only and "
        f"{totals['tuned site'] / totals['gpu only (torch, with transfers)']:.2f}x the time of GPU only.",
    ]
    (args.out / "gpu-placement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-len(rows) - 5:]))


if __name__ == "__main__":
    main()
