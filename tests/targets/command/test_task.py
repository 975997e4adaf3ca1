"""Task files: schema, bad input, rendering, and a tuner run that survives bad candidates."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from perftune.errors import TaskError
from perftune.targets.command import CandidateError, load_task
from perftune.trial import TrialTimeout

ROOT = Path(__file__).resolve().parents[3]
BAD_C = ROOT / "tests" / "measure" / "data" / "bad.c"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def write(tmp_path: Path, text: str, name: str = "task.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    os.chmod(tmp_path, 0o755)
    return path


SIMPLE = """
[space]
n = { type = "int", min = 1, max = 5, default = 2 }
flag = { type = "bool", on = "--fast", off = "" }
order = { type = "permutation", items = ["a", "b", "c"], sep = "-" }

[run]
command = ["sh", "-c", "echo value=$0 order=$1 $2", "{n}", "{order}", "{flag}"]
timeout_s = 5

[objective]
metric = "stdout_regex"
pattern = 'value=(\\d+)'
goal = "max"

[timing]
repeats = 1
warmup_runs = 0
"""


def test_simple_task_renders_placeholders(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, SIMPLE))
    assert task.goal == "max" and task.metric == "stdout_regex" and task.name == tmp_path.name
    out = task.objective({"n": 4, "flag": False, "order": ("c", "a", "b")})
    assert out["stdout_regex"] == 4.0 and out["samples"] == [4.0]
    argv = task.objective._argv(
        task.objective.run.command,
        task.objective._context({"n": 4, "flag": False, "order": ("c", "a", "b")}, "/s", None),
    )
    assert argv[-2:] == ["4", "c-a-b"]  # the empty "{flag}" element is dropped
    argv = task.objective._argv(
        task.objective.run.command,
        task.objective._context({"n": 1, "flag": True, "order": ("a", "b", "c")}, "/s", None),
    )
    assert argv[-1] == "--fast"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[space\nx = 1", r"task.toml:1: malformed TOML"),
        (SIMPLE.replace('"{n}"', '"{m}"'), r"task.toml:\d+: run.command\[3\]: unknown parameter \{m\}"),
        (
            SIMPLE.replace('"sh"', '"no-such-tool-xyz"'),
            r"task.toml: run.command\[0\]: command not found: no-such-tool-xyz",
        ),
        (SIMPLE.replace("value=(", "nomatch=("), r"task.toml: objective.pattern: .*matches nothing"),
        (
            SIMPLE.replace('"sh", "-c", "echo', '"sh", "-c", "exit 3; echo'),
            r"task.toml: run: the default configuration fails.*exit code 3",
        ),
        ('inputs = ["missing.txt"]\n' + SIMPLE, r"inputs\[0\]: input 'missing.txt' does not exist"),
        (
            SIMPLE.replace('metric = "stdout_regex"', 'metric = "speed"'),
            r"objective.metric: unknown metric 'speed'",
        ),
        (SIMPLE.replace('type = "int"', 'type = "integer"'), r"space.n: unknown parameter type"),
        (SIMPLE + "\n[bogus]\nx = 1\n", r"task.toml:\d+: bogus: unknown key"),
        (
            SIMPLE.replace(
                'command = ["sh", "-c", "echo value=$0 order=$1 $2", "{n}", "{order}", "{flag}"]',
                'command = "echo value={n}"',
            ),
            r"run.command: a string runs through a shell",
        ),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(TaskError, match=expected) as info:
        load_task(write(tmp_path, text))
    assert "\n" not in str(info.value)


def test_unreadable_input(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("x")
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    data.chmod(0)
    with pytest.raises(TaskError, match="not a readable file"):
        load_task(write(tmp_path, 'inputs = ["data.txt"]\n' + SIMPLE))


def test_input_directory_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(TaskError, match=r"inputs\[0\]: input 'dir' is not a readable file"):
        load_task(write(tmp_path, 'inputs = ["dir"]\n' + SIMPLE))


def test_check_catches_wrong_output(tmp_path: Path) -> None:
    text = SIMPLE.replace("echo value=$0 order=$1 $2", "echo value=3; echo order=$1").replace(
        "[timing]", '[check]\nstdout = "exact"\n\n[timing]'
    )
    task = load_task(write(tmp_path, text))
    with pytest.raises(CandidateError, match="wrong output: stdout differs"):
        task.objective({"n": 1, "flag": False, "order": ("b", "a", "c")})
    assert task.objective({"n": 5, "flag": True, "order": ("a", "b", "c")})["stdout_regex"] == 3.0


def test_tuning_table_and_seeds(tmp_path: Path) -> None:
    text = (
        SIMPLE
        + '\n[tuning]\nbudget = "2m"\nseed = 3\nworkers = 2\n'
        + 'seeds = [{ n = 5, flag = true, order = ["c", "b", "a"] }]\n'
    )
    task = load_task(write(tmp_path, text), prepare=False)
    assert task.budget.seconds == 120 and task.seed == 3 and task.workers == 2
    assert task.seeds == [{"n": 5, "flag": True, "order": ("c", "b", "a")}]


def _require_protections() -> None:
    from perftune.measure import Sandbox

    prot = Sandbox().protections()
    if not prot["processes"]:
        pytest.skip("no process limit can be enforced here: the fork bomb would run unprotected")
    if not prot["disk"]:
        pytest.skip("no disk limit can be enforced here")


def _bad_task(tmp_path: Path) -> Path:
    _require_protections()
    src = tmp_path / "bad.c"
    shutil.copy(BAD_C, src)
    os.chmod(src, 0o644)
    os.chmod(tmp_path, 0o755)
    text = f"""
