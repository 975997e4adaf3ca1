"""Matrix multiply choosing, by size, between blocked, Strassen (recursive) and library leaves.

Each leaf calls the ``matmul`` site again on its sub-blocks, so a tuned program can run one or two
Strassen steps at the top, blocked products in the middle and the BLAS library at the bottom.

Run:
    python examples/choice/matmul.py tune       # tune on 64 .. 1024, write the tuned-choices file
    python examples/choice/matmul.py run 1024   # multiply with the tuned choices
"""

from __future__ import annotations

import sys
import time

import numpy as np

from perftune.targets.choice import AlgorithmSite

matmul_site = AlgorithmSite("matmul", size=lambda a: a.shape[0], default="library", size_range=(2, 1 << 14))


@matmul_site.alternative("library")
def library(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b


@matmul_site.alternative("blocked")
def blocked(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """2 x 2 x 2 block product; each block product goes back through the site."""
    n = a.shape[0]
    if n < 2 or n % 2 or a.shape != b.shape or a.shape[0] != a.shape[1]:
        return a @ b
    h = n // 2
    c = np.empty((n, n), dtype=np.result_type(a, b))
    for i in (0, h):
        for j in (0, h):
            c[i : i + h, j : j + h] = matmul_site(a[i : i + h, :h], b[:h, j : j + h]) + matmul_site(
                a[i : i + h, h:], b[h:, j : j + h]
            )
    return c


@matmul_site.alternative("strassen")
def strassen(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One Strassen step (7 half-size products through the site instead of 8)."""
    n = a.shape[0]
    if n < 2 or n % 2 or a.shape != b.shape or a.shape[0] != a.shape[1]:
        return a @ b
    h = n // 2
    a11, a12, a21, a22 = a[:h, :h], a[:h, h:], a[h:, :h], a[h:, h:]
    b11, b12, b21, b22 = b[:h, :h], b[:h, h:], b[h:, :h], b[h:, h:]
    m1 = matmul_site(a11 + a22, b11 + b22)
    m2 = matmul_site(a21 + a22, b11)
    m3 = matmul_site(a11, b12 - b22)
    m4 = matmul_site(a22, b21 - b11)
    m5 = matmul_site(a11 + a12, b22)
    m6 = matmul_site(a21 - a11, b11 + b12)
    m7 = matmul_site(a12 - a22, b21 + b22)
    c = np.empty((n, n), dtype=m1.dtype)
    c[:h, :h] = m1 + m4 - m5 + m7
    c[:h, h:] = m3 + m5
    c[h:, :h] = m2 + m4
    c[h:, h:] = m1 - m2 + m3 + m6
    return c


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return matmul_site(a, b)


def random_pair(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((n, n)), rng.standard_normal((n, n))


def close_enough(pair: tuple[np.ndarray, np.ndarray], out: np.ndarray) -> bool:
    a, b = pair
    return bool(np.allclose(out, a @ b, rtol=1e-8, atol=1e-8 * a.shape[0]))


def tune(sizes: tuple[int, ...] = (64, 256, 1024), seed: int = 0, save: bool = True):
    from perftune.targets.choice import LadderSettings, tune_sites

    result = tune_sites(
        lambda pair: matmul(*pair),
        [matmul_site],
        make_input=random_pair,
        sizes=list(sizes),
        check=close_enough,
        settings=LadderSettings(population=12, generations=2),
        seed=seed,
    )
    if save:
        print("wrote", result.save())
    return result


def main(argv: list[str]) -> None:
    if argv[:1] == ["tune"]:
        result = tune()
        print("tuned:", result.choices.sites["matmul"], f"{result.time_s * 1e3:.1f} ms at the largest size")
        return
    n = int(argv[1]) if len(argv) > 1 else 1024
    a, b = random_pair(n, np.random.default_rng(1))
    t0 = time.perf_counter()
    c = matmul(a, b)
    elapsed = time.perf_counter() - t0
    assert close_enough((a, b), c)
    print(f"{matmul_site!r}\n{n} x {n} in {elapsed * 1e3:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
