"""The matmul and k-means examples run and tune (small sizes)."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.targets.choice import LadderSettings, accuracy_config, tune_accuracy, tune_sites, use_choices


@pytest.mark.parametrize(
    "cutoffs, choices",
    [
        ((), ("library",)),
        ((), ("strassen",)),
        ((), ("blocked",)),
        ((16, 64), ("library", "blocked", "strassen")),
        ((32,), ("library", "strassen")),
    ],
)
def test_matmul_leaves_agree_with_numpy(examples_path, cutoffs, choices):
    import matmul

    rng = np.random.default_rng(0)
    matmul.matmul_site.set(cutoffs, choices)
    for n in (1, 7, 64, 96):
        a, b = matmul.random_pair(n, rng)
        assert matmul.close_enough((a, b), matmul.matmul(a, b))


def test_matmul_tunes(examples_path):
    import matmul

    result = tune_sites(
        lambda pair: matmul.matmul(*pair),
        [matmul.matmul_site],
        make_input=matmul.random_pair,
        sizes=[16, 64],
        check=matmul.close_enough,
        settings=LadderSettings(population=6, generations=1),
        seed=0,
    )
    cut, names = result.choices.sites["matmul"]
    assert list(cut) == sorted(set(cut)) and set(names) <= {"library", "blocked", "strassen"}


def test_kmeans_accuracy_bins_hold_on_held_back_data(examples_path, tmp_path):
    import kmeans

    rng = np.random.default_rng(3)
    train = [kmeans.make_dataset(rng, n=500, k=5, dim=2) for _ in range(2)]
    held = [kmeans.make_dataset(rng, n=500, k=5, dim=2) for _ in range(3)]
    table = tune_accuracy(
        kmeans.program,
        kmeans.space(),
        accuracy=kmeans.quality,
        targets=[0.8, 0.97],
        inputs=train,
        held_out=held,
        budget=16,
        seed=0,
        name="kmeans",
    )
    for b in table.bins:
        assert b.reached
        assert min(kmeans.quality(kmeans.program(b.config, d), d) for d in held) >= b.target
    use_choices(table.save(tmp_path / "k.json"), strict=True)
    assert accuracy_config("kmeans", 0.9, default=kmeans.DEFAULT) == table.bins[1].config
    data = held[0]
    assert kmeans.quality(kmeans.cluster(data.points, data.k, 0.97), data) >= 0.97
