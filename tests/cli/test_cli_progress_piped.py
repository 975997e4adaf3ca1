"""``perftune run`` with its output piped: periodic plain progress lines, and an ETA that holds."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

TASK = """name = "steady"
[space]
x = { type = "int", min = 0, max = 1000 }
[run]
command = ["sleep", "0.2"]
[objective]
metric = "wall_time"
goal = "min"
[timing]
repeats = 1
warmup_runs = 0
"""

_LINE = re.compile(r"perftune: (\d+)/(\d+) trials, (\d+) failed, (best \S+|no success yet), "
                   r"(\d+):(\d\d) elapsed, ETA (\d+):(\d\d)")


@pytest.mark.slow
def test_piped_run_prints_periodic_lines_and_an_eta_within_20_percent(public_tmp_path: Path) -> None:
    task = public_tmp_path / "steady.toml"
    task.write_text(TASK)
    task.chmod(0o644)
    exe = Path(sys.executable).with_name("perftune")
    cmd = [str(exe), "--store", str(public_tmp_path / "p.db"), "run", str(task), "--budget", "80",
           "--progress-every", "1", "--seed", "0"]
    started = time.monotonic()
    seen: list[tuple[float, re.Match[str]]] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        for raw in proc.stderr:
            m = _LINE.search(raw)
            if m:
                seen.append((time.monotonic(), m))
        out = proc.stdout.read()
        assert proc.wait(timeout=120) == 0, out
    finished = time.monotonic()
    assert "run steady" in out and "80 trials" in out
    # One plain line a second (not a bar: nothing is rewritten), then the final state.
    assert len(seen) >= 4, [m.group(0) for _, m in seen]
    counts = [int(m.group(1)) for _, m in seen]
    assert counts == sorted(counts) and counts[-1] == 80 and all(int(m.group(2)) == 80 for _, m in seen)
    # The ETA printed around the middle of the run, against when the run really ended.
    _, middle = min(seen, key=lambda s: abs(int(s[1].group(1)) - 40))
    when = next(t for t, m in seen if m is middle)
    predicted = int(middle.group(7)) * 60 + int(middle.group(8))
    actual = finished - when
    assert started < when < finished
    assert abs(predicted - actual) <= 0.2 * actual, (middle.group(0), actual)


def test_quiet_silences_the_progress(public_tmp_path: Path) -> None:
    task = public_tmp_path / "steady.toml"
    task.write_text(TASK)
    task.chmod(0o644)
    exe = Path(sys.executable).with_name("perftune")
    done = subprocess.run([str(exe), "--store", str(public_tmp_path / "q.db"), "run", str(task),
                           "--budget", "8",
                           "--progress-every", "0.1", "--quiet"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "trials," not in done.stderr and "run steady" in done.stdout
