"""End-to-end flag tuning on real programs with the real compiler: correctness guards, reduction,
bad input. Speed belongs in benchmarks/flags.py; these tests assert behaviour only."""

from __future__ import annotations

import json
import re
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
    with pytest.raises(TaskError, match=r"task.toml: target.sourcez: unknown key .*did you mean .sources.\?"):
        task_from_toml({"kind": "flags", "sourcez": ["a.c"]}, path)
    with pytest.raises(TaskError, match=r"key target.sources"):
        task_from_toml({"kind": "flags"}, path)
    with pytest.raises(TaskError, match=r"key target.clock"):
        task_from_toml({"kind": "flags", "sources": ["a.c"], "clock": "sundial"}, path)
    with pytest.raises(TaskError, match=r"key target.rel_tol"):
        task_from_toml({"kind": "flags", "sources": ["a.c"], "rel_tol": "small"}, path)


def test_task_file_seeds_that_are_not_option_strings_are_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "task.toml")
    with pytest.raises(TaskError, match=r"task.toml: key target.seeds\[0\]: expected a string of options"):
        task_from_toml({"kind": "flags", "sources": ["a.c"], "seeds": [["-O3", 5]]}, path)
    with pytest.raises(TaskError, match=r"task.toml: key target.seeds\[1\]: no closing quotation"):
        task_from_toml({"kind": "flags", "sources": ["a.c"], "seeds": ["-O2", '-O3 "unclosed']}, path)
    with pytest.raises(TaskError, match=r"task.toml: key target.run: no closing quotation"):
        task_from_toml({"kind": "flags", "sources": ["a.c"], "run": "'x"}, path)


def test_a_seed_that_cannot_be_split_is_one_line(gcc_info) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PerftuneError) as err:
        tune_flags([KAHAN], "", budget=3, seeds=['-O3 "x'], info=gcc_info)
    assert "no closing quotation" in _one_line(err)


def _write_task(folder: Path, text: str) -> Path:
    (folder / "kahan.c").write_text((DATA / "kahan.c").read_text())
    task = folder / "t.toml"
    task.write_text(text)
    return task


_TASK = '[target]\nkind = "flags"\nsources = ["kahan.c"]\nrun = ["1000"]\nparams = false\n'


