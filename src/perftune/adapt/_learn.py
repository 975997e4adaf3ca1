"""Cost-aware learning of a dispatcher that generalises: which features to compute, and what reads them.

Given, for every training input, the value and the measured cost of every column, the time of every
landmark and whether it was correct (accurate enough), the learner builds candidates of three shapes:

* a cost-aware decision tree (or small forest): labels are the most robust of the landmarks within a
  tolerance of each input's fastest, the fit is weighted by how much a bad choice costs on each input,
  and each leaf then runs the landmark with the least total time over the inputs that reach it;
* least regret of the nearest training inputs (:class:`NeighbourModel`): the landmark with the
  smallest summed ratio to the fastest on the ``k`` nearest;
* either of them behind an out-of-distribution guard that sends an input far from every training
  input to the landmark with the best worst case (:func:`robust_landmark`).

For each, columns are chosen greedily: start from no column (one landmark for every input) and add the
column that most lowers the cross-validated *total* time, the landmark's time plus the columns read for
that input, while it pays for itself. The cross-validation adds random folds to leave-one-group-out
(groups: the training families), so a candidate must do well both on inputs like the training ones and
on a family it never saw. A wrong choice (a landmark that fails or misses the input's accuracy) counts
before any time: fewer wrong choices win.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perftune.adapt._features import AdaptError
from perftune.adapt._model import (
    FamilyModel,
    ForestModel,
    GuardedModel,
    LinearModel,
    Model,
    NeighbourModel,
    TreeModel,
)

__all__ = ["DispatchFit", "fit_dispatch", "robust_landmark", "score_model"]


@dataclass
class DispatchFit:
    """The outcome of :func:`fit_dispatch`.

    Attributes:
        model: The fitted model (a one-leaf tree when no column pays for itself).
        selected: The columns the learner kept, in the order it added them.
        cv_total_s: Cross-validated total time (landmarks plus features) of the chosen column set.
        cv_wrong: Cross-validated number of wrong choices of the chosen column set.
        steps: ``(columns, cv_wrong, cv_total_s)`` for every column set the greedy search kept.
        variant: The model shape chosen (classifier, depth, guard), in words.
        scores: ``(candidate, cv_wrong, cv_total_s)`` of every model shape tried on those column sets.
    """

    model: Model
    selected: list[int]
    cv_total_s: float
    cv_wrong: int
    steps: list[tuple[list[int], int, float]] = field(default_factory=list)
    variant: str = ""
    scores: list[tuple[str, int, float]] = field(default_factory=list)


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


def _ratios(T: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Each landmark's time over the fastest correct one on the same input (inf: no answer there)."""
    masked = np.where(ok, T, np.inf)
    best = masked.min(axis=1, keepdims=True)
    best = np.where(np.isfinite(best) & (best > 0), best, 1.0)
    return masked / best


def robust_landmark(T: np.ndarray, ok: np.ndarray, rows: Any = None) -> int:
    """The landmark with the best worst case over ``rows``: fewest wrong answers, then the smallest
    largest ratio to the fastest landmark of each input, then the smallest total.

    It is what a dispatcher falls back to for an input unlike every training input: a landmark that
    is never far from the best on the inputs seen costs least when the guess is wrong.
    """
    rows = np.arange(len(T)) if rows is None else np.asarray(rows)
    R = _ratios(T[rows], ok[rows])
    wrong = (~ok[rows]).sum(axis=0)
    worst = np.where(ok[rows], R, 1.0).max(axis=0)
    total = np.where(ok[rows], T[rows], 0.0).sum(axis=0)
    return int(min(range(T.shape[1]), key=lambda k: (int(wrong[k]), float(worst[k]), float(total[k]), k)))


