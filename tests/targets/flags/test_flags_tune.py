"""End-to-end flag tuning on real programs with the real compiler: correctness guards, reduction,
bad input. Speed belongs in benchmarks/flags.py; these tests assert behaviour only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.errors import PerftuneError, TaskError
from perftune.targets.flags import Evaluator, Program, bundled, reduce_flags, task_from_toml, tune_flags

DATA = Path(__file__).resolve().parent / "data"
KAHAN = str(DATA / "kahan.c")


def test_output_changing_flags_never_win(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = tune_flags(
        [KAHAN],
        "20000 4",
        budget=8,
        seed=3,
        seeds=["-O3 -ffast-math", "-Ofast"],
        info=gcc_info,
        confirm_runs=3,
        include_params=False,
    )
    assert result.failures.get("wrong-output", 0) >= 2  # both seeds ran and were refused
    for flags in (result.flags, result.winner_flags):
        assert "-ffast-math" not in flags and "-Ofast" not in flags
    # The printed flag set reproduces the reference output.
    ev = Evaluator(Program(sources=(KAHAN,), run_args=("20000", "4")), gcc_info)
    ev.set_reference(["-O2"])
    assert ev.measure(result.flags, n_runs=1).ok


def test_compiler_crash_is_recorded_and_the_run_goes_on(flags_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = tune_flags(
        [KAHAN],
        "20000 2",
        compiler=str(DATA / "crashing-gcc.sh"),
        budget=6,
        seed=1,
        seeds=["-O3 -funroll-all-loops"],
        confirm_runs=3,
        include_params=False,
    )
    assert result.failures.get("compiler-crash") == 1
    assert "-funroll-all-loops" not in result.flags and "-funroll-all-loops" not in result.winner_flags
    assert result.n_trials == 6


def test_minimal_set_is_a_subset_with_the_same_output(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prog = bundled()["stencil"]
    program = Program(sources=(str(prog.source),), run_args=prog.small_args, rel_tol=prog.rel_tol)
    ev = Evaluator(program, gcc_info)
    ev.set_reference(["-O2"])
    winner = [
        "-O2",
        "-march=native",
        "-fpeel-loops",
        "-fno-tree-pre",
        "-funroll-loops",
        "--param=max-unroll-times=4",
        "-fno-ipa-cp",
        "-fgcse-sm",
    ]
    minimal, contributions = reduce_flags(ev, winner, runs=3)
    assert minimal[0].startswith("-O")
    assert set(minimal[1:]) <= set(winner)
    assert len(minimal) < len(winner)  # -fpeel-loops is on at -O3 anyway, -O2 alone...
    assert set(contributions) == {o for o in minimal if o != "-O3"}
    check = ev.measure(minimal, n_runs=1)
    assert check.ok, check.reason


def test_tuning_result_and_json_shape(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prog = bundled()["hashsort"]
    result = tune_flags(
        [str(prog.source)],
        list(prog.small_args),
        budget=6,
        seed=2,
        workers=2,
        seeds=["-O3 -funroll-loops"],
        info=gcc_info,
        confirm_runs=3,
    )
    data = result.to_json()
    assert data["flags"][0].startswith("-O")
    assert data["command_line"].startswith("gcc ") and str(prog.source) in data["command_line"]
    assert data["speedup_ci95"][0] <= data["speedup_over_O3"] <= data["speedup_ci95"][1]
    assert result.n_trials == 6
    if result.fell_back:
        assert result.flags == ["-O3"] and result.speedup == 1.0
    json.dumps(data)


def test_a_budget_of_one_trial_ends_at_O3(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = tune_flags([KAHAN], "2000 1", budget=1, info=gcc_info, confirm_runs=2)
    assert result.flags == ["-O3"] and result.speedup == 1.0 and result.n_trials == 1


# ------------------------------------------------------------------------------------ bad input


def _one_line(err: pytest.ExceptionInfo[PerftuneError]) -> str:
    message = str(err.value)
    assert "\n" not in message and message
    return message


def test_source_not_compiling_at_O2(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return undeclared_thing; }\n")
    with pytest.raises(PerftuneError) as err:
        tune_flags([str(bad)], "", budget=3, info=gcc_info)
    message = _one_line(err)
    assert "bad.c" in message and "does not compile" in message and "-O2" in message


def test_a_link_error_names_what_the_linker_could_not_find(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ok = tmp_path / "ok.c"
    ok.write_text("int main(void) { return 0; }\n")
    with pytest.raises(PerftuneError) as err:
        tune_flags([str(ok)], "", budget=3, info=gcc_info, link_args=["-lperftune_no_such_lib"])
    message = _one_line(err)
    assert "cannot find -lperftune_no_such_lib" in message and "collect2" not in message


def test_run_failing_at_O2(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    prog = tmp_path / "fails.c"
    prog.write_text('#include <stdio.h>\nint main(void) { fprintf(stderr, "no input file\\n"); return 3; }\n')
    with pytest.raises(PerftuneError) as err:
        tune_flags([str(prog)], "x", budget=3, info=gcc_info)
    message = _one_line(err)
    assert "fails" in message and "exit code 3" in message and "no input file" in message


def test_missing_compiler(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PerftuneError) as err:
        tune_flags([KAHAN], "", compiler="gcc-perftune-missing", budget=3)
    assert "gcc-perftune-missing" in _one_line(err)


def test_unknown_flag_in_seed(gcc_info) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PerftuneError) as err:
        tune_flags([KAHAN], "", budget=3, seeds=["-O3 -funroll-everything-please"], info=gcc_info)
    message = _one_line(err)
    assert "-funroll-everything-please" in message and "unknown" in message


def test_missing_source() -> None:
    with pytest.raises(PerftuneError) as err:
        tune_flags(["/nonexistent/prog.c"], "", budget=3)
    assert "prog.c" in _one_line(err)


def test_cli_bad_input_is_one_line(flags_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perftune.cli import cli

    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "--store",
            str(tmp_path / "s.db"),
            "flags",
            KAHAN,
            "--run",
            "1000 1",
            "--seed-flags",
            "-O3 -fnot-a-flag",
            "--budget",
            "3",
        ],
    )
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "-fnot-a-flag" in lines[0]


def test_cli_json(flags_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perftune.cli import cli

    res = CliRunner().invoke(
        cli,
        [
            "--store",
            str(tmp_path / "s.db"),
            "flags",
            KAHAN,
            "--run",
            "2000 1",
            "--budget",
            "3",
            "--no-params",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output[res.output.index("{") :])
    assert {"flags", "command_line", "speedup_over_O3", "speedup_ci95", "schema"} <= set(data)


# ------------------------------------------------------------------------------------ task files


def test_task_from_toml(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "task.toml")
    task = task_from_toml(
        {
            "kind": "flags",
            "compiler": "gcc",
            "sources": ["a.c"],
            "run": "10 'x y'",
            "rel_tol": 1e-6,
            "seeds": ["-O2 -funroll-loops"],
        },
        path,
    )
    assert task.sources == ("a.c",) and task.run_args == ("10", "x y") and task.cwd == str(tmp_path)
    assert task.rel_tol == 1e-6 and task.seeds == ("-O2 -funroll-loops",)
    assert task.name == "task" and task.compiler == "gcc"
    with pytest.raises(TaskError, match=r"task.toml: key target.sourcez"):
        task_from_toml({"kind": "flags", "sourcez": ["a.c"]}, path)
    with pytest.raises(TaskError, match=r"key target.sources"):
        task_from_toml({"kind": "flags"}, path)
    with pytest.raises(TaskError, match=r"key target.clock"):
        task_from_toml({"kind": "flags", "sources": ["a.c"], "clock": "sundial"}, path)
    with pytest.raises(TaskError, match=r"key target.rel_tol"):
        task_from_toml({"kind": "flags", "sources": ["a.c"], "rel_tol": "small"}, path)
