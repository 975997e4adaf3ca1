"""Every run of a candidate is checked and starts from the files its build left.

Candidates are hostile by design: one that does the work once and then replays it (a marker file in
``$HOME``, which is its scratch directory, or its own program replaced by a script that prints a saved
output) must not win. Each test looks at what the runs did (their outputs, the metric they print, the
failure's reason), never at how fast they were.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from perftune.errors import TaskError
from perftune.targets.command import CandidateError, load_task
from perftune.targets.command._scratch_state import ScratchState


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def write(tmp_path: Path, text: str, files: dict[str, str] | None = None) -> Path:
    for name, content in (files or {}).items():
        (tmp_path / name).write_text(content)
        os.chmod(tmp_path / name, 0o644)
    path = tmp_path / "task.toml"
    path.write_text(text)
    os.chmod(tmp_path, 0o755)
    return path


# The cheat of the security review: the work once, then a marker in $HOME and an empty exit.
MARKER_CHEAT = """\
if [ "$1" = 1 ] && [ -e "$HOME/.did" ]; then exit 0; fi
sleep 0.3; echo "result 42"; touch "$HOME/.did"
"""

MARKER_TASK = """
[space]
cheat = { type = "choice", options = ["0", "1"] }

[run]
command = ["sh", "{task_dir}/cand.sh", "{cheat}"]
timeout_s = 30

[objective]
metric = "wall_time"

[check]
stdout = "exact"

[timing]
repeats = 5
warmup_runs = 0

[tuning]
seeds = [{ cheat = "1" }]
"""


def test_a_marker_left_in_home_is_gone_before_each_later_run(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, MARKER_TASK, {"cand.sh": MARKER_CHEAT}))
    out = task.objective({"cheat": "1"})
    # Each of the five runs found no marker, so each did the work (slept): none was a fast replay.
    assert out["n_runs"] == 5.0 and len(out["samples"]) == 5
    assert min(out["samples"]) >= 0.29  # sleep 0.3 returns no sooner: a floor, not a speed


# The same cheat, with what each run did in its metric: 1 for the work, 0 for a replay. The check
# ignores that line, so the replay (the saved "result 42") passes it. The marker may be a file, or kept
# in what a run can write of what the build made: a directory's times, the mode of $HOME.
MARKER_METRIC_TASK = """
[space]
cheat = { type = "choice", options = ["0", "1"] }

[build]
command = ["sh", "-c", "mkdir d"]

[run]
command = ["sh", "-c", '''
if [ "$0" = 1 ] && SEEN; then echo "result 42"; echo "work 0"; exit 0; fi
echo "result 42"; echo "work 1"; MARK''', "{cheat}"]

[objective]
metric = "stdout_regex"
pattern = 'work (\\d+)'
goal = "max"

[check]
stdout = "exact"
ignore = "^work"

[timing]
repeats = 4
warmup_runs = 1
"""

MARKERS = {
    "file": ('[ -e "$HOME/.did" ]', 'touch "$HOME/.did"'),
    "directory_time": ('[ "$(stat -c %Y d)" = 1000000000 ]', "touch -d @1000000000 d"),
    "home_mode": ('[ "$(stat -c %a "$HOME")" = 701 ]', 'chmod 701 "$HOME"'),
}


@pytest.mark.parametrize("marker", sorted(MARKERS))
def test_every_run_and_warm_up_of_a_marker_cheat_does_the_work(tmp_path: Path, marker: str) -> None:
    seen, mark = MARKERS[marker]
    task = load_task(write(tmp_path, MARKER_METRIC_TASK.replace("SEEN", seen).replace("MARK", mark)))
    out = task.objective({"cheat": "1"})
    assert out["n_runs"] == 5.0 and out["samples"] == [1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(("warmup", "failing"), [(0, "run 2 of 5"), (1, "run 2 of 6")])
def test_every_run_is_checked_not_only_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warmup: int, failing: str
) -> None:
    # A channel from run to run that putting the scratch directory back would not close (simulated:
    # it is not put back): the output check of each run (warm-ups too) still catches the replay.
    monkeypatch.setattr(ScratchState, "restore", lambda self, **kw: None)
    text = MARKER_TASK.replace("warmup_runs = 0", f"warmup_runs = {warmup}")
    task = load_task(write(tmp_path, text, {"cand.sh": MARKER_CHEAT}))
    with pytest.raises(CandidateError) as info:
        task.objective({"cheat": "1"})
    assert str(info.value) == (
        f"wrong output on {failing}: stdout differs from the default configuration's: "
        "output has 0 lines, the reference 1"
    )


REPLACING_TASK = """
[space]
cheat = { type = "choice", options = ["0", "rewrite", "same_size", "move", "unlink"] }

