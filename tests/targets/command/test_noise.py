"""Task files: settings validated at load time, non-finite values, and measuring only what is noisy."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import perftune
from perftune import Status
from perftune.errors import TaskError
from perftune.store import open_store
from perftune.targets.command import CandidateError, load_task


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


# score=N from the parameter: a deterministic metric, as an accuracy or a count would be.
BASE = """\
[space]
n = { type = "int", min = 0, max = 9, default = 0 }

[build]
command = ["true"]
timeout_s = 10

[run]
command = ["sh", "-c", "echo score=$(( ($0 - 6) * ($0 - 6) ))", "{n}"]
timeout_s = 10

[objective]
metric = "stdout_regex"
pattern = 'score=(\\S+)'
goal = "min"

[check]

[check.expensive]
budget = 0.0

[timing]

[sandbox]

[tuning]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "task.toml"
    path.write_text(text)
    os.chmod(tmp_path, 0o755)
    return path


def with_setting(table: str, line: str) -> tuple[str, int]:
    """BASE with ``line`` added at the top of ``[table]``, and the number of that line."""
    lines = BASE.splitlines()
    at = lines.index(f"[{table}]") + 1
    end = next((i for i in range(at, len(lines)) if lines[i].startswith("[")), len(lines))
    keys = {part.split("=")[0].strip() for part in line.splitlines()}
    lines[at:end] = [x for x in lines[at:end] if x.split("=")[0].strip() not in keys]  # replaced
    lines.insert(at, line)
    return "\n".join(lines) + "\n", at + 1


@pytest.mark.parametrize(
    ("table", "line", "key", "why"),
    [
        # the silent misconfigurations of the issue
        ("sandbox", 'network = "no"', "sandbox.network", "expected true or false"),
        ("run", "timeout_s = nan", "run.timeout_s", "must be a finite number, got nan"),
        ("sandbox", 'keep_scratch = "false"', "sandbox.keep_scratch", "expected true or false"),
        ("check.expensive", "repeats = -3", "check.expensive.repeats", "must be >= 0, got -3"),
        ("check", "rtol = -1", "check.rtol", "must be >= 0, got -1"),
        # and the rest of [sandbox], [timing], [check], [build]/[run] and [tuning]
        ("sandbox", 'isolate_files = "yes"', "sandbox.isolate_files", "expected true or false"),
        ("sandbox", "memory_mb = 0", "sandbox.memory_mb", "must be >= 1"),
        ("sandbox", "processes = 2.5", "sandbox.processes", "expected an integer"),
        ("sandbox", "disk_mb = -64", "sandbox.disk_mb", "must be >= 1"),
        ("sandbox", "scratch_root = 5", "sandbox.scratch_root", "expected str"),
        ("build", "timeout_s = inf", "build.timeout_s", "must be a finite number"),
        ("build", "timeout_s = 0", "build.timeout_s", "must be > 0"),
        ("run", "shell = 1", "run.shell", "expected true or false"),
        ("timing", "repeats = 0", "timing.repeats", "must be >= 1"),
        ("timing", "min_runs = 0", "timing.min_runs", "must be >= 1"),
        ("timing", "max_runs = true", "timing.max_runs", "expected an integer"),
        ("timing", "first_runs = 0", "timing.first_runs", "must be >= 1"),
        ("timing", "warmup_runs = -1", "timing.warmup_runs", "must be >= 0"),
        ("timing", "tie = nan", "timing.tie", "must be a finite number"),
        ("timing", "tie = -0.01", "timing.tie", "must be >= 0"),
        ("timing", "confidence = 1.5", "timing.confidence", "must be > 0 and < 1"),
        ("timing", "futility_confidence = 0", "timing.futility_confidence", "must be > 0 and < 1"),
        ("timing", "timeout_factor = inf", "timing.timeout_factor", "must be a finite number"),
        ("timing", "timeout_factor = 0.5", "timing.timeout_factor", "must be >= 1"),
        ("timing", "min_timeout_s = 0", "timing.min_timeout_s", "must be > 0"),
        ("timing", "pin_cpus = [-1]", "timing.pin_cpus", "array of core numbers"),
        ("timing", "min_runs = 9\nmax_runs = 4", "timing.min_runs", "must be at most max_runs"),
        ("check", "atol = nan", "check.atol", "must be a finite number"),
        ("check.expensive", "repeats = 1.5", "check.expensive.repeats", "expected an integer"),
        ("check.expensive", "budget = nan", "check.expensive.budget", "must be a finite number"),
        ("check.expensive", "budget = 2", "check.expensive.budget", "must be >= 0 and <= 1"),
        ("check.expensive", "build_timeout_s = 0", "check.expensive.build_timeout_s", "must be > 0"),
        ("check.expensive", "run_timeout_s = -inf", "check.expensive.run_timeout_s", "finite"),
        ("check.expensive", 'sanitizer = "no"', "check.expensive.sanitizer", "expected true or false"),
        ("tuning", "budget = 0", "tuning.budget", "must be >= 1"),
        ("tuning", "budget = 1.5", "tuning.budget", "expected an integer"),
        ("tuning", "budget = { seconds = nan }", "tuning.budget.seconds", "must be a finite number"),
        ("tuning", "budget = { evals = true }", "tuning.budget.evals", "expected an integer"),
        ("tuning", "budget = { target = inf }", "tuning.budget.target", "must be a finite number"),
        ("tuning", "workers = 0", "tuning.workers", "must be >= 1"),
        ("tuning", "seed = -1", "tuning.seed", "must be >= 0"),
        ("tuning", "seed = 1.0", "tuning.seed", "expected an integer"),
        ("objective", 'deterministic = "yes"', "objective.deterministic", 'expected true, false or "auto"'),
        ("objective", "deterministic = 1", "objective.deterministic", 'expected true, false or "auto"'),
    ],
)
def test_bad_setting_is_one_line_naming_file_key_and_line(
    tmp_path: Path, table: str, line: str, key: str, why: str
) -> None:
    text, line_no = with_setting(table, line)
    path = write(tmp_path, text)
    with pytest.raises(TaskError) as info:
        load_task(path, prepare=False)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line_no}: {key}: "), message
    assert why in message