def _labels_weights(
    T: np.ndarray, ok: np.ndarray, rows: np.ndarray, tolerance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    masked = np.where(ok, T, np.nan)
    usable = ok.any(axis=1)
    # How risky each landmark is on the rows being learned from: a label among near-equals goes to the
    # least risky, so that a leaf an unseen input falls into holds a landmark that is rarely far off.
    R = _ratios(T[rows], ok[rows])
    wrong = (~ok[rows]).sum(axis=0)
    worst = np.where(ok[rows], R, 1.0).max(axis=0)
    labels = np.zeros(len(T), dtype=int)
    weights = np.zeros(len(T))
    for i in np.flatnonzero(usable):
        fastest = np.nanmin(masked[i])
        near = [k for k in range(T.shape[1]) if ok[i, k] and T[i, k] <= fastest * (1 + tolerance)]
        labels[i] = min(near, key=lambda k: (int(wrong[k]), float(worst[k]), float(T[i, k]), k))
        weights[i] = float(np.nanmean(masked[i]) - fastest)
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


def _leaves_by_cost(model: TreeModel, estimator: Any, data: np.ndarray, T: np.ndarray, ok: np.ndarray,
                    train: np.ndarray) -> TreeModel:
    """Give each leaf the landmark with the fewest wrong answers, then the least total time, over the
    training inputs that reach it (the classifier's majority label ignores how much each choice costs)."""
    reached = estimator.apply(data)
    leaf = list(model.leaf)
    for node in set(reached.tolist()):
        rows = train[reached == node]
        leaf[node] = _best_single(T, ok, rows)
    return TreeModel(left=model.left, right=model.right, feature=model.feature, threshold=model.threshold,
                     leaf=leaf)


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
    tolerance: float = 0.05,
) -> TreeModel | ForestModel:
    labels, weights, usable = _labels_weights(T, ok, rows, tolerance)
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
        tree = TreeModel.from_sklearn(est, columns, [int(c) for c in est.classes_])
        return _leaves_by_cost(tree, est, data, T, ok, train)
    forest = RandomForestClassifier(
        n_estimators=n_trees, max_depth=max_depth, min_samples_leaf=min_leaf, random_state=seed
    )
    forest.fit(data, labels[train], sample_weight=weights[train])
    classes = [int(c) for c in forest.classes_]
    return ForestModel([
        _leaves_by_cost(TreeModel.from_sklearn(t, columns, classes), t, data, T, ok, train)
        for t in forest.estimators_
    ])


def _guarded(
    inner: TreeModel | ForestModel,
    X: np.ndarray,
    T: np.ndarray,
    ok: np.ndarray,
    guard: list[int],
    rows: np.ndarray,
    factor: float,
    size_columns: frozenset[int] = frozenset(),
) -> GuardedModel:
    """``inner`` behind a guard on ``guard``: the radius is ``factor`` times how far apart the training
    inputs are (:func:`_spread`)."""
    center, scale, z, spread = _spread(X[np.ix_(rows, np.asarray(guard, dtype=int))])
    radius = factor * spread
    return GuardedModel(
        inner=inner, guard=list(guard), center=center.tolist(), scale=scale.tolist(), points=z.tolist(),
        radius=radius, fallback=robust_landmark(T, ok, rows), size_high=_size_high(guard, z, size_columns),
    )


def _size_high(columns: list[int], z: np.ndarray, size_columns: frozenset[int]) -> list[float | None] | None:
    """Per column, the largest standardised training value of a size column (None for the others)."""
    if not size_columns.intersection(columns):
        return None
    return [float(z[:, j].max()) if c in size_columns else None for j, c in enumerate(columns)]


#: The ratio recorded for a landmark that gave no answer on an input: it outweighs any sum of times.
_NO_ANSWER = 1e6


#: The guard's radius is set by each training input's distance to its this-many-th nearest other one: the
#: nearest would be 0 where training inputs come in copies (two inputs per family and size).
_SPREAD_RANK = 3