[build]
command = ["sh", "-c", "printf 'sleep 0.3; echo result 42\\n' > prog.sh"]

[run]
command = ["sh", "-c", '''
sh prog.sh
case $0 in
  rewrite) printf 'echo result 42\\n' > prog.sh ;;
  same_size) cp -p prog.sh .orig; printf 'echo result 42 ##########\\n' > prog.sh; touch -r .orig prog.sh ;;
  move) printf 'echo result 42\\n' > .new; mv .new prog.sh ;;
  unlink) rm prog.sh; printf 'echo result 42\\n' > prog.sh ;;
esac''', "{cheat}"]

[objective]
metric = "wall_time"

[check]
stdout = "exact"

[timing]
repeats = 5
warmup_runs = 0
"""


@pytest.mark.parametrize("cheat", ["rewrite", "same_size", "move", "unlink"])
def test_a_run_that_replaces_the_built_program_fails(tmp_path: Path, cheat: str) -> None:
    task = load_task(write(tmp_path, REPLACING_TASK))
    with pytest.raises(CandidateError) as info:
        task.objective({"cheat": cheat})
    message = str(info.value)
    assert message.startswith("before run 2 of 5: a run changed 'prog.sh', which the build step made")
    assert "the runs would not all start from the same files" in message and "\n" not in message


def test_the_default_configuration_whose_run_changes_its_build_is_refused_before_the_search(
    tmp_path: Path,
) -> None:
    for name in ("small.txt", "big.txt"):
        (tmp_path / name).write_text(name + "\n")
        os.chmod(tmp_path / name, 0o644)
    # The reference runs the default configuration on each input, one after the other.
    text = 'inputs = ["small.txt"]\n' + REPLACING_TASK.replace('"0", "rewrite"', '"rewrite", "0"').replace(
        "sh prog.sh", 'sh prog.sh; cat "$1"').replace('"{cheat}"]', '"{cheat}", "{input}"]') + """
[check.expensive]
budget = 0.0
inputs = ["big.txt"]
"""
    with pytest.raises(TaskError, match=r"the default configuration, before its run on big.txt: a run "
                                         r"changed 'prog.sh', which the build step made"):
        load_task(write(tmp_path, text))


LEGIT_TASK = """
[space]
scale = { type = "choice", options = ["1", "2", "3"] }

[build]
command = ["sh", "-c", '''
mkdir -p lib data
printf 'def answer(scale):\\n    return 42 * scale // scale\\n' > lib/solver.py
printf '%s\\n' 3 1 2 > data/numbers.txt
cp "$1/main.py" .''', "{scale}", "{task_dir}"]

[run]
command = ["python3", "main.py", "{scale}"]
timeout_s = 30

[objective]
metric = "wall_time"

[check]
stdout = "exact"
files = ["{scratch}/out/result.txt"]

[timing]
repeats = 4
warmup_runs = 1
"""

MAIN_PY = """\
import os
import sys
import tempfile

sys.path.insert(0, "lib")  # imports lib/solver.py: Python writes lib/__pycache__ on the first run
import solver

os.makedirs("out", exist_ok=True)
with open("data/numbers.txt") as f:
    total = sum(int(line) for line in f)
with tempfile.NamedTemporaryFile(dir=os.environ["TMPDIR"], delete=False) as scratch_file:
    scratch_file.write(b"left behind")  # TMPDIR is the scratch directory
with open("out/result.txt", "w") as f:
    f.write(f"{total}\\n")
print("result", solver.answer(int(sys.argv[1])))
"""


def test_a_legit_task_with_a_build_and_repeats_succeeds(tmp_path: Path) -> None:
    if shutil.which("python3") is None:
        pytest.skip("needs python3")
    task = load_task(write(tmp_path, LEGIT_TASK, {"main.py": MAIN_PY}))
    for scale in ("1", "3"):
        out = task.objective({"scale": scale})
        assert out["n_runs"] == 5.0 and len(out["samples"]) == 4


NEW_FILES_TASK = """
[space]
mode = { type = "choice", options = ["a", "b"] }

[build]
command = ["sh", "-c", "mkdir sub && echo built > sub/kept.txt"]

[run]
command = ["sh", "-c", '''
n=$(cat "$HOME/.count" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$HOME/.count"
mkdir -p locked/deep/er && echo x > locked/deep/er/f && chmod 000 locked/deep/er locked/deep
chmod 500 locked
echo y > sub/new.txt && chmod 500 sub
ln -s / sub/root-link; ln -s "$1/outside.txt" outside-link; mkfifo pipe
cat sub/kept.txt
echo "runs $n"''', "{mode}", "{task_dir}"]

[objective]
metric = "stdout_regex"
pattern = 'runs (\\d+)'
goal = "min"

[check]
stdout = "exact"

