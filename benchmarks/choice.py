"""Benchmarks of algorithmic choice (perftune.targets.choice).

Parts (run one or all):

* ``sort``: tune the hybrid sort of examples/choice/sort.py bottom-up by size, then compare it with
  every single leaf algorithm at n = 100000 on random integers (median of 9 runs, fresh data each run,
  the same data for every contender). Claim: the tuned hybrid beats the best single leaf by >= 10%.
* ``poisson``: tune the multigrid Poisson solver of examples/choice/poisson.py level by level for the
  accuracy bins 1, 3, 5, 7 digits; on 20 held-back right-hand sides, check every bin is met on every
  one, and compare the time with the best fixed V-cycle (V(1,1), V(2,1), V(2,2), V(1,0), V(0,1) with
  Gauss-Seidel smoothing, the fewest cycles that meet the bin on all 20). Claim: tuned <= fixed.
* ``increa``: on a noisy synthetic objective with a size-dependent optimum, the INCREA ladder against
  a flat perftune.tune search at the full size, over 20 seeds. Claim: within 2% of the flat result
  with <= 25% of its total measurement time (small sizes included). Measurement time is simulated
  (the noise-free run time of each measured configuration), so it does not depend on machine load.
* ``dispatch``: the cost of one AlgorithmSite dispatch (nanoseconds over a direct call).

Run:
    .venv/bin/python benchmarks/choice.py all          # everything (several minutes)
    .venv/bin/python benchmarks/choice.py sort --quick # a faster, smaller version
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "choice"))


def header() -> None:
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in subprocess.run(
                ["lscpu"], capture_output=True, text=True, check=False
            ).stdout.splitlines()
            if line.startswith("Model name")
        )
    except StopIteration:
        model = platform.processor() or "unknown"
    load = os.getloadavg()
    print(f"# command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# date: {_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"# machine: {os.cpu_count()} CPUs, {model}; "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(
        f"# load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        "(the machine is shared with other jobs: wall-clock timings may be disturbed)"
    )
    print()


# ---- sort -------------------------------------------------------------------------------------------


def bench_sort(quick: bool) -> bool:
    import sort

    from perftune.targets.choice import LadderSettings, tune_sites

    n = 20_000 if quick else 100_000
    sizes = [64, 512, 4096, n] if quick else [64, 512, 4096, 32768, n]
    t0 = time.perf_counter()
    tuned = tune_sites(
        sort.hybrid_sort,
        [sort.sort_site],
        make_input=sort.random_input,
        sizes=sizes,
        check=sort.is_sorted_copy,
        settings=LadderSettings(population=24, generations=4),
        seed=0,
    )
    tuning_s = time.perf_counter() - t0
    cut, names = tuned.choices.sites["sort"]
    print(f"## sort: tuned in {tuning_s:.1f} s ({tuned.ladder.n_measurements} measurements, sizes {sizes})")
    print(f"tuned selector: {names[0]}" + "".join(f" <{c}> {a}" for c, a in zip(cut, names[1:], strict=True)))

    contenders = {
        "tuned hybrid": (cut, names),
        **{f"{a} only": ((), (a,)) for a in ("merge", "quick", "radix")},
    }
    rng = np.random.default_rng(12345)
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(9):
        data = sort.random_input(n, rng)
        expected = sorted(data)
        for label, (c, a) in contenders.items():
            sort.sort_site.set(c, a)
            t = time.perf_counter()
            out = sort.hybrid_sort(data)
            times[label].append(time.perf_counter() - t)
            assert out == expected, label
    # Insertion sort alone is quadratic: measure at 2000 and extrapolate (it counts as beaten).
    small = sort.random_input(2000, rng)
    sort.sort_site.set((), ("insertion",))
    t = time.perf_counter()
    sort.hybrid_sort(small)
    ins_est = (time.perf_counter() - t) * (n / 2000) ** 2
    sort.sort_site.reset()

    med = {k: statistics.median(v) for k, v in times.items()}
    best_leaf = min((k for k in med if k != "tuned hybrid"), key=med.__getitem__)
    print(f"\n| contender (n = {n}, random ints) | median of 9 (ms) | min (ms) | max (ms) |")
    print("|---|---:|---:|---:|")
    for k in med:
        print(f"| {k} | {med[k] * 1e3:.1f} | {min(times[k]) * 1e3:.1f} | {max(times[k]) * 1e3:.1f} |")
    print(
        f"| insertion only | ~{ins_est * 1e3:.0f} "
        "(extrapolated from n=2000; too slow, counts as beaten) | | |"
    )
    gain = 1 - med["tuned hybrid"] / med[best_leaf]
    ok = gain >= 0.10
    print(
        f"\ntuned hybrid vs best single leaf ({best_leaf}): {gain * 100:.1f}% faster -> "
        f"{'PASS' if ok else 'FAIL'} (claim: >= 10%)\n"
    )
    return ok


# ---- poisson ----------------------------------------------------------------------------------------


def _time_interleaved(fns, problems, repeats: int) -> list[list[float]]:
    """Interleaved timing: each repeat runs every solver once, in turn, so that load changes on a
    shared machine hit all solvers alike. Returns, per solver, the mean time per right-hand side of
    every repeat."""
    per: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            for p in problems:
                fn(p)
            per[i].append((time.perf_counter() - t) / len(problems))
    return per


def bench_poisson(quick: bool) -> bool:
    import poisson

    top = 6 if quick else 8
    targets = poisson.TARGETS
    t0 = time.perf_counter()
    table = poisson.tune(
        top_level=top,
        budget_per_level=30 if quick else 100,
        n_train=4,
        n_held_out=12,
        seed=0,
        targets=targets,
        margin=0.25,
    )
    tuning_s = time.perf_counter() - t0
    print(
        f"## poisson: levels 2..{top} x bins {list(targets)} (digits of error reduction) "
        f"tuned in {tuning_s:.1f} s"
    )
    print("\ntuned table, time per solve on the training inputs:\n")
    print("```\n" + table.format() + "\n```")
    rng = np.random.default_rng(777)
    held = [poisson.random_problem(top, rng) for _ in range(20)]
    repeats = 5 if quick else 9

    def vcycles(pre: int, post: int, k: int):
        def run(p):
            u = np.zeros_like(p.f)
            for _ in range(k):
                poisson.vcycle(u, p.f, top, pre, post, 1.0)
            return u

        return run

    print(
        f"\n| bin (digits) | tuned config (level {top}) | worst digits on 20 held-back "
        "| tuned ms min / median "
        "| best fixed V-cycle | its worst digits | fixed ms min / median | tuned/fixed (min) |"
    )
    print("|---:|---|---:|---:|---|---:|---:|---:|")
    all_ok = True
    for j, target in enumerate(targets):
        cfg = table.cell(top, j)
        if cfg is None:
            print(f"| {target:g} | unreachable | | | | | | |")
            all_ok = False
            continue
        worst = min(poisson.digits(poisson.solve(top, cfg, p.f, table), p) for p in held)
        met = worst >= target
        # Fixed V-cycles: per smoother, the fewest cycles that meet the bin on all 20 right-hand sides
        # (chosen on the test set itself, so the baseline gets no safety margin).
        fixed = []
        for pre, post in ((1, 1), (2, 1), (2, 2), (1, 0), (0, 1)):
            for k in range(1, 30):
                w = min(poisson.digits(vcycles(pre, post, k)(p), p) for p in held)
                if w >= target:
                    fixed.append((pre, post, k, w))
                    break
        fns = [lambda p, cfg=cfg: poisson.solve(top, cfg, p.f, table)]
        fns += [vcycles(pre, post, k) for pre, post, k, _ in fixed]
        per = _time_interleaved(fns, held, repeats)
        mins = [min(x) for x in per]
        meds = [statistics.median(x) for x in per]
        b = 1 + min(range(len(fixed)), key=lambda i: mins[1 + i])
        pre, post, k, wfix = fixed[b - 1]
        same = cfg == {"algo": "vcycle", "cycles": k, "pre": pre, "post": post, "weight": 1.0}
        ratio = mins[0] / mins[b]
        # "No slower": the same V-cycle is no slower by definition; otherwise allow 3% timing noise.
        all_ok &= met and (same or ratio <= 1.03)
        print(
            f"| {target:g} | {cfg} | {worst:.2f} {'ok' if met else 'MISSED'} | "
            f"{mins[0] * 1e3:.2f} / {meds[0] * 1e3:.2f} | {k} x V({pre},{post}) | {wfix:.2f} | "
            f"{mins[b] * 1e3:.2f} / {meds[b] * 1e3:.2f} | {ratio:.2f}{' (same)' if same else ''} |"
        )
    print(
        f"\n(tuned and all fixed V-cycles timed interleaved, {repeats} repeats of the 20 right-hand sides; "
        "'min' is the least disturbed repeat on this shared machine; 'same' = the tuned cell is that V-cycle)"
    )
    print(
        "every bin met on all 20 held-back right-hand sides and tuned no slower "
        "(3% noise allowance) than the "
        "best fixed V-cycle: "
        f"{'PASS' if all_ok else 'FAIL'}\n"
    )
    return all_ok


# ---- increa -----------------------------------------------------------------------------------------


class NoisyKernel:
    """A simulated tunable kernel: time(config, n) with a size-dependent optimum and 5% noise.

    The block size that suits a large input differs from the one that suits a small input (cache
    effects), and a per-call setup cost depends on unroll/algorithm, so small sizes are informative
    but not exact.
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def true_time(c, n: float) -> float:
        opt_block = 5.0 + 0.6 * math.log10(n / 1000.0)
        per_item = (
            1.0
            + 0.8 * (c["x"] - 0.62) ** 2
            + 0.05 * (math.log2(c["block"]) - opt_block) ** 2
            + 0.02 * abs(c["unroll"] - 4)
            + {"a": 0.0, "b": 0.06, "c": 0.12}[c["algo"]]
            + (0.04 if c["prefetch"] else 0.0) * (1 if n > 3e4 else -1)
        )
        setup = 400.0 * (1 + 0.25 * c["unroll"]) * (0.6 if c["algo"] == "c" else 1.0)
        return (n * per_item + setup) * 1e-6  # simulated seconds

    def __call__(self, c, n: float) -> float:
        return self.true_time(c, n) * math.exp(0.05 * self.rng.standard_normal())


