"""The objective of benchmarks/fidelity.py: train a small neural network, one epoch at a time.

A one-hidden-layer network (tanh, logistic output) trained by mini-batch SGD with momentum on a fixed
synthetic classification data set (3000 points, 20 features, labels from a random two-layer teacher
with 10% label noise: 2000 for training, 1000 to validate). The value is the validation cross-entropy
after the epochs trained so far; the fidelity is the number of epochs, 1 to 27, and the compute of a
trial is the epochs it ran. Five hyperparameters: learning rate, momentum, L2, hidden width, batch size.
Training is deterministic given the configuration (the shuffles are seeded), so that every tool sees the
same function. numpy only: it runs unchanged in perftune's environment and in Optuna's.
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
