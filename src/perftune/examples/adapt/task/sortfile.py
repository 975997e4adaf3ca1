"""Sort the integers of a file (one per line) with the algorithm named on the command line.

    python3 sortfile.py insertion|reversed|merge INPUT     # prints the count and a checksum
"""

from __future__ import annotations

import sys


def insertion(xs: list[int]) -> list[int]:
    for i in range(1, len(xs)):
        x = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > x:
            xs[j + 1] = xs[j]
            j -= 1
        xs[j + 1] = x
    return xs


def merge(xs: list[int]) -> list[int]:
    if len(xs) <= 1:
        return xs
    a, b = merge(xs[: len(xs) // 2]), merge(xs[len(xs) // 2 :])
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out + a[i:] + b[j:]


def main() -> None:
    algo, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        xs = [int(line) for line in f if line.strip()]
    if algo == "insertion":
        out = insertion(xs)
    elif algo == "reversed":  # reverse first: linear on descending input
        out = insertion(xs[::-1])
    else:
        out = merge(xs)
    print(len(out), sum(i * x for i, x in enumerate(out)) % 1_000_000_007)


if __name__ == "__main__":
    main()
