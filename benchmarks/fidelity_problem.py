"""The objectives of benchmarks/fidelity.py: models trained one step at a time, the value after each.

``nn`` (the first problem): a small neural network, one epoch per step.

A one-hidden-layer network (tanh, logistic output) trained by mini-batch SGD with momentum on a fixed
synthetic classification data set (3000 points, 20 features, labels from a random two-layer teacher
with 10% label noise: 2000 for training, 1000 to validate). The value is the validation cross-entropy
after the epochs trained so far; the fidelity is the number of epochs, 1 to 27, and the compute of a
trial is the epochs it ran. Five hyperparameters: learning rate, momentum, L2, hidden width, batch size.
Training is deterministic given the configuration (the shuffles are seeded), so that every tool sees the
same function. numpy only: it runs unchanged in perftune's environment and in Optuna's.

``gbm`` (the second): gradient-boosted regression trees (histogram trees, least squares, shrinkage,
row subsampling, L2 on the leaves) on Friedman's function #1 (5 informative and 5 noise features, unit
noise; 1000 points to train, 500 to validate). A step is 3 boosting rounds, up to 27 steps (81 trees);
the value is the validation RMSE. Five hyperparameters: learning rate, depth, subsample, smallest leaf,
L2. Its learning curves cross more than the network's: a small learning rate is behind early and ahead
late, which is where pruning by early values can go wrong.

``PROBLEMS[name]`` gives each one's parameters (as plain data, so that both tools build the same
space), its number of steps and its training generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

MAX_EPOCHS = 27
BATCHES = (16, 32, 64, 128, 256)
LIMITS = {"lr": (1e-4, 1.0), "momentum": (0.0, 0.99), "l2": (1e-6, 1e-1), "hidden": (2, 64)}

_DATA: dict[str, np.ndarray] = {}


def data() -> dict[str, np.ndarray]:
    if not _DATA:
        rng = np.random.default_rng(2026)
        x = rng.normal(size=(3000, 20))
        teacher = np.tanh(x @ rng.normal(size=(20, 6))) @ rng.normal(size=6)
        y = (teacher > np.median(teacher)).astype(float)
        flip = rng.random(3000) < 0.1
        y[flip] = 1.0 - y[flip]
        _DATA.update(x_train=x[:2000], y_train=y[:2000], x_val=x[2000:], y_val=y[2000:])
    return _DATA


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def train(config: dict[str, Any], epochs: int = MAX_EPOCHS) -> Iterator[float]:
    """Yield the validation cross-entropy after each epoch (a diverged network yields log 2 * 10)."""
    d = data()
    x, y, xv, yv = d["x_train"], d["y_train"], d["x_val"], d["y_val"]
    hidden, batch = int(config["hidden"]), int(config["batch"])
    lr, momentum, l2 = float(config["lr"]), float(config["momentum"]), float(config["l2"])
    rng = np.random.default_rng(7)
    w1 = rng.normal(scale=1.0 / math.sqrt(x.shape[1]), size=(x.shape[1], hidden))
    b1 = np.zeros(hidden)
    w2 = rng.normal(scale=1.0 / math.sqrt(hidden), size=hidden)
    b2 = 0.0
    v = [np.zeros_like(w1), np.zeros_like(b1), np.zeros_like(w2), 0.0]
    worst = 10.0 * math.log(2.0)
    for _ in range(epochs):
        order = rng.permutation(len(x))
        with np.errstate(all="ignore"):
            for start in range(0, len(x), batch):
                idx = order[start:start + batch]
                xb, yb = x[idx], y[idx]
                h = np.tanh(xb @ w1 + b1)
                p = _sigmoid(h @ w2 + b2)
                g = (p - yb) / len(idx)
                gw2 = h.T @ g + l2 * w2
                gb2 = float(g.sum())
                gh = np.outer(g, w2) * (1.0 - h * h)
                gw1 = xb.T @ gh + l2 * w1
                gb1 = gh.sum(axis=0)
                v[0] = momentum * v[0] - lr * gw1
                v[1] = momentum * v[1] - lr * gb1
                v[2] = momentum * v[2] - lr * gw2
                v[3] = momentum * v[3] - lr * gb2
                w1, b1, w2, b2 = w1 + v[0], b1 + v[1], w2 + v[2], b2 + v[3]
            p = np.clip(_sigmoid(np.tanh(xv @ w1 + b1) @ w2 + b2), 1e-7, 1 - 1e-7)
            loss = float(-np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p)))
        yield loss if math.isfinite(loss) and loss < worst else worst


# ---------------------------------------------------------------------------------------------------
# The second problem: gradient-boosted regression trees, a few boosting rounds per step.

GBM_STEPS = 27
GBM_ROUNDS_PER_STEP = 3
GBM_LIMITS = {"lr": (0.005, 1.0), "depth": (1, 5), "subsample": (0.3, 1.0), "min_leaf": (1, 100),
              "l2": (1e-3, 100.0)}
_GBM_BINS = 32
_GBM_DATA: dict[str, np.ndarray] = {}


def gbm_data() -> dict[str, np.ndarray]:
    """Friedman's regression function #1 with 5 noise features and noise, binned for histogram trees."""
    if not _GBM_DATA:
        rng = np.random.default_rng(1919)
        x = rng.random(size=(1500, 10))
        y = (10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
             + rng.normal(scale=1.0, size=len(x)))
        bins = np.minimum((x * _GBM_BINS).astype(np.int64), _GBM_BINS - 1)
        _GBM_DATA.update(b_train=bins[:1000], y_train=y[:1000], b_val=bins[1000:], y_val=y[1000:])
    return _GBM_DATA


