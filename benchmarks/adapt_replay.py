"""Replay dispatch learners offline on the tables of ``benchmarks/adapt.py --dump`` runs.

A live run of ``adapt.py`` measures everything anew, and on a shared machine the same code and seed can
land anywhere between 0.6x and 1.3x of the best single configuration (batches s and t of
``results/adapt-sort.md``). To compare *learners*, this script keeps the measurements fixed: each dump
holds the training tables ``tune_inputs`` learned from (feature values and costs, landmark times,
families) and, for every test input, every column's value and cost and every pinned configuration's
median time. A learner is fitted on the training tables and scored on the test tables: the time of the
landmark it picks plus the features it reads.

Learners:

* ``ship``: ``fit_dispatch`` as ``tune_inputs`` calls it (same seed, groups, resampled features and
  requirement column, and what ``fit_options`` gives: the model kind, the size columns, one column
  group per feature); the asymptotic check of ``tune_inputs`` is not replayed, so a few choices on
  inputs beyond the training sizes can differ from the live run (the "same picks" column says how many
  agree; a dump recorded by older code agrees only where the old and the new learner choose alike).
* ``ship + check at margin M`` (``--growth``): ``ship`` with the asymptotic check fitted on the training
  tables at that margin and applied to its picks (the number of picks it changed in brackets).
* ``vote TOL``: every set of one or two columns is scored by the same cross-validation (a depth-4
  cost-aware tree; random folds plus leave-one-family-out), and the trees of all sets within ``TOL`` of
  the best total (and no more wrong choices) vote. Tried and rejected (``results/adapt-sort.md``).

Usage:
    python benchmarks/adapt_replay.py benchmarks/results/adapt-dumps/sort-quick-t-*.npz --vote 0.1 0.3
    python benchmarks/adapt_replay.py benchmarks/results/adapt-dumps/*.npz --fit guard=False --fit max_depth=2
    python benchmarks/adapt_replay.py benchmarks/results/adapt-dumps/*.npz --growth 0.1 0.25 0.5 1.0
"""

from __future__ import annotations

import argparse
import functools
import itertools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from perftune.adapt import _learn  # noqa: E402
from perftune.adapt._model import ForestModel, Model  # noqa: E402


def load(path: str) -> dict[str, Any]:
    d: dict[str, Any] = dict(np.load(path, allow_pickle=False))
    d["columns"] = [str(c) for c in d["columns"]]
    # What the learner is given as "answered": a stopped run is an answer at the time of the cut.
    d["answered"] = d["train_ok"] | d["train_stopped"]
    found = re.search(r"-(\d+)\.npz$", path)
    d["seed"] = int(found.group(1)) if found else 0
    return d


def score(d: dict[str, Any], model: Model,
          adjust: Callable[[int, float], int] | None = None) -> tuple[float, int, list[int]]:
    """Test total (landmark picked plus features read), wrong answers, and the picks; ``adjust(pick,
    size)``, where given, turns the model's pick into the landmark that runs (the asymptotic check)."""
    X, C, T, bad, sizes = d["test_values"], d["test_cost"], d["test_time"], d["test_bad"], d["test_sizes"]
    total, wrong, picks = 0.0, 0, []
    for i in range(len(X)):
        value = functools.partial(lambda i, c: float(X[i, c]), i)
        k = model.choose(value)
        if adjust is not None:
            k = adjust(k, float(sizes[i]))
        picks.append(k)
        total += float(T[i, k]) + float(sum(C[i, c] for c in model.visited(value)))
        wrong += int(bad[i, k])
    return total, wrong, picks


def growth_check(d: dict[str, Any], model: Model, margin: float) -> Any:
    """The asymptotic check of ``tune_inputs`` (:mod:`perftune.adapt._growth`) fitted on the training
    tables at ``margin``, for the picks ``model`` makes on the training inputs."""
    from perftune.adapt._growth import fit_growth

    Xtr = d["train_values"]
    chosen = [model.choose(functools.partial(lambda i, c: float(Xtr[i, c]), i)) for i in range(len(Xtr))]
    return fit_growth(chosen, d["train_sizes"].astype(float).tolist(), d["train_time"], d["train_ok"],
                      d["train_groups"].tolist(), bound=d["train_stopped"], margin=margin)


def baselines(d: dict[str, Any]) -> tuple[float, float]:
    """``(best single configuration, oracle)`` totals on the test set, as ``adapt.py`` reports them."""
    T, bad, n_landmarks = d["test_time"], d["test_bad"], int(d["n_landmarks"])
    best = min((int(bad[:, j].sum()), float(T[:, j].sum())) for j in range(T.shape[1]))[1]
    oracle = float(np.where(~bad[:, :n_landmarks], T[:, :n_landmarks], np.inf).min(axis=1).sum())
    return best, oracle


def tables(d: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any, np.ndarray]:
    """``(values, cost, time, answered, resampled, groups)`` as ``tune_inputs`` fits them: relabelled at
    every requirement level where the run learned with ``required_levels`` (solve)."""
    resampled = d["train_resampled"] if d["train_resampled"].ndim == 3 else None
    out = (d["train_values"], d["train_cost"], d["train_time"], d["answered"], resampled, d["train_groups"])
    if "required_levels" not in d:
        return out
    from perftune.adapt._tune import _relabel

    values, cost, time_s, answered, resampled, groups = _relabel(
        int(d["required_column"]), [float(v) for v in d["required_levels"]], d["train_values"],
        d["train_cost"], d["train_time"], d["answered"], d["train_stopped"], d["train_accuracy"],
        resampled, list(d["train_groups"]))
    return values, cost, time_s, answered, resampled, np.asarray(groups)