def test_deterministic_conflicts_are_refused(tmp_path: Path) -> None:
    text, line_no = with_setting("timing", "repeats = 5")
    text = text.replace('goal = "min"', 'goal = "min"\ndeterministic = true')
    with pytest.raises(TaskError, match=rf"task.toml:{line_no + 1}: timing.repeats: .*deterministic"):
        load_task(write(tmp_path, text), prepare=False)
    clock = BASE.replace('metric = "stdout_regex"', 'metric = "wall_time"\ndeterministic = true')
    with pytest.raises(TaskError, match="objective.deterministic: wall_time is measured by the clock"):
        load_task(write(tmp_path, clock), prepare=False)


def test_valid_settings_still_load(tmp_path: Path) -> None:
    text = BASE
    for table, line in [
        ("sandbox", "network = false\nkeep_scratch = false\nmemory_mb = 256"),
        ("timing", "repeats = 2\ntie = 0\ntimeout_factor = 1\npin_cpus = []"),
        ("check", "rtol = 0\natol = 1e-9"),
        ("check.expensive", "repeats = 0\nrun_timeout_s = 5"),
        ("tuning", "budget = { evals = 5, seconds = 60.5, target = -1.0 }\nseed = 0\nworkers = 1"),
        ("objective", 'deterministic = "auto"'),
    ]:
        lines = text.splitlines()
        lines.insert(lines.index(f"[{table}]") + 1, line)
        text = "\n".join(lines) + "\n"
    task = load_task(write(tmp_path, text), prepare=False)
    assert task.objective.objective.deterministic is None and task.objective.timing.repeats == 2
    assert task.budget.evals == 5 and task.seed == 0


# -- non-finite values ----------------------------------------------------------------------------

NON_FINITE = BASE.replace(
    '"echo score=$(( ($0 - 6) * ($0 - 6) ))"',
    '"if [ $0 = 3 ]; then echo score=$1; else echo score=$0; fi"',
).replace('"{n}"]', '"{n}", "BAD"]')


