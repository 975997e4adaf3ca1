"""``llvm-passes --budget``: the budget covers the search and the validation of its candidates.

The elapsed time of the call is the behaviour under test; the budgets are a couple of seconds.
"""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.targets.llvm import tune_passes

ALLOWANCE_S = 3.0  # the last evaluation, one validation (opt replay, build and run), on 2 shared cores


@pytest.mark.parametrize("search", ["perftune", "random", "greedy"])
def test_search_ends_within_its_seconds(search: str) -> None:
    started = time.monotonic()
    result = tune_passes("benchmark://perftune-v0/crc32", seconds=2, search=search, seed=1)
    assert time.monotonic() - started < 2.0 + ALLOWANCE_S
    assert result.validation.ok and result.count_result < result.count_start


def test_validation_of_more_candidates_stops_at_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.targets.llvm import _validate

    real = _validate.validate_actions
    calls: list[int] = []

    def slow_and_failing(bench, actions, count, *, run=True):  # type: ignore[no-untyped-def]
        # Every candidate "miscompiles" and takes a second to find out: before the budget bounded
        # it, the validation tried up to 8 candidates and 4 repairs after the search, 12 s or more.
        calls.append(len(actions))
        time.sleep(1.0)
        result = real(bench, actions, count, run=False)
        result.ok = False
        result.errors = ["output differs from the -O0 build (simulated)"]
        return result

    monkeypatch.setattr(_validate, "validate_actions", slow_and_failing)
    started = time.monotonic()
    result = tune_passes("benchmark://perftune-v0/crc32", seconds=2, seed=1)
    elapsed = time.monotonic() - started
    # The best candidate and the fallback (the empty sequence) are validated, nothing more.
    assert elapsed < 2.0 + 2 * 1.0 + ALLOWANCE_S
    assert len(calls) <= 3
    assert any("time budget ran out" in note for note in result.notes)
    assert result.to_json()["notes"] == result.notes
    assert not result.validation.ok  # nothing validated, and the result says so


def test_cli_seconds_is_honoured_and_notes_are_in_the_json() -> None:
    started = time.monotonic()
    args = ["llvm-passes", "benchmark://perftune-v0/sieve", "--budget", "2s", "--json"]
    out = CliRunner().invoke(cli, args)
    assert time.monotonic() - started < 2.0 + ALLOWANCE_S
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["validated"] is True and isinstance(data["notes"], list)


def test_cli_seconds_still_works_with_a_one_line_deprecation_note() -> None:
    started = time.monotonic()
    args = ["llvm-passes", "benchmark://perftune-v0/sieve", "--seconds", "2", "--json"]
    out = CliRunner().invoke(cli, args)
    assert time.monotonic() - started < 2.0 + ALLOWANCE_S
    assert out.exit_code == 0, out.output
    assert out.stderr == "perftune: note: --seconds is deprecated; use --budget 2s\n"
    assert json.loads(out.stdout)["validated"] is True


@pytest.mark.parametrize(("args", "expected"), [
    ([], {"seconds": 60.0, "evals": None}),
    (["--budget", "12"], {"seconds": 60.0, "evals": 12}),
    (["--budget", "12", "--budget", "20s"], {"seconds": 20.0, "evals": 12}),
    (["--budget", "1m", "--seconds", "30"], {"seconds": 30.0, "evals": None}),
    (["--budget", "10s", "--seconds", "30"], {"seconds": 10.0, "evals": None}),
])
def test_cli_budget_reaches_the_search(monkeypatch: pytest.MonkeyPatch, args: list[str],
                                       expected: dict[str, object]) -> None:
    from perftune.targets.llvm import _tune

    got: dict[str, object] = {}

    class Stop(Exception):
        pass

    def fake_tune_passes(benchmark: str, **kwargs: object) -> None:
        got.update(seconds=kwargs["seconds"], evals=kwargs["evals"])
        raise Stop

    monkeypatch.setattr(_tune, "tune_passes", fake_tune_passes)
    out = CliRunner().invoke(cli, ["llvm-passes", "benchmark://perftune-v0/sieve", *args])
    assert isinstance(out.exception, Stop) and got == expected


def test_cli_bad_budget_is_one_line() -> None:
    out = CliRunner().invoke(cli, ["llvm-passes", "benchmark://perftune-v0/sieve", "--budget", "soon"])
    assert out.exit_code == 2 and out.output.count("\n") == 1
    assert out.output.startswith("perftune: error: --budget 'soon'")