def _grow_tree(bins: np.ndarray, grad: np.ndarray, depth: int, min_leaf: int, l2: float,
               apply_to: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """One least-squares tree on histograms, grown level by level on (``bins``, ``grad``): its
    prediction for each of the binned sets ``apply_to``."""
    n_features = bins.shape[1]
    node = np.zeros(len(bins), dtype=np.int64)
    applied = [np.zeros(len(a), dtype=np.int64) for a in apply_to]
    features = np.arange(n_features) * _GBM_BINS
    for level in range(depth):
        n_nodes = 2**level
        # Every feature's histogram of every node in one bincount: cell (node, feature, bin).
        idx = (node[:, None] * (n_features * _GBM_BINS) + features + bins).ravel()
        size = n_nodes * n_features * _GBM_BINS
        shape = (n_nodes, n_features, _GBM_BINS)
        g = np.bincount(idx, np.repeat(grad, n_features), minlength=size).reshape(shape)
        h = np.bincount(idx, minlength=size).reshape(shape).astype(float)
        gl, hl = np.cumsum(g, axis=2)[:, :, :-1], np.cumsum(h, axis=2)[:, :, :-1]
        gt, ht = g.sum(axis=2, keepdims=True), h.sum(axis=2, keepdims=True)
        gr, hr = gt - gl, ht - hl
        gain = gl**2 / (hl + l2) + gr**2 / (hr + l2) - gt**2 / (ht + l2)
        gain[(hl < min_leaf) | (hr < min_leaf)] = 0.0
        flat = gain.reshape(n_nodes, -1)
        pick = flat.argmax(axis=1)
        best_gain = flat[np.arange(n_nodes), pick]
        best_feature = np.where(best_gain > 0, pick // (_GBM_BINS - 1), -1)
        best_cut = pick % (_GBM_BINS - 1)
        split = best_feature >= 0
        for nodes, b in ((node, bins), *zip(applied, apply_to, strict=True)):
            f = best_feature[nodes]
            right = split[nodes] & (b[np.arange(len(b)), np.maximum(f, 0)] > best_cut[nodes])
            nodes *= 2
            nodes += right
    n_leaves = 2**depth
    g = np.bincount(node, grad, minlength=n_leaves)
    h = np.bincount(node, minlength=n_leaves).astype(float)
    leaf = g / (h + l2)
    return [leaf[nodes] for nodes in applied]


def train_gbm(config: dict[str, Any], steps: int = GBM_STEPS) -> Iterator[float]:
    """Yield the validation root-mean-square error after each step of ``GBM_ROUNDS_PER_STEP`` rounds."""
    d = gbm_data()
    b, y, bv, yv = d["b_train"], d["y_train"], d["b_val"], d["y_val"]
    lr, depth, subsample = float(config["lr"]), int(config["depth"]), float(config["subsample"])
    min_leaf, l2 = int(config["min_leaf"]), float(config["l2"])
    rng = np.random.default_rng(11)
    pred = np.full(len(y), y.mean())
    pred_val = np.full(len(yv), y.mean())
    for _ in range(steps):
        for _ in range(GBM_ROUNDS_PER_STEP):
            rows = rng.random(len(y)) < subsample  # stochastic boosting: each tree sees a subsample
            fit, fit_val = _grow_tree(b[rows], (y - pred)[rows], depth, min_leaf, l2, (b, bv))
            pred += lr * fit
            pred_val += lr * fit_val
        yield float(np.sqrt(np.mean((yv - pred_val) ** 2)))


#: name -> (parameters {name: (kind, arguments)}, steps of a full evaluation, generator of values).
#: Kinds: "log" (log-uniform float), "float", "int", "choice".
PROBLEMS: dict[str, tuple[dict[str, tuple[str, Any]], int, Any]] = {
    "nn": ({"lr": ("log", LIMITS["lr"]), "momentum": ("float", LIMITS["momentum"]),
            "l2": ("log", LIMITS["l2"]), "hidden": ("int", LIMITS["hidden"]), "batch": ("choice", BATCHES)},
           MAX_EPOCHS, train),
    "gbm": ({"lr": ("log", GBM_LIMITS["lr"]), "depth": ("int", GBM_LIMITS["depth"]),
             "subsample": ("float", GBM_LIMITS["subsample"]), "min_leaf": ("int", GBM_LIMITS["min_leaf"]),
             "l2": ("log", GBM_LIMITS["l2"])},
            GBM_STEPS, train_gbm),
}