def ship(d: dict[str, Any], **options: Any) -> Model:
    """``fit_dispatch`` as ``tune_inputs`` calls it; ``options`` override its keyword arguments."""
    from perftune.adapt._tune import fit_options

    values, cost, time_s, answered, resampled, groups = tables(d)
    options = {**fit_options("auto", groups, d["train_values"], d["train_sizes"].tolist(),
                             column_groups(d["columns"])), **options}
    fit = _learn.fit_dispatch(
        values, cost, time_s, answered, groups=groups, seed=d["seed"], resampled=resampled,
        **({"required_column": int(d["required_column"])} if "required_column" in d else {}), **options,
    )
    return fit.model


def column_groups(columns: list[str]) -> list[list[int]]:
    """Per feature (``name@level`` columns share a name), its column indices: as the site registers them."""
    names = [c.split("@")[0] for c in columns]
    return [[i for i, m in enumerate(names) if m == name] for name in dict.fromkeys(names)]


def _splits(d: dict[str, Any], groups: np.ndarray, n_folds: int = 4) -> list[np.ndarray]:
    n = len(groups)
    order = np.random.default_rng(d["seed"]).permutation(n)
    return [order[f::n_folds] for f in range(n_folds)] + [
        np.flatnonzero(groups == g) for g in sorted(set(groups.tolist()))
    ]


def vote(d: dict[str, Any], tolerance: float, depth: int = 4) -> tuple[Model, int]:
    X, C, T, ok, _, groups = tables(d)
    everything = np.arange(len(X))
    splits = _splits(d, groups)

    def tree(columns: tuple[int, ...], rows: np.ndarray) -> Any:
        return _learn._fit(X, T, ok, list(columns), rows, classifier="tree", max_depth=depth, n_trees=1,
                           seed=d["seed"])

    def cv(columns: tuple[int, ...]) -> tuple[int, float]:
        wrong, total = 0, 0.0
        for test in splits:
            w, t = _learn.score_model(tree(columns, np.setdiff1d(everything, test)), X, C, T, ok, test)
            wrong, total = wrong + w, total + t
        return wrong, total

    sets = [s for r in (1, 2) for s in itertools.combinations(range(X.shape[1]), r)]
    scored = [(cv(s), s) for s in sets]
    best = min(sc for sc, _ in scored)
    near = [s for (w, t), s in scored if w == best[0] and t <= best[1] * (1 + tolerance)]
    return ForestModel([tree(s, everything) for s in near]), len(near)


def _options(text: str) -> dict[str, Any]:
    """``"guard=False,max_depth=2"`` -> ``{"guard": False, "max_depth": 2}``."""
    import ast

    out: dict[str, Any] = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        out[key.strip()] = ast.literal_eval(value.strip())
    return out


def _wrong(n: int) -> str:
    return f", wrong {n}" if n else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dumps", nargs="+")
    parser.add_argument("--vote", type=float, nargs="*", default=[], help="tolerances of the vote learner")
    parser.add_argument("--growth", type=float, nargs="*", default=[],
                        help="also replay ship with the asymptotic check at these margins")
    parser.add_argument("--fit", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                        help="also replay fit_dispatch with these keyword arguments (Python literals), "
                             "e.g. guard=False or classifier='neighbours'; repeatable")
    args = parser.parse_args()
    head = "| dump | best single (ms) | oracle (ms) | live two-level | ship (replayed) | same picks |"
    variants = [_options(text) for text in args.fit]
    head += "".join(f" {text} |" for text in args.fit)
    head += "".join(f" vote {t:g} |" for t in args.vote)
    head += "".join(f" ship + check at margin {m:g} (changed) |" for m in args.growth)
    print(head)
    print("|---|---:|---:|---:|---:|---:|" + "---:|" * (len(args.vote) + len(variants) + len(args.growth)))
    for path in args.dumps:
        d = load(path)
        best, oracle = baselines(d)
        live = float(d["two_s"].sum())
        shipped = ship(d)
        total, wrong, picks = score(d, shipped)
        same = int((np.array(picks) == d["chose_two"]).sum())
        row = (f"| {Path(path).stem} | {best * 1e3:.1f} | {oracle * 1e3:.1f} | {best / live:.2f}x, "
               f"{live / oracle:.3f} | {best / total:.2f}x, {total / oracle:.3f}{_wrong(wrong)} | "
               f"{same}/{len(picks)} |")
        for options in variants:
            t, w, _ = score(d, ship(d, **options))
            row += f" {best / t:.2f}x, {t / oracle:.3f}{_wrong(w)} |"
        for tol in args.vote:
            model, n_sets = vote(d, tol)
            t, w, _ = score(d, model)
            row += f" {best / t:.2f}x, {t / oracle:.3f} ({n_sets} sets{_wrong(w)}) |"
        for margin in args.growth:
            t, w, adjusted = score(d, shipped, growth_check(d, shipped, margin).adjust)
            changed = sum(a != b for a, b in zip(adjusted, picks, strict=True))
            row += f" {best / t:.2f}x, {t / oracle:.3f}{_wrong(w)} ({changed}) |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
