"""``perftune show`` of a multi-objective run prints its Pareto front and ``--json`` has it (real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import perftune
from perftune.space import Config, Int, Space
from perftune.store import open_store

SPACE = Space({"x": Int(0, 40), "y": Int(0, 30)})


def trade_off(config: Config) -> dict[str, float]:
    x, y = config["x"], config["y"]
    # time against size: every x is a different trade-off; y only makes a trial worse.
    return {"time": float(x + 1 + y % 3), "size": float(41 - x + y % 5)}


def perftune_cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("perftune")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("show") / "runs.db")
    perftune.tune(trade_off, SPACE, budget=30, seed=0, store=path, name="small",
                  goal={"time": "min", "size": "min"})
    perftune.tune(trade_off, SPACE, budget=120, seed=1, store=path, name="wide",
                  goal={"time": "min", "size": "min"})
    perftune.tune(lambda c: float(c["x"] + 1), SPACE, budget=8, seed=2, store=path, name="single")
    return path


def _front(store: str, run: str) -> list[perftune.Trial]:
    with open_store(store) as st:
        return st.pareto(st.get_run(run).id)


def _table_rows(output: str, title: str) -> list[list[str]]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 4:]:
        if line.startswith("└"):
            break
        rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def test_show_prints_the_front_read_along_the_first_objective(store: str) -> None:
    front = _front(store, "small")
    done = perftune_cli("--store", store, "show", "small")
    assert done.returncode == 0, done.stderr
    title = f"Pareto front: {len(front)} trials of time (min), size (min)"
    assert title in done.stdout
    rows = _table_rows(done.stdout, title)
    expected = sorted(front, key=lambda t: (t.metrics["time"], t.id))
    assert [int(r[0]) for r in rows] == [t.id for t in expected]
    values = [[t.metrics["time"], t.metrics["size"]] for t in expected]
    assert [[float(r[1]), float(r[2])] for r in rows] == values
    assert [r[3] for r in rows] == [t.technique for t in expected]


def test_show_json_has_the_whole_front(store: str) -> None:
    front = _front(store, "wide")
    done = perftune_cli("--store", store, "show", "wide", "--json")
    assert done.returncode == 0, done.stderr
    pareto = json.loads(done.stdout)["pareto"]
    assert pareto["objectives"] == [{"name": "time", "goal": "min"}, {"name": "size", "goal": "min"}]
    assert [t["id"] for t in pareto["trials"]] == [t.id for t in front]
    assert [t["values"] for t in pareto["trials"]] == [{"time": t.metrics["time"], "size": t.metrics["size"]}
                                                        for t in front]
    assert [t["config"] for t in pareto["trials"]] == [json.loads(t.config.to_json()) for t in front]


def test_a_long_front_is_cut_to_twenty_rows_and_says_so(store: str) -> None:
    front = _front(store, "wide")
    assert len(front) > 20
    done = perftune_cli("--store", store, "show", "wide")
    title = (f"Pareto front: {len(front)} trials of time (min), size (min), the first 20 by time "
             "(--json lists all)")
    assert title in done.stdout
    assert len(_table_rows(done.stdout, title)) == 20


def test_a_single_objective_run_has_no_front(store: str) -> None:
    done = perftune_cli("--store", store, "show", "single")
    assert done.returncode == 0 and "Pareto front" not in done.stdout
    assert json.loads(perftune_cli("--store", store, "show", "single", "--json").stdout)["pareto"] is None