def increa_space():
    from perftune.space import Bool, Choice, Float, Int, Pow2, Space

    return Space(
        {
            "x": Float(0.0, 1.0),
            "block": Pow2(1, 1024),
            "unroll": Int(1, 8),
            "algo": Choice(["a", "b", "c"]),
            "prefetch": Bool(),
        }
    )


def bench_increa(quick: bool) -> bool:
    import perftune
    from perftune.targets.choice import LadderSettings, increa

    full = 1_000_000.0
    sizes = [full / 64, full / 16, full / 4, full]
    n_seeds = 6 if quick else 20
    flat_budget = 80
    rows = []
    variants = {"increa": None, "increa+bandit": "bandit"}
    for seed in range(n_seeds):
        space = increa_space()
        kernel = NoisyKernel(seed)
        flat_cost = 0.0

        def flat_obj(c, kernel=kernel):
            nonlocal flat_cost
            flat_cost += kernel.true_time(c, full)
            return kernel(c, full)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = perftune.tune(flat_obj, space, budget=flat_budget, seed=seed)
        flat_true = NoisyKernel.true_time(res.best.config, full)
        row = {"seed": seed, "flat": flat_true, "flat_cost": flat_cost}
        for label, technique in variants.items():
            kern = NoisyKernel(1000 + seed)
            lad = increa(
                kern,
                increa_space(),
                sizes,
                seed=seed,
                technique=technique,
                settings=LadderSettings(population=32, generations=6),
                cost=lambda c, n, v: NoisyKernel.true_time(c, n),
            )
            row[label] = NoisyKernel.true_time(lad.best, full)
            row[label + "_cost"] = lad.cost_s
        rows.append(row)

    print(
        f"## increa: noisy simulated kernel (5% noise), sizes {[int(s) for s in sizes]}, {n_seeds} seeds; "
        f"flat = perftune.tune (bandit) with {flat_budget} measurements at the full size"
    )
    print(
        "\n| seed | flat true time (s) | flat cost (s) | "
        + " | ".join(f"{v} time/flat | {v} cost/flat" for v in variants)
        + " |"
    )
    print("|---:|---:|---:|" + "---:|---:|" * len(variants))
    for r in rows:
        print(
            f"| {r['seed']} | {r['flat']:.4f} | {r['flat_cost']:.2f} | "
            + " | ".join(f"{r[v] / r['flat']:.4f} | {r[v + '_cost'] / r['flat_cost']:.3f}" for v in variants)
            + " |"
        )
    ok_all = True
    print()
    for v in variants:
        ratios = [r[v] / r["flat"] for r in rows]
        costs = [r[v + "_cost"] / r["flat_cost"] for r in rows]
        within = sum(q <= 1.02 for q in ratios)
        ok = statistics.median(ratios) <= 1.02 and max(costs) <= 0.25
        ok_all &= ok if v == "increa" else True
        print(
            f"{v}: result/flat median {statistics.median(ratios):.4f}, mean {statistics.mean(ratios):.4f}, "
            f"worst {max(ratios):.4f}; within 2% on {within}/{len(rows)} seeds; "
            f"cost/flat median {statistics.median(costs):.3f}, max {max(costs):.3f} "
            f"-> {'PASS' if ok else 'FAIL'} "
            "(claim: median within 2%, every seed <= 25% of the cost)"
        )
    print()
    return ok_all


