"""Dispatch models as plain data: decision trees (one, or a small forest) and nearest centroids.

A fitted scikit-learn tree is exported to five flat lists (children, feature, threshold, leaf
label) and walked in plain Python at dispatch time, without scikit-learn, so loading a dispatcher
imports nothing heavy and one decision costs a few microseconds plus the features it reads. A
feature is computed only when the walk reaches a node that tests it, so a cheap feature near the
root can spare an expensive one further down.

Example:
    >>> tree = TreeModel(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1],
    ...                  threshold=[0.5, 0.0, 0.0], leaf=[-1, 0, 1])
    >>> tree.choose(lambda column: 0.9)
    1
    >>> tree.visited(lambda column: 0.1)
    [0]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from perftune._jsonfile import shown
from perftune.adapt._features import AdaptError

__all__ = [
    "CentroidModel",
    "FamilyModel",
    "ForestModel",
    "GuardedModel",
    "LinearModel",
    "NeighbourModel",
    "TreeModel",
    "model_from_dict",
]


#: :meth:`FamilyModel.near_ties`: landmarks whose mean regret on a family's largest training inputs is
#: within this log ratio (about 5%) of the one that runs there tie with it ...
NEAR_TIE_WITHIN = 0.05
#: ... when on some training input of the largest size they are more than this log ratio (2x) apart.
NEAR_TIE_APART = math.log(2.0)


def _standardised(value: Callable[[int], float], columns: Sequence[int], center: Sequence[float],
                  scale: Sequence[float], size_high: Sequence[float | None] | None) -> list[float]:
    """The input's standardised columns; a size column (``size_high``) at most its largest training value."""
    highs = size_high or [None] * len(columns)
    out = []
    for c, m, s, h in zip(columns, center, scale, highs, strict=True):
        z = (value(c) - m) / s
        out.append(z if h is None or z <= h else h)
    return out


def _squared_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """Squared Euclidean distance of two points of the same length."""
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True))


@dataclass
class TreeModel:
    """A binary decision tree: node ``i`` tests ``value(feature[i]) <= threshold[i]``.

    Attributes:
        left: Child taken when the test holds; ``-1`` at a leaf.
        right: Child taken otherwise; ``-1`` at a leaf.
        feature: Column index tested at the node; ``-1`` at a leaf.
        threshold: Threshold of the test (unused at a leaf).
        leaf: Landmark index at a leaf; ``-1`` at an inner node.
    """

    left: list[int]
    right: list[int]
    feature: list[int]
    threshold: list[float]
    leaf: list[int]

    def __post_init__(self) -> None:
        n = len(self.left)
        if n == 0 or not all(len(v) == n for v in (self.right, self.feature, self.threshold, self.leaf)):
            raise AdaptError("dispatcher tree: node arrays are empty or of different lengths")
        for i in range(n):
            inner = self.feature[i] >= 0
            kids = (self.left[i], self.right[i])
            if inner and not all(i < k < n for k in kids):
                raise AdaptError(f"dispatcher tree: node {i} has children {list(kids)} out of order")
            if not inner and self.leaf[i] < 0:
                raise AdaptError(f"dispatcher tree: leaf {i} has no landmark")
            if inner and not math.isfinite(self.threshold[i]):
                raise AdaptError(f"dispatcher tree: node {i} has threshold {self.threshold[i]!r}, not finite")

    @classmethod
    def constant(cls, landmark: int) -> TreeModel:
        """A tree with one leaf: every input runs ``landmark`` and no feature is computed."""
        return cls(left=[-1], right=[-1], feature=[-1], threshold=[0.0], leaf=[landmark])

    @classmethod
    def from_sklearn(cls, estimator: Any, columns: Sequence[int], classes: Sequence[int]) -> TreeModel:
        """Export a fitted ``DecisionTreeClassifier``.

        Args:
            estimator: The fitted classifier.
            columns: Global column index of each of the estimator's input features.
            classes: Landmark index of each of the estimator's classes (``estimator.classes_`` order).
        """
        t = estimator.tree_
        leaf_class = t.value[:, 0, :].argmax(axis=1)
        left, right, feature, threshold, leaf = [], [], [], [], []
        for i in range(t.node_count):
            inner = int(t.children_left[i]) != -1
            left.append(int(t.children_left[i]))
            right.append(int(t.children_right[i]))
            feature.append(int(columns[int(t.feature[i])]) if inner else -1)
            threshold.append(float(t.threshold[i]) if inner else 0.0)
            leaf.append(-1 if inner else int(classes[int(leaf_class[i])]))
        return cls(left=left, right=right, feature=feature, threshold=threshold, leaf=leaf)

    @property
    def columns(self) -> set[int]:
        """Every column some node tests."""
        return {f for f in self.feature if f >= 0}

    def choose(self, value: Callable[[int], float]) -> int:
        """Walk the tree; ``value(column)`` computes (or recalls) one feature of the input."""
        left, right, feature, threshold = self.left, self.right, self.feature, self.threshold
        node = 0
        f = feature[0]
        while f >= 0:
            node = left[node] if value(f) <= threshold[node] else right[node]
            f = feature[node]
        return self.leaf[node]

    def visited(self, value: Callable[[int], float]) -> list[int]:
        """The columns the walk reads for one input (what dispatching it costs)."""
        seen: list[int] = []
        node = 0
        while self.feature[node] >= 0:
            f = self.feature[node]
            if f not in seen:
                seen.append(f)
            node = self.left[node] if value(f) <= self.threshold[node] else self.right[node]
        return seen

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "tree",
            "left": self.left,
            "right": self.right,
            "feature": self.feature,
            "threshold": self.threshold,
            "leaf": self.leaf,
        }


