"""The bundled task-file example (examples/adapt/task) learns per-input dispatch as it ships.

Its training inputs are long enough that the right sort saves more than the feature command costs, so
the cost-aware learner reads a column; on short files it rightly reads none (tests/adapt/test_adapt_command.py
declares the command cheap to test routing there).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perftune.adapt import CommandSite

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "perftune" / "examples" / "adapt" / "task"
PERFTUNE = [sys.executable, "-m", "perftune"]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "task"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("train", "perftune-dispatch.json"))
    # As the example's comment says: the training inputs with make_train.py's default size.
    subprocess.run([sys.executable, str(dest / "make_train.py")], check=True, timeout=120)
    return dest


def test_the_example_seeds_every_sort_and_trains_on_three_orders(example: Path) -> None:
    site = CommandSite(example / "task.toml")
    # One choice parameter: each sort is a landmark before any search, as a choice site's algorithms are.
    assert site.seed_configs() == [{"algo": "merge"}, {"algo": "insertion"}, {"algo": "reversed"}]
    families = sorted({Path(p).name.rsplit("-", 1)[0] for p in site.train})
    assert families == ["ascending", "descending", "shuffled"]
    # The feature command reads no more than the head of a file, whatever its length.
    shuffled = site.features_of(str(example / "train" / "shuffled-0.txt"))
    assert 0.3 < shuffled["sortedness"] < 0.7 and shuffled["log_size"] > 18


@pytest.mark.slow
def test_the_bundled_example_learns_to_dispatch_on_the_input_order(example: Path, tmp_path: Path) -> None:
    out = example / "perftune-dispatch.json"
    done = subprocess.run([*PERFTUNE, "adapt", "task.toml", "--seed", "0"], capture_output=True, text=True,
                          cwd=example, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "columns used: none" not in done.stdout, done.stdout
    trained = json.loads(out.read_text())["dispatchers"]["adapt-sortfile"]["trained"]
    assert trained["selected"], done.stdout  # the dispatcher reads at least one column
    # Inputs never seen in training, of another length: ascending and shuffled.
    rng = random.Random(1)
    xs = sorted(rng.randrange(10**6) for _ in range(250000))
    up = tmp_path / "up.txt"
    up.write_text("\n".join(map(str, xs)) + "\n", encoding="utf-8")
    rng.shuffle(xs)
    shuffled = tmp_path / "shuffled.txt"
    shuffled.write_text("\n".join(map(str, xs)) + "\n", encoding="utf-8")
    chosen = {}
    for name, path in (("up", up), ("shuffled", shuffled), ("train", example / "train" / "ascending-0.txt")):
        done = subprocess.run([*PERFTUNE, "adapt", "task.toml", "--choose", str(path)], capture_output=True,
                              text=True, cwd=example, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert "warning" not in done.stderr.lower(), done.stderr
        chosen[name] = json.loads(done.stdout)["algo"]
    # Insertion sort is linear on ascending input and quadratic on shuffled input, where merge sort runs.
    assert chosen == {"up": "insertion", "shuffled": "merge", "train": "insertion"}
