from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.drive import Countdown
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
    from perftune.targets.llvm._tune import DEFAULT_LENGTH, SequenceEvaluator, _seed_sequences

    bench = get_benchmark("benchmark://perftune-v0/crc32")
    ev = SequenceEvaluator(bench)
    seed_best = min(ev.count([action_index(n) for n in s]) for s in _seed_sequences(DEFAULT_LENGTH))
    ev.close()
    result = tune_passes(bench, seconds=4, seed=0)
    assert result.count_result <= seed_best
    check = validate_actions(bench, result.actions, result.count_result, run=False)
    assert check.ok


def test_seed_sequences_fit_the_length_and_differ() -> None:
    from perftune.targets.llvm._tune import DEFAULT_LENGTH, _seed_sequences

    seeds = _seed_sequences(DEFAULT_LENGTH)
    assert len(seeds) == len(set(seeds)) >= 3
    assert all(0 < len(s) <= DEFAULT_LENGTH for s in seeds)
    assert "inline" not in seeds[0] and len(seeds[0]) > 100  # the -Oz-like passes twice, no inliner
    assert all(len(s) <= 20 for s in _seed_sequences(20))
    command = cli.commands["llvm-passes"]
    assert next(p.default for p in command.params if p.name == "length") == DEFAULT_LENGTH


def test_a_slow_evaluation_is_stopped_and_the_evaluator_stays_usable() -> None:
    from perftune.targets.llvm import action_index, get_benchmark
    from perftune.targets.llvm._tune import SequenceEvaluator, SequenceTooSlow, _seed_sequences

    ev = SequenceEvaluator(get_benchmark("benchmark://perftune-v0/crc32"))
    try:
        long_seq = [action_index(n) for n in _seed_sequences(160)[0]]
        expected = ev.count(long_seq[:10])
        with pytest.raises(SequenceTooSlow, match="evaluation stopped after"):
            ev.count(long_seq, time_limit_s=1e-6)
        assert ev.count(long_seq[:10]) == expected
        assert ev.count(long_seq, time_limit_s=60.0) < ev.count_start
    finally:
        ev.close()


def test_single_edits_cover_the_neighbourhood() -> None:
    import numpy as np

    from perftune.targets.llvm import ACTIONS
    from perftune.targets.llvm._tune import _apply_edit, _edits

    seq = [3, 5, 5, 7]
    moves = _edits(seq, np.random.default_rng(0))
    n = len(ACTIONS)
    # inserts at 5 places, replacements at 4 positions, 4 deletions, 2 swaps (5,5 is not one)
    assert len(moves) == 5 * n + 4 * (n - 1) + 4 + 2
    neighbours = {tuple(_apply_edit(seq, m)) for m in moves}
    assert tuple(seq) not in neighbours
    assert (5, 3, 5, 7) in neighbours and (3, 5, 7, 5) in neighbours  # swaps
    assert (3, 5, 7) in neighbours and (0, 3, 5, 5, 7) in neighbours and (3, 5, 5, 7, 0) in neighbours
    assert (3, 5, 5, 1) in neighbours
    assert all(abs(len(x) - len(seq)) <= 1 for x in neighbours)


def test_local_search_improves_a_poor_start_and_its_bests_replay() -> None:
    from perftune.targets.llvm import action_index, get_benchmark
    from perftune.targets.llvm._tune import SequenceEvaluator, _local_search

    bench = get_benchmark("benchmark://perftune-v0/sieve")
    ev = SequenceEvaluator(bench)
    try:
        start = [action_index("mem2reg"), action_index("licm"), action_index("loop-rotate")]
        start_count = ev.count(start)
        history: list = []
        best, best_count = _local_search(ev, start, start_count, Countdown(60), 0, 400, history, True, [])
        assert best_count < start_count and history
        assert [c for _, c, _ in history] == sorted({c for _, c, _ in history}, reverse=True)
        assert ev.count(best) == best_count
    finally:
        ev.close()
    check = validate_actions(bench, best, best_count, run=True)
    assert check.ok, check.errors


def test_greedy_extension_appends_the_best_pass_at_each_step() -> None:
    from perftune.targets.llvm import ACTIONS, LlvmError, action_index, get_benchmark
    from perftune.targets.llvm._tune import SequenceEvaluator, _extend_greedily

    bench = get_benchmark("benchmark://perftune-v0/sieve")
    ev = SequenceEvaluator(bench)
    try:
        start = [action_index("mem2reg")]
        start_count = ev.count(start)
        history: list = []
        ext = _extend_greedily(ev, start, start_count, Countdown(60), None, history, True, [])
        assert ext.actions[:1] == start and len(ext.actions) > 1 and ext.count < start_count
        counts = [c for _, c, _ in history]
        assert counts == sorted(set(counts), reverse=True) and counts[-1] == ext.count
        assert ev.count(ext.actions) == ext.count
        def appended(prefix: list[int]) -> list[int]:  # the count after prefix + each single action
            out = []
            for a in range(len(ACTIONS)):
                ev.count(prefix)
                try:
                    out.append(ev.trial(a))
                except LlvmError:
                    out.append(10**9)
            return out

        # It stopped where no single appended pass lowers the count any further ...
        assert min(appended(ext.actions)) >= ext.count
        # ... and its first step took the best single pass after mem2reg.
        assert ev.count(ext.actions[:2]) == min(appended(start))
        # No evaluations left: nothing is appended.
        none_left = _extend_greedily(ev, start, start_count, Countdown(60), 1, [], True, [])
        assert none_left.actions == start
    finally:
        ev.close()


