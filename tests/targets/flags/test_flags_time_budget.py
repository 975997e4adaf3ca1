"""A time budget of the flags target covers the whole call: checks, search and the steps after it.

The elapsed time of the run is the behaviour under test here; the budgets are a few seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune import Status
from perftune.errors import PerftuneError
from perftune.store import open_store
from perftune.targets.flags import tune_flags

DATA = Path(__file__).resolve().parent / "data"
SLOW = str(DATA / "slow.c")
KAHAN = str(DATA / "kahan.c")
ALLOWANCE_S = 3.0  # the last sandboxed step being stopped, scratch clean-up, on 2 shared cores


@pytest.mark.parametrize("workers", [1, 2])
def test_slow_candidate_in_flight_is_cancelled_at_the_time_budget(gcc_info, tmp_path, workers) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 's.db'}"
    started = time.monotonic()
    # Every run sleeps 0.4 s and a candidate takes at least five runs: the budget runs out mid-candidate.
    result = tune_flags([SLOW], "400", budget="4s", info=gcc_info, include_params=False, store=url,
                        workers=workers)
    elapsed = time.monotonic() - started
    assert elapsed < 4.0 + ALLOWANCE_S
    assert result.n_cancelled >= 1 and any("cancelled" in note for note in result.notes)
    store = open_store(url)
    trials = store.trials(result.run_id)
    cancelled = [t for t in trials if t.status is Status.CANCELLED]
    assert len(cancelled) == result.n_cancelled
    assert all(t.reason == "time budget reached" for t in cancelled)
    assert result.flags == ["-O3"]  # nothing was confirmed faster than -O3


def test_cli_flags_task_ends_within_its_time_budget(gcc_info, public_tmp_path, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perftune.cli import cli

    # The program runs in the task file's folder, as the sandbox's unprivileged user.
    task = public_tmp_path / "task.toml"
    task.write_text(f'[target]\nkind = "flags"\nsources = ["{KAHAN}"]\nrun = ["20000", "40"]\n'
                    "params = false\n")
    started = time.monotonic()
    res = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(task), "--budget", "6s",
                                   "--json"])
    elapsed = time.monotonic() - started
    assert res.exit_code == 0, res.output
    data = json.loads(res.output[res.output.index("{"):])
    assert elapsed < 6.0 + ALLOWANCE_S
    assert data["n_trials"] >= 1
    # Whatever the time cut, the answer is never slower than -O3 as measured.
    assert data["speedup_over_O3"] >= 1.0 or data["flags"] == ["-O3"]


def test_budget_spent_by_the_checks_before_the_search_is_one_line(gcc_info) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    # Each run sleeps 3 s: the -O2 reference (a build and two runs) cannot fit in 2 s.
    with pytest.raises(PerftuneError, match=r"the 2 s budget ran out while checking the program at -O2"):
        tune_flags([SLOW], "3000", budget="2s", info=gcc_info, include_params=False)
    assert time.monotonic() - started < 2.0 + ALLOWANCE_S
