"""An online sort service whose workload shifts halfway, tuned while it serves by perftune.online.

Every request is a list of integers to sort. The service's sort is a choice site (insertion, merge,
quick and radix sorts; each recursive call dispatches again by size), so a configuration is a
selector such as "insertion below 24, radix above". The first half of the requests are nearly sorted
lists of skewed (log-normal) values, where insertion sort shines and radix sort's buckets are
lopsided; then the workload shifts to random values with many duplicates, where insertion sort is
quadratic and radix sort is fast.

The racer starts from the default configuration (merge sort everywhere), races the search's candidates
against it on every request, promotes one after a sequential sign test on its wins, notices the shift
from the safe configuration's latency, and re-opens exploration.

Run:
    python examples/online/service.py              # 2000 requests, prints what happened
    python examples/online/service.py 600 --store sqlite:///online.db   # then: perftune show online-sort

With a store, each exploration epoch is a run: ``online-sort`` until the first detected shift, then
``online-sort-shift1``, ... (the example prints which requests each covers). ``perftune show`` lists a
run's candidates by their median time on the requests each was raced on, within that epoch; the
configuration the racer serves is the last one promoted (``promoted`` = 1 in the run where it won).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from perftune.targets.choice import AlgorithmSite

sort_site = AlgorithmSite("online-sort", default="merge", size_range=(2, 1 << 16))


@sort_site.alternative("insertion")
def insertion_sort(xs: list[int]) -> list[int]:
    out = list(xs)
    for i in range(1, len(out)):
        x = out[i]
        j = i - 1
        while j >= 0 and out[j] > x:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = x
    return out


@sort_site.alternative("merge")
def merge_sort(xs: list[int]) -> list[int]:
    n = len(xs)
    if n <= 1:
        return list(xs)
    a, b = sort_site(xs[: n // 2]), sort_site(xs[n // 2:])
    out: list[int] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    out.extend(a[i:])
    out.extend(b[j:])
    return out


@sort_site.alternative("quick")
def quick_sort(xs: list[int]) -> list[int]:
    n = len(xs)
    if n <= 1:
        return list(xs)
    a, b, c = xs[0], xs[n // 2], xs[-1]
    pivot = max(min(a, b), min(max(a, b), c))  # median of three
    return (sort_site([x for x in xs if x < pivot]) + [x for x in xs if x == pivot]
            + sort_site([x for x in xs if x > pivot]))


@sort_site.alternative("radix")
def radix_sort(xs: list[int]) -> list[int]:
    """Most-significant-digit radix sort, 8 bits per pass, relative to the minimum."""
    if len(xs) <= 1:
        return list(xs)
    lo, hi = min(xs), max(xs)
    if lo == hi:
        return list(xs)
    shift = max(0, (hi - lo).bit_length() - 8)
    buckets: list[list[int]] = [[] for _ in range(((hi - lo) >> shift) + 1)]
    for x in xs:
        buckets[(x - lo) >> shift].append(x)
    out: list[int] = []
    for bucket in buckets:
        out.extend(sort_site(bucket) if len(bucket) > 1 and shift else bucket)
    return out


def serve(config: Any, request: list[int]) -> list[int]:
    """The service's handler: sort with the selector of ``config``."""
    with sort_site.use(config[sort_site.name]):
        return sort_site(request)


def is_sorted_permutation(request: list[int], answer: list[int]) -> bool:
    """The check of an answer: sorted, and the same multiset (cheap: one pass and a sum)."""
    return (len(answer) == len(request) and sum(answer) == sum(request)
            and all(a <= b for a, b in zip(answer, answer[1:], strict=False)))


def nearly_sorted(n: int, rng: np.random.Generator) -> list[int]:
    """Skewed values, sorted, then a few local swaps."""
    xs = np.sort((rng.lognormal(0.0, 2.0, n) * 1e4).astype(np.int64))
    for i in rng.integers(0, n - 8, max(1, n // 50)):
        j = i + int(rng.integers(1, 8))
        xs[i], xs[j] = xs[j], xs[i]
    return xs.tolist()


def many_duplicates(n: int, rng: np.random.Generator) -> list[int]:
    """Random values, few of them distinct."""
    return rng.integers(0, 64, n).tolist()


def request(i: int, n_requests: int, size: int = 2000, seed: int = 0) -> list[int]:
    """Request ``i`` of the workload: nearly sorted in the first half, many duplicates in the second.

    Each request is made from its own seed, so a request can be made again (to replay it) without
    keeping the whole workload in memory (a large caller also makes every fork slower).
    """
    rng = np.random.default_rng([seed, i])
    return nearly_sorted(size, rng) if i < n_requests // 2 else many_duplicates(size, rng)


def workload(n_requests: int, size: int = 2000, seed: int = 0) -> list[list[int]]:
    """All the requests of the workload, in order."""
    return [request(i, n_requests, size, seed) for i in range(n_requests)]


def main(argv: list[str] | None = None) -> None:
    from perftune.online import Racer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_requests", nargs="?", type=int, default=2000)
    parser.add_argument("--size", type=int, default=2000, help="integers per request")
    parser.add_argument("--store", default=None, help="a store URL: each exploration epoch is a run there")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    with Racer(sort_site, check=is_sorted_permutation, store=args.store, name="online-sort", seed=0) as racer:
        for i in range(args.n_requests):
            racer(request(i, args.n_requests, args.size))
    elapsed = time.perf_counter() - t0
    half = args.n_requests // 2
    records = list(racer.records)
    for label, part in (("first half", records[:half]), ("second half", records[half:])):
        print(f"{label}: median latency {statistics.median(r.latency_s for r in part) * 1e3:.2f} ms")
    for p in racer.promotions:
        print(f"request {p.seq}: promoted after {p.wins} wins in {p.races} races: {p.config[sort_site.name]}")
    print(f"shifts detected at requests {racer.shifts} (the workload shifts at request {half}); "
          f"{racer.n_killed} losers killed; {args.n_requests} requests in {elapsed:.1f} s")
    print(f"safe configuration now (what the racer serves): {racer.safe[sort_site.name]}")
    if racer.run_names:
        # What the store holds: one run per exploration epoch. A trial's value is its median time on the
        # requests it was raced on, in that epoch only: compare trials within a run (with its baseline),
        # not across runs. A run's "best" is the lowest such median; what is served is the last promoted
        # configuration (metric promoted=1), which had to beat the safe one on the same requests.
        starts = [0, *racer.shifts, args.n_requests]
        for epoch, run in enumerate(racer.run_names):
            print(f"stored run {run}: requests {starts[epoch]}-{starts[epoch + 1] - 1} "
                  f"(perftune show {run} --store {args.store})")


if __name__ == "__main__":
    main()