def test_cli_json_and_text() -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["llvm-passes", "benchmark://perftune-v0/sieve", "--budget", "2s", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["validated"] is True
    assert set(data["instruction_count"]) == {"start", "result", "oz"}
    assert data["pipeline"] and data["commandline"].startswith(f"{opt_program()} -passes=")
    out = runner.invoke(
        cli, ["llvm-passes", "benchmark://perftune-v0/sieve", "--budget", "2s", "--search", "greedy"]
    )
    assert out.exit_code == 0, out.output
    assert out.output.strip().splitlines()[-1].startswith(f"{opt_program()} -passes='")


def test_cli_bad_benchmark_is_one_line() -> None:
    out = CliRunner().invoke(cli, ["llvm-passes", "benchmark://perftune-v0/nosuch", "--budget", "1s"])
    assert out.exit_code != 0
    assert "unknown program 'nosuch'" in out.output


def test_programs_that_cannot_be_tuned_are_refused_before_the_search(tmp_path) -> None:
    crash = tmp_path / "crash.c"
    crash.write_text("#include <stdio.h>\nint main(void) { volatile int *p = 0; puts(\"x\"); return *p; }\n")
    empty = tmp_path / "empty.ll"
    empty.write_text("")
    for path, message in ((crash, "the -O0 reference build does not run cleanly"),
                          (empty, "the module has no instructions")):
        out = CliRunner().invoke(cli, ["llvm-passes", str(path), "--budget", "60s"])
        assert out.exit_code == 2 and message in out.output, out.output
        assert "evaluations" not in out.output  # refused before any search


@pytest.mark.slow
def test_task_file_target_runs_with_perftune_run(public_tmp_path: Path) -> None:
    from perftune.targets.llvm import task_file_text

    source = Path(__file__).resolve().parents[3] / "src/perftune/targets/llvm/programs/sieve.c"
    # The command target runs candidates as an unprivileged user: the task dir must be reachable.
    work = public_tmp_path
    (work / "sieve.c").write_text(source.read_text())
    task = work / "passes.toml"
    task.write_text(task_file_text("sieve.c", positions=4, budget="6"))
    out = CliRunner().invoke(cli, ["--store", str(work / "t.db"), "run", str(task), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["default"]["value"] == 272  # the unoptimised sieve module
    assert data["best"]["value"] < 272


def test_searches_stop_on_an_expired_clock_without_evaluating() -> None:
    from perftune.targets.llvm import action_index, get_benchmark
    from perftune.targets.llvm._tune import (
        SequenceEvaluator,
        _drop_useless,
        _extend_greedily,
        _local_search,
        _search_greedy,
        _search_random,
    )

    ev = SequenceEvaluator(get_benchmark("benchmark://perftune-v0/sieve"))
    try:
        start = [action_index("mem2reg"), action_index("licm")]
        start_count = ev.count(start)
        spent = Countdown(1e-6)
        time.sleep(0.01)
        assert spent.expired()
        before = ev.n_evaluations
        history: list = []
        # The extension rebuilds its start's module (one evaluation) and then asks the clock.
        ext = _extend_greedily(ev, start, start_count, spent, None, history, True, [])
        assert ext.actions == start and ext.n_evaluated == 1
        assert _drop_useless(ev, start, start_count, spent) == (start, start_count, 0)
        assert _search_random(ev, spent, 0, 25, None, history) == []
        assert _search_greedy(ev, spent, history) == []
        walked = _local_search(ev, start, start_count, spent, 0, None, history, True, [])
        assert walked == (start, start_count)
        assert not history and ev.n_evaluations - before == 2  # the two rebuilds of the extensions
    finally:
        ev.close()


def test_bundled_crc32_task_file_is_what_the_generator_writes() -> None:
    from perftune.targets.llvm import task_file_text

    bundled = Path(__file__).resolve().parents[3] / "src/perftune/targets/llvm/programs/crc32-passes.toml"
    assert bundled.read_text() == task_file_text("crc32.c", positions=20, name="crc32-passes")


@pytest.mark.slow
def test_bundled_crc32_task_file_runs_its_trials(public_tmp_path: Path) -> None:
    import shutil

    programs = Path(__file__).resolve().parents[3] / "src/perftune/targets/llvm/programs"
    work = public_tmp_path  # reachable by the unprivileged user candidates run as
    for name in ("crc32-passes.toml", "crc32.c"):
        shutil.copy(programs / name, work / name)
    out = CliRunner().invoke(cli, ["--store", str(work / "t.db"), "run", str(work / "crc32-passes.toml"),
                                   "--budget", "4", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["counts"] == {"ok": 4}  # the default and three non-empty pass sequences
    assert data["default"]["value"] == 333  # the unoptimised crc32 module
    assert any(data["best"]["config"].values()) and data["best"]["value"] < 333
