"""Input-adaptive linear solver with variable accuracy: which method, and how many iterations, per system.

Every input is a sparse symmetric positive definite system ``A x = b`` together with the accuracy its
caller needs (``digits``: the residual ``|Ax - b| / |b|`` must be at most ``10**-digits``). The
configuration is a method and an iteration count:

* ``dense``: LU of the dense matrix (numpy); exact, cubic in ``n``;
* ``sparse``: sparse LU (``scipy.sparse.linalg.spsolve``); exact, cost set by the fill-in;
* ``cg``: ``iters`` conjugate-gradient steps; accuracy grows with ``iters`` and the conditioning;
* ``jacobi``: ``iters`` Jacobi sweeps; converges only on diagonally dominant systems.

As with accuracy bins (``perftune.choice.tune_accuracy``), a configuration that misses an input's
accuracy is not an answer for it: ``tune_inputs(..., accuracy=digits, required=required_digits)``
only counts landmarks that reach each training input's target, and the learner never trades a
missed target for time. Features: ``n`` and ``digits`` (cheap), ``density@8/64`` and
``dominance@8/64`` (sampled rows).

Run:
    python examples/adapt/adaptive_solve.py             # learn on the training families, report on new ones
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perftune.adapt import AdaptiveObjective, density
from perftune.space import Choice, LogInt, Space


@dataclass
class Problem:
    """One system to solve and the accuracy (decimal digits of residual) it needs."""

    A: Any  # scipy.sparse CSR matrix
    b: np.ndarray
    digits: float

    @property
    def n(self) -> int:
        return int(self.A.shape[0])

    def __len__(self) -> int:
        return self.n


def _cg(A: Any, b: np.ndarray, iters: int) -> np.ndarray:
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rr = float(r @ r)
    for _ in range(iters):
        if rr == 0.0:
            break
        Ap = A @ p
        pAp = float(p @ Ap)
        if pAp <= 0.0:  # breakdown (converged to rounding, or not positive definite): stop here
            break
        alpha = rr / pAp
        x += alpha * p
        r -= alpha * Ap
        rr_new = float(r @ r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def _jacobi(A: Any, b: np.ndarray, iters: int) -> np.ndarray:
    d = A.diagonal()
    x = b / d
    for _ in range(iters):
        x = x + (b - A @ x) / d
    return x


def run(config: Any, problem: Problem) -> np.ndarray:
    """Solve ``problem`` with ``config`` (``method``, ``iters``)."""
    method = config["method"]
    with np.errstate(all="ignore"):  # a diverging Jacobi overflows: its accuracy says so, not a warning
        return _run(method, config, problem)


#: Largest system the dense LU accepts: its n x n matrix of doubles (288 MB at 6000) must fit in memory.
DENSE_MAX_N = 6000


def _run(method: str, config: Any, problem: Problem) -> np.ndarray:
    if method == "dense":
        if problem.n > DENSE_MAX_N:
            raise ValueError(f"dense LU of a {problem.n}x{problem.n} system would need "
                             f"{problem.n**2 * 8 / 1e9:.0f} GB; at most {DENSE_MAX_N} unknowns")
        return np.linalg.solve(problem.A.toarray(), problem.b)
    if method == "sparse":
        from scipy.sparse.linalg import spsolve

        return np.asarray(spsolve(problem.A.tocsc(), problem.b))
    if method == "cg":
        return _cg(problem.A, problem.b, int(config["iters"]))
    return _jacobi(problem.A, problem.b, int(config["iters"]))


# The direct solvers ignore the iteration count: it is active only for the iterative ones, so that two
# configurations running the same sparse LU are one configuration (one landmark, not noisy copies).
SPACE = Space({"method": Choice(["sparse", "dense", "cg", "jacobi"]),
               "iters": LogInt(2, 2048, default=64, when="method in ['cg', 'jacobi']")})
adaptive_solve = AdaptiveObjective("adapt-solve", run, SPACE, default={"method": "sparse"},
                                   size=lambda p: p.n)


def digits(x: np.ndarray, problem: Problem) -> float:
    """Decimal digits of the relative residual (16 for an exact answer); NaN/inf count as 0."""
    if not np.all(np.isfinite(x)):
        return 0.0
    with np.errstate(all="ignore"):  # a diverged iterate: its residual overflows, and scores 0 below
        rel = float(np.linalg.norm(problem.A @ x - problem.b) / np.linalg.norm(problem.b))
    if not math.isfinite(rel):
        return 0.0
    return 16.0 if rel <= 1e-16 else min(16.0, -math.log10(rel))


def required_digits(problem: Problem) -> float:
    return problem.digits


def _dominance(problem: Problem, n: int, offset: int = 0) -> float:
    """min over about ``n`` strided rows of |a_ii| / sum_j!=i |a_ij| (>= 1: Jacobi converges);
    ``offset`` shifts the sampled rows (a repeated sample).

    Read from the CSR arrays directly: scipy's ``getrow`` and ``A[i, i]`` cost tens of microseconds a
    row, which on a small system is more than solving it."""
    A = problem.A
    step = max(1, problem.n // n)
    rows = np.arange(offset % step, problem.n, step)
    starts, ends = A.indptr[rows], A.indptr[rows + 1]
    lengths = ends - starts
    # The entries of every sampled row, gathered at once; which sampled row each belongs to.
    owner = np.repeat(np.arange(len(rows)), lengths)
    first = np.cumsum(lengths) - lengths
    entries = np.repeat(starts, lengths) + (np.arange(int(lengths.sum())) - np.repeat(first, lengths))
    values = np.abs(A.data[entries])
    on_diagonal = A.indices[entries] == rows[owner]
    diag = np.bincount(owner, weights=values * on_diagonal, minlength=len(rows))
    off = np.bincount(owner, weights=values, minlength=len(rows)) - diag
    ratio = np.where(off > 0, diag / np.where(off > 0, off, 1.0), 1e3)
    return float(min(ratio.min(initial=math.inf), 1e3))


adaptive_solve.feature(lambda p: math.log2(p.n), name="n", cost="cheap")
adaptive_solve.feature(required_digits, name="digits", cost="cheap")
adaptive_solve.feature(lambda p, level, offset=0: density(p.A, level, offset), name="density", levels=(8, 64))
adaptive_solve.feature(_dominance, name="dominance", levels=(8, 64))


# ---- families of systems --------------------------------------------------------------------------


def _banded(n: int, rng: np.random.Generator, bands: int = 2) -> Any:
    import scipy.sparse as sp

    offs = [k for k in range(-bands, bands + 1) if k]
    diags = [-rng.uniform(0.5, 1.0, n - abs(k)) for k in offs]
    A = sp.diags(diags, offs, shape=(n, n), format="csr")
    A = (A + A.T) / 2
    row_sums = np.asarray(abs(A).sum(axis=1)).ravel()
    return (A + sp.diags(row_sums * rng.uniform(1.3, 2.0) + 0.1)).tocsr()


def _poisson(n: int, rng: np.random.Generator, shift: float = 0.0) -> Any:
    import scipy.sparse as sp

    k = max(2, int(round(math.sqrt(n))))
    t = sp.diags([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], [-1, 0, 1])
    eye = sp.identity(k)
    return (sp.kron(t, eye) + sp.kron(eye, t) + shift * sp.identity(k * k)).tocsr()


def _sparse_spd(n: int, rng: np.random.Generator, per_row: int = 4) -> Any:
    import scipy.sparse as sp

    R = sp.random(n, n, density=min(1.0, per_row / n), random_state=int(rng.integers(2**31)))
    A = R @ R.T
    return (A + sp.identity(n) * (1.0 + float(abs(A).sum(axis=1).mean()) * 0.2)).tocsr()


def _dense_spd(n: int, rng: np.random.Generator) -> Any:
    import scipy.sparse as sp

    M = rng.normal(size=(n, n))
    return sp.csr_matrix(M @ M.T / n + 0.05 * np.eye(n))


Family = Callable[[int, np.random.Generator], Any]

TRAIN_FAMILIES: dict[str, tuple[Family, list[int]]] = {
    "banded": (_banded, [300, 1200, 4000]),
    "poisson": (_poisson, [400, 1600, 3600]),
    "sparse_spd": (_sparse_spd, [300, 700, 1200]),
    "dense_spd": (_dense_spd, [60, 150, 300]),
}
TEST_FAMILIES: dict[str, tuple[Family, list[int]]] = {
    "banded_wide": (lambda n, rng: _banded(n, rng, bands=4), [600, 2500, 6000, 120_000]),
    "poisson_shifted": (lambda n, rng: _poisson(n, rng, shift=0.05), [900, 2500]),
    "sparse_spd_denser": (lambda n, rng: _sparse_spd(n, rng, per_row=6), [500, 1000]),
    "dense_spd": (_dense_spd, [100, 220]),
}
TRAIN_DIGITS = (3.0, 6.0, 10.0)
TEST_DIGITS = (4.0, 8.0)
#: Requirements the dispatcher learns every training system at (``tune_inputs(required_levels=...)``),
#: besides the one it carries: each landmark's measured digits say which of them it meets. The range
#: is what the library serves (2 to 12 digits), not the test's requirements.
REQUIRED_LEVELS = tuple(float(d) for d in range(2, 13))

BENCHMARK_NOTES = (
    "Training families (size list each): "
    + "; ".join(f"{k} {v[1]}" for k, v in TRAIN_FAMILIES.items())
    + f", required digits drawn from {list(TRAIN_DIGITS)}. Test families: "
    + "; ".join(f"{k} {v[1]}" for k, v in TEST_FAMILIES.items())
    + f", required digits from {list(TEST_DIGITS)}. Only dense_spd appears in both (at other sizes); "
    "the test's banded systems have 9 diagonals (training: 5), its Poisson systems are shifted and its "
    "random SPD systems denser. A wrong answer is a solution short of its input's required digits."
)


def make_labelled(
    families: dict[str, tuple[Family, list[int]]], n_each: int, seed: int,
    choices: tuple[float, ...] | None = None,
) -> list[tuple[str, Problem]]:
    """``(family, problem)`` pairs: ``n_each`` problems per family and size, random required digits."""
    rng = np.random.default_rng(seed)
    pick = choices or (TRAIN_DIGITS if families is TRAIN_FAMILIES else TEST_DIGITS)
    out = []
    for name, (make, family_sizes) in families.items():
        for n in family_sizes:
            for _ in range(n_each):
                A = make(n, rng)
                b = rng.normal(size=A.shape[0])
                out.append((name, Problem(A, b, float(rng.choice(pick)))))
    return out


def make_problems(families: dict[str, tuple[Family, list[int]]], n_each: int, seed: int) -> list[Problem]:
    return [p for _, p in make_labelled(families, n_each, seed)]


def main(argv: list[str]) -> None:
    from perftune.adapt import tune_inputs

    labelled = make_labelled(TRAIN_FAMILIES, 2, seed=0)
    result = tune_inputs(adaptive_solve, [p for _, p in labelled], budget=96, n_clusters=6, seed=0,
                         accuracy=digits, required=required_digits, required_levels=REQUIRED_LEVELS,
                         groups=[family for family, _ in labelled])
    print(result.summary())
    if argv[:1] == ["save"]:
        print("wrote", result.save())


if __name__ == "__main__":
    main(sys.argv[1:])
