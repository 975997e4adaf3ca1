"""Deciding time per proposal of every search technique, at 200 and 2000 trials.

Deciding time = time spent in the technique's ``ask`` plus ``tell`` for one trial (the objective is a
trivial synthetic kernel-like function, so measurement costs nothing). Reported: the mean over the 50
trials before trial 200 and before trial 2000, in milliseconds, as wall time and as CPU time of the
process (``time.process_time``; on a busy machine this is closer to what an idle machine would show,
and its resolution is coarse, so read it as an average).

The bandit is run twice: with the trials' measurement time ~0 (cost awareness throttles the surrogate
model) and with a simulated measurement time of 1 s per trial (``finished_at - started_at = 1``), where the
model runs freely.

On the kernel-like space, 2000 trials measure about 40% of the valid configurations, so techniques
that skip known configurations internally (the procedural ones) do more work per proposal late in the
run; the continuous space shows the cost without that saturation.

Usage:
    .venv/bin/python benchmarks/techniques_decide.py [--trials 2000] [--space kernel|continuous]
                                                     [--only NAME ...]
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np

from perftune.search import create, names
from perftune.space import Bool, Choice, Float, Int, Pow2, Space
from perftune.trial import Status, Trial


def kernel_space() -> Space:
    return Space(
        {
            "block_x": Pow2(16, 1024),
            "block_y": Pow2(1, 16),
            "tile_x": Int(1, 8),
            "tile_y": Int(1, 8),
            "use_shmem": Bool(),
            "order": Choice(["ijk", "ikj", "jik"]),
        },
        constraints=["32 <= block_x * block_y <= 1024"],
    )


def continuous_space() -> Space:
    return Space({f"x{i}": Float(-5.0, 5.0) for i in range(4)} | {"algo": Choice(["a", "b", "c"])})


def continuous_value(c) -> float:  # type: ignore[no-untyped-def]
    v = sum((c[f"x{i}"] - 0.5 * i) ** 2 for i in range(4))
    return 1.0 + v + {"a": 0.5, "b": 0.0, "c": 1.0}[c["algo"]]


SPACES = {"kernel": (kernel_space, "kernel_time"), "continuous": (continuous_space, "continuous_value")}


def kernel_time(c) -> float:  # type: ignore[no-untyped-def]
    v = abs(math.log2(c["block_x"]) - 7) + abs(math.log2(c["block_y"]) - 2) * 0.5
    v += abs(c["tile_x"] - 3) * 0.2 + abs(c["tile_y"] - 5) * 0.1
    v += 0.0 if c["use_shmem"] else 0.4
    v += {"ijk": 0.3, "ikj": 0.0, "jik": 0.6}[c["order"]]
    return 1.0 + v


def measure(
    name: str, n_trials: int, measure_s: float, seed: int = 1, space_name: str = "kernel"
) -> tuple[list[float], list[float]]:
    make_space, objective_name = SPACES[space_name]
    objective = globals()[objective_name]
    space = make_space()
    tech = create(name, space, seed=seed)
    decide = []
    cpu = []
    clock = 0.0
    for i in range(n_trials):
        c0 = time.process_time()
        t0 = time.perf_counter()
        configs = tech.ask(1)
        t1 = time.perf_counter()
        c1 = time.process_time()
        if not configs:
            break
        config = configs[0]
        value = objective(config)
        trial = Trial(
            id=i,
            config=config,
            status=Status.OK,
            value=value,
            loss=value,
            started_at=clock,
            finished_at=clock + measure_s,
        )
        clock += measure_s
        c2 = time.process_time()
        t2 = time.perf_counter()
        tech.tell([trial])
        t3 = time.perf_counter()
        c3 = time.process_time()
        decide.append((t1 - t0) + (t3 - t2))
        cpu.append((c1 - c0) + (c3 - c2))
    return decide, cpu


def window_ms(decide: list[float], upto: int, width: int = 50) -> float:
    part = decide[max(0, upto - width) : upto]
    return 1000.0 * float(np.mean(part)) if part else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--space", choices=sorted(SPACES), default="kernel")
    args = parser.parse_args()
    runs: list[tuple[str, str, float]] = []
    for name in args.only or names():
        if name == "bandit":
            runs.append(("bandit", "bandit (measurement ~0 s)", 1e-6))
            runs.append(("bandit", "bandit (measurement 1 s)", 1.0))
        else:
            runs.append((name, name, 1e-6))
    what = {
        "kernel": "kernel-like space (6 discrete params, 1 constraint; about 5,000 valid configurations)",
        "continuous": "continuous space (4 floats + 1 choice)",
    }[args.space]
    print(f"# techniques_decide: {args.trials} trials, {what}")
    print(f"# python {platform.python_version()}, {platform.machine()}")
    last = str(args.trials)
    print(
        f"{'technique':28s} {'ms @200':>10s} {'ms @' + last:>10s}"
        f" {'cpu ms @200':>12s} {'cpu ms @' + last:>12s}"
    )
    for name, label, measure_s in runs:
        decide, cpu = measure(name, args.trials, measure_s, space_name=args.space)
        print(
            f"{label:28s} {window_ms(decide, 200):10.3f} {window_ms(decide, len(decide)):10.3f}"
            f" {window_ms(cpu, 200):12.3f} {window_ms(cpu, len(cpu)):12.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