@dataclass
class ForestModel:
    """A small forest: each tree votes, the most votes win (ties: the lowest landmark index)."""

    trees: list[TreeModel]

    def __post_init__(self) -> None:
        if not self.trees:
            raise AdaptError("dispatcher forest: no trees")
        if not all(isinstance(t, TreeModel) for t in self.trees):
            raise AdaptError("dispatcher forest: a forest holds trees only")

    @property
    def columns(self) -> set[int]:
        return set().union(*(t.columns for t in self.trees))

    def choose(self, value: Callable[[int], float]) -> int:
        votes: dict[int, int] = {}
        for t in self.trees:
            k = t.choose(value)
            votes[k] = votes.get(k, 0) + 1
        return min(votes, key=lambda k: (-votes[k], k))

    def visited(self, value: Callable[[int], float]) -> list[int]:
        seen: list[int] = []
        for t in self.trees:
            seen.extend(c for c in t.visited(value) if c not in seen)
        return seen

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "forest", "trees": [t.to_dict() for t in self.trees]}


@dataclass
class CentroidModel:
    """The one-level method: compute every column, run the landmark of the nearest cluster centre.

    Attributes:
        center: Per column, the value subtracted before scaling.
        scale: Per column, the divisor (standardisation of the training inputs).
        centroids: Cluster centres in the standardised space.
        landmark: Landmark index of each cluster.
    """

    center: list[float]
    scale: list[float]
    centroids: list[list[float]]
    landmark: list[int]

    def __post_init__(self) -> None:
        n = len(self.center)
        if len(self.scale) != n or not self.centroids or any(len(c) != n for c in self.centroids):
            raise AdaptError("dispatcher centroids: arrays of different lengths")
        if len(self.landmark) != len(self.centroids):
            raise AdaptError("dispatcher centroids: one landmark per centroid is needed")
        if any(not s > 0 for s in self.scale):
            raise AdaptError("dispatcher centroids: every scale must be > 0")

    @property
    def columns(self) -> set[int]:
        return set(range(len(self.center)))

    def choose(self, value: Callable[[int], float]) -> int:
        z = [(value(i) - c) / s for i, (c, s) in enumerate(zip(self.center, self.scale, strict=True))]
        best = min(range(len(self.centroids)), key=lambda k: _squared_distance(z, self.centroids[k]))
        return self.landmark[best]

    def visited(self, value: Callable[[int], float]) -> list[int]:
        return list(range(len(self.center)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "centroids",
            "center": self.center,
            "scale": self.scale,
            "centroids": self.centroids,
            "landmark": self.landmark,
        }


@dataclass
class GuardedModel:
    """A tree or forest behind an out-of-distribution guard.

    An input whose guard columns put it farther than ``radius`` from every training input (in the
    standardised space of those columns) is unlike anything the inner model learned from: it runs the
    ``fallback`` landmark, the one with the best worst-case ratio to the fastest landmark over the
    training inputs, instead of whatever leaf the inner model's thresholds happen to send it to.

    Attributes:
        inner: The tree or forest used inside the training distribution.
        guard: Columns the guard reads (global indices).
        center: Per guard column, the value subtracted before scaling.
        scale: Per guard column, the divisor.
        points: Standardised training inputs on the guard columns.
        radius: Distance to the nearest training input beyond which the fallback runs.
        fallback: The robust landmark.
        size_high: Per guard column, None, or (for a column that measures the input's size) the largest
            standardised training value: a larger input reads as that large, since inputs beyond the
            training sizes are the asymptotic check's to judge, not the guard's.
    """

    inner: TreeModel | ForestModel
    guard: list[int]
    center: list[float]
    scale: list[float]
    points: list[list[float]]
    radius: float
    fallback: int
    size_high: list[float | None] | None = None

    def __post_init__(self) -> None:
        n = len(self.guard)
        if n == 0 or len(self.center) != n or len(self.scale) != n:
            raise AdaptError("dispatcher guard: columns, center and scale differ in length or are empty")
        if not self.points or any(len(p) != n for p in self.points):
            raise AdaptError("dispatcher guard: training points missing or of the wrong length")
        if not self.radius >= 0 or any(s <= 0 for s in self.scale):
            raise AdaptError("dispatcher guard: radius must be >= 0 and every scale > 0")
        if self.size_high is not None and len(self.size_high) != n:
            raise AdaptError("dispatcher guard: size_high needs one entry per guard column")

    @property
    def columns(self) -> set[int]:
        return set(self.guard) | self.inner.columns

    def distance(self, value: Callable[[int], float]) -> float:
        """Distance from the input to its nearest training input, on the guard columns."""
        z = _standardised(value, self.guard, self.center, self.scale, self.size_high)
        nearest: float = min(_squared_distance(z, p) for p in self.points)
        return math.sqrt(nearest)

    def choose(self, value: Callable[[int], float]) -> int:
        if self.distance(value) > self.radius:
            return self.fallback
        return self.inner.choose(value)

    def visited(self, value: Callable[[int], float]) -> list[int]:
        seen = list(dict.fromkeys(self.guard))
        if self.distance(value) <= self.radius:
            seen.extend(c for c in self.inner.visited(value) if c not in seen)
        return seen

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "guarded",
            "inner": self.inner.to_dict(),
            "guard": self.guard,
            "center": self.center,
            "scale": self.scale,
            "points": self.points,
            "radius": self.radius,
            "fallback": self.fallback,
            **({"size_high": self.size_high} if self.size_high is not None else {}),
        }


