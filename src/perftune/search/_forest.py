"""Regression forests in numpy: the surrogate of the model-based technique, without scikit-learn.

The trees are CART regression trees (squared error) as scikit-learn grows them, with two splitters:

- ``"best"``: at each node, every threshold between consecutive distinct values of each candidate
  feature is scored, and the best split is kept (a random forest when the trees are grown on bootstrap
  samples);
- ``"random"``: one threshold drawn uniformly between the node's smallest and largest value of each
  candidate feature (extremely randomised trees).

Candidate features: at each node, ``max(1, int(max_features * n_features))`` features drawn without
replacement, and more only until one of them is not constant in the node; the constant ones are drawn
but not scored (scikit-learn's rule: a tree over few discrete values stays as random as its trees).
Trees grow until a node is pure, smaller than twice ``min_samples_leaf``, or has no valid split; a leaf
predicts the mean of its training values.

All the trees of a forest grow together, one level at a time, with array operations over every node of
that level: a forest of 16 trees on a few hundred points fits in milliseconds, and importing this module
costs nothing (scikit-learn's import takes about a second, which a short tuning run would wait for).
Each feature column keeps its rows sorted by (node, value) from level to level (a stable partition), so
the best-split search is a cumulative sum, not a sort, per level.

Example:
    >>> import numpy as np
    >>> x = np.array([[0.0], [0.1], [0.8], [0.9]], dtype=np.float32)
    >>> y = np.array([1.0, 1.0, 5.0, 5.0])
    >>> forest = grow_forest(x, y, seed=[0], n_trees=1, splitter="best")
    >>> forest.predict(np.array([[0.05], [0.95]], dtype=np.float32)).tolist()
    [[1.0], [5.0]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Forest", "grow_forest"]

_FEATURE_EPS = 1e-7  # values closer than this are one value (as scikit-learn's FEATURE_THRESHOLD)


def _per_row(op: np.ufunc, a: np.ndarray) -> np.ndarray:
    """``op.reduce(a, axis=1)`` (``np.maximum`` or ``np.minimum``: exact), column by column: numpy
    reduces a short last axis several times slower (2,800 x 14: 210 us against 45)."""
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        op(out, a[:, j], out=out)
    return out


class Forest:
    """Fitted trees as flat node arrays (every tree's nodes in one set of arrays).

    A node's right child is its left child + 1. A leaf is its own left child with threshold ``+inf``,
    so a descent that reaches it stays there.
    """

    __slots__ = ("feature", "threshold", "left", "value", "roots", "depth", "is_leaf")

    def __init__(
        self,
        feature: np.ndarray,
        threshold: np.ndarray,
        left: np.ndarray,
        value: np.ndarray,
        roots: np.ndarray,
        depth: int,
    ) -> None:
        self.is_leaf = feature < 0
        self.feature = np.where(self.is_leaf, 0, feature).astype(np.intp)
        self.threshold = np.where(self.is_leaf, np.inf, threshold)
        own = np.arange(feature.size, dtype=np.intp)
        self.left = np.where(self.is_leaf, own, left).astype(np.intp)  # the right child is left + 1
        self.value = value
        self.roots = roots.astype(np.intp)
        self.depth = depth

    def __len__(self) -> int:
        return int(self.roots.size)

    @property
    def n_nodes(self) -> int:
        return int(self.value.size)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions of every tree for every row: an array of shape (trees, rows)."""
        return np.asarray(self.value[self.apply(x)], dtype=np.float64)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """The leaf each row reaches in each tree (node indices): an array of shape (trees, rows)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[1] == 0:
            x = np.zeros((x.shape[0], 1))  # as grown: one constant column
        n_rows, n_cols = x.shape
        n_trees = self.roots.size
        flat = x.ravel()
        cur = np.repeat(self.roots, n_rows)
        base = np.tile(np.arange(n_rows, dtype=np.intp) * n_cols, n_trees)
        todo = np.arange(cur.size, dtype=np.intp)  # entries not yet at a leaf
        out = np.empty(cur.size, dtype=np.intp)
        feature, threshold, left = self.feature, self.threshold, self.left
        for step in range(self.depth):
            # A right child is its left sibling + 1; a leaf is its own left child, threshold +inf.
            cur = left[cur] + (flat[base + feature[cur]] > threshold[cur])
            if step % 3 == 2 or step == self.depth - 1:
                done = self.is_leaf[cur]
                if done.any():
                    out[todo[done]] = cur[done]
                    inner = ~done
                    todo, cur, base = todo[inner], cur[inner], base[inner]
                    if todo.size == 0:
                        break
        out[todo] = cur
        return out.reshape(n_trees, n_rows)


def grow_forest(
    x: np.ndarray,
    y: np.ndarray,
    *,
    seed: Sequence[int] | int,
    n_trees: int,
    samples: Sequence[np.ndarray] | None = None,
    splitter: str = "best",
    max_features: float = 1.0,
    min_samples_leaf: int = 1,
) -> Forest:
    """Grow ``n_trees`` regression trees on ``x`` (rows, features) and ``y``.

    Args:
        seed: Seeds the feature draws (and the random thresholds): the same seed, the same forest.
        samples: Each tree's training rows (indices into ``x``, repeats allowed: a bootstrap sample);
            default every row for every tree.
        splitter: ``"best"`` or ``"random"`` (see the module's docstring).
        max_features: Fraction of the features that are candidates at each node.
        min_samples_leaf: Fewest training rows in a leaf.
    """
    if splitter not in ("best", "random"):
        raise ValueError(f"splitter must be 'best' or 'random', got {splitter!r}")
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape[1] == 0:
        x = np.zeros((x.shape[0], 1))  # no features: one constant column, so every tree is one leaf
    n, d = x.shape
    rng = np.random.default_rng(seed)
    if samples is None:
        samples = [np.arange(n)] * n_trees
    src = np.concatenate([np.asarray(s, dtype=np.intp) for s in samples])
    sizes = [len(s) for s in samples]
    xr = x[src]  # one row per (tree, training row)
    yr = y[src]
    n_cand = max(1, int(max_features * d))
    msl = max(1, int(min_samples_leaf))

    # Node arrays (grown as nodes are made); the roots come first, one per tree.
    feature: list[np.ndarray] = []
    threshold: list[np.ndarray] = []
    left: list[np.ndarray] = []
    value: list[np.ndarray] = []
    roots = np.arange(n_trees, dtype=np.intp)
    n_made = n_trees

    # The active nodes of this level: their rows' counts, and `order`, node-major and by value per column.
    counts = np.asarray(sizes, dtype=np.intp)
    tree_of_row = np.repeat(np.arange(n_trees), counts)
    cols = np.arange(d)
    order = np.empty((len(src), d), dtype=np.intp)
    for j in range(d):
        order[:, j] = np.lexsort((xr[:, j], tree_of_row))
    depth = 0
    while counts.size:
        k = counts.size
        starts = np.zeros(k, dtype=np.intp)
        np.cumsum(counts[:-1], out=starts[1:])
        pos_node = np.repeat(np.arange(k), counts)
        y0 = yr[order[:, 0]]
        total = np.add.reduceat(y0, starts)
        mean = total / counts
        ymin = np.minimum.reduceat(y0, starts)
        ymax = np.maximum.reduceat(y0, starts)
        f_out = np.full(k, -1, dtype=np.intp)
        t_out = np.zeros(k)
        splits = (counts >= max(2, 2 * msl)) & (ymax - ymin > 1e-12 * np.maximum(1.0, np.abs(ymax)))
        if splits.any():
            v = xr[order, cols]  # (rows, features), each column sorted by value within each node
            ends = starts + counts - 1
            nonconst = v[ends] - v[starts] > _FEATURE_EPS  # (nodes, features)
            # The features in a random order; the first n_cand of them are drawn, constant ones
            # included, and more only until one is not constant (as scikit-learn draws them): where
            # most features are constant, as deep in a tree over few discrete values, few are scored.
            keys = rng.random((k, d))
            rank = np.empty((k, d), dtype=np.intp)
            np.put_along_axis(rank, np.argsort(keys, axis=1), cols[None, :], axis=1)
            first = _per_row(np.minimum, np.where(nonconst, rank, d))
            cand = nonconst & (rank < np.maximum(n_cand, first + 1)[:, None])
            if splitter == "best":
                csum = np.cumsum(yr[order], axis=0)
                prefix = csum[starts - 1]  # the sums before each node's first row
                prefix[starts == 0] = 0.0
                lsum = csum - prefix[pos_node]
                ln = (np.arange(pos_node.size) - starts[pos_node] + 1)[:, None].astype(np.float64)
                rn = counts[pos_node][:, None] - ln
                rsum = total[pos_node][:, None] - lsum
                gap = np.zeros(v.shape, dtype=bool)  # a threshold fits between this row's value and the next
                np.greater(v[1:], v[:-1] + _FEATURE_EPS, out=gap[:-1])
                ok = (ln >= msl) & (rn >= msl) & gap & cand[pos_node]
                with np.errstate(divide="ignore", invalid="ignore"):
                    lsum *= lsum
                    lsum /= ln
                    rsum *= rsum
                    rsum /= np.maximum(rn, 1)
                    lsum += rsum
                score = np.where(ok, lsum, -np.inf)
                # Per row: the best column, ties to the feature drawn first; per node: the best row.
                row_best = _per_row(np.maximum, score)
                node_best = np.maximum.reduceat(row_best, starts)
                hits = np.flatnonzero((row_best == node_best[pos_node]) & np.isfinite(row_best))
                if hits.size:
                    lead = np.ones(hits.size, dtype=bool)  # the first best row of each node
                    lead[1:] = pos_node[hits[1:]] != pos_node[hits[:-1]]
                    at = hits[lead]
                    nodes = pos_node[at]
                    tie = score[at] >= row_best[at, None]
                    j = np.argmin(np.where(tie, keys[nodes], 3.0), axis=1)
                    lo, hi = v[at, j], v[at + 1, j]
                    thr = (lo + hi) / 2.0
                    thr = np.where(thr >= hi, lo, thr)
                    f_out[nodes] = j
                    t_out[nodes] = thr
            else:
                vmin, vmax = v[starts], v[ends]
                thr = vmin + rng.random((k, d)) * (vmax - vmin)
                thr = np.where(thr >= vmax, vmin, thr)
                goes = v <= thr[pos_node]
                ln = np.add.reduceat(goes.astype(np.float64), starts, axis=0)
                lsum = np.add.reduceat(np.where(goes, yr[order], 0.0), starts, axis=0)
                rn = counts[:, None] - ln
                rsum = total[:, None] - lsum
                ok = (ln >= msl) & (rn >= msl) & cand
                with np.errstate(divide="ignore", invalid="ignore"):
                    score = np.where(ok, lsum * lsum / ln + rsum * rsum / rn, -np.inf)
                best = _per_row(np.maximum, score)
                tie = score >= best[:, None]
                j = np.argmin(np.where(tie, keys, 3.0), axis=1)
                found = np.isfinite(best)
                f_out[found] = j[found]
                t_out[found] = thr[found, j[found]]
            f_out[~splits] = -1
        split = f_out >= 0
        n_split = int(split.sum())
        child_left = np.full(k, -1, dtype=np.intp)
        child_left[split] = n_made + 2 * np.arange(n_split)
        feature.append(f_out)
        threshold.append(t_out)
        left.append(child_left)
        value.append(mean)
        n_made += 2 * n_split
        if n_split == 0:
            break
        depth += 1
        # Children: the rows of each split node, left then right, every column kept in value order.
        keep = split[pos_node]
        order = order[keep]
        rows = order[:, 0]
        node_of_row = pos_node[keep]
        goes_left = xr[rows, f_out[node_of_row]] <= t_out[node_of_row]
        child_rank = np.cumsum(split) - 1  # index of each split node among the split nodes
        child = np.full(len(src), -1, dtype=np.intp)
        child[rows] = 2 * child_rank[node_of_row] + (~goes_left)
        key = child[order]
        key = key.astype(np.uint16) if 2 * n_split <= 65535 else key
        order = np.take_along_axis(order, np.argsort(key, axis=0, kind="stable"), axis=0)
        counts = np.bincount(child[rows], minlength=2 * n_split).astype(np.intp)
    # The node arrays were appended level by level, in the order the nodes were numbered.
    return Forest(
        np.concatenate(feature),
        np.concatenate(threshold),
        np.concatenate(left),
        np.concatenate(value),
        roots,
        depth + 1,
    )
