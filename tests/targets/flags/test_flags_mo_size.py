"""The flags target's code-size metric and ``goal="time,size"`` (a Pareto front of run time and code size)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.errors import PerftuneError
from perftune.search import dominates
from perftune.targets.flags import Evaluator, Program, bundled, code_size, tune_flags


@pytest.mark.skipif(shutil.which("size") is None or shutil.which("gcc") is None, reason="needs gcc and size")
def test_code_size_is_the_executable_sections_that_binutils_lists(tmp_path: Path) -> None:
    prog = bundled()["matmul"]
    sizes = {}
    for level in ("-O1", "-O3"):
        binary = tmp_path / f"prog{level}"
        subprocess.run(["gcc", level, "-funroll-loops", str(prog.source), "-o", str(binary), "-lm"],
                       check=True)
        listing = subprocess.run(["size", "-A", str(binary)], check=True, capture_output=True,
                                 text=True).stdout
        code_sections = (".init", ".plt", ".plt.got", ".plt.sec", ".text", ".fini")
        expected = sum(int(line.split()[1]) for line in listing.splitlines()
                       if line.split() and line.split()[0] in code_sections)
        sizes[level] = code_size(binary)
        assert sizes[level] == expected
    assert sizes["-O3"] > sizes["-O1"]  # unrolled and vectorised code is larger


def test_a_measurement_carries_the_code_size_of_its_binary(gcc_info) -> None:  # type: ignore[no-untyped-def]
    prog = bundled()["hashsort"]
    ev = Evaluator(Program(sources=(str(prog.source),), run_args=tuple(prog.small_args)), gcc_info)
    ev.set_reference(["-O2"])
    small, large = ev.measure(["-Os"], n_runs=1), ev.measure(["-O3", "-funroll-loops"], n_runs=1)
    assert small.ok and large.ok
    assert small.size_bytes is not None and large.size_bytes is not None
    assert 0 < small.size_bytes < large.size_bytes


def test_goal_time_size_gives_a_front_of_non_dominated_option_sets(gcc_info) -> None:  # type: ignore[no-untyped-def]
    prog = bundled()["hashsort"]
    result = tune_flags([str(prog.source)], list(prog.small_args), budget=10, seed=1, info=gcc_info,
                        include_params=False, reduce=False, confirm_runs=2, goal="time,size",
                        seeds=["-Os", "-O3 -funroll-loops"])
    front = result.pareto
    assert front and all(p["size_bytes"] > 0 and p["time_s"] > 0 for p in front)
    points = [(p["time_s"], p["size_bytes"]) for p in front]
    assert not any(dominates(a, b) for a in points for b in points)
    assert points == sorted(points)  # fastest first, so the smallest code comes last
    assert json.loads(json.dumps(result.to_json()))["pareto"] == front


def test_goal_is_checked_before_anything_is_built(gcc_info) -> None:  # type: ignore[no-untyped-def]
    prog = bundled()["hashsort"]
    with pytest.raises(PerftuneError, match="goal must be 'time' or 'time,size', got 'size'"):
        tune_flags([str(prog.source)], list(prog.small_args), budget=2, info=gcc_info, goal="size")


def test_cli_goal_time_size_prints_the_front(gcc_info, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from perftune.cli import cli

    prog = bundled()["hashsort"]
    out = CliRunner().invoke(cli, ["flags", str(prog.source), "--run", " ".join(prog.small_args),
                                   "--budget", "5", "--seed", "0", "--no-params", "--no-reduce",
                                   "--goal", "time,size",
                                   "--store", f"sqlite:///{tmp_path / 'f.db'}"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "Pareto front of run time and code size:" in out.output