@dataclass
class NeighbourModel:
    """Least regret among the nearest training inputs: a risk-aware rule that degrades gracefully.

    For an input, the ``k`` training inputs nearest to it (standardised ``columns``) are looked up, and
    the landmark with the smallest summed *ratio* to the fastest landmark on those neighbours runs: when
    the neighbours agree, that is their landmark; when they disagree (an input between families), it
    is the landmark that is never far off on any of them, not the one a threshold happens to pick.
    Farther than ``radius`` from every training input, the input is out of the training distribution
    and runs ``fallback`` (the landmark with the best worst case over all training inputs).

    Attributes:
        features: Columns read (global indices).
        center: Per column, the value subtracted before scaling.
        scale: Per column, the divisor.
        points: Standardised training inputs.
        ratio: Per training input, each landmark's time over the fastest (a large number for no answer).
        k: Neighbours consulted.
        radius: Out-of-distribution distance, or None for no guard.
        fallback: The robust landmark.
        size_high: As :class:`GuardedModel`'s: per column, None or the largest standardised training
            value of a size column (a larger input reads as that large).
    """

    features: list[int]
    center: list[float]
    scale: list[float]
    points: list[list[float]]
    ratio: list[list[float]]
    k: int
    radius: float | None
    fallback: int
    size_high: list[float | None] | None = None

    def __post_init__(self) -> None:
        n = len(self.features)
        if n == 0 or len(self.center) != n or len(self.scale) != n or any(s <= 0 for s in self.scale):
            raise AdaptError("dispatcher neighbours: columns, center, scale empty, unequal or a scale <= 0")
        shapes_ok = all(len(p) == n for p in self.points) and len(self.ratio) == len(self.points)
        shapes_ok = shapes_ok and bool(self.points)
        if not shapes_ok:
            raise AdaptError("dispatcher neighbours: training points and ratios missing or misshapen")
        widths = {len(r) for r in self.ratio}
        if len(widths) != 1 or 0 in widths:
            raise AdaptError("dispatcher neighbours: every training input needs one ratio per landmark")
        if self.k < 1 or (self.radius is not None and not self.radius >= 0):
            raise AdaptError("dispatcher neighbours: k must be >= 1 and the radius >= 0")
        if self.size_high is not None and len(self.size_high) != n:
            raise AdaptError("dispatcher neighbours: size_high needs one entry per column")

    @property
    def columns(self) -> set[int]:
        return set(self.features)

    @property
    def n_landmarks(self) -> int:
        return len(self.ratio[0])

    def choose(self, value: Callable[[int], float]) -> int:
        z = _standardised(value, self.features, self.center, self.scale, self.size_high)
        d = sorted((_squared_distance(z, p), i) for i, p in enumerate(self.points))
        if self.radius is not None and math.sqrt(d[0][0]) > self.radius:
            return self.fallback
        near = [self.ratio[i] for _, i in d[: self.k]]
        sums = [sum(r[j] for r in near) for j in range(len(near[0]))]
        return min(range(len(sums)), key=lambda j: (sums[j], j))

    def visited(self, value: Callable[[int], float]) -> list[int]:
        return list(dict.fromkeys(self.features))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "neighbours",
            "features": self.features,
            "center": self.center,
            "scale": self.scale,
            "points": self.points,
            "ratio": self.ratio,
            "k": self.k,
            "radius": self.radius,
            "fallback": self.fallback,
            **({"size_high": self.size_high} if self.size_high is not None else {}),
        }


