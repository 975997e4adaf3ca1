"""Task files as a reviewer found them: relative paths, a default that fails its own checks, outputs
with timings, very large JSON numbers, sanitizer steps.

Each test fails on the code before its fix: relative ``[check] files``/``[objective] file`` read from
perftune's own working directory, ``./prog`` taken from the task folder while the build made it in
``{scratch}``, a nondeterministic default or a broken expensive check found only trial by trial, ``ignore``
applied to stdout alone, and tracebacks for integers too large for a float.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from perftune.errors import TaskError
from perftune.targets.command import CandidateError, CommandObjective, load_task


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def write(folder: Path, text: str, name: str = "task.toml") -> Path:
    path = folder / name
    path.write_text(text)
    os.chmod(folder, 0o755)
    return path


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
    return path


# -- 1: relative output files are the candidate's, in the run step's working directory ---------------

RELATIVE_FILES = """
[space]
x = { type = "int", min = 1, max = 5, default = 1 }
[run]
command = ["sh", "-c", "echo same > out.txt; head -c $(($0*1000)) /dev/zero > out.bin", "{x}"]
[check]
files = ["out.txt"]
[objective]
metric = "file_size"
file = "out.bin"
"""


def test_relative_output_files_are_read_where_the_run_wrote_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_path = write(tmp_path, RELATIVE_FILES)
    elsewhere = tmp_path / "elsewhere"  # perftune's own working directory, with stale files
    elsewhere.mkdir()
    (elsewhere / "out.bin").write_bytes(b"\0" * 777)
    (elsewhere / "out.txt").write_text("stale\n")
    monkeypatch.chdir(elsewhere)
    task = load_task(task_path)
    assert task.objective({"x": 1})["file_size"] == 1000.0
    assert task.objective({"x": 3})["file_size"] == 3000.0


def test_a_relative_output_file_follows_the_run_steps_cwd(tmp_path: Path) -> None:
    # The build makes {scratch}/sub, where the run (cwd = "{scratch}/sub") writes its files.
    text = """
