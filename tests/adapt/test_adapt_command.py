"""Task files with an [adapt] table: the feature command, `perftune adapt`, one configuration per input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perftune.adapt import AdaptError, CommandSite, DispatchFile, use_dispatch

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "perftune" / "examples" / "adapt" / "task"
PERFTUNE = [sys.executable, "-m", "perftune"]


@pytest.fixture
def task_dir(tmp_path):
    dest = tmp_path / "task"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("train"))
    # Long enough files that the right sort saves far more than the feature command costs, even under load.
    subprocess.run([sys.executable, str(dest / "make_train.py"), "60000"], check=True, timeout=120)
    yield dest
    use_dispatch(DispatchFile())


def _write_ints(path: Path, xs: list[int]) -> str:
    path.write_text("\n".join(map(str, xs)) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_perftune_adapt_learns_and_chooses_per_input(task_dir, tmp_path):
    # The feature command (a Python start-up) can cost as much as the sort it saves on a loaded machine,
    # and then the cost-aware learner rightly keeps one configuration: declare it cheap to test routing.
    path = task_dir / "task.toml"
    path.write_text(path.read_text() + 'cost = "cheap"\n')
    out = tmp_path / "dispatch.json"
    done = subprocess.run([*PERFTUNE, "adapt", str(task_dir / "task.toml"), "--seed", "0", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout
    entry = json.loads(out.read_text())["dispatchers"]["adapt-sortfile"]
    assert entry["target"] == "command"
    # New inputs, never seen: a long ascending file and a long descending one.
    up = _write_ints(tmp_path / "up.txt", list(range(0, 700000, 7)))
    down = _write_ints(tmp_path / "down.txt", list(range(700000, 0, -7)))
    chosen = {}
    for name, path in (("up", up), ("down", down)):
        done = subprocess.run([*PERFTUNE, "adapt", str(task_dir / "task.toml"), "--out", str(out),
                               "--choose", path], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert "Warning" not in done.stderr
        chosen[name] = json.loads(done.stdout)["algo"]
    # Insertion sort is linear on ascending input; "reversed" (reverse, then insert) on descending.
    assert chosen == {"up": "insertion", "down": "reversed"}


def test_choose_without_a_dispatcher_prints_the_default_with_one_warning(task_dir, tmp_path):
    argv = [*PERFTUNE, "adapt", str(task_dir / "task.toml"), "--out", str(tmp_path / "none.json"),
            "--choose", str(task_dir / "train" / "ascending-0.txt")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"algo": "merge"}
    # One line, with what to do (not Python's warning with its source line).
    [line] = done.stderr.splitlines()
    assert line.startswith("perftune: warning: ") and "dispatcher file not found" in line
    assert line.endswith(f"(learn one: perftune adapt {task_dir / 'task.toml'})")
    # An input that does not exist is a usage error, not the default configuration.
    missing = [*argv[:-1], str(tmp_path / "nosuch.txt")]
    done = subprocess.run(missing, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_the_feature_command_gives_the_columns(task_dir):
    site = CommandSite(task_dir / "task.toml")
    assert site.columns == ("log_size", "sortedness")
    assert len(site.train) == 9  # ascending, descending and shuffled, three each
    values = site.features_of(str(task_dir / "train" / "descending-0.txt"))
    assert values["sortedness"] < 0.05 and values["log_size"] > 11  # ties count as ascending


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.split("[adapt]")[0], "no [adapt] table"),
        (lambda t: t + "colour = 1\n", "adapt.colour: unknown key"),
        (lambda t: t.replace('columns = ["log_size", "sortedness"]', "columns = []"), "adapt.columns"),
        (lambda t: t.replace('features = ["python3"', 'features = [3, "python3"'), "adapt.features"),
        # Values a task file can hold that the command took as they came: a traceback, a silent 1 s,
        # or an error from deep inside that named no key.
        (lambda t: t + 'timeout_s = "abc"\n', "adapt.timeout_s: expected a positive number"),
        (lambda t: t + "timeout_s = true\n", "adapt.timeout_s: expected a positive number"),
        (lambda t: t + "timeout_s = nan\n", "adapt.timeout_s: expected a positive number"),
        (lambda t: t + "timeout_s = -1\n", "adapt.timeout_s: expected a positive number"),
        (lambda t: t.replace("budget = 8\nclusters", 'budget = "lots"\nclusters'),
         "adapt.budget: expected a positive"),
        (lambda t: t.replace("budget = 8\nclusters", "budget = 7.5\nclusters"),
         "adapt.budget: expected a positive"),
        (lambda t: t.replace("clusters = 2", 'clusters = "2"'), "adapt.clusters: expected a positive"),
        (lambda t: t.replace("clusters = 2", "clusters = 0"), "adapt.clusters: expected a positive"),
    ],
)
def test_bad_adapt_tables_are_one_line_errors(task_dir, change, message):
    path = task_dir / "task.toml"
    path.write_text(change(path.read_text()))
    with pytest.raises(AdaptError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        CommandSite(path)
    assert "\n" not in str(info.value)


def test_a_failing_feature_command_names_the_input(task_dir, tmp_path):
    site = CommandSite(task_dir / "task.toml")
    bad = tmp_path / "bad.txt"
    bad.write_text("not a number\n")
    with pytest.raises(AdaptError, match=r"adapt.features on .*bad.txt: exit 1: ValueError") as info:
        site.features_of(str(bad))
    assert "\n" not in str(info.value)


def test_the_cli_prints_a_bad_table_as_one_line(task_dir):
    path = task_dir / "task.toml"
    path.write_text(path.read_text() + "colour = 1\n")
    argv = [*PERFTUNE, "adapt", str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "adapt.colour: unknown key" in done.stderr


def test_an_unreadable_task_file_is_one_line_as_for_perftune_run(task_dir):
    # The task file is read as every task file is (perftune.targets.read_task_text): a byte that is
    # not UTF-8 gave a traceback here, and /dev/zero would have been read without end.
    from perftune.errors import TaskError

    path = task_dir / "task.toml"
    path.write_bytes(path.read_bytes() + b"# caf\xe9\n")
    with pytest.raises(TaskError, match=r"task.toml:\d+: not UTF-8 text \(byte 0xe9\)"):
        CommandSite(path)
    for bad in (path, "/dev/zero"):
        done = subprocess.run([*PERFTUNE, "adapt", str(bad)], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().count("\n") == 0


def test_training_inputs_labelled_by_family(task_dir):
    path = task_dir / "task.toml"
    text = path.read_text().replace('train = ["train/*.txt"]\n', "")
    families = '\n[adapt.train]\nup = ["train/ascending-*.txt"]\ndown = "train/descending-0.txt"\n'
    path.write_text(text + families)
    site = CommandSite(path)
    assert [Path(p).name for p in site.train] == [
        "ascending-0.txt", "ascending-1.txt", "ascending-2.txt", "descending-0.txt"]
    assert site.groups == ["up", "up", "up", "down"]
    # An array keeps no families.
    assert CommandSite(EXAMPLE / "task.toml").groups is None


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ('up = ["train/*.txt"]\ndown = ["train/descending-*.txt"]\n',
         r"adapt.train.down: .*descending-0.txt is already in family 'up'"),
        ("up = 3\n", "adapt.train.up: expected an array of paths or globs"),
    ],
)
def test_bad_family_tables_are_one_line_errors(task_dir, train, message):
    path = task_dir / "task.toml"
    text = path.read_text().replace('train = ["train/*.txt"]\n', "")
    path.write_text(text + "\n[adapt.train]\n" + train)
    with pytest.raises(AdaptError, match=message) as info:
        CommandSite(path)
    assert "\n" not in str(info.value)


def test_a_feature_placeholder_with_an_attribute_is_one_line(task_dir):
    path = task_dir / "task.toml"
    path.write_text(path.read_text().replace('features.py", "{input}"', 'features.py", "{input.x}"'))
    site = CommandSite(path)
    with pytest.raises(AdaptError, match=r"adapt.features: bad placeholder") as info:
        site.features_of(str(task_dir / "train" / "descending-0.txt"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("printed", ['"big"', "null", "[1, 2]", "NaN"])
def test_a_feature_command_printing_no_finite_number_is_one_line(task_dir, printed):
    # --choose turned a string into a ValueError traceback, and dispatched a NaN silently.
    from perftune.adapt._command import _Column

    (task_dir / "featbad.py").write_text(f'print(\'{{"log_size": {printed}, "sortedness": 0.5}}\')\n')
    path = task_dir / "task.toml"
    path.write_text(path.read_text().replace("{task_dir}/features.py", "{task_dir}/featbad.py"))
    site = CommandSite(path)
    with pytest.raises(AdaptError, match=r"printed .log_size.: .* not a finite number") as info:
        _Column(site, "log_size")(str(task_dir / "sample.txt"))
    assert "\n" not in str(info.value)