@dataclass
class FamilyModel:
    """Least regret on the nearest training *family*: read an input as the family it most resembles,
    then run what was best on that family at the input's size (and accuracy requirement).

    A decision tree or a nearest-input rule learns thresholds between training inputs; an unseen family
    whose values fall between two training clusters lands on either side of a threshold. This model
    compares the input with each family's centre (the mean of the family's largest training inputs,
    standardised), over every column it reads, so an input is placed by its overall resemblance. Among
    that family's training inputs it then takes, with a ``required`` accuracy column, those of the least
    requirement at or above the input's (the strictest the family has, where none is), and of those the
    ones of the nearest size (``sizes``: size columns); the landmark with the least summed regret on
    them runs.

    Attributes:
        features: Columns compared with the family centres (global indices; no size or requirement).
        center: Per feature, the value subtracted before scaling.
        scale: Per feature, the divisor.
        centroids: Per family, its centre in the standardised space.
        families: Family names (for the report; not used to choose).
        sizes: Size columns (global indices), matched by nearest value.
        required: The accuracy-requirement column, or None.
        at: Per family, per training input: its size-column values.
        level: Per family, per training input: its requirement (ignored without ``required``).
        regret: Per family, per training input: each landmark's log ratio to the fastest (capped; a
            large number for no answer).
        bare_at: Size-column values at which the features are not read: there, on the training inputs
            of that size (of at least two families), knowing the family saved less time than reading
            the columns cost. An input whose nearest training size is one of them runs ``bare_landmark``.
        bare_landmark: For each of ``bare_at``, the landmark with the least total time at that size.
    """

    features: list[int]
    center: list[float]
    scale: list[float]
    centroids: list[list[float]]
    families: list[str]
    sizes: list[int]
    required: int | None
    at: list[list[list[float]]]
    level: list[list[float]]
    regret: list[list[list[float]]]
    bare_at: list[list[float]] | None = None
    bare_landmark: list[int] | None = None

    def __post_init__(self) -> None:
        n = len(self.features)
        if n == 0 or len(self.center) != n or len(self.scale) != n or any(s <= 0 for s in self.scale):
            raise AdaptError("dispatcher families: columns, center, scale empty, unequal or a scale <= 0")
        bare_at, bare_landmark = self.bare_at or [], self.bare_landmark or []
        if len(bare_at) != len(bare_landmark) or any(len(a) != len(self.sizes) for a in bare_at):
            raise AdaptError(
                "dispatcher families: one landmark and one value per size column for each bare size")
        m = len(self.centroids)
        if m == 0 or any(len(c) != n for c in self.centroids):
            raise AdaptError("dispatcher families: no family, or a centre of the wrong length")
        if not (len(self.families) == len(self.at) == len(self.level) == len(self.regret) == m):
            raise AdaptError(
                "dispatcher families: names, sizes, levels and regrets need one entry per family")
        widths = {len(r) for rows in self.regret for r in rows}
        if len(widths) != 1 or 0 in widths:
            raise AdaptError("dispatcher families: every training input needs one regret per landmark")
        for at, level, regret in zip(self.at, self.level, self.regret, strict=True):
            if not regret or len(at) != len(regret) or len(level) != len(regret):
                raise AdaptError("dispatcher families: a family without inputs, or misshapen inputs")
            if any(len(a) != len(self.sizes) for a in at):
                raise AdaptError("dispatcher families: one size value per size column is needed")
        # The distinct training sizes, once: the bare-size test compares an input with each of them.
        self._training_sizes = [list(s) for s in dict.fromkeys(tuple(a) for fam in self.at for a in fam)]

    @property
    def columns(self) -> set[int]:
        extra = set(self.sizes) | ({self.required} if self.required is not None else set())
        return set(self.features) | extra

    @property
    def n_landmarks(self) -> int:
        return len(self.regret[0][0])

    def nearest(self, value: Callable[[int], float]) -> list[int]:
        """Indices of the families whose centre is nearest to the input (several where they tie: the
        columns read cannot tell them apart)."""
        z = _standardised(value, self.features, self.center, self.scale, None)
        d = [_squared_distance(z, c) for c in self.centroids]
        low = min(d)
        return [g for g, v in enumerate(d) if v <= low + 1e-9]

    def _rows(self, g: int, value: Callable[[int], float]) -> list[int]:
        rows = list(range(len(self.regret[g])))
        if self.required is not None:
            need = value(self.required)
            covering = [self.level[g][i] for i in rows if self.level[g][i] >= need - 1e-9]
            at = min(covering) if covering else max(self.level[g])
            rows = [i for i in rows if self.level[g][i] == at]
        if self.sizes:
            here = [value(c) for c in self.sizes]
            gap = {i: _squared_distance(self.at[g][i], here) for i in rows}
            low = min(gap.values())
            rows = [i for i in rows if gap[i] <= low + 1e-12]
        return rows

    def _bare(self, value: Callable[[int], float]) -> int | None:
        """The landmark to run without reading the features, where the input's nearest training size is a
        bare one; else None."""
        if not self.bare_at or not self.sizes:
            return None
        here = [value(c) for c in self.sizes]
        low = min(_squared_distance(s, here) for s in self._training_sizes)
        for at, landmark in zip(self.bare_at, self.bare_landmark or [], strict=True):
            if _squared_distance(at, here) <= low + 1e-12:
                return landmark
        return None

    def choose(self, value: Callable[[int], float]) -> int:
        bare = self._bare(value)
        if bare is not None:
            return bare
        sums = [0.0] * self.n_landmarks
        for g in self.nearest(value):
            for i in self._rows(g, value):
                for k, r in enumerate(self.regret[g][i]):
                    sums[k] += r
        return min(range(len(sums)), key=lambda k: (sums[k], k))

    def near_ties(self, within: float = NEAR_TIE_WITHIN,
                  apart: float = NEAR_TIE_APART) -> dict[str, list[int]]:
        """Per family, the landmark it runs at its largest training size followed by the landmarks that
        tie with it there but are a different kind of program: their mean regret on that family's
        inputs of that size is within ``within`` (log ratio) of it, and on some training input of the
        largest size of all they are more than ``apart`` slower or faster. The training inputs cannot say
        which of the two carries to inputs unlike them (an unseen family near this one); inputs that
        span the family's range of behaviour can. Families without such a tie are left out, and so are
        families where no landmark is within ``within`` of the fastest on those inputs (no landmark is
        fast there, so a tie among the others says nothing)."""
        def largest(g: int) -> list[int]:
            rows = list(range(len(self.regret[g])))
            if not self.sizes:
                return rows
            top = max(self.at[g][i] for i in rows)
            return [i for i in rows if self.at[g][i] == top]

        per_family = [largest(g) for g in range(len(self.families))]
        overall = max((self.at[g][i] for g, rows in enumerate(per_family) for i in rows), default=[])
        at_scale = [self.regret[g][i] for g, rows in enumerate(per_family) for i in rows
                    if not self.sizes or self.at[g][i] == overall]
        out: dict[str, list[int]] = {}
        for (g, name), rows in zip(enumerate(self.families), per_family, strict=True):
            mean = [sum(self.regret[g][i][k] for i in rows) / len(rows) for k in range(self.n_landmarks)]
            best = min(range(len(mean)), key=lambda k: (mean[k], k))
            if mean[best] > within:
                continue  # no landmark is fast on these inputs: ties among slow ones say nothing
            tied = [k for k in range(len(mean)) if k != best and mean[k] <= mean[best] + within
                    and max(abs(r[k] - r[best]) for r in at_scale) > apart]
            if tied:
                out[name] = [best, *tied]
        return out

    def visited(self, value: Callable[[int], float]) -> list[int]:
        if self._bare(value) is not None:
            return list(self.sizes)
        extra = [*self.sizes, *([self.required] if self.required is not None else [])]
        return list(dict.fromkeys([*self.features, *extra]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "families",
            "features": self.features,
            "center": self.center,
            "scale": self.scale,
            "centroids": self.centroids,
            "families": self.families,
            "sizes": self.sizes,
            "required": self.required,
            "at": self.at,
            "level": self.level,
            "regret": self.regret,
            **({"bare_at": self.bare_at, "bare_landmark": self.bare_landmark} if self.bare_at else {}),
        }


@dataclass
class LinearModel:
    """Per landmark, a linear prediction of its slowdown; the landmark predicted least slow runs.

    Each landmark's log ratio to the fastest landmark of an input is fitted as a linear function of the
    standardised columns (ridge regression, weighted by how much time each training input puts at
    stake). Between training families the predictions move smoothly with the features, so an input
    halfway between two families gets the landmark whose predicted slowdown crosses over there, not
    whichever side of a threshold a tree happened to put it; beyond the training inputs each column is
    clipped to the range it had there, so the model does not extrapolate a slope without end.

    Attributes:
        features: Columns read (global indices).
        center: Per column, the value subtracted before scaling.
        scale: Per column, the divisor.
        low: Per column, the smallest standardised training value (inputs are clipped to it).
        high: Per column, the largest standardised training value.
        coef: Per landmark, ``[intercept, slope per column...]`` of its predicted log ratio.

    Example:
        >>> m = LinearModel(features=[0], center=[0.0], scale=[1.0], low=[-1.0], high=[1.0],
        ...                 coef=[[0.0, 1.0], [0.0, -1.0]])
        >>> m.choose(lambda c: -0.5), m.choose(lambda c: 5.0)
        (0, 1)
    """

    features: list[int]
    center: list[float]
    scale: list[float]
    low: list[float]
    high: list[float]
    coef: list[list[float]]

    def __post_init__(self) -> None:
        n = len(self.features)
        lengths = (len(self.center), len(self.scale), len(self.low), len(self.high))
        if n == 0 or any(m != n for m in lengths) or any(not s > 0 for s in self.scale):
            raise AdaptError("dispatcher linear model: columns, center, scale, low, high unequal or empty")
        if not self.coef or any(len(c) != n + 1 for c in self.coef):
            raise AdaptError(
                "dispatcher linear model: every landmark needs an intercept and one slope per column"
            )
        if any(not math.isfinite(v) for c in self.coef for v in c):
            raise AdaptError("dispatcher linear model: coefficients must be finite numbers")

    @property
    def columns(self) -> set[int]:
        return set(self.features)

    @property
    def n_landmarks(self) -> int:
        return len(self.coef)

    def choose(self, value: Callable[[int], float]) -> int:
        bounds = zip(self.features, self.center, self.scale, self.low, self.high, strict=True)
        z = [min(hi, max(lo, (value(c) - m) / s)) for c, m, s, lo, hi in bounds]
        pred = [c[0] + sum(w * v for w, v in zip(c[1:], z, strict=True)) for c in self.coef]
        return min(range(len(pred)), key=lambda j: (pred[j], j))

    def visited(self, value: Callable[[int], float]) -> list[int]:
        return list(dict.fromkeys(self.features))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "linear",
            "features": self.features,
            "center": self.center,
            "scale": self.scale,
            "low": self.low,
            "high": self.high,
            "coef": self.coef,
        }


