"""2-D Poisson solver with multigrid cycles tuned per accuracy, level by level (as in PetaBricks).

Solves ``-laplace(u) = f`` on the unit square with zero boundary values on a grid of
``(2**level - 1)**2`` unknowns (5-point stencil). At each level a configuration is one of

* ``direct``: sparse LU (allowed on coarse levels only, level <= 5),
* ``sor``: ``iters`` red-black SOR sweeps with weight ``weight``,
* ``vcycle``: ``cycles`` standard V(pre, post) cycles down to a direct solve on level 2,
* ``multigrid``: ``cycles`` cycles of pre-smoothing, a coarse-grid correction solved by the
  *tuned cell* ``(level - 1, coarse_bin)``, and post-smoothing.

Accuracy is the number of digits the error is reduced by from the zero initial guess,
``log10(|u*| / |u - u*|)``. :func:`tune` fills a levels x accuracy-bins table from the coarsest
level up; :class:`PoissonSolver` runs it.

Run:
    python examples/choice/poisson.py tune     # tune levels 2..7, write the tuned-choices file
    python examples/choice/poisson.py run 5    # solve a random problem at level 7 to 5 digits
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

MIN_LEVEL = 2
MAX_DIRECT_LEVEL = 5
TARGETS = (1.0, 3.0, 5.0, 7.0)


@dataclass(frozen=True)
class Problem:
    """A right-hand side and its exact discrete solution (both (n+2) x (n+2), zero boundary)."""

    f: np.ndarray
    u_exact: np.ndarray


def grid_n(level: int) -> int:
    return 2**level - 1


@cache
def _lu(level: int) -> Any:
    n = grid_n(level)
    h2 = 1.0 / (n + 1) ** 2
    t = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    eye = sp.identity(n)
    a = (sp.kron(eye, t) + sp.kron(t, eye)) / h2
    return spla.splu(a.tocsc())


def direct(f: np.ndarray, level: int) -> np.ndarray:
    n = grid_n(level)
    u = np.zeros_like(f)
    u[1:-1, 1:-1] = _lu(level).solve(f[1:-1, 1:-1].ravel()).reshape(n, n)
    return u


def _sweep(u: np.ndarray, f: np.ndarray, h2: float, w: float, a: int, b: int) -> None:
    end = u.shape[0] - 1
    i, j = slice(a, end, 2), slice(b, end, 2)
    im, ip = slice(a - 1, end - 1, 2), slice(a + 1, end + 1, 2)
    jm, jp = slice(b - 1, end - 1, 2), slice(b + 1, end + 1, 2)
    gs = (h2 * f[i, j] + u[im, j] + u[ip, j] + u[i, jm] + u[i, jp]) * 0.25
    u[i, j] += w * (gs - u[i, j])


def sor(u: np.ndarray, f: np.ndarray, sweeps: int, w: float) -> None:
    """Red-black SOR, in place."""
    h2 = 1.0 / (u.shape[0] - 1) ** 2
    for _ in range(sweeps):
        _sweep(u, f, h2, w, 1, 1)
        _sweep(u, f, h2, w, 2, 2)
        _sweep(u, f, h2, w, 1, 2)
        _sweep(u, f, h2, w, 2, 1)


def residual(u: np.ndarray, f: np.ndarray) -> np.ndarray:
    inv_h2 = float((u.shape[0] - 1) ** 2)
    r = np.zeros_like(u)
    r[1:-1, 1:-1] = f[1:-1, 1:-1] - inv_h2 * (
        4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2] - u[1:-1, 2:]
    )
    return r


def restrict(r: np.ndarray) -> np.ndarray:
    """Full weighting onto the next coarser grid."""
    nc = (r.shape[0] - 1) // 2 + 1
    rc = np.zeros((nc, nc))
    c, m, p = slice(2, -1, 2), slice(1, -2, 2), slice(3, None, 2)
    rc[1:-1, 1:-1] = (
        4 * r[c, c] + 2 * (r[m, c] + r[p, c] + r[c, m] + r[c, p]) + r[m, m] + r[p, m] + r[m, p] + r[p, p]
    ) / 16
    return rc


def interpolate(ec: np.ndarray) -> np.ndarray:
    """Bilinear interpolation onto the next finer grid."""
    n = 2 * (ec.shape[0] - 1) + 1
    e = np.zeros((n, n))
    e[::2, ::2] = ec
    e[1::2, ::2] = 0.5 * (ec[:-1, :] + ec[1:, :])
    e[::2, 1::2] = 0.5 * (ec[:, :-1] + ec[:, 1:])
    e[1::2, 1::2] = 0.25 * (ec[:-1, :-1] + ec[1:, :-1] + ec[:-1, 1:] + ec[1:, 1:])
    return e


def vcycle(u: np.ndarray, f: np.ndarray, level: int, pre: int, post: int, w: float) -> None:
    """One standard V(pre, post) cycle, in place, with a direct solve on the coarsest level."""
    if level <= MIN_LEVEL:
        u[...] = direct(f, level)
        return
    sor(u, f, pre, w)
    rc = restrict(residual(u, f))
    ec = np.zeros_like(rc)
    vcycle(ec, rc, level - 1, pre, post, w)
    u += interpolate(ec)
    sor(u, f, post, w)


def solve(level: int, config: dict[str, Any], f: np.ndarray, table: Any) -> np.ndarray:
    """Solve at ``level`` with one tuned cell configuration; ``table`` gives the lower cells."""
    algo = config["algo"]
    if algo == "direct":
        return direct(f, level)
    u = np.zeros_like(f)
    w = config["weight"]
    if algo == "sor":
        sor(u, f, config["iters"], w)
    elif algo == "vcycle":
        for _ in range(config["cycles"]):
            vcycle(u, f, level, config["pre"], config["post"], w)
    elif algo == "multigrid":
        coarse = table.cell(level - 1, config["coarse_bin"])
        if coarse is None:
            raise ValueError(f"cell ({level - 1}, {config['coarse_bin']}) is unreachable")
        for _ in range(config["cycles"]):
            sor(u, f, config["pre"], w)
            rc = restrict(residual(u, f))
            u += interpolate(solve(level - 1, coarse, rc, table))
            sor(u, f, config["post"], w)
    else:
        raise ValueError(f"unknown algorithm {algo!r}")
    return u


def digits(u: np.ndarray, problem: Problem) -> float:
    """Digits of error reduction from the zero initial guess (the accuracy metric)."""
    err = float(np.linalg.norm(u - problem.u_exact))
    ref = float(np.linalg.norm(problem.u_exact))
    return 16.0 if err == 0 else math.log10(ref / err)


def random_problem(level: int, rng: np.random.Generator) -> Problem:
    """A random smooth-plus-rough right-hand side with its exact discrete solution."""
    n = grid_n(level)
    f = np.zeros((n + 2, n + 2))
    x = np.linspace(0, 1, n + 2)[1:-1]
    xx, yy = np.meshgrid(x, x, indexing="ij")
    kx, ky = rng.integers(1, 6, size=2)
    f[1:-1, 1:-1] = np.sin(kx * np.pi * xx) * np.sin(ky * np.pi * yy) * rng.normal(0, 50) + rng.normal(
        0, 10, size=(n, n)
    )
    return Problem(f=f, u_exact=direct(f, level))


def space_for_level(level: int, table: Any) -> Any:
    """Candidates at one level; multigrid may only use reachable cells of the level below."""
    from perftune.space import Choice, Float, Int, Ordinal, Space

    algos = ["sor"]
    if level <= MAX_DIRECT_LEVEL:
        algos.insert(0, "direct")
    reachable: list[int] = []
    if level > MIN_LEVEL:
        algos.append("vcycle")
        row = table.rows.get(level - 1)
        reachable = [i for i, b in enumerate(row.bins) if b.reached] if row is not None else []
        if reachable:
            algos.append("multigrid")
    params: dict[str, Any] = {
        "algo": Choice(algos),
        "iters": Int(1, 60, when="algo == 'sor'"),
        "weight": Float(1.0, 1.9, when="algo != 'direct'"),
        "cycles": Int(1, 10, when="algo in ('vcycle', 'multigrid')"),
        "pre": Int(0, 3, when="algo in ('vcycle', 'multigrid')"),
        "post": Int(0, 3, when="algo in ('vcycle', 'multigrid')"),
    }
    if "multigrid" in algos:
        params["coarse_bin"] = Ordinal(reachable, when="algo == 'multigrid'")
    return Space(params, constraints=["algo == 'sor' or algo == 'direct' or pre + post >= 1"])


def seeds_for_level(level: int, table: Any) -> list[Any]:
    """Standard V(2,1) and V(1,1) Gauss-Seidel cycles: the textbook starting points."""
    from perftune.space import Config

    if level <= MIN_LEVEL:
        return []
    return [
        Config({"algo": "vcycle", "cycles": k, "pre": p, "post": 1, "weight": 1.0})
        for k in range(1, 9)
        for p in (1, 2)
    ]


def program(level: int, config: Any, problem: Problem, table: Any) -> np.ndarray:
    return solve(level, dict(config), problem.f, table)


def accuracy(u: np.ndarray, problem: Problem) -> float:
    return digits(u, problem)


def tune(
    top_level: int = 7,
    budget_per_level: int = 40,
    n_train: int = 3,
    n_held_out: int = 5,
    seed: int = 0,
    targets: tuple[float, ...] = TARGETS,
    margin: float = 0.25,
):
    """Fill the levels x bins table for levels 2..top_level; returns the :class:`LevelTable`.

    ``margin`` (digits) is the safety margin a cell must keep above its target on the training inputs.
    """
    from perftune.targets.choice import tune_levels

    rng = np.random.default_rng(seed)
    train = {lv: [random_problem(lv, rng) for _ in range(n_train)] for lv in range(MIN_LEVEL, top_level + 1)}
    held = {
        lv: [random_problem(lv, rng) for _ in range(n_held_out)] for lv in range(MIN_LEVEL, top_level + 1)
    }
    return tune_levels(
        program,
        space_for_level,
        levels=list(range(MIN_LEVEL, top_level + 1)),
        accuracy=accuracy,
        targets=targets,
        inputs_for_level=train.__getitem__,
        held_out_for_level=held.__getitem__,
        budget_per_level=budget_per_level,
        seed=seed,
        seeds_for_level=seeds_for_level,
        name="poisson",
        margin=margin,
    )


class PoissonSolver:
    """Runs a tuned level table: ``PoissonSolver(table).solve(f, accuracy=5)``."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @classmethod
    def from_choices(cls) -> PoissonSolver:
        """Use the ``poisson`` table of the tuned-choices file of this process."""
        from perftune.targets.choice import LevelTable, current_choices

        doc = current_choices().tables.get("poisson")
        if doc is None:
            raise SystemExit("no 'poisson' table in the tuned-choices file: run `poisson.py tune` first")
        return cls(LevelTable.from_dict("poisson", doc))

    def solve(self, f: np.ndarray, accuracy: float) -> np.ndarray:
        level = int(round(math.log2(f.shape[0] - 1)))
        return solve(level, self.table.config_for(level, accuracy), f, self.table)


def main(argv: list[str]) -> None:
    if argv[:1] == ["tune"]:
        table = tune()
        print(table.format())
        print("wrote", table.save())
        return
    acc = float(argv[1]) if len(argv) > 1 else 5.0
    solver = PoissonSolver.from_choices()
    level = max(solver.table.levels)
    problem = random_problem(level, np.random.default_rng(123))
    t0 = time.perf_counter()
    u = solver.solve(problem.f, acc)
    print(
        f"level {level}: {digits(u, problem):.2f} digits (asked {acc}) "
        f"in {(time.perf_counter() - t0) * 1e3:.1f} ms "
        f"with {solver.table.config_for(level, acc)}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
