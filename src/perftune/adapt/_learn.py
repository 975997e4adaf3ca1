"""Cost-aware learning of a dispatcher: which features to compute, and the tree that reads them.

Given, for every training input, the value and the measured cost of every column, the time of every
landmark and whether it was correct (accurate enough), the learner chooses columns greedily: start
from no column (every input runs the single best landmark), and add the column that most lowers the
cross-validated *total* time, that is the time of the landmark the tree picks plus the cost of the
columns its walk reads for that input. It stops when no column pays for itself. A wrong choice (a
landmark that fails or misses the input's accuracy) counts before any time: fewer wrong choices win.

The tree is fitted with each input weighted by how much a bad choice costs on it (the mean time of
the landmarks minus the best one), so that large inputs, where the choice matters most, decide the
splits.

Example:
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.9], [1.0]] * 3)
    >>> T = np.array([[1.0, 5.0], [1.0, 5.0], [5.0, 1.0], [5.0, 1.0]] * 3)
    >>> fit = fit_dispatch(X, np.zeros_like(X), T, np.ones_like(T, dtype=bool), seed=0)
    >>> fit.selected, [fit.model.choose(lambda c: v) for v in (0.0, 1.0)]
    ([0], [0, 1])
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perftune.adapt._features import AdaptError
from perftune.adapt._model import ForestModel, Model, TreeModel

__all__ = ["DispatchFit", "fit_dispatch", "score_model"]


@dataclass
class DispatchFit:
    """The outcome of :func:`fit_dispatch`.

    Attributes:
        model: The fitted model (a one-leaf tree when no column pays for itself).
        selected: The columns the learner kept, in the order it added them.
        cv_total_s: Cross-validated total time (landmarks plus features) of the chosen column set.
        cv_wrong: Cross-validated number of wrong choices of the chosen column set.
        steps: ``(columns, cv_wrong, cv_total_s)`` for every column set the greedy search kept.
    """

    model: Model
    selected: list[int]
    cv_total_s: float
    cv_wrong: int
    steps: list[tuple[list[int], int, float]] = field(default_factory=list)


def score_model(
    model: Model, X: np.ndarray, cost: np.ndarray, T: np.ndarray, ok: np.ndarray, rows: Any
) -> tuple[int, float]:
    """``(wrong choices, total seconds)`` of ``model`` on ``rows``: landmark time plus features read."""
    wrong = 0
    total = 0.0
    for i in rows:
        value = functools.partial(_cell, X, int(i))
        visited = model.visited(value)
        k = model.choose(value)
        total += float(T[i, k]) + float(sum(cost[i, c] for c in visited))
        wrong += 0 if ok[i, k] else 1
    return wrong, total


def _cell(X: np.ndarray, i: int, c: int) -> float:
    return float(X[i, c])


def _labels_weights(T: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    masked = np.where(ok, T, np.nan)
    usable = ok.any(axis=1)
    labels = np.zeros(len(T), dtype=int)
    weights = np.zeros(len(T))
    for i in np.flatnonzero(usable):
        labels[i] = int(np.nanargmin(masked[i]))
        weights[i] = float(np.nanmean(masked[i]) - np.nanmin(masked[i]))
    positive = weights[usable & (weights > 0)]
    # An input where every landmark takes the same time teaches nothing, but must not vanish either.
    floor = 1e-3 * (positive.mean() if positive.size else 1.0)
    weights = np.where(usable, np.maximum(weights, floor), 0.0)
    return labels, weights, np.asarray(usable, dtype=bool)


def _best_single(T: np.ndarray, ok: np.ndarray, rows: Any) -> int:
    rows = np.asarray(rows)
    wrong = (~ok[rows]).sum(axis=0)
    total = np.where(ok[rows], T[rows], 0.0).sum(axis=0)
    return int(min(range(T.shape[1]), key=lambda k: (int(wrong[k]), float(total[k]))))


def _fit(
    X: np.ndarray,
    T: np.ndarray,
    ok: np.ndarray,
    columns: list[int],
    rows: np.ndarray,
    *,
    classifier: str,
    max_depth: int,
    n_trees: int,
    seed: int,
) -> Model:
    labels, weights, usable = _labels_weights(T, ok)
    train = rows[usable[rows]]
    if not columns or len(train) == 0 or len(set(labels[train].tolist())) == 1:
        return TreeModel.constant(_best_single(T, ok, rows))
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    data = X[np.ix_(train, columns)]
    min_leaf = max(1, min(3, len(train) // 10))
    if classifier == "tree":
        est = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=min_leaf, random_state=seed)
        est.fit(data, labels[train], sample_weight=weights[train])
        return TreeModel.from_sklearn(est, columns, [int(c) for c in est.classes_])
    forest = RandomForestClassifier(
        n_estimators=n_trees, max_depth=max_depth, min_samples_leaf=min_leaf, random_state=seed
    )
    forest.fit(data, labels[train], sample_weight=weights[train])
    classes = [int(c) for c in forest.classes_]
    return ForestModel([TreeModel.from_sklearn(t, columns, classes) for t in forest.estimators_])


def fit_dispatch(
    X: np.ndarray,
    cost: np.ndarray,
    T: np.ndarray,
    ok: np.ndarray,
    *,
    classifier: str = "tree",
    max_depth: int = 4,
    max_columns: int = 4,
    n_trees: int = 5,
    n_folds: int = 4,
    seed: int = 0,
) -> DispatchFit:
    """Choose columns and fit the dispatch model, minimising total time including feature costs.

    Args:
        X: ``(n_inputs, n_columns)`` feature values.
        cost: ``(n_inputs, n_columns)`` seconds to compute each value (0 for cheap features).
        T: ``(n_inputs, n_landmarks)`` median seconds of each landmark on each input.
        ok: ``(n_inputs, n_landmarks)``: the landmark ran correctly (and accurately enough) there.
        classifier: ``"tree"`` (one decision tree) or ``"forest"`` (a small random forest).
        max_depth: Depth limit of every tree.
        max_columns: Most columns the greedy search keeps.
        n_trees: Trees of a forest.
        n_folds: Folds of the cross-validation that scores each column set.
        seed: Seed of the folds and the trees.
    """
    if classifier not in ("tree", "forest"):
        raise AdaptError(f"tune_inputs: classifier must be 'tree' or 'forest', got {classifier!r}")
    n, n_columns = X.shape
    if T.shape[0] != n or cost.shape != X.shape or ok.shape != T.shape:
        raise AdaptError("tune_inputs: feature, cost and time tables disagree on the number of inputs")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    n_folds = max(2, min(n_folds, n))
    folds = [order[f::n_folds] for f in range(n_folds)]
    everything = np.arange(n)
    kwargs = {"classifier": classifier, "max_depth": max_depth, "n_trees": n_trees, "seed": seed}

    def cv(columns: list[int]) -> tuple[int, float]:
        wrong, total = 0, 0.0
        for f, test in enumerate(folds):
            train = np.concatenate([folds[g] for g in range(n_folds) if g != f])
            model = _fit(X, T, ok, columns, train, **kwargs)  # type: ignore[arg-type]
            w, t = score_model(model, X, cost, T, ok, test)
            wrong, total = wrong + w, total + t
        return wrong, total

    selected: list[int] = []
    best = cv(selected)
    steps = [(list(selected), best[0], best[1])]
    while len(selected) < min(max_columns, n_columns):
        trials = [(cv([*selected, c]), c) for c in range(n_columns) if c not in selected]
        if not trials:
            break
        score, column = min(trials, key=lambda t: (t[0][0], t[0][1], t[1]))
        # A column must pay for itself by a margin: cross-validation on few inputs is itself noisy.
        if score[0] > best[0] or (score[0] == best[0] and score[1] >= best[1] * 0.99):
            break
        selected.append(column)
        best = score
        steps.append((list(selected), best[0], best[1]))
    model = _fit(X, T, ok, selected, everything, **kwargs)  # type: ignore[arg-type]
    used = model.columns
    return DispatchFit(
        model=model,
        selected=[c for c in selected if c in used],
        cv_total_s=best[1],
        cv_wrong=best[0],
        steps=steps,
    )