Model = TreeModel | ForestModel | CentroidModel | GuardedModel | NeighbourModel | LinearModel | FamilyModel


#: A model read from a dispatcher file has at most this many trees in a forest (a learned one has a few) ...
MAX_TREES = 1000
#: ... and a tree at most this many levels (the nodes one decision walks; a learned one has about four).
MAX_TREE_DEPTH = 1000


class _Malformed(Exception):
    """A field of a stored model is wrong; :func:`model_from_dict` says so as an :class:`AdaptError`."""


def _get(doc: dict[str, Any], key: str) -> Any:
    if key not in doc:
        raise _Malformed(f"missing {key!r}")
    return doc[key]


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Malformed(f"{what} must be a list, got {shown(value, 60)}")
    return value


def _int(value: Any, what: str, low: int | None = None) -> int:
    """An integer of the file (not a bool, not a float), at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _Malformed(f"{what} must be an integer, got {shown(value, 60)}")
    out = int(value)
    if low is not None and out < low:
        raise _Malformed(f"{what} is {out}, less than {low}")
    return out


def _float(value: Any, what: str, *, positive: bool = False, low: float | None = None) -> float:
    """A finite number of the file (not a bool): NaN or an infinity would make every comparison moot."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _Malformed(f"{what} must be a number, got {shown(value, 60)}")
    try:
        out = float(value)
    except OverflowError:
        raise _Malformed(f"{what} is {shown(value, 60)}, out of a float's range") from None
    if not math.isfinite(out):
        raise _Malformed(f"{what} is {out!r}, not a finite number")
    if positive and not out > 0:
        raise _Malformed(f"{what} is {out!r}, not > 0")
    if low is not None and out < low:
        raise _Malformed(f"{what} is {out!r}, less than {low:g}")
    return out


