"""Bad input in a task file: one line naming the file, the key and the line, no traceback, exit 2.

Each test breaks one thing of a small valid task file and runs ``perftune run`` on it; nothing is
measured, since every mistake here is found while the file is read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.targets.command import load_task

BASE = """\
name = "errors"
inputs = ["input.txt"]

[space]
level = { type = "int", min = 1, max = 9, default = 1 }

[run]
command = ["python3", "-c", "print('size:', 1)", "{level}"]
timeout_s = 30

[objective]
metric = "stdout_regex"
pattern = 'size: ([0-9]+)'
goal = "min"

[timing]
repeats = 1
warmup_runs = 0

[tuning]
budget = 3
seed = 1
"""


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def write(folder: Path, text: str | bytes, name: str = "task.toml") -> Path:
    (folder / "input.txt").write_text("some input\n")
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def edit(old: str, new: str, text: str = BASE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def error_of(task: Path | str, tmp_path: Path) -> str:
    """``perftune run TASK``'s one line, asserted to be a clean error (exit 2, no traceback)."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    result = CliRunner().invoke(cli, ["--store", store, "run", str(task), "--budget", "3"])
    assert result.exit_code == 2, (result.output, result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("perftune: error: "), result.output
    return lines[0].removeprefix("perftune: error: ")


def error_of_process(task: Path | str, tmp_path: Path) -> str:
    """The same through a real process (a file that would hang or eat memory: bounded by a timeout)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perftune",
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "run",
            str(task),
            "--budget",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("perftune: error: "), proc.stderr
    return proc.stderr.strip().removeprefix("perftune: error: ")


def test_the_base_task_is_valid(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, BASE), prepare=False)
    assert task.space.names == ["level"]


# -- 1. encoding --------------------------------------------------------------------------------------


def test_a_byte_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    lines = BASE.encode().split(b"\n")
    lines[3] += b"  # \xc3\x28"
    task = write(tmp_path, b"\n".join(lines))
    assert error_of(task, tmp_path) == f"{task}:4: not UTF-8 text (byte 0xc3)"


def test_a_binary_file_is_not_utf8_text(tmp_path: Path) -> None:
    task = write(tmp_path, b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    assert error_of(task, tmp_path) == f"{task}:2: not UTF-8 text (byte 0x80)"  # byte 10 ends line 1


def test_a_byte_order_mark_is_said_to_be_one(tmp_path: Path) -> None:
    task = write(tmp_path, b"\xef\xbb\xbf" + BASE.encode())
    message = error_of(task, tmp_path)
    assert message.startswith(f"{task}:1: the file starts with a UTF-8 byte-order mark (BOM)"), message


# -- 2. not a regular file, too large -----------------------------------------------------------------


def test_a_character_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    message = error_of_process("/dev/zero", tmp_path)
    assert message == "/dev/zero: the task file is not a regular file (a character device)"


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "task.toml"
    os.mkfifo(fifo)
    message = error_of_process(fifo, tmp_path)
    assert message == f"{fifo}: the task file is not a regular file (a named pipe)"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    from perftune.errors import TaskError

    with pytest.raises(TaskError, match=r"the task file is not a regular file \(a directory\)$"):
        load_task(tmp_path, prepare=False)


def test_a_task_file_over_one_mib_is_refused(tmp_path: Path) -> None:
    task = write(tmp_path, BASE + "#" * (1 << 20) + "\n")
    message = error_of(task, tmp_path)
    assert message.startswith(f"{task}: the task file is larger than 1 MiB ("), message


# -- 3. env values --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("timeout_s = 30", "timeout_s = 30\nenv = { FOO = true, BAR = 1.5 }", "run.env.FOO"),
        ('inputs = ["input.txt"]', 'inputs = ["input.txt"]\nenv = { FOO = false }', "env.FOO"),
    ],
)
def test_a_boolean_env_value_is_an_error(tmp_path: Path, old: str, new: str, key: str) -> None:
    text = edit(old, new)
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    assert message.startswith(f"{task}:{line_of(text, 'FOO =')}: {key}: expected a string, got boolean "), (
        message
    )


def test_a_number_env_value_is_written_as_typed(tmp_path: Path) -> None:
    task = load_task(
        write(tmp_path, edit("timeout_s = 30", "timeout_s = 30\nenv = { BAR = 1.5, N = 2 }")), prepare=False
    )
    assert task.objective.run.env == (("BAR", "1.5"), ("N", "2"))


# -- 4. tie ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tie", ["5", "1", "1.0"])
def test_a_tie_of_one_or_more_is_refused(tmp_path: Path, tie: str) -> None:
    text = edit("warmup_runs = 0", f"warmup_runs = 0\ntie = {tie}")
    task = write(tmp_path, text)
    assert error_of(task, tmp_path) == (
        f"{task}:{line_of(text, 'tie =')}: timing.tie: must be >= 0 and < 1, got {tie} "
        "(a relative difference: 0.01 = 1%)"
    )


def test_a_tie_below_one_is_accepted(tmp_path: Path) -> None:
    load_task(write(tmp_path, edit("warmup_runs = 0", "warmup_runs = 0\ntie = 0.5")), prepare=False)


# -- 5. workers ----------------------------------------------------------------------------------------


def test_an_absurd_number_of_workers_is_refused(tmp_path: Path) -> None:
    text = edit("seed = 1", "seed = 1\nworkers = 100000")
    task = write(tmp_path, text)
    assert error_of(task, tmp_path) == (
        f"{task}:{line_of(text, 'workers =')}: tuning.workers: must be >= 1 and <= 1024, got 100000"
    )
    ok = load_task(write(tmp_path, edit("seed = 1", "seed = 1\nworkers = 1024")), prepare=False)
    assert ok.workers == 1024


# -- 6. the line of an input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "why"), [(".", "is not a readable file"), ("nosuch.txt", "does not exist")]
)
def test_an_input_is_reported_on_its_own_line(tmp_path: Path, value: str, why: str) -> None:
    text = edit('inputs = ["input.txt"]', f'\n\ninputs = ["{value}"]')
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    assert message.startswith(f"{task}:{line_of(text, 'inputs =')}: inputs[0]: input {value!r} {why} ("), (
        message
    )


# -- 7. budget table keys --------------------------------------------------------------------------------


def test_an_unknown_budget_key_lists_the_allowed_ones_and_the_near_one(tmp_path: Path) -> None:
    text = edit("budget = 3", "budget = { evals = 5, secs = 10 }")
    task = write(tmp_path, text)
    assert error_of(task, tmp_path) == (
        f"{task}:{line_of(text, 'budget =')}: tuning.budget.secs: unknown key "
        "(allowed: evals, patience, seconds, target); did you mean 'seconds'?"
    )


# -- 8. did you mean ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "key", "meant"),
    [
        ("timeout_s = 30", "timeout = 30", "run.timeout", "timeout_s"),
        ("[tuning]", "[tunning]", "tunning", "tuning"),
        ('inputs = ["input.txt"]', 'input = ["input.txt"]', "input", "inputs"),
        ("warmup_runs = 0", "warmup_run = 0", "timing.warmup_run", "warmup_runs"),
        ("seed = 1", "seed = 1\n[sandbox]\nkeepscratch = true", "sandbox.keepscratch", "keep_scratch"),
    ],
)
def test_an_unknown_key_suggests_the_near_one(
    tmp_path: Path, old: str, new: str, key: str, meant: str
) -> None:
    text = edit(old, new)
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    needle = new.splitlines()[-1].split("=")[0].strip()
    assert message.startswith(f"{task}:{line_of(text, needle)}: {key}: unknown key (allowed: "), message
    assert message.endswith(f"; did you mean {meant!r}?"), message


def test_an_unknown_key_far_from_every_allowed_one_gets_no_suggestion(tmp_path: Path) -> None:
    task = write(tmp_path, edit("timeout_s = 30", "timeout_s = 30\nzzzzzz = 1"))
    message = error_of(task, tmp_path)
    assert "run.zzzzzz: unknown key (allowed: " in message and "did you mean" not in message


@pytest.mark.parametrize(
    ("old", "new", "meant"),
    [("max = 9, default = 1", "max = 9, defualt = 1", "default"), ('type = "int"', 'type = "integr"', "int")],
)
def test_a_parameter_typo_suggests_the_near_key_or_type(
    tmp_path: Path, old: str, new: str, meant: str
) -> None:
    text = edit(old, new)
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    assert message.startswith(f"{task}:{line_of(text, 'level =')}: space.level: unknown "), message
    assert message.endswith(f"; did you mean {meant!r}?"), message


# -- 9. the expensive check's program ----------------------------------------------------------------------


def test_a_missing_program_of_the_expensive_check_is_found_before_measuring(tmp_path: Path) -> None:
    text = BASE + '\n[check]\nstdout = "exact"\n\n[check.expensive]\nbuild = ["nosuchcompiler", "x"]\n'
    task = write(tmp_path, text)
    assert error_of(task, tmp_path) == (
        f"{task}: check.expensive.build[0]: command not found: nosuchcompiler"
    )


# -- 10. a program without the execute bit ----------------------------------------------------------------


@pytest.mark.parametrize("program", ["{task_dir}/prog.py", "./prog.py", "absolute"])
def test_a_program_that_is_not_executable_is_said_to_be_so(tmp_path: Path, program: str) -> None:
    script = tmp_path / "prog.py"
    script.write_text("#!/usr/bin/env python3\nprint('size:', 1)\n")
    script.chmod(0o644)
    if program == "absolute":
        program = str(script)
    text = edit('"python3", "-c", "print(\'size:\', 1)", ', f'"{program}", ')
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    assert message.startswith(
        f"{task}:{line_of(text, 'command =')}: run.command[0]: {script} is not executable"
    ), message
    script.chmod(0o755)
    load_task(task, prepare=False)


# -- 11. cwd and pin_cpus --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("timeout_s = 30", 'timeout_s = 30\ncwd = "/nonexistent/dir"', "run.cwd"),
        ('inputs = ["input.txt"]', 'inputs = ["input.txt"]\ncwd = "/nonexistent/dir"', "cwd"),
        ("timeout_s = 30", 'timeout_s = 30\ncwd = "{task_dir}/nosub"', "run.cwd"),
    ],
)
def test_a_working_directory_that_does_not_exist_is_found_at_once(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    text = edit(old, new)
    task = write(tmp_path, text)
    expected = "'/nonexistent/dir'" if "nonexistent" in new else f"'{tmp_path}/nosub'"
    assert (
        error_of(task, tmp_path)
        == f"{task}:{line_of(text, 'cwd =')}: {key}: directory {expected} does not exist"
    )


def test_a_working_directory_rendered_per_candidate_is_not_checked_before(tmp_path: Path) -> None:
    load_task(
        write(tmp_path, edit("timeout_s = 30", 'timeout_s = 30\ncwd = "{scratch}/made_by_build"')),
        prepare=False,
    )


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no sched_getaffinity here")
def test_a_core_this_process_cannot_use_is_refused_with_the_ones_it_can(tmp_path: Path) -> None:
    core = max(os.sched_getaffinity(0)) + 1000
    text = edit("warmup_runs = 0", f"warmup_runs = 0\npin_cpus = [{core}]")
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    assert message.startswith(
        f"{task}:{line_of(text, 'pin_cpus =')}: timing.pin_cpus: core {core} not available to this "
        "process (available: "
    ), message
    mine = min(os.sched_getaffinity(0))
    load_task(
        write(tmp_path, edit("warmup_runs = 0", f"warmup_runs = 0\npin_cpus = [{mine}]")), prepare=False
    )


# -- 12. a default of the wrong type ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "got"),
    [
        ('"1"', "string '1' (remove the quotes)"),
        ("true", "boolean true"),
        ("2.0", "float 2.0"),
        ('"x"', "string 'x'"),
    ],
)
def test_a_default_of_the_wrong_type_is_said_to_be_so(tmp_path: Path, default: str, got: str) -> None:
    text = edit("default = 1", f"default = {default}")
    task = write(tmp_path, text)
    assert error_of(task, tmp_path) == (
        f"{task}:{line_of(text, 'level =')}: space.level.default: "
        f"expected an integer for type 'int', got {got}"
    )


def test_a_default_outside_the_domain_is_still_said_to_be_outside(tmp_path: Path) -> None:
    task = write(tmp_path, edit("default = 1", "default = 12"))
    assert "default 12 is outside the domain [1, 9]" in error_of(task, tmp_path)


def test_an_error_about_a_short_key_names_its_own_line() -> None:
    # "n =" is not in "min = 16": the line of an assignment is found by the whole name, aligned or not.
    from perftune.targets.command._sections import Where

    text = ('[space]\nblock = { type = "pow2", min = 16, max = 256 }\n# n = a comment\n'
            'n     = { type = "int", fidelity = [1000, 100] }\n')
    where = Where("task.toml", text)
    assert where.line_of("n =", "n=") == 4
    assert where.line_of("max =") == 2 and where.line_of("nope =") is None
    assert where.line_of('fidelity = [') == 4  # other needles are found as typed


# -- 11. the line of a key: in its own table, or in an inline table -----------------------------------------


def test_an_unknown_key_is_reported_at_its_own_table_with_where_it_belongs(tmp_path: Path) -> None:
    # A key of the same name earlier in another table ([check.expensive] budget) is not its line.
    text = edit("[timing]", '[check]\nstdout = "none"\n\n[check.expensive]\nbudget = 0.1\n\n'
                            '[timing]\nbudget = 5')
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln == "budget = 5")
    assert message.startswith(f"{task}:{line}: timing.budget: unknown key (allowed: "), message
    assert message.endswith("; 'budget' is a key of [check.expensive] and [tuning]"), message


def test_an_error_in_an_inline_table_names_the_line_of_that_table(tmp_path: Path) -> None:
    text = ('build = { command = ["true"], timeout_s = 60 }\n'
            'run = { command = ["true", "{x}"], timeout_s = "5" }\n'
            '[space]\nx = { type = "int", min = 1, max = 5, default = 1 }\n')
    task = write(tmp_path, text)
    assert error_of(task, tmp_path) == f"{task}:2: run.timeout_s: expected a number, got str '5'"
    text = edit("[timing]", '[check]\nstdout = "none"\nexpensive = { budget = 0.1, bogus = 1 }\n\n[timing]')
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    assert message.startswith(f"{task}:{line_of(text, 'bogus')}: check.expensive.bogus: unknown key"), message


# -- 12. [tuning] technique and seeds ------------------------------------------------------------------------


def test_an_unknown_technique_is_one_line_with_its_key_and_line(tmp_path: Path) -> None:
    text = edit("seed = 1", 'seed = 1\ntechnique = "randm"')
    task = write(tmp_path, text)
    message = error_of(task, tmp_path)
    assert message.startswith(f"{task}:{line_of(text, 'technique')}: tuning.technique: unknown technique "
                              "'randm' (known: "), message
    assert message.endswith("; did you mean 'random'?"), message


def test_a_seed_value_of_the_wrong_type_is_said_to_be_so(tmp_path: Path) -> None:
    text = edit("seed = 1", 'seed = 1\nseeds = [{ level = "3" }]')
    task = write(tmp_path, text)
    assert error_of(task, tmp_path) == (
        f"{task}:{line_of(text, 'seeds')}: tuning.seeds[0]: parameter 'level': expected an integer for type "
        "'int', got string '3' (remove the quotes)"
    )
