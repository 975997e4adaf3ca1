"""Each section of a task file has a reader of its own: they check their section alone, name the line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from perftune.drive import Budget
from perftune.errors import TaskError
from perftune.targets.command._sections import (
    Where,
    read_check,
    read_environment,
    read_objective,
    read_space,
    read_steps,
    read_timing,
    read_tuning,
)
from perftune.targets.command._specs import ObjectiveSpec

SPACE = """
[space]
n = { type = "int", min = 1, max = 8, default = 2 }
mode = { type = "choice", options = ["a", "b"] }
"""


def parse(text: str) -> tuple[dict[str, object], Where]:
    return tomllib.loads(text), Where("t.toml", text)


def test_space_gives_the_parameters_and_how_they_are_rendered() -> None:
    doc, where = parse('[space]\nfast = { type = "bool", on = "--fast", off = "" }\n')
    space, render = read_space(doc, where)
    assert space.names == ["fast"]
    assert render == {"fast": {"on": "--fast", "off": ""}}


def test_objective_defaults_and_an_error_that_names_key_and_line() -> None:
    doc, where = parse("")
    assert read_objective(doc, where, set()) == ObjectiveSpec("wall_time", "min")
    doc, where = parse('x = 1\n[objective]\nmetric = "stdout_json"\ngoal = "max"\n')
    with pytest.raises(TaskError, match=r"^t\.toml:2: objective\.key: metric \"stdout_json\" needs key"):
        read_objective(doc, where, set())


def test_steps_refuse_an_input_placeholder_without_inputs() -> None:
    doc, where = parse('[run]\ncommand = ["cat", "{input}"]\n')
    with pytest.raises(TaskError, match=r"run\.command: uses \{input\} but the task declares no inputs"):
        read_steps(doc, where, {"input"}, [])
    build, run = read_steps(doc, where, {"input"}, ["/data/in.txt"])
    assert build is None and run.command == ("cat", "{input}") and run.timeout_s == 60.0


def test_check_turns_tolerances_into_a_numeric_comparison(tmp_path: Path) -> None:
    doc, where = parse("[check]\nstdout = true\nrtol = 1e-6\n")
    check = read_check(doc, where, set(), tmp_path, [])
    assert check.stdout == "numeric" and check.rtol == 1e-6 and check.expensive is None


def test_timing_checks_ranges_against_each_other() -> None:
    doc, where = parse("[timing]\nmin_runs = 5\nmax_runs = 3\n")
    expected = r"^t\.toml:2: timing\.min_runs: must be at most max_runs \(3\), got 5$"
    with pytest.raises(TaskError, match=expected):
        read_timing(doc, where, ObjectiveSpec())


def test_environment_templates_may_only_name_known_parameters() -> None:
    doc, where = parse('cwd = "{scratch}"\n[env]\nOMP = "{threads}"\n')
    with pytest.raises(TaskError, match=r"env\.OMP: unknown parameter \{threads\}"):
        read_environment(doc, where, {"scratch", "n"})
    env, cwd = read_environment(*parse('cwd = "{scratch}"\n[env]\nOMP = "{n}"\n'), {"scratch", "n"})
    assert env == (("OMP", "{n}"),) and cwd == "{scratch}"


def test_tuning_reads_budget_and_seeds_and_refuses_an_invalid_seed() -> None:
    doc, where = parse(SPACE)
    space, _ = read_space(doc, where)
    doc, where = parse(SPACE + '[tuning]\nbudget = 20\nseed = 3\nseeds = [{ n = 4, mode = "b" }]\n')
    tuning = read_tuning(doc, where, space)
    assert tuning.budget == Budget.coerce(20) and tuning.seed == 3
    assert tuning.seeds == ({"n": 4, "mode": "b"},)
    doc, where = parse(SPACE + "[tuning]\nseeds = [{ n = 99 }]\n")
    with pytest.raises(TaskError, match=r"tuning\.seeds\[0\]: invalid configuration"):
        read_tuning(doc, where, space)


def test_a_seed_missing_parameters_names_them_all_and_says_defaults_are_not_filled() -> None:
    text = SPACE + 'extra = { type = "int", min = 1, max = 3, when = "mode == \'b\'" }\n'
    doc, where = parse(text)
    space, _ = read_space(doc, where)
    doc, where = parse(text + '[tuning]\nseeds = [{ n = 4 }, { mode = "b" }]\n')
    expected = (r"^t\.toml:7: tuning\.seeds\[0\]: parameter 'mode' is missing: a seed gives a value to every "
                r"active parameter \(missing ones are not filled from their defaults\)$")
    with pytest.raises(TaskError, match=expected):
        read_tuning(doc, where, space)
    doc, where = parse(text + '[tuning]\nseeds = [{ mode = "b" }]\n')
    with pytest.raises(TaskError, match=r"tuning\.seeds\[0\]: parameters 'n', 'extra' are missing"):
        read_tuning(doc, where, space)


def test_sandbox_sizes_are_bounded_so_that_their_bytes_fit_the_kernels_limits() -> None:
    from perftune.targets.command._sections import read_sandbox

    doc, where = parse("[sandbox]\nprocesses = 20\ndisk_mb = 10000000000000\n")
    with pytest.raises(TaskError, match=r"^t\.toml:3: sandbox\.disk_mb: must be >= 1 and <= 4398046511104, "
                                        r"got 10000000000000$"):
        read_sandbox(doc, where)
    doc, where = parse("[sandbox]\nmemory_mb = 4398046511104\n")
    with pytest.raises(TaskError, match=r"sandbox\.memory_mb: must be >= 1 and <= 1099511627776"):
        read_sandbox(doc, where)
    most = read_sandbox(*parse("[sandbox]\ndisk_mb = 4398046511104\nprocesses = 20000\n"))
    assert most["processes"] == 20000
