"""``perftune llvm-passes`` reports its progress: a plain line every few seconds when piped, none with
``--quiet`` or ``--json``, and the last line is the search's final state."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

BENCH = "benchmark://perftune-v0/crc32"
LINE = re.compile(r"^perftune llvm-passes: (\d+)(?:/(\d+))? trials, (\d+) failed, "
                  r"(?:best (\d+) instructions|no success yet), \d+:\d\d elapsed, (.*)$")


@pytest.fixture(autouse=True)
def _tools() -> None:
    if shutil.which("opt-14") is None or shutil.which("clang-14") is None:
        pytest.skip("needs opt-14 and clang-14 (apt-get install clang-14 llvm-14)")


def _llvm_passes(*args: str) -> subprocess.CompletedProcess[str]:
    # A real process with stdout and stderr piped: the progress line must know it is not on a terminal.
    # Short sequences: with one opt process per pass, an evaluation of 160 passes takes seconds.
    proc = subprocess.run([sys.executable, "-m", "perftune", "llvm-passes", BENCH, "--engine", "opt",
                           "--length", "6", "--no-run", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def _progress(stderr: str) -> list[re.Match[str]]:
    return [m for m in (LINE.match(line) for line in stderr.splitlines()) if m]


def test_a_piped_run_prints_plain_progress_lines_that_end_with_the_final_state() -> None:
    proc = _llvm_passes("--budget", "3s", "--progress-every", "0.5")
    lines = _progress(proc.stderr)
    assert len(lines) >= 2, proc.stderr
    assert "\r" not in proc.stderr  # plain lines off a terminal, not a line rewritten in place
    counts = [int(m[1]) for m in lines]
    assert counts == sorted(counts) and counts[0] > 0
    bests = [int(m[4]) for m in lines if m[4]]
    assert bests and bests == sorted(bests, reverse=True)  # the best only improves
    assert all(re.search(r"left(, \S+/(s|min))?$", m[5]) for m in lines)  # a time budget: the time left
    evaluated = int(re.search(r": (\d+) evaluations in", proc.stdout)[1])  # type: ignore[index]
    assert counts[-1] == evaluated  # the last line is the final state
    found = int(re.search(r"found (\d+)", proc.stdout)[1])  # type: ignore[index]
    assert bests[-1] <= found


def test_an_evaluation_budget_shows_done_of_n_and_an_eta() -> None:
    proc = _llvm_passes("--budget", "30", "--budget", "60s", "--progress-every", "0.3")
    lines = _progress(proc.stderr)
    assert lines, proc.stderr
    assert all(m[2] == "30" for m in lines)
    assert all("ETA" in m[5] for m in lines)
    evaluated = int(re.search(r": (\d+) evaluations in", proc.stdout)[1])  # type: ignore[index]
    assert int(lines[-1][1]) == evaluated >= 30  # the search used its 30 (validation may add a few)


@pytest.mark.parametrize("flag", ["--quiet", "--json"])
def test_quiet_and_json_print_no_progress(flag: str) -> None:
    proc = _llvm_passes("--budget", "2s", "--progress-every", "0.2", flag)
    assert _progress(proc.stderr) == [] and "llvm-passes:" not in proc.stderr
    if flag == "--json":
        assert json.loads(proc.stdout)["n_evaluations"] > 0


def test_the_line_starts_with_the_search_not_with_preparing_the_benchmark(monkeypatch, capsys) -> None:  # noqa: ANN001
    # Preparing (the helper's first build: 17 s on a fresh machine) is not the budget's: a line started
    # before it said "0:17 elapsed, 0:03 left" of a 20 s budget, and the search then ran 20 s more.
    import time

    from perftune.drive import ProgressSettings
    from perftune.targets.llvm import _cli, _tune
    from perftune.targets.llvm._errors import LlvmError

    def prepared_slowly(benchmark, *, on_evaluation, **kwargs):  # noqa: ANN001, ANN003, ANN202
        time.sleep(2.2)  # the preparation
        on_evaluation(1, 100, 0)  # the search's first evaluation
        time.sleep(0.3)
        on_evaluation(2, 90, 0)  # a plain line is due (every 0.1 s)
        raise LlvmError("stop here")  # the test needs no result

    monkeypatch.setattr(_tune, "tune_passes", prepared_slowly)
    with pytest.raises(LlvmError):
        _cli.llvm_passes(BENCH, seconds=3.0, search="perftune", length=6, engine="opt", run=False,
                         as_json=False, seed=0, emit_json=print, echo=print,
                         progress=ProgressSettings(every_s=0.1, tty=False))
    err = capsys.readouterr().err
    lines = _progress(err)
    assert lines and all(" 0:00 elapsed, 0:03 left" in m[0] for m in lines), err
