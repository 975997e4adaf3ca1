"""Cost of the search-space operations that run on every trial (perftune.space).

Prints one table: for several spaces, the fraction of the Cartesian product that is valid and the
cost of is_valid, sample (single and 1000 at once), mutate, neighbors, crossover, encode, decode
and repair, in microseconds per call (median of 5 rounds), plus the one-time set-up cost (domain
pruning and, for small finite spaces, enumeration) paid by the first sample() call. "construct"
is the constructive sampler alone (tables of constraints, depth-first with backtracking), used
when a space is too large to enumerate.

Times are CPU time of this process (time.process_time), which other processes on a shared
machine disturb much less than wall time.

Run:
    .venv/bin/python benchmarks/space.py            # full table
    .venv/bin/python benchmarks/space.py --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from perftune.space import Bool, Choice, Float, Int, LogFloat, Ordinal, Permutation, Pow2, Selector, Space

ROOT = Path(__file__).resolve().parent.parent


def t1_space(name: str) -> Space:
    """A benchmark-hub T1 space (the repository's copy under data/benchmark_hub)."""
    doc = json.loads((ROOT / "data" / "benchmark_hub" / f"{name}.T1.json").read_text())
    cs = doc["ConfigurationSpace"]
    params: dict[str, Any] = {}
    for p in cs["TuningParameters"]:
        values = json.loads(p["Values"]) if isinstance(p["Values"], str) else p["Values"]
        default = p.get("Default") if p.get("Default") in values else None
        params[p["Name"]] = Ordinal(sorted(values), default=default)
    return Space(params, [c["Expression"] for c in cs["Conditions"]])


def wide_convolution_space() -> Space:
    """The convolution T1 space with wider ranges (229,376 combinations, about 8% valid)."""
    return Space(
        {
            "block_size_x": Ordinal([16 * i for i in range(1, 65)], default=16),
            "block_size_y": Pow2(1, 64, default=16),
            "tile_size_x": Int(1, 8),
            "tile_size_y": Int(1, 8),
            "read_only": Choice([0, 1]),
            "use_padding": Choice([0, 1], default=1),
            "use_shmem": Choice([0, 1], default=1),
            "use_cmem": Choice([1]),
            "filter_height": Choice([15]),
            "filter_width": Choice([15]),
        },
        constraints=[
            "use_padding==0 or block_size_x % 32 != 0",
            "block_size_x*block_size_y<=1024",
            "use_padding==0 or use_shmem != 0",
            "use_shmem == 0 or (((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y+"
            "(filter_height-1)))) < 12*1024",
            "block_size_x * block_size_y >= 128",
            "tile_size_x * tile_size_y >= 4",
        ],
    )


def gemm_space() -> Space:
    """The CLBlast GEMM kernel space (14 parameters, 663,552 combinations, a few % valid)."""
    dims = [8, 16, 32]
    return Space(
        {
            "MWG": Pow2(16, 128),
            "NWG": Pow2(16, 128),
            "KWG": Pow2(16, 32),
            "MDIMC": Ordinal(dims),
            "NDIMC": Ordinal(dims),
            "MDIMA": Ordinal(dims),
            "NDIMB": Ordinal(dims),
            "KWI": Ordinal([2, 8]),
            "VWM": Pow2(1, 8),
            "VWN": Pow2(1, 8),
            "STRM": Bool(),
            "STRN": Bool(),
            "SA": Bool(),
            "SB": Bool(),
        },
        constraints=[
            "KWG % KWI == 0",
            "MWG % (MDIMC * VWM) == 0",
            "NWG % (NDIMC * VWN) == 0",
            "MWG % (MDIMA * VWM) == 0",
            "NWG % (NDIMB * VWN) == 0",
            "KWG % ((MDIMC * NDIMC) // MDIMA) == 0",
            "KWG % ((MDIMC * NDIMC) // NDIMB) == 0",
        ],
    )


def tight_pow2_space() -> Space:
    """Six Pow2(1, 2**31) knobs, about 1e9 combinations, a tiny valid fraction."""
    return Space(
        {f"p{i}": Pow2(1, 1 << 31) for i in range(6)},
        constraints=["p0 * p1 * p2 <= 1024", "p3 * p4 == p5", "p0 < p1 < p2", "p5 >= 1024"],
    )


def mixed_space() -> Space:
    """Mixed types with when= conditions and constraints over floats."""
    return Space(
        {
            "algo": Choice(["naive", "tiled", "blocked"]),
            "tile": Int(2, 64, when="algo != 'naive'"),
            "inner": Pow2(1, 16, when="algo == 'blocked'"),
            "unroll": Bool(),
            "factor": Int(2, 16, when="unroll"),
            "alpha": Float(0.0, 1.0),
            "beta": LogFloat(1e-4, 1.0),
            "order": Permutation(["i", "j", "k"]),
            "sel": Selector(["insertion", "merge", "radix"], max_levels=3, size_range=(1, 1 << 20)),
        },
        constraints=["algo != 'blocked' or inner <= tile", "alpha + beta <= 0.5"],
    )


def valid_fraction(space: Space, rng: np.random.Generator, n: int = 20_000) -> float:
    """Fraction of the space's draws ignoring constraints (each parameter sampled alone) that are valid."""
    if space._enumerated is not None and space._product:
        return len(space._enumerated) / space._product
    if space.cardinality() is not None and space._product is not None and space._product <= 2_000_000:
        count = space.cardinality()
        if count is not None and count < space._product:
            return count / space._product
    ok = 0
    for _ in range(n):
        ok += space.is_valid(space._ordered(space._sample_direct(rng)))
    return ok / n


def per_call_us(fn: Callable[[], Any], n: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(n):
            fn()
        times.append((time.process_time() - t) / n * 1e6)
    return statistics.median(times)


def measure(name: str, make: Callable[[], Space], quick: bool) -> dict[str, Any]:
    rounds = 3 if quick else 5
    n = 200 if quick else 1000
    rng = np.random.default_rng(0)
    space = make()
    t = time.process_time()
    space.sample(rng)
    setup_ms = (time.process_time() - t) * 1e3
    t = time.process_time()
    batch = space.sample(rng, 1000)
    batch_ms = (time.process_time() - t) * 1e3
    assert all(space.is_valid(c) for c in batch)
    configs = batch[:n]
    it = iter(range(10**9))

    def pick() -> Any:
        return configs[next(it) % len(configs)]

    vecs = [rng.random(space.n_dims) for _ in range(64)]
    row = {
        "space": name,
        "params": len(space.names),
        "product": space._product if space._product is not None else math.inf,
        "valid %": 100 * valid_fraction(space, rng, 5000 if quick else 20_000),
        "setup ms": setup_ms,
        "1000 samples ms": batch_ms,
        "is_valid us": per_call_us(lambda: space.is_valid(pick()), n, rounds),
        "sample us": per_call_us(lambda: space.sample(rng), n // 4, rounds),
        # Constructive sampling alone (what spaces too large to enumerate use).
        "construct us": per_call_us(lambda: space._sample_one(rng), n // 4, rounds),
        "mutate us": per_call_us(lambda: space.mutate(pick(), rng), n // 4, rounds),
        "crossover us": per_call_us(lambda: space.crossover(pick(), pick(), rng), n // 4, rounds),
        "neighbors us": per_call_us(lambda: space.neighbors(pick()), n // 10, rounds),
        "encode us": per_call_us(lambda: space.encode(pick()), n, rounds),
        "decode us": per_call_us(lambda: space.decode(vecs[next(it) % 64]), n, rounds),
        "repair us": per_call_us(
            lambda: space.repair(space.decode(vecs[next(it) % 64]), rng), n // 10, rounds
        ),
    }
    return row


SPACES: dict[str, Callable[[], Space]] = {
    "convolution (T1)": lambda: t1_space("convolution_milo"),
    "dedispersion (T1)": lambda: t1_space("dedispersion_milo"),
    "convolution wide": wide_convolution_space,
    "clblast gemm": gemm_space,
    "tight pow2 x6": tight_pow2_space,
    "mixed + when": mixed_space,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    rows = [measure(name, make, args.quick) for name, make in SPACES.items()]
    cols = list(rows[0])
    print(f"# perftune.space operation costs  ({platform.python_version()}, numpy {np.__version__})")
    widths = [max(len(c), 10) for c in cols]
    header = [c.rjust(w) if i else c.ljust(20) for i, (c, w) in enumerate(zip(cols, widths, strict=True))]
    print(" | ".join(header))
    for r in rows:
        cells = []
        for i, (c, w) in enumerate(zip(cols, widths, strict=True)):
            v = r[c]
            if i == 0:
                cells.append(str(v).ljust(20))
            elif c == "valid %":
                cells.append(f"{v:.3g}".rjust(w))
            elif isinstance(v, float) and v != math.inf:
                cells.append(f"{v:.1f}".rjust(w))
            else:
                cells.append(str(v).rjust(w))
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
