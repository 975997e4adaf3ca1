from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.targets.llvm import tune_passes
from perftune.targets.llvm._env import opt_program
from perftune.targets.llvm._validate import validate_actions


@pytest.mark.parametrize("search", ["perftune", "random", "greedy"])
def test_searches_find_validated_sequences(search: str) -> None:
    result = tune_passes("benchmark://perftune-v0/crc32", seconds=2, search=search, seed=1)
    assert result.validation.ok, result.validation.errors
    assert result.validation.output_checked
    assert result.validation.replayed_instruction_count == result.count_result
    assert result.count_result < result.count_start
    assert result.n_evaluations > 0 and result.reward > 0.5


def test_perftune_search_beats_the_oz_like_seed_and_replays() -> None:
    from perftune.targets.llvm import action_index, get_benchmark
    from perftune.targets.llvm._tune import SequenceEvaluator, _seed_sequences

    bench = get_benchmark("benchmark://perftune-v0/crc32")
    ev = SequenceEvaluator(bench)
    seed_best = min(ev.count([action_index(n) for n in s]) for s in _seed_sequences(80))
    ev.close()
    result = tune_passes(bench, seconds=4, seed=0)
    assert result.count_result <= seed_best
    check = validate_actions(bench, result.actions, result.count_result, run=False)
    assert check.ok


def test_cli_json_and_text() -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["llvm-passes", "benchmark://perftune-v0/sieve", "--seconds", "2", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["validated"] is True
    assert set(data["instruction_count"]) == {"start", "result", "oz"}
    assert data["pipeline"] and data["commandline"].startswith(f"{opt_program()} -passes=")
    out = runner.invoke(
        cli, ["llvm-passes", "benchmark://perftune-v0/sieve", "--seconds", "2", "--search", "greedy"]
    )
    assert out.exit_code == 0, out.output
    assert out.output.strip().splitlines()[-1].startswith(f"{opt_program()} -passes='")


def test_cli_bad_benchmark_is_one_line() -> None:
    out = CliRunner().invoke(cli, ["llvm-passes", "benchmark://perftune-v0/nosuch", "--seconds", "1"])
    assert out.exit_code != 0
    assert "unknown program 'nosuch'" in out.output


@pytest.mark.slow
def test_task_file_target_runs_with_perftune_run() -> None:
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from perftune.targets.llvm import task_file_text

    source = Path(__file__).resolve().parents[3] / "src/perftune/targets/llvm/programs/sieve.c"
    # The command target runs candidates as an unprivileged user: the task dir must be reachable.
    work = Path(tempfile.mkdtemp(prefix="perftune-llvm-task-"))
    try:
        os.chmod(work, 0o755)
        (work / "sieve.c").write_text(source.read_text())
        task = work / "passes.toml"
        task.write_text(task_file_text("sieve.c", positions=4, budget="6"))
        out = CliRunner().invoke(cli, ["--store", str(work / "t.db"), "run", str(task), "--json"])
        assert out.exit_code == 0, out.output
        data = json.loads(out.output)
        assert data["default"]["value"] == 272  # the unoptimised sieve module
        assert data["best"]["value"] < 272
    finally:
        shutil.rmtree(work, ignore_errors=True)