def _ints(doc: dict[str, Any], key: str, low: int | None = None) -> list[int]:
    return [_int(v, f"{key}[{i}]", low) for i, v in enumerate(_list(_get(doc, key), key))]


def _floats(doc: dict[str, Any], key: str, **kw: Any) -> list[float]:
    return [_float(v, f"{key}[{i}]", **kw) for i, v in enumerate(_list(_get(doc, key), key))]


def _rows(value: Any, what: str, *, low: float | None = None) -> list[list[float]]:
    """A list of lists of finite numbers."""
    return [[_float(v, f"{what}[{i}][{j}]", low=low) for j, v in enumerate(_list(row, f"{what}[{i}]"))]
            for i, row in enumerate(_list(value, what))]


def _size_high_of(doc: dict[str, Any]) -> list[float | None] | None:
    high = doc.get("size_high")
    if high is None:
        return None
    values = _list(high, "size_high")
    return [None if v is None else _float(v, f"size_high[{i}]") for i, v in enumerate(values)]


def _tree_from(doc: dict[str, Any]) -> tuple[TreeModel, set[int]]:
    """A tree and the landmarks of its leaves; every node checked (kind, children, depth, values)."""
    left, right, feature, leaf = (_ints(doc, k, -1) for k in ("left", "right", "feature", "leaf"))
    threshold = _floats(doc, "threshold")
    n = len(left)
    if n == 0 or not all(len(v) == n for v in (right, feature, threshold, leaf)):
        raise _Malformed("node arrays are empty or of different lengths")
    parents = [0] * n
    depth = [0] * n
    for i in range(n):
        kids = (left[i], right[i])
        if feature[i] >= 0:  # an inner node: two later children, no landmark
            if not all(i < k < n for k in kids):
                raise _Malformed(f"node {i} has children {list(kids)} out of order")
            if leaf[i] != -1:
                raise _Malformed(f"inner node {i} names landmark {leaf[i]} (an inner node has -1)")
            for k in kids:
                parents[k] += 1
                depth[k] = depth[i] + 1
        else:  # a leaf: no children, a landmark
            if kids != (-1, -1):
                raise _Malformed(f"leaf {i} has children {list(kids)} (a leaf has -1, -1)")
            if leaf[i] < 0:
                raise _Malformed(f"leaf {i} has no landmark")
    orphans = [i for i in range(1, n) if parents[i] != 1]
    if orphans or parents[0]:
        i = orphans[0] if orphans else 0
        raise _Malformed(f"node {i} has {parents[i]} parents (every node but the root has one)")
    if max(depth) > MAX_TREE_DEPTH:
        raise _Malformed(f"the tree is {max(depth)} levels deep, more than {MAX_TREE_DEPTH}")
    model = TreeModel(left=left, right=right, feature=feature, threshold=threshold, leaf=leaf)
    return model, {leaf[i] for i in range(n) if feature[i] < 0}