# ---- dispatch ---------------------------------------------------------------------------------------


def bench_dispatch(quick: bool) -> bool:
    from perftune.targets.choice import AlgorithmSite

    def leaf(xs):
        return xs

    site = AlgorithmSite("bench-dispatch", {"a": leaf, "b": leaf, "c": leaf, "d": leaf})
    xs = list(range(100))
    n = 200_000 if quick else 2_000_000
    rows = []
    for label, cut, names in (
        ("4 levels", [16, 256, 4096], ["a", "b", "c", "d"]),
        ("2 levels", [64], ["a", "b"]),
        ("1 level", [], ["a"]),
    ):
        site.set(cut, names)
        direct = min(timeit.repeat(lambda: leaf(xs), number=n, repeat=5)) / n
        via = min(timeit.repeat(lambda: site(xs), number=n, repeat=5)) / n
        rows.append((label, direct, via))
    print("## dispatch: cost of one AlgorithmSite call (size = len, min of 5 repeats)")
    print("\n| selector | direct call (ns) | through the site (ns) | overhead (ns) |")
    print("|---|---:|---:|---:|")
    for label, d, v in rows:
        print(f"| {label} | {d * 1e9:.0f} | {v * 1e9:.0f} | {(v - d) * 1e9:.0f} |")
    worst = max(v - d for _, d, v in rows)
    print(
        f"\nworst overhead {worst * 1e9:.0f} ns -> {'PASS' if worst < 1e-6 else 'FAIL'} "
        "(claim: well under 1 us)\n"
    )
    return worst < 1e-6


PARTS = {"dispatch": bench_dispatch, "sort": bench_sort, "poisson": bench_poisson, "increa": bench_increa}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=[*PARTS, "all"])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer seeds")
    args = ap.parse_args()
    header()
    from perftune.targets.choice import ChoicesFile, use_choices

    use_choices(ChoicesFile())  # benchmarks never read or write the user's tuned-choices file
    parts = list(PARTS) if args.part == "all" else [args.part]
    results = {p: PARTS[p](args.quick) for p in parts}
    print("## summary\n")
    for p, ok in results.items():
        print(f"- {p}: {'PASS' if ok else 'FAIL'}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
