"""k-means with accuracy bins: the fastest clustering that reaches a quality target.

Knobs: Lloyd iterations, the fraction of points used to fit the centres (the rest are only
assigned at the end), the initialisation (random points or k-means++), and restarts. Quality is
``reference_inertia / inertia`` (1.0 = as good as a long, many-restart reference run; higher is
better). :func:`tune` produces one configuration per quality bin in a single shared run, each verified
on held-back data sets; :func:`cluster` asks for a quality and runs the matching configuration.

Run:
    python examples/choice/kmeans.py tune        # tune bins 0.8, 0.9, 0.95, 0.99; write the file
    python examples/choice/kmeans.py run 0.95    # cluster a fresh data set at quality >= 0.95
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

TARGETS = (0.8, 0.9, 0.95, 0.99)
DEFAULT = {"init": "kmeans++", "iters": 30, "sample_frac": 1.0, "restarts": 3, "seed": 0}


@dataclass(frozen=True)
class Dataset:
    points: np.ndarray
    k: int
    reference_inertia: float


def _inertia(x: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, float]:
    d2 = (x * x).sum(1)[:, None] - 2 * x @ centres.T + (centres * centres).sum(1)[None, :]
    labels = d2.argmin(1)
    return labels, float(np.maximum(d2[np.arange(len(x)), labels], 0).sum())


def _init(x: np.ndarray, k: int, how: str, rng: np.random.Generator) -> np.ndarray:
    if how == "random":
        return x[rng.choice(len(x), size=k, replace=False)].copy()
    centres = [x[rng.integers(len(x))]]
    d2 = ((x - centres[0]) ** 2).sum(1)
    for _ in range(1, k):
        total = d2.sum()
        i = rng.choice(len(x), p=d2 / total) if total > 0 else rng.integers(len(x))
        centres.append(x[i])
        d2 = np.minimum(d2, ((x - x[i]) ** 2).sum(1))
    return np.array(centres)


def lloyd(x: np.ndarray, centres: np.ndarray, iters: int) -> np.ndarray:
    k = len(centres)
    for _ in range(iters):
        labels, _ = _inertia(x, centres)
        counts = np.bincount(labels, minlength=k)
        sums = np.zeros_like(centres)
        np.add.at(sums, labels, x)
        moved = counts > 0
        new = centres.copy()
        new[moved] = sums[moved] / counts[moved, None]
        if np.allclose(new, centres):
            return new
        centres = new
    return centres


def kmeans(config: Mapping[str, Any], x: np.ndarray, k: int) -> np.ndarray:
    """Cluster ``x`` into ``k`` groups with one configuration; returns the centres."""
    rng = np.random.default_rng(config.get("seed", 0))
    n_fit = max(k, int(len(x) * config["sample_frac"]))
    best, best_inertia = None, np.inf
    for _ in range(config["restarts"]):
        sub = x if n_fit >= len(x) else x[rng.choice(len(x), size=n_fit, replace=False)]
        centres = lloyd(sub, _init(sub, k, config["init"], rng), config["iters"])
        _, inertia = _inertia(sub, centres)
        if inertia < best_inertia:
            best, best_inertia = centres, inertia
    assert best is not None
    return best


def quality(centres: np.ndarray, data: Dataset) -> float:
    """Reference inertia over this inertia (the accuracy metric; 1.0 = reference quality)."""
    _, inertia = _inertia(data.points, centres)
    return data.reference_inertia / inertia


def make_dataset(rng: np.random.Generator, n: int = 4000, k: int = 12, dim: int = 4) -> Dataset:
    """Gaussian blobs of unequal sizes and spreads, with a long many-restart reference run."""
    centres = rng.uniform(-10, 10, size=(k, dim))
    sizes = rng.multinomial(n, rng.dirichlet(np.ones(k) * 2))
    x = np.concatenate(
        [
            c + rng.normal(0, rng.uniform(0.5, 2.5), size=(m, dim))
            for c, m in zip(centres, sizes, strict=False)
        ]
    )
    ref = min(
        _inertia(
            x, kmeans({"init": "kmeans++", "iters": 300, "sample_frac": 1.0, "restarts": 1, "seed": s}, x, k)
        )[1]
        for s in range(8)
    )
    return Dataset(points=x, k=k, reference_inertia=ref)


def program(config: Any, data: Dataset) -> np.ndarray:
    return kmeans(dict(config), data.points, data.k)


def space() -> Any:
    from perftune.space import Choice, Float, Int, Space

    return Space(
        {
            "init": Choice(["kmeans++", "random"]),
            "iters": Int(1, 60),
            "sample_frac": Float(0.05, 1.0),
            "restarts": Int(1, 10),
            "seed": Int(0, 0),
        }
    )


def tune(
    budget: int = 80,
    seed: int = 0,
    n_train: int = 3,
    n_held_out: int = 5,
    targets: tuple[float, ...] = TARGETS,
):
    """One shared run over all quality bins; returns the :class:`AccuracyTable`."""
    from perftune.space import Config
    from perftune.targets.choice import tune_accuracy

    rng = np.random.default_rng(seed)
    train = [make_dataset(rng) for _ in range(n_train)]
    held = [make_dataset(rng) for _ in range(n_held_out)]
    return tune_accuracy(
        program,
        space(),
        accuracy=quality,
        targets=targets,
        inputs=train,
        held_out=held,
        budget=budget,
        seed=seed,
        seeds=[Config(DEFAULT)],
        name="kmeans",
    )


def cluster(x: np.ndarray, k: int, min_quality: float) -> np.ndarray:
    """Cluster with the tuned configuration for ``min_quality`` (the declared default if untuned)."""
    from perftune.targets.choice import accuracy_config

    return kmeans(accuracy_config("kmeans", min_quality, default=DEFAULT), x, k)


def main(argv: list[str]) -> None:
    if argv[:1] == ["tune"]:
        table = tune()
        print(table.format())
        print("wrote", table.save())
        return
    from perftune.errors import PerftuneError

    q = float(argv[1]) if len(argv) > 1 else 0.95
    data = make_dataset(np.random.default_rng(99))
    t0 = time.perf_counter()
    try:
        centres = cluster(data.points, data.k, q)
    except PerftuneError as e:
        raise SystemExit(f"kmeans: {e}") from None
    print(f"quality {quality(centres, data):.4f} (asked >= {q}) in {(time.perf_counter() - t0) * 1e3:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