name = "bad-candidates"

[space]
mode = {{ type = "choice", options = ["ok", "segv", "hang", "alloc", "forkbomb", "disk", "escape", "exit7"] }}

[build]
command = ["gcc", "-O1", "{{task_dir}}/bad.c", "-o", "{{scratch}}/bad"]
timeout_s = 60

[run]
command = ["{{scratch}}/bad", "{{mode}}", "/tmp/perftune-escape-{os.getpid()}"]
timeout_s = 2

[objective]
metric = "wall_time"

[check]
stdout = "exact"

[timing]
repeats = 1
warmup_runs = 0

[sandbox]
memory_mb = 256
processes = 32
disk_mb = 64
"""
    return write(tmp_path, text)


@needs_gcc
def test_evaluator_records_every_bad_candidate_with_its_reason(tmp_path: Path) -> None:
    task = load_task(_bad_task(tmp_path))
    expect = {
        "segv": "SIGSEGV",
        "alloc": "memory limit",
        "disk": "limit",
        "exit7": "exit code 7",
        "escape": "Read-only|outside its scratch|Permission denied",
    }
    for mode, needle in expect.items():
        with pytest.raises(CandidateError, match=needle):
            task.objective({"mode": mode})
    with pytest.raises(TrialTimeout, match="timeout"):
        task.objective({"mode": "hang"})
    assert not os.path.exists(f"/tmp/perftune-escape-{os.getpid()}")


@needs_gcc
@pytest.mark.slow
def test_tuner_survives_all_bad_candidates_in_one_run(tmp_path: Path) -> None:
    import perftune

    task = load_task(_bad_task(tmp_path))
    modes = task.space.params["mode"].values()
    result = perftune.tune(
        task.objective,
        task.space,
        budget=len(modes),
        seed=0,
        goal=task.goal,
        metric=task.metric,
        seeds=[{"mode": m} for m in modes],
    )
    by_mode = {t.config["mode"]: t for t in result.trials}
    assert set(by_mode) == set(modes)
    assert by_mode["ok"].ok
    for mode in set(modes) - {"ok"}:
        assert not by_mode[mode].ok and by_mode[mode].reason, mode
    assert by_mode["hang"].status.value == "timeout"
    assert "SIGSEGV" in by_mode["segv"].reason
    assert "memory" in by_mode["alloc"].reason
    assert result.best.config["mode"] == "ok"


@needs_gcc
def test_adaptive_timeout_follows_the_incumbent(tmp_path: Path) -> None:
    text = """
[space]
delay = { type = "choice", options = ["0", "3"] }
[run]
command = ["sleep", "{delay}"]
timeout_s = 30
[timing]
repeats = 1
warmup_runs = 0
timeout_factor = 2
min_timeout_s = 0.5
"""
    task = load_task(write(tmp_path, text))
    task.objective({"delay": "0"})
    with pytest.raises(TrialTimeout, match="adaptive limit"):
        task.objective({"delay": "3"})


def test_private_task_directory_is_staged_for_the_sandbox_user(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root drops candidates to an unprivileged user (then nothing is staged)")
    private = tmp_path / "private"
    private.mkdir()
    (private / "in.txt").write_text("7\n")
    (private / "secret.txt").write_text("hidden\n")
    (private / "secret.txt").chmod(0o600)
    text = """