[timing]
repeats = 3
warmup_runs = 1
"""


def test_new_files_of_a_run_are_removed_before_the_next_without_error(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, NEW_FILES_TASK, {"outside.txt": "outside\n"}))
    out = task.objective({"mode": "b"})
    # Each run counted from nothing: the count, the unwritable directories, the links and the FIFO
    # of the run before were gone; what the build made (sub/kept.txt) was still there.
    assert out["n_runs"] == 4.0 and out["samples"] == [1.0, 1.0, 1.0]
    assert (tmp_path / "outside.txt").read_text() == "outside\n"  # a link's target is left alone


class _Ladder:
    """The driver's handle of a trial at growing fidelity, as the objective uses it: never prunes."""

    prune_reason = ""

    def __init__(self) -> None:
        self.reports: dict[int, float] = {}

    def report(self, step: int, value: float) -> None:
        self.reports[step] = value

    def should_prune(self) -> bool:
        return False


def test_runs_below_full_fidelity_start_from_the_same_files_too(tmp_path: Path) -> None:
    # Below the full level nothing is checked (the reference is the full level's), but the runs of
    # every level still start from the files the build left.
    text = """
[space]
cheat = { type = "choice", options = ["0", "1"] }
n = { type = "int", fidelity = [10, 100] }

[run]
command = ["sh", "-c", '''
if [ "$0" = 1 ] && [ -e "$HOME/.did" ]; then echo "work 0"; exit 0; fi
touch "$HOME/.did"; echo "work 1 size $1"''', "{cheat}", "{n}"]

[objective]
metric = "stdout_regex"
pattern = 'work (\\d+)'
goal = "max"

[check]
stdout = "exact"
ignore = "^work"

[timing]
repeats = 3
warmup_runs = 0
"""
    task = load_task(write(tmp_path, text))
    ladder = _Ladder()
    out = task.objective({"cheat": "1"}, trial=ladder)  # type: ignore[arg-type]
    assert ladder.reports == {1: 1.0, 2: 1.0} and out["samples"] == [1.0, 1.0, 1.0]


# Runs of different lengths (a random 10-90 ms each): the warm-up's time must not reach the value.
JITTER = 'n=$(od -An -N1 -tu1 /dev/urandom); sleep "0.0$(( n % 9 + 1 ))"; echo "result 42"\n'

JITTER_TASK = """
[space]
x = { type = "choice", options = ["a", "b"] }

[run]
command = ["sh", "{task_dir}/cand.sh", "{x}"]
timeout_s = 30

[objective]
metric = "METRIC"

[timing]
repeats = 4
warmup_runs = 1
"""


@pytest.mark.parametrize("metric", ["wall_time", "cpu_time"])
def test_a_time_metric_is_the_median_of_its_samples_without_the_warm_up(tmp_path: Path, metric: str) -> None:
    import statistics

    task = load_task(write(tmp_path, JITTER_TASK.replace("METRIC", metric), {"cand.sh": JITTER}))
    out = task.objective({"x": "a"})
    assert out["n_runs"] == 5.0 and len(out["samples"]) == 4
    # The value, and the time of the same name, are the median of the four measured runs (before, the
    # time of all five runs, the warm-up's included, overwrote the value).
    assert out[metric] == statistics.median(out["samples"])


# A score that gets better the longer the program runs: its best configuration is also its slowest.
SLOW_IS_BETTER = 'sleep "$(( $1 / 10 )).$(( $1 % 10 ))"; echo "size: $(( 100 - $1 ))"\n'

SLOW_IS_BETTER_TASK = """
[space]
x = { type = "choice", options = ["1", "15"] }

[run]
command = ["sh", "{task_dir}/cand.sh", "{x}"]
timeout_s = 30

[objective]
metric = "stdout_regex"
pattern = 'size: ([0-9]+)'
goal = "min"
"""


def test_a_metric_that_is_not_a_time_gets_no_adaptive_run_limit(tmp_path: Path) -> None:
    path = write(tmp_path, SLOW_IS_BETTER_TASK, {"cand.sh": SLOW_IS_BETTER})
    task = load_task(path)
    fast = task.objective({"x": "1"})  # 0.1 s: the incumbent
    slow = task.objective({"x": "15"})  # 1.5 s: more than 3x the incumbent and than min_timeout_s
    assert fast["stdout_regex"] == 99.0 and slow["stdout_regex"] == 85.0
    # Set in the task, the factor applies to any metric: the same run is then cut at 1 s.
    task = load_task(write(tmp_path, SLOW_IS_BETTER_TASK + "\n[timing]\ntimeout_factor = 3\n",
                           {"cand.sh": SLOW_IS_BETTER}))
    task.objective({"x": "1"})
    with pytest.raises(Exception, match="adaptive limit: 3x"):
        task.objective({"x": "15"})