def _standardise(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(z, center, scale)``: each column minus its mean, over its spread (1 for a constant column)."""
    center = data.mean(axis=0)
    scale = data.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return (data - center) / scale, center, scale


def _spread(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Standardise ``data``; also how far apart the rows are: the largest distance from a row to its
    ``_SPREAD_RANK``-th nearest other row (the farthest, with fewer rows)."""
    z, center, scale = _standardise(data)
    if len(z) < 2:
        return center, scale, z, 0.0
    d = np.sqrt(((z[:, None, :] - z[None, :, :]) ** 2).sum(axis=2))
    np.fill_diagonal(d, np.inf)
    rank = min(_SPREAD_RANK, len(z) - 1)
    return center, scale, z, float(np.sort(d, axis=1)[:, rank - 1].max())


def _neighbours(
    X: np.ndarray, T: np.ndarray, ok: np.ndarray, columns: list[int], rows: np.ndarray, k: int,
    factor: float | None, size_columns: frozenset[int] = frozenset(),
) -> Model:
    if not columns:
        return TreeModel.constant(robust_landmark(T, ok, rows))
    center, scale, z, spread = _spread(X[np.ix_(rows, np.asarray(columns, dtype=int))])
    ratio = np.where(ok[rows], _ratios(T[rows], ok[rows]), _NO_ANSWER)
    return NeighbourModel(
        features=list(columns), center=center.tolist(), scale=scale.tolist(), points=z.tolist(),
        ratio=ratio.tolist(), k=min(k, len(rows)), radius=None if factor is None else factor * spread,
        fallback=robust_landmark(T, ok, rows), size_high=_size_high(list(columns), z, size_columns),
    )


#: The ratio a landmark's linear fit sees where it is slower than this, or gave no answer: beyond it, how
#: much slower makes no difference to the choice, and an unbounded log would let one input tilt the fit.
_LINEAR_CAP = 20.0
#: Ridge penalty of the linear fit, in standardised units per (mean-weighted) training input.
_LINEAR_RIDGE = 1.0


def _linear(X: np.ndarray, T: np.ndarray, ok: np.ndarray, columns: list[int], rows: np.ndarray) -> Model:
    """Per landmark, a weighted ridge fit of its log ratio to the fastest on the standardised columns."""
    if not columns:
        return TreeModel.constant(robust_landmark(T, ok, rows))
    usable = rows[ok[rows].any(axis=1)]
    if len(usable) == 0:
        return TreeModel.constant(robust_landmark(T, ok, rows))
    cols = np.asarray(columns, dtype=int)
    z, center, scale = _standardise(X[np.ix_(usable, cols)])
    R = np.where(ok[usable], _ratios(T[usable], ok[usable]), _LINEAR_CAP)
    y = np.log(np.clip(R, 1.0, _LINEAR_CAP))
    # Weight by the time at stake: a mis-choice on an input costs about its fastest time times the ratio.
    best = np.where(ok[usable], T[usable], np.inf).min(axis=1)
    w = np.maximum(best, 1e-3 * best.mean())
    w = w / w.mean()
    A = np.hstack([np.ones((len(usable), 1)), z])
    penalty = _LINEAR_RIDGE * np.eye(A.shape[1])
    penalty[0, 0] = 0.0
    coef = np.linalg.solve(A.T @ (A * w[:, None]) + penalty, A.T @ (y * w[:, None]))
    return LinearModel(
        features=list(columns), center=center.tolist(), scale=scale.tolist(),
        low=z.min(axis=0).tolist(), high=z.max(axis=0).tolist(), coef=coef.T.tolist(),
    )


#: The regret a family model records for a landmark that gave no answer on an input: it outweighs any sum
#: of capped log ratios over a family's inputs.
_FAMILY_NO_ANSWER = 1e3


def _families(
    X: np.ndarray, cost: np.ndarray, T: np.ndarray, ok: np.ndarray, columns: list[int], rows: np.ndarray,
    labels: np.ndarray, size_columns: Sequence[int], required: int | None,
) -> Model:
    """A :class:`FamilyModel` on ``columns`` from the training inputs ``rows`` of the families ``labels``."""
    features = [c for c in columns if c not in size_columns and c != required]
    if not features:
        return TreeModel.constant(robust_landmark(T, ok, rows))
    sizes = [int(c) for c in size_columns]
    size_at = np.asarray(sizes, dtype=int)
    cols = np.asarray(features, dtype=int)
    _, center, scale = _standardise(X[np.ix_(rows, cols)])
    ratio = _ratios(T[rows], ok[rows])
    regret = np.where(ok[rows], np.log(np.clip(ratio, 1.0, _LINEAR_CAP)), _FAMILY_NO_ANSWER)
    names = sorted(set(labels[rows].tolist()))
    centroids, at, level, regrets = [], [], [], []
    for name in names:
        mine = np.flatnonzero(labels[rows] == name)
        members = rows[mine]
        # The family's centre from its largest inputs: sampled columns settle as inputs grow, and the
        # inputs a dispatcher is for are mostly larger than the small training ones.
        largest = members
        if sizes:
            size = X[np.ix_(members, size_at)].sum(axis=1)
            largest = members[size >= size.max() - 1e-12]
        centroids.append(((X[np.ix_(largest, cols)].mean(axis=0) - center) / scale).tolist())
        at.append(X[np.ix_(members, size_at)].tolist() if sizes else [[] for _ in members])
        level.append((X[members, required] if required is not None else np.zeros(len(members))).tolist())
        regrets.append(regret[mine].tolist())
    model = FamilyModel(
        features=features, center=center.tolist(), scale=scale.tolist(), centroids=centroids, families=names,
        sizes=sizes, required=required, at=at, level=level, regret=regrets,
    )
    if sizes and required is None:
        model.bare_at, model.bare_landmark = _bare_sizes(model, X, cost, T, ok, rows, labels)
    return model


def _bare_sizes(
    model: FamilyModel, X: np.ndarray, cost: np.ndarray, T: np.ndarray, ok: np.ndarray, rows: np.ndarray,
    labels: np.ndarray,
) -> tuple[list[list[float]], list[int]]:
    """The training sizes at which reading the features costs more than knowing the family saves.

    At each size held by inputs of at least two families: the time of the one landmark best for all of
    them (no feature read) against the time of what the family model runs plus the columns it reads.
    Small inputs are where a sampled feature can cost as much as the work itself."""
    sizes = X[np.ix_(rows, np.asarray(model.sizes, dtype=int))]
    bare_at: list[list[float]] = []
    bare_landmark: list[int] = []
    for at in np.unique(sizes, axis=0):
        here = rows[np.all(np.abs(sizes - at) <= 1e-12, axis=1)]
        if len(set(labels[here].tolist())) < 2 or not ok[here].any(axis=1).all():
            continue
        plain = _best_single(T, ok, here)
        if not ok[here, plain].all():
            continue
        informed = 0.0
        for i in here:
            value = functools.partial(_cell, X, int(i))
            read = float(sum(cost[i, c] for c in model.visited(value)))
            informed += float(T[i, model.choose(value)]) + read
        if float(T[here, plain].sum()) <= informed:
            bare_at.append([float(v) for v in at])
            bare_landmark.append(plain)
    return bare_at, bare_landmark


#: A sampled column is steady enough to compare inputs on when repeated samples of one input spread by at
#: most this fraction of the spread over the training inputs.
_STEADY = 0.01


def _family_columns(
    column_groups: Sequence[Sequence[int]] | None, n_columns: int, noise: np.ndarray, mean_cost: np.ndarray,
    size_columns: frozenset[int], required: int | None, varies: np.ndarray,
) -> list[int]:
    """The columns a family model compares: one level of every feature, the cheapest steady one (repeated
    samples within ``_STEADY`` of the inputs' spread), else the steadiest; size, requirement and columns
    equal on every training input aside.

    Not chosen by cross-validation: on the training families a column or two separate them as well as
    every feature does, and an unseen family is placed by resemblance only when all of it is looked at."""
    groups = [[c] for c in range(n_columns)] if column_groups is None else [
        list(g) for g in column_groups]
    out: list[int] = []
    for group in groups:
        group = [int(c) for c in group if c not in size_columns and c != required and varies[c]]
        if not group:
            continue
        steady = [c for c in group if noise[c] <= _STEADY]
        pick = min(steady, key=lambda c: (float(mean_cost[c]), c)) if steady else min(
            group, key=lambda c: (float(noise[c]), float(mean_cost[c]), c))
        out.append(pick)
    return out


@dataclass(frozen=True)
class _Variant:
    """One way of building the model from a column set, as scored by cross-validation."""

    name: str
    depth: int
    guard: str | None = None  # None, "tree" (the columns the model reads), "cheap" (+ every cheap one), "own"
    factor: float = 1.0
    kind: str = "tree"  # tree, forest, neighbours, linear or families
    k: int = 1


def fit_dispatch(
    X: np.ndarray,
    cost: np.ndarray,
    T: np.ndarray,
    ok: np.ndarray,
    *,
    classifier: str = "auto",
    max_depth: int = 4,
    max_columns: int = 4,
    n_trees: int = 5,
    n_folds: int = 4,
    seed: int = 0,
    groups: Any = None,
    guard: bool = True,
    tolerance: float = 0.05,
    resampled: np.ndarray | None = None,
    size_columns: Sequence[int] | None = None,
    required_column: int | None = None,
    column_groups: Sequence[Sequence[int]] | None = None,
) -> DispatchFit:
    """Choose columns and fit the dispatch model, minimising total time including feature costs.

    Every candidate (a column set, a depth, with or without a guard) is scored by two
    cross-validations added together: random folds (inputs like the training ones) and, when
    ``groups`` name at least two groups, leave-one-group-out (each group in turn is an unseen family:
    a column that separates the training families but sends a new one to a bad landmark loses there).

    Args:
        X: ``(n_inputs, n_columns)`` feature values.
        cost: ``(n_inputs, n_columns)`` seconds to compute each value (0 for cheap features).
        T: ``(n_inputs, n_landmarks)`` median seconds of each landmark on each input.
        ok: ``(n_inputs, n_landmarks)``: the landmark ran correctly (and accurately enough) there.
        classifier: ``"tree"`` (one decision tree), ``"forest"`` (a small random forest),
            ``"neighbours"`` (least regret among the nearest training inputs, :class:`NeighbourModel`),
            ``"linear"`` (each landmark's slowdown predicted linearly, :class:`LinearModel`),
            ``"families"`` (least regret on the nearest training family, :class:`FamilyModel`; needs
            ``groups`` of at least two families) or ``"auto"`` (all of them, the best by
            cross-validation).
        max_depth: Depth limit of every tree (depth 2 is tried too).
        max_columns: Most columns the greedy search keeps.
        n_trees: Trees of a forest.
        n_folds: Random folds of the cross-validation that scores each candidate.
        seed: Seed of the folds and the trees.
        groups: Group (family) of each input, for leave-one-group-out; None: random folds only.
        guard: Also try the model behind an out-of-distribution guard (:class:`GuardedModel`) that
            sends an input far from every training input to the most robust landmark.
        tolerance: Landmarks within this fraction of an input's fastest count as equally good for it;
            the most robust of them is its label.
        resampled: ``(n_samples, n_inputs, n_columns)``: the columns read again on repeated samples of
            each input (other offsets of the same sampling level; a column that cannot be resampled
            holds its one value). Every held-out input is then scored once per sample as well, and
            the scores added: a model whose thresholds a sample's noise can cross pays for the inputs
            that noise misroutes, so a level too noisy for its thresholds is not chosen; and among
            columns the scores cannot tell apart (totals within 1%), the steadiest is taken.
        size_columns: Columns that measure the input's size (an increasing function of it). The
            out-of-distribution distances read an input larger than every training input as the
            largest one: how a landmark's time grows past the training sizes is the asymptotic
            check's to judge (:mod:`perftune.adapt._growth`), and a guard that sent every larger
            input to the fallback would overrule it. A family model matches an input's size on them.
        required_column: The column holding each input's accuracy requirement (``tune_inputs(
            required_levels=...)``): a family model takes a family's inputs of the least requirement
            at or above the input's. Never compared for resemblance.
        column_groups: The columns of each feature (its sampling levels), for the family model, which
            reads one level of every feature (:func:`_family_columns`); None: each column alone.
    """
    if classifier not in ("auto", "tree", "forest", "neighbours", "linear", "families"):
        raise AdaptError(
            "tune_inputs: classifier must be 'auto', 'tree', 'forest', 'neighbours', 'linear' or "
            f"'families', got {classifier!r}"
        )
    n, n_columns = X.shape
    if T.shape[0] != n or cost.shape != X.shape or ok.shape != T.shape:
        raise AdaptError("tune_inputs: feature, cost and time tables disagree on the number of inputs")
    if resampled is not None and (resampled.ndim != 3 or resampled.shape[1:] != X.shape):
        raise AdaptError("tune_inputs: resampled feature values must be (n_samples, n_inputs, n_columns)")
    # The values each held-out input is scored on: its own, then those of its repeated samples.
    versions = [X] if resampled is None else [X, *(np.asarray(r, dtype=float) for r in resampled)]
    # Each column's noise: the spread of its repeated samples, in units of its spread over the inputs.
    stacked = np.stack(versions)
    spread = X.std(axis=0)
    noise = stacked.std(axis=0).mean(axis=0) / np.where(spread > 0, spread, 1.0)
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    n_folds = max(2, min(n_folds, n))
    everything = np.arange(n)
    splits = [order[f::n_folds] for f in range(n_folds)]
    labels = np.zeros(n, dtype=str)
    distinct: list[str] = []
    if groups is not None:
        labels = np.asarray([str(g) for g in groups])
        if len(labels) != n:
            raise AdaptError(f"tune_inputs: groups has {len(labels)} entries for {n} inputs")
        distinct = sorted(set(labels.tolist()))
        if len(distinct) >= 2:
            splits += [np.flatnonzero(labels == g) for g in distinct]
    mean_cost = cost.mean(axis=0)
    measured = [c for c in range(n_columns) if mean_cost[c] > 0]
    cheapest = min((mean_cost[c] for c in measured), default=0.0)
    cheap_columns = [c for c in range(n_columns) if mean_cost[c] <= 2 * cheapest]
    sizes_at = frozenset(int(c) for c in (size_columns or ()))
    tree_kind = "forest" if classifier == "forest" else "tree"
    fit_kw = {"classifier": tree_kind, "n_trees": n_trees, "seed": seed, "tolerance": tolerance}

    family_columns = _family_columns(column_groups, n_columns, noise, mean_cost, sizes_at, required_column,
                                     varies=spread > 0)

    def build(columns: list[int], variant: _Variant, rows: np.ndarray) -> Model:
        if variant.kind == "families":
            return _families(X, cost, T, ok, columns, rows, labels, sorted(sizes_at), required_column)
        if variant.kind == "linear":
            return _linear(X, T, ok, columns, rows)
        if variant.kind == "neighbours":
            return _neighbours(X, T, ok, columns, rows, variant.k, variant.factor if variant.guard else None,
                               sizes_at)
        model = _fit(X, T, ok, columns, rows, max_depth=variant.depth, **fit_kw)  # type: ignore[arg-type]
        if variant.guard is None or not model.columns:
            return model
        watched = sorted(model.columns if variant.guard == "tree" else model.columns | set(cheap_columns))
        return _guarded(model, X, T, ok, watched, rows, variant.factor, sizes_at)

    def cv(columns: list[int], variant: _Variant) -> tuple[int, float]:
        wrong, total = 0, 0.0
        for test in splits:
            train = np.setdiff1d(everything, test)
            if len(train) == 0:
                continue
            model = build(columns, variant, train)
            for values in versions:
                w, t = score_model(model, values, cost, T, ok, test)
                wrong, total = wrong + w, total + t / len(versions)
        return wrong, total

    def better(score: tuple[int, float], incumbent: tuple[int, float]) -> bool:
        # By a margin: cross-validation on few inputs is itself noisy, and the simpler candidate comes first.
        return score[0] < incumbent[0] or (score[0] == incumbent[0] and score[1] < incumbent[1] * 0.99)

    def greedy(variant: _Variant) -> list[tuple[list[int], tuple[int, float]]]:
        """Forward selection of columns for ``variant``: each kept column must pay for itself (a family
        model reads its fixed columns instead: see :func:`_family_columns`)."""
        if variant.kind == "families":
            return [(family_columns, cv(family_columns, variant))]
        selected: list[int] = []
        best = cv(selected, variant)
        path = [(list(selected), best)]
        while len(selected) < min(max_columns, n_columns):
            trials = [(cv([*selected, c], variant), c) for c in range(n_columns) if c not in selected]
            if not trials:
                break
            score, column = min(trials, key=lambda t: (t[0][0], t[0][1], t[1]))
            # Columns that cross-validation cannot tell apart (same wrong choices, totals within 1%)
            # are told apart by their noise: the steadiest over repeated samples is the one whose
            # thresholds hold on inputs unlike the training ones, where a noisy level is read anew.
            ties = [t for t in trials if t[0][0] == score[0] and t[0][1] <= score[1] * 1.01]
            score, column = min(ties, key=lambda t: (float(noise[t[1]]), t[0][1], t[1]))
            if not better(score, best):
                break
            selected.append(column)
            best = score
            path.append((list(selected), best))
        return path

    # Base shapes, each with its own column search (a guarded model may profit from a column that an
    # unguarded one cannot afford: the guard is what keeps it from misrouting a new family); then, on
    # every column set a search passed through, the variants of the same base.
    bases: list[tuple[_Variant, list[_Variant]]] = []
    if classifier in ("auto", "tree", "forest"):
        def tree(depth: int, watched: str | None = None, factor: float = 1.0) -> _Variant:
            guarded = f", guard on the {watched} columns x{factor:g}" if watched else ""
            return _Variant(f"{tree_kind}, depth {depth}{guarded}", depth, watched, factor, kind=tree_kind)

        shallow = [2] if max_depth > 2 else []
        bases.append((tree(max_depth), [tree(d) for d in shallow]))
        if guard:
            for watched in ("tree", "cheap"):
                bases.append((tree(max_depth, watched), [tree(max_depth, watched, 2.0)]
                              + [tree(d, watched, f) for d in shallow for f in (1.0, 2.0)]))
    if classifier in ("auto", "neighbours"):
        def nearest(k: int, factor: float | None = None) -> _Variant:
            guarded = f", guard x{factor:g}" if factor is not None else ""
            return _Variant(f"least regret of {k} nearest{guarded}", 0, None if factor is None else "own",
                            1.0 if factor is None else factor, kind="neighbours", k=k)

        for k in (1, 3):
            bases.append((nearest(k), [nearest(5)] if k == 3 else []))
            if guard:
                bases.append((nearest(k, 1.0), [nearest(k, 2.0)]))
    if classifier in ("auto", "linear"):
        bases.append((_Variant("linear slowdowns", 0, kind="linear"), []))
    if classifier in ("auto", "families") and len(distinct) >= 2:
        bases.append((_Variant("least regret on the nearest family", 0, kind="families"), []))
    elif classifier == "families":
        raise AdaptError("tune_inputs: classifier 'families' needs groups naming at least two families")
    scores: list[tuple[str, int, float]] = []
    chosen: tuple[list[int], _Variant, tuple[int, float]] | None = None
    steps: list[tuple[list[int], int, float]] = []
    for plain, shapes in bases:
        path = greedy(plain)
        if not steps:
            steps = [(cols, sc[0], sc[1]) for cols, sc in path]
        for columns, score in path:
            candidates = [(plain, score)] + [(v, cv(columns, v)) for v in shapes if columns]
            for variant, sc in candidates:
                scores.append((f"{variant.name} on {len(columns)} columns", sc[0], sc[1]))
                if chosen is None or better(sc, chosen[2]):
                    chosen = (list(columns), variant, sc)
    assert chosen is not None
    columns, variant, score = chosen
    model = build(columns, variant, everything)
    used = model.columns
    return DispatchFit(
        model=model,
        selected=[c for c in columns if c in used],
        cv_total_s=score[1],
        cv_wrong=score[0],
        steps=steps,
        variant=variant.name if columns else "one landmark for every input (no column pays for itself)",
        scores=scores,
    )