@pytest.mark.parametrize("printed", ["-inf", "inf", "nan", "-Infinity"])
def test_non_finite_printed_value_fails_with_a_reason(tmp_path: Path, printed: str) -> None:
    task = load_task(write(tmp_path, NON_FINITE.replace("BAD", printed)))
    with pytest.raises(CandidateError, match=r"objective value -?(inf|nan) is not finite"):
        task.objective({"n": 3})
    result = perftune.tune(task.objective, task.space, budget=4, seed=0, goal=task.goal, metric=task.metric,
                           seeds=[{"n": 3}])
    bad = [t for t in result.trials if t.config["n"] == 3]
    assert len(bad) == 1 and bad[0].status is Status.FAILED
    assert re.fullmatch(r"CandidateError: objective value -?(inf|nan) is not finite", bad[0].reason)
    assert result.best.config["n"] == 0 and result.best.value == 0.0


JSON_TASK = r"""
[space]
n = { type = "int", min = 0, max = 9, default = 0 }

[run]
command = ["sh", "-c",
           "if [ $0 = 3 ]; then v=-Infinity; else v=$0; fi; printf '{{\"score\": %s}}\\n' $v", "{n}"]

[objective]
metric = "stdout_json"
key = "score"
goal = "min"
"""


def test_non_finite_json_value_fails_with_a_reason(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, JSON_TASK))
    assert task.objective({"n": 2})["stdout_json"] == 2.0
    with pytest.raises(CandidateError, match="objective value -inf is not finite"):
        task.objective({"n": 3})


def test_non_finite_value_of_the_default_configuration_is_a_load_error(tmp_path: Path) -> None:
    text = NON_FINITE.replace("BAD", "-inf").replace("default = 0", "default = 3")
    with pytest.raises(TaskError, match=r"objective.pattern: .*objective value -inf is not finite"):
        load_task(write(tmp_path, text))


# -- measuring only what is noisy -----------------------------------------------------------------


def test_deterministic_stdout_metric_is_measured_once_per_configuration(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, BASE))
    url = f"sqlite:///{tmp_path / 'perftune.db'}"
    result = perftune.tune(task.objective, task.space, budget=8, seed=0, goal=task.goal, metric=task.metric,
                           store=url)
    assert result.best.config["n"] == 6
    stored = open_store(url).trials(result.run_id)
    assert len(stored) == 8
    for trial in stored:
        # One run each, no warm-up: the default's reference run showed the value does not vary.
        assert trial.samples == [trial.value] and trial.metrics["n_runs"] == 1.0, trial


def test_declared_noisy_stdout_metric_keeps_the_sequential_test(tmp_path: Path) -> None:
    text = BASE.replace('goal = "min"', 'goal = "min"\ndeterministic = false')
    text = text.replace("[timing]", "[timing]\nfirst_runs = 5\nmax_runs = 5\nwarmup_runs = 0")
    task = load_task(write(tmp_path, text))
    out = task.objective({"n": 0})
    assert out["samples"] == [36.0] * 5 and out["n_runs"] == 5.0


def test_detection_without_a_reference_run(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, BASE), prepare=False)
    first = task.objective({"n": 4})  # identical samples end the test: 1 warm-up + 2 samples
    assert first["samples"] == [4.0, 4.0] and first["n_runs"] == 3.0
    later = task.objective({"n": 5})
    assert later["samples"] == [1.0] and later["n_runs"] == 1.0


def test_noisy_stdout_metric_is_detected(tmp_path: Path) -> None:
    # The value changes from run to run (a clock): not deterministic, so the sequential test measures it.
    text = BASE.replace('"echo score=$(( ($0 - 6) * ($0 - 6) ))"', '"echo score=$(date +%N)"')
    text = text.replace("[timing]", "[timing]\nfirst_runs = 6\nmax_runs = 6\nwarmup_runs = 0")
    task = load_task(write(tmp_path, text))
    out = task.objective({"n": 0})
    assert len(out["samples"]) == 6 and len(set(out["samples"])) > 1
    assert len(task.objective({"n": 1})["samples"]) >= 3
