"""Hybrid sort: pure-Python insertion, merge, quick and radix sorts behind one tuned algorithm site.

Every leaf calls the site again on its sub-arrays, so the tuned program switches algorithm as the
sub-problems shrink (for example radix sort at the top, quicksort on the buckets, insertion sort on
the tiny slices). Cutoffs and algorithms are tuned bottom-up by size and saved to the tuned-choices
file (``./perftune-choices.json`` or ``$PERFTUNE_CHOICES``), which the program reads at start.

Run:
    python examples/choice/sort.py tune            # tune on sizes 64 .. 100000, write the file
    python examples/choice/sort.py run 100000      # sort with the tuned choices; prints the selector
"""

from __future__ import annotations

import sys
import time

import numpy as np

from perftune.targets.choice import AlgorithmSite

sort_site = AlgorithmSite("sort", default="merge", size_range=(2, 1 << 20))


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
    mid = n // 2
    a = sort_site(xs[:mid])
    b = sort_site(xs[mid:])
    out = []
    append = out.append
    i = j = 0
    na, nb = len(a), len(b)
    while i < na and j < nb:
        if a[i] <= b[j]:
            append(a[i])
            i += 1
        else:
            append(b[j])
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
    less = [x for x in xs if x < pivot]
    equal = [x for x in xs if x == pivot]
    greater = [x for x in xs if x > pivot]
    return sort_site(less) + equal + sort_site(greater)


@sort_site.alternative("radix")
def radix_sort(xs: list[int]) -> list[int]:
    """Most-significant-digit radix sort on integers, 8 bits per pass, relative to the minimum."""
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
        if len(bucket) > 1 and shift:
            out.extend(sort_site(bucket))
        else:
            out.extend(bucket)  # empty, single, or all equal (shift 0 means one value per bucket)
    return out


def hybrid_sort(xs: list[int]) -> list[int]:
    """Sort a list of integers with whatever the tuned choices say."""
    return sort_site(xs)


def random_input(n: int, rng: np.random.Generator) -> list[int]:
    return rng.integers(0, 2**31, size=n).tolist()


def is_sorted_copy(data: list[int], out: list[int]) -> bool:
    return out == sorted(data)


def tune(sizes: tuple[int, ...] = (64, 512, 4096, 32768, 100_000), seed: int = 0, save: bool = True):
    """Tune the sort site bottom-up by size; returns the :class:`SiteTuning`."""
    from perftune.targets.choice import LadderSettings, tune_sites

    result = tune_sites(
        hybrid_sort,
        [sort_site],
        make_input=random_input,
        sizes=list(sizes),
        check=is_sorted_copy,
        settings=LadderSettings(population=24, generations=4),
        seed=seed,
    )
    if save:
        print("wrote", result.save())
    return result


def main(argv: list[str]) -> None:
    if argv[:1] == ["tune"]:
        result = tune()
        print("tuned:", result.choices.sites["sort"], f"{result.time_s * 1e3:.1f} ms at the largest size")
        return
    n = int(argv[1]) if len(argv) > 1 else 100_000
    data = random_input(n, np.random.default_rng(1))
    t0 = time.perf_counter()
    out = hybrid_sort(data)
    elapsed = time.perf_counter() - t0
    assert out == sorted(data)
    print(f"{sort_site!r}\nsorted {n} integers in {elapsed * 1e3:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