[space]
x = { type = "int", min = 1, max = 5, default = 1 }
[build]
command = ["mkdir", "sub"]
[run]
command = ["sh", "-c", "echo same > out.txt; head -c $(($0*1000)) /dev/zero > out.bin", "{x}"]
cwd = "{scratch}/sub"
[check]
files = ["out.txt"]
[objective]
metric = "file_size"
file = "out.bin"
"""
    task = load_task(write(tmp_path, text))
    assert task.objective({"x": 2})["file_size"] == 2000.0


# -- 2: ./prog is what the build made in the step's working directory ---------------------------------

BUILT_PROG = """
[space]
x = { type = "int", min = 1, max = 5, default = 1 }
[build]
command = ["sh", "-c", "printf '#!/bin/sh\\necho X=%s\\n' $0 > prog && chmod +x prog", "{x}"]
[run]
command = ["./prog"]
[objective]
metric = "stdout_regex"
pattern = 'X=(\\d+)'
goal = "max"
[check]
stdout = "none"
[timing]
repeats = 1
warmup_runs = 0
"""


def test_a_decoy_in_the_task_folder_never_replaces_what_the_build_made(tmp_path: Path) -> None:
    executable(tmp_path / "prog", "#!/bin/sh\necho X=0\n")
    task = load_task(write(tmp_path, BUILT_PROG))
    assert task.objective({"x": 1})["stdout_regex"] == 1.0
    assert task.objective({"x": 4})["stdout_regex"] == 4.0


def test_a_program_the_build_makes_is_not_refused_at_load(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, BUILT_PROG))  # no ./prog anywhere before the build runs
    assert task.objective({"x": 3})["stdout_regex"] == 3.0


def test_a_script_next_to_the_task_file_still_runs_as_dot_slash(tmp_path: Path) -> None:
    executable(tmp_path / "run.sh", '#!/bin/sh\necho X=$1\n')
    text = BUILT_PROG.replace('command = ["./prog"]', 'command = ["./run.sh", "{x}"]')
    task = load_task(write(tmp_path, text))
    assert task.objective({"x": 5})["stdout_regex"] == 5.0


def test_a_relative_program_found_nowhere_says_where_it_looked(tmp_path: Path) -> None:
    text = BUILT_PROG.replace("> prog && chmod +x prog", "> other")
    with pytest.raises(TaskError, match=r"command not found: \./prog \(looked in the step's working "
                                        rf"directory \S+ and in the task folder {tmp_path}\)"):
        load_task(write(tmp_path, text))
    no_build = NO_BUILD_PROG
    with pytest.raises(TaskError, match=rf"run\.command\[0\]: command not found: \./prog \(looked in "
                                        rf"{tmp_path}\)$"):
        load_task(write(tmp_path, no_build))


NO_BUILD_PROG = """
[space]
x = { type = "int", min = 1, max = 5, default = 1 }
[run]
command = ["./prog", "{x}"]
"""


# -- 3: the default configuration must pass its own checks before anything is measured ---------------

NONDETERMINISTIC = """
[space]
x = { type = "int", min = 1, max = 5, default = 1 }
[run]
command = ["python3", "-c", "import time; print('result 42'); print('elapsed', time.perf_counter())", "{x}"]
[check]
stdout = "exact"
[timing]
repeats = 1
warmup_runs = 0
"""


def test_a_default_whose_output_changes_between_runs_is_one_line_at_load(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"check: two runs of the default configuration disagree.*line 2.*"
                                        r"check\.ignore.*check\.stdout = \"numeric\".*\"none\"") as info:
        load_task(write(tmp_path, NONDETERMINISTIC))
    assert "\n" not in str(info.value)
    task = load_task(write(tmp_path, NONDETERMINISTIC.replace('stdout = "exact"', 'stdout = "exact"\n'
                                                                "ignore = '^elapsed'")))
    assert task.objective({"x": 2})["n_runs"] == 1.0


def _count_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    steps: list[str] = []
    original = CommandObjective._step

    def counted(self: CommandObjective, sandbox: object, step: object, *args: object) -> object:
        steps.append("build" if step is self.build else "run" if step is self.run else "other")
        return original(self, sandbox, step, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(CommandObjective, "_step", counted)
    return steps


def test_preparing_costs_one_run_more_with_a_check_and_none_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = _count_steps(monkeypatch)
    load_task(write(tmp_path, BUILT_PROG))  # check.stdout = "none"
    assert steps == ["build", "run"]
    steps.clear()
    load_task(write(tmp_path, BUILT_PROG.replace('stdout = "none"', 'stdout = "exact"')))
    assert steps == ["build", "run", "run"]


EXPENSIVE = BUILT_PROG + """
[check.expensive]
build = ["sh", "-c", "printf '#!/bin/sh\\necho X=%s\\n' $0 > prog && chmod +x prog", "{x}"]
"""


def test_a_broken_expensive_build_is_one_line_naming_it_at_load(tmp_path: Path) -> None:
    text = BUILT_PROG + '[check.expensive]\nbuild = ["sh", "-c", "echo bad flag >&2; exit 1"]\n'
    with pytest.raises(TaskError, match=r"check\.expensive\.build: the default configuration fails to build "
                                        r"with it: exit code 1; stderr: bad flag") as info:
        load_task(write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_a_default_that_fails_its_expensive_check_is_one_line_at_load(tmp_path: Path) -> None:
    head, tail = EXPENSIVE.replace('stdout = "none"', 'stdout = "exact"').rsplit("echo X=%s", 1)
    text = head + "echo X=9%s" + tail  # the expensive check's build only: its program prints X=91
    with pytest.raises(TaskError, match=r"check\.expensive: the default configuration fails its own "
                                        r"expensive check: run: stdout differs"):
        load_task(write(tmp_path, text))


def test_the_default_is_not_checked_expensively_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, object]] = []
    original = CommandObjective._expensive_check

    def counted(self: CommandObjective, config: dict[str, object], *args: object) -> str | None:
        calls.append(dict(config))
        return original(self, config, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(CommandObjective, "_expensive_check", counted)
    task = load_task(write(tmp_path, EXPENSIVE))
    assert calls == [{"x": 1}]  # while preparing
    out = task.objective({"x": 1})  # the default's trial: a potential winner, checked already
    assert out["verified"] == 1.0 and calls == [{"x": 1}]
    task.objective({"x": 5})  # a better one is checked
    assert calls == [{"x": 1}, {"x": 5}]


# -- 4: ignore applies to the output files too -----------------------------------------------------------

TIMED = """\
import sys, time
result = 41 if sys.argv[1] == "3" else 42
open("out.txt", "w").write(f"time: {time.perf_counter()}\\nresult {result}\\n")
print(f"time: {time.perf_counter()}")
print("result 42")
"""

TIMED_FILE = """
[space]
x = { type = "int", min = 1, max = 3, default = 1 }
[run]
command = ["python3", "{task_dir}/timed.py", "{x}"]
[check]
stdout = "exact"
files = ["{scratch}/out.txt"]
ignore = "^time:"
[timing]
repeats = 1
warmup_runs = 0
"""


def test_ignored_lines_of_an_output_file_are_not_compared(tmp_path: Path) -> None:
    (tmp_path / "timed.py").write_text(TIMED)
    task = load_task(write(tmp_path, TIMED_FILE))
    assert task.objective({"x": 2})["n_runs"] == 1.0
    # Lines are counted once the ignored ones are left out, as for stdout.
    with pytest.raises(CandidateError, match=r"output file '\{scratch\}/out\.txt' differs from the "
                                             r"default configuration's: line 1: got 'result 41', "
                                             r"expected 'result 42'"):
        task.objective({"x": 3})


def test_binary_files_that_differ_are_told_apart_with_ignore(tmp_path: Path) -> None:
    # Decoded with errors="replace", b"\xff" and b"\xfe" would both read as U+FFFD and compare equal.
    (tmp_path / "binary.py").write_text(
        'import sys\nopen("out.bin", "wb").write(b"a" + (b"\\xff" if sys.argv[1] == "1" else b"\\xfe"))\n')
    text = TIMED_FILE.replace("timed.py", "binary.py").replace('"{scratch}/out.txt"', '"out.bin"').replace(
        'stdout = "exact"', 'stdout = "none"')
    task = load_task(write(tmp_path, text))
    with pytest.raises(CandidateError, match=r"output file 'out\.bin' differs from the default "
                                             r"configuration's: line 1"):
        task.objective({"x": 2})


# -- 5: JSON numbers too large for a float are not finite, never a traceback ----------------------------

JSON_BIG = """
[space]
x = { type = "int", min = 1, max = 3, default = 1 }
[run]
command = ["python3", "{task_dir}/big.py", "{x}"]
[check]
stdout = "none"
[objective]
metric = "stdout_json"
key = "v"
goal = "min"
"""


def _json_big(folder: Path, *, digits: int, big_for: int) -> Path:
    """A task whose configuration x = ``big_for`` prints an integer of ``digits`` digits."""
    (folder / "big.py").write_text(
        "import sys\nx = int(sys.argv[1])\n"
        f"print('{{\"v\": ' + ('1' * {digits} if x == {big_for} else str(x)) + '}}')\n")
    return write(folder, JSON_BIG)


def test_a_default_printing_an_integer_too_large_for_a_float_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"objective\.key: on the default configuration's output: objective "
                                        r"value 111111\.\.\.111 \(400 digits\) is not finite$"):
        load_task(_json_big(tmp_path, digits=400, big_for=1))


def test_an_integer_of_more_digits_than_python_reads_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"objective\.key: on the default configuration's output: no JSON "
                                        r"line in stdout has a numeric 'v' \(a JSON line holds an integer of "
                                        r"more than \d+ digits, which is not a finite number\)"):
        load_task(_json_big(tmp_path, digits=5000, big_for=1))


def test_a_candidate_printing_an_integer_too_large_for_a_float_fails_as_not_finite(tmp_path: Path) -> None:
    task = load_task(_json_big(tmp_path, digits=400, big_for=2))
    with pytest.raises(CandidateError, match=r"^objective value 111111\.\.\.111 \(400 digits\) is not "
                                             r"finite$"):
        task.objective({"x": 2})
    assert task.objective({"x": 3})["stdout_json"] == 3.0


# -- 11: `sanitizer = true` of a step gives it the sanitizer limits, as its documentation says -----------

def test_a_sanitizer_step_runs_with_the_sanitizer_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bool] = []
    original = CommandObjective.sandbox

    def recorded(self: CommandObjective, *, sanitizer: bool = False) -> object:
        asked.append(sanitizer)
        return original(self, sanitizer=sanitizer)

    task = load_task(write(tmp_path, BUILT_PROG.replace("[run]\n", "[run]\nsanitizer = true\n")))
    monkeypatch.setattr(CommandObjective, "sandbox", recorded)
    assert task.objective({"x": 2})["stdout_regex"] == 2.0
    assert True in asked
    asked.clear()
    task = load_task(write(tmp_path, BUILT_PROG))
    monkeypatch.setattr(CommandObjective, "sandbox", recorded)
    task.objective({"x": 2})
    assert True not in asked