def _forest_from(doc: dict[str, Any]) -> tuple[ForestModel, set[int]]:
    trees = _list(_get(doc, "trees"), "trees")
    if not trees:
        raise _Malformed("no trees")
    if len(trees) > MAX_TREES:
        raise _Malformed(f"{len(trees)} trees, more than {MAX_TREES}")
    parsed: list[TreeModel] = []
    leaves: set[int] = set()
    for i, t in enumerate(trees):
        if not isinstance(t, dict) or t.get("kind") != "tree":  # checked before anything is parsed
            raise _Malformed(f"trees[{i}] is not a tree (a forest holds trees only), got {shown(t, 60)}")
        try:
            tree, its = _tree_from(t)
        except _Malformed as e:
            raise _Malformed(f"trees[{i}]: {e}") from None
        parsed.append(tree)
        leaves |= its
    return ForestModel(parsed), leaves


def _parse(doc: dict[str, Any], kind: Any, n_landmarks: int) -> tuple[Model, set[int]]:
    """The model of ``kind`` in ``doc`` and the landmarks it names; raises :class:`_Malformed`."""
    model: Model
    if kind == "tree":
        return _tree_from(doc)
    if kind == "forest":
        return _forest_from(doc)
    if kind == "guarded":
        inner_doc = _get(doc, "inner")
        inner_kind = inner_doc.get("kind") if isinstance(inner_doc, dict) else None
        if inner_kind not in ("tree", "forest"):  # checked before recursing: nothing nests deeper
            raise AdaptError("dispatcher guard: the inner model must be a tree or a forest")
        try:
            inner, leaves = _tree_from(inner_doc) if inner_kind == "tree" else _forest_from(inner_doc)
        except _Malformed as e:
            raise _Malformed(f"inner {inner_kind}: {e}") from None
        model = GuardedModel(
            inner=inner,
            guard=_ints(doc, "guard", 0),
            center=_floats(doc, "center"),
            scale=_floats(doc, "scale", positive=True),
            points=_rows(_get(doc, "points"), "points"),
            radius=_float(_get(doc, "radius"), "radius", low=0.0),
            fallback=_int(_get(doc, "fallback"), "fallback", 0),
            size_high=_size_high_of(doc),
        )
        return model, leaves | {model.fallback}
    if kind == "neighbours":
        radius = _get(doc, "radius")
        model = NeighbourModel(
            features=_ints(doc, "features", 0),
            center=_floats(doc, "center"),
            scale=_floats(doc, "scale", positive=True),
            points=_rows(_get(doc, "points"), "points"),
            ratio=_rows(_get(doc, "ratio"), "ratio", low=0.0),
            k=_int(_get(doc, "k"), "k", 1),
            radius=None if radius is None else _float(radius, "radius", low=0.0),
            fallback=_int(_get(doc, "fallback"), "fallback", 0),
            size_high=_size_high_of(doc),
        )
        if model.n_landmarks != n_landmarks:
            raise AdaptError(
                f"dispatcher neighbours: ratios for {model.n_landmarks} landmarks, expected {n_landmarks}"
            )
        return model, {model.fallback}
    if kind == "linear":
        model = LinearModel(
            features=_ints(doc, "features", 0),
            center=_floats(doc, "center"),
            scale=_floats(doc, "scale", positive=True),
            low=_floats(doc, "low"),
            high=_floats(doc, "high"),
            coef=_rows(_get(doc, "coef"), "coef"),
        )
        if any(lo > hi for lo, hi in zip(model.low, model.high, strict=True)):
            raise _Malformed("a column's low is above its high")
        if model.n_landmarks != n_landmarks:
            raise AdaptError(
                f"dispatcher linear model: {model.n_landmarks} landmarks, expected {n_landmarks}"
            )
        return model, set()  # every landmark may be chosen; the count was checked above
    if kind == "families":
        required = _get(doc, "required")
        families = _list(_get(doc, "families"), "families")
        if not all(isinstance(v, str) for v in families):
            raise _Malformed(f"families must be names, got {shown(families, 60)}")
        model = FamilyModel(
            features=_ints(doc, "features", 0),
            center=_floats(doc, "center"),
            scale=_floats(doc, "scale", positive=True),
            centroids=_rows(_get(doc, "centroids"), "centroids"),
            families=list(families),
            sizes=_ints(doc, "sizes", 0),
            required=None if required is None else _int(required, "required", 0),
            at=[_rows(fam, f"at[{g}]") for g, fam in enumerate(_list(_get(doc, "at"), "at"))],
            level=_rows(_get(doc, "level"), "level"),
            regret=[_rows(fam, f"regret[{g}]") for g, fam in enumerate(_list(_get(doc, "regret"), "regret"))],
            bare_at=_rows(doc.get("bare_at", []), "bare_at"),
            bare_landmark=_ints(doc, "bare_landmark", 0) if "bare_landmark" in doc else [],
        )
        if model.n_landmarks != n_landmarks:
            raise AdaptError(
                f"dispatcher families: regrets for {model.n_landmarks} landmarks, expected {n_landmarks}"
            )
        return model, set(model.bare_landmark or [])  # any landmark may be chosen; the count was checked
    if kind == "centroids":
        model = CentroidModel(
            center=_floats(doc, "center"),
            scale=_floats(doc, "scale", positive=True),
            centroids=_rows(_get(doc, "centroids"), "centroids"),
            landmark=_ints(doc, "landmark", 0),
        )
        return model, set(model.landmark)
    raise AdaptError(
        f"dispatcher model: kind {shown(kind, 60)} is not 'tree', 'forest', 'guarded', 'neighbours', "
        "'linear', 'families' or 'centroids'"
    )