inputs = ["in.txt"]

[space]
file = { type = "choice", options = ["in.txt", "secret.txt"] }

[run]
command = ["sh", "-c", "read n < $0; echo value=$n; cat $1/$2", "{input}", "{task_dir}", "{file}"]
timeout_s = 5

[objective]
metric = "stdout_regex"
pattern = 'value=(\\d+)'
goal = "max"

[timing]
repeats = 1
warmup_runs = 0
"""
    path = write(private, text)
    private.chmod(0o700)
    task = load_task(path)  # was: "not reachable by the sandbox user: make it world-readable"
    assert oct(private.stat().st_mode & 0o777) == "0o700"  # nobody was asked to open it up
    staged = task.objective.staged[str(private)]
    assert staged != str(private) and not staged.startswith(str(private))
    assert task.objective({"file": "in.txt"})["stdout_regex"] == 7.0
    # A 0600 file stays as unreadable to candidates as if the parent directories were traversable.
    with pytest.raises(CandidateError, match="Permission denied") as info:
        task.objective({"file": "secret.txt"})
    assert str(private) in str(info.value) and staged not in str(info.value)  # the user's own paths


def test_private_input_outside_the_task_directory_is_staged(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root drops candidates to an unprivileged user (then nothing is staged)")
    data = tmp_path / "data"
    data.mkdir()
    (data / "numbers.txt").write_text("41\n")
    data.chmod(0o700)
    text = """
inputs = ["data/numbers.txt"]

[space]
add = { type = "int", min = 1, max = 3, default = 1 }

[run]
command = ["sh", "-c", "read n; echo value=$((n + $0))", "{add}"]
stdin = "{input}"
timeout_s = 5

[objective]
metric = "stdout_regex"
pattern = 'value=(\\d+)'
goal = "max"

[timing]
repeats = 1
warmup_runs = 0
"""
    task = load_task(write(tmp_path, text))  # the task directory is open, its input's folder is not
    assert oct(data.stat().st_mode & 0o777) == "0o700"
    assert str(tmp_path) not in task.objective.staged
    assert str(data / "numbers.txt") in task.objective.staged
    assert task.objective({"add": 1})["stdout_regex"] == 42.0


def test_examples_load_and_pickle() -> None:
    import pickle

    for name in ("c_matmul", "python_metric"):
        task = load_task(ROOT / "examples" / name / "task.toml", prepare=False)
        assert task.space.is_valid(task.space.default()) and task.budget is not None
        assert pickle.loads(pickle.dumps(task)).objective.metric == task.metric  # workers may be spawned


def test_files_are_world_readable_for_the_sandbox_user() -> None:
    for path in (ROOT / "examples").rglob("*"):
        assert path.stat().st_mode & stat.S_IROTH, path


@needs_gcc
def test_sanitizer_check_catches_a_fast_but_wrong_winner(tmp_path: Path) -> None:
    shutil.copy(ROOT / "tests" / "targets" / "command" / "data" / "sum.c", tmp_path / "sum.c")
    os.chmod(tmp_path / "sum.c", 0o644)
    text = """
[space]
variant = { type = "choice", options = ["SAFE", "FAST"] }

[build]
command = ["gcc", "-O2", "-D{variant}", "{task_dir}/sum.c", "-o", "{scratch}/sum"]

[run]
command = ["{scratch}/sum"]
timeout_s = 20

[check]
stdout = "exact"

[check.expensive]
budget = 1.0   # every candidate is checked: whether FAST looks faster depends on the machine's load
build = ["gcc", "-O1", "-fsanitize=address", "-D{variant}", "{task_dir}/sum.c", "-o", "{scratch}/sum"]