@pytest.mark.parametrize(
    ("head", "tail", "expected"),
    [
        ('nmae = "typo"\n', "", r":1: nmae: unknown key \(allowed: description, name, target, tuning\); "
                              r"did you mean 'name'\?"),
        ("", "[tunning]\nbudget = 2\n", r":6: tunning: unknown key .*did you mean 'tuning'\?"),
        ("", "[sandbox]\nmemory_mb = 1\n", r":6: sandbox: unknown key \(allowed: "),
        ("", "[timing]\nmin_runs = 50\n", r":6: timing: unknown key"),
        ("", "[check]\nstdout = 'ignore'\n", r":6: check: unknown key"),
        ("", "[objective]\ngoal = 'max'\n", r":6: objective: unknown key"),
        ("", "[space]\nx = { type = 'int', min = 1, max = 3 }\n", r":6: space: unknown key"),
        ("", "[tuning]\nbugdet = 2\n", r":7: tuning.bugdet: unknown key .*did you mean 'budget'\?"),
        ("", "relt_ol = 1\n", r":6: target.relt_ol: unknown key .*did you mean 'rel_tol'\?"),
    ],
)
def test_a_flags_task_file_refuses_what_it_does_not_use_in_one_line(flags_cache, public_tmp_path, head, tail,
                                                                    expected) -> None:  # type: ignore[no-untyped-def]
    from perftune.cli import cli

    task = _write_task(public_tmp_path, head + _TASK + tail)
    res = CliRunner().invoke(cli, ["--store", str(public_tmp_path / "s.db"), "run", str(task),
                                   "--budget", "2"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert re.search(re.escape(str(task)) + expected, lines[0]), lines[0]


@pytest.mark.parametrize(
    ("seeds", "expected"),
    [
        ('[["-O3", 5]]', r"key target.seeds\[0\]: expected a string of options or a list of strings"),
        ('["-O3 \\"unclosed"]', r"key target.seeds\[0\]: no closing quotation"),
        ('["-O2", "-O3 -fno-such-flag"]',
         r"key target.seeds\[1\]: unknown optimisation flag '-fno-such-flag'"),
    ],
)
def test_bad_seeds_of_a_flags_task_file_are_one_line_naming_file_and_key(flags_cache, public_tmp_path, seeds,
                                                                         expected) -> None:  # type: ignore[no-untyped-def]
    from perftune.cli import cli

    task = _write_task(public_tmp_path, _TASK + f"seeds = {seeds}\n")
    res = CliRunner().invoke(cli, ["--store", str(public_tmp_path / "s.db"), "run", str(task),
                                   "--budget", "2"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert re.search(re.escape(str(task)) + ": " + expected, lines[0]), lines[0]


def test_cpp_sources_tune_with_gxx_and_with_gcc(flags_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    source = tmp_path / "sum.cpp"
    source.write_text(
        "#include <cstdio>\n#include <cstdlib>\n#include <vector>\n"
        "int main(int argc, char **argv) {\n"
        "  long n = argc > 1 ? std::atol(argv[1]) : 1000;\n"
        "  std::vector<long> v(n);\n  long s = 0;\n"
        "  for (long i = 0; i < n; i++) { v[i] = i * i % 7; s += v[i]; }\n"
        '  std::printf("%ld\\n", s);\n  return 0;\n}\n'
    )
    for compiler in ("g++", "gcc"):  # gcc compiles .cpp as C++ but needs the C++ library at link time
        result = tune_flags([str(source)], "20000", compiler=compiler, budget=3, seed=1, confirm_runs=2,
                            include_params=False, reduce=False)
        assert result.n_trials == 3 and result.failures == {}, (compiler, result.failures)
        assert result.command_line.startswith(compiler + " ")


def test_no_build_runs_while_a_candidate_is_timed(gcc_info, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Builds may overlap each other; a timed run waits for the builds in flight and holds back new ones."""
    import threading
    import time

    ev = Evaluator(Program(sources=(KAHAN,), run_args=("20000", "2")), gcc_info)
    ev.set_reference(["-O2"])
    lock = threading.Lock()
    building = [0]
    overlaps: list[str] = []
    build_run, run_run = ev.build_sandbox.run, ev.run_sandbox.run

    def slow_build(*args, **kwargs):  # type: ignore[no-untyped-def]
        with lock:
            building[0] += 1
        try:
            time.sleep(0.3)  # a slow compiler
            return build_run(*args, **kwargs)
        finally:
            with lock:
                building[0] -= 1

    def checked_run(*args, **kwargs):  # type: ignore[no-untyped-def]
        with lock:
            if building[0]:
                overlaps.append(f"{building[0]} build(s) in flight")
        return run_run(*args, **kwargs)

    monkeypatch.setattr(ev.build_sandbox, "run", slow_build)
    monkeypatch.setattr(ev.run_sandbox, "run", checked_run)
    options = [["-O3"], ["-O2"], ["-O3", "-funroll-loops"], ["-O1"], ["-O3", "-fno-tree-pre"], ["-Os"]]
    threads = [threading.Thread(target=ev.measure, args=(o,), kwargs={"n_runs": 4}) for o in options]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not overlaps, overlaps


def test_every_key_of_a_flags_task_file_is_documented_in_task_files_md() -> None:
    from perftune.targets.flags import _task

    text = (Path(__file__).parents[3] / "src" / "perftune" / "examples" / "TASK_FILES.md").read_text()
    section = text.split('## Compiler flags: `[target] kind = "flags"`', 1)[1].split("\n## ", 1)[0]
    keys = [*_task._KEYS, *_task._TOP_KEYS, *(f"tuning.{k}" for k in _task._TUNING_KEYS)]
    undocumented = [key for key in keys
                    if not re.search(rf"(?<![\w.-]){re.escape(key.split('.')[-1])}\s*=", section)
                    and f"`{key.split('.')[-1]}`" not in section and f"[{key}]" not in section]
    assert undocumented == []
    # The example of the section is a flags task file the loader takes as written.
    block = section.split("```toml\n", 1)[1].split("```", 1)[0]
    import tomllib

    data = tomllib.loads(block)
    _task.check_task_file(data, "t.toml", block)
    task_from_toml(data["target"], "t.toml", text=block)


def test_the_reduction_drops_options_that_only_noise_and_drift_favour(gcc_info, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Run times that are noise around one value, on a machine that slows down as it goes: no option makes a
    difference, so none is kept (measured one after the other, every later set looked slower)."""
    import random

    ev = Evaluator(Program(sources=(KAHAN,), run_args=("20000", "2")), gcc_info)
    ev.set_reference(["-O2"])
    noise = random.Random(5)
    calls = [0]
    real_run_once = ev.run_once

    def noisy_run_once(binary, scratch, timeout_s=None):  # type: ignore[no-untyped-def]
        _, why, out = real_run_once(binary, scratch, timeout_s)  # the real output, checked as ever
        calls[0] += 1
        return 1.0 + 0.003 * calls[0] + noise.gauss(0.0, 0.01), why, out

    monkeypatch.setattr(ev, "run_once", noisy_run_once)
    winner = ["-O3", "-march=native", "-funroll-loops", "-fno-tree-vectorize", "-fno-inline"]
    minimal, contributions = reduce_flags(ev, winner, runs=6)
    assert minimal == ["-O3"] and contributions == {}


def test_the_lag_reaches_the_search_and_is_recorded(gcc_info, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perftune.store import open_store

    db = f"sqlite:///{tmp_path / 'lag.db'}"
    tune_flags([KAHAN], "2000 1", budget=2, seed=1, lag=0, info=gcc_info, store=db, name="lagged",
               confirm_runs=2, include_params=False, reduce=False)
    store = open_store(db)
    assert store.get_run("lagged").settings["lag"] == 0