def model_from_dict(doc: Any, n_columns: int, n_landmarks: int) -> Model:
    """Parse a model; raises :class:`AdaptError` when it is malformed or names unknown columns/landmarks.

    Every field is checked before it is used: its type, numbers finite (a NaN threshold would send every
    input one way), indices in range, a tree's nodes (children after their parent, one parent each,
    leaves with a landmark, at most :data:`MAX_TREE_DEPTH` levels), a forest of at most
    :data:`MAX_TREES` trees (trees only), a guard around a tree or a forest. Nothing else is raised.
    """
    if not isinstance(doc, dict):
        raise AdaptError("dispatcher model: expected an object")
    kind = doc.get("kind")
    label = kind if isinstance(kind, str) and len(kind) <= 20 else shown(kind, 20)
    try:
        model, leaves = _parse(doc, kind, n_landmarks)
    except _Malformed as e:
        raise AdaptError(f"dispatcher model: malformed {label} ({e})") from None
    except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError, RecursionError) as e:
        why = f"{type(e).__name__}: {str(e)[:120]}"
        raise AdaptError(f"dispatcher model: malformed {label} ({why})") from None
    if isinstance(model, CentroidModel) and len(model.center) != n_columns:
        raise AdaptError(f"dispatcher centroids: {len(model.center)} columns, expected {n_columns}")
    bad_columns = [c for c in model.columns if not 0 <= c < n_columns]
    if bad_columns:
        raise AdaptError(f"dispatcher model: columns {sorted(bad_columns)} out of range (have {n_columns})")
    bad = sorted(k for k in leaves if not 0 <= k < n_landmarks)
    if bad:
        raise AdaptError(f"dispatcher model: landmarks {bad} out of range (have {n_landmarks})")
    return model