[timing]
repeats = 3
warmup_runs = 0
"""
    task = load_task(write(tmp_path, text))
    safe = task.objective({"variant": "SAFE"})
    assert safe["verified"] == 1.0  # the first result is a potential winner: checked
    with pytest.raises(
        CandidateError, match="verification failed: .*AddressSanitizer|verification failed: .*exit"
    ):
        task.objective({"variant": "FAST"})
    assert task.verify({"variant": "SAFE"}) is None
    assert task.verify({"variant": "FAST"}) is not None


def test_json_metric_stdin_env_and_shell(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("hello\n")
    os.chmod(tmp_path / "in.txt", 0o644)
    text = """
inputs = ["in.txt"]
env = { GREETING = "hi-{n}" }

[space]
n = { type = "int", min = 1, max = 3 }

[run]
command = "read line; echo \\"$GREETING $line\\"; echo '{{\\"result\\": {{\\"score\\": {n}}}}}'"
shell = true
stdin = "{input}"

[objective]
metric = "stdout_json"
key = "result.score"
goal = "max"

[check]
stdout = "exact"
ignore = '^(hi-[0-9] hello|[{])'  # what may differ: the greeting and the JSON line

[timing]
repeats = 2
warmup_runs = 0
"""
    task = load_task(write(tmp_path, text))
    out = task.objective({"n": 3})
    assert out["stdout_json"] == 3.0 and out["samples"] == [3.0, 3.0]
    ref = Path(task.objective.state_dir, "ref0.stdout").read_text()
    assert ref.splitlines()[0] == "hi-1 hello"  # env template rendered, stdin read


def test_file_size_metric_and_file_check(tmp_path: Path) -> None:
    text = """
[space]
reps = { type = "int", min = 1, max = 50, default = 50 }
case = { type = "choice", options = ["lower", "upper"] }

[run]
command = ["sh", "-c", "yes abc | head -n $0 > out.txt; printf 'x%.0s' $(seq $0) > blob", "{reps}"]

[objective]
metric = "file_size"
file = "{scratch}/blob"

[check]
files = ["{scratch}/out.txt"]
"""
    task = load_task(write(tmp_path, text))
    assert task.goal == "min"
    with pytest.raises(CandidateError, match="output file .* differs"):
        task.objective({"reps": 10, "case": "lower"})
    assert task.objective({"reps": 50, "case": "upper"})["file_size"] == 50.0


def test_numeric_tolerance_check(tmp_path: Path) -> None:
    text = """
[space]
eps = { type = "choice", options = ["0", "0.0000001", "0.1"] }

[run]
command = ["sh", "-c", "echo \\"total: $(echo \\"1 + $0\\" | bc -l)\\"", "{eps}"]

[check]
stdout = "numeric"
rtol = 1e-6

[timing]
repeats = 1
warmup_runs = 0
"""
    if shutil.which("bc") is None:
        pytest.skip("needs bc")
    task = load_task(write(tmp_path, text))
    task.objective({"eps": "0.0000001"})
    with pytest.raises(CandidateError, match="number 1"):
        task.objective({"eps": "0.1"})


def test_expensive_check_uses_extra_inputs_and_repeats(tmp_path: Path) -> None:
    (tmp_path / "small.txt").write_text("abc\n")
    (tmp_path / "big.txt").write_text("x" * 200 + "\n")
    for name in ("small.txt", "big.txt"):
        os.chmod(tmp_path / name, 0o644)
    text = """
inputs = ["small.txt"]

[space]
mode = { type = "choice", options = ["good", "truncating", "random"] }

[run]
command = ["sh", "-c", '''
case $0 in
  good) echo "score 1"; cat "$1" ;;
  truncating) echo "score 2"; cut -c1-20 "$1" ;;
  random) echo "score 3"; cat "$1"; [ -e seen ] && echo again; touch seen ;;
esac''', "{mode}", "{input}"]

[objective]
metric = "stdout_regex"
pattern = 'score (\\d+)'
goal = "max"

[check]
stdout = "exact"
ignore = "^score"

[check.expensive]
budget = 0.0
inputs = ["big.txt"]
repeats = 1

[timing]
repeats = 1
warmup_runs = 0
"""
    task = load_task(write(tmp_path, text))
    assert task.objective({"mode": "good"})["verified"] == 1.0
    with pytest.raises(CandidateError, match="verification failed: input big.txt: stdout differs"):
        task.objective({"mode": "truncating"})
    with pytest.raises(CandidateError, match="verification failed: .*differs"):
        task.objective({"mode": "random"})


def test_without_an_expensive_check_the_winner_is_not_built_again(tmp_path: Path) -> None:
    # A build that would fail now (a full disk, a license server down) must not reject a winner
    # that measured fine, when there is nothing to check.
    text = """
[space]
x = { type = "int", min = 0, max = 3, default = 0 }

[build]
command = ["sh", "-c", "test ! -e {task_dir}/broken"]

[run]
command = ["sh", "-c", "echo value=$0", "{x}"]
timeout_s = 5

[objective]
metric = "stdout_regex"
pattern = 'value=(\\d+)'
goal = "max"

[timing]
repeats = 1
warmup_runs = 0
"""
    task = load_task(write(tmp_path, text))
    assert task.objective({"x": 2})["stdout_regex"] == 2.0
    (tmp_path / "broken").write_text("")
    os.chmod(tmp_path / "broken", 0o644)
    assert task.verify({"x": 2}) is None


LONG_OUTPUT = """
[space]
tail = { type = "choice", options = ["right", "wrong"], default = "right" }

[run]
command = ["python3", "{task_dir}/gen.py", "{tail}"]
timeout_s = 20

[check]
stdout = "numeric"
rtol = 1e-6

[timing]
repeats = 1
warmup_runs = 0
"""


def _long_output_task(tmp_path: Path, lines_right: int, lines_wrong: int) -> Path:
    # 1.0 on every line; the wrong candidate's last line says 9.0
    (tmp_path / "gen.py").write_text(
        "import sys\nright = sys.argv[1] == 'right'\n"
        f"sys.stdout.write('1.0\\n' * ({lines_right} if right else {lines_wrong}))\n"
        "sys.stdout.write('1.0\\n' if right else '9.0\\n')\n")
    return write(tmp_path, LONG_OUTPUT)


def test_a_numeric_check_of_an_output_longer_than_what_is_kept_is_refused(tmp_path: Path) -> None:
    # Only the first 4 MiB of stdout are kept: a numeric check compared those and passed 150,000 wrong
    # lines after them. The default's output that long: the task is refused, with what to do instead.
    with pytest.raises(TaskError, match=r"prints more than the 4 MiB of output perftune keeps, and "
                                        r"check.stdout = 'numeric' compares what is kept"):
        load_task(_long_output_task(tmp_path, 1_200_000, 1_200_000))


def test_a_candidate_longer_than_what_is_kept_fails_a_numeric_check(tmp_path: Path) -> None:
    # The default's output is kept whole; a candidate's that is not is longer than it, whatever follows.
    task = load_task(_long_output_task(tmp_path, 1000, 1_200_000))
    task.objective({"tail": "right"})
    with pytest.raises(CandidateError, match="it is longer than the reference"):
        task.objective({"tail": "wrong"})


def test_a_failure_reason_quoting_stdout_keeps_no_terminal_escape(tmp_path: Path) -> None:
    (tmp_path / "esc.sh").write_text("printf 'no value \\033]0;PWNED\\007 \\033[2J'\n")
    text = SIMPLE.replace('command = ["sh", "-c", "echo value=$0 order=$1 $2", "{n}", "{order}", "{flag}"]',
                          'command = ["sh", "{task_dir}/esc.sh"]')
    with pytest.raises(TaskError) as caught:  # the default configuration's output: the same snippet
        load_task(write(tmp_path, text))
    reason = str(caught.value)
    assert "\x1b" not in reason and "\x07" not in reason
    assert "no value \\x1b]0;PWNED\\x07 \\x1b[2J" in reason


def test_a_default_that_does_not_compile_names_the_compilers_error(tmp_path: Path) -> None:
    # gcc's last stderr lines are the source line and a caret ("|    ^"): the reason was that caret.
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    (tmp_path / "broken.c").write_text("int main(void) {\n    return undefined_name + 1;\n}\n")
    text = """
[space]
opt = { type = "choice", options = ["-O1", "-O2"] }

[build]
command = ["gcc", "{opt}", "{task_dir}/broken.c", "-o", "{scratch}/prog"]

[run]
command = ["{scratch}/prog"]

[timing]
repeats = 1
warmup_runs = 0
"""
    with pytest.raises(TaskError, match=r"fails to build: .*broken\.c:2:\d+: error: .undefined_name. undecl"):
        load_task(write(tmp_path, text))
